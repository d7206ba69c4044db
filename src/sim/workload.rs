//! The operations of a run: requests a user makes and faults the world makes, drawn from the
//! run's seeded generator with weights that keep a cluster busy and broken in turns.

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::Rng;

use super::partial::PartialFault;
use super::trace::short;
use crate::cluster::in_process::LinkFaults;
use crate::model::{ChildId, NodeName};

/// The most nodes a run grows to.
pub const MAX_NODES: usize = 5;

/// One step of a run.
#[derive(Clone, Debug)]
pub enum Op {
    /// Start children (plain, or `durable`) through a node.
    Start {
        /// The node asked.
        node: NodeName,
        /// The children (new ids).
        ids: Vec<ChildId>,
        /// With `durable: true`.
        durable: bool,
        /// Guided placement: every child of the start on this node, and whether the ring may
        /// place them when it is gone.
        guided: Option<(NodeName, bool)>,
    },
    /// Stop a child through a node.
    Stop {
        /// The node asked.
        node: NodeName,
        /// The child.
        id: ChildId,
        /// It was started durably.
        durable: bool,
    },
    /// Call a child by id through a node (and wait for its answer).
    CallChild {
        /// The node asked.
        node: NodeName,
        /// The child.
        id: ChildId,
    },
    /// Cast to a child by id through a node.
    CastChild {
        /// The node asked.
        node: NodeName,
        /// The child.
        id: ChildId,
    },
    /// Call a child through a typed reference made on a node (and wait for its answer).
    TypedCall {
        /// The node the reference is made on.
        node: NodeName,
        /// The child.
        id: ChildId,
    },
    /// Cast a numbered note to a child through a typed reference made on a node.
    TypedCast {
        /// The node the reference is made on.
        node: NodeName,
        /// The child.
        id: ChildId,
    },
    /// Monitor a child from a node; with `cancel`, demonitor it right after.
    Monitor {
        /// The node the monitor is set on.
        node: NodeName,
        /// The child.
        id: ChildId,
        /// Demonitor it at once.
        cancel: bool,
    },
    /// One of a hub's own actors fails (its HubSupervisor restarts it).
    FailActor {
        /// The node.
        node: NodeName,
        /// Which actor: `registry`, `child_supervisor`, `coordinator`, `declared_leader` or
        /// `reconciler`.
        actor: &'static str,
    },
    /// Make a running child fail (its supervisor restarts it).
    FailChild {
        /// The child.
        id: ChildId,
    },
    /// Every node crashes at once, then every node restarts on its disk.
    Outage,
    /// A node crashes (memory gone, disk kept).
    Crash {
        /// The node.
        node: NodeName,
    },
    /// A crashed or departed node comes back, on its disk or an empty one.
    Restart {
        /// The node.
        node: NodeName,
        /// Its disk is lost.
        lose_disk: bool,
    },
    /// A new node joins.
    Join {
        /// The new node.
        node: NodeName,
    },
    /// A node leaves gracefully.
    Leave {
        /// The node.
        node: NodeName,
    },
    /// Several nodes leave gracefully at once.
    LeaveTogether {
        /// The nodes.
        nodes: Vec<NodeName>,
    },
    /// The nodes are split into groups.
    Partition {
        /// The groups (every link between two groups is cut).
        groups: Vec<Vec<NodeName>>,
    },
    /// The link between two nodes is cut, both ways; each still reaches the others (a partial
    /// partition: the nodes no longer agree on who is up).
    Cut {
        /// One end.
        a: NodeName,
        /// The other end.
        b: NodeName,
    },
    /// Every link is restored and every link fault cleared.
    Heal,
    /// One directed link drops, delays or reorders.
    FaultLink {
        /// The sender.
        from: NodeName,
        /// The receiver.
        to: NodeName,
        /// What goes wrong.
        faults: LinkFaults,
    },
    /// Every link drops frames for the length of the step.
    DropBurst {
        /// The chance each frame is lost.
        probability: f64,
    },
    /// A node's disk gets slow (or fast again with zero).
    SlowDisk {
        /// The node.
        node: NodeName,
        /// How long each write waits.
        latency_ms: u64,
    },
    /// The disk of a node's declared list fills up (every write fails with "no space") or gets
    /// space back. (The simulated registry disk never fails a write: the simulated registry
    /// does not roll its memory back as the real `durable` backend does.)
    FullDisk {
        /// The node.
        node: NodeName,
        /// Full, or space again.
        full: bool,
    },
    /// A node's wall clock jumps.
    SkewClock {
        /// The node.
        node: NodeName,
        /// How far from true time it reads.
        skew_ms: i64,
    },
    /// A hostile peer: `to` receives a frame claiming to come from `from` (a member that is
    /// up) that no healthy node sends.
    Hostile {
        /// The node the frame claims to come from.
        from: NodeName,
        /// The node that receives it.
        to: NodeName,
        /// What the frame carries.
        frame: HostileFrame,
    },
    /// A partial fault strikes (the run's own draws, `sim::partial`).
    Partial {
        /// The fault.
        fault: PartialFault,
    },
    /// A partial fault heals.
    EndPartial {
        /// The fault.
        fault: PartialFault,
    },
    /// Nothing happens but time.
    Idle,
}

