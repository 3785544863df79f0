//! Device queries: properties and free/total memory.

use std::ffi::c_char;

use cudarc::driver::sys;
use sys::CUdevice_attribute as A;

use crate::context::ensure_current;
use crate::driver::device_handle;
use crate::error::{check, Result};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceProperties {
    pub ordinal: i32,
    pub name: String,
    pub major: i32,
    pub minor: i32,
    pub sm_count: i32,
    pub total_memory: u64,
    pub l2_cache_bytes: i32,
    pub max_threads_per_block: i32,
    pub max_shared_memory_per_block_optin: i32,
    pub warp_size: i32,
    pub clock_khz: i32,
    pub memory_clock_khz: i32,
    pub memory_bus_width_bits: i32,
    /// "0000:3b:00.0" form, as nvidia-smi prints it.
    pub pci_bus_id: String,
    /// 32 lowercase hex digits (no dashes).
    pub uuid: String,
}

fn attr(dev: sys::CUdevice, a: A) -> Result<i32> {
    let mut v = 0;
    // SAFETY: valid out-pointer and device handle.
    check("cuDeviceGetAttribute", unsafe {
        sys::cuDeviceGetAttribute(&mut v, a, dev)
    })?;
    Ok(v)
}

fn c_buf_to_string(buf: &[c_char]) -> String {
    // The driver NUL-terminates within the length we pass; fall back to the whole buffer.
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

pub fn device_properties(ordinal: i32) -> Result<DeviceProperties> {
    let dev = device_handle(ordinal)?;
    let mut name = [0 as c_char; 256];
    let mut bus = [0 as c_char; 64];
    let mut total: usize = 0;
    let mut uuid = sys::CUuuid { bytes: [0; 16] };
    // SAFETY: buffers and out-pointers are valid for the lengths passed.
    unsafe {
        check(
            "cuDeviceGetName",
            sys::cuDeviceGetName(name.as_mut_ptr(), name.len() as i32, dev),
        )?;
        check(
            "cuDeviceGetPCIBusId",
            sys::cuDeviceGetPCIBusId(bus.as_mut_ptr(), bus.len() as i32, dev),
        )?;
        check(
            "cuDeviceTotalMem_v2",
            sys::cuDeviceTotalMem_v2(&mut total, dev),
        )?;
        check(
            "cuDeviceGetUuid_v2",
            sys::cuDeviceGetUuid_v2(&mut uuid, dev),
        )?;
    }
    let uuid_hex: String = uuid
        .bytes
        .iter()
        .map(|&b| format!("{:02x}", b as u8))
        .collect();
    Ok(DeviceProperties {
        ordinal,
        name: c_buf_to_string(&name),
        major: attr(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
        minor: attr(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        sm_count: attr(dev, A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        total_memory: total as u64,
        l2_cache_bytes: attr(dev, A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?,
        max_threads_per_block: attr(dev, A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        max_shared_memory_per_block_optin: attr(
            dev,
            A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        )?,
        warp_size: attr(dev, A::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
        clock_khz: attr(dev, A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)?,
        memory_clock_khz: attr(dev, A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)?,
        memory_bus_width_bits: attr(dev, A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)?,
        pci_bus_id: c_buf_to_string(&bus),
        uuid: uuid_hex,
    })
}

/// Whether the device supports stream-ordered memory pools (cuMemPoolCreate).
pub(crate) fn supports_memory_pools(ordinal: i32) -> Result<bool> {
    let dev = device_handle(ordinal)?;
    Ok(attr(dev, A::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)? != 0)
}

/// (free, total) bytes of the device, from cuMemGetInfo on its primary context.
pub fn mem_get_info(ordinal: i32) -> Result<(u64, u64)> {
    device_handle(ordinal)?;
    ensure_current(ordinal)?;
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: valid out-pointers; the primary context is current.
    check("cuMemGetInfo_v2", unsafe {
        sys::cuMemGetInfo_v2(&mut free, &mut total)
    })?;
    Ok((free as u64, total as u64))
}
