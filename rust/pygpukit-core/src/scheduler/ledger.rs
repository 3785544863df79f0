//! The admission ledger: pure arithmetic over one device's memory capacity, the contexts'
//! reservations, the SMs their partitions hold and the memory their tasks claim.
//!
//! Everything here is integer arithmetic over the entries in admission order, so the same
//! sequence of requests always gives the same decisions (the property tests check it), and
//! every refusal carries its numbers: what was asked, what was free, and who holds the rest.
//!
//! Memory: a context's reservation comes out of the device's unreserved memory at admission
//! (less what running tasks borrow of it). Its tasks claim memory: within the reservation freely, above it (up to the context's limit)
//! by borrowing unreserved memory that no other context's tasks are borrowing.
//!
//! SMs: a share is carved out of the SMs no partition holds (rounded up to the device's partition
//! granularity), and the context runs only there. For a Guaranteed or Burstable context the
//! share is a reservation: no other context runs on those SMs. For a BestEffort context it is a
//! cap: the context runs on at most those SMs, which protects the others from it. A context
//! without a share runs on every SM while no reservation exists (it may overlap caps), else on
//! the SMs left when it was admitted. A share is refused while contexts run on those left-over
//! SMs (carving it would take SMs from under them), and a reservation also while a context runs
//! on every SM (it would run on the reserved ones). A closed partition's SMs are free again.

use std::fmt::Write as _;

use super::qos::{ContextSpec, QosClass};

/// The device's SMs as green contexts can split them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SmSpace {
    pub total: u32,
    /// Partition sizes are multiples of this (8 on Hopper).
    pub granularity: u32,
    /// SMs partitions can be made of: the whole groups of the driver's split (the SMs left over
    /// beside them only ever run contexts without a share).
    pub carvable: u32,
}

impl SmSpace {
    /// Every SM in whole groups (the CPU simulation's SMs, for one).
    pub fn whole(total: u32, granularity: u32) -> SmSpace {
        let g = granularity.max(1);
        SmSpace {
            total,
            granularity: g,
            carvable: total / g * g,
        }
    }

    /// SMs for a share: share x total, rounded up to the granularity (at least one group, at
    /// most every carvable group).
    pub fn count_for(&self, share: f64) -> u32 {
        let g = self.granularity.max(1);
        let groups = (share * f64::from(self.total) / f64::from(g) - 1e-9).ceil();
        let groups = (groups.max(1.0) as u32).min(self.carvable / g);
        groups * g
    }
}

/// Where a context's kernels run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Every SM of the device (no reservation exists, or the device has no SMs to give).
    Device,
    /// A partition of this many SMs reserved for this context alone (Guaranteed, Burstable).
    Exclusive(u32),
    /// A partition of this many SMs a BestEffort context is capped to.
    Capped(u32),
    /// The SMs no partition held when the context was admitted (this many).
    Shared(u32),
}

impl Placement {
    pub fn sm_count(self) -> Option<u32> {
        match self {
            Placement::Device => None,
            Placement::Exclusive(n) | Placement::Capped(n) | Placement::Shared(n) => Some(n),
        }
    }

    /// A partition carved for this context (a reservation or a cap).
    pub fn is_carved(self) -> bool {
        matches!(self, Placement::Exclusive(_) | Placement::Capped(_))
    }

    pub fn name(self) -> &'static str {
        match self {
            Placement::Device => "device",
            Placement::Exclusive(_) => "exclusive",
            Placement::Capped(_) => "capped",
            Placement::Shared(_) => "shared",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct LedgerEntry {
    pub name: String,
    pub qos: QosClass,
    pub reservation: u64,
    pub limit: Option<u64>,
    pub placement: Placement,
    /// Memory claimed by the context's admitted and running tasks.
    pub claims: u64,
}

impl LedgerEntry {
    /// Claimed memory above the reservation: borrowed from the unreserved memory.
    pub fn borrowed(&self) -> u64 {
        self.claims.saturating_sub(self.reservation)
    }
}

/// Why a request was refused, with the numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// What asked ("context 'llm'", "task 'batch-3' of context 'etl'").
    pub subject: String,
    pub reason: String,
    /// Bytes asked for (0 when the refusal is not about memory).
    pub requested: u64,
    /// Unreserved bytes at the time.
    pub unreserved: u64,
    /// Who holds memory: (context, reserved bytes), in admission order.
    pub holders: Vec<(String, u64)>,
}

/// Whether a task's memory claim fits its context now, later, or never.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskFit {
    Fits,
    /// It could fit once running tasks finish; the reason says what it waits for.
    Waits(String),
    /// It can never fit (larger than the context's limit, or than all unreserved memory).
    Never(String),
}

