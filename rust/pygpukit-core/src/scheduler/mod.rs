//! The scheduler: the GPU as a shared resource, the way Kubernetes schedules a node.
//!
//! One `Scheduler` per device holds named contexts, each with a QoS class (`qos`), a memory
//! reservation and limit, an optional exclusive share of the SMs, a stream priority from its
//! tier, and a pacing budget. Admission is deterministic arithmetic over the device's capacity
//! (`ledger`): a context whose reservation does not fit the unreserved memory is refused with the
//! numbers, never half-admitted. Work submitted to a context is a task (`tasks`), admitted from
//! a priority queue as its memory claim fits. SM shares become CUDA green contexts (`green`),
//! where the driver has them. BestEffort launches are paced while a Guaranteed context is
//! active (`pacing`).
//!
//! The memory side is the existing pool: each context owns a `MemoryPool` whose quota is its
//! limit; a reservation is held in that pool from the context's creation (the driver pool keeps
//! it, and trims keep it), and the OOM ladder trims BestEffort pools first.
//!
//! On the host pseudo-device (-1) the same scheduler runs as a CPU simulation over host memory:
//! admission, tasks and pacing behave the same; SM shares are planned against a simulated SM
//! count but nothing runs on SMs.

pub mod green;
pub mod ledger;
pub mod pacing;
pub mod qos;
mod registry;
pub mod tasks;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use green::{partition_stream, SmPartitions};
use ledger::{Ledger, Placement, Refusal, SmSpace, TaskFit};
use pacing::{ActivityGate, PaceStats, Pacer, PacerRole, DEFAULT_ACTIVE_WINDOW_NS};
use qos::{ContextSpec, QosClass};
pub use registry::{device_scheduler, shutdown_device_scheduler};
use tasks::{Task, TaskCounts, TaskState, TaskTable};

use crate::context::validate_device;
use crate::device::mem_get_info;
use crate::error::{Error, Result};
use crate::pool::{MemoryPool, PoolStats};
use crate::stream::{priority_range, Stream};

/// Nanoseconds on a process-wide monotonic clock (0 at first use).
pub fn now_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let e = EPOCH.get_or_init(Instant::now);
    u64::try_from(e.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Admission decisions kept for inspection.
const KEEP_DECISIONS: usize = 64;

/// One admission decision, as `snapshot()` and `python -m pygpukit sched` show it.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub seq: u64,
    pub at_ns: u64,
    pub subject: String,
    /// "admitted", "refused", "waiting" or "released".
    pub outcome: &'static str,
    pub detail: String,
}

/// A context admitted by a scheduler: its pool, its stream (on its SM partition, if any) and
/// its pacer. Handles stay valid after the context is closed (arrays keep their pool), but a
/// closed context admits no tasks.
pub struct SchedContext {
    pub spec: ContextSpec,
    pub device: i32,
    pub pool: MemoryPool,
    pub stream: Stream,
    pub pacer: Arc<Pacer>,
    pub placement: Placement,
    /// The SM groups its partition holds (given back when it is closed).
    sm_groups: Vec<usize>,
}

impl SchedContext {
    /// SMs the context's kernels may run on (None: every SM of the device).
    pub fn sm_count(&self) -> Option<u32> {
        self.stream.partition().map(|p| p.sm_count())
    }
}

/// A context as `snapshot()` reports it.
#[derive(Debug, Clone)]
pub struct ContextSnapshot {
    pub spec: ContextSpec,
    pub placement: Placement,
    /// SMs of its green context (None: the whole device, or no green contexts).
    pub sm_count: Option<u32>,
    pub stream_priority: i32,
    pub pool: PoolStats,
    pub pace: PaceStats,
    pub tasks: TaskCounts,
    /// Memory claimed by its admitted and running tasks.
    pub claims: u64,
}

