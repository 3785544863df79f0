//! Lazily initialised CUDA driver state.
//!
//! libcuda is loaded at run time by cudarc. cudarc panics when the library or one of its symbols is
//! missing, so before any driver call we (1) ask `is_culib_present()`, (2) look up every symbol this
//! crate uses, and only then (3) call `cuInit`. Any failure becomes a reason string kept for the
//! life of the process: `driver_status()` reports it, `device_count()` is 0, and every entry point
//! that needs the driver returns `Error::NoDriver`. Nothing here panics.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use cudarc::driver::sys;

use crate::error::{check, Error, Result};

/// Set this environment variable to a non-empty value other than "0" to run as if no driver were
/// installed (CPU mode on a GPU machine; also makes the no-driver tests deterministic there).
pub const DISABLE_ENV: &str = "PYGPUKIT_DISABLE_CUDA";

/// Every driver entry point this crate calls, by the symbol name cudarc loads (the one list: NVRTC
/// module loading and graph capture's pointer query included). Checked up front so that an old
/// driver gives a clear "driver too old" status instead of a panic mid-way.
const REQUIRED_SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuGetErrorName",
    "cuGetErrorString",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceGetAttribute",
    "cuDeviceTotalMem_v2",
    "cuDeviceGetUuid_v2",
    "cuDeviceGetPCIBusId",
    "cuDevicePrimaryCtxRetain",
    "cuCtxGetCurrent",
    "cuCtxSetCurrent",
    "cuCtxSynchronize",
    "cuCtxGetStreamPriorityRange",
    "cuMemGetInfo_v2",
    "cuStreamCreateWithPriority",
    "cuStreamDestroy_v2",
    "cuStreamSynchronize",
    "cuStreamQuery",
    "cuStreamWaitEvent",
    "cuStreamGetPriority",
    "cuStreamBeginCapture_v2",
    "cuStreamEndCapture",
    "cuStreamIsCapturing",
    "cuGraphInstantiateWithFlags",
    "cuGraphLaunch",
    "cuGraphExecDestroy",
    "cuGraphDestroy",
    "cuEventCreate",
    "cuEventDestroy_v2",
    "cuEventRecord",
    "cuEventSynchronize",
    "cuEventQuery",
    "cuEventElapsedTime",
    "cuMemPoolCreate",
    "cuMemPoolDestroy",
    "cuMemPoolSetAttribute",
    "cuMemPoolGetAttribute",
    "cuMemPoolTrimTo",
    "cuMemAllocFromPoolAsync",
    "cuMemFreeAsync",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuMemcpyDtoDAsync_v2",
    "cuMemcpy2DAsync_v2",
    "cuLaunchKernel",
    "cuLaunchKernelEx", // programmatic dependent launches (CUDA 11.8+ drivers)
    "cuFuncSetAttribute",
    "cuModuleLoadData",
    "cuModuleGetFunction",
    "cuModuleUnload",
    "cuPointerGetAttribute",
    "cuMemsetD8Async",
    "cuMemsetD16Async",
    "cuMemsetD32Async",
    "cuMemHostAlloc",
    "cuMemFreeHost",
];

/// Entry points that only some drivers have; each user checks its own with `missing_symbol`
/// before the first call (green contexts: driver 12.4+). Listed for the symbol test.
#[cfg(test)]
pub(crate) const OPTIONAL_SYMBOLS: &[&[&str]] = &[crate::scheduler::green::GREEN_SYMBOLS];

