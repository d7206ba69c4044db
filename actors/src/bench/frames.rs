//! The frame-sealing benchmark: what it costs to seal a frame (keyed BLAKE3 over the encoded
//! message) and to check a seal, per frame size, against the same frames sent and received
//! open (encode alone; decode alone) in the same run; the same for compact frames (wire
//! version 3), and what compact encoding saves on a frame of registry rows.

use std::hint::black_box;
use std::time::Instant;

use clap::Args;
use process_hub::cluster::wire::seal::{self, Arrived, SealKey, COMPACT_VERSION, SEALED_VERSION};
use process_hub::cluster::wire::{self, WireMsg};
use serde_json::json;

/// Flags of `process-hub bench frames`.
#[derive(Args, Debug)]
pub struct FramesArgs {
    /// Payload sizes to measure, in bytes.
    #[arg(long, value_delimiter = ',', default_values_t = [64usize, 1024, 16 * 1024, 256 * 1024, 1024 * 1024])]
    sizes: Vec<usize>,
    /// Bytes to push through per size and mode (more for steadier figures).
    #[arg(long, default_value_t = 64 * 1024 * 1024)]
    volume: usize,
    /// Print one JSON object on stdout instead of a summary.
    #[arg(long)]
    json: bool,
}

/// Nanoseconds per iteration of `f`, over `iterations`.
fn per_iteration(iterations: usize, mut f: impl FnMut()) -> f64 {
    let started = Instant::now();
    for _ in 0..iterations {
        f();
    }
    started.elapsed().as_nanos() as f64 / iterations as f64
}

/// A full-sync part of 1,000 counters' rows, as a host sends it, sealed at version 2 and
/// compact at version 3: the bytes each takes.
fn registry_rows_frame(key: &SealKey) -> Result<serde_json::Value, String> {
    use process_hub::model::{ChildSpec, Metadata, Row};
    const ROWS: usize = 1_000;
    let rows = (0..ROWS)
        .map(|i| {
            let mut row = Row::authored(
                ChildSpec::new(format!("child-{i:06}"), "counter"),
                Metadata::new(),
                "n1@127.0.0.1",
                1_800_000_000_000 + i as u64,
                false,
            )
            .map_err(|e| e.to_string())?;
            row.node_pids.insert("n1@127.0.0.1".into(), 100 + i as u64);
            Ok(row)
        })
        .collect::<Result<Vec<Row>, String>>()?;
    let msg = WireMsg::FullSyncPart {
        sync_id: 1,
        index: 0,
        total: 1,
        rows,
    };
    let open = wire::encode("bench", "n1@127.0.0.1", &msg).map_err(|e| e.to_string())?;
    let sealed = seal::seal(&open, key).map_err(|e| e.to_string())?;
    let body =
        wire::encode_compact_body("bench", "n1@127.0.0.1", &msg).map_err(|e| e.to_string())?;
    let compact = seal::seal_compact(&body, key);
    Ok(json!({
        "rows": ROWS,
        "sealed_frame_bytes": sealed.len(),
        "compact_frame_bytes": compact.len(),
        "compact_to_sealed": compact.len() as f64 / sealed.len() as f64,
    }))
}

