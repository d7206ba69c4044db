//! Byte budgets: how much one outbound frame may carry, and how a batch is cut to fit.
//!
//! The transport refuses a frame above [`MAX_FRAME_BYTES`]; a batch that encodes larger fails
//! to encode, and fails again on every retry. Every batch the hub sends (full syncs and
//! deltas of the registry, start batches of the pipeline, re-placements and handovers, declared
//! offers) is therefore cut by **bytes** to [`FRAME_BUDGET_BYTES`], a quarter of the limit, which
//! leaves room for the frame's envelope and keeps one frame from holding a link for long. Any
//! single child fits a budget on its own: [`MAX_CHILD_BYTES`] is half of it.

use bincode::Options;
use serde::Serialize;

use super::MAX_FRAME_BYTES;
use crate::model::MAX_CHILD_BYTES;

/// The most one outbound batch frame carries in items (4 MiB, a quarter of the frame limit).
pub const FRAME_BUDGET_BYTES: u64 = MAX_FRAME_BYTES / 4;

const _: () = assert!(MAX_CHILD_BYTES * 2 <= FRAME_BUDGET_BYTES);

/// The bytes `value` takes inside a frame; `u64::MAX` when it cannot be encoded.
pub fn encoded_len<T: Serialize + ?Sized>(value: &T) -> u64 {
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_little_endian()
        .serialized_size(value)
        .unwrap_or(u64::MAX)
}

/// Cuts `items` into consecutive batches of at most `budget` encoded bytes each, in order. An
/// item larger than the budget travels alone. Never returns an empty batch; returns no batch
/// for no items.
pub fn chunk_by_bytes<T: Serialize>(items: Vec<T>, budget: u64) -> Vec<Vec<T>> {
    let mut chunks = Vec::new();
    let mut current = Vec::new();
    let mut used = 0u64;
    for item in items {
        let len = encoded_len(&item);
        if !current.is_empty() && used.saturating_add(len) > budget {
            chunks.push(std::mem::take(&mut current));
            used = 0;
        }
        used = used.saturating_add(len);
        current.push(item);
    }
    if !current.is_empty() {
        chunks.push(current);
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_item_above_the_budget_travels_alone() {
        let items = vec!["a".repeat(10), "b".repeat(100), "c".repeat(10)];
        let chunks = chunk_by_bytes(items, 40);
        let sizes: Vec<usize> = chunks.iter().map(Vec::len).collect();
        assert_eq!(sizes, [1, 1, 1]);
    }

    proptest! {
        /// Every item is kept once, in order, and every batch of two or more items fits.
        #[test]
        fn chunks_keep_order_and_fit(lens in proptest::collection::vec(0usize..64, 0..60), budget in 8u64..200) {
            let items: Vec<String> = lens.iter().map(|n| "x".repeat(*n)).collect();
            let chunks = chunk_by_bytes(items.clone(), budget);
            prop_assert_eq!(chunks.concat(), items);
            for chunk in &chunks {
                prop_assert!(!chunk.is_empty());
                if chunk.len() > 1 {
                    let total: u64 = chunk.iter().map(encoded_len).sum();
                    prop_assert!(total <= budget);
                }
            }
        }
    }
}
