//! Scheduler, SchedContext and Pacer: the Rust scheduler (pygpukit_core::scheduler) for
//! `pygpukit.scheduler`. Argument checks and dict conversion only; the logic is in the core.

use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use pygpukit_core::scheduler::pacing::{PaceStats, Pacer, PacerRole};
use pygpukit_core::scheduler::qos::{ContextSpec, QosClass};
use pygpukit_core::scheduler::tasks::{Task, TaskCounts};
use pygpukit_core::scheduler::{
    device_scheduler, now_ns, shutdown_device_scheduler, SchedContext, Scheduler,
};

use crate::errors::{stats_dict, IntoPyResult};
use crate::pool::{nonneg, PyPool};
use crate::streams::PyStream;

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

fn bytes_arg(v: Option<i64>, name: &str) -> PyResult<Option<u64>> {
    v.map(|x| nonneg(x, name).map(|n| n as u64)).transpose()
}

/// The spec `create_context` and `evaluate` take, from their Python arguments.
#[allow(clippy::too_many_arguments)]
fn spec_arg(
    name: &str,
    qos: Option<&str>,
    reservation: Option<i64>,
    limit: Option<i64>,
    sm_share: Option<f64>,
    priority: i32,
    pace: Option<Option<f64>>,
) -> PyResult<ContextSpec> {
    let qos = qos.map(QosClass::parse).transpose().py()?;
    ContextSpec::resolve(
        name,
        qos,
        bytes_arg(reservation, "reservation")?,
        bytes_arg(limit, "limit")?,
        sm_share,
        priority,
        pace,
    )
    .py()
}

/// One device's scheduler. `Scheduler(device, capacity=None, sim_sms=None)` makes a private
/// one (tests, the 0.2.x objects); `Scheduler.for_device(...)` returns the process's one.
/// Device -1 is the CPU simulation over host memory (capacity required).
#[pyclass(name = "Scheduler", module = "pygpukit._core", frozen)]
pub struct PyScheduler {
    inner: Arc<Scheduler>,
}

#[pymethods]
impl PyScheduler {
    #[new]
    #[pyo3(signature = (device, capacity=None, sim_sms=None))]
    fn new(
        py: Python<'_>,
        device: i32,
        capacity: Option<i64>,
        sim_sms: Option<u32>,
    ) -> PyResult<Self> {
        let cap = bytes_arg(capacity, "capacity")?;
        let inner = py.detach(|| Scheduler::new(device, cap, sim_sms)).py()?;
        Ok(PyScheduler {
            inner: Arc::new(inner),
        })
    }

    /// The process's scheduler of `device`, made on first use.
    #[staticmethod]
    #[pyo3(signature = (device, capacity=None, sim_sms=None))]
    fn for_device(
        py: Python<'_>,
        device: i32,
        capacity: Option<i64>,
        sim_sms: Option<u32>,
    ) -> PyResult<Self> {
        let cap = bytes_arg(capacity, "capacity")?;
        let inner = py.detach(|| device_scheduler(device, cap, sim_sms)).py()?;
        Ok(PyScheduler { inner })
    }

    /// Forget the process's scheduler of `device`; True if there was one.
    #[staticmethod]
    fn shutdown(device: i32) -> bool {
        shutdown_device_scheduler(device)
    }

    #[getter]
    fn device(&self) -> i32 {
        self.inner.device()
    }

    /// How long a Guaranteed context counts as active after its last launch.
    #[getter]
    fn active_window_ms(&self) -> f64 {
        ms(self.inner.gate().window_ns())
    }
    #[setter]
    fn set_active_window_ms(&self, v: f64) -> PyResult<()> {
        if !(v.is_finite() && v >= 0.0) {
            return Err(PyValueError::new_err(format!(
                "active_window_ms must be a finite number >= 0, got {v}"
            )));
        }
        self.inner.gate().set_window_ns((v * 1e6) as u64);
        Ok(())
    }

