//! Host memory through std::alloc, so every line of the pool runs and is tested without a GPU.

use std::alloc::{alloc, dealloc, Layout};
use std::sync::atomic::{AtomicU64, Ordering};

use super::raw::{RawAllocator, RawError};
use crate::error::Result;
use crate::stream::Stream;

/// Cache-line alignment (64 B): enough for any SIMD type NumPy uses, and what the CPU backend
/// expects of its buffers.
pub const HOST_ALIGN: usize = 64;

/// Host allocations are not cached: reserved == used == live bytes, and trim is a no-op.
#[derive(Default)]
pub struct HostAllocator {
    live: AtomicU64,
}

impl HostAllocator {
    pub fn new() -> Self {
        Self::default()
    }
}

impl RawAllocator for HostAllocator {
    fn device(&self) -> i32 {
        -1
    }

    fn alloc(&self, bytes: usize, _stream: &Stream) -> std::result::Result<u64, RawError> {
        // A size too large for a Layout can never be satisfied: report it as out of memory.
        let layout =
            Layout::from_size_align(bytes.max(1), HOST_ALIGN).map_err(|_| RawError::OutOfMemory)?;
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { alloc(layout) };
        if p.is_null() {
            return Err(RawError::OutOfMemory);
        }
        self.live.fetch_add(bytes as u64, Ordering::Relaxed);
        Ok(p as u64)
    }

    unsafe fn free(&self, ptr: u64, bytes: usize, _stream: &Stream) -> Result<()> {
        // SAFETY (caller): ptr came from alloc with this size, so this layout is the one used.
        let layout = Layout::from_size_align_unchecked(bytes.max(1), HOST_ALIGN);
        dealloc(ptr as *mut u8, layout);
        self.live.fetch_sub(bytes as u64, Ordering::Relaxed);
        Ok(())
    }

    fn trim(&self, _keep_bytes: usize) -> Result<()> {
        Ok(())
    }

    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    fn reserved_bytes(&self) -> Result<u64> {
        Ok(self.live.load(Ordering::Relaxed))
    }

    fn used_bytes(&self) -> Result<u64> {
        Ok(self.live.load(Ordering::Relaxed))
    }
}