#[derive(Debug, Clone)]
pub struct Snapshot {
    pub device: i32,
    pub capacity: u64,
    pub reserved: u64,
    pub unreserved: u64,
    pub borrowed: u64,
    pub sm_space: Option<SmSpace>,
    pub sm_free: Option<u32>,
    /// Why SM partitions are not enforced here (None: green contexts are in use).
    pub sm_note: Option<String>,
    pub active_window_ns: u64,
    /// Nanoseconds since a Guaranteed context last launched (None: never).
    pub guaranteed_idle_ns: Option<u64>,
    pub contexts: Vec<ContextSnapshot>,
    pub tasks: Vec<Task>,
    pub decisions: Vec<Decision>,
}

struct State {
    ledger: Ledger,
    contexts: Vec<Arc<SchedContext>>,
    tasks: TaskTable,
    decisions: VecDeque<Decision>,
    next_decision: u64,
}

impl State {
    fn log(&mut self, subject: String, outcome: &'static str, detail: String) {
        self.next_decision += 1;
        if self.decisions.len() == KEEP_DECISIONS {
            self.decisions.pop_front();
        }
        self.decisions.push_back(Decision {
            seq: self.next_decision,
            at_ns: now_ns(),
            subject,
            outcome,
            detail,
        });
    }

    fn refuse(&mut self, r: Refusal) -> Error {
        self.log(r.subject.clone(), "refused", r.reason.clone());
        r.into()
    }

    fn context(&self, name: &str) -> Result<&Arc<SchedContext>> {
        self.contexts
            .iter()
            .find(|c| c.spec.name == name)
            .ok_or_else(|| Error::invalid(format!("no context named '{name}' on this scheduler")))
    }
}

pub struct Scheduler {
    device: i32,
    gate: Arc<ActivityGate>,
    sms: Option<SmPartitions>,
    sm_note: Option<String>,
    state: Mutex<State>,
}

impl Scheduler {
    /// A scheduler for `device` (-1: the CPU simulation over host memory). `capacity`: the bytes
    /// admission may reserve (default on a GPU: the device's free memory now; required on the
    /// host). `sim_sms`: the SM count the CPU simulation plans shares against (ignored on a GPU,
    /// whose SMs come from the driver).
    pub fn new(device: i32, capacity: Option<u64>, sim_sms: Option<u32>) -> Result<Scheduler> {
        validate_device(device)?;
        let (capacity, sms, sm_note, space) = if device >= 0 {
            let capacity = match capacity {
                Some(c) => c,
                None => mem_get_info(device)?.0,
            };
            match SmPartitions::probe(device) {
                Ok(p) => {
                    let space = p.space();
                    (capacity, Some(p), None, Some(space))
                }
                Err(why) => (
                    capacity,
                    None,
                    Some(format!(
                        "SM partitions unavailable ({why}): every context runs on the whole \
                         device, protected by stream priorities and pacing"
                    )),
                    None,
                ),
            }
        } else {
            let Some(capacity) = capacity else {
                return Err(Error::invalid(
                    "the CPU simulation needs its capacity in bytes (the host's memory)",
                ));
            };
            let space = sim_sms
                .filter(|&n| n > 0)
                .map(|total| SmSpace::whole(total, 1));
            let note = match space {
                Some(s) => format!(
                    "CPU simulation: SM shares are planned against {} simulated SMs; nothing \
                     runs on SMs",
                    s.total
                ),
                None => "CPU simulation: SM shares are recorded, not planned (a simulated SM \
                         count plans them)"
                    .to_string(),
            };
            (capacity, None, Some(note), space)
        };
        Ok(Scheduler {
            device,
            gate: Arc::new(ActivityGate::new(DEFAULT_ACTIVE_WINDOW_NS)),
            sms,
            sm_note,
            state: Mutex::new(State {
                ledger: Ledger::new(capacity, space),
                contexts: Vec::new(),
                tasks: TaskTable::new(),
                decisions: VecDeque::new(),
                next_decision: 0,
            }),
        })
    }

    pub fn device(&self) -> i32 {
        self.device
    }
    /// Bytes admission may reserve.
    pub fn capacity(&self) -> u64 {
        self.lock().ledger.capacity()
    }

