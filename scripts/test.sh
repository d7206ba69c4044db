#!/usr/bin/env bash
# Runs every test of the workspace. This is the command README.md gives and .ci/run calls.
# It installs and starts whatever the tests need, so it works on a fresh machine that has only
# the Rust toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "==> building the workspace (tests and binaries)" >&2
cargo build --workspace --all-targets

echo "==> running the test suite" >&2
cargo test --workspace --all-targets
