//! Stream and Event classes.

use pyo3::prelude::*;

use pygpukit_core::graph::{begin_capture, end_capture, is_capturing};
use pygpukit_core::{priority_range, Event, Graph, Stream};

use crate::errors::IntoPyResult;

/// A CUDA stream (device >= 0) or the host pseudo-stream (device -1, handle 0).
///
/// Streams are created non-blocking by default: they do not synchronise with the legacy default
/// stream. An owned stream is destroyed when the last reference goes, including the references
/// buffers keep to the stream they were allocated on.
#[pyclass(name = "Stream", module = "pygpukit._core", frozen)]
pub struct PyStream {
    pub inner: Stream,
}

#[pymethods]
impl PyStream {
    #[new]
    #[pyo3(signature = (device=0, priority=0, non_blocking=true))]
    fn new(py: Python<'_>, device: i32, priority: i32, non_blocking: bool) -> PyResult<Self> {
        let inner = py
            .detach(|| Stream::new(device, priority, non_blocking))
            .py()?;
        Ok(PyStream { inner })
    }

    /// Wrap a stream someone else owns (1 = CU_STREAM_LEGACY, 2 = CU_STREAM_PER_THREAD, or e.g.
    /// `torch.cuda.current_stream().cuda_stream`). Never destroyed by pygpukit; the owner must
    /// keep it alive while it is used here.
    #[staticmethod]
    fn external(py: Python<'_>, handle: usize, device: i32) -> PyResult<Self> {
        let inner = py.detach(|| Stream::external(handle, device)).py()?;
        Ok(PyStream { inner })
    }

    /// (least, greatest) priority of the device's streams; greatest is the most urgent
    /// (numerically smallest). (0, 0) for the host.
    #[staticmethod]
    fn priority_range(device: i32) -> PyResult<(i32, i32)> {
        priority_range(device).py()
    }

    #[getter]
    fn handle(&self) -> usize {
        self.inner.handle()
    }
    #[getter]
    fn device(&self) -> i32 {
        self.inner.device()
    }
    #[getter]
    fn priority(&self) -> i32 {
        self.inner.priority()
    }
    /// SMs of the partition (green context) the stream runs on; None: every SM of the device.
    #[getter]
    fn sm_count(&self) -> Option<u32> {
        self.inner.partition().map(|p| p.sm_count())
    }

    /// Identifies the SM partition the stream runs on (0: the whole device): streams with equal
    /// ids run on the same SMs.
    #[getter]
    fn partition_id(&self) -> usize {
        self.inner.partition().map_or(0, |p| p.id())
    }

    /// A new stream that runs where this one does (its SM partition, or the whole device), at
    /// `priority` (default: this stream's).
    #[pyo3(signature = (priority=None))]
    fn sibling(&self, py: Python<'_>, priority: Option<i32>) -> PyResult<Self> {
        let p = priority.unwrap_or(self.inner.priority());
        let inner = py.detach(|| self.inner.sibling(p)).py()?;
        Ok(PyStream { inner })
    }

    /// Start recording this stream's work into a CUDA graph instead of running it (relaxed
    /// capture mode; host copies on the stream are refused until end_capture).
    fn begin_capture(&self) -> PyResult<()> {
        begin_capture(&self.inner).py()
    }

    /// Stop recording and instantiate the graph; the stream leaves capture mode even on error.
    fn end_capture(&self, py: Python<'_>) -> PyResult<PyGraph> {
        let inner = py.detach(|| end_capture(&self.inner)).py()?;
        Ok(PyGraph { inner })
    }

    /// True while the stream is capturing (also when an illegal call invalidated the capture).
    fn is_capturing(&self) -> PyResult<bool> {
        is_capturing(&self.inner).py()
    }

