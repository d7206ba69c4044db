//! What a start batch's answer promises, driven the way the child supervisor drives it.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;

/// One child of a generated batch, and what the node observes at its turn.
#[derive(Clone, Debug)]
struct Turn {
    id: u8,
    /// A hot move's start carries a digest.
    state_sent: Option<String>,
    /// The node entered partition mode by this child's turn.
    partitioned: bool,
    /// A hot move found the child running here.
    met_running: bool,
    /// The state the digest names is waiting here.
    state_waits: bool,
    /// The child's actor starts.
    starts: bool,
}

fn turn() -> impl Strategy<Value = Turn> {
    (
        0u8..6,
        proptest::option::of("[a-c]{1,2}"),
        proptest::bool::weighted(0.15),
        any::<bool>(),
        any::<bool>(),
        proptest::bool::weighted(0.8),
    )
        .prop_map(
            |(id, state_sent, partitioned, met_running, state_waits, starts)| Turn {
                id,
                state_sent,
                partitioned,
                met_running,
                state_waits,
                starts,
            },
        )
}

fn id(n: u8) -> ChildId {
    ChildId::from(format!("c{n}").as_str())
}

/// What the node ran and what the batch answered.
struct Run {
    answer: BatchStart,
    /// The children whose actor was started by this batch, by the turn that started them.
    launched: Vec<(usize, ChildId)>,
    /// The digests taken, by child.
    taken: Vec<(ChildId, String)>,
}

/// Drives a batch as the supervisor does: a child started earlier in the batch runs by its
/// next mention.
fn drive(
    terms: BatchTerms,
    running: &BTreeMap<ChildId, Pid>,
    awaiting: &BTreeSet<ChildId>,
    turns: &[Turn],
) -> Run {
    let mut running = running.clone();
    let mut answer = BatchStart::new(terms);
    let mut launched = Vec::new();
    let mut taken = Vec::new();
    let mut next_pid = 1000;
    for (turn, t) in turns.iter().enumerate() {
        let spec = ChildSpec::new(id(t.id), "counter");
        let presence = Presence {
            running: running.get(&spec.id).copied(),
            awaiting_retry: awaiting.contains(&spec.id),
            partitioned: t.partitioned,
        };
        let Some(child) = answer.admit(spec.id.clone(), presence, t.state_sent.clone(), || {
            t.met_running
        }) else {
            continue;
        };
        assert_eq!(child.id(), &spec.id);
        let state = child.digest().filter(|_| t.state_waits).map(str::to_owned);
        if let Some(digest) = &state {
            taken.push((spec.id.clone(), digest.clone()));
        }
        let Some(child) = answer.state_taken(child, state.is_some()) else {
            continue;
        };
        let Some((child, row)) = answer.author(child, &spec, Metadata::new(), "n1", 7, false)
        else {
            continue;
        };
        assert_eq!(row.spec, spec);
        assert!(row.node_pids.is_empty());
        if t.starts {
            next_pid += 1;
            running.insert(spec.id.clone(), next_pid);
            launched.push((turn, spec.id.clone()));
            answer.started(child, next_pid);
        } else {
            answer.failed(
                child,
                ChildStartError::StartupFailed {
                    message: "pre_start failed".into(),
                },
            );
        }
    }
    Run {
        answer,
        launched,
        taken,
    }
}

fn outcomes(answer: &BatchStart) -> Vec<ChildId> {
    let mut ids: Vec<ChildId> = answer
        .started
        .iter()
        .map(|(id, _)| id.clone())
        .chain(answer.errors.iter().map(|(id, _)| id.clone()))
        .collect();
    ids.sort();
    ids
}

fn terms() -> impl Strategy<Value = BatchTerms> {
    (any::<bool>(), any::<bool>()).prop_map(|(existing_ok, confirm_handover)| BatchTerms {
        existing_ok,
        confirm_handover,
    })
}

fn node_state() -> impl Strategy<Value = (BTreeMap<ChildId, Pid>, BTreeSet<ChildId>)> {
    (
        proptest::collection::btree_map(0u8..6, 1u64..100, 0..4),
        proptest::collection::btree_set(0u8..6, 0..3),
    )
        .prop_map(|(running, awaiting)| {
            let running: BTreeMap<ChildId, Pid> =
                running.into_iter().map(|(n, pid)| (id(n), pid)).collect();
            // A child waiting for a retry is not running.
            let awaiting = awaiting
                .into_iter()
                .map(id)
                .filter(|id| !running.contains_key(id))
                .collect();
            (running, awaiting)
        })
}

