//! Tasks: work submitted to a context, with a lifecycle and an admission queue.
//!
//! pending -> admitted -> running -> completed | failed | cancelled; a pending or admitted task
//! may also be cancelled, and a pending one refused (failed) when it can never fit. Any other
//! transition is an error (checked, never silently applied). The queue orders pending tasks by
//! tier (Guaranteed first), then priority (higher first), then arrival.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::qos::QosClass;
use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskState {
    Pending,
    Admitted,
    Running,
    Completed,
    Failed,
    Cancelled,
}

impl TaskState {
    pub fn name(self) -> &'static str {
        match self {
            TaskState::Pending => "pending",
            TaskState::Admitted => "admitted",
            TaskState::Running => "running",
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Cancelled => "cancelled",
        }
    }

    pub fn is_final(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Cancelled
        )
    }

    /// The lifecycle's legal moves.
    pub fn can_become(self, to: TaskState) -> bool {
        use TaskState::*;
        matches!(
            (self, to),
            (Pending, Admitted)
                | (Pending, Cancelled)
                | (Pending, Failed)
                | (Admitted, Running)
                | (Admitted, Cancelled)
                | (Running, Completed)
                | (Running, Failed)
                | (Running, Cancelled)
        )
    }

    /// Whether the task holds a memory claim in the ledger.
    pub fn holds_claim(self) -> bool {
        matches!(self, TaskState::Admitted | TaskState::Running)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub id: u64,
    pub name: String,
    pub context: String,
    pub tier: QosClass,
    pub priority: i32,
    /// Bytes the task claims from its context while admitted or running.
    pub memory: u64,
    pub state: TaskState,
    /// Nanoseconds on the scheduler's clock (process-monotonic).
    pub submitted_ns: u64,
    pub admitted_ns: Option<u64>,
    pub started_ns: Option<u64>,
    pub finished_ns: Option<u64>,
    /// Why a pending task waits, or why a task failed or was refused.
    pub reason: Option<String>,
}

/// Counts of a context's tasks by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TaskCounts {
    pub submitted: u64,
    pub pending: u64,
    pub admitted: u64,
    pub running: u64,
    pub completed: u64,
    pub failed: u64,
    pub cancelled: u64,
}

/// Finished tasks kept for inspection (older ones are dropped; their counts stay).
const KEEP_FINISHED: usize = 256;

type QueueKey = (u8, i64, u64);

#[derive(Debug, Default)]
pub struct TaskTable {
    live: BTreeMap<u64, Task>,
    finished: VecDeque<Task>,
    queue: BTreeSet<(QueueKey, u64)>,
    counts: BTreeMap<String, TaskCounts>,
    next_id: u64,
}

fn key(t: &Task) -> QueueKey {
    (t.tier.rank(), -i64::from(t.priority), t.id)
}

impl TaskTable {
    pub fn new() -> TaskTable {
        TaskTable::default()
    }

