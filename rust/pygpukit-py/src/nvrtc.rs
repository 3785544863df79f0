//! NVRTC bindings: load the library, compile, load a module, launch a kernel.
//!
//! pygpukit/jit.py parses the kernel's signature, checks and packs the arguments (one 8-byte
//! little-endian slot per parameter, the C value in the low bytes) and picks the launch shape;
//! this layer only moves bytes and releases the GIL around compiling and launching.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use pygpukit_core::launch::with_slot_pointers;
use pygpukit_core::nvrtc::{self, module::Module};

use crate::errors::IntoPyResult;

/// Load NVRTC (once per process). Returns (path, (major, minor), supported real archs).
/// Raises CudaError (name LIBRARY_NOT_FOUND) naming every place searched.
#[pyfunction]
#[pyo3(signature = (extra=Vec::new()))]
pub fn nvrtc_load(py: Python<'_>, extra: Vec<String>) -> PyResult<(String, (i32, i32), Vec<i32>)> {
    let nv = py.detach(|| nvrtc::load(&extra)).py()?;
    Ok((nv.path.clone(), nv.version, nv.archs.clone()))
}

/// (path, (major, minor), archs) when NVRTC is loaded, else None.
#[pyfunction]
pub fn nvrtc_loaded() -> Option<(String, (i32, i32), Vec<i32>)> {
    nvrtc::loaded().map(|nv| (nv.path.clone(), nv.version, nv.archs.clone()))
}

/// Compile `source`; returns (ok, image, log, lowered names). When ok is False, image is empty
/// and log is the compiler's message (the source or an option was rejected).
#[pyfunction]
pub fn nvrtc_compile<'py>(
    py: Python<'py>,
    source: String,
    program_name: String,
    options: Vec<String>,
    names: Vec<String>,
    cubin: bool,
) -> PyResult<(bool, Bound<'py, PyBytes>, String, Vec<String>)> {
    let r = py
        .detach(|| nvrtc::compile(&source, &program_name, &options, &names, cubin))
        .py()?;
    Ok(match r {
        Ok(c) => (true, PyBytes::new(py, &c.image), c.log, c.lowered),
        Err(log) => (false, PyBytes::new(py, b""), log, Vec::new()),
    })
}

/// A loaded CUDA module (CUBIN or PTX) on one device; unloaded when dropped.
#[pyclass(module = "pygpukit._core", name = "CudaModule", frozen)]
pub struct PyCudaModule {
    inner: Module,
}

#[pymethods]
impl PyCudaModule {
    #[new]
    fn new(py: Python<'_>, device: i32, image: &[u8]) -> PyResult<Self> {
        let inner = py.detach(|| Module::load(device, image)).py()?;
        Ok(PyCudaModule { inner })
    }

    /// The CUfunction handle (an int) of the kernel with this (lowered) name.
    fn function(&self, name: &str) -> PyResult<usize> {
        self.inner.function(name).py()
    }

    #[getter]
    fn device(&self) -> i32 {
        self.inner.device()
    }
}

/// Launch `function` on `stream` of `device`. `params` holds one 8-byte little-endian slot per
/// kernel parameter (the caller packs each C value into the low bytes of its slot).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn nvrtc_launch(
    py: Python<'_>,
    device: i32,
    function: usize,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    shared_bytes: u32,
    stream: usize,
    params: &[u8],
) -> PyResult<()> {
    if params.len() % 8 != 0 {
        return Err(PyValueError::new_err(format!(
            "nvrtc_launch: params must be 8 bytes per parameter, got {} bytes",
            params.len()
        )));
    }
    let mut slots: Vec<u64> = params
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("chunks of 8")))
        .collect();
    let grid = [grid.0, grid.1, grid.2];
    let block = [block.0, block.1, block.2];
    // The slots move into the GIL-free section and outlive the launch there.
    py.detach(move || {
        with_slot_pointers(&mut slots, |ptrs| {
            // SAFETY: `function` comes from a CudaModule on `device` (kept alive by the
            // caller's kernel object); jit.py packed one slot per parameter of the parsed
            // signature.
            unsafe {
                nvrtc::module::launch(device, function, grid, block, shared_bytes, stream, ptrs)
            }
        })
    })
    .py()?;
    Ok(())
}
