//! The commands that only read: `status`, `members`, `children`, `declared`, `explain`.

use serde_json::{json, Value};

use super::outcome::CtlError;
use super::print_json;
use super::table::{cell, clock, Table};
use crate::admin_client::{encode_segment, AdminClient};

fn field<'a>(value: &'a Value, name: &str) -> &'a Value {
    value.get(name).unwrap_or(&Value::Null)
}

fn yes_no(value: &Value) -> &'static str {
    if value.as_bool().unwrap_or(false) {
        "yes"
    } else {
        "no"
    }
}

fn names(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| a.iter().map(cell).collect())
        .unwrap_or_default()
}

/// `status`: `GET /v1/health` and `GET /v1/registry/summary`.
pub fn status(client: &AdminClient, json: bool) -> Result<(), CtlError> {
    let health = client.get("/v1/health")?;
    // A node that does not summarize its registry still has a status.
    let summary = match client.get("/v1/registry/summary").map_err(CtlError::from) {
        Ok(summary) => summary,
        Err(CtlError::Refused { status: 404, .. }) => Value::Null,
        Err(e) => return Err(e),
    };
    if json {
        print_json(&json!({ "health": health, "registry_summary": summary }));
        return Ok(());
    }
    let members = names(field(&health, "members"));
    let mut out = String::new();
    out.push_str(&format!("node          {}\n", cell(field(&health, "node"))));
    out.push_str(&format!("hub           {}\n", cell(field(&health, "hub"))));
    out.push_str(&format!(
        "status        {}\n",
        cell(field(&health, "status"))
    ));
    out.push_str(&format!(
        "members       {} ({})\n",
        members.len(),
        members.join(", ")
    ));
    out.push_str(&format!(
        "recovery      {}  parked {}  partitioned {}\n",
        cell(field(&health, "recovery_state")),
        yes_no(field(&health, "parked")),
        yes_no(field(&health, "partitioned"))
    ));
    out.push_str(&format!(
        "pending work  {}\n",
        cell(field(&health, "pending_work"))
    ));
    if !summary.is_null() {
        out.push_str(&format!(
            "children      {} rows, {} placed, {} unbound\n",
            cell(field(&summary, "rows")),
            cell(field(&summary, "placed")),
            cell(field(&summary, "unbound"))
        ));
        if let Some(per_node) = field(&summary, "per_node").as_object() {
            for (node, count) in per_node {
                out.push_str(&format!("  {node}  {}\n", cell(count)));
            }
        }
    }
    for problem in names(field(&health, "problems")) {
        out.push_str(&format!("problem       {problem}\n"));
    }
    print!("{out}");
    Ok(())
}

/// `members`: `GET /v1/members`.
pub fn members(client: &AdminClient, json: bool) -> Result<(), CtlError> {
    let answer = client.get("/v1/members")?;
    if json {
        print_json(&answer);
        return Ok(());
    }
    let leader = field(&answer, "leader").as_str().map(str::to_owned);
    let mut table = Table::new(&["NODE", "STATE", "CHILDREN", "SINCE", "NOTE"]);
    for member in field(&answer, "members").as_array().into_iter().flatten() {
        let node = cell(field(member, "node"));
        let mut notes = Vec::new();
        if field(member, "local").as_bool() == Some(true) {
            notes.push("this node");
        }
        if leader.as_deref() == Some(node.as_str()) {
            notes.push("leader");
        }
        table.row(vec![
            node,
            cell(field(member, "state")),
            cell(field(member, "children")),
            field(member, "since_ms")
                .as_u64()
                .map(clock)
                .unwrap_or_else(|| "-".into()),
            notes.join(", "),
        ]);
    }
    print!("{}", table.render());
    Ok(())
}

/// Where a listed child runs, as `node(role)` cells.
fn placements(child: &Value) -> Vec<String> {
    field(child, "nodes")
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| match field(n, "role").as_str() {
            Some(role) => format!("{}({role})", cell(field(n, "node"))),
            None => cell(field(n, "node")),
        })
        .collect()
}

/// `children`: every page of `GET /v1/children`, filtered here by node and tag.
pub fn children(
    client: &AdminClient,
    json: bool,
    node: Option<&str>,
    tag: Option<&str>,
) -> Result<(), CtlError> {
    let all = client.all_children()?;
    let chosen: Vec<Value> = all
        .into_iter()
        .filter(|c| {
            node.is_none_or(|want| {
                field(c, "nodes")
                    .as_array()
                    .is_some_and(|ns| ns.iter().any(|n| field(n, "node").as_str() == Some(want)))
            })
        })
        .filter(|c| {
            tag.is_none_or(|want| field(field(c, "metadata"), "tag").as_str() == Some(want))
        })
        .collect();
    if json {
        print_json(&Value::Array(chosen));
        return Ok(());
    }
    let mut table = Table::new(&["ID", "KIND", "NODES", "TAG"]);
    for child in &chosen {
        let nodes = placements(child);
        table.row(vec![
            cell(field(child, "id")),
            cell(field(child, "kind")),
            if nodes.is_empty() {
                "-".into()
            } else {
                nodes.join(" ")
            },
            field(field(child, "metadata"), "tag")
                .as_str()
                .unwrap_or("-")
                .to_owned(),
        ]);
    }
    print!("{}", table.render());
    eprintln!("{} children", chosen.len());
    Ok(())
}

