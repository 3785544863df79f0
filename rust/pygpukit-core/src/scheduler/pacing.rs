//! Kernel pacing: a token bucket over measured GPU busy time, per paced context.
//!
//! A paced context (BestEffort by default) may keep its GPU busy `share` of the wall time while a
//! Guaranteed context on the same device is active (it launched work within the activity window);
//! otherwise it runs unpaced. Each paced launch is bracketed by two timed events on its stream;
//! once the end event has completed, the elapsed time between them is debited from the bucket,
//! which refills at `share` nanoseconds per nanosecond. Before a launch the pacer waits (in the
//! launching thread, never the device) while the bucket, minus an estimate of the launches still
//! in flight, is negative, and while MAX_INFLIGHT launches are in flight: so at most that much
//! paced work is ever queued ahead of a Guaranteed context's next kernel.
//!
//! Nothing here synchronizes the device or another stream: completed marks are found with
//! cuEventQuery, and the waits are sleeps of the paced thread. A Guaranteed context only stores
//! a timestamp per launch (`touch`). On the host pseudo-device the events are host events, so the
//! same arithmetic paces host work and is tested without a GPU.
//!
//! Launch paths bracket their work with `enter`/`exit` (nesting on one thread counts once: an op
//! that calls other ops is one launch).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::now_ns;
use crate::error::Result;
use crate::event::Event;
use crate::stream::Stream;

/// Paced launches in flight at most (queued or running on the device).
pub const MAX_INFLIGHT: usize = 2;
/// Bucket depth: this much GPU time may be used back to back once the bucket is full.
pub const BURST_NS: f64 = 2.0e6;
/// A Guaranteed context is active for this long after its last launch.
pub const DEFAULT_ACTIVE_WINDOW_NS: u64 = 50_000_000;
/// Longest single sleep (the gate is re-checked after each).
const MAX_SLEEP_NS: u64 = 2_000_000;
/// Poll interval while waiting for an in-flight launch to finish.
const POLL_NS: u64 = 50_000;

/// Tokens are nanoseconds of GPU time; they refill at `rate` per wall nanosecond up to `burst`.
/// Debits may take the balance below zero (a launch's cost is known only once it finished).
#[derive(Debug, Clone, PartialEq)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last_ns: u64,
}

impl TokenBucket {
    /// A full bucket at `now_ns`. `rate` in (0, 1], `burst` > 0.
    pub fn new(rate: f64, burst: f64, now_ns: u64) -> TokenBucket {
        TokenBucket {
            rate,
            burst,
            tokens: burst,
            last_ns: now_ns,
        }
    }

    pub fn tokens(&self) -> f64 {
        self.tokens
    }

    /// Add what accrued since the last refill (a clock that went backwards adds nothing).
    pub fn refill(&mut self, now_ns: u64) {
        if now_ns > self.last_ns {
            let add = (now_ns - self.last_ns) as f64 * self.rate;
            self.tokens = (self.tokens + add).min(self.burst);
            self.last_ns = now_ns;
        }
    }

    /// Charge `cost_ns` of GPU time that was used.
    pub fn debit(&mut self, cost_ns: f64) {
        self.tokens -= cost_ns.max(0.0);
    }

    /// Wall nanoseconds until the balance covers `pending_ns` (0: it does now).
    pub fn wait_ns(&self, pending_ns: f64) -> u64 {
        let short = pending_ns - self.tokens;
        if short <= 0.0 {
            0
        } else {
            (short / self.rate).ceil() as u64
        }
    }

    /// Full again (pacing starts afresh).
    pub fn reset(&mut self, now_ns: u64) {
        self.tokens = self.burst;
        self.last_ns = now_ns;
    }
}

/// When a device's Guaranteed contexts last launched work.
#[derive(Debug)]
pub struct ActivityGate {
    last_ns: AtomicU64,
    window_ns: AtomicU64,
}

impl ActivityGate {
    pub fn new(window_ns: u64) -> ActivityGate {
        ActivityGate {
            last_ns: AtomicU64::new(0),
            window_ns: AtomicU64::new(window_ns),
        }
    }
    #[inline]
    pub fn touch(&self, now_ns: u64) {
        self.last_ns.store(now_ns.max(1), Relaxed);
    }
    pub fn active(&self, now_ns: u64) -> bool {
        let last = self.last_ns.load(Relaxed);
        last != 0 && now_ns.saturating_sub(last) <= self.window_ns.load(Relaxed)
    }
    pub fn window_ns(&self) -> u64 {
        self.window_ns.load(Relaxed)
    }
    pub fn set_window_ns(&self, ns: u64) {
        self.window_ns.store(ns, Relaxed);
    }
    /// Nanoseconds since the last Guaranteed launch (None: never).
    pub fn idle_ns(&self, now_ns: u64) -> Option<u64> {
        match self.last_ns.load(Relaxed) {
            0 => None,
            l => Some(now_ns.saturating_sub(l)),
        }
    }
}

