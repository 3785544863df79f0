//! Pool logic tests, all without a GPU: a mock allocator that fails on demand for the OOM ladder
//! and the counters, the host allocator for property and concurrency tests.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::deferred::tests::{exclusive, shared};
use crate::error::{Error, Result};
use crate::stream::Stream;

/// Fails the next `fail_next` allocations with out-of-memory; counts every call.
struct Mock {
    device: i32,
    fail_next: AtomicUsize,
    fail_other: AtomicBool,
    fail_free: AtomicBool,
    allocs: AtomicUsize,
    trims: AtomicUsize,
    syncs: AtomicUsize,
    next: AtomicU64,
}

/// Each mock gets its own fake device (< -1) so that the OOM ladder of one test, which trims
/// every pool of its device, never touches another test's mock.
static NEXT_DEVICE: AtomicI32 = AtomicI32::new(-1000);

impl Mock {
    fn new() -> Arc<Mock> {
        Self::on(NEXT_DEVICE.fetch_sub(1, SeqCst))
    }
    fn on(device: i32) -> Arc<Mock> {
        Arc::new(Mock {
            device,
            fail_next: AtomicUsize::new(0),
            fail_other: AtomicBool::new(false),
            fail_free: AtomicBool::new(false),
            allocs: AtomicUsize::new(0),
            trims: AtomicUsize::new(0),
            syncs: AtomicUsize::new(0),
            next: AtomicU64::new(0x10000),
        })
    }
}

impl RawAllocator for Mock {
    fn device(&self) -> i32 {
        self.device
    }
    fn alloc(&self, bytes: usize, _s: &Stream) -> std::result::Result<u64, RawError> {
        self.allocs.fetch_add(1, SeqCst);
        if self.fail_other.load(SeqCst) {
            return Err(RawError::Other(Error::invalid("mock failure")));
        }
        if self
            .fail_next
            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(RawError::OutOfMemory);
        }
        Ok(self.next.fetch_add(bytes as u64, SeqCst))
    }
    unsafe fn free(&self, _p: u64, _b: usize, _s: &Stream) -> Result<()> {
        if self.fail_free.load(SeqCst) {
            return Err(Error::invalid("mock free failure"));
        }
        Ok(())
    }
    fn trim(&self, _keep: usize) -> Result<()> {
        self.trims.fetch_add(1, SeqCst);
        Ok(())
    }
    fn synchronize(&self) -> Result<()> {
        self.syncs.fetch_add(1, SeqCst);
        Ok(())
    }
    fn reserved_bytes(&self) -> Result<u64> {
        Ok(0)
    }
    fn used_bytes(&self) -> Result<u64> {
        Ok(0)
    }
}

fn pool_over(mock: &Arc<Mock>, quota: Option<u64>, eviction: bool) -> MemoryPool {
    MemoryPool::with_allocator("test", mock.clone(), quota, eviction)
}

/// The counters that a failed allocation must leave alone.
fn byte_and_count(s: &PoolStats) -> [u64; 6] {
    [
        s.current_bytes,
        s.peak_bytes,
        s.allocated_bytes,
        s.freed_bytes,
        s.num_allocs,
        s.num_frees,
    ]
}

#[test]
fn retry_then_success_counts_a_retry() {
    let _g = shared();
    let m = Mock::new();
    let pool = pool_over(&m, None, true);
    m.fail_next.store(1, SeqCst);
    let b = pool.allocate(100, None).unwrap();
    let s = pool.stats().unwrap();
    assert_eq!((s.num_retries, s.num_ooms, s.num_allocs), (1, 0, 1));
    assert_eq!(
        (s.current_bytes, s.peak_bytes, s.allocated_bytes),
        (100, 100, 100)
    );
    // The ladder: trim, synchronize, trim, retry.
    assert_eq!(m.trims.load(SeqCst), 2);
    assert_eq!(m.syncs.load(SeqCst), 1);
    assert_eq!(m.allocs.load(SeqCst), 2);
    drop(b);
    let s = pool.stats().unwrap();
    assert_eq!((s.current_bytes, s.freed_bytes, s.num_frees), (0, 100, 1));
}

