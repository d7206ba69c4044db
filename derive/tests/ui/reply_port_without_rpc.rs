// A variant with a reply port is a call: without `#[rpc]` the derive says so at the port.
use process_hub_derive::ChildMessage;
use ractor::RpcReplyPort;

#[derive(ChildMessage)]
enum CounterMsg {
    Add(i64),
    Get(RpcReplyPort<i64>),
}

fn main() {}
