//! The device's primary CUDA context, shared with torch, Triton and CuPy.
//!
//! pygpukit never creates its own CUDA contexts: a pointer from our pool must be usable by any
//! library in the process, and those all use the primary context. It is retained once per device
//! (and never released: it lives as long as the process) and made current on a thread only when
//! `cuCtxGetCurrent` says another (or none) is current, because other libraries may switch the
//! current context behind our back.

use std::ptr;
use std::sync::OnceLock;

use cudarc::driver::sys;

use crate::driver::{device_handle, state};
use crate::error::{check, Error, Result};

/// A CUcontext kept as an address so it can live in a static (raw pointers are not Sync).
type CtxAddr = usize;

static PRIMARY: OnceLock<Vec<OnceLock<Result<CtxAddr>>>> = OnceLock::new();

/// The retained primary context of `ordinal` (retained on first use).
pub fn primary_context(ordinal: i32) -> Result<sys::CUcontext> {
    let count = state()?.device_count.max(0) as usize;
    let slots = PRIMARY.get_or_init(|| (0..count).map(|_| OnceLock::new()).collect());
    let dev = device_handle(ordinal)?;
    let slot = &slots[ordinal as usize];
    let addr = slot.get_or_init(|| {
        let mut ctx: sys::CUcontext = ptr::null_mut();
        // SAFETY: valid out-pointer and device handle.
        check("cuDevicePrimaryCtxRetain", unsafe {
            sys::cuDevicePrimaryCtxRetain(&mut ctx, dev)
        })?;
        Ok(ctx as CtxAddr)
    });
    addr.clone().map(|a| a as sys::CUcontext)
}

/// Make the primary context of `ordinal` current on this thread if it is not already.
/// Negative ordinals (the host pseudo-device) need no context: no-op.
#[inline]
pub fn ensure_current(ordinal: i32) -> Result<()> {
    if ordinal < 0 {
        return Ok(());
    }
    let ctx = primary_context(ordinal)?;
    let mut cur: sys::CUcontext = ptr::null_mut();
    // SAFETY: valid out-pointer; the driver is initialised (primary_context succeeded).
    check("cuCtxGetCurrent", unsafe { sys::cuCtxGetCurrent(&mut cur) })?;
    if cur != ctx {
        // SAFETY: ctx is a retained primary context.
        check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(ctx) })?;
    }
    Ok(())
}

/// Block until all work on the device's primary context is done. No-op for the host (-1).
pub fn synchronize_device(ordinal: i32) -> Result<()> {
    if ordinal < 0 {
        return Ok(());
    }
    ensure_current(ordinal)?;
    // SAFETY: a context is current.
    check("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() })
}

/// Validate a device argument: -1 (host) or an existing CUDA ordinal.
pub fn validate_device(device: i32) -> Result<()> {
    match device {
        -1 => Ok(()),
        d if d < -1 => Err(Error::invalid(format!(
            "device must be -1 (host) or a CUDA ordinal >= 0, got {d}"
        ))),
        d => device_handle(d).map(|_| ()),
    }
}
