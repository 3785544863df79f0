//! `MemoryPool`: a named budget (a pygpukit execution context) over one raw allocator.
//!
//! The allocator is a trait object rather than a type parameter: the strategy is chosen at run
//! time (device or host, by whether a GPU is present), buffers point back at their pool without
//! carrying a type parameter into the Python bindings, and the OOM ladder's per-device registry
//! must list pools of every strategy together. The cost is one indirect call per allocation,
//! nanoseconds against a driver call of a microsecond or more.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

use super::raw::{RawAllocator, RawError};
use super::registry;
use super::stats::{PoolStats, Stats, NO_QUOTA};
use super::{DriverPoolAllocator, HostAllocator};
use crate::buffer::Buffer;
use crate::deferred::{has_deferred_errors, record_if_err, take_as_error};
use crate::device::mem_get_info;
use crate::error::{Error, Result};
use crate::stream::Stream;

pub(crate) struct PoolShared {
    name: String,
    device: i32,
    allocator: Arc<dyn RawAllocator>,
    pub(crate) stats: Stats,
    quota: AtomicU64,
    enable_eviction: AtomicBool,
    default_stream: OnceLock<Stream>,
    /// The OOM ladder's order: pools of rank 2 (BestEffort) are trimmed first.
    trim_rank: AtomicU8,
    /// Bytes a trim keeps reserved (the memory held for a Guaranteed or Burstable context).
    trim_floor: AtomicU64,
}

impl PoolShared {
    pub(crate) fn name(&self) -> &str {
        &self.name
    }
    pub(crate) fn device(&self) -> i32 {
        self.device
    }
    pub(crate) fn trim_rank(&self) -> u8 {
        self.trim_rank.load(Relaxed)
    }

    /// Release cached memory, keeping at least `keep` bytes and never less than the floor.
    pub(crate) fn trim_to_floor(&self, keep: usize) -> Result<()> {
        let floor = usize::try_from(self.trim_floor.load(Relaxed)).unwrap_or(usize::MAX);
        self.allocator.trim(keep.max(floor))
    }

    /// Return a block (called by `Buffer`'s drop). Counters are updated even if the driver call
    /// fails: the buffer is gone either way, and a stuck `current` would block the quota forever.
    pub(crate) fn release(&self, ptr: u64, nbytes: usize, stream: &Stream) -> Result<()> {
        let r = if nbytes > 0 {
            // SAFETY: Buffer guarantees ptr came from this allocator with nbytes, freed once.
            unsafe { self.allocator.free(ptr, nbytes, stream) }
        } else {
            Ok(())
        };
        self.stats.release(nbytes as u64);
        r
    }
}

/// A handle to a pool; clones share it. The pool (and a driver pool's cached memory) lives until
/// the last handle and the last buffer from it are gone.
#[derive(Clone)]
pub struct MemoryPool {
    shared: Arc<PoolShared>,
}

/// Trim rank of pools outside the scheduler: after BestEffort pools, with the Burstable ones.
const DEFAULT_TRIM_RANK: u8 = 1;

fn quota_to_raw(q: Option<u64>) -> u64 {
    // u64::MAX bytes cannot be allocated anyway, so it can stand for "no quota".
    q.unwrap_or(NO_QUOTA)
}

impl MemoryPool {
    /// A pool on `device` (a CUDA ordinal, or -1 for host memory).
    pub fn new(
        device: i32,
        name: impl Into<String>,
        quota: Option<u64>,
        enable_eviction: bool,
    ) -> Result<MemoryPool> {
        let allocator: Arc<dyn RawAllocator> = match device {
            -1 => Arc::new(HostAllocator::new()),
            d if d < -1 => {
                return Err(Error::invalid(format!(
                    "device must be -1 (host) or a CUDA ordinal >= 0, got {d}"
                )))
            }
            d => Arc::new(DriverPoolAllocator::new(d)?),
        };
        Ok(Self::with_allocator(
            name,
            allocator,
            quota,
            enable_eviction,
        ))
    }

