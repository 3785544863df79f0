//! `pygpukit._core`: Python bindings of pygpukit-core.
//!
//! Thin by design: argument checks (ValueError/TypeError naming the argument), GIL release
//! around every call that waits or may block in the driver, and conversion of core errors into
//! the exceptions defined in `errors`. The logic lives in pygpukit-core.

use pyo3::prelude::*;

mod blas;
mod copies;
mod dlpack;
mod errors;
mod launch;
mod nvrtc;
mod pool;
mod runtime;
mod scheduler;
mod streams;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;

    m.add_function(wrap_pyfunction!(runtime::driver_status, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::driver_version, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::device_count, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::device_properties, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::mem_get_info, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::synchronize_device, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::make_current, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::take_deferred_errors, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::staging_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::trim_staging, m)?)?;

    m.add_class::<streams::PyStream>()?;
    m.add_class::<streams::PyEvent>()?;
    m.add_class::<streams::PyGraph>()?;
    m.add_class::<pool::PyPool>()?;
    m.add_class::<pool::PyBuffer>()?;
    // 0.2.x name: MemoryPool(quota=..., enable_eviction=True).allocate(4096).
    m.add("MemoryPool", m.getattr("Pool")?)?;

    m.add_function(wrap_pyfunction!(copies::memcpy_htod, m)?)?;
    m.add_function(wrap_pyfunction!(copies::memcpy_dtoh, m)?)?;
    m.add_function(wrap_pyfunction!(copies::memcpy_dtod, m)?)?;
    m.add_function(wrap_pyfunction!(copies::memcpy_2d, m)?)?;
    m.add_function(wrap_pyfunction!(copies::memset_d8, m)?)?;
    m.add_function(wrap_pyfunction!(copies::memset_d16, m)?)?;
    m.add_function(wrap_pyfunction!(copies::memset_d32, m)?)?;
    m.add_function(wrap_pyfunction!(copies::copy_htod_async, m)?)?;
    m.add_function(wrap_pyfunction!(copies::copy_dtoh_async, m)?)?;
    m.add_class::<copies::PyPendingHostCopy>()?;

    m.add_function(wrap_pyfunction!(dlpack::dlpack_export, m)?)?;
    m.add_function(wrap_pyfunction!(dlpack::dlpack_import, m)?)?;
    m.add_class::<dlpack::PyDLPackTensor>()?;

    m.add_class::<launch::PyTritonFastPath>()?;

    m.add_class::<scheduler::PyScheduler>()?;
    m.add_class::<scheduler::PySchedContext>()?;
    m.add_class::<scheduler::PyPacer>()?;

    m.add_function(wrap_pyfunction!(blas::cublaslt_load, m)?)?;
    m.add_function(wrap_pyfunction!(blas::cublaslt_loaded, m)?)?;
    m.add_function(wrap_pyfunction!(blas::cublaslt_matmul, m)?)?;
    m.add_function(wrap_pyfunction!(blas::cublaslt_matmul_fp8, m)?)?;
    m.add_function(wrap_pyfunction!(blas::cublaslt_fp8_scale_len, m)?)?;
    m.add_function(wrap_pyfunction!(blas::cublaslt_plan_count, m)?)?;
    m.add_function(wrap_pyfunction!(blas::cublaslt_clear_plans, m)?)?;
    m.add_function(wrap_pyfunction!(nvrtc::nvrtc_load, m)?)?;
    m.add_function(wrap_pyfunction!(nvrtc::nvrtc_loaded, m)?)?;
    m.add_function(wrap_pyfunction!(nvrtc::nvrtc_compile, m)?)?;
    m.add_function(wrap_pyfunction!(nvrtc::nvrtc_launch, m)?)?;
    m.add_class::<nvrtc::PyCudaModule>()?;

    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("DISABLE_CUDA_ENV", pygpukit_core::driver::DISABLE_ENV)?;
    Ok(())
}
