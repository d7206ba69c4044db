//! One run of the simulator: a seed, a cluster, a workload of requests and faults, the
//! invariants checked after every step, then quiescence and the final checks.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::child::{SimChildMsg, SIM_KIND};
use super::cluster::SimCluster;
use super::invariants::{
    declared_lists_agree, declared_run_as_decided_with, each_once_where_placed, judge_declared,
    no_rebalance_left_undone, one_active_replica, registries_agree, replicas_on_owners,
    requests_answered, runs_where_recorded, undeclared_stays_gone, NodeView, PlacementWatch,
    VersionWatch, Violation,
};
use super::ledger::{Acknowledged, Ledger, SharedLedger};
use super::messaging::{self, SharedMessageLog};
use super::state::{with_book, SharedBook, StateBook};
use super::trace::{short, Trace};
use super::workload::{Op, Workload, WorldView};
use crate::config::{Distribution, Migration, PartitionTolerance, ReplicationModel, SyncStrategy};
use crate::core::placement::HashRing;
use crate::hub::simulation::{InjectedBug, Observation};
use crate::model::{ChildId, ChildSpec, NodeName, Pid};
use crate::types::{ChildStartError, StartOptions, StopOptions};

mod checks;
mod draws;
mod ops;
mod requests;

pub use draws::{
    distribution_of, migration_of, most_nodes, partition_tolerance_growing_to,
    partition_tolerance_of, replicas_of, replication_model_of, sync_of,
};

/// How a run goes.
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// Steps of workload and faults before quiescence.
    pub steps: usize,
    /// Bugs injected into every hub (none for a real run).
    pub bugs: BTreeSet<InjectedBug>,
    /// Keep the trace's lines (not only its hash).
    pub keep_trace: bool,
    /// How long a child may run off its owner.
    pub placement_bound: Duration,
    /// How long quiescence may take before the final checks count as failed.
    pub quiescence: Duration,
    /// How children move; `None`: as the seed says ([`migration_of`]).
    pub migration: Option<Migration>,
    /// Nodes running each child; `None`: as the seed says ([`replicas_of`]).
    pub replicas: Option<usize>,
    /// Whether every replica is active; `None`: as the seed says ([`replication_model_of`]).
    /// Only a run with more than one replica per child is told apart by it.
    pub replication_model: Option<ReplicationModel>,
    /// How new children are placed; `None`: as the seed says ([`distribution_of`]).
    pub distribution: Option<Distribution>,
    /// What a side without quorum does; `None`: as the seed says ([`partition_tolerance_of`]).
    pub partition_tolerance: Option<PartitionTolerance>,
    /// How registry changes travel; `None`: as the seed says ([`sync_of`]).
    pub sync: Option<SyncStrategy>,
    /// Whether the run draws partial faults; `None`: as the seed says
    /// ([`super::partial::partial_faults_of`]).
    pub partial_faults: Option<bool>,
    /// Nodes the run boots with; `None`: 3 or 4, as the seed draws them. A forced count
    /// still draws (and discards) the seed's own, so every later draw is the seed's, and the
    /// run may grow by one join ([`most_nodes`]): large clusters run the same workload.
    pub nodes: Option<usize>,
}

/// How long a child may run on two sides of a clean split in a quorum run: the minority sees
/// the split when the router cuts the links and stops its children at once, while the majority
/// re-places them only after the grace (1 s), so any overlap is a bug; the bound absorbs
/// requests already in flight.
const SPLIT_BOUND_MS: u64 = 1_000;

impl Default for SimOptions {
    fn default() -> Self {
        Self {
            steps: 60,
            bugs: BTreeSet::new(),
            keep_trace: false,
            placement_bound: Duration::from_secs(45),
            quiescence: Duration::from_secs(120),
            migration: None,
            replicas: None,
            replication_model: None,
            distribution: None,
            partition_tolerance: None,
            sync: None,
            partial_faults: None,
            nodes: None,
        }
    }
}