proptest! {
    /// Every child the batch names gets exactly one outcome, an id named twice one per mention.
    #[test]
    fn every_request_gets_exactly_one_outcome(
        terms in terms(),
        (running, awaiting) in node_state(),
        turns in proptest::collection::vec(turn(), 0..12),
    ) {
        let run = drive(terms, &running, &awaiting, &turns);
        let mut asked: Vec<ChildId> = turns.iter().map(|t| id(t.id)).collect();
        asked.sort();
        prop_assert_eq!(outcomes(&run.answer), asked);
    }

    /// No child is started on a node that runs it already or waits to restart it, none in
    /// partition mode, and a batch starts an id once however often it names it.
    #[test]
    fn nothing_runs_twice_and_nothing_starts_without_quorum(
        terms in terms(),
        (running, awaiting) in node_state(),
        turns in proptest::collection::vec(turn(), 0..12),
    ) {
        let run = drive(terms, &running, &awaiting, &turns);
        let launched: BTreeSet<&ChildId> = run.launched.iter().map(|(_, id)| id).collect();
        prop_assert_eq!(launched.len(), run.launched.len(), "an id started twice");
        for (turn, id) in &run.launched {
            prop_assert!(!running.contains_key(id));
            prop_assert!(!awaiting.contains(id));
            prop_assert!(!turns[*turn].partitioned);
        }
    }

    /// A running instance answers for a start only when the batch allows it and no move's state
    /// waits for the child; then it is the running instance that is reported.
    #[test]
    fn a_running_child_answers_with_its_own_instance(
        terms in terms(),
        pid in 1u64..100,
        state_sent in proptest::option::of("[a-c]"),
        met_running in any::<bool>(),
    ) {
        let mut answer = BatchStart::new(terms);
        let presence = Presence { running: Some(pid), ..Presence::default() };
        let admitted = answer.admit(id(1), presence, state_sent.clone(), || met_running);
        prop_assert!(admitted.is_none());
        if terms.existing_ok && !met_running && state_sent.is_none() {
            prop_assert_eq!(answer.started, vec![(id(1), pid)]);
        } else {
            prop_assert_eq!(answer.errors, vec![(id(1), ChildStartError::AlreadyStarted)]);
        }
    }

    /// Only a hot move's start (a digest, with `existing_ok`) takes the state its digest names;
    /// any other start takes whichever state waits without confirmation and none with it; a hot
    /// move whose state did not arrive does not start.
    #[test]
    fn only_a_hot_move_takes_its_own_state(
        terms in terms(),
        (running, awaiting) in node_state(),
        turns in proptest::collection::vec(turn(), 0..12),
    ) {
        let run = drive(terms, &running, &awaiting, &turns);
        for (child, digest) in &run.taken {
            let sent: Vec<&Turn> = turns.iter().filter(|t| id(t.id) == *child).collect();
            let named = sent.iter().any(|t| t.state_sent.as_deref() == Some(digest.as_str()));
            if digest.is_empty() {
                prop_assert!(!terms.confirm_handover);
            } else {
                prop_assert!(terms.existing_ok && named);
            }
        }
        // A hot move starts only with its own state.
        for (turn, _) in &run.launched {
            let t = &turns[*turn];
            if t.state_sent.is_some() {
                prop_assert!(terms.existing_ok && t.state_waits);
            }
        }
        // A hot move whose state is not taken is refused, never started afresh.
        for t in turns.iter().filter(|t| t.state_sent.is_some()) {
            let only_mention = turns.iter().filter(|o| o.id == t.id).count() == 1;
            let here_before = running.contains_key(&id(t.id)) || awaiting.contains(&id(t.id));
            if only_mention && !here_before && !t.partitioned && (!terms.existing_ok || !t.state_waits) {
                prop_assert!(run.launched.iter().all(|(_, i)| *i != id(t.id)));
                prop_assert!(run.answer.errors.contains(&(id(t.id), state_missing())));
            }
        }
    }

    /// A batch whose write failed reports no child started: each one it started is an error
    /// with the write's reason, and is handed back to discard.
    #[test]
    fn an_unrecorded_start_is_no_start(
        terms in terms(),
        (running, awaiting) in node_state(),
        turns in proptest::collection::vec(turn(), 0..12),
    ) {
        let mut run = drive(terms, &running, &awaiting, &turns);
        let before = outcomes(&run.answer);
        let started: Vec<ChildId> = run.answer.started.iter().map(|(id, _)| id.clone()).collect();
        let error = ChildStartError::StartupFailed { message: "disk full".into() };
        let discard = run.answer.not_recorded(&error);
        prop_assert_eq!(discard, started.clone());
        prop_assert!(run.answer.started.is_empty());
        prop_assert_eq!(outcomes(&run.answer), before);
        for id in started {
            prop_assert!(run.answer.errors.contains(&(id, error.clone())));
        }
    }
}

#[test]
fn a_refused_batch_answers_each_child_with_the_reason() {
    let answer = BatchStart::refuse_all([id(1), id(2), id(1)], ChildStartError::Partitioned);
    assert!(answer.started.is_empty());
    assert_eq!(
        answer.errors,
        vec![
            (id(1), ChildStartError::Partitioned),
            (id(2), ChildStartError::Partitioned),
            (id(1), ChildStartError::Partitioned),
        ]
    );
}

#[test]
fn the_hubs_placement_record_survives_authoring() {
    let mut answer = BatchStart::new(BatchTerms::default());
    let child = answer
        .admit(id(1), Presence::default(), None, || false)
        .expect("admitted");
    let mut metadata = Metadata::new();
    metadata.insert(RESERVED_METADATA_KEY.to_owned(), "placement".into());
    metadata.insert("team".into(), "a".into());
    let spec = ChildSpec::new(id(1), "counter");
    let (_child, row) = answer
        .author(child, &spec, metadata.clone(), "n1", 5, true)
        .expect("authored");
    assert_eq!(row.metadata, metadata);
    assert!(row.hub.durable);
    assert_eq!(row.hub.changed_by, "n1");
    assert!(answer.errors.is_empty());
}