/// What a context's launches do with the gate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PacerRole {
    /// A Guaranteed context: marks the device active at each launch, never waits.
    Protected,
    /// Paced to this share of GPU time while a Guaranteed context is active.
    Paced(f64),
    /// Neither (a Burstable context without pacing).
    Free,
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PaceStats {
    /// Launches of a paced context (outermost brackets only; Guaranteed and unpaced contexts
    /// count nothing here).
    pub launches: u64,
    /// Of those, launches made while pacing was in force.
    pub paced_launches: u64,
    /// Launches that had to wait, and the total wall time waited.
    pub waits: u64,
    pub waited_ns: u64,
    /// GPU time of completed paced launches.
    pub busy_ns: u64,
    /// Whether pacing is in force at the moment (a Guaranteed context was active at the last
    /// launch).
    pub throttling: bool,
    pub tokens_ns: f64,
}

struct Mark {
    start: Event,
    end: Event,
}

struct PaceState {
    bucket: TokenBucket,
    inflight: VecDeque<Mark>,
    spare: Vec<Mark>,
    /// Moving average of a paced launch's GPU time, for the in-flight estimate.
    ema_ns: f64,
    stats: PaceStats,
}

pub struct Pacer {
    role: PacerRole,
    device: i32,
    gate: Arc<ActivityGate>,
    state: Mutex<PaceState>,
}

thread_local! {
    /// Nesting depth of enter/exit on this thread (an op calling ops is one launch).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// The start mark of this thread's outermost paced launch: (pacer address, mark).
    static OPEN: RefCell<Option<(usize, Mark)>> = const { RefCell::new(None) };
}

impl Pacer {
    pub fn new(role: PacerRole, device: i32, gate: Arc<ActivityGate>) -> Pacer {
        let rate = match role {
            PacerRole::Paced(s) => s,
            _ => 1.0,
        };
        Pacer {
            role,
            device,
            gate,
            state: Mutex::new(PaceState {
                bucket: TokenBucket::new(rate, BURST_NS, now_ns()),
                inflight: VecDeque::new(),
                spare: Vec::new(),
                ema_ns: 0.0,
                stats: PaceStats::default(),
            }),
        }
    }

    pub fn role(&self) -> PacerRole {
        self.role
    }

    fn lock(&self) -> MutexGuard<'_, PaceState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True when `enter` may wait (so callers can release the GIL only then).
    pub fn may_wait(&self) -> bool {
        matches!(self.role, PacerRole::Paced(_))
    }

    /// Before a launch on `stream`: mark activity, or wait for the budget.
    pub fn enter(&self, stream: &Stream) -> Result<()> {
        match self.role {
            PacerRole::Protected => {
                self.gate.touch(now_ns());
                Ok(())
            }
            PacerRole::Free => Ok(()),
            PacerRole::Paced(_) => {
                let d = DEPTH.with(Cell::get);
                DEPTH.with(|c| c.set(d + 1));
                if d > 0 {
                    return Ok(());
                }
                let r = self.admit(stream);
                if r.is_err() {
                    DEPTH.with(|c| c.set(d));
                }
                r
            }
        }
    }

    /// After the launch: close the mark opened by `enter`.
    pub fn exit(&self, stream: &Stream) -> Result<()> {
        if !matches!(self.role, PacerRole::Paced(_)) {
            return Ok(());
        }
        let d = DEPTH.with(Cell::get);
        if d == 0 {
            return Ok(());
        }
        DEPTH.with(|c| c.set(d - 1));
        if d > 1 {
            return Ok(());
        }
        let me = self as *const Pacer as usize;
        let Some((owner, mark)) = OPEN.with(|o| o.borrow_mut().take()) else {
            return Ok(());
        };
        if owner != me {
            return Ok(());
        }
        mark.end.record(stream)?;
        self.lock().inflight.push_back(mark);
        Ok(())
    }

    fn admit(&self, stream: &Stream) -> Result<()> {
        let mut st = self.lock();
        st.stats.launches += 1;
        let now = now_ns();
        if !self.gate.active(now) {
            if st.stats.throttling {
                st.stats.throttling = false;
                st.inflight.clear(); // pending events may be destroyed; the driver defers it
            }
            return Ok(());
        }
        if !st.stats.throttling {
            st.stats.throttling = true;
            st.bucket.reset(now);
        }
        st.stats.paced_launches += 1;
        let mut waited = false;
        loop {
            Self::harvest(&mut st)?;
            let now = now_ns();
            st.bucket.refill(now);
            let wait = if st.inflight.len() >= MAX_INFLIGHT {
                POLL_NS
            } else {
                let pending = st.inflight.len() as f64 * st.ema_ns;
                st.bucket.wait_ns(pending)
            };
            if wait == 0 {
                break;
            }
            waited = true;
            drop(st);
            let nap = wait.min(MAX_SLEEP_NS);
            std::thread::sleep(Duration::from_nanos(nap));
            st = self.lock();
            st.stats.waited_ns += nap;
            if !self.gate.active(now_ns()) {
                break;
            }
        }
        if waited {
            st.stats.waits += 1;
        }
        let mark = match st.spare.pop() {
            Some(m) => m,
            None => Mark {
                start: Event::new(self.device, true, false)?,
                end: Event::new(self.device, true, false)?,
            },
        };
        drop(st);
        mark.start.record(stream)?;
        let me = self as *const Pacer as usize;
        OPEN.with(|o| *o.borrow_mut() = Some((me, mark)));
        Ok(())
    }

