//! Python exceptions of `pygpukit._core` and the one conversion from core errors.
//!
//! CudaError(RuntimeError): call, code, name.
//! OutOfMemoryError(MemoryError): requested, context, stats (dict or None), device_free,
//!     device_total (None for host pools).
//! QuotaExceededError(OutOfMemoryError): also quota, current.
//! NoDeviceError(RuntimeError): no driver, or no such device.
//! CaptureError(RuntimeError): the call cannot be recorded into the CUDA graph being captured.
//! AdmissionError(RuntimeError): the scheduler refused; subject, reason, requested, unreserved,
//!     holders.
//! Invalid arguments become ValueError.

use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use pygpukit_core::{Error, PoolStats};

pyo3::create_exception!(
    pygpukit._core,
    CudaError,
    PyRuntimeError,
    "A CUDA driver call failed; attributes: call, code (int), name."
);
pyo3::create_exception!(
    pygpukit._core,
    OutOfMemoryError,
    PyMemoryError,
    "An allocation failed after the OOM ladder; attributes: requested, context, stats, \
     device_free, device_total."
);
pyo3::create_exception!(
    pygpukit._core,
    QuotaExceededError,
    OutOfMemoryError,
    "An allocation would exceed the context's quota; adds attributes quota and current."
);
pyo3::create_exception!(
    pygpukit._core,
    CaptureError,
    PyRuntimeError,
    "The work can never be recorded into a CUDA graph (a host copy or a stream switch inside a \
     capture, a graph on the CPU device); the message names it, and retrying the same work \
     inside a capture fails the same way."
);
pyo3::create_exception!(
    pygpukit._core,
    AdmissionError,
    PyRuntimeError,
    "The scheduler refused a context or task (nothing was admitted); attributes: subject, \
     reason, requested, unreserved, holders (list of (context, reserved bytes))."
);
pyo3::create_exception!(
    pygpukit._core,
    NoDeviceError,
    PyRuntimeError,
    "No CUDA driver or no such device; the message gives the reason."
);

pub fn stats_dict<'py>(
    py: Python<'py>,
    s: &PoolStats,
    name: &str,
    device: i32,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("current_bytes", s.current_bytes)?;
    d.set_item("peak_bytes", s.peak_bytes)?;
    d.set_item("allocated_bytes", s.allocated_bytes)?;
    d.set_item("freed_bytes", s.freed_bytes)?;
    d.set_item("reserved_bytes", s.reserved_bytes)?;
    d.set_item("used_bytes", s.used_bytes)?;
    d.set_item("num_allocs", s.num_allocs)?;
    d.set_item("num_frees", s.num_frees)?;
    d.set_item("num_retries", s.num_retries)?;
    d.set_item("num_ooms", s.num_ooms)?;
    d.set_item("quota_rejections", s.quota_rejections)?;
    d.set_item("quota", s.quota)?;
    d.set_item("name", name)?;
    d.set_item("device", device)?;
    Ok(d)
}

fn build(py: Python<'_>, e: Error) -> PyResult<PyErr> {
    let msg = e.to_string();
    Ok(match e {
        Error::NoDriver { .. } => NoDeviceError::new_err(msg),
        Error::InvalidArgument(_) => PyValueError::new_err(msg),
        Error::NotCapturable(_) => CaptureError::new_err(msg),
        Error::Admission {
            subject,
            reason,
            requested,
            unreserved,
            holders,
        } => {
            let err = AdmissionError::new_err(msg);
            let v = err.value(py);
            v.setattr("subject", subject)?;
            v.setattr("reason", reason)?;
            v.setattr("requested", requested)?;
            v.setattr("unreserved", unreserved)?;
            v.setattr("holders", holders)?;
            err
        }
        Error::Cuda {
            call, code, name, ..
        } => {
            let err = CudaError::new_err(msg);
            let v = err.value(py);
            v.setattr("call", call)?;
            v.setattr("code", code)?;
            v.setattr("name", name)?;
            err
        }
        Error::Deferred { ref errors, .. } => {
            let err = CudaError::new_err(msg);
            let v = err.value(py);
            let (call, code, name) = match errors.iter().find(|x| matches!(x, Error::Cuda { .. })) {
                Some(Error::Cuda {
                    call, code, name, ..
                }) => (format!("{call} (deferred)"), *code, name.clone()),
                _ => ("deferred".to_string(), 0, "DEFERRED".to_string()),
            };
            v.setattr("call", call)?;
            v.setattr("code", code)?;
            v.setattr("name", name)?;
            err
        }
        Error::OutOfMemory {
            requested,
            context,
            device,
            stats,
            device_free,
            device_total,
        } => {
            let err = OutOfMemoryError::new_err(msg);
            let v = err.value(py);
            v.setattr("requested", requested)?;
            v.setattr("device", device)?;
            v.setattr("stats", stats_dict(py, &stats, &context, device)?)?;
            v.setattr("context", context)?;
            v.setattr("device_free", device_free)?;
            v.setattr("device_total", device_total)?;
            err
        }
        Error::QuotaExceeded {
            requested,
            context,
            quota,
            current,
        } => {
            let err = QuotaExceededError::new_err(msg);
            let v = err.value(py);
            v.setattr("requested", requested)?;
            v.setattr("context", context)?;
            v.setattr("quota", quota)?;
            v.setattr("current", current)?;
            v.setattr("stats", py.None())?;
            v.setattr("device_free", py.None())?;
            v.setattr("device_total", py.None())?;
            err
        }
    })
}

/// Convert a core error into the matching Python exception (with its attributes).
pub fn to_py(e: Error) -> PyErr {
    Python::attach(|py| build(py, e).unwrap_or_else(|err| err))
}

/// `?`-friendly conversion for core results.
pub trait IntoPyResult<T> {
    fn py(self) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for pygpukit_core::Result<T> {
    #[inline]
    fn py(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}

/// Register the exception types on the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("CudaError", py.get_type::<CudaError>())?;
    m.add("OutOfMemoryError", py.get_type::<OutOfMemoryError>())?;
    m.add("QuotaExceededError", py.get_type::<QuotaExceededError>())?;
    m.add("NoDeviceError", py.get_type::<NoDeviceError>())?;
    m.add("CaptureError", py.get_type::<CaptureError>())?;
    m.add("AdmissionError", py.get_type::<AdmissionError>())?;
    Ok(())
}
