//! What registry changes cost on the wire, read from the nodes' own counters
//! (`process_hub_wire_frames_total` and `process_hub_wire_bytes_total`, direction `out`, every
//! peer): the frames and bytes the cluster sent while N children were started and every
//! registry came to hold them, less what the same cluster sends while nothing changes
//! (heartbeats, periodic syncs, gossip rounds) over as long, per change and per node.
//!
//! The counters count every frame a node sends, not only the registry's, so the idle rate is
//! measured first on the formed, empty cluster ([`IDLE_WINDOW`]) and subtracted; both the raw
//! and the idle figures are reported beside the net ones, so a reader sees how much of the
//! traffic the subtraction removed.

use std::time::{Duration, Instant};

use process_hub::telemetry::metrics::{BYTES, FRAMES};
use serde::Serialize;

use crate::harness::AdminClient;

/// How long the idle traffic is counted before the children start: ten heartbeats at the
/// default 500 ms, so that the idle rate is an average over many rounds.
pub const IDLE_WINDOW: Duration = Duration::from_secs(5);

/// Frames and bytes sent (direction `out`), summed over peers and nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct WireTotals {
    /// Frames sent.
    pub frames: f64,
    /// Bytes sent.
    pub bytes: f64,
}

impl WireTotals {
    fn minus(self, other: WireTotals) -> WireTotals {
        WireTotals {
            frames: (self.frames - other.frames).max(0.0),
            bytes: (self.bytes - other.bytes).max(0.0),
        }
    }
}

/// Sums the `out` samples of the frame and byte counters in a Prometheus text exposition.
/// Lines of other metrics, other directions, comments and values that are not numbers are
/// skipped (the text comes from a node, so nothing in it is trusted to be well formed).
pub fn parse_out_totals(text: &str) -> WireTotals {
    let mut totals = WireTotals::default();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || !line.contains("direction=\"out\"") {
            continue;
        }
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        if !value.is_finite() || value < 0.0 {
            continue;
        }
        let name = series.split('{').next().unwrap_or_default().trim();
        if name == FRAMES {
            totals.frames += value;
        } else if name == BYTES {
            totals.bytes += value;
        }
    }
    totals
}

/// The cluster's summed `out` totals; a node that cannot be read fails the reading (a
/// reading short of a node would count its frames as never sent).
pub fn cluster_totals(clients: &[AdminClient]) -> Result<WireTotals, String> {
    let mut sum = WireTotals::default();
    for client in clients {
        let text = client
            .get_text("/metrics")
            .map_err(|e| format!("{}: /metrics: {e}", client.addr()))?;
        let one = parse_out_totals(&text);
        sum.frames += one.frames;
        sum.bytes += one.bytes;
    }
    Ok(sum)
}

/// A reading of the cluster's totals, and when.
#[derive(Clone, Copy, Debug)]
pub struct Reading {
    at: Instant,
    totals: WireTotals,
}

impl Reading {
    /// Reads every node now.
    pub fn take(clients: &[AdminClient]) -> Result<Reading, String> {
        let totals = cluster_totals(clients)?;
        Ok(Reading {
            at: Instant::now(),
            totals,
        })
    }
}

/// The wire cost of a phase of `changes` registry changes on `nodes` nodes.
#[derive(Clone, Debug, Serialize)]
pub struct WireFigures {
    /// Registry changes in the phase (children started).
    pub changes: usize,
    /// Nodes that sent.
    pub nodes: usize,
    /// The phase's length, in ms.
    pub phase_ms: u64,
    /// Frames and bytes sent in the phase, every node, every kind.
    pub raw: WireTotals,
    /// What the idle cluster sends per second, every node (heartbeats, periodic syncs).
    pub idle_per_s: WireTotals,
    /// Frames per registry change per node: (raw − idle × phase) / changes / nodes.
    pub frames_per_change_per_node: f64,
    /// Bytes per registry change per node, as the frames.
    pub bytes_per_change_per_node: f64,
    /// The share of the phase's raw frames the idle traffic accounts for (near 1 means the
    /// net figures are a small difference of large ones).
    pub idle_share_of_frames: f64,
}