/// What a hostile peer sends ([`Op::Hostile`]): sizes and versions no healthy node produces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostileFrame {
    /// A full sync part announcing `total` parts (up to `u32::MAX`).
    SyncPartTotal {
        /// The announced part count.
        total: u32,
    },
    /// A declared-list offer (an empty list) at `version`.
    OfferVersion {
        /// The offered version (`u64::MAX`, or far past any real copy).
        version: u64,
    },
    /// A declared-list summary at `version`, asking for the receiver's in return.
    SummaryVersion {
        /// The summarised version (`u64::MAX`, or far past any real copy).
        version: u64,
    },
    /// A declared-list delta whose target is `version`.
    DeltaVersion {
        /// The target version.
        version: u64,
    },
    /// A declared version announcement of `version`.
    AnnouncedVersion {
        /// The announced version.
        version: u64,
    },
    /// A registry delta upserting a row no API accepts: a 700-byte id, or metadata above the
    /// size a child may weigh.
    InvalidRow {
        /// The id is too long (else the metadata is too large).
        long_id: bool,
    },
    /// `len` bytes of garbage after the wire version, or a frame above the frame limit.
    Garbage {
        /// The frame's length.
        len: usize,
    },
    /// A frame in another node's name (`claimed`): an empty full sync (taken for `claimed`'s, it
    /// would remove its rows), a `Goodbye` (it would drop `claimed` from the ring) or the
    /// operator's clear of the declared list as a mutation from `claimed`.
    ForgedName {
        /// The node the frame's `from` names.
        claimed: NodeName,
        /// 0: empty full sync, 1: `Goodbye`, 2: declared-list clear.
        what: u8,
    },
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Start {
                node,
                ids,
                durable,
                guided,
            } => {
                write!(
                    f,
                    "start{} {:?} via {}",
                    if *durable { " durable" } else { "" },
                    ids.iter().map(ChildId::as_str).collect::<Vec<_>>(),
                    short(node)
                )?;
                match guided {
                    Some((on, fallback)) => write!(
                        f,
                        ", guided to {}{}",
                        short(on),
                        if *fallback { " (fallback)" } else { "" }
                    ),
                    None => Ok(()),
                }
            }
            Op::Stop { node, id, durable } => write!(
                f,
                "stop{} {id} via {}",
                if *durable { " durable" } else { "" },
                short(node)
            ),
            Op::CallChild { node, id } => write!(f, "call {id} via {}", short(node)),
            Op::CastChild { node, id } => write!(f, "cast to {id} via {}", short(node)),
            Op::TypedCall { node, id } => write!(f, "typed call {id} via {}", short(node)),
            Op::TypedCast { node, id } => write!(f, "typed cast to {id} via {}", short(node)),
            Op::Monitor { node, id, cancel } => write!(
                f,
                "monitor {id} via {}{}",
                short(node),
                if *cancel { ", then demonitor" } else { "" }
            ),
            Op::FailActor { node, actor } => write!(f, "fail the {actor} of {}", short(node)),
            Op::FailChild { id } => write!(f, "fail child {id}"),
            Op::Outage => write!(f, "whole-cluster outage"),
            Op::Crash { node } => write!(f, "crash {}", short(node)),
            Op::Restart { node, lose_disk } => write!(
                f,
                "restart {}{}",
                short(node),
                if *lose_disk { " on an empty disk" } else { "" }
            ),
            Op::Join { node } => write!(f, "join {}", short(node)),
            Op::Leave { node } => write!(f, "leave {}", short(node)),
            Op::LeaveTogether { nodes } => {
                let nodes: Vec<&str> = nodes.iter().map(|n| short(n)).collect();
                write!(f, "leave together {nodes:?}")
            }
            Op::Partition { groups } => {
                let groups: Vec<Vec<&str>> = groups
                    .iter()
                    .map(|g| g.iter().map(|n| short(n)).collect())
                    .collect();
                write!(f, "partition {groups:?}")
            }
            Op::Cut { a, b } => write!(f, "cut {}-{}", short(a), short(b)),
            Op::Heal => write!(f, "heal"),
            Op::FaultLink { from, to, faults } => write!(
                f,
                "fault link {}->{}: drop {:.2} delay {:?} reorder {}",
                short(from),
                short(to),
                faults.drop_probability,
                faults.delay.map(|(a, b)| (a.as_millis(), b.as_millis())),
                faults.reorder
            ),
            Op::DropBurst { probability } => write!(f, "drop {probability:.2} of all frames"),
            Op::SlowDisk { node, latency_ms } => {
                write!(f, "disk of {} takes {latency_ms} ms", short(node))
            }
            Op::FullDisk { node, full } => {
                let what = if *full { "fills up" } else { "has space again" };
                write!(f, "declared disk of {} {what}", short(node))
            }
            Op::SkewClock { node, skew_ms } => {
                write!(f, "clock of {} skewed {skew_ms} ms", short(node))
            }
            Op::Hostile { from, to, frame } => {
                write!(f, "hostile frame {}->{}: {frame:?}", short(from), short(to))
            }
            Op::Partial { fault } => write!(f, "{fault}"),
            Op::EndPartial { fault } => write!(f, "heal {fault}"),
            Op::Idle => write!(f, "idle"),
        }
    }
}