    /// Admit a context or raise AdmissionError (nothing admitted). `pace`: a share of GPU time
    /// in (0, 1], or None for no pacing; `default_pace=True` ignores `pace` and takes the
    /// class's default.
    #[pyo3(signature = (name, qos=None, reservation=None, limit=None, sm_share=None, priority=0,
                        pace=None, default_pace=true))]
    #[allow(clippy::too_many_arguments)]
    fn create_context(
        &self,
        py: Python<'_>,
        name: &str,
        qos: Option<&str>,
        reservation: Option<i64>,
        limit: Option<i64>,
        sm_share: Option<f64>,
        priority: i32,
        pace: Option<f64>,
        default_pace: bool,
    ) -> PyResult<PySchedContext> {
        let pace = if default_pace { None } else { Some(pace) };
        let spec = spec_arg(name, qos, reservation, limit, sm_share, priority, pace)?;
        let ctx = py.detach(|| self.inner.create_context(spec)).py()?;
        Ok(PySchedContext { inner: ctx })
    }

    /// What create_context would decide now, changing nothing: the placement name and planned
    /// SMs, or AdmissionError.
    #[pyo3(signature = (name, qos=None, reservation=None, limit=None, sm_share=None, priority=0))]
    #[allow(clippy::too_many_arguments)]
    fn evaluate(
        &self,
        name: &str,
        qos: Option<&str>,
        reservation: Option<i64>,
        limit: Option<i64>,
        sm_share: Option<f64>,
        priority: i32,
    ) -> PyResult<(&'static str, Option<u32>)> {
        let spec = spec_arg(name, qos, reservation, limit, sm_share, priority, None)?;
        let p = self.inner.evaluate(&spec).py()?;
        Ok((p.name(), p.sm_count()))
    }

    /// Close a context; returns the ids of tasks admitted in its place.
    fn remove_context(&self, py: Python<'_>, name: &str) -> PyResult<Vec<u64>> {
        py.detach(|| self.inner.remove_context(name)).py()
    }

    fn context(&self, name: &str) -> PyResult<PySchedContext> {
        Ok(PySchedContext {
            inner: self.inner.context(name).py()?,
        })
    }

    fn contexts(&self) -> Vec<PySchedContext> {
        self.inner
            .contexts()
            .into_iter()
            .map(|inner| PySchedContext { inner })
            .collect()
    }

    /// Submit a task claiming `memory` bytes; (id, state name). AdmissionError if it can never
    /// fit.
    #[pyo3(signature = (context, name="", memory=0, priority=None))]
    fn submit(
        &self,
        py: Python<'_>,
        context: &str,
        name: &str,
        memory: i64,
        priority: Option<i32>,
    ) -> PyResult<(u64, &'static str)> {
        let m = nonneg(memory, "memory")? as u64;
        let (id, st) = py
            .detach(|| self.inner.submit(context, name, m, priority))
            .py()?;
        Ok((id, st.name()))
    }

    fn start(&self, py: Python<'_>, id: u64) -> PyResult<()> {
        py.detach(|| self.inner.start(id)).py()
    }

    /// End a running task (error=None: completed); returns the ids whose state changed after
    /// it (admitted, or refused now that they can never fit).
    #[pyo3(signature = (id, error=None))]
    fn finish(&self, py: Python<'_>, id: u64, error: Option<String>) -> PyResult<Vec<u64>> {
        py.detach(|| self.inner.finish(id, error)).py()
    }

    /// Cancel a pending, admitted or running task; returns the ids whose state changed after it.
    fn cancel(&self, py: Python<'_>, id: u64) -> PyResult<Vec<u64>> {
        py.detach(|| self.inner.cancel(id)).py()
    }

    /// The task as a dict, or None if unknown (or long finished).
    fn task<'py>(&self, py: Python<'py>, id: u64) -> PyResult<Option<Bound<'py, PyDict>>> {
        py.detach(|| self.inner.task(id))
            .map(|t| task_dict(py, &t))
            .transpose()
    }

    /// Everything about the device's scheduling, as a dict (see pygpukit.scheduler.snapshot).
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = py.detach(|| self.inner.snapshot()).py()?;
        let d = PyDict::new(py);
        d.set_item("device", s.device)?;
        d.set_item("capacity", s.capacity)?;
        d.set_item("reserved", s.reserved)?;
        d.set_item("unreserved", s.unreserved)?;
        d.set_item("borrowed", s.borrowed)?;
        d.set_item("sm_total", s.sm_space.map(|x| x.total))?;
        d.set_item("sm_granularity", s.sm_space.map(|x| x.granularity))?;
        d.set_item("sm_carvable", s.sm_space.map(|x| x.carvable))?;
        d.set_item("sm_free", s.sm_free)?;
        d.set_item("sm_note", s.sm_note)?;
        d.set_item("active_window_ms", ms(s.active_window_ns))?;
        d.set_item("guaranteed_idle_ms", s.guaranteed_idle_ns.map(ms))?;
        let ctxs = PyList::empty(py);
        for c in &s.contexts {
            let e = spec_dict(py, &c.spec)?;
            e.set_item("placement", c.placement.name())?;
            e.set_item("planned_sms", c.placement.sm_count())?;
            e.set_item("sm_count", c.sm_count)?;
            e.set_item("stream_priority", c.stream_priority)?;
            e.set_item("memory", stats_dict(py, &c.pool, &c.spec.name, s.device)?)?;
            e.set_item("pacing", pace_dict(py, &c.pace)?)?;
            e.set_item("tasks", counts_dict(py, &c.tasks)?)?;
            e.set_item("claims", c.claims)?;
            ctxs.append(e)?;
        }
        d.set_item("contexts", ctxs)?;
        let tasks = PyList::empty(py);
        for t in &s.tasks {
            tasks.append(task_dict(py, t)?)?;
        }
        d.set_item("tasks", tasks)?;
        let decs = PyList::empty(py);
        for x in &s.decisions {
            let e = PyDict::new(py);
            e.set_item("seq", x.seq)?;
            e.set_item("at_ms", ms(x.at_ns))?;
            e.set_item("subject", &x.subject)?;
            e.set_item("outcome", x.outcome)?;
            e.set_item("detail", &x.detail)?;
            decs.append(e)?;
        }
        d.set_item("decisions", decs)?;
        d.set_item("now_ms", ms(now_ns()))?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        format!("Scheduler(device={})", self.inner.device())
    }
}