#[test]
fn two_failures_give_out_of_memory_and_leave_counters() {
    let _g = shared();
    let m = Mock::new();
    let pool = pool_over(&m, Some(1 << 20), true);
    let live = pool.allocate(64, None).unwrap();
    let before = pool.stats().unwrap();
    m.fail_next.store(2, SeqCst);
    match pool.allocate(1000, None) {
        Err(Error::OutOfMemory {
            requested,
            context,
            stats,
            device_free,
            ..
        }) => {
            assert_eq!(requested, 1000);
            assert_eq!(context, "test");
            assert_eq!(stats.num_ooms, 1);
            assert_eq!(stats.current_bytes, 64);
            assert_eq!(device_free, None);
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    let after = pool.stats().unwrap();
    assert_eq!(byte_and_count(&before), byte_and_count(&after));
    assert_eq!((after.num_ooms, after.num_retries), (1, 1));
    assert_eq!(after.quota_rejections, 0);
    // Ladder (trim, sync, trim) plus the final clean-up trim.
    assert_eq!((m.trims.load(SeqCst), m.syncs.load(SeqCst)), (3, 1));
    // The reservation was undone: the whole quota minus the live buffer is still usable.
    let big = pool.allocate((1 << 20) - 64, None).unwrap();
    drop((big, live));
    assert_eq!(pool.current_bytes(), 0);
}

#[test]
fn eviction_disabled_raises_at_first_failure() {
    let _g = shared();
    let m = Mock::new();
    let pool = pool_over(&m, None, false);
    m.fail_next.store(1, SeqCst);
    assert!(matches!(
        pool.allocate(10, None),
        Err(Error::OutOfMemory { .. })
    ));
    // No ladder: one attempt, no sync, no trim of other pools; only the final clean-up trim of
    // this pool's own unused memory.
    assert_eq!(m.trims.load(SeqCst), 1);
    assert_eq!(m.syncs.load(SeqCst), 0);
    assert_eq!(m.allocs.load(SeqCst), 1);
    let s = pool.stats().unwrap();
    assert_eq!((s.num_retries, s.num_ooms, s.num_allocs), (0, 1, 0));
    pool.set_enable_eviction(true);
    assert!(pool.enable_eviction());
}

#[test]
fn ladder_trims_every_pool_on_the_device() {
    let _g = shared();
    let a = Mock::new();
    let b = Mock::on(a.device);
    let other = Mock::new();
    let pa = pool_over(&a, None, true);
    let _pb = pool_over(&b, None, true);
    let _po = pool_over(&other, None, true);
    a.fail_next.store(1, SeqCst);
    pa.allocate(8, None).unwrap();
    assert_eq!(b.trims.load(SeqCst), 2);
    assert_eq!(other.trims.load(SeqCst), 0);
}

#[test]
fn quota_rejection_changes_no_byte_counter() {
    let _g = shared();
    let m = Mock::new();
    let pool = pool_over(&m, Some(1000), true);
    let _a = pool.allocate(600, None).unwrap();
    let before = pool.stats().unwrap();
    match pool.allocate(500, None) {
        Err(Error::QuotaExceeded {
            requested,
            quota,
            current,
            context,
        }) => assert_eq!(
            (requested, quota, current, context.as_str()),
            (500, 1000, 600, "test")
        ),
        other => panic!("expected QuotaExceeded, got {other:?}"),
    }
    let after = pool.stats().unwrap();
    assert_eq!(byte_and_count(&before), byte_and_count(&after));
    assert_eq!(after.quota_rejections, 1);
    assert_eq!((after.num_ooms, after.num_retries), (0, 0));
    assert_eq!(
        m.allocs.load(SeqCst),
        1,
        "a rejected allocation makes no allocator call"
    );
    assert_eq!(after.quota, Some(1000));
    pool.set_quota(None);
    assert_eq!(pool.quota(), None);
    let _b = pool.allocate(500, None).unwrap();
    assert_eq!(pool.current_bytes(), 1100);
}

#[test]
fn zero_bytes_give_null_buffer_without_allocator_call() {
    let _g = shared();
    let m = Mock::new();
    let pool = pool_over(&m, Some(0), true);
    let b = pool.allocate(0, None).unwrap();
    assert_eq!((b.ptr(), b.nbytes()), (0, 0));
    assert_eq!(m.allocs.load(SeqCst), 0);
    assert_eq!(pool.stats().unwrap().num_allocs, 1);
    drop(b);
    let s = pool.stats().unwrap();
    assert_eq!((s.num_frees, s.current_bytes, s.peak_bytes), (1, 0, 0));
}

#[test]
fn other_errors_pass_through_unchanged() {
    let _g = shared();
    let m = Mock::new();
    let pool = pool_over(&m, Some(100), true);
    m.fail_other.store(true, SeqCst);
    assert!(matches!(
        pool.allocate(10, None),
        Err(Error::InvalidArgument(_))
    ));
    let s = pool.stats().unwrap();
    assert_eq!(byte_and_count(&s), [0; 6]);
    assert_eq!((s.num_ooms, s.num_retries, s.quota_rejections), (0, 0, 0));
    m.fail_other.store(false, SeqCst);
    pool.allocate(100, None).unwrap();
}

#[test]
fn drop_errors_surface_at_next_allocate() {
    let _g = exclusive();
    crate::deferred::take_deferred_errors();
    let m = Mock::new();
    let pool = pool_over(&m, None, true);
    let b = pool.allocate(10, None).unwrap();
    m.fail_free.store(true, SeqCst);
    drop(b);
    assert!(crate::deferred::has_deferred_errors());
    // The failed free still counts: the buffer is gone and must not hold the quota.
    assert_eq!(pool.current_bytes(), 0);
    match pool.allocate(10, None) {
        Err(Error::Deferred { errors, omitted }) => {
            assert_eq!(errors.len(), 1);
            assert_eq!(omitted, 0);
            assert!(errors[0].to_string().contains("mock free failure"));
        }
        other => panic!("expected Deferred, got {other:?}"),
    }
    m.fail_free.store(false, SeqCst);
    pool.allocate(10, None).unwrap();
}

#[test]
fn stream_of_another_device_is_rejected() {
    let _g = shared();
    let pool = MemoryPool::new(-1, "h", None, true).unwrap();
    assert_eq!(pool.device(), -1);
    let b = pool.allocate(128, Some(&Stream::host())).unwrap();
    assert_eq!(b.ptr() % 64, 0, "host blocks are 64-byte aligned");
    assert_eq!((b.device(), b.pool_name()), (-1, "h"));
    assert!(MemoryPool::new(-5, "bad", None, true).is_err());
}

#[test]
fn device_pool_without_driver_is_no_driver() {
    if crate::driver::device_count() == 0 {
        assert!(matches!(
            MemoryPool::new(0, "gpu", None, true),
            Err(Error::NoDriver { .. })
        ));
        assert!(matches!(
            DriverPoolAllocator::new(0),
            Err(Error::NoDriver { .. })
        ));
    }
}

#[derive(Debug, Clone)]
enum Op {
    Alloc(usize),
    Free(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => prop_oneof![0usize..=64, 0usize..=4096, 0usize..=(1 << 17)].prop_map(Op::Alloc),
        2 => any::<usize>().prop_map(Op::Free),
    ]
}

fn check_invariants(pool: &MemoryPool, live: &[crate::Buffer], quota: Option<u64>) {
    let s = pool.stats().unwrap();
    let live_bytes: u64 = live.iter().map(|b| b.nbytes() as u64).sum();
    if let Some(q) = quota {
        assert!(s.current_bytes <= q, "quota {q} exceeded: {s}");
    }
    assert_eq!(s.allocated_bytes - s.freed_bytes, s.current_bytes, "{s}");
    assert!(s.peak_bytes >= s.current_bytes, "{s}");
    assert_eq!(s.num_allocs - s.num_frees, live.len() as u64, "{s}");
    assert_eq!(s.current_bytes, live_bytes, "{s}");
    assert_eq!(s.used_bytes, live_bytes, "host allocator agrees: {s}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn host_pool_counters_hold_under_random_ops(
        ops in prop::collection::vec(op(), 0..10_000),
        quota in prop::option::of(0u64..(1 << 20)),
    ) {
        let _g = shared();
        let pool = MemoryPool::new(-1, "prop", quota, true).unwrap();
        let mut live = Vec::new();
        let mut rejections = 0u64;
        for o in ops {
            match o {
                Op::Alloc(n) => match pool.allocate(n, None) {
                    Ok(b) => {
                        // Touch both ends: the block must really be n bytes of our memory.
                        if n > 0 {
                            unsafe {
                                *(b.ptr() as *mut u8) = 1;
                                *((b.ptr() + n as u64 - 1) as *mut u8) = 2;
                            }
                        }
                        live.push(b)
                    }
                    Err(Error::QuotaExceeded { .. }) => rejections += 1,
                    Err(e) => panic!("unexpected error {e}"),
                },
                Op::Free(i) => {
                    if !live.is_empty() {
                        let i = i % live.len();
                        drop(live.swap_remove(i));
                    }
                }
            }
            check_invariants(&pool, &live, quota);
        }
        prop_assert_eq!(pool.stats().unwrap().quota_rejections, rejections);
        live.clear();
        let s = pool.stats().unwrap();
        prop_assert_eq!(s.current_bytes, 0);
        prop_assert_eq!(s.num_allocs, s.num_frees);
        prop_assert_eq!(s.allocated_bytes, s.freed_bytes);
        prop_assert_eq!(s.reserved_bytes, 0);
    }
}

#[test]
fn concurrent_threads_never_exceed_the_quota() {
    let _g = shared();
    const QUOTA: u64 = 1 << 20;
    let pool = MemoryPool::new(-1, "threads", Some(QUOTA), true).unwrap();
    // Bytes held by successful allocations across all threads, raised after an allocation
    // returns and lowered before its buffer is dropped: it can never exceed the quota if the
    // reservation is atomic.
    let held = Arc::new(AtomicU64::new(0));
    let max_held = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let pool = pool.clone();
            let (held, max_held) = (held.clone(), max_held.clone());
            std::thread::spawn(move || {
                let mut rng = 0x9e3779b97f4a7c15u64 ^ (t + 1);
                let mut live: Vec<crate::Buffer> = Vec::new();
                let mut rejected = 0u64;
                for _ in 0..20_000 {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    if rng % 3 != 0 || live.is_empty() {
                        let n = (rng >> 8) as usize % (64 << 10);
                        match pool.allocate(n, None) {
                            Ok(b) => {
                                let now = held.fetch_add(n as u64, SeqCst) + n as u64;
                                max_held.fetch_max(now, SeqCst);
                                live.push(b);
                            }
                            Err(Error::QuotaExceeded { .. }) => rejected += 1,
                            Err(e) => panic!("{e}"),
                        }
                    } else {
                        let b = live.swap_remove((rng >> 3) as usize % live.len());
                        held.fetch_sub(b.nbytes() as u64, SeqCst);
                        drop(b);
                    }
                }
                for b in live.drain(..) {
                    held.fetch_sub(b.nbytes() as u64, SeqCst);
                }
                rejected
            })
        })
        .collect();
    let rejected: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let s = pool.stats().unwrap();
    assert!(max_held.load(SeqCst) <= QUOTA);
    assert!(s.peak_bytes <= QUOTA, "{s}");
    assert!(rejected > 0, "the test must push against the quota");
    assert_eq!(s.quota_rejections, rejected);
    assert_eq!(s.current_bytes, 0);
    assert_eq!(s.allocated_bytes, s.freed_bytes);
    assert_eq!(s.num_allocs, s.num_frees);
    assert_eq!(s.reserved_bytes, 0);
}
