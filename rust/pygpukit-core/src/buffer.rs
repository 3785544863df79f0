//! A block of pool memory.
//!
//! A `Buffer` keeps alive the stream it was allocated on and its pool. Dropping it returns the
//! block on that stream (cuMemFreeAsync: no device sync, the block is reusable by later work on
//! that stream at once and by other streams once the free is complete). A failure in drop is
//! recorded (deferred) and reported by the next `MemoryPool::allocate`, never swallowed or
//! turned into a panic.

use std::fmt;
use std::sync::Arc;

use crate::deferred::record_if_err;
use crate::pool::PoolShared;
use crate::stream::Stream;

pub struct Buffer {
    ptr: u64,
    nbytes: usize,
    stream: Stream,
    pool: Arc<PoolShared>,
}

impl Buffer {
    pub(crate) fn new(ptr: u64, nbytes: usize, stream: Stream, pool: Arc<PoolShared>) -> Buffer {
        Buffer {
            ptr,
            nbytes,
            stream,
            pool,
        }
    }

    /// Device address (host address for device -1); 0 for a zero-byte buffer.
    #[inline]
    pub fn ptr(&self) -> u64 {
        self.ptr
    }
    #[inline]
    pub fn nbytes(&self) -> usize {
        self.nbytes
    }
    /// CUDA ordinal, or -1 for host memory.
    #[inline]
    pub fn device(&self) -> i32 {
        self.stream.device()
    }
    /// The stream the buffer was allocated on and will be freed on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }
    pub fn pool_name(&self) -> &str {
        self.pool.name()
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // While a CUDA graph is being captured the block may be read by its replays: the free
        // waits for the graphs being recorded (graph::hold_free).
        if crate::graph::hold_free(self.ptr, self.nbytes, &self.stream, &self.pool) {
            return;
        }
        record_if_err(self.pool.release(self.ptr, self.nbytes, &self.stream));
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Buffer(ptr={:#x}, nbytes={}, device={}, pool='{}')",
            self.ptr,
            self.nbytes,
            self.device(),
            self.pool_name()
        )
    }
}
