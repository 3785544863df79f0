//! Copies and memsets. Device-side arguments are an int address or a Buffer (then its device
//! must match the stream's and the size must fit in it); host-side arguments are int addresses.
//! The caller keeps host memory alive during the call (for copy_dtoh_async, until wait_into).
//! On a host stream (device -1) every address is a host address and the copy runs at once.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use pygpukit_core::copy::{self, PendingHostCopy};
use pygpukit_core::Stream;

use crate::errors::IntoPyResult;
use crate::pool::{nonneg, PyBuffer};
use crate::streams::PyStream;

/// The address of a device-side argument, checked against the stream and the size used.
fn dev_addr(obj: &Bound<'_, PyAny>, name: &str, stream: &Stream, nbytes: usize) -> PyResult<u64> {
    if let Ok(b) = obj.cast::<PyBuffer>() {
        let b = b.get();
        let ptr = b.live_ptr()?;
        if b.device() != stream.device() {
            return Err(PyValueError::new_err(format!(
                "{name} is a Buffer on device {} but stream is on device {}",
                b.device(),
                stream.device()
            )));
        }
        if nbytes > b.nbytes() {
            return Err(PyValueError::new_err(format!(
                "{name} holds {} bytes but {nbytes} bytes were asked for",
                b.nbytes()
            )));
        }
        return Ok(ptr);
    }
    obj.extract::<u64>().map_err(|_| {
        PyTypeError::new_err(format!(
            "{name} must be an int address or a Buffer, got {}",
            obj.get_type()
                .name()
                .map_or_else(|_| "?".to_string(), |n| n.to_string())
        ))
    })
}

/// Host memory -> device. Returns once the source may be reused (the driver stages it).
#[pyfunction]
pub fn memcpy_htod(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    src_host: u64,
    nbytes: i64,
    stream: &Bound<'_, PyStream>,
) -> PyResult<()> {
    let n = nonneg(nbytes, "nbytes")?;
    let s = &stream.get().inner;
    let d = dev_addr(dst, "dst", s, n)?;
    // SAFETY: the caller guarantees the addresses are valid for n bytes (documented contract).
    py.detach(|| unsafe { copy::memcpy_htod(d, src_host as *const u8, n, s) })
        .py()
}

/// Device -> host memory; returns when the bytes are there (GIL released while waiting).
#[pyfunction]
pub fn memcpy_dtoh(
    py: Python<'_>,
    dst_host: u64,
    src: &Bound<'_, PyAny>,
    nbytes: i64,
    stream: &Bound<'_, PyStream>,
) -> PyResult<()> {
    let n = nonneg(nbytes, "nbytes")?;
    let s = &stream.get().inner;
    let sp = dev_addr(src, "src", s, n)?;
    // SAFETY: as above.
    py.detach(|| unsafe { copy::memcpy_dtoh(dst_host as *mut u8, sp, n, s) })
        .py()
}

/// Device -> device, asynchronous on `stream`.
#[pyfunction]
pub fn memcpy_dtod(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    src: &Bound<'_, PyAny>,
    nbytes: i64,
    stream: &Bound<'_, PyStream>,
) -> PyResult<()> {
    let n = nonneg(nbytes, "nbytes")?;
    let s = &stream.get().inner;
    let d = dev_addr(dst, "dst", s, n)?;
    let sp = dev_addr(src, "src", s, n)?;
    // SAFETY: as above.
    py.detach(|| unsafe { copy::memcpy_dtod(d, sp, n, s) }).py()
}

/// Strided 2D copy of `height` rows of `width_bytes`; either side may be host or device
/// (unified addressing). Buffers are checked to hold (height-1)*pitch + width_bytes bytes.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn memcpy_2d(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    dst_pitch: i64,
    src: &Bound<'_, PyAny>,
    src_pitch: i64,
    width_bytes: i64,
    height: i64,
    stream: &Bound<'_, PyStream>,
) -> PyResult<()> {
    let dp = nonneg(dst_pitch, "dst_pitch")?;
    let sp = nonneg(src_pitch, "src_pitch")?;
    let w = nonneg(width_bytes, "width_bytes")?;
    let h = nonneg(height, "height")?;
    let extent = |pitch: usize| -> PyResult<usize> {
        if h == 0 || w == 0 {
            return Ok(0);
        }
        (h - 1)
            .checked_mul(pitch)
            .and_then(|x| x.checked_add(w))
            .ok_or_else(|| PyValueError::new_err("2D copy extent overflows"))
    };
    let s = &stream.get().inner;
    let d = dev_addr(dst, "dst", s, extent(dp)?)?;
    let so = dev_addr(src, "src", s, extent(sp)?)?;
    // SAFETY: as above.
    py.detach(|| unsafe { copy::memcpy_2d(d, dp, so, sp, w, h, s) })
        .py()
}