/// Runs the benchmark and prints the result.
pub fn run(args: &FramesArgs) -> Result<(), String> {
    if args.sizes.is_empty() || args.sizes.contains(&0) || args.volume == 0 {
        return Err("--sizes must list sizes of at least 1 byte, --volume at least 1".into());
    }
    let key = SealKey::random();
    let mut rows = Vec::new();
    for &size in &args.sizes {
        let msg = WireMsg::ChildCast {
            id: "bench".into(),
            payload: vec![0x5a; size],
            hops: 0,
        };
        let iterations = (args.volume / size).clamp(20, 2_000_000);
        eprintln!("frames bench: {size} B payload, {iterations} frames per mode");
        let open = wire::encode("bench", "a@bench", &msg).map_err(|e| e.to_string())?;
        let sealed = seal::seal(&open, &key).map_err(|e| e.to_string())?;
        let send_open = per_iteration(iterations, || {
            black_box(wire::encode("bench", "a@bench", black_box(&msg)).ok());
        });
        let send_sealed = per_iteration(iterations, || {
            let open = wire::encode("bench", "a@bench", black_box(&msg)).ok();
            black_box(open.and_then(|o| seal::seal(&o, &key).ok()));
        });
        let receive_open = per_iteration(iterations, || {
            black_box(wire::decode_for("bench", black_box(&open)).ok());
        });
        let receive_sealed = per_iteration(iterations, || {
            if let Ok(arrived @ Arrived::Sealed { body, .. }) =
                seal::arrived("bench", black_box(&sealed))
            {
                if arrived.verify(&key) {
                    black_box(wire::decode_body(SEALED_VERSION, body).ok());
                }
            }
        });
        let compact = seal::seal_compact(
            &wire::encode_compact_body("bench", "a@bench", &msg).map_err(|e| e.to_string())?,
            &key,
        );
        let send_compact = per_iteration(iterations, || {
            let body = wire::encode_compact_body("bench", "a@bench", black_box(&msg)).ok();
            black_box(body.map(|b| seal::seal_compact(&b, &key)));
        });
        let receive_compact = per_iteration(iterations, || {
            if let Ok(arrived @ Arrived::Sealed { body, .. }) =
                seal::arrived("bench", black_box(&compact))
            {
                if arrived.verify(&key) {
                    black_box(wire::decode_body(COMPACT_VERSION, body).ok());
                }
            }
        });
        rows.push(json!({
            "payload_bytes": size,
            "frame_bytes": sealed.len(),
            "send_open_ns": send_open,
            "send_sealed_ns": send_sealed,
            "send_ratio": send_sealed / send_open,
            "receive_open_ns": receive_open,
            "receive_sealed_ns": receive_sealed,
            "receive_ratio": receive_sealed / receive_open,
            "seal_overhead_bytes": sealed.len() - open.len(),
            "compact_frame_bytes": compact.len(),
            "send_compact_ns": send_compact,
            "send_compact_ratio": send_compact / send_open,
            "receive_compact_ns": receive_compact,
            "receive_compact_ratio": receive_compact / receive_open,
        }));
    }
    let registry_rows = registry_rows_frame(&key)?;
    let report = json!({
        "bench": "frames",
        "mac": "blake3-keyed",
        "sizes": rows,
        "registry_rows": registry_rows,
    });
    if args.json {
        println!("{report}");
    } else {
        for row in &rows {
            println!(
                "{:>9} B  send {:>10.0} ns open, {:>10.0} ns sealed ({:.2}x), {:>10.0} ns compact ({:.2}x)  receive {:>10.0} ns open, {:>10.0} ns sealed ({:.2}x), {:>10.0} ns compact ({:.2}x)",
                row["payload_bytes"],
                row["send_open_ns"].as_f64().unwrap_or(0.0),
                row["send_sealed_ns"].as_f64().unwrap_or(0.0),
                row["send_ratio"].as_f64().unwrap_or(0.0),
                row["send_compact_ns"].as_f64().unwrap_or(0.0),
                row["send_compact_ratio"].as_f64().unwrap_or(0.0),
                row["receive_open_ns"].as_f64().unwrap_or(0.0),
                row["receive_sealed_ns"].as_f64().unwrap_or(0.0),
                row["receive_ratio"].as_f64().unwrap_or(0.0),
                row["receive_compact_ns"].as_f64().unwrap_or(0.0),
                row["receive_compact_ratio"].as_f64().unwrap_or(0.0),
            );
        }
        println!(
            "{} registry rows: {} B sealed, {} B compact ({:.2}x)",
            registry_rows["rows"],
            registry_rows["sealed_frame_bytes"],
            registry_rows["compact_frame_bytes"],
            registry_rows["compact_to_sealed"].as_f64().unwrap_or(0.0),
        );
    }
    Ok(())
}
