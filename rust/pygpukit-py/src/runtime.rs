//! Driver and device queries.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use pygpukit_core as core;

use crate::errors::IntoPyResult;

/// (True, "") when the CUDA driver is usable, else (False, reason). Never raises.
#[pyfunction]
pub fn driver_status(py: Python<'_>) -> (bool, String) {
    // The first call loads libcuda and runs cuInit, which can take a while: release the GIL.
    match py.detach(core::driver_status) {
        Ok(()) => (true, String::new()),
        Err(reason) => (false, reason),
    }
}

/// The driver's CUDA version, 1000 * major + 10 * minor (e.g. 12080). NoDeviceError without one.
#[pyfunction]
pub fn driver_version(py: Python<'_>) -> PyResult<i32> {
    py.detach(core::driver_version).py()
}

/// Number of CUDA devices; 0 without a driver. Never raises.
#[pyfunction]
pub fn device_count(py: Python<'_>) -> usize {
    py.detach(core::device_count)
}

/// Properties of device `ordinal` as a dict.
#[pyfunction]
pub fn device_properties(py: Python<'_>, ordinal: i32) -> PyResult<Bound<'_, PyDict>> {
    let p = py.detach(|| core::device_properties(ordinal)).py()?;
    let d = PyDict::new(py);
    d.set_item("ordinal", p.ordinal)?;
    d.set_item("name", p.name)?;
    d.set_item("major", p.major)?;
    d.set_item("minor", p.minor)?;
    d.set_item("sm_count", p.sm_count)?;
    d.set_item("total_memory", p.total_memory)?;
    d.set_item("l2_cache_bytes", p.l2_cache_bytes)?;
    d.set_item("max_threads_per_block", p.max_threads_per_block)?;
    d.set_item(
        "max_shared_memory_per_block_optin",
        p.max_shared_memory_per_block_optin,
    )?;
    d.set_item("warp_size", p.warp_size)?;
    d.set_item("clock_khz", p.clock_khz)?;
    d.set_item("memory_clock_khz", p.memory_clock_khz)?;
    d.set_item("memory_bus_width_bits", p.memory_bus_width_bits)?;
    d.set_item("pci_bus_id", p.pci_bus_id)?;
    d.set_item("uuid", p.uuid)?;
    Ok(d)
}

/// (free, total) bytes of device `ordinal`.
#[pyfunction]
pub fn mem_get_info(py: Python<'_>, ordinal: i32) -> PyResult<(u64, u64)> {
    py.detach(|| core::mem_get_info(ordinal)).py()
}

/// Wait for all work on the device (its primary context). No-op for -1 (host).
#[pyfunction]
pub fn synchronize_device(py: Python<'_>, ordinal: i32) -> PyResult<()> {
    if ordinal < -1 {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "ordinal must be -1 (host) or a CUDA ordinal >= 0, got {ordinal}"
        )));
    }
    py.detach(|| core::synchronize_device(ordinal)).py()
}

/// Make device `ordinal`'s primary context current on the calling thread (what every pygpukit
/// call shares with torch, Triton and CuPy); foreign launchers such as Triton's need it current.
#[pyfunction]
pub fn make_current(py: Python<'_>, ordinal: i32) -> PyResult<()> {
    py.detach(|| core::ensure_current(ordinal)).py()
}

/// Drain the errors recorded in destructors (failed frees and destroys), as messages.
#[pyfunction]
pub fn take_deferred_errors() -> Vec<String> {
    core::take_deferred_errors()
        .into_iter()
        .map(|e| e.to_string())
        .collect()
}

/// Bytes of pinned host memory cached for asynchronous host copies.
#[pyfunction]
pub fn staging_bytes() -> usize {
    core::copy::staging_bytes()
}

/// Free the cached pinned staging blocks (waiting for copies still using them); returns bytes.
#[pyfunction]
pub fn trim_staging(py: Python<'_>) -> usize {
    py.detach(core::copy::trim_staging)
}
