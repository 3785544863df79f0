//! Launching kernels that are already loaded (CUfunction handles from Triton's loader or NVRTC).
//!
//! Triton's own C launcher parses ~40 Python arguments per call; the Python side's fast path
//! hands the same raw values here instead, which matters for decode-sized ops where host cost,
//! not the kernel, sets the time.

use std::ffi::c_void;
use std::ptr;

use cudarc::driver::sys;

use crate::error::{check, Result};

/// Grid, block and dynamic shared memory of one launch, and whether it is a programmatic
/// dependent launch (sm_90+: the kernel may start while the one before it on the stream
/// finishes, and must wait on it with `griddepcontrol.wait` before it reads what that one
/// writes; the Triton kernels launched so are told to, see pygpukit's driver.check_pdl).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
    pub pdl: bool,
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
    if cfg.pdl {
        // SAFETY: a zeroed attribute value is valid (a union of plain integers and arrays).
        let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        let config = sys::CUlaunchConfig {
            gridDimX: gx,
            gridDimY: gy,
            gridDimZ: gz,
            blockDimX: bx,
            blockDimY: by,
            blockDimZ: bz,
            sharedMemBytes: cfg.shared_bytes,
            hStream: stream as sys::CUstream,
            attrs: &mut attr,
            numAttrs: 1,
        };
        // SAFETY: upheld by the caller (see above); `config` and `attr` outlive the call.
        return check("cuLaunchKernelEx", unsafe {
            sys::cuLaunchKernelEx(
                &config,
                function as sys::CUfunction,
                params.as_mut_ptr(),
                ptr::null_mut(),
            )
        });
    }
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

/// Kernels with up to this many parameters get their pointer array on the stack (Triton and
/// NVRTC kernels take far fewer); more fall back to one heap allocation.
const INLINE_PARAMS: usize = 64;

/// Call `f` with the argument pointer array cuLaunchKernel reads for `slots`: one pointer to
/// each 8-byte slot, in order (each slot holds one parameter's C value in its low bytes,
/// little-endian). The one place the launch paths (Triton's fast path, NVRTC) build it; for
/// the usual parameter counts it costs no allocation.
pub fn with_slot_pointers<R>(slots: &mut [u64], f: impl FnOnce(&mut [*mut c_void]) -> R) -> R {
    let as_ptr = |v: &mut u64| v as *mut u64 as *mut c_void;
    if slots.len() <= INLINE_PARAMS {
        let mut ptrs = [ptr::null_mut(); INLINE_PARAMS];
        for (p, v) in ptrs.iter_mut().zip(slots.iter_mut()) {
            *p = as_ptr(v);
        }
        f(&mut ptrs[..slots.len()])
    } else {
        let mut ptrs: Vec<*mut c_void> = slots.iter_mut().map(as_ptr).collect();
        f(&mut ptrs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both the stack and the heap array point at each slot in order, and nothing more.
    #[test]
    fn slot_pointers_point_at_each_slot_in_order() {
        for n in [0, 1, 7, INLINE_PARAMS, INLINE_PARAMS + 1, 3 * INLINE_PARAMS] {
            let mut slots: Vec<u64> = (0..n as u64).map(|i| i * 0x0101 + 5).collect();
            let base = slots.as_ptr() as usize;
            let seen = with_slot_pointers(&mut slots, |ptrs| {
                assert_eq!(ptrs.len(), n);
                ptrs.iter()
                    .enumerate()
                    .map(|(i, p)| {
                        assert_eq!(*p as usize, base + 8 * i, "slot {i} of {n}");
                        // SAFETY: points into `slots`, alive for the closure.
                        unsafe { *(*p as *const u64) }
                    })
                    .collect::<Vec<u64>>()
            });
            assert_eq!(seen, slots, "{n} slots");
        }
    }
}