#[derive(Debug, Clone)]
pub struct Ledger {
    capacity: u64,
    sms: Option<SmSpace>,
    entries: Vec<LedgerEntry>,
    /// SMs held by partitions (reservations and caps).
    carved: u32,
}

impl Ledger {
    /// `sms`: None where SM partitions are unavailable (shares are then recorded but every
    /// context runs on the whole device).
    pub fn new(capacity: u64, sms: Option<SmSpace>) -> Ledger {
        Ledger {
            capacity,
            sms,
            entries: Vec::new(),
            carved: 0,
        }
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }
    pub fn sm_space(&self) -> Option<SmSpace> {
        self.sms
    }
    pub fn entries(&self) -> &[LedgerEntry] {
        &self.entries
    }
    pub fn entry(&self, name: &str) -> Option<&LedgerEntry> {
        self.entries.iter().find(|e| e.name == name)
    }
    pub fn reserved(&self) -> u64 {
        self.entries.iter().map(|e| e.reservation).sum()
    }
    pub fn unreserved(&self) -> u64 {
        self.capacity.saturating_sub(self.reserved())
    }
    pub fn borrowed(&self) -> u64 {
        self.entries.iter().map(LedgerEntry::borrowed).sum()
    }
    /// SMs no partition holds (None without SM partitions).
    pub fn free_sms(&self) -> Option<u32> {
        self.sms.map(|s| s.total - self.carved)
    }

    fn holders(&self) -> Vec<(String, u64)> {
        self.entries
            .iter()
            .filter(|e| e.reservation > 0)
            .map(|e| (e.name.clone(), e.reservation))
            .collect()
    }

    /// A refusal of `subject` with the ledger's numbers of the moment.
    pub fn refusal(&self, subject: String, reason: String, requested: u64) -> Refusal {
        Refusal {
            subject,
            reason,
            requested,
            unreserved: self.unreserved(),
            holders: self.holders(),
        }
    }

    fn sm_holders(&self) -> String {
        let mut s = String::new();
        for e in &self.entries {
            if let (true, Some(n)) = (e.placement.is_carved(), e.placement.sm_count()) {
                let _ = write!(s, "{}{}: {n}", if s.is_empty() { "" } else { ", " }, e.name);
            }
        }
        if s.is_empty() {
            "none".into()
        } else {
            s
        }
    }

    /// Admit a context: its reservation comes out of the unreserved memory and its share out of
    /// the free SMs, or nothing changes and the refusal says why.
    pub fn admit_context(&mut self, spec: &ContextSpec) -> Result<Placement, Refusal> {
        let subject = format!("context '{}'", spec.name);
        if self.entry(&spec.name).is_some() {
            return Err(self.refusal(
                subject,
                format!("a context named '{}' exists on this device", spec.name),
                0,
            ));
        }
        let unreserved = self.unreserved();
        let borrowed = self.borrowed();
        if spec.reservation > unreserved.saturating_sub(borrowed) {
            let lent = if borrowed > 0 {
                format!(", {borrowed} of them borrowed by running tasks")
            } else {
                String::new()
            };
            let reason = format!(
                "its {} reservation of {} bytes does not fit: {} of {} bytes are unreserved{lent}",
                spec.qos, spec.reservation, unreserved, self.capacity
            );
            return Err(self.refusal(subject, reason, spec.reservation));
        }
        let placement = self.place(spec).map_err(|r| self.refusal(subject, r, 0))?;
        if let (true, Some(n)) = (placement.is_carved(), placement.sm_count()) {
            self.carved += n;
        }
        self.entries.push(LedgerEntry {
            name: spec.name.clone(),
            qos: spec.qos,
            reservation: spec.reservation,
            limit: spec.limit,
            placement,
            claims: 0,
        });
        Ok(placement)
    }

    fn place(&self, spec: &ContextSpec) -> Result<Placement, String> {
        let Some(sms) = self.sms else {
            return Ok(Placement::Device);
        };
        let free = sms.total - self.carved;
        let reserves = spec.qos != QosClass::BestEffort;
        match spec.sm_share {
            Some(share) => {
                let blocker = self.entries.iter().find(|e| match e.placement {
                    Placement::Shared(_) => true,
                    Placement::Device => reserves,
                    _ => false,
                });
                if let Some(e) = blocker {
                    let why = if matches!(e.placement, Placement::Shared(_)) {
                        "the SMs left over by partitions"
                    } else {
                        "every SM, so it would run on the reserved ones"
                    };
                    return Err(format!(
                        "context '{}' runs on {why}; create contexts with SM shares before \
                         those without, or close '{}' first",
                        e.name, e.name
                    ));
                }
                let n = sms.count_for(share);
                let carvable = sms.carvable.saturating_sub(self.carved);
                if n == 0 || n > carvable {
                    return Err(format!(
                        "its SM share {share} needs {n} SMs (groups of {}): {carvable} of the \
                         {} SMs in groups are free (partitions: {})",
                        sms.granularity,
                        sms.carvable,
                        self.sm_holders()
                    ));
                }
                Ok(if reserves {
                    Placement::Exclusive(n)
                } else {
                    Placement::Capped(n)
                })
            }
            None if !self.has_reservation() => Ok(Placement::Device),
            None if free == 0 => Err(format!(
                "every SM of the device is held by a partition ({}): none is left to share",
                self.sm_holders()
            )),
            None => Ok(Placement::Shared(free)),
        }
    }

