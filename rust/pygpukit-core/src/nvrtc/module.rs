//! Loading a compiled image into the device's primary context and launching its kernels.
//!
//! Launches go through `launch::launch_raw`, the one cuLaunchKernel wrapper of the crate.

use std::ffi::{c_void, CString};

use cudarc::driver::sys;

use crate::context::ensure_current;
use crate::deferred::record_if_err;
use crate::error::{check, Error, Result};
use crate::launch::{launch_raw, LaunchConfig};

/// Every entry point used here is in `driver::REQUIRED_SYMBOLS`, checked once when the driver
/// loads: `state()` succeeding means cudarc cannot panic on any of them. It is asked here, not
/// left to `ensure_current`, because that is a no-op for device -1.
fn driver_loaded() -> Result<()> {
    crate::driver::state().map(|_| ())
}

/// A loaded CUmodule (unloaded on drop).
pub struct Module {
    handle: usize,
    device: i32,
}

impl Module {
    /// Load a CUBIN or PTX image on `device` (PTX must be NUL-terminated; one is added if not).
    pub fn load(device: i32, image: &[u8]) -> Result<Module> {
        if image.is_empty() {
            return Err(Error::invalid("module image is empty"));
        }
        driver_loaded()?;
        ensure_current(device)?;
        let is_elf = image.starts_with(b"\x7fELF");
        let owned;
        let data: &[u8] = if is_elf || image.last() == Some(&0) {
            image
        } else {
            owned = [image, &[0u8]].concat();
            &owned
        };
        let mut m: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: valid out-pointer; `data` is a complete image that outlives the call.
        check("cuModuleLoadData", unsafe {
            sys::cuModuleLoadData(&mut m, data.as_ptr() as *const c_void)
        })?;
        Ok(Module {
            handle: m as usize,
            device,
        })
    }

    pub fn device(&self) -> i32 {
        self.device
    }

    /// The CUfunction named `name` (a lowered symbol), as an address.
    pub fn function(&self, name: &str) -> Result<usize> {
        let c =
            CString::new(name).map_err(|_| Error::invalid("function name contains a NUL byte"))?;
        ensure_current(self.device)?;
        let mut f: sys::CUfunction = std::ptr::null_mut();
        // SAFETY: live module, NUL-terminated name, valid out-pointer.
        check("cuModuleGetFunction", unsafe {
            sys::cuModuleGetFunction(&mut f, self.handle as sys::CUmodule, c.as_ptr())
        })?;
        Ok(f as usize)
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        let r = ensure_current(self.device).and_then(|()| {
            // SAFETY: loaded by Module::load, unloaded once.
            check("cuModuleUnload", unsafe {
                sys::cuModuleUnload(self.handle as sys::CUmodule)
            })
        });
        record_if_err(r);
    }
}

/// Static shared memory beyond this needs the function's opt-in attribute.
const DEFAULT_DYNAMIC_SHARED: u32 = 48 * 1024;

/// Launch `function` (from a `Module` on `device`) on `stream`.
///
/// # Safety
/// `function` must be a live CUfunction of `device`'s primary context, `params` must point at
/// one value per kernel parameter with the parameter's exact size, and every device pointer
/// passed must stay valid until the kernel completes.
pub unsafe fn launch(
    device: i32,
    function: usize,
    grid: [u32; 3],
    block: [u32; 3],
    shared_bytes: u32,
    stream: usize,
    params: &mut [*mut c_void],
) -> Result<()> {
    if grid.contains(&0) || block.contains(&0) {
        return Err(Error::invalid(format!(
            "launch: grid {grid:?} and block {block:?} must be >= 1 in every dim"
        )));
    }
    driver_loaded()?;
    ensure_current(device)?;
    if shared_bytes > DEFAULT_DYNAMIC_SHARED {
        // SAFETY: live function; the attribute takes an int byte count.
        check("cuFuncSetAttribute", unsafe {
            sys::cuFuncSetAttribute(
                function as sys::CUfunction,
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                shared_bytes as i32,
            )
        })?;
    }
    let cfg = LaunchConfig {
        grid,
        block,
        shared_bytes,
        pdl: false,
    };
    // SAFETY: upheld by the caller.
    unsafe { launch_raw(function, &cfg, stream, params) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_launch_shape_is_rejected_before_the_driver() {
        // SAFETY: rejected before any pointer is used.
        let e = unsafe { launch(0, 0, [0, 1, 1], [1, 1, 1], 0, 0, &mut []) }.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(Module::load(0, &[]).is_err());
    }
}
