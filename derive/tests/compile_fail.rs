//! What a user sees when a `#[derive(ChildMessage)]` field cannot cross the wire: the compiler
//! names the field and says it needs serde's `Serialize` and `Deserialize` (the expected
//! messages are the `.stderr` files beside each case in `tests/ui/`).
//!
//! trybuild checks the cases in a project of its own under `target/tests/trybuild`, with this
//! crate's dev-dependencies. Each case compiles the library's codec from its source file as
//! `process_hub::__private`, so the project checks ractor and serde rather than the whole
//! library's dependency tree; its first run checks them once, later runs reuse that.

#[test]
fn a_field_that_cannot_cross_the_wire_is_named_at_the_field() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
