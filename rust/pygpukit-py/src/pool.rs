//! Pool (alias MemoryPool) and Buffer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use pygpukit_core::{device_count, Buffer, MemoryPool};

use crate::errors::{stats_dict, IntoPyResult};
use crate::streams::PyStream;

/// Convert a Python size argument, naming it in the ValueError when negative.
#[inline]
pub fn nonneg(v: i64, name: &str) -> PyResult<usize> {
    usize::try_from(v).map_err(|_| PyValueError::new_err(format!("{name} must be >= 0, got {v}")))
}

fn quota_arg(q: Option<i64>) -> PyResult<Option<u64>> {
    q.map(|v| nonneg(v, "quota").map(|v| v as u64)).transpose()
}

/// A memory pool: a named VRAM budget (a pygpukit execution context) with statistics, an
/// optional quota and the OOM ladder. device=None picks device 0 when a GPU is present, else
/// the host (-1). Device pools are CUDA stream-ordered pools in the primary context, so their
/// pointers work with torch, Triton and CuPy.
///
/// enable_eviction=True (also 0.2.x's MemoryPool): an allocation that finds the device full
/// runs the OOM ladder: the cached memory of the device's BestEffort pools is released and the
/// allocation retried, then every pool's (each down to the memory held for its reservation),
/// the device synchronized and the allocation retried once. Cached memory goes back to the
/// driver as whole unused chunks of its pool (cuMemPoolTrimTo), not block by block in
/// least-recently-used order per size class as 0.2.x's pool did. False: the first failure is
/// final. Host pools cache nothing.
#[pyclass(name = "Pool", module = "pygpukit._core", frozen)]
pub struct PyPool {
    pool: MemoryPool,
}

impl PyPool {
    /// Wrap a pool the core made (a scheduler context's).
    pub fn from_core(pool: MemoryPool) -> Self {
        PyPool { pool }
    }
}

#[pymethods]
impl PyPool {
    #[new]
    #[pyo3(signature = (device=None, name="default".to_string(), quota=None, enable_eviction=true))]
    fn new(
        py: Python<'_>,
        device: Option<i32>,
        name: String,
        quota: Option<i64>,
        enable_eviction: bool,
    ) -> PyResult<Self> {
        let quota = quota_arg(quota)?;
        let pool = py
            .detach(|| {
                let device = device.unwrap_or(if device_count() > 0 { 0 } else { -1 });
                MemoryPool::new(device, name, quota, enable_eviction)
            })
            .py()?;
        Ok(PyPool { pool })
    }

    /// Allocate `nbytes` ordered on `stream` (None: the pool's own stream). Raises
    /// QuotaExceededError, OutOfMemoryError (after the OOM ladder), or CudaError.
    #[pyo3(signature = (nbytes, stream=None))]
    fn allocate(
        &self,
        py: Python<'_>,
        nbytes: i64,
        stream: Option<&Bound<'_, PyStream>>,
    ) -> PyResult<PyBuffer> {
        let n = nonneg(nbytes, "nbytes")?;
        let s = stream.map(|s| &s.get().inner);
        // Host pools never block: skip the GIL release on their hot path. Device pools may wait
        // in the driver (pool growth, or the OOM ladder's synchronise).
        let buf = if self.pool.device() < 0 {
            self.pool.allocate(n, s)
        } else {
            py.detach(|| self.pool.allocate(n, s))
        }
        .py()?;
        Ok(PyBuffer::new(buf))
    }

