//! The frame-sealing benchmark: what it costs to seal a frame (keyed BLAKE3 over the encoded
//! message) and to check a seal, per frame size, against the same frames sent and received
//! open (encode alone; decode alone) in the same run.

use std::hint::black_box;
use std::time::Instant;

use clap::Args;
use process_hub::cluster::wire::seal::{self, Arrived, SealKey, SEALED_VERSION};
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
        }));
    }
    let report = json!({ "bench": "frames", "mac": "blake3-keyed", "sizes": rows });
    if args.json {
        println!("{report}");
    } else {
        for row in &rows {
            println!(
                "{:>9} B  send {:>10.0} ns open, {:>10.0} ns sealed ({:.2}x)  receive {:>10.0} ns open, {:>10.0} ns sealed ({:.2}x)",
                row["payload_bytes"],
                row["send_open_ns"].as_f64().unwrap_or(0.0),
                row["send_sealed_ns"].as_f64().unwrap_or(0.0),
                row["send_ratio"].as_f64().unwrap_or(0.0),
                row["receive_open_ns"].as_f64().unwrap_or(0.0),
                row["receive_sealed_ns"].as_f64().unwrap_or(0.0),
                row["receive_ratio"].as_f64().unwrap_or(0.0),
            );
        }
    }
    Ok(())
}