/// `declared`: `GET /v1/declared`.
pub fn declared(client: &AdminClient, json: bool) -> Result<(), CtlError> {
    let answer = client.get("/v1/declared")?;
    if json {
        print_json(&answer);
        return Ok(());
    }
    let children = field(&answer, "children")
        .as_array()
        .cloned()
        .unwrap_or_default();
    println!(
        "declared list version {}, {} children{}",
        cell(field(&answer, "version")),
        children.len(),
        if field(&answer, "parked").as_bool() == Some(true) {
            ", PARKED (restore it or `ctl clear-declared`)"
        } else {
            ""
        }
    );
    let mut table = Table::new(&["ID", "KIND", "RESTART"]);
    for child in &children {
        table.row(vec![
            cell(field(child, "id")),
            cell(field(child, "kind")),
            cell(field(child, "restart")),
        ]);
    }
    print!("{}", table.render());
    Ok(())
}

/// One event as a line: its time, kind and fields.
pub fn event_line(event: &Value) -> String {
    let fields: Vec<String> = field(event, "event")
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", cell(v)))
        .collect();
    format!(
        "{}  {}  {}",
        field(event, "at_ms")
            .as_u64()
            .map(clock)
            .unwrap_or_else(|| "-".into()),
        cell(field(event, "kind")),
        fields.join(" ")
    )
    .trim_end()
    .to_owned()
}

/// `explain`: `GET /v1/children/{id}/explain`.
pub fn explain(client: &AdminClient, json: bool, id: &str) -> Result<(), CtlError> {
    let answer = client.get(&format!("/v1/children/{}/explain", encode_segment(id)))?;
    if json {
        print_json(&answer);
        return Ok(());
    }
    let mut out = String::new();
    out.push_str(&format!(
        "child       {} ({})\n",
        cell(field(&answer, "id")),
        cell(field(&answer, "kind"))
    ));
    out.push_str(&format!("why         {}\n", cell(field(&answer, "why"))));
    out.push_str(&format!("            {}\n", cell(field(&answer, "detail"))));
    let nodes: Vec<String> = field(&answer, "nodes")
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| {
            let role = field(n, "role")
                .as_str()
                .map(|r| format!(" {r}"))
                .unwrap_or_default();
            format!(
                "{} (pid {}{role})",
                cell(field(n, "node")),
                cell(field(n, "pid"))
            )
        })
        .collect();
    out.push_str(&format!(
        "runs on     {}\n",
        if nodes.is_empty() {
            "nowhere".to_owned()
        } else {
            nodes.join(", ")
        }
    ));
    out.push_str(&format!(
        "ring owners {}\n",
        names(field(&answer, "owners")).join(", ")
    ));
    out.push_str(&format!(
        "belongs on  {} (placement: {})\n",
        names(field(&answer, "belongs_on")).join(", "),
        cell(field(&answer, "placement"))
    ));
    out.push_str(&format!(
        "declared    {}  durable {}  (as node {} sees it)\n",
        yes_no(field(&answer, "declared")),
        yes_no(field(&answer, "durable")),
        cell(field(&answer, "node"))
    ));
    if let Some(grace) = field(&answer, "nodedown_grace_ms").as_u64() {
        let since = field(&answer, "down_since_ms")
            .as_u64()
            .map(|ms| format!(", down since {}", clock(ms)))
            .unwrap_or_default();
        out.push_str(&format!("grace       {grace} ms{since}\n"));
    }
    let events = field(&answer, "recent_events")
        .as_array()
        .cloned()
        .unwrap_or_default();
    out.push_str(&format!("recent events ({}):\n", events.len()));
    for event in &events {
        out.push_str(&format!("  {}\n", event_line(event)));
    }
    print!("{out}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_line_shows_time_kind_and_fields() {
        let event = json!({
            "seq": 1, "at_ms": 3_723_004u64, "kind": "child_started",
            "event": {"id": "c1", "node": "a@h", "pid": 7}
        });
        assert_eq!(
            event_line(&event),
            "01:02:03.004  child_started  id=c1 node=a@h pid=7"
        );
    }
}