/// The first of `names` that libcuda lacks (None: all present). Only after the driver loaded;
/// without one every name counts as missing.
pub(crate) fn missing_symbol(names: &[&'static str]) -> Option<&'static str> {
    if state().is_err() || !library_loaded() {
        return names.first().copied();
    }
    // SAFETY: the library is loaded (library_loaded); `get` only looks a symbol up.
    let lib = unsafe { sys::culib() };
    names
        .iter()
        .copied()
        .find(|n| unsafe { lib.get::<*const c_void>(n.as_bytes()) }.is_err())
}

pub(crate) struct DriverState {
    pub version: i32,
    pub device_count: i32,
}

static STATE: OnceLock<std::result::Result<DriverState, String>> = OnceLock::new();
/// True once libcuda is loaded and every required symbol resolved: from then on calling any
/// `sys::cu*` function cannot panic inside cudarc.
static LIBRARY_LOADED: AtomicBool = AtomicBool::new(false);

pub(crate) fn library_loaded() -> bool {
    LIBRARY_LOADED.load(Ordering::Acquire)
}

fn disabled_by_env() -> bool {
    std::env::var_os(DISABLE_ENV).is_some_and(|v| !v.is_empty() && v != "0")
}

fn init() -> std::result::Result<DriverState, String> {
    if disabled_by_env() {
        return Err(format!(
            "disabled by the environment variable {DISABLE_ENV}"
        ));
    }
    // SAFETY: only tries to dlopen the candidate names; no symbol is called.
    if !unsafe { sys::is_culib_present() } {
        return Err(
            "libcuda was not found (no NVIDIA driver installed, or it is not on the \
                    loader path)"
                .to_string(),
        );
    }
    // SAFETY: the library is present, so culib() loads it instead of panicking; `get` only looks
    // a symbol up.
    let lib = unsafe { sys::culib() };
    for name in REQUIRED_SYMBOLS {
        if unsafe { lib.get::<*const c_void>(name.as_bytes()) }.is_err() {
            return Err(format!(
                "libcuda lacks the symbol {name}: the NVIDIA driver is too old (need CUDA 12.x)"
            ));
        }
    }
    LIBRARY_LOADED.store(true, Ordering::Release);
    // SAFETY: plain driver calls with valid out-pointers.
    unsafe {
        check("cuInit", sys::cuInit(0)).map_err(|e| e.to_string())?;
        let mut version = 0;
        check("cuDriverGetVersion", sys::cuDriverGetVersion(&mut version))
            .map_err(|e| e.to_string())?;
        let mut device_count = 0;
        check("cuDeviceGetCount", sys::cuDeviceGetCount(&mut device_count))
            .map_err(|e| e.to_string())?;
        Ok(DriverState {
            version,
            device_count,
        })
    }
}

/// The initialised driver, or `NoDriver` with the reason.
pub(crate) fn state() -> Result<&'static DriverState> {
    match STATE.get_or_init(init) {
        Ok(s) => Ok(s),
        Err(reason) => Err(Error::NoDriver {
            reason: reason.clone(),
        }),
    }
}

/// `Ok(())` when the driver loaded and initialised, else the reason. Never panics.
pub fn driver_status() -> std::result::Result<(), String> {
    state().map(|_| ()).map_err(|e| match e {
        Error::NoDriver { reason } => reason,
        other => other.to_string(),
    })
}

/// The driver's CUDA version as an integer (1000 * major + 10 * minor, e.g. 13000).
pub fn driver_version() -> Result<i32> {
    Ok(state()?.version)
}

/// Number of CUDA devices; 0 when there is no driver.
pub fn device_count() -> usize {
    state().map_or(0, |s| s.device_count.max(0) as usize)
}

/// Check an ordinal against the devices present and return its CUdevice handle.
pub(crate) fn device_handle(ordinal: i32) -> Result<sys::CUdevice> {
    let count = state()?.device_count;
    if count <= 0 {
        return Err(Error::NoDriver {
            reason: "the driver reports no CUDA device".to_string(),
        });
    }
    if ordinal < 0 || ordinal >= count {
        return Err(Error::invalid(format!(
            "device ordinal {ordinal} out of range (this machine has {count} CUDA device(s))"
        )));
    }
    let mut dev: sys::CUdevice = 0;
    // SAFETY: valid out-pointer, ordinal checked above.
    check("cuDeviceGet", unsafe {
        sys::cuDeviceGet(&mut dev, ordinal)
    })?;
    Ok(dev)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a machine without libcuda (CI, this crate's development box) the driver must report a
    /// reason instead of panicking. On a GPU machine the status must be consistent with the count.
    #[test]
    fn status_without_driver_is_a_reason_not_a_panic() {
        let present = unsafe { sys::is_culib_present() } && !disabled_by_env();
        match driver_status() {
            Err(reason) => {
                assert!(!reason.is_empty());
                assert_eq!(device_count(), 0);
                assert!(matches!(driver_version(), Err(Error::NoDriver { .. })));
                assert!(matches!(device_handle(0), Err(Error::NoDriver { .. })));
                if !present {
                    assert!(
                        reason.contains("libcuda") || reason.contains(DISABLE_ENV),
                        "{reason}"
                    );
                }
            }
            Ok(()) => {
                assert!(present);
                assert!(driver_version().unwrap() >= 12000);
            }
        }
    }

    /// Every call of a driver function (`sys::` then `cu` and a capital) in this crate's
    /// sources names a symbol checked at start-up, so no entry point needs a check of its own
    /// (and none can panic inside cudarc).
    #[test]
    fn every_driver_call_is_a_required_symbol() {
        fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p);
                }
            }
        }
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        if !src.is_dir() {
            // A test binary staged to another machine (scripts/stage_gpu.sh): no sources there;
            // the check ran where it was built.
            eprintln!("skipped: {} not found", src.display());
            return;
        }
        let mut files = Vec::new();
        walk(&src, &mut files);
        let mut calls = 0;
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            for (i, _) in text.match_indices("sys::cu") {
                let rest = &text[i + "sys::".len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                // Driver functions are cuXxx( ; types are CUxxx, cuBLASLt's are cublasLt...
                let is_call = rest[name.len()..].starts_with('(');
                if is_call && name.chars().nth(2).is_some_and(|c| c.is_ascii_uppercase()) {
                    calls += 1;
                    let optional = OPTIONAL_SYMBOLS.iter().any(|l| l.contains(&name.as_str()));
                    assert!(
                        REQUIRED_SYMBOLS.contains(&name.as_str()) || optional,
                        "{} calls {name}, missing from REQUIRED_SYMBOLS and OPTIONAL_SYMBOLS",
                        f.display()
                    );
                }
            }
        }
        assert!(calls > REQUIRED_SYMBOLS.len(), "found only {calls} calls");
    }
}
