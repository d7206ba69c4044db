//! Scenarios of the in-process router itself: discovery per hub id, partitions, crashes and
//! restarts with new boot tokens, drops, delays and undecodable frames.

use super::*;
use crate::cluster::wire::{self, WireMsg};
use std::time::Instant;

#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<TransportEvent>>>);

impl Recorder {
    fn sink(&self) -> EventSink {
        let events = self.0.clone();
        Arc::new(move |e| events.lock().unwrap().push(e))
    }
    fn take(&self) -> Vec<TransportEvent> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
    fn ups(&self) -> BTreeMap<NodeName, BootToken> {
        self.take()
            .into_iter()
            .filter_map(|e| match e {
                TransportEvent::NodeUp { node, boot_token } => Some((node, boot_token)),
                _ => None,
            })
            .collect()
    }
}

fn down(node: &str) -> TransportEvent {
    TransportEvent::NodeDown {
        node: node.to_owned(),
    }
}

struct Hub {
    net: InProcessNode,
    rec: Recorder,
    transport: Arc<dyn Transport>,
}

fn open(net: &InProcessNode, hub: &str) -> Hub {
    let rec = Recorder::default();
    let transport = net.open_hub(hub, rec.sink()).unwrap();
    Hub {
        net: net.clone(),
        rec,
        transport,
    }
}

fn three(cluster: &InProcessCluster) -> Vec<Hub> {
    ["a", "b", "c"]
        .iter()
        .map(|n| open(&cluster.add_node(*n).unwrap(), "h"))
        .collect()
}

#[test]
fn hubs_of_one_id_discover_each_other_with_boot_tokens() {
    let cluster = InProcessCluster::new(1);
    let hubs = three(&cluster);
    let other = open(&cluster.add_node("d").unwrap(), "other-hub");
    for hub in &hubs {
        let ups = hub.rec.ups();
        let me = hub.transport.local_node();
        assert_eq!(ups.len(), 2, "{me} saw {ups:?}");
        for h in &hubs {
            if h.transport.local_node() != me {
                assert_eq!(ups[h.transport.local_node()], h.net.boot_token());
            }
        }
        assert_eq!(hub.transport.peers().len(), 2);
    }
    assert!(other.rec.take().is_empty());
    assert!(other.transport.peers().is_empty());
    assert_eq!(
        cluster.add_node("a").unwrap_err(),
        RouterError::NodeExists("a".into())
    );
}