fn spec_dict<'py>(py: Python<'py>, s: &ContextSpec) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", &s.name)?;
    d.set_item("qos", s.qos.name())?;
    d.set_item("reservation", s.reservation)?;
    d.set_item("limit", s.limit)?;
    d.set_item("sm_share", s.sm_share)?;
    d.set_item("priority", s.priority)?;
    d.set_item("pace", s.pace)?;
    Ok(d)
}

fn pace_dict<'py>(py: Python<'py>, p: &PaceStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("launches", p.launches)?;
    d.set_item("paced_launches", p.paced_launches)?;
    d.set_item("waits", p.waits)?;
    d.set_item("waited_ms", ms(p.waited_ns))?;
    d.set_item("busy_ms", ms(p.busy_ns))?;
    d.set_item("throttling", p.throttling)?;
    d.set_item("tokens_ms", p.tokens_ns / 1e6)?;
    Ok(d)
}

fn counts_dict<'py>(py: Python<'py>, c: &TaskCounts) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("submitted", c.submitted)?;
    d.set_item("pending", c.pending)?;
    d.set_item("admitted", c.admitted)?;
    d.set_item("running", c.running)?;
    d.set_item("completed", c.completed)?;
    d.set_item("failed", c.failed)?;
    d.set_item("cancelled", c.cancelled)?;
    Ok(d)
}