    pub fn gate(&self) -> &Arc<ActivityGate> {
        &self.gate
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stream priority of a tier: Guaranteed the device's most urgent, BestEffort its least,
    /// Burstable between.
    fn stream_priority(&self, qos: QosClass) -> Result<i32> {
        let (least, greatest) = priority_range(self.device)?;
        Ok(match qos {
            QosClass::Guaranteed => greatest,
            QosClass::Burstable => (least + greatest) / 2,
            QosClass::BestEffort => least,
        })
    }

    /// What `create_context(spec)` would decide now, changing nothing (no log entry either).
    pub fn evaluate(&self, spec: &ContextSpec) -> Result<Placement> {
        let mut ledger = self.lock().ledger.clone();
        ledger.admit_context(spec).map_err(Error::from)
    }

    /// Admit a context, or refuse it (Error::Admission) changing nothing.
    pub fn create_context(&self, spec: ContextSpec) -> Result<Arc<SchedContext>> {
        let mut st = self.lock();
        let placement = match st.ledger.admit_context(&spec) {
            Ok(p) => p,
            Err(r) => return Err(st.refuse(r)),
        };
        match self.build(&spec, placement) {
            Ok(ctx) => {
                let ctx = Arc::new(ctx);
                let detail = admitted_detail(&spec, placement, ctx.sm_count(), &st.ledger);
                st.log(format!("context '{}'", spec.name), "admitted", detail);
                st.contexts.push(ctx.clone());
                Ok(ctx)
            }
            Err(e) => {
                st.ledger.remove_context(&spec.name);
                let reason = match e {
                    Error::OutOfMemory {
                        device_free,
                        device_total,
                        ..
                    } => format!(
                        "the device could not provide its {}-byte reservation (device free {} \
                         of {} bytes)",
                        spec.reservation,
                        device_free.map_or("?".into(), |v| v.to_string()),
                        device_total.map_or("?".into(), |v| v.to_string())
                    ),
                    other => format!("its resources could not be created: {other}"),
                };
                let r =
                    st.ledger
                        .refusal(format!("context '{}'", spec.name), reason, spec.reservation);
                Err(st.refuse(r))
            }
        }
    }

    /// The pool (holding the reservation), the partition and stream, and the pacer.
    fn build(&self, spec: &ContextSpec, placement: Placement) -> Result<SchedContext> {
        let pool = MemoryPool::new(self.device, spec.name.clone(), spec.limit, true)?;
        pool.set_trim_policy(spec.qos.rank(), 0);
        if spec.reservation > 0 {
            pool.hold(spec.reservation, None)?;
        }
        let priority = self.stream_priority(spec.qos)?;
        let (part, sm_groups) = match (&self.sms, placement) {
            (Some(sms), Placement::Exclusive(n) | Placement::Capped(n)) => {
                let (p, groups) = sms.carve(n)?;
                (Some(p), groups)
            }
            (Some(sms), Placement::Shared(_)) => (Some(sms.shared()?), Vec::new()),
            _ => (None, Vec::new()),
        };
        let stream = match partition_stream(self.device, part.as_ref(), priority) {
            Ok(s) => s,
            Err(e) => {
                if let Some(sms) = &self.sms {
                    sms.release(&sm_groups);
                }
                return Err(e);
            }
        };
        let role = match (spec.qos, spec.pace) {
            (QosClass::Guaranteed, _) => PacerRole::Protected,
            (_, Some(share)) => PacerRole::Paced(share),
            (_, None) => PacerRole::Free,
        };
        Ok(SchedContext {
            spec: spec.clone(),
            device: self.device,
            pool,
            stream,
            pacer: Arc::new(Pacer::new(role, self.device, self.gate.clone())),
            placement,
            sm_groups,
        })
    }

    /// Close a context: its reservation, SMs and pending tasks go; running tasks must finish
    /// (or be cancelled) first. Arrays allocated in it keep its pool alive; the memory held for
    /// its reservation is given back at once. Its SMs go to the next partition asked for: work
    /// still queued on its streams (or a CUDA graph recorded there) may then share them.
    pub fn remove_context(&self, name: &str) -> Result<Vec<u64>> {
        let mut st = self.lock();
        let ctx = st.context(name)?.clone();
        let live = st.tasks.of_context(name);
        if let Some(id) = live.iter().copied().find(|&id| {
            st.tasks
                .get(id)
                .is_some_and(|t| t.state == TaskState::Running)
        }) {
            return Err(Error::invalid(format!(
                "context '{name}' has a running task ({id}); finish or cancel it first"
            )));
        }
        let now = now_ns();
        for id in live {
            st.tasks.transition(
                id,
                TaskState::Cancelled,
                now,
                Some(format!("context '{name}' was closed")),
            )?;
        }
        st.ledger.remove_context(name);
        if let Some(sms) = &self.sms {
            sms.release(&ctx.sm_groups);
        }
        st.contexts.retain(|c| c.spec.name != name);
        ctx.pool.set_trim_policy(ctx.spec.qos.rank(), 0);
        let _ = ctx.pool.trim(0);
        st.log(
            format!("context '{name}'"),
            "released",
            format!(
                "{} bytes of reservation and {} SMs returned",
                ctx.spec.reservation,
                match ctx.placement {
                    Placement::Exclusive(n) | Placement::Capped(n) => n,
                    _ => 0,
                }
            ),
        );
        Ok(Self::pump(&mut st))
    }

    pub fn context(&self, name: &str) -> Result<Arc<SchedContext>> {
        self.lock().context(name).cloned()
    }

    pub fn contexts(&self) -> Vec<Arc<SchedContext>> {
        self.lock().contexts.clone()
    }

    /// Submit a task claiming `memory` bytes of `context`. Returns its id and state (pending or
    /// admitted); a task that can never fit is refused (Error::Admission) and recorded failed.
    pub fn submit(
        &self,
        context: &str,
        name: &str,
        memory: u64,
        priority: Option<i32>,
    ) -> Result<(u64, TaskState)> {
        let mut st = self.lock();
        let ctx = st.context(context)?.clone();
        let prio = priority.unwrap_or(ctx.spec.priority);
        let id = st
            .tasks
            .submit(context, name, ctx.spec.qos, prio, memory, now_ns());
        let subject = format!(
            "task '{}' of context '{context}'",
            st.tasks.get(id).expect("just added").name
        );
        if let TaskFit::Never(reason) = st.ledger.task_fit(context, memory) {
            st.tasks
                .transition(id, TaskState::Failed, now_ns(), Some(reason.clone()))?;
            let r = st.ledger.refusal(subject, reason, memory);
            return Err(st.refuse(r));
        }
        Self::pump(&mut st);
        let state = st.tasks.get(id).expect("live").state;
        Ok((id, state))
    }

    /// Admit what fits from the queue, in order (tier, priority, arrival); a task that does
    /// not fit yet keeps its place and the reason it waits, one that can no longer fit at all
    /// fails. Returns the ids whose state changed (their waiters are to be woken).
    fn pump(st: &mut State) -> Vec<u64> {
        let mut admitted = Vec::new();
        for id in st.tasks.queued() {
            let t = st.tasks.get(id).expect("queued tasks are live").clone();
            let subject = format!("task '{}' of context '{}'", t.name, t.context);
            match st.ledger.task_fit(&t.context, t.memory) {
                TaskFit::Fits => {
                    st.ledger.claim(&t.context, t.memory);
                    if st
                        .tasks
                        .transition(id, TaskState::Admitted, now_ns(), None)
                        .is_ok()
                    {
                        st.log(subject, "admitted", format!("claims {} bytes", t.memory));
                        admitted.push(id);
                    }
                }
                TaskFit::Waits(reason) => {
                    if t.reason.as_deref() != Some(reason.as_str()) {
                        st.log(subject, "waiting", reason.clone());
                        st.tasks.set_wait_reason(id, reason);
                    }
                }
                TaskFit::Never(reason) => {
                    // It fitted when it was submitted, but a reservation admitted since left
                    // too little unreserved memory: refuse it now rather than keep it waiting.
                    st.log(subject, "refused", reason.clone());
                    let _ = st
                        .tasks
                        .transition(id, TaskState::Failed, now_ns(), Some(reason));
                    admitted.push(id);
                }
            }
        }
        admitted
    }

    /// An admitted task starts running.
    pub fn start(&self, id: u64) -> Result<()> {
        let mut st = self.lock();
        st.tasks
            .transition(id, TaskState::Running, now_ns(), None)
            .map(|_| ())
    }

    /// A running task ends (`error`: None for success). Returns the tasks admitted because its
    /// claim was released.
    pub fn finish(&self, id: u64, error: Option<String>) -> Result<Vec<u64>> {
        let to = if error.is_some() {
            TaskState::Failed
        } else {
            TaskState::Completed
        };
        self.end(id, to, error)
    }

    /// Cancel a pending, admitted or running task (a running task's queued GPU work still
    /// runs; the task is recorded cancelled). Returns the tasks admitted in its place.
    pub fn cancel(&self, id: u64) -> Result<Vec<u64>> {
        self.end(id, TaskState::Cancelled, Some("cancelled".into()))
    }

    fn end(&self, id: u64, to: TaskState, reason: Option<String>) -> Result<Vec<u64>> {
        let mut st = self.lock();
        let held = st.tasks.get(id).map(|t| t.state.holds_claim());
        let t = st.tasks.transition(id, to, now_ns(), reason)?.clone();
        if held == Some(true) {
            st.ledger.release(&t.context, t.memory);
        }
        Ok(Self::pump(&mut st))
    }

    pub fn task(&self, id: u64) -> Option<Task> {
        self.lock().tasks.get(id).cloned()
    }

    /// Everything `python -m pygpukit sched` shows.
    pub fn snapshot(&self) -> Result<Snapshot> {
        let st = self.lock();
        let mut contexts = Vec::with_capacity(st.contexts.len());
        for c in &st.contexts {
            let claims = st.ledger.entry(&c.spec.name).map_or(0, |e| e.claims);
            contexts.push(ContextSnapshot {
                spec: c.spec.clone(),
                placement: c.placement,
                sm_count: c.sm_count(),
                stream_priority: c.stream.priority(),
                pool: c.pool.stats()?,
                pace: c.pacer.stats(),
                tasks: st.tasks.counts(&c.spec.name),
                claims,
            });
        }
        let now = now_ns();
        Ok(Snapshot {
            device: self.device,
            capacity: st.ledger.capacity(),
            reserved: st.ledger.reserved(),
            unreserved: st.ledger.unreserved(),
            borrowed: st.ledger.borrowed(),
            sm_space: st.ledger.sm_space(),
            sm_free: st.ledger.free_sms(),
            sm_note: self.sm_note.clone(),
            active_window_ns: self.gate.window_ns(),
            guaranteed_idle_ns: self.gate.idle_ns(now),
            contexts,
            tasks: st
                .tasks
                .finished()
                .chain(st.tasks.live())
                .cloned()
                .collect(),
            decisions: st.decisions.iter().cloned().collect(),
        })
    }
}

fn admitted_detail(
    spec: &ContextSpec,
    placement: Placement,
    sms: Option<u32>,
    ledger: &Ledger,
) -> String {
    let sm = match (placement, sms) {
        (Placement::Exclusive(n), Some(_)) => format!("{n} SMs of its own"),
        (Placement::Exclusive(n), None) => format!("{n} SMs planned (not enforced here)"),
        (Placement::Capped(n), Some(_)) => format!("at most {n} SMs"),
        (Placement::Capped(n), None) => format!("at most {n} SMs (planned)"),
        (Placement::Shared(n), Some(_)) => format!("the {n} shared SMs"),
        (Placement::Shared(n), None) => format!("the {n} shared SMs (planned)"),
        (Placement::Device, _) => "every SM".to_string(),
    };
    format!(
        "{} reservation {} bytes, limit {}, on {sm}; {} of {} bytes unreserved now",
        spec.qos,
        spec.reservation,
        spec.limit.map_or("none".into(), |l| format!("{l} bytes")),
        ledger.unreserved(),
        ledger.capacity()
    )
}

#[cfg(test)]
mod tests;
