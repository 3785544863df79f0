//! The memory pool: quotas, statistics and the OOM ladder over a pluggable raw allocator.
//!
//! `raw`: the `RawAllocator` trait (the only place that touches memory).
//! `driver_pool`: device memory from a CUDA stream-ordered pool (cuMemPoolCreate).
//! `host`: host memory (std::alloc, 64-byte aligned), so the pool logic runs without a GPU.
//! `stats`: lock-free counters and the quota reservation.
//! `registry`: per-device weak references to every allocator, for the OOM ladder's trim.
//! `memory_pool`: `MemoryPool` itself.

mod driver_pool;
mod host;
mod memory_pool;
mod raw;
mod registry;
mod stats;

pub use driver_pool::DriverPoolAllocator;
pub use host::HostAllocator;
pub use memory_pool::MemoryPool;
pub(crate) use memory_pool::PoolShared;
pub use raw::{RawAllocator, RawError};
pub use stats::PoolStats;

#[cfg(test)]
mod tests;
