//! Pinned (page-locked) staging blocks for asynchronous host copies.
//!
//! A copy from pageable host memory cannot overlap with other work: the driver first stages it
//! itself, synchronously. Copying into a pinned block of ours and issuing the DMA from there lets
//! the call return at once. Each block carries an event recorded after the DMA that uses it; a
//! block is handed out again only once that event has completed, so the next user can never
//! overwrite bytes that are still in flight. Blocks are cached per device (events belong to a
//! context) and freed by `trim_staging` or when the cache grows past `CACHE_LIMIT`.

use std::ffi::c_void;
use std::ptr;
use std::sync::Mutex;

use cudarc::driver::sys;

use crate::context::ensure_current;
use crate::deferred::record_if_err;
use crate::error::{check, cuda_error, Result};

/// Idle cached bytes above which released blocks are freed instead of kept.
const CACHE_LIMIT: usize = 512 << 20;
const MIN_BLOCK: usize = 64 << 10;
const LARGE_GRANULE: usize = 2 << 20;

pub(crate) struct Block {
    /// Host address of the pinned memory.
    ptr: usize,
    size: usize,
    /// CUevent (timing disabled) recorded after the last DMA that used the block.
    event: usize,
    device: i32,
}

impl Block {
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr as *mut u8
    }
    pub(crate) fn event(&self) -> sys::CUevent {
        self.event as sys::CUevent
    }

    fn new(device: i32, size: usize) -> Result<Block> {
        ensure_current(device)?;
        let mut p: *mut c_void = ptr::null_mut();
        // SAFETY: valid out-pointer; a context is current. PORTABLE: usable from any context.
        check("cuMemHostAlloc", unsafe {
            sys::cuMemHostAlloc(&mut p, size, sys::CU_MEMHOSTALLOC_PORTABLE)
        })?;
        let mut ev: sys::CUevent = ptr::null_mut();
        let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
        // SAFETY: valid out-pointer.
        if let Err(e) = check("cuEventCreate", unsafe {
            sys::cuEventCreate(&mut ev, flags)
        }) {
            // SAFETY: p came from cuMemHostAlloc just above.
            record_if_err(check("cuMemFreeHost", unsafe { sys::cuMemFreeHost(p) }));
            return Err(e);
        }
        Ok(Block {
            ptr: p as usize,
            size,
            event: ev as usize,
            device,
        })
    }

    /// True once the last DMA recorded on the block has completed (or none ever was).
    pub(crate) fn idle(&self) -> Result<bool> {
        ensure_current(self.device)?;
        // SAFETY: a live event.
        match unsafe { sys::cuEventQuery(self.event()) } {
            sys::CUresult::CUDA_SUCCESS => Ok(true),
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            r => Err(cuda_error("cuEventQuery", r)),
        }
    }

    /// Block until the last DMA recorded on the block has completed.
    pub(crate) fn wait(&self) -> Result<()> {
        ensure_current(self.device)?;
        // SAFETY: a live event.
        check("cuEventSynchronize", unsafe {
            sys::cuEventSynchronize(self.event())
        })
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // Never free pinned memory a DMA may still be using.
        record_if_err(self.wait());
        // SAFETY: we own both; nothing uses them after the wait.
        unsafe {
            record_if_err(check(
                "cuEventDestroy_v2",
                sys::cuEventDestroy_v2(self.event()),
            ));
            record_if_err(check(
                "cuMemFreeHost",
                sys::cuMemFreeHost(self.ptr as *mut c_void),
            ));
        }
    }
}

static CACHE: Mutex<Vec<Block>> = Mutex::new(Vec::new());

fn lock() -> std::sync::MutexGuard<'static, Vec<Block>> {
    CACHE.lock().unwrap_or_else(|p| p.into_inner())
}

fn block_size(nbytes: usize) -> usize {
    if nbytes <= LARGE_GRANULE / 2 {
        nbytes.next_power_of_two().max(MIN_BLOCK)
    } else {
        nbytes.div_ceil(LARGE_GRANULE) * LARGE_GRANULE
    }
}

/// An idle block of `device` holding at least `nbytes` (the smallest that fits), or a new one.
pub(crate) fn acquire(device: i32, nbytes: usize) -> Result<Block> {
    {
        let mut cache = lock();
        let mut best: Option<usize> = None;
        for (i, b) in cache.iter().enumerate() {
            if b.device != device || b.size < nbytes {
                continue;
            }
            if best.is_some_and(|j| cache[j].size <= b.size) {
                continue;
            }
            if b.idle()? {
                best = Some(i);
            }
        }
        if let Some(i) = best {
            return Ok(cache.swap_remove(i));
        }
    }
    Block::new(device, block_size(nbytes))
}

/// Give a block back to the cache (it may still be busy: its event says when it is free).
pub(crate) fn release(block: Block) {
    let mut cache = lock();
    cache.push(block);
    let total: usize = cache.iter().map(|b| b.size).sum();
    if total > CACHE_LIMIT {
        // Free idle blocks, largest first, until under the limit; busy ones stay.
        cache.sort_by_key(|b| std::cmp::Reverse(b.size));
        let mut total = total;
        let mut i = 0;
        while total > CACHE_LIMIT && i < cache.len() {
            if cache[i].idle().unwrap_or(false) {
                total -= cache[i].size;
                drop(cache.remove(i));
            } else {
                i += 1;
            }
        }
    }
}

/// Free every cached staging block (waiting for any DMA still using one). Returns bytes freed.
pub fn trim_staging() -> usize {
    let blocks = std::mem::take(&mut *lock());
    blocks.iter().map(|b| b.size).sum()
}

/// Bytes of pinned memory cached for staging.
pub fn staging_bytes() -> usize {
    lock().iter().map(|b| b.size).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_sizes_round_up() {
        assert_eq!(block_size(1), MIN_BLOCK);
        assert_eq!(block_size(100_000), 131_072);
        assert_eq!(block_size(1 << 20), 1 << 20);
        assert_eq!(block_size((1 << 20) + 1), 2 << 20);
        assert_eq!(block_size((5 << 20) + 3), 6 << 20);
        assert_eq!(staging_bytes(), 0);
        assert_eq!(trim_staging(), 0);
    }
}