    /// Statistics as a dict (byte counts are requested sizes).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.pool.stats().py()?;
        stats_dict(py, &s, self.pool.name(), self.pool.device())
    }

    /// Release cached memory of this pool, keeping at least keep_bytes reserved.
    #[pyo3(signature = (keep_bytes=0))]
    fn trim(&self, py: Python<'_>, keep_bytes: i64) -> PyResult<()> {
        let keep = nonneg(keep_bytes, "keep_bytes")?;
        py.detach(|| self.pool.trim(keep)).py()
    }

    /// Quota in bytes, None for unlimited. Lowering it below current use frees nothing; it
    /// rejects new allocations until enough is freed.
    #[getter]
    fn quota(&self) -> Option<u64> {
        self.pool.quota()
    }
    #[setter]
    fn set_quota(&self, quota: Option<i64>) -> PyResult<()> {
        self.pool.set_quota(quota_arg(quota)?);
        Ok(())
    }
    #[getter]
    fn enable_eviction(&self) -> bool {
        self.pool.enable_eviction()
    }
    #[setter]
    fn set_enable_eviction(&self, on: bool) {
        self.pool.set_enable_eviction(on)
    }
    #[getter]
    fn name(&self) -> &str {
        self.pool.name()
    }
    #[getter]
    fn device(&self) -> i32 {
        self.pool.device()
    }
    /// The stream used when allocate() is given none.
    #[getter]
    fn default_stream(&self, py: Python<'_>) -> PyResult<PyStream> {
        let inner = py.detach(|| self.pool.default_stream()).py()?;
        Ok(PyStream { inner })
    }

    fn __repr__(&self) -> String {
        format!(
            "Pool(name='{}', device={}, quota={}, current_bytes={})",
            self.pool.name(),
            self.pool.device(),
            self.pool
                .quota()
                .map_or_else(|| "None".to_string(), |q| q.to_string()),
            self.pool.current_bytes()
        )
    }
}

/// A block of pool memory. Dropping it (or free()) returns it to its pool on the stream it was
/// allocated on, without a device synchronisation.
#[pyclass(name = "Buffer", module = "pygpukit._core", frozen)]
pub struct PyBuffer {
    /// None once freed. The address is cached outside the lock for the `ptr` getter.
    inner: Mutex<Option<Buffer>>,
    ptr: u64,
    nbytes: usize,
    device: i32,
    freed: AtomicBool,
}

impl PyBuffer {
    fn new(b: Buffer) -> Self {
        PyBuffer {
            ptr: b.ptr(),
            nbytes: b.nbytes(),
            device: b.device(),
            inner: Mutex::new(Some(b)),
            freed: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Buffer>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The address, or ValueError once freed.
    #[inline]
    pub fn live_ptr(&self) -> PyResult<u64> {
        if self.freed.load(Ordering::Acquire) {
            return Err(PyValueError::new_err("buffer was freed"));
        }
        Ok(self.ptr)
    }

    pub fn nbytes(&self) -> usize {
        self.nbytes
    }

    pub fn device(&self) -> i32 {
        self.device
    }
}

#[pymethods]
impl PyBuffer {
    #[getter]
    fn ptr(&self) -> PyResult<u64> {
        self.live_ptr()
    }
    #[getter(nbytes)]
    fn get_nbytes(&self) -> usize {
        self.nbytes
    }
    /// CUDA ordinal, or -1 for host memory.
    #[getter(device)]
    fn get_device(&self) -> i32 {
        self.device
    }
    /// The stream the buffer was allocated on (and will be freed on).
    #[getter]
    fn stream(&self) -> PyResult<PyStream> {
        match &*self.lock() {
            Some(b) => Ok(PyStream {
                inner: b.stream().clone(),
            }),
            None => Err(PyValueError::new_err("buffer was freed")),
        }
    }
    #[getter]
    fn pool_name(&self) -> PyResult<String> {
        match &*self.lock() {
            Some(b) => Ok(b.pool_name().to_string()),
            None => Err(PyValueError::new_err("buffer was freed")),
        }
    }
    #[getter]
    fn freed(&self) -> bool {
        self.freed.load(Ordering::Acquire)
    }

    /// Return the block to its pool now. Idempotent; afterwards `ptr` raises ValueError.
    fn free(&self) {
        let taken = {
            let mut g = self.lock();
            self.freed.store(true, Ordering::Release);
            g.take()
        };
        drop(taken);
    }

    fn __repr__(&self) -> String {
        if self.freed.load(Ordering::Acquire) {
            format!(
                "Buffer(freed, nbytes={}, device={})",
                self.nbytes, self.device
            )
        } else {
            format!(
                "Buffer(ptr={:#x}, nbytes={}, device={})",
                self.ptr, self.nbytes, self.device
            )
        }
    }
}