/// What the workload knows of the run so far, to draw sensible operations.
pub struct WorldView<'a> {
    /// Nodes that are up.
    pub up: &'a [NodeName],
    /// Nodes that are down or left.
    pub down: &'a [NodeName],
    /// Every node ever added.
    pub all: usize,
    /// Plain children started (acknowledged), not stopped.
    pub plain: &'a BTreeSet<ChildId>,
    /// Durable children declared (acknowledged), not stopped.
    pub durable: &'a BTreeSet<ChildId>,
    /// Children running now.
    pub running: &'a BTreeSet<ChildId>,
    /// Splits may also be partial: one link cut, its two ends still reaching the others.
    pub partial_partitions: bool,
}

/// Draws operations.
pub struct Workload {
    next_child: usize,
    /// The most nodes a join may grow the run to.
    most_nodes: usize,
}

impl Workload {
    /// A workload that has named no child yet, in a run that grows to [`MAX_NODES`].
    pub fn new() -> Self {
        Self::growing_to(MAX_NODES)
    }

    /// A workload that has named no child yet, in a run whose joins stop at `most_nodes`
    /// (a run forced to boot more nodes than [`MAX_NODES`] still draws joins).
    pub fn growing_to(most_nodes: usize) -> Self {
        Self {
            next_child: 0,
            most_nodes,
        }
    }

    fn ids(&mut self, prefix: &str, n: usize) -> Vec<ChildId> {
        (0..n)
            .map(|_| {
                self.next_child += 1;
                ChildId::from(format!("{prefix}{}", self.next_child))
            })
            .collect()
    }