/// The idle rate between two readings of the quiet cluster.
pub fn idle_rate(from: &Reading, to: &Reading) -> WireTotals {
    let secs = to.at.duration_since(from.at).as_secs_f64().max(1e-3);
    let d = to.totals.minus(from.totals);
    WireTotals {
        frames: d.frames / secs,
        bytes: d.bytes / secs,
    }
}

/// The figures of a phase from `from` to `to` with `changes` changes on `nodes` nodes.
pub fn figures(
    from: &Reading,
    to: &Reading,
    idle_per_s: WireTotals,
    changes: usize,
    nodes: usize,
) -> WireFigures {
    let phase = to.at.duration_since(from.at);
    phase_figures(
        to.totals.minus(from.totals),
        phase,
        idle_per_s,
        changes,
        nodes,
    )
}

/// [`figures`] from the raw totals of a phase of length `phase`.
pub fn phase_figures(
    raw: WireTotals,
    phase: Duration,
    idle_per_s: WireTotals,
    changes: usize,
    nodes: usize,
) -> WireFigures {
    let secs = phase.as_secs_f64();
    let idle = WireTotals {
        frames: idle_per_s.frames * secs,
        bytes: idle_per_s.bytes * secs,
    };
    let net = raw.minus(idle);
    let per = (changes.max(1) * nodes.max(1)) as f64;
    WireFigures {
        changes,
        nodes,
        phase_ms: phase.as_millis() as u64,
        raw,
        idle_per_s,
        frames_per_change_per_node: net.frames / per,
        bytes_per_change_per_node: net.bytes / per,
        idle_share_of_frames: if raw.frames > 0.0 {
            (idle.frames / raw.frames).min(1.0)
        } else {
            0.0
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_out_samples_of_the_two_counters_are_summed() {
        let text = format!(
            "# TYPE {FRAMES} counter\n\
             {FRAMES}{{direction=\"out\",peer=\"b\"}} 10\n\
             {FRAMES}{{direction=\"in\",peer=\"b\"}} 99\n\
             {FRAMES}{{direction=\"out\",peer=\"c\"}} 5\n\
             {BYTES}{{direction=\"out\",peer=\"b\"}} 1000\n\
             {FRAMES}_dropped{{direction=\"out\",peer=\"b\"}} 7\n\
             other_metric{{direction=\"out\"}} 3\n\
             {FRAMES}{{direction=\"out\",peer=\"d\"}} NaN\n\
             {FRAMES}{{direction=\"out\",peer=\"e\"}} not-a-number\n\
             {BYTES}{{direction=\"out\",peer=\"e\"}} -4\n"
        );
        let totals = parse_out_totals(&text);
        assert_eq!(totals.frames, 15.0);
        assert_eq!(totals.bytes, 1000.0);
        assert_eq!(parse_out_totals(""), WireTotals::default());
    }

    #[test]
    fn the_idle_traffic_of_the_phase_is_taken_out_per_change_and_node() {
        let raw = WireTotals {
            frames: 1_200.0,
            bytes: 120_000.0,
        };
        let idle = WireTotals {
            frames: 100.0,
            bytes: 2_000.0,
        };
        // 2 s of idle traffic: 200 frames, 4,000 bytes; 1,000 frames and 116,000 bytes net,
        // over 100 changes on 5 nodes.
        let f = phase_figures(raw, Duration::from_secs(2), idle, 100, 5);
        assert!((f.frames_per_change_per_node - 2.0).abs() < 1e-9, "{f:?}");
        assert!((f.bytes_per_change_per_node - 232.0).abs() < 1e-9, "{f:?}");
        assert!((f.idle_share_of_frames - 200.0 / 1_200.0).abs() < 1e-9);
        // More idle traffic than the phase sent: nothing net, not a negative cost.
        let f = phase_figures(raw, Duration::from_secs(100), idle, 100, 5);
        assert_eq!(f.frames_per_change_per_node, 0.0);
        assert_eq!(f.idle_share_of_frames, 1.0);
    }
}
