//! Starting children through a hub's remote endpoints from a client node that has just joined.

use std::collections::BTreeSet;
use std::time::Duration;

use process_hub::{ChildId, ChildSpec, ChildStartError, RemoteHub, RemoteHubError, StartOptions};

/// Starts `specs` through the endpoints and insists that each took effect. While the client's
/// sessions to the nodes settle, a session can be replaced under a request in flight and its
/// answer lost (`Unreachable`: the start may or may not have happened): the start is asked
/// again, and `already_started` then says the lost one had taken effect. Any other error, or an
/// `already_started` to a first ask, fails the test.
pub async fn start_through(hub: &RemoteHub, specs: &[ChildSpec], opts: StartOptions) {
    let begun = tokio::time::Instant::now();
    let mut asked_again = false;
    loop {
        match hub.start_children(specs.to_vec(), opts.clone()).await {
            Ok(result) => {
                let took_effect_before = |reason: &ChildStartError| {
                    asked_again && *reason == ChildStartError::AlreadyStarted
                };
                assert!(
                    result.errors.iter().all(|e| took_effect_before(&e.reason)),
                    "{result:?}"
                );
                let answered: BTreeSet<&ChildId> = result
                    .started
                    .iter()
                    .map(|s| &s.id)
                    .chain(result.errors.iter().map(|e| &e.id))
                    .collect();
                let asked: BTreeSet<&ChildId> = specs.iter().map(|s| &s.id).collect();
                assert_eq!(answered, asked, "{result:?}");
                return;
            }
            Err(RemoteHubError::Unreachable { .. })
                if begun.elapsed() < Duration::from_secs(10) =>
            {
                asked_again = true;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("not started: {e:?}"),
        }
    }
}