    /// The next operation.
    pub fn next(&mut self, rng: &mut StdRng, world: &WorldView<'_>) -> Op {
        let pick = |rng: &mut StdRng, from: &[NodeName]| from.choose(rng).cloned();
        for _ in 0..8 {
            let roll = rng.gen_range(0..100);
            let op = match roll {
                0..=15 => pick(rng, world.up).map(|node| {
                    let n = rng.gen_range(1..=4);
                    let guided = guide(rng, world.up);
                    Op::Start {
                        node,
                        ids: self.ids("c", n),
                        durable: false,
                        guided,
                    }
                }),
                16..=33 => pick(rng, world.up).map(|node| {
                    let n = rng.gen_range(1..=4);
                    let guided = guide(rng, world.up);
                    Op::Start {
                        node,
                        ids: self.ids("d", n),
                        durable: true,
                        guided,
                    }
                }),
                34..=40 => {
                    let plain: Vec<&ChildId> = world.plain.iter().collect();
                    match (pick(rng, world.up), plain.choose(rng)) {
                        (Some(node), Some(id)) => Some(Op::Stop {
                            node,
                            id: (*id).clone(),
                            durable: false,
                        }),
                        _ => None,
                    }
                }
                41..=49 => {
                    let durable: Vec<&ChildId> = world.durable.iter().collect();
                    match (pick(rng, world.up), durable.choose(rng)) {
                        (Some(node), Some(id)) => Some(Op::Stop {
                            node,
                            id: (*id).clone(),
                            durable: true,
                        }),
                        _ => None,
                    }
                }
                50..=52 => {
                    let running: Vec<&ChildId> = world.running.iter().collect();
                    running
                        .choose(rng)
                        .map(|id| Op::FailChild { id: (*id).clone() })
                }
                53..=58 => {
                    // Any child ever started, running or not (a message may find it gone).
                    let known: Vec<&ChildId> = world.plain.iter().chain(world.durable).collect();
                    match (pick(rng, world.up), known.choose(rng)) {
                        (Some(node), Some(id)) => Some(message(rng, node, (*id).clone())),
                        _ => None,
                    }
                }
                59..=65 => pick(rng, world.up).map(|node| Op::Crash { node }),
                66..=73 => pick(rng, world.down).map(|node| {
                    // A disk is lost only while most nodes are up to hand its copy back.
                    let lose_disk = world.up.len() * 2 > world.all && rng.gen_bool(0.3);
                    Op::Restart { node, lose_disk }
                }),
                74..=75 if world.all < self.most_nodes => Some(Op::Join {
                    node: format!("n{}@sim", world.all + 1),
                }),
                76..=77 if world.up.len() > 2 && rng.gen_bool(0.4) => {
                    let mut nodes = world.up.to_vec();
                    nodes.shuffle(rng);
                    nodes.truncate(2);
                    nodes.sort();
                    Some(Op::LeaveTogether { nodes })
                }
                76..=77 if world.up.len() > 1 => pick(rng, world.up).map(|node| Op::Leave { node }),
                78..=81 if world.partial_partitions && world.up.len() > 2 && rng.gen_bool(0.4) => {
                    let mut nodes = world.up.to_vec();
                    nodes.shuffle(rng);
                    Some(Op::Cut {
                        a: nodes[0].clone(),
                        b: nodes[1].clone(),
                    })
                }
                78..=81 if world.up.len() > 1 => {
                    // Any split into two or three groups of any sizes.
                    let mut nodes = world.up.to_vec();
                    nodes.shuffle(rng);
                    let count = rng.gen_range(2..=3.min(nodes.len()));
                    let mut groups: Vec<Vec<NodeName>> = vec![Vec::new(); count];
                    for (i, node) in nodes.into_iter().enumerate() {
                        let g = if i < count {
                            i
                        } else {
                            rng.gen_range(0..count)
                        };
                        groups[g].push(node);
                    }
                    Some(Op::Partition { groups })
                }
                82..=85 => Some(Op::Heal),
                86..=89 if world.up.len() > 1 => {
                    let mut nodes = world.up.to_vec();
                    nodes.shuffle(rng);
                    let delay = rng.gen_bool(0.7).then(|| {
                        let low = rng.gen_range(1..50);
                        (
                            Duration::from_millis(low),
                            Duration::from_millis(low + rng.gen_range(0..150)),
                        )
                    });
                    Some(Op::FaultLink {
                        from: nodes[0].clone(),
                        to: nodes[1].clone(),
                        faults: LinkFaults {
                            drop_probability: if rng.gen_bool(0.5) {
                                rng.gen_range(0.0..0.2)
                            } else {
                                0.0
                            },
                            delay,
                            reorder: rng.gen_bool(0.5),
                        },
                    })
                }
                98 => pick(rng, world.up).map(|node| Op::FailActor {
                    node,
                    actor: [
                        "registry",
                        "child_supervisor",
                        "coordinator",
                        "declared_leader",
                        "reconciler",
                    ][rng.gen_range(0..5)],
                }),
                90..=91 => Some(Op::DropBurst {
                    probability: rng.gen_range(0.05..0.3),
                }),
                94 => pick(rng, world.up).map(|node| Op::FullDisk {
                    node,
                    full: rng.gen_bool(0.6),
                }),
                92..=93 => pick(rng, world.up).map(|node| Op::SlowDisk {
                    node,
                    latency_ms: if rng.gen_bool(0.3) {
                        0
                    } else {
                        rng.gen_range(1..300)
                    },
                }),
                97 if !world.up.is_empty() => Some(Op::Outage),
                95..=96 => pick(rng, world.up).map(|node| Op::SkewClock {
                    node,
                    skew_ms: rng.gen_range(-600_000..600_000),
                }),
                99 if world.up.len() > 1 => {
                    let mut nodes = world.up.to_vec();
                    nodes.shuffle(rng);
                    let frame = match nodes.get(2) {
                        Some(claimed) if rng.gen_bool(0.3) => HostileFrame::ForgedName {
                            claimed: claimed.clone(),
                            what: rng.gen_range(0..3),
                        },
                        _ => hostile_frame(rng),
                    };
                    Some(Op::Hostile {
                        from: nodes[0].clone(),
                        to: nodes[1].clone(),
                        frame,
                    })
                }
                _ => Some(Op::Idle),
            };
            if let Some(op) = op {
                return op;
            }
        }
        Op::Idle
    }
}