#[test]
fn messages_arrive_in_order_with_their_sender() {
    let cluster = InProcessCluster::new(2);
    let hubs = three(&cluster);
    hubs[1].rec.take();
    for i in 0..10 {
        hubs[0]
            .transport
            .send(
                &"b".to_owned(),
                &WireMsg::ChildCast {
                    id: format!("c{i}").into(),
                    payload: vec![i],
                    hops: 0,
                },
            )
            .unwrap();
    }
    let got: Vec<u8> = hubs[1]
        .rec
        .take()
        .into_iter()
        .map(|e| match e {
            TransportEvent::Message {
                from,
                msg: WireMsg::ChildCast { payload, .. },
            } => {
                assert_eq!(from, "a");
                payload[0]
            }
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(got, (0..10).collect::<Vec<u8>>());
    hubs[0].rec.take();
    assert_eq!(
        hubs[0]
            .transport
            .send(&"a".to_owned(), &WireMsg::SyncRequest),
        Err(TransportError::Unreachable("a".into())),
        "a node does not message itself through the network"
    );
    let failures = hubs[2].transport.broadcast(&WireMsg::SyncRequest).unwrap();
    assert!(failures.is_empty());
    assert_eq!(hubs[0].rec.take().len(), 1);
    assert_eq!(cluster.stats().delivered, 12);
}

#[test]
fn partition_and_heal() {
    let cluster = InProcessCluster::new(3);
    let hubs = three(&cluster);
    hubs.iter().for_each(|h| drop(h.rec.take()));
    cluster.partition(&[vec!["a".into()], vec!["b".into(), "c".into()]]);
    let mut a_events = hubs[0].rec.take();
    a_events.sort_by_key(|e| format!("{e:?}"));
    assert_eq!(a_events, vec![down("b"), down("c")]);
    assert_eq!(hubs[1].rec.take(), vec![down("a")]);
    assert_eq!(hubs[2].rec.take(), vec![down("a")]);
    assert_eq!(
        hubs[0]
            .transport
            .send(&"b".to_owned(), &WireMsg::SyncRequest),
        Err(TransportError::Unreachable("b".into()))
    );
    hubs[1]
        .transport
        .send(&"c".to_owned(), &WireMsg::SyncRequest)
        .unwrap();
    assert_eq!(hubs[2].rec.take().len(), 1);
    assert_eq!(hubs[0].transport.peers(), Vec::<NodeName>::new());

    cluster.heal();
    let ups = hubs[0].rec.ups();
    assert_eq!(ups["b"], hubs[1].net.boot_token(), "a flap keeps the token");
    assert_eq!(ups["c"], hubs[2].net.boot_token());
    assert_eq!(hubs[1].rec.ups().len(), 1);
    // Healing twice announces nothing new.
    cluster.heal();
    assert!(hubs[0].rec.take().is_empty());
}

#[test]
fn a_link_cut_one_way_loses_that_way_and_only_its_receiver_sees_the_sender_down() {
    let cluster = InProcessCluster::new(9);
    let hubs = three(&cluster);
    hubs.iter().for_each(|h| drop(h.rec.take()));
    cluster.cut_one_way("a", "b");
    assert_eq!(hubs[1].rec.take(), vec![down("a")], "b no longer hears a");
    assert!(hubs[0].rec.take().is_empty(), "a still hears b");
    assert!(hubs[2].rec.take().is_empty());
    assert!(cluster.hears("a", "b") && !cluster.hears("b", "a"));
    assert_eq!(
        hubs[0].transport.peers(),
        vec!["b".to_owned(), "c".to_owned()]
    );
    assert_eq!(hubs[1].transport.peers(), vec!["c".to_owned()]);
    // a's frames to b are lost (a cannot tell); b's to a arrive.
    hubs[0]
        .transport
        .send(&"b".to_owned(), &WireMsg::SyncRequest)
        .unwrap();
    assert!(hubs[1].rec.take().is_empty());
    hubs[1]
        .transport
        .send(&"a".to_owned(), &WireMsg::SyncRequest)
        .unwrap();
    assert_eq!(hubs[0].rec.take().len(), 1);
    cluster.heal_one_way("a", "b");
    assert_eq!(hubs[1].rec.ups().get("a"), Some(&hubs[0].net.boot_token()));
    assert!(hubs[0].rec.take().is_empty());
    // A heal restores one-way cuts too.
    cluster.cut_one_way("c", "a");
    assert_eq!(hubs[0].rec.take(), vec![down("c")]);
    cluster.heal();
    assert_eq!(hubs[0].rec.ups().len(), 1);
    assert!(cluster.hears("a", "c"));
}

#[test]
fn crash_and_restart_with_a_new_token() {
    let cluster = InProcessCluster::new(4);
    let mut hubs = three(&cluster);
    hubs.iter().for_each(|h| drop(h.rec.take()));
    let old_token = hubs[1].net.boot_token();
    cluster.crash("b").unwrap();
    assert!(!cluster.is_alive("b"));
    assert_eq!(hubs[0].rec.take(), vec![down("b")]);
    assert_eq!(hubs[2].rec.take(), vec![down("b")]);
    assert!(
        hubs[1].rec.take().is_empty(),
        "a crashed node hears nothing"
    );
    assert_eq!(
        hubs[1]
            .transport
            .send(&"a".to_owned(), &WireMsg::SyncRequest),
        Err(TransportError::Closed)
    );
    assert!(matches!(
        hubs[1].net.open_hub("h", Recorder::default().sink()),
        Err(TransportError::Closed)
    ));
    assert!(matches!(
        cluster.restart("a"),
        Err(RouterError::NodeRunning(_))
    ));

    let reborn = cluster.restart("b").unwrap();
    assert_ne!(reborn.boot_token(), old_token);
    // The stale transport of the previous life closing must not disturb anyone.
    let stale = std::mem::replace(&mut hubs[1], open(&reborn, "h"));
    drop(stale);
    let ups = hubs[0].rec.ups();
    assert_eq!(ups.get("b"), Some(&reborn.boot_token()));
    assert_eq!(hubs[1].rec.ups().len(), 2);
    assert!(hubs[2]
        .rec
        .take()
        .iter()
        .all(|e| !matches!(e, TransportEvent::NodeDown { .. })));
}

#[test]
fn closing_a_hub_is_seen_as_node_down_and_reopen_replaces() {
    let cluster = InProcessCluster::new(5);
    let mut hubs = three(&cluster);
    hubs.iter().for_each(|h| drop(h.rec.take()));
    // Re-opening the same hub id replaces the endpoint silently for peers.
    let replacement = open(&hubs[2].net, "h");
    assert_eq!(replacement.rec.ups().len(), 2);
    assert!(hubs[0].rec.take().is_empty());
    let old = std::mem::replace(&mut hubs[2], replacement);
    drop(old); // inert: the replacement is current
    assert!(hubs[0].rec.take().is_empty());
    let c = hubs.pop().unwrap();
    drop(c);
    assert_eq!(hubs[0].rec.take(), vec![down("c")]);
}

#[test]
fn seeded_drops_are_reproducible() {
    let run = |seed| {
        let cluster = InProcessCluster::new(seed);
        let hubs = three(&cluster);
        cluster.set_drop_probability(0.5);
        for _ in 0..200 {
            hubs[0]
                .transport
                .send(&"b".to_owned(), &WireMsg::SyncRequest)
                .unwrap();
        }
        cluster.stats()
    };
    let first = run(9);
    assert_eq!(first, run(9));
    assert!(
        first.dropped_random > 50 && first.delivered > 50,
        "{first:?}"
    );
    assert_eq!(first.dropped_random + first.delivered, 200);
}

#[test]
fn undecodable_frames_are_dropped() {
    let cluster = InProcessCluster::new(6);
    let hubs = three(&cluster);
    hubs[1].rec.take();
    cluster
        .inject_frame("h", "a", "b", vec![0xde, 0xad, 0xbe, 0xef])
        .unwrap();
    let other_hub = wire::encode("other", "a", &WireMsg::SyncRequest).unwrap();
    cluster.inject_frame("h", "a", "b", other_hub).unwrap();
    let spoofed = wire::encode("h", "c", &WireMsg::SyncRequest).unwrap();
    cluster.inject_frame("h", "a", "b", spoofed).unwrap();
    assert!(hubs[1].rec.take().is_empty());
    assert_eq!(cluster.stats().undecodable, 3);
    // The hub still works afterwards.
    hubs[0]
        .transport
        .send(&"b".to_owned(), &WireMsg::SyncRequest)
        .unwrap();
    assert_eq!(hubs[1].rec.take().len(), 1);
}

#[tokio::test]
async fn delayed_frames_keep_their_order_and_die_with_the_link() {
    let cluster = InProcessCluster::new(7);
    let hubs = three(&cluster);
    hubs[1].rec.take();
    cluster.set_delay(Some((Duration::from_millis(1), Duration::from_millis(20))));
    for i in 0..20u8 {
        hubs[0]
            .transport
            .send(
                &"b".to_owned(),
                &WireMsg::ChildCast {
                    id: "x".into(),
                    payload: vec![i],
                    hops: 0,
                },
            )
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got = Vec::new();
    while got.len() < 20 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
        for e in hubs[1].rec.take() {
            if let TransportEvent::Message {
                msg: WireMsg::ChildCast { payload, .. },
                ..
            } = e
            {
                got.push(payload[0]);
            }
        }
    }
    assert_eq!(got, (0..20).collect::<Vec<u8>>());

    // Frames in flight when the receiver crashes are lost, not delivered to its next life.
    cluster.set_delay(Some((Duration::from_millis(50), Duration::from_millis(50))));
    hubs[0]
        .transport
        .send(&"b".to_owned(), &WireMsg::SyncRequest)
        .unwrap();
    cluster.crash("b").unwrap();
    let reborn = open(&cluster.restart("b").unwrap(), "h");
    let deadline = Instant::now() + Duration::from_secs(10);
    while cluster.stats().dropped_in_flight == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(cluster.stats().dropped_in_flight, 1);
    assert!(reborn
        .rec
        .take()
        .iter()
        .all(|e| !matches!(e, TransportEvent::Message { .. })));
}

#[test]
fn held_frames_arrive_when_released_in_order_or_never() {
    let cluster = InProcessCluster::new(12);
    let hubs = three(&cluster);
    hubs[1].rec.take();
    hubs[2].rec.take();
    cluster.hold_frames(Some(Arc::new(|_, to: &str, msg: &WireMsg| {
        to == "b" && matches!(msg, WireMsg::SyncRequest | WireMsg::Goodbye)
    })));
    let send = |to: &str, msg: WireMsg| hubs[0].transport.send(&to.to_owned(), &msg).unwrap();
    send("b", WireMsg::SyncRequest);
    send("b", WireMsg::Goodbye);
    send("c", WireMsg::SyncRequest);
    send("b", WireMsg::DeclaredVersionQuery);
    // Only the matching frames wait; the others go through.
    assert_eq!(cluster.held_frames(), 2);
    assert_eq!(hubs[2].rec.take().len(), 1);
    let early = hubs[1].rec.take();
    assert!(
        matches!(
            &early[..],
            [TransportEvent::Message {
                msg: WireMsg::DeclaredVersionQuery,
                ..
            }]
        ),
        "{early:?}"
    );
    cluster.hold_frames(None);
    send("b", WireMsg::SyncRequest);
    assert_eq!(hubs[1].rec.take().len(), 1, "no longer held");
    assert_eq!(cluster.release_held(), 2);
    let late: Vec<WireMsg> = hubs[1]
        .rec
        .take()
        .into_iter()
        .filter_map(|e| match e {
            TransportEvent::Message { msg, .. } => Some(msg),
            _ => None,
        })
        .collect();
    assert!(
        matches!(&late[..], [WireMsg::SyncRequest, WireMsg::Goodbye]),
        "{late:?}"
    );
    // A held frame whose receiver crashed meanwhile is lost.
    cluster.hold_frames(Some(Arc::new(|_, _, _| true)));
    send("c", WireMsg::SyncRequest);
    cluster.crash("c").unwrap();
    assert_eq!(cluster.release_held(), 0);
    send("b", WireMsg::SyncRequest);
    assert_eq!(cluster.discard_held(), 1);
    assert_eq!(hubs[1].rec.take(), vec![down("c")], "no message reached b");
}

#[test]
fn a_sink_that_drops_a_hubs_last_handle_closes_it_once_the_lock_is_released() {
    // b's sink holds c's only handle and lets go of it when it hears that a went down: the
    // close happens while the router delivers under its lock. It must neither deadlock nor be
    // lost: b and then hears that c went down too.
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let cluster = InProcessCluster::new(9);
        let a = open(&cluster.add_node("a").unwrap(), "h");
        let c_net = cluster.add_node("c").unwrap();
        let c_slot: Arc<Mutex<Option<Arc<dyn Transport>>>> = Arc::new(Mutex::new(None));
        let rec = Recorder::default();
        let slot = c_slot.clone();
        let record = rec.sink();
        let sink: EventSink = Arc::new(move |event| {
            if event == down("a") {
                drop(slot.lock().unwrap().take());
            }
            record(event);
        });
        let _b = cluster.add_node("b").unwrap().open_hub("h", sink).unwrap();
        *c_slot.lock().unwrap() = Some(c_net.open_hub("h", Recorder::default().sink()).unwrap());
        rec.take();
        drop(a);
        let _ = done.send(rec.take());
    });
    let events = finished
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("no deadlock");
    assert_eq!(events, vec![down("a"), down("c")]);
}