    fn has_reservation(&self) -> bool {
        self.entries
            .iter()
            .any(|e| matches!(e.placement, Placement::Exclusive(_)))
    }

    /// Remove a context (its tasks' claims and its SMs go with it).
    pub fn remove_context(&mut self, name: &str) -> Option<LedgerEntry> {
        let i = self.entries.iter().position(|e| e.name == name)?;
        let e = self.entries.remove(i);
        if let (true, Some(n)) = (e.placement.is_carved(), e.placement.sm_count()) {
            self.carved -= n;
        }
        Some(e)
    }

    /// Whether a task of `context` claiming `memory` bytes fits now, later, or never.
    pub fn task_fit(&self, context: &str, memory: u64) -> TaskFit {
        let Some(e) = self.entry(context) else {
            return TaskFit::Never(format!("context '{context}' does not exist"));
        };
        if let Some(l) = e.limit {
            if memory > l {
                return TaskFit::Never(format!(
                    "it claims {memory} bytes, more than its context's limit of {l} bytes"
                ));
            }
        }
        let unreserved = self.unreserved();
        if memory > e.reservation + unreserved {
            return TaskFit::Never(format!(
                "it claims {memory} bytes, more than its context's reservation ({}) plus all \
                 unreserved memory ({unreserved}) on the device",
                e.reservation
            ));
        }
        let after = e.claims.saturating_add(memory);
        if let Some(l) = e.limit {
            if after > l {
                return TaskFit::Waits(format!(
                    "its context's tasks claim {} of its {l}-byte limit",
                    e.claims
                ));
            }
        }
        let more = after.saturating_sub(e.reservation) - e.borrowed();
        let borrowed = self.borrowed();
        if more > unreserved.saturating_sub(borrowed) {
            return TaskFit::Waits(format!(
                "it borrows {more} bytes above its context's reservation, and {} of the {} \
                 unreserved bytes are borrowed by running tasks",
                borrowed, unreserved
            ));
        }
        TaskFit::Fits
    }

    /// Record an admitted task's claim (call only after `task_fit` said Fits).
    pub fn claim(&mut self, context: &str, memory: u64) {
        if let Some(e) = self.entries.iter_mut().find(|e| e.name == context) {
            e.claims += memory;
        }
    }

    /// Give back a finished task's claim.
    pub fn release(&mut self, context: &str, memory: u64) {
        if let Some(e) = self.entries.iter_mut().find(|e| e.name == context) {
            e.claims = e.claims.saturating_sub(memory);
        }
    }
}

impl From<Refusal> for crate::error::Error {
    fn from(r: Refusal) -> Self {
        crate::error::Error::Admission {
            subject: r.subject,
            reason: r.reason,
            requested: r.requested,
            unreserved: r.unreserved,
            holders: r.holders,
        }
    }
}

