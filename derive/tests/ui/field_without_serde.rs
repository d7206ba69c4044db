// The library's codec, compiled into this case as `process_hub::__private` (the same source
// file the library compiles): the case then needs ractor and serde, not a build of the whole
// library in trybuild's own target directory.
extern crate self as process_hub;
#[path = "../../../src/api/child_codec.rs"]
mod child_codec;
pub mod __private {
    pub use crate::child_codec::*;
    pub use ractor;
}

// A message whose fields must cross nodes: `Player` is not a serde type, so neither the field
// holding it nor the answer of the `#[rpc]` variant can be encoded. Each error names the field.
use process_hub_derive::ChildMessage;
use ractor::RpcReplyPort;

struct Player {
    name: String,
}

#[derive(ChildMessage)]
enum TeamMsg {
    Join(Vec<Player>),
    Rename { from: String, to: String },
    #[rpc]
    Best(RpcReplyPort<Player>),
}

fn main() {
    let _ = TeamMsg::Join(vec![Player { name: "ana".into() }]);
}