/// Set `count` bytes to `value` (0..=255).
#[pyfunction]
pub fn memset_d8(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    value: u8,
    count: i64,
    stream: &Bound<'_, PyStream>,
) -> PyResult<()> {
    let n = nonneg(count, "count")?;
    let s = &stream.get().inner;
    let d = dev_addr(dst, "dst", s, n)?;
    // SAFETY: as above.
    py.detach(|| unsafe { copy::memset_d8(d, value, n, s) })
        .py()
}

/// Set `count` 16-bit words (dst 2-byte aligned) to `value`.
#[pyfunction]
pub fn memset_d16(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    value: u16,
    count: i64,
    stream: &Bound<'_, PyStream>,
) -> PyResult<()> {
    let n = nonneg(count, "count")?;
    let s = &stream.get().inner;
    let d = dev_addr(dst, "dst", s, n.saturating_mul(2))?;
    // SAFETY: as above.
    py.detach(|| unsafe { copy::memset_d16(d, value, n, s) })
        .py()
}

/// Set `count` 32-bit words (dst 4-byte aligned) to `value`.
#[pyfunction]
pub fn memset_d32(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    value: u32,
    count: i64,
    stream: &Bound<'_, PyStream>,
) -> PyResult<()> {
    let n = nonneg(count, "count")?;
    let s = &stream.get().inner;
    let d = dev_addr(dst, "dst", s, n.saturating_mul(4))?;
    // SAFETY: as above.
    py.detach(|| unsafe { copy::memset_d32(d, value, n, s) })
        .py()
}

/// Host -> device through a pinned staging block: returns without waiting for the copy, and
/// the source may be reused at once.
#[pyfunction]
pub fn copy_htod_async(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    src_host: u64,
    nbytes: i64,
    stream: &Bound<'_, PyStream>,
) -> PyResult<()> {
    let n = nonneg(nbytes, "nbytes")?;
    let s = &stream.get().inner;
    let d = dev_addr(dst, "dst", s, n)?;
    // SAFETY: as above.
    py.detach(|| unsafe { copy::copy_htod_async(d, src_host as *const u8, n, s) })
        .py()
}

/// A device -> host copy in flight (see copy_dtoh_async).
#[pyclass(name = "PendingHostCopy", module = "pygpukit._core", frozen)]
pub struct PyPendingHostCopy {
    inner: PendingHostCopy,
}

#[pymethods]
impl PyPendingHostCopy {
    /// True once the bytes have arrived in the staging block.
    fn ready(&self) -> PyResult<bool> {
        self.inner.ready().py()
    }

    /// Wait for the copy (GIL released), then copy the bytes to `dst_host` (an int address of at
    /// least `nbytes` writable bytes). May be called again.
    fn wait_into(&self, py: Python<'_>, dst_host: u64) -> PyResult<()> {
        // SAFETY: the caller guarantees dst_host is writable for nbytes.
        py.detach(|| unsafe { self.inner.wait_into(dst_host as *mut u8) })
            .py()
    }

    #[getter]
    fn nbytes(&self) -> usize {
        self.inner.nbytes()
    }
}

/// Device -> host into a pinned staging block, without waiting; returns a PendingHostCopy.
#[pyfunction]
pub fn copy_dtoh_async(
    py: Python<'_>,
    src: &Bound<'_, PyAny>,
    nbytes: i64,
    stream: &Bound<'_, PyStream>,
) -> PyResult<PyPendingHostCopy> {
    let n = nonneg(nbytes, "nbytes")?;
    let s = &stream.get().inner;
    let sp = dev_addr(src, "src", s, n)?;
    // SAFETY: as above.
    let inner = py
        .detach(|| unsafe { copy::copy_dtoh_async(sp, n, s) })
        .py()?;
    Ok(PyPendingHostCopy { inner })
}