/// A broken invariant, and when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The invariant and what broke it.
    pub violation: Violation,
    /// The step it was found after (`steps` for quiescence).
    pub step: usize,
    /// Virtual milliseconds into the run.
    pub at_ms: u64,
}

/// What one seed did.
#[derive(Clone, Debug)]
pub struct SeedReport {
    /// The seed.
    pub seed: u64,
    /// Steps run (up to the failure, if any).
    pub steps: usize,
    /// Invariant checks made.
    pub invariant_checks: u64,
    /// Virtual time the run covered.
    pub virtual_ms: u64,
    /// Wall time it took.
    pub wall_ms: u64,
    /// The hash of the trace: the same for every run of the seed.
    pub trace_hash: u64,
    /// Lines in the trace.
    pub trace_lines: u64,
    /// Requests made.
    pub requests: usize,
    /// Acknowledged durable mutations that lost to another leader's (the documented divergence).
    pub superseded: usize,
    /// The broken invariant, if one broke.
    pub failure: Option<Failure>,
    /// The trace, when kept.
    pub trace: Vec<String>,
    /// How the run's children moved.
    pub migration: Migration,
    /// Increments acknowledged (hot runs).
    pub acknowledged_increments: usize,
    /// States imported by hot moves (hot runs).
    pub imports: usize,
    /// Whether the run drew partial faults.
    pub partial_faults: bool,
    /// The longest a child ran on more nodes than its replicas within connected nodes
    /// (`double_run_bounded`), in virtual milliseconds.
    pub worst_double_ms: u64,
    /// Which child that was, where and when (empty when none ran twice).
    pub worst_double: String,
}

/// Runs `seed` on a fresh single-threaded runtime in paused, auto-advancing time.
pub fn run_seed(seed: u64, options: &SimOptions) -> SeedReport {
    let began = Instant::now();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build();
    let mut report = match runtime {
        // The run is built inside the runtime: its trace's origin must be read from the paused
        // clock, not the machine's (a busy machine would shift every timestamp).
        Ok(runtime) => runtime.block_on(async { Run::new(seed, options.clone()).go().await }),
        Err(e) => SeedReport {
            seed,
            steps: 0,
            invariant_checks: 0,
            virtual_ms: 0,
            wall_ms: 0,
            trace_hash: 0,
            trace_lines: 0,
            requests: 0,
            superseded: 0,
            failure: Some(Failure {
                violation: Violation {
                    invariant: super::invariants::Invariant::RequestsAnswered,
                    detail: format!("no runtime: {e}"),
                },
                step: 0,
                at_ms: 0,
            }),
            trace: Vec::new(),
            migration: options.migration.unwrap_or(migration_of(seed)),
            acknowledged_increments: 0,
            imports: 0,
            partial_faults: false,
            worst_double_ms: 0,
            worst_double: String::new(),
        },
    };
    report.wall_ms = began.elapsed().as_millis() as u64;
    report
}

