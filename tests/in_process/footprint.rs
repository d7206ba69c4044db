//! What the hub keeps in memory per child, counted exactly by a counting allocator rather than
//! read off a process's resident size (which a test cannot read precisely): the registry row
//! every node holds, and what a child costs its host beyond the bare ractor actor.
//!
//! Every measurement runs in one test function, in a process of its own (`common::alone`), so
//! that no other test allocates while it counts. The allocator is this test binary's; it counts
//! only once the test has turned it on, so the other tests of the binary pay one load per
//! allocation.

use crate::common::{self, alone};

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use process_hub::storage::{MemoryStorage, Mutation, Storage};
use process_hub::{ChildSpec, Hub, Metadata, ProcessHub, Row, StartOptions, StopOptions};
use process_hub_actors::counter::Counter;

/// The heap in use and the number of live allocations, counted at the allocator.
struct Counting;

/// Whether the allocator counts: off until the footprint test, alone in its process, starts.
static COUNTING: AtomicBool = AtomicBool::new(false);
static LIVE_BYTES: AtomicI64 = AtomicI64::new(0);
static LIVE_ALLOCS: AtomicI64 = AtomicI64::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            LIVE_BYTES.fetch_add(layout.size() as i64, Ordering::Relaxed);
            LIVE_ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's layout contract is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if COUNTING.load(Ordering::Relaxed) {
            LIVE_BYTES.fetch_sub(layout.size() as i64, Ordering::Relaxed);
            LIVE_ALLOCS.fetch_sub(1, Ordering::Relaxed);
        }
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            LIVE_BYTES.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        }
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// What malloc adds to each allocation on 64-bit glibc (its header, and rounding to 16 bytes on
/// average), so that figures compare with resident memory.
const MALLOC_OVERHEAD: i64 = 16;

#[derive(Clone, Copy, Debug)]
struct Heap {
    bytes: i64,
    allocs: i64,
}

fn heap() -> Heap {
    Heap {
        bytes: LIVE_BYTES.load(Ordering::Relaxed),
        allocs: LIVE_ALLOCS.load(Ordering::Relaxed),
    }
}

/// Bytes per item between two readings, malloc's overhead included.
fn per_item(before: Heap, after: Heap, n: usize) -> i64 {
    let bytes = after.bytes - before.bytes;
    let allocs = after.allocs - before.allocs;
    (bytes + allocs * MALLOC_OVERHEAD) / n as i64
}

const N: usize = 10_000;

/// A row as a node holds it for a running child: a hub-placed counter bound to one node.
fn running_row(i: usize) -> Row {
    let mut row = Row::authored(
        ChildSpec::new(format!("counter-{i:06}"), "counter"),
        Metadata::new(),
        "n1@127.0.0.1",
        1_764_000_000_000,
        false,
    )
    .unwrap();
    row.node_pids.insert("n1@127.0.0.1".into(), 100 + i as u64);
    row
}

fn registry_row_bytes() -> i64 {
    let store = MemoryStorage::new();
    let before = heap();
    let rows: Vec<Mutation> = (0..N).map(|i| Mutation::put(running_row(i))).collect();
    store.apply_owned(rows);
    let after = heap();
    assert_eq!(store.len(), N);
    // The batch's rows were moved in and its buffer freed: what remains is what the store keeps.
    per_item(before, after, N)
}

async fn bare_actor_bytes() -> i64 {
    let before = heap();
    let mut actors = Vec::with_capacity(N);
    for _ in 0..N {
        let (actor, _join) = ractor::Actor::spawn(None, Counter, None).await.unwrap();
        actors.push(actor);
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let after = heap();
    for actor in &actors {
        actor.stop(None);
    }
    for actor in actors {
        while actor.get_status() != ractor::ActorStatus::Stopped {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }
    // The Vec of refs the test holds is not the actor's cost.
    per_item(before, after, N) - std::mem::size_of::<ractor::ActorRef<()>>() as i64
}

async fn hosted_child_bytes(hub: &Hub) -> i64 {
    let specs: Vec<ChildSpec> = (0..N)
        .map(|i| ChildSpec::new(format!("counter-{i:06}"), "counter"))
        .collect();
    // Warm up: the hub's first start initializes what every later one shares.
    let warm: Vec<ChildSpec> = (0..100)
        .map(|i| ChildSpec::new(format!("warm-{i:06}"), "counter"))
        .collect();
    let ids: Vec<_> = warm.iter().map(|s| s.id.clone()).collect();
    assert!(hub
        .start_children(warm, StartOptions::new())
        .await
        .unwrap()
        .is_ok());
    hub.stop_children(ids, StopOptions::new()).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;

    let before = heap();
    let result = hub
        .start_children(specs, StartOptions::new())
        .await
        .unwrap();
    assert!(result.is_ok(), "{result:?}");
    drop(result);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    per_item(before, heap(), N)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_costs_the_hub_little_beyond_its_actor() {
    if alone::ran_in_own_process(
        module_path!(),
        "a_child_costs_the_hub_little_beyond_its_actor",
    ) {
        return;
    }
    // Alone in this process from here: count every allocation.
    COUNTING.store(true, Ordering::SeqCst);
    let row = registry_row_bytes();
    let actor = bare_actor_bytes().await;
    let hub = common::spawn_with(ProcessHub::new("footprint")).await;
    let hosted = hosted_child_bytes(&hub).await;
    let own = hosted - actor;
    eprintln!(
        "footprint: registry row {row} B, bare actor {actor} B, hosted child {hosted} B, \
         the hub's own on its host {own} B (row included)"
    );
    hub.shutdown().await.unwrap();
    assert!(actor > 0 && own > 0);
    // Every node holds a row for every child: one packed allocation with the id inside, about
    // 35 bytes in a 48-byte chunk, and its pointer in the map, about 90 bytes in all (as a
    // `Row` of separate allocations it was about 860).
    assert!(row <= 110, "a registry row costs {row} B");
    // On its host, a child's row plus the hub's bookkeeping (supervisor and lookup tables):
    // about 240 bytes, since the supervisor keeps a child's spec without its id and with its
    // kind's name shared, and its index by actor is keyed by pid (it was about 400 with whole
    // specs and actor ids, 452 with B-tree maps).
    assert!(own <= 270, "the hub keeps {own} B per hosted child");
    // With the rows of two more nodes, under the 1,000-byte budget.
    assert!(
        own + 2 * row <= 1_000,
        "the hub keeps {own} B per hosted child"
    );
}