/// Draws whether a start names its children's node (one in five): any node that is up, and
/// whether the ring may place them when it is gone.
fn guide(rng: &mut StdRng, up: &[NodeName]) -> Option<(NodeName, bool)> {
    if !rng.gen_bool(0.2) {
        return None;
    }
    up.choose(rng).map(|node| (node.clone(), rng.gen_bool(0.5)))
}

/// Draws a message to child `id` through `node`: a typed call or cast, a call or cast of
/// bytes, or a monitor.
fn message(rng: &mut StdRng, node: NodeName, id: ChildId) -> Op {
    match rng.gen_range(0..20) {
        0..=6 => Op::TypedCall { node, id },
        7..=10 => Op::TypedCast { node, id },
        11..=13 => Op::CallChild { node, id },
        14..=15 => Op::CastChild { node, id },
        _ => Op::Monitor {
            node,
            id,
            cancel: rng.gen_bool(0.25),
        },
    }
}

/// Draws what a hostile peer sends.
fn hostile_frame(rng: &mut StdRng) -> HostileFrame {
    let absurd = |rng: &mut StdRng| {
        if rng.gen_bool(0.5) {
            u64::MAX - rng.gen_range(0..4)
        } else {
            (1 << 41) + rng.gen_range(0..1_000_000)
        }
    };
    match rng.gen_range(0..6) {
        0 => HostileFrame::SyncPartTotal {
            total: if rng.gen_bool(0.5) {
                u32::MAX
            } else {
                rng.gen_range(5_000..u32::MAX)
            },
        },
        1 => {
            // Half the forged copies come in brief, chosen by the version's parity so that
            // the run draws exactly as it did before summaries existed.
            let version = absurd(rng);
            if version % 2 == 1 {
                HostileFrame::SummaryVersion { version }
            } else {
                HostileFrame::OfferVersion { version }
            }
        }
        2 => HostileFrame::DeltaVersion {
            version: absurd(rng),
        },
        3 => HostileFrame::AnnouncedVersion {
            version: absurd(rng),
        },
        4 => HostileFrame::InvalidRow {
            long_id: rng.gen_bool(0.5),
        },
        _ => HostileFrame::Garbage {
            len: if rng.gen_bool(0.2) {
                crate::cluster::wire::MAX_FRAME_BYTES as usize + 3
            } else {
                rng.gen_range(0..512)
            },
        },
    }
}

impl Default for Workload {
    fn default() -> Self {
        Self::new()
    }
}
