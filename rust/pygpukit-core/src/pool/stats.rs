//! Pool counters (lock-free) and the quota reservation.
//!
//! Two byte counters matter for correctness:
//! - `committed`: bytes of live allocations plus reservations of allocations in flight. The quota
//!   is checked against it with a compare-exchange, so concurrent allocations can never together
//!   exceed the quota.
//! - `current`: bytes of live allocations only, raised after the allocator succeeded. `peak` is
//!   the maximum `current` ever had, so a reservation that later fails never shows in any
//!   reported counter.
//!
//! Invariants (at rest): current == allocated - freed, peak >= current, current <= committed,
//! and with a quota set before the allocations, committed <= quota.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Quota value meaning "no quota".
pub(crate) const NO_QUOTA: u64 = u64::MAX;

/// A snapshot of a pool's statistics. Byte counts are the requested sizes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolStats {
    pub current_bytes: u64,
    pub peak_bytes: u64,
    /// Cumulative bytes handed out.
    pub allocated_bytes: u64,
    /// Cumulative bytes given back.
    pub freed_bytes: u64,
    /// Bytes the allocator holds from the system (driver pool attribute; host: live bytes).
    pub reserved_bytes: u64,
    /// Bytes in use as the allocator sees them (driver pool attribute; host: live bytes).
    pub used_bytes: u64,
    pub num_allocs: u64,
    pub num_frees: u64,
    /// OOM ladders started (first allocation attempt failed with out-of-memory).
    pub num_retries: u64,
    /// Allocations that failed with out-of-memory after the ladder.
    pub num_ooms: u64,
    pub quota_rejections: u64,
    pub quota: Option<u64>,
}

impl fmt::Display for PoolStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "current_bytes={} peak_bytes={} allocated_bytes={} freed_bytes={} reserved_bytes={} \
             used_bytes={} num_allocs={} num_frees={} num_retries={} num_ooms={} \
             quota_rejections={} quota=",
            self.current_bytes,
            self.peak_bytes,
            self.allocated_bytes,
            self.freed_bytes,
            self.reserved_bytes,
            self.used_bytes,
            self.num_allocs,
            self.num_frees,
            self.num_retries,
            self.num_ooms,
            self.quota_rejections
        )?;
        match self.quota {
            Some(q) => write!(f, "{q}"),
            None => write!(f, "none"),
        }
    }
}

#[derive(Default)]
pub(crate) struct Stats {
    committed: AtomicU64,
    current: AtomicU64,
    peak: AtomicU64,
    allocated: AtomicU64,
    freed: AtomicU64,
    num_allocs: AtomicU64,
    num_frees: AtomicU64,
    pub(crate) num_retries: AtomicU64,
    pub(crate) num_ooms: AtomicU64,
    quota_rejections: AtomicU64,
}

impl Stats {
    /// Reserve `n` bytes under `quota`. On rejection, counts it and returns the committed bytes
    /// seen (what the pool held, counting allocations in flight).
    #[inline]
    pub(crate) fn reserve(&self, n: u64, quota: u64) -> Result<(), u64> {
        if quota == NO_QUOTA {
            self.committed.fetch_add(n, Relaxed);
            return Ok(());
        }
        let mut cur = self.committed.load(Relaxed);
        loop {
            match cur.checked_add(n) {
                Some(next) if next <= quota => {
                    match self
                        .committed
                        .compare_exchange_weak(cur, next, Relaxed, Relaxed)
                    {
                        Ok(_) => return Ok(()),
                        Err(seen) => cur = seen,
                    }
                }
                _ => {
                    self.quota_rejections.fetch_add(1, Relaxed);
                    return Err(cur);
                }
            }
        }
    }

    /// Undo a reservation whose allocation failed.
    #[inline]
    pub(crate) fn unreserve(&self, n: u64) {
        self.committed.fetch_sub(n, Relaxed);
    }

    /// A reserved allocation succeeded.
    #[inline]
    pub(crate) fn commit(&self, n: u64) {
        let now = self.current.fetch_add(n, Relaxed) + n;
        self.peak.fetch_max(now, Relaxed);
        self.allocated.fetch_add(n, Relaxed);
        self.num_allocs.fetch_add(1, Relaxed);
    }

    /// A live allocation was returned.
    #[inline]
    pub(crate) fn release(&self, n: u64) {
        self.current.fetch_sub(n, Relaxed);
        self.committed.fetch_sub(n, Relaxed);
        self.freed.fetch_add(n, Relaxed);
        self.num_frees.fetch_add(1, Relaxed);
    }

    pub(crate) fn current(&self) -> u64 {
        self.current.load(Relaxed)
    }

    /// Counters only; the caller fills reserved/used/quota.
    pub(crate) fn snapshot(&self) -> PoolStats {
        PoolStats {
            current_bytes: self.current.load(Relaxed),
            peak_bytes: self.peak.load(Relaxed),
            allocated_bytes: self.allocated.load(Relaxed),
            freed_bytes: self.freed.load(Relaxed),
            num_allocs: self.num_allocs.load(Relaxed),
            num_frees: self.num_frees.load(Relaxed),
            num_retries: self.num_retries.load(Relaxed),
            num_ooms: self.num_ooms.load(Relaxed),
            quota_rejections: self.quota_rejections.load(Relaxed),
            ..PoolStats::default()
        }
    }
}