    /// Wait until all work queued on the stream is done (GIL released).
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.synchronize()).py()
    }

    /// True when all queued work is done.
    fn query(&self) -> PyResult<bool> {
        self.inner.query().py()
    }

    /// Make later work on this stream wait for the event's last record.
    fn wait_event(&self, py: Python<'_>, event: &Bound<'_, PyEvent>) -> PyResult<()> {
        let ev = &event.get().inner;
        py.detach(|| self.inner.wait_event(ev)).py()
    }

    /// Record `event` (a new timing Event of this device if None) on this stream; returns it.
    #[pyo3(signature = (event=None))]
    fn record_event(
        &self,
        py: Python<'_>,
        event: Option<Bound<'_, PyEvent>>,
    ) -> PyResult<Py<PyEvent>> {
        let event = match event {
            Some(e) => e.unbind(),
            None => Py::new(
                py,
                PyEvent {
                    inner: Event::new(self.inner.device(), true, false).py()?,
                },
            )?,
        };
        event.get().inner.record(&self.inner).py()?;
        Ok(event)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        match other.cast::<PyStream>() {
            Ok(o) => self.inner == o.get().inner,
            Err(_) => false,
        }
    }

    fn __hash__(&self) -> u64 {
        (self.inner.handle() as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ self.inner.device() as u64
    }

    fn __repr__(&self) -> String {
        if self.inner.is_host() {
            "Stream(device=-1, host)".to_string()
        } else {
            format!(
                "Stream(device={}, handle={:#x}, priority={}{}{})",
                self.inner.device(),
                self.inner.handle(),
                self.inner.priority(),
                if self.inner.is_owned() {
                    ""
                } else {
                    ", external"
                },
                match self.inner.partition() {
                    Some(p) => format!(", sms={}", p.sm_count()),
                    None => String::new(),
                }
            )
        }
    }
}

/// A CUDA event (device >= 0) or a host event (device -1) that records the host clock.
#[pyclass(name = "Event", module = "pygpukit._core", frozen)]
pub struct PyEvent {
    pub inner: Event,
}

#[pymethods]
impl PyEvent {
    #[new]
    #[pyo3(signature = (device=0, enable_timing=true, blocking=false))]
    fn new(device: i32, enable_timing: bool, blocking: bool) -> PyResult<Self> {
        Ok(PyEvent {
            inner: Event::new(device, enable_timing, blocking).py()?,
        })
    }

    /// Capture the work queued so far on `stream` (same device as the event).
    fn record(&self, stream: &Bound<'_, PyStream>) -> PyResult<()> {
        self.inner.record(&stream.get().inner).py()
    }

    /// Wait until the captured work is done (GIL released).
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.synchronize()).py()
    }

    fn query(&self) -> PyResult<bool> {
        self.inner.query().py()
    }

    /// Milliseconds from this event to `end` (both recorded, timing enabled).
    fn elapsed_time(&self, end: &Bound<'_, PyEvent>) -> PyResult<f64> {
        self.inner.elapsed_ms(&end.get().inner).py()
    }

    #[getter]
    fn handle(&self) -> usize {
        self.inner.handle()
    }
    #[getter]
    fn device(&self) -> i32 {
        self.inner.device()
    }
    #[getter]
    fn enable_timing(&self) -> bool {
        self.inner.timing_enabled()
    }

    fn __repr__(&self) -> String {
        format!(
            "Event(device={}, handle={:#x}, enable_timing={})",
            self.inner.device(),
            self.inner.handle(),
            self.inner.timing_enabled()
        )
    }
}

/// An instantiated CUDA graph (from Stream.end_capture); destroyed with the last reference.
#[pyclass(name = "Graph", module = "pygpukit._core", frozen)]
pub struct PyGraph {
    pub inner: Graph,
}

#[pymethods]
impl PyGraph {
    /// Replay the captured work on `stream` (a stream of the graph's device).
    fn launch(&self, stream: &Bound<'_, PyStream>) -> PyResult<()> {
        self.inner.launch(&stream.get().inner).py()
    }

    #[getter]
    fn device(&self) -> i32 {
        self.inner.device()
    }

    fn __repr__(&self) -> String {
        format!("Graph(device={})", self.inner.device())
    }
}
