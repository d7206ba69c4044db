//! The hub's tracing spans, as an OpenTelemetry layer would see them: a start request's
//! `process_hub.start` on the node asked, and a `process_hub.start_batch` with the same
//! `request_id` and the origin on the node that runs the child; the request's outcome recorded
//! on its span; a redistribution pass when a node joins.

use crate::common::{self, alone};

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use common::cluster::*;
use process_hub::StartOptions;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

/// A span's name and fields (set at creation or recorded later).
#[derive(Clone, Debug, Default)]
struct Seen {
    name: String,
    fields: BTreeMap<String, String>,
}

#[derive(Clone, Default)]
struct Spans(Arc<Mutex<BTreeMap<u64, Seen>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').to_owned(),
        );
    }
}

impl<S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>> Layer<S>
    for Spans
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        let mut seen = Seen {
            name: attrs.metadata().name().to_owned(),
            ..Seen::default()
        };
        attrs.record(&mut Fields(&mut seen.fields));
        self.0.lock().unwrap().insert(id.into_u64(), seen);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        if let Some(seen) = self.0.lock().unwrap().get_mut(&id.into_u64()) {
            values.record(&mut Fields(&mut seen.fields));
        }
    }
}

impl Spans {
    fn named(&self, name: &str) -> Vec<BTreeMap<String, String>> {
        self.0
            .lock()
            .unwrap()
            .values()
            .filter(|s| s.name == name)
            .map(|s| s.fields.clone())
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_request_is_one_span_per_node_tied_by_its_request_id() {
    if alone::ran_in_own_process(
        module_path!(),
        "a_start_request_is_one_span_per_node_tied_by_its_request_id",
    ) {
        return;
    }
    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(spans.clone());
    tracing::subscriber::set_global_default(subscriber).expect("first subscriber");

    let mut cluster = TestCluster::with_nodes(41, &["a", "b"], Options::plain()).await;
    let id = id_owned_by("b", &["a", "b"], "traced-");
    let spec = process_hub::ChildSpec::new(id.clone(), "counter");
    let started = cluster
        .hub("a")
        .start_children(vec![spec], StartOptions::new())
        .await
        .unwrap();
    assert_eq!(started.started.len(), 1);

    let requests: Vec<_> = spans
        .named("process_hub.start")
        .into_iter()
        .filter(|f| f.get("node").map(String::as_str) == Some("a@test"))
        .filter(|f| f.get("purpose").map(String::as_str) == Some("request"))
        .collect();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let request = &requests[0];
    assert_eq!(request["hub"], "orders");
    assert_eq!(request["children"], "1");
    assert_eq!(
        request["started"], "1",
        "the outcome is recorded: {request:?}"
    );
    assert_eq!(request["failed"], "0");
    assert_eq!(request["otel.name"], "process_hub.start");
    let batches: Vec<_> = spans
        .named("process_hub.start_batch")
        .into_iter()
        .filter(|f| f.get("request_id") == request.get("request_id"))
        .collect();
    assert_eq!(batches.len(), 1, "{batches:?}");
    assert_eq!(batches[0]["node"], "b@test");
    assert_eq!(batches[0]["origin"], "a@test");

    // A node joining runs a redistribution pass on the others.
    cluster.add("c").await;
    cluster.wait_members().await;
    common::wait_until("a redistribution span", || {
        !spans.named("process_hub.redistribution").is_empty()
    })
    .await;
    stop_all(&cluster).await;
}
