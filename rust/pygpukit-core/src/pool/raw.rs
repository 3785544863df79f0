//! The raw allocation strategy under a `MemoryPool`.

use crate::error::{Error, Result};
use crate::stream::Stream;

/// Why a raw allocation failed. Out-of-memory is separate because only it starts the OOM ladder.
#[derive(Debug, Clone, PartialEq)]
pub enum RawError {
    OutOfMemory,
    Other(Error),
}

impl From<Error> for RawError {
    fn from(e: Error) -> Self {
        RawError::Other(e)
    }
}

/// Where bytes come from. Implementations do no accounting (the pool does); they must be usable
/// from any thread. Pointers are u64 addresses (CUdeviceptr, or a host address for device -1).
pub trait RawAllocator: Send + Sync {
    /// CUDA ordinal, or -1 for host memory.
    fn device(&self) -> i32;

    /// Allocate `bytes` (> 0), ordered on `stream` where the strategy is stream-ordered.
    fn alloc(&self, bytes: usize, stream: &Stream) -> std::result::Result<u64, RawError>;

    /// Return a block, ordered on `stream`.
    ///
    /// # Safety
    /// `ptr` came from `alloc` of this allocator with the same `bytes` and was not freed since.
    unsafe fn free(&self, ptr: u64, bytes: usize, stream: &Stream) -> Result<()>;

    /// Release cached, unused memory back to the system, keeping at least `keep_bytes` reserved.
    fn trim(&self, keep_bytes: usize) -> Result<()>;

    /// Wait until pending (stream-ordered) frees have landed, so a trim can release them.
    fn synchronize(&self) -> Result<()>;

    /// Bytes the strategy holds from the system (in use plus cached).
    fn reserved_bytes(&self) -> Result<u64>;

    /// Bytes in live allocations, as the strategy sees them.
    fn used_bytes(&self) -> Result<u64>;
}