    /// Debit the completed marks, oldest first, and keep their events for reuse.
    fn harvest(st: &mut PaceState) -> Result<()> {
        while let Some(m) = st.inflight.front() {
            if !m.end.query()? {
                break;
            }
            let ns = (m.start.elapsed_ms(&m.end)? * 1e6).max(0.0);
            st.bucket.debit(ns);
            st.stats.busy_ns += ns as u64;
            st.ema_ns = if st.ema_ns == 0.0 {
                ns
            } else {
                0.8 * st.ema_ns + 0.2 * ns
            };
            let m = st.inflight.pop_front().expect("front exists");
            st.spare.push(m);
        }
        Ok(())
    }

    pub fn stats(&self) -> PaceStats {
        let st = self.lock();
        let mut s = st.stats;
        s.tokens_ns = st.bucket.tokens();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_refills_at_its_rate_up_to_the_burst() {
        let mut b = TokenBucket::new(0.25, 1000.0, 0);
        b.debit(3000.0);
        assert_eq!(b.tokens(), -2000.0);
        assert_eq!(b.wait_ns(0.0), 8000);
        assert_eq!(b.wait_ns(500.0), 10000);
        b.refill(8000);
        assert_eq!(b.tokens(), 0.0);
        assert_eq!(b.wait_ns(0.0), 0);
        b.refill(100_000);
        assert_eq!(b.tokens(), 1000.0, "capped at the burst");
        b.refill(50); // a clock that went back adds nothing
        assert_eq!(b.tokens(), 1000.0);
        b.debit(-5.0);
        assert_eq!(b.tokens(), 1000.0, "negative costs are ignored");
    }

    #[test]
    fn gate_is_active_within_its_window() {
        let g = ActivityGate::new(100);
        assert!(!g.active(5));
        assert_eq!(g.idle_ns(5), None);
        g.touch(1000);
        assert!(g.active(1050) && g.active(1100) && !g.active(1101));
        assert_eq!(g.idle_ns(1060), Some(60));
    }

    /// Host work paced at 25% while the gate is held active: the busy share over the run stays
    /// near the rate (host events time the host work between enter and exit).
    #[test]
    fn host_work_is_paced_to_its_share() {
        let gate = Arc::new(ActivityGate::new(u64::MAX / 4));
        let p = Pacer::new(PacerRole::Paced(0.25), -1, gate.clone());
        let s = Stream::host();
        let t0 = now_ns();
        let work = Duration::from_millis(2);
        for _ in 0..40 {
            gate.touch(now_ns());
            p.enter(&s).unwrap();
            std::thread::sleep(work);
            p.exit(&s).unwrap();
        }
        let wall = (now_ns() - t0) as f64;
        let st = p.stats();
        assert_eq!(st.launches, 40);
        assert_eq!(st.paced_launches, 40);
        assert!(st.waits > 0);
        // 80 ms of work at 25% needs about 320 ms minus the 2 ms burst.
        let share = st.busy_ns as f64 / wall;
        assert!(share < 0.32, "busy share {share}");
        assert!(wall > 0.2e9, "wall {wall}");
    }

    #[test]
    fn unpaced_while_no_guaranteed_context_is_active() {
        let gate = Arc::new(ActivityGate::new(1_000));
        let p = Pacer::new(PacerRole::Paced(0.1), -1, gate);
        let s = Stream::host();
        let t0 = now_ns();
        for _ in 0..20 {
            p.enter(&s).unwrap();
            std::thread::sleep(Duration::from_millis(1));
            p.exit(&s).unwrap();
        }
        let st = p.stats();
        assert_eq!((st.paced_launches, st.waits), (0, 0));
        assert!(now_ns() - t0 < 2_000_000_000);
    }

    #[test]
    fn nested_brackets_count_once_and_protected_touches() {
        let gate = Arc::new(ActivityGate::new(u64::MAX / 4));
        let g = Pacer::new(PacerRole::Protected, -1, gate.clone());
        let s = Stream::host();
        g.enter(&s).unwrap();
        g.exit(&s).unwrap();
        assert!(gate.active(now_ns()));
        let p = Pacer::new(PacerRole::Paced(0.5), -1, gate);
        p.enter(&s).unwrap();
        p.enter(&s).unwrap();
        p.exit(&s).unwrap();
        p.exit(&s).unwrap();
        p.exit(&s).unwrap(); // an unmatched exit is harmless
        assert_eq!(p.stats().launches, 1);
        assert_eq!(p.lock().inflight.len(), 1);
    }
}
