//! Launching kernels that are already loaded (CUfunction handles from Triton's loader or NVRTC).
//!
//! Triton's own C launcher parses ~40 Python arguments per call; the Python side's fast path
//! hands the same raw values here instead, which matters for decode-sized ops where host cost,
//! not the kernel, sets the time.

use std::ffi::c_void;
use std::ptr;

use cudarc::driver::sys;

use crate::error::{check, Result};

/// Grid, block and dynamic shared memory of one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
}

/// Launch `function` on `stream` with `params` (one pointer to each argument's value).
///
/// # Safety
/// `function` must be a live CUfunction of the context current on this thread, and `params`
/// must match its parameter list exactly (count, order, sizes); the values must stay alive for
/// the duration of the call (the driver copies them before returning).
pub unsafe fn launch_raw(
    function: usize,
    cfg: &LaunchConfig,
    stream: usize,
    params: &mut [*mut c_void],
) -> Result<()> {
    let [gx, gy, gz] = cfg.grid;
    let [bx, by, bz] = cfg.block;
    // SAFETY: upheld by the caller (see above).
    check("cuLaunchKernel", unsafe {
        sys::cuLaunchKernel(
            function as sys::CUfunction,
            gx,
            gy,
            gz,
            bx,
            by,
            bz,
            cfg.shared_bytes,
            stream as sys::CUstream,
            params.as_mut_ptr(),
            ptr::null_mut(),
        )
    })
}
