//! Device memory from a CUDA stream-ordered memory pool (cuMemPoolCreate), one per pygpukit
//! context on a device.
//!
//! The release threshold is set to u64::MAX so that freed blocks stay cached in the pool instead
//! of going back to the driver at every synchronisation: allocation after warm-up is then a
//! driver-side free-list hit. Memory only leaves the pool through `trim` (explicitly, or from the
//! OOM ladder). Allocation and free are ordered on the caller's stream (cuMemAllocFromPoolAsync /
//! cuMemFreeAsync), so a free never waits for the device.

use std::ffi::c_void;
use std::ptr;

use cudarc::driver::sys;

use super::raw::{RawAllocator, RawError};
use crate::context::{ensure_current, synchronize_device};
use crate::deferred::record_if_err;
use crate::device::supports_memory_pools;
use crate::driver::device_handle;
use crate::error::{check, cuda_error, Error, Result};
use crate::stream::Stream;

pub struct DriverPoolAllocator {
    /// CUmemoryPool as an address (raw pointers are not Send/Sync; the driver's pool is).
    pool: usize,
    device: i32,
}

impl DriverPoolAllocator {
    pub fn new(device: i32) -> Result<Self> {
        if device < 0 {
            return Err(Error::invalid(format!(
                "a device pool needs a CUDA ordinal >= 0, got {device}"
            )));
        }
        device_handle(device)?;
        if !supports_memory_pools(device)? {
            return Err(Error::invalid(format!(
                "device {device} does not support stream-ordered memory pools"
            )));
        }
        ensure_current(device)?;
        let props = sys::CUmemPoolProps {
            allocType: sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED,
            handleTypes: sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE,
            location: sys::CUmemLocation {
                type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                id: device,
            },
            win32SecurityAttributes: ptr::null_mut(),
            maxSize: 0,
            usage: 0,
            reserved: [0; 54],
        };
        let mut pool: sys::CUmemoryPool = ptr::null_mut();
        // SAFETY: valid props and out-pointer; the device's context is current.
        check("cuMemPoolCreate", unsafe {
            sys::cuMemPoolCreate(&mut pool, &props)
        })?;
        // Own the pool before anything else can fail so that Drop destroys it.
        let me = DriverPoolAllocator {
            pool: pool as usize,
            device,
        };
        let mut threshold: u64 = u64::MAX;
        // SAFETY: RELEASE_THRESHOLD takes a cuuint64_t.
        check("cuMemPoolSetAttribute", unsafe {
            sys::cuMemPoolSetAttribute(
                me.raw(),
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                &mut threshold as *mut u64 as *mut c_void,
            )
        })?;
        Ok(me)
    }

    fn raw(&self) -> sys::CUmemoryPool {
        self.pool as sys::CUmemoryPool
    }

    fn attribute(&self, attr: sys::CUmemPool_attribute) -> Result<u64> {
        let mut v: u64 = 0;
        // SAFETY: the *_MEM_* attributes are cuuint64_t.
        check("cuMemPoolGetAttribute", unsafe {
            sys::cuMemPoolGetAttribute(self.raw(), attr, &mut v as *mut u64 as *mut c_void)
        })?;
        Ok(v)
    }
}

impl RawAllocator for DriverPoolAllocator {
    fn device(&self) -> i32 {
        self.device
    }

    fn alloc(&self, bytes: usize, stream: &Stream) -> std::result::Result<u64, RawError> {
        ensure_current(self.device)?;
        let mut p: sys::CUdeviceptr = 0;
        // SAFETY: valid out-pointer; the pool and the stream belong to this device.
        let r = unsafe { sys::cuMemAllocFromPoolAsync(&mut p, bytes, self.raw(), stream.raw()) };
        match r {
            sys::CUresult::CUDA_SUCCESS => Ok(p),
            sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => Err(RawError::OutOfMemory),
            r => Err(RawError::Other(cuda_error("cuMemAllocFromPoolAsync", r))),
        }
    }

    unsafe fn free(&self, ptr: u64, _bytes: usize, stream: &Stream) -> Result<()> {
        ensure_current(self.device)?;
        check("cuMemFreeAsync", sys::cuMemFreeAsync(ptr, stream.raw()))
    }

    fn trim(&self, keep_bytes: usize) -> Result<()> {
        ensure_current(self.device)?;
        // SAFETY: a live pool.
        check("cuMemPoolTrimTo", unsafe {
            sys::cuMemPoolTrimTo(self.raw(), keep_bytes)
        })
    }

    fn synchronize(&self) -> Result<()> {
        synchronize_device(self.device)
    }

    fn reserved_bytes(&self) -> Result<u64> {
        self.attribute(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)
    }

    fn used_bytes(&self) -> Result<u64> {
        self.attribute(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)
    }
}

impl Drop for DriverPoolAllocator {
    fn drop(&mut self) {
        // Runs when the pool object and its last buffer are gone. Frees still queued on streams
        // are fine: the driver releases the pool once they complete.
        // SAFETY: we created the pool; nothing else holds it.
        let r = unsafe { sys::cuMemPoolDestroy(self.raw()) };
        record_if_err(check("cuMemPoolDestroy", r));
    }
}