/// "a: 4096, b: 512" for a refusal message (or "nobody").
pub fn format_holders(holders: &[(String, u64)]) -> String {
    if holders.is_empty() {
        return "nobody".into();
    }
    holders
        .iter()
        .map(|(n, b)| format!("'{n}' {b}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, qos: Option<QosClass>, res: Option<u64>, lim: Option<u64>) -> ContextSpec {
        ContextSpec::resolve(name, qos, res, lim, None, 0, None).unwrap()
    }

    fn shared(name: &str, share: Option<f64>) -> ContextSpec {
        ContextSpec::resolve(name, None, None, Some(1), share, 0, None).unwrap()
    }

    fn best_effort(name: &str, share: Option<f64>) -> ContextSpec {
        ContextSpec::resolve(name, None, None, None, share, 0, None).unwrap()
    }

    #[test]
    fn reservations_are_refused_with_their_numbers() {
        let mut l = Ledger::new(100, None);
        l.admit_context(&spec("a", None, None, Some(60))).unwrap();
        let err = l
            .admit_context(&spec("b", None, None, Some(50)))
            .unwrap_err();
        assert_eq!(err.requested, 50);
        assert_eq!(err.unreserved, 40);
        assert_eq!(err.holders, vec![("a".to_string(), 60)]);
        assert!(err.reason.contains("40 of 100"), "{}", err.reason);
        assert_eq!(l.entries().len(), 1, "a refusal changes nothing");
        l.admit_context(&spec("b", None, None, Some(40))).unwrap();
        assert_eq!(l.unreserved(), 0);
        // BestEffort reserves nothing, so it is admitted on a full device.
        l.admit_context(&spec("c", None, None, None)).unwrap();
        assert!(l.admit_context(&spec("c", None, None, None)).is_err());
        l.remove_context("a").unwrap();
        assert_eq!(l.unreserved(), 60);
    }

    #[test]
    fn tasks_borrow_only_unreserved_memory_nobody_borrows() {
        let mut l = Ledger::new(100, None);
        l.admit_context(&spec("g", None, None, Some(50))).unwrap();
        l.admit_context(&spec("b", None, Some(10), Some(40)))
            .unwrap();
        l.admit_context(&spec("e", None, None, None)).unwrap();
        assert_eq!(l.task_fit("g", 50), TaskFit::Fits);
        assert!(matches!(l.task_fit("g", 51), TaskFit::Never(_)));
        assert!(matches!(l.task_fit("e", 41), TaskFit::Never(_)));
        assert_eq!(l.task_fit("b", 30), TaskFit::Fits);
        l.claim("b", 30); // 10 reserved + 20 borrowed
        assert_eq!(l.borrowed(), 20);
        assert_eq!(l.task_fit("e", 20), TaskFit::Fits);
        assert!(matches!(l.task_fit("e", 21), TaskFit::Waits(_)));
        assert!(matches!(l.task_fit("b", 11), TaskFit::Waits(_)));
        l.release("b", 30);
        assert_eq!(l.task_fit("e", 40), TaskFit::Fits);
    }

    #[test]
    fn sm_shares_are_carved_exclusively_and_come_back_together() {
        let sms = SmSpace::whole(132, 8);
        assert_eq!(sms.count_for(0.5), 72);
        assert_eq!(sms.count_for(0.01), 8);
        assert_eq!(sms.count_for(1.0), 128);
        let mut l = Ledger::new(100, Some(sms));
        assert_eq!(
            l.admit_context(&shared("a", Some(0.25))).unwrap(),
            Placement::Exclusive(40)
        );
        assert_eq!(
            l.admit_context(&shared("b", Some(0.5))).unwrap(),
            Placement::Exclusive(72)
        );
        let err = l.admit_context(&shared("c", Some(0.25))).unwrap_err();
        assert!(err.reason.contains("16 of the 128"), "{}", err.reason);
        assert_eq!(
            l.admit_context(&best_effort("d", None)).unwrap(),
            Placement::Shared(20)
        );
        // A share is never carved from under a context on the shared SMs.
        assert!(l.admit_context(&best_effort("e", Some(0.05))).is_err());
        l.remove_context("d");
        l.remove_context("a");
        assert_eq!(
            l.free_sms(),
            Some(60),
            "a closed partition's SMs are free again"
        );
        l.remove_context("b");
        assert_eq!(l.free_sms(), Some(132));
        assert_eq!(
            l.admit_context(&shared("f", None)).unwrap(),
            Placement::Device
        );
    }

    #[test]
    fn best_effort_shares_are_caps_that_others_may_overlap() {
        let sms = SmSpace::whole(132, 8);
        let mut l = Ledger::new(100, Some(sms));
        // A Guaranteed context without a share runs on every SM, caps notwithstanding.
        assert_eq!(
            l.admit_context(&shared("g", None)).unwrap(),
            Placement::Device
        );
        assert_eq!(
            l.admit_context(&best_effort("batch", Some(0.45))).unwrap(),
            Placement::Capped(64)
        );
        // A reservation would be intruded on by 'g', which runs everywhere.
        let err = l.admit_context(&shared("r", Some(0.25))).unwrap_err();
        assert!(
            err.reason.contains("'g' runs on every SM"),
            "{}",
            err.reason
        );
        assert_eq!(
            l.admit_context(&best_effort("etl", None)).unwrap(),
            Placement::Device,
            "no reservation: unshared contexts run everywhere"
        );
        l.remove_context("g");
        l.remove_context("etl");
        assert_eq!(
            l.admit_context(&shared("r", Some(0.25))).unwrap(),
            Placement::Exclusive(40)
        );
        assert_eq!(
            l.admit_context(&best_effort("x", None)).unwrap(),
            Placement::Shared(28)
        );
    }
}