struct Run {
    seed: u64,
    options: SimOptions,
    rng: StdRng,
    trace: Arc<Trace>,
    ledger: SharedLedger,
    cluster: SimCluster,
    workload: Workload,
    versions: VersionWatch,
    placement: PlacementWatch,
    /// Children on two sides of a clean split (quorum runs).
    split: super::split::SplitWatch,
    /// Children on too many nodes within connected nodes (every run).
    doubles: super::split::DoubleRunWatch,
    /// The partial faults' own draws, in a run that draws them.
    partial: Option<super::partial::PartialFaults>,
    /// Since when each node has been on a side without quorum (quorum runs).
    minority_since: BTreeMap<NodeName, u64>,
    /// Bumped by every operation that may give a side quorum (heal, partition, restart, join).
    sides_changed: Arc<std::sync::atomic::AtomicU64>,
    checks: u64,
    durable_registry: bool,
    /// Acknowledged and not stopped since (what stops are drawn from).
    live_plain: BTreeSet<ChildId>,
    live_durable: Arc<Mutex<BTreeSet<ChildId>>>,
    /// Plain children started before a whole-cluster outage and not started again since: only
    /// the declared list returns from an outage (`undeclared_stays_gone`).
    gone_in_outage: BTreeSet<ChildId>,
    /// What typed messages and monitors showed.
    messages: SharedMessageLog,
    /// The next number a typed call or cast carries.
    next_message: u64,
    /// A broken promise found while applying an operation, reported at the next check.
    found: Option<Violation>,
    /// Children started with guided placement: their node, and whether they may fall back.
    guided: BTreeMap<ChildId, (NodeName, bool)>,
    /// How children move.
    migration: Migration,
    /// What the children did with their state (hot runs).
    book: Option<SharedBook>,
    /// The increments' own generator (hot runs), so that the workload's draws are the same
    /// as in a cold run of the seed.
    increments: StdRng,
    /// The number the next increment carries.
    next_increment: u64,
}

impl Run {
    fn new(seed: u64, options: SimOptions) -> Self {
        let trace = Arc::new(Trace::new(options.keep_trace));
        let ledger: SharedLedger = Arc::new(Mutex::new(Ledger::default()));
        let (observed, noted) = (ledger.clone(), trace.clone());
        let observer = Arc::new(move |o: Observation| {
            match &o {
                Observation::Authored {
                    author,
                    base,
                    result,
                    declared,
                    undeclared,
                    untouched,
                    ..
                } => noted.line(format!(
                    "decided by {}: v{} {:?} -> v{} {:x}: +{declared:?} -{undeclared:?} ={untouched:?}",
                    short(author),
                    base.version,
                    base.last_mutated_by.as_deref().map(short),
                    result.version,
                    result.digest
                )),
                Observation::HandedOver { from, to } => noted.line(format!(
                    "{} hands its children to {:?}",
                    short(from),
                    to.iter().map(|n| short(n)).collect::<Vec<_>>()
                )),
            }
            lock(&observed).observe(o)
        });
        let mut rng = StdRng::seed_from_u64(seed);
        // Half the runs keep their registries on disk (the `durable` backend).
        let durable_registry = rng.gen_bool(0.5);
        let migration = options.migration.unwrap_or(migration_of(seed));
        let book: Option<SharedBook> =
            (migration == Migration::Hot).then(|| Arc::new(Mutex::new(StateBook::default())));
        let mut cluster = SimCluster::new(
            seed ^ 0x5eed_0fc1_u64,
            durable_registry,
            options.bugs.clone(),
            trace.clone(),
            observer,
            migration,
            book.clone(),
        );
        cluster.replicas = options.replicas.unwrap_or(replicas_of(seed)).max(1);
        cluster.replication_model = options
            .replication_model
            .unwrap_or(replication_model_of(seed));
        cluster.distribution = options.distribution.unwrap_or(distribution_of(seed));
        cluster.partition_tolerance =
            options
                .partition_tolerance
                .clone()
                .unwrap_or(partition_tolerance_growing_to(
                    seed,
                    most_nodes(options.nodes),
                ));
        cluster.sync = options.sync.clone().unwrap_or(sync_of(seed));
        Self {
            seed,
            rng,
            placement: PlacementWatch::new(options.placement_bound.as_millis() as u64),
            split: super::split::SplitWatch::new(SPLIT_BOUND_MS),
            doubles: super::split::DoubleRunWatch::new(double_run_bound_ms(&cluster)),
            partial: options
                .partial_faults
                .unwrap_or(super::partial::partial_faults_of(seed))
                .then(|| super::partial::PartialFaults::new(seed)),
            minority_since: BTreeMap::new(),
            sides_changed: Arc::default(),
            workload: Workload::growing_to(most_nodes(options.nodes)),
            options,
            trace,
            ledger,
            cluster,
            versions: VersionWatch::default(),
            checks: 0,
            durable_registry,
            live_plain: BTreeSet::new(),
            live_durable: Arc::default(),
            gone_in_outage: BTreeSet::new(),
            messages: Arc::default(),
            next_message: 0,
            found: None,
            guided: BTreeMap::new(),
            migration,
            book,
            increments: StdRng::seed_from_u64(seed ^ 0x1_7c4e_a5e5),
            next_increment: 0,
        }
    }

