//! `process_hub::memory_release` against the real allocator: memory freed in the middle of the
//! heap stays resident until it is released, and the watcher releases it once a burst is over.
//! The test runs in a process of its own (`common::alone`), so that no other test allocates meanwhile.

#![cfg(all(target_os = "linux", target_env = "gnu"))]

use crate::common::alone;

use std::time::{Duration, Instant};

use process_hub::memory_release::{self, MemoryRelease};

const MIB: u64 = 1024 * 1024;

/// Allocates about 64 MiB in 1 KiB blocks, touches them, and keeps one block in 64: what a burst
/// leaves (its long-lived allocations scattered among the freed ones). The survivors are returned.
fn burst() -> Vec<Vec<u8>> {
    keep_one_in_64(allocate())
}

/// A burst's allocations: about 64 MiB in 1 KiB blocks, touched.
fn allocate() -> Vec<Vec<u8>> {
    (0..65_536).map(|i| vec![(i % 251) as u8; 1024]).collect()
}

/// Frees all but one block in 64 of `blocks`; returns the survivors.
fn keep_one_in_64(blocks: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    blocks
        .into_iter()
        .enumerate()
        .filter(|(i, _)| i % 64 == 63)
        .map(|(_, b)| b)
        .collect()
}

fn resident() -> u64 {
    memory_release::resident_bytes().expect("/proc/self/statm")
}

#[test]
fn freed_memory_goes_back_to_the_system_when_asked_and_after_a_burst() {
    if alone::ran_in_own_process(
        module_path!(),
        "freed_memory_goes_back_to_the_system_when_asked_and_after_a_burst",
    ) {
        return;
    }
    assert!(memory_release::supported());

    // Asked directly.
    let kept = burst();
    let before = resident();
    assert!(
        memory_release::release_now(),
        "glibc had free pages to return"
    );
    let after = resident();
    assert!(
        after + 32 * MIB < before,
        "resident {} MiB before the release, {} MiB after",
        before / MIB,
        after / MIB
    );
    drop(kept);
    memory_release::release_now();

    // By the watcher, once the burst stops growing.
    let config = MemoryRelease {
        period: Duration::from_millis(100),
        growth: 8 * MIB,
    };
    assert!(memory_release::start(config), "the first start starts it");
    assert!(!memory_release::start(config), "one watcher per process");
    let low = resident();
    // The peak is read while every block is in use: the watcher, which may run at any moment
    // once the blocks are freed, has nothing to release before.
    let blocks = allocate();
    let high = resident();
    let kept = keep_one_in_64(blocks);
    assert!(
        high > low + 32 * MIB,
        "the burst is resident until released"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while resident() + 32 * MIB > high {
        assert!(
            Instant::now() < deadline,
            "the watcher did not release the burst: {} MiB resident, {} MiB at its peak",
            resident() / MIB,
            high / MIB
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(kept.len(), 1024, "the survivors are still there");
    assert!(kept.iter().all(|b| b.len() == 1024));
}