    /// A new pending task (queued).
    pub fn submit(
        &mut self,
        context: &str,
        name: &str,
        tier: QosClass,
        priority: i32,
        memory: u64,
        now: u64,
    ) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        let name = if name.is_empty() {
            format!("task-{id}")
        } else {
            name.to_string()
        };
        let t = Task {
            id,
            name,
            context: context.to_string(),
            tier,
            priority,
            memory,
            state: TaskState::Pending,
            submitted_ns: now,
            admitted_ns: None,
            started_ns: None,
            finished_ns: None,
            reason: None,
        };
        self.queue.insert((key(&t), id));
        let c = self.counts.entry(context.to_string()).or_default();
        c.submitted += 1;
        c.pending += 1;
        self.live.insert(id, t);
        id
    }

    pub fn get(&self, id: u64) -> Option<&Task> {
        self.live
            .get(&id)
            .or_else(|| self.finished.iter().find(|t| t.id == id))
    }

    /// Pending task ids in admission order.
    pub fn queued(&self) -> Vec<u64> {
        self.queue.iter().map(|(_, id)| *id).collect()
    }

    pub fn set_wait_reason(&mut self, id: u64, reason: String) {
        if let Some(t) = self.live.get_mut(&id) {
            t.reason = Some(reason);
        }
    }

    /// Move a task to `to`, stamping the time; an illegal move is an error and changes nothing.
    pub fn transition(
        &mut self,
        id: u64,
        to: TaskState,
        now: u64,
        reason: Option<String>,
    ) -> Result<&Task> {
        let Some(t) = self.live.get_mut(&id) else {
            return Err(match self.finished.iter().find(|t| t.id == id) {
                Some(t) => Error::invalid(format!(
                    "task {id} ('{}') is already {}; it cannot become {}",
                    t.name,
                    t.state.name(),
                    to.name()
                )),
                None => Error::invalid(format!("no task with id {id}")),
            });
        };
        let from = t.state;
        if !from.can_become(to) {
            return Err(Error::invalid(format!(
                "task {id} ('{}') is {}; it cannot become {}",
                t.name,
                from.name(),
                to.name()
            )));
        }
        if from == TaskState::Pending {
            self.queue.remove(&(key(t), id));
        }
        t.state = to;
        match to {
            TaskState::Admitted => {
                t.admitted_ns = Some(now);
                t.reason = None;
            }
            TaskState::Running => t.started_ns = Some(now),
            _ => t.finished_ns = Some(now),
        }
        if reason.is_some() {
            t.reason = reason;
        }
        let c = self.counts.entry(t.context.clone()).or_default();
        for (s, d) in [(from, -1i64), (to, 1)] {
            let slot = match s {
                TaskState::Pending => &mut c.pending,
                TaskState::Admitted => &mut c.admitted,
                TaskState::Running => &mut c.running,
                TaskState::Completed => &mut c.completed,
                TaskState::Failed => &mut c.failed,
                TaskState::Cancelled => &mut c.cancelled,
            };
            *slot = slot.wrapping_add_signed(d);
        }
        if to.is_final() {
            let t = self.live.remove(&id).expect("present above");
            if self.finished.len() == KEEP_FINISHED {
                self.finished.pop_front();
            }
            self.finished.push_back(t);
            return Ok(self.finished.back().expect("just pushed"));
        }
        Ok(self.live.get(&id).expect("present above"))
    }

    /// Tasks not yet finished, by id.
    pub fn live(&self) -> impl Iterator<Item = &Task> {
        self.live.values()
    }

    /// The most recent finished tasks, oldest first.
    pub fn finished(&self) -> impl Iterator<Item = &Task> {
        self.finished.iter()
    }

    pub fn counts(&self, context: &str) -> TaskCounts {
        self.counts.get(context).copied().unwrap_or_default()
    }

    /// Live task ids of a context.
    pub fn of_context(&self, context: &str) -> Vec<u64> {
        self.live
            .values()
            .filter(|t| t.context == context)
            .map(|t| t.id)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_orders_by_tier_then_priority_then_arrival() {
        let mut t = TaskTable::new();
        let a = t.submit("x", "a", QosClass::BestEffort, 9, 0, 0);
        let b = t.submit("x", "b", QosClass::Burstable, 0, 0, 1);
        let c = t.submit("x", "c", QosClass::Burstable, 5, 0, 2);
        let d = t.submit("x", "d", QosClass::Guaranteed, -3, 0, 3);
        let e = t.submit("x", "e", QosClass::Burstable, 5, 0, 4);
        assert_eq!(t.queued(), vec![d, c, e, b, a]);
    }

    #[test]
    fn lifecycle_refuses_illegal_moves_and_counts() {
        let mut t = TaskTable::new();
        let id = t.submit("ctx", "", QosClass::Burstable, 0, 10, 5);
        assert_eq!(t.get(id).unwrap().name, format!("task-{id}"));
        assert!(t.transition(id, TaskState::Running, 6, None).is_err());
        t.transition(id, TaskState::Admitted, 7, None).unwrap();
        assert!(t.queued().is_empty());
        t.transition(id, TaskState::Running, 8, None).unwrap();
        let done = t.transition(id, TaskState::Completed, 9, None).unwrap();
        assert_eq!(
            (done.admitted_ns, done.started_ns, done.finished_ns),
            (Some(7), Some(8), Some(9))
        );
        let err = t
            .transition(id, TaskState::Cancelled, 10, None)
            .unwrap_err();
        assert!(err.to_string().contains("already completed"), "{err}");
        let c = t.counts("ctx");
        assert_eq!(
            (c.submitted, c.completed, c.running, c.pending),
            (1, 1, 0, 0)
        );
        assert!(t.transition(999, TaskState::Admitted, 0, None).is_err());
    }
}