    /// A pool over any allocator (tests use mocks; the device is the allocator's).
    pub fn with_allocator(
        name: impl Into<String>,
        allocator: Arc<dyn RawAllocator>,
        quota: Option<u64>,
        enable_eviction: bool,
    ) -> MemoryPool {
        let shared = Arc::new(PoolShared {
            name: name.into(),
            device: allocator.device(),
            allocator,
            stats: Stats::default(),
            quota: AtomicU64::new(quota_to_raw(quota)),
            enable_eviction: AtomicBool::new(enable_eviction),
            default_stream: OnceLock::new(),
            trim_rank: AtomicU8::new(DEFAULT_TRIM_RANK),
            trim_floor: AtomicU64::new(0),
        });
        registry::register(&shared);
        MemoryPool { shared }
    }

    pub fn name(&self) -> &str {
        &self.shared.name
    }
    pub fn device(&self) -> i32 {
        self.shared.device
    }
    pub fn quota(&self) -> Option<u64> {
        match self.shared.quota.load(Relaxed) {
            NO_QUOTA => None,
            q => Some(q),
        }
    }
    /// Change the quota. Lowering it below the current usage rejects new allocations until
    /// enough is freed; it never frees anything.
    pub fn set_quota(&self, quota: Option<u64>) {
        self.shared.quota.store(quota_to_raw(quota), Relaxed);
    }
    pub fn enable_eviction(&self) -> bool {
        self.shared.enable_eviction.load(Relaxed)
    }
    pub fn set_enable_eviction(&self, on: bool) {
        self.shared.enable_eviction.store(on, Relaxed);
    }

    /// Where this pool stands in the OOM ladder (`rank` 2: trimmed first, as BestEffort; 0
    /// and 1: after) and how many bytes any trim leaves reserved (`floor`).
    pub fn set_trim_policy(&self, rank: u8, floor: u64) {
        self.shared.trim_rank.store(rank.min(2), Relaxed);
        self.shared.trim_floor.store(floor, Relaxed);
    }
    pub fn trim_floor(&self) -> u64 {
        self.shared.trim_floor.load(Relaxed)
    }

    /// Make the pool hold `nbytes` of device memory from now on: one block of that size is
    /// allocated and given back on `stream` (the driver pool keeps it, its release threshold
    /// being at max), and trims keep it from then on. Fails like an allocation (quota, out of
    /// memory) and then holds nothing. Host pools cache nothing, so for them only the floor is
    /// set.
    pub fn hold(&self, nbytes: u64, stream: Option<&Stream>) -> Result<()> {
        let n = usize::try_from(nbytes)
            .map_err(|_| Error::invalid(format!("cannot hold {nbytes} bytes on this platform")))?;
        if self.device() >= 0 && n > 0 {
            drop(self.allocate(n, stream)?);
        }
        self.shared.trim_floor.store(nbytes, Relaxed);
        Ok(())
    }

    /// The pool's own stream, used when `allocate` is given none: a non-blocking stream created
    /// on first use (the host pseudo-stream for host pools). Memory allocated on it is
    /// stream-ordered there; work on another stream should wait on it or allocate on its own
    /// stream instead.
    pub fn default_stream(&self) -> Result<Stream> {
        if let Some(s) = self.shared.default_stream.get() {
            return Ok(s.clone());
        }
        // Two racing threads may both create one; the loser's stream is dropped (destroyed).
        let s = if self.device() < 0 {
            Stream::host()
        } else {
            Stream::new(self.device(), 0, true)?
        };
        Ok(self.shared.default_stream.get_or_init(|| s).clone())
    }

    /// Allocate `nbytes` ordered on `stream` (the pool's own stream if `None`).
    ///
    /// Errors recorded by destructors since the last call are reported first. Zero bytes give a
    /// null buffer without a driver call. A quota rejection or an allocation failure changes no
    /// byte or count counter; they bump `quota_rejections` or `num_ooms` only.
    pub fn allocate(&self, nbytes: usize, stream: Option<&Stream>) -> Result<Buffer> {
        if has_deferred_errors() {
            if let Some(e) = take_as_error() {
                return Err(e);
            }
        }
        let stream = match stream {
            // Pools below device 0 (host memory, test mocks) take the host pseudo-stream.
            Some(s) if s.is_host() && self.device() < 0 => s.clone(),
            Some(s) => {
                s.expect_device(self.device(), "the pool")?;
                s.clone()
            }
            None => self.default_stream()?,
        };
        let sh = &self.shared;
        let n = nbytes as u64;
        if nbytes == 0 {
            // Counted as an allocation (and its drop as a free) so that
            // num_allocs - num_frees is always the number of live buffers.
            sh.stats.commit(0);
            return Ok(Buffer::new(0, 0, stream, self.shared.clone()));
        }
        if let Err(current) = sh.stats.reserve(n, sh.quota.load(Relaxed)) {
            return Err(Error::QuotaExceeded {
                requested: n,
                context: sh.name.clone(),
                quota: sh.quota.load(Relaxed),
                current,
            });
        }
        match self.alloc_with_ladder(nbytes, &stream) {
            Ok(ptr) => {
                sh.stats.commit(n);
                Ok(Buffer::new(ptr, nbytes, stream, self.shared.clone()))
            }
            Err(e) => {
                sh.stats.unreserve(n);
                Err(e)
            }
        }
    }

