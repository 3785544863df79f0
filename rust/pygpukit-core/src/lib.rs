//! PyGPUkit core: the CUDA driver (loaded at run time), the device's primary context, streams,
//! events, CUDA graph capture, the memory pool (quotas, statistics, OOM ladder), copies and
//! DLPack structs, plus cuBLASLt matrix products (`blas`) and NVRTC run-time compilation
//! (`nvrtc`), both loaded at run time too.
//!
//! No Python here (the bindings are the `pygpukit-py` crate) and no panics when libcuda or a
//! device is absent: every entry point returns `Result`, and device -1 (host memory, host
//! pseudo-stream, host events) runs the same API without a GPU.

pub mod blas;
pub mod buffer;
pub mod context;
pub mod copy;
pub mod deferred;
pub mod device;
pub mod dlpack;
pub mod driver;
pub mod dynlib;
pub mod error;
pub mod event;
pub mod graph;
pub mod launch;
pub mod nvrtc;
pub mod pool;
pub mod scheduler;
mod staging;
pub mod stream;

pub use buffer::Buffer;
pub use context::{ensure_current, primary_context, synchronize_device};
pub use deferred::{has_deferred_errors, record_deferred, take_deferred_errors};
pub use device::{device_properties, mem_get_info, DeviceProperties};
pub use driver::{device_count, driver_status, driver_version};
pub use error::{check, Error, Result};
pub use event::Event;
pub use graph::Graph;
pub use pool::{MemoryPool, PoolStats, RawAllocator, RawError};
pub use stream::{priority_range, Stream};