    fn report(&self, steps: usize, failure: Option<Failure>) -> SeedReport {
        let ledger = lock(&self.ledger);
        SeedReport {
            seed: self.seed,
            steps,
            invariant_checks: self.checks,
            virtual_ms: self.trace.now_ms(),
            wall_ms: 0,
            trace_hash: self.trace.hash(),
            trace_lines: self.trace.len(),
            requests: ledger.requests(),
            superseded: 0,
            failure,
            trace: self.trace.lines(),
            migration: self.migration,
            acknowledged_increments: self.book.as_ref().map_or(0, |b| lock(b).acked()),
            imports: self.book.as_ref().map_or(0, |b| lock(b).imports()),
            partial_faults: self.partial.is_some(),
            worst_double_ms: self.doubles.worst().ms,
            worst_double: self.doubles.worst().what.clone(),
        }
    }

    async fn go(mut self) -> SeedReport {
        let drawn = self.rng.gen_range(3..=4);
        let nodes = self.options.nodes.unwrap_or(drawn);
        self.trace.line(format!(
            "{nodes} nodes, registry {}{}{}{}{}",
            if self.durable_registry {
                "on disk"
            } else {
                "in memory"
            },
            // Said only of hot runs: a cold run's trace is what it was before hot runs.
            if self.migration == Migration::Hot {
                ", migration hot"
            } else {
                ""
            },
            if self.quorum() {
                ", majority quorum"
            } else {
                ""
            },
            // Said only of runs with them: the other runs' traces are what they were.
            if self.partial.is_some() {
                ", partial faults"
            } else {
                ""
            },
            match &self.cluster.sync {
                SyncStrategy::PubSub => String::new(),
                SyncStrategy::Gossip {
                    recipients,
                    restricted_init,
                    ..
                } => format!(
                    ", gossip to {recipients}{}",
                    if *restricted_init {
                        ""
                    } else {
                        ", rounds from all"
                    }
                ),
            }
        ));
        // Half the runs have a network latency, so that requests are in flight when faults
        // strike; the others deliver at once.
        if self.rng.gen_bool(0.5) {
            let low = self.rng.gen_range(1..5);
            let high = low + self.rng.gen_range(0..20);
            let latency = (Duration::from_millis(low), Duration::from_millis(high));
            self.trace.line(format!("network latency {low}..{high} ms"));
            self.cluster.router.set_delay(Some(latency));
        }
        if self.cluster.replicas > 1 {
            self.trace.line(format!(
                "{} replicas per child ({})",
                self.cluster.replicas,
                match self.cluster.replication_model {
                    ReplicationModel::ActivePassive => "active-passive",
                    ReplicationModel::ActiveActive => "active-active",
                }
            ));
        }
        for i in 1..=nodes {
            if let Err(e) = self.cluster.add(&format!("n{i}")).await {
                self.trace.line(format!("boot failed: {e}"));
            }
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
        for step in 0..self.options.steps {
            if let Some(op) = self.next_partial() {
                self.trace.line(format!("step {step}.p: {op}"));
                self.apply(op).await;
                self.watch_doubles();
            }
            // One to three operations back to back: a request and the fault that interrupts it.
            let burst = self.rng.gen_range(1..=3);
            for i in 0..burst {
                let op = self.next_op();
                self.trace.line(format!("step {step}.{i}: {op}"));
                self.apply(op).await;
                // A fault or a node's leave and return can be undone by the next operation of
                // the burst: the watch sees every shape the components take, however briefly.
                self.watch_doubles();
                let gap = self.rng.gen_range(0..50);
                tokio::time::sleep(Duration::from_millis(gap)).await;
            }
            let pause = self.rng.gen_range(100..2_000);
            self.pause(Duration::from_millis(pause)).await;
            self.cluster.router.set_drop_probability(0.0);
            if let Err(violation) = self.check_always() {
                return self.fail(step, violation).await;
            }
        }
        self.quiesce().await
    }

    /// Watches for children on too many nodes within connected nodes; a violation is
    /// reported at the next check.
    fn watch_doubles(&mut self) {
        let components = self.cluster.connected();
        let running = self.cluster.running();
        let copies = self.cluster.replicas.max(1);
        if let Err(v) = self
            .doubles
            .observe(self.trace.now_ms(), &components, &running, copies)
        {
            self.found.get_or_insert(v);
        }
    }

    /// The longest double run, for the trace's end.
    fn note_worst_double(&self) {
        let worst = self.doubles.worst();
        if worst.what.is_empty() {
            self.trace.line("no child ran twice within connected nodes");
        } else {
            self.trace.line(format!(
                "longest double run within connected nodes: {} ms (bound {} ms): {}",
                worst.ms,
                self.doubles.bound_ms(),
                worst.what
            ));
        }
    }

    async fn fail(mut self, step: usize, violation: Violation) -> SeedReport {
        self.note_worst_double();
        self.trace.line(format!("VIOLATION {violation}"));
        let failure = Failure {
            violation,
            step,
            at_ms: self.trace.now_ms(),
        };
        let report = self.report(step, Some(failure));
        self.cluster.shut_down().await;
        report
    }

    /// Lets `pause` pass. In a hot run, increments go to the children meanwhile, one every
    /// [`INCREMENT_EVERY`]: to a child that is moving when one is (its state is at stake),
    /// else to any running child.
    ///
    /// Children on too many nodes are watched for every [`WATCH_DOUBLES_EVERY`] meanwhile
    /// (`double_run_bounded` times how long they last).
    async fn pause(&mut self, pause: Duration) {
        let slice = if self.book.is_some() {
            INCREMENT_EVERY
        } else {
            WATCH_DOUBLES_EVERY
        };
        let mut left = pause;
        while !left.is_zero() {
            let slice = left.min(slice);
            if self.book.is_some() {
                self.increment();
            }
            tokio::time::sleep(slice).await;
            self.watch_doubles();
            left -= slice;
        }
    }

    /// Sends the next increment, as a task (a typed call: answered, it is acknowledged).
    fn increment(&mut self) {
        let Some(book) = self.book.clone() else {
            return;
        };
        let up = self.cluster.up();
        let mut moving = BTreeSet::new();
        for node in &up {
            if let Some(hub) = self.cluster.hub(node) {
                moving.extend(hub.shared().handoffs.moving.iter().map(|e| e.key().clone()));
            }
        }
        let running: Vec<ChildId> = if moving.is_empty() {
            self.cluster.running().into_keys().collect()
        } else {
            moving.into_iter().collect()
        };
        if running.is_empty() || up.is_empty() {
            return;
        }
        let id = running[self.increments.gen_range(0..running.len())].clone();
        let node = &up[self.increments.gen_range(0..up.len())];
        let Some(hub) = self.cluster.hub(node) else {
            return;
        };
        self.next_increment += 1;
        let n = self.next_increment;
        let child = hub.child_ref::<SimChildMsg>(id.clone());
        let (trace, via) = (self.trace.clone(), short(node).to_owned());
        tokio::spawn(async move {
            let answer = child
                .call(|reply| SimChildMsg::Add(n, reply), messaging::CALL_TIMEOUT)
                .await;
            let summary = match answer {
                Ok(_) => {
                    with_book(&book, |b| b.acknowledged(n));
                    "acknowledged".to_owned()
                }
                Err(e) => format!("failed: {}", e.code()),
            };
            trace.line(format!("increment {n} of {id} via {via}: {summary}"));
        });
    }

    /// Heals every fault, brings every node back, and waits until the quiescent invariants hold
    /// (or the quiescence time is up: then the last violation is the failure).
    async fn quiesce(mut self) -> SeedReport {
        let steps = self.options.steps;
        self.trace.line("quiesce: heal, restart every node");
        self.cluster.heal();
        if let Some(partial) = &mut self.partial {
            partial.healed();
        }
        if let Some(book) = &self.book {
            lock(book).set_split(false);
        }
        for node in self.cluster.nodes.values() {
            node.disks().for_each(|d| {
                d.set_latency(Duration::ZERO);
                d.set_full(false);
            });
        }
        for node in self.cluster.down() {
            if let Err(e) = self.cluster.restart(&node, false).await {
                self.trace
                    .line(format!("restart of {} failed: {e}", short(&node)));
            }
        }
        let deadline = self.trace.now_ms() + self.options.quiescence.as_millis() as u64;
        let mut last = None;
        let mut held = 0;
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            if let Err(violation) = self.check_always() {
                return self.fail(steps, violation).await;
            }
            match self.check_quiescent() {
                Ok(superseded) => {
                    held += 1;
                    if held >= HELD_CHECKS {
                        self.trace.line(format!(
                            "quiescent; {superseded} acknowledged mutations superseded"
                        ));
                        let (monitors, fired) = lock(&self.messages).monitor_counts();
                        self.trace
                            .line(format!("{monitors} monitors set in the run, {fired} fired"));
                        let probed =
                            messaging::probe(&self.cluster, &self.live_plain, &self.trace).await;
                        let probed = probed.and_then(|counts| {
                            lock(&self.messages).check()?;
                            // The probe's messages reached every child: an instance that
                            // should have taken a state has handled one by now.
                            if let Some(book) = &self.book {
                                lock(book).check()?;
                            }
                            Ok(counts)
                        });
                        match probed {
                            Ok(counts) => self.trace.line(format!("probe: {counts:?}")),
                            Err(violation) => return self.fail(steps, violation).await,
                        }
                        self.note_worst_double();
                        let mut report = self.report(steps, None);
                        report.superseded = superseded;
                        self.cluster.shut_down().await;
                        return report;
                    }
                }
                Err(violation) => {
                    held = 0;
                    last = Some(violation);
                }
            }
            if self.trace.now_ms() > deadline {
                let violation = last.unwrap_or(Violation {
                    invariant: super::invariants::Invariant::RegistriesAgree,
                    detail: "never quiescent".into(),
                });
                return self.fail(steps, violation).await;
            }
        }
    }
}

/// How often children on too many nodes are watched for while a step's pause passes.
const WATCH_DOUBLES_EVERY: Duration = Duration::from_millis(250);

/// How long a child may run on more nodes than its replicas within nodes connected through
/// some path (`double_run_bounded`): the hub's stated bound
/// ([`crate::core::reachability::double_run_bound`]) for the run's configuration, with no
/// detection time (the router tells both ends of a link at once when it changes).
fn double_run_bound_ms(cluster: &SimCluster) -> u64 {
    let config = super::cluster::sim_config(
        super::cluster::SIM_HUB,
        cluster.migration(),
        cluster.replicas,
        cluster.replication_model,
        cluster.distribution,
        cluster.partition_tolerance.clone(),
        cluster.sync.clone(),
    );
    let bound = crate::core::reachability::double_run_bound(&config, Duration::ZERO);
    u64::try_from(bound.as_millis()).unwrap_or(u64::MAX)
}

/// How often a hot run sends an increment while a step's pause passes.
const INCREMENT_EVERY: Duration = Duration::from_millis(100);

/// How many checks in a row (500 ms apart) the quiescent invariants must pass: longer than a
/// reconcile interval (2 s), so a round that would undo the state has had its chance.
const HELD_CHECKS: u32 = 6;

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