    /// The OOM ladder: on out-of-memory, trim the cached memory of the device's BestEffort
    /// pools and retry (when there are any); then trim every pool on the device, synchronise so
    /// pending stream-ordered frees land, trim again, and retry once. Trims never go below a
    /// pool's floor (the memory held for a Guaranteed or Burstable context). With eviction
    /// disabled the first failure is final. Either way a final failure trims this pool's own
    /// unused memory.
    fn alloc_with_ladder(&self, nbytes: usize, stream: &Stream) -> Result<u64> {
        let sh = &self.shared;
        match sh.allocator.alloc(nbytes, stream) {
            Ok(p) => return Ok(p),
            Err(RawError::Other(e)) => return Err(e),
            Err(RawError::OutOfMemory) => {}
        }
        if self.enable_eviction() {
            sh.stats.num_retries.fetch_add(1, Relaxed);
            if registry::trim_device(sh.device, 2) > 0 {
                match sh.allocator.alloc(nbytes, stream) {
                    Ok(p) => return Ok(p),
                    Err(RawError::Other(e)) => return Err(e),
                    Err(RawError::OutOfMemory) => {}
                }
            }
            registry::trim_device(sh.device, 0);
            sh.allocator.synchronize()?;
            registry::trim_device(sh.device, 0);
            match sh.allocator.alloc(nbytes, stream) {
                Ok(p) => return Ok(p),
                Err(RawError::Other(e)) => return Err(e),
                Err(RawError::OutOfMemory) => {}
            }
        }
        // A failed cuMemAllocFromPoolAsync leaves the memory it gathered reserved in the pool
        // (seen on an H200: a too-large request left the whole device reserved), and with the
        // release threshold at max it would stay there, starving every other library. Give this
        // pool's unused memory back before reporting, so device_free below is meaningful too.
        record_if_err(sh.trim_to_floor(0));
        sh.stats.num_ooms.fetch_add(1, Relaxed);
        Err(self.oom_error(nbytes as u64))
    }

    #[cold]
    fn oom_error(&self, requested: u64) -> Error {
        let mut stats = self.shared.stats.snapshot();
        stats.reserved_bytes = self.shared.allocator.reserved_bytes().unwrap_or(0);
        stats.used_bytes = self.shared.allocator.used_bytes().unwrap_or(0);
        stats.quota = self.quota();
        let (device_free, device_total) = if self.device() >= 0 {
            match mem_get_info(self.device()) {
                Ok((f, t)) => (Some(f), Some(t)),
                Err(_) => (None, None),
            }
        } else {
            (None, None)
        };
        Error::OutOfMemory {
            requested,
            context: self.shared.name.clone(),
            device: self.device(),
            stats: Box::new(stats),
            device_free,
            device_total,
        }
    }

    /// Statistics snapshot (reserved/used come from the allocator, so this can fail on a device).
    pub fn stats(&self) -> Result<PoolStats> {
        let mut s = self.shared.stats.snapshot();
        s.reserved_bytes = self.shared.allocator.reserved_bytes()?;
        s.used_bytes = self.shared.allocator.used_bytes()?;
        s.quota = self.quota();
        Ok(s)
    }

    /// Bytes currently allocated from this pool (requested sizes).
    pub fn current_bytes(&self) -> u64 {
        self.shared.stats.current()
    }

    /// Release this pool's cached memory, keeping at least `keep_bytes` reserved (and never
    /// less than its floor, see `hold`).
    pub fn trim(&self, keep_bytes: usize) -> Result<()> {
        self.shared.trim_to_floor(keep_bytes)
    }
}