fn task_dict<'py>(py: Python<'py>, t: &Task) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("id", t.id)?;
    d.set_item("name", &t.name)?;
    d.set_item("context", &t.context)?;
    d.set_item("qos", t.tier.name())?;
    d.set_item("priority", t.priority)?;
    d.set_item("memory", t.memory)?;
    d.set_item("state", t.state.name())?;
    d.set_item("submitted_ms", ms(t.submitted_ns))?;
    d.set_item("admitted_ms", t.admitted_ns.map(ms))?;
    d.set_item("started_ms", t.started_ns.map(ms))?;
    d.set_item("finished_ms", t.finished_ns.map(ms))?;
    d.set_item("reason", &t.reason)?;
    Ok(d)
}

/// A context admitted by a Scheduler: its pool, stream and pacer, and its spec.
#[pyclass(name = "SchedContext", module = "pygpukit._core", frozen)]
pub struct PySchedContext {
    inner: Arc<SchedContext>,
}

#[pymethods]
impl PySchedContext {
    #[getter]
    fn name(&self) -> &str {
        &self.inner.spec.name
    }
    #[getter]
    fn device(&self) -> i32 {
        self.inner.device
    }
    #[getter]
    fn qos(&self) -> &'static str {
        self.inner.spec.qos.name()
    }
    #[getter]
    fn reservation(&self) -> u64 {
        self.inner.spec.reservation
    }
    #[getter]
    fn limit(&self) -> Option<u64> {
        self.inner.spec.limit
    }
    #[getter]
    fn sm_share(&self) -> Option<f64> {
        self.inner.spec.sm_share
    }
    #[getter]
    fn priority(&self) -> i32 {
        self.inner.spec.priority
    }
    #[getter]
    fn pace(&self) -> Option<f64> {
        self.inner.spec.pace
    }
    /// "device", "exclusive" (reserved SMs), "capped" (a BestEffort cap) or "shared".
    #[getter]
    fn placement(&self) -> &'static str {
        self.inner.placement.name()
    }
    /// SMs the ledger gave it (None: the whole device).
    #[getter]
    fn planned_sms(&self) -> Option<u32> {
        self.inner.placement.sm_count()
    }
    /// SMs its green context runs on (None: no green context).
    #[getter]
    fn sm_count(&self) -> Option<u32> {
        self.inner.sm_count()
    }
    #[getter]
    fn pool(&self) -> PyPool {
        PyPool::from_core(self.inner.pool.clone())
    }
    #[getter]
    fn stream(&self) -> PyStream {
        PyStream {
            inner: self.inner.stream.clone(),
        }
    }
    #[getter]
    fn pacer(&self) -> PyPacer {
        PyPacer {
            inner: self.inner.pacer.clone(),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "SchedContext('{}', {}, device={})",
            self.inner.spec.name, self.inner.spec.qos, self.inner.device
        )
    }
}

/// A context's launch gate: `enter(stream)` before a launch (a Guaranteed context marks the
/// device active; a paced one waits for its budget, GIL released), `exit(stream)` after it.
#[pyclass(name = "Pacer", module = "pygpukit._core", frozen)]
pub struct PyPacer {
    inner: Arc<Pacer>,
}

#[pymethods]
impl PyPacer {
    fn enter(&self, py: Python<'_>, stream: &Bound<'_, PyStream>) -> PyResult<()> {
        let s = &stream.get().inner;
        if self.inner.may_wait() {
            py.detach(|| self.inner.enter(s)).py()
        } else {
            self.inner.enter(s).py()
        }
    }

    fn exit(&self, stream: &Bound<'_, PyStream>) -> PyResult<()> {
        self.inner.exit(&stream.get().inner).py()
    }

    /// "protected" (Guaranteed), "paced" or "free".
    #[getter]
    fn role(&self) -> &'static str {
        match self.inner.role() {
            PacerRole::Protected => "protected",
            PacerRole::Paced(_) => "paced",
            PacerRole::Free => "free",
        }
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        pace_dict(py, &self.inner.stats())
    }
}
