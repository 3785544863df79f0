//! Scheduler tests on the host pseudo-device (the CPU simulation), no GPU needed.

use proptest::prelude::*;

use super::qos::{ContextSpec, QosClass};
use super::*;

fn sim(capacity: u64, sms: Option<u32>) -> Scheduler {
    Scheduler::new(-1, Some(capacity), sms).unwrap()
}

fn spec(name: &str, qos: Option<QosClass>, res: Option<u64>, lim: Option<u64>) -> ContextSpec {
    ContextSpec::resolve(name, qos, res, lim, None, 0, None).unwrap()
}

#[test]
fn refused_context_names_numbers_and_changes_nothing() {
    let s = sim(1000, None);
    let g = s
        .create_context(spec("llm", None, None, Some(800)))
        .unwrap();
    assert_eq!(g.spec.qos, QosClass::Guaranteed);
    assert_eq!(g.pool.quota(), Some(800));
    assert_eq!(g.pool.trim_floor(), 800);
    let err = s
        .create_context(spec("big", None, None, Some(300)))
        .err()
        .expect("refused");
    let msg = err.to_string();
    assert!(
        msg.contains("300") && msg.contains("200") && msg.contains("'llm' 800"),
        "{msg}"
    );
    match err {
        Error::Admission {
            requested,
            unreserved,
            holders,
            ..
        } => assert_eq!(
            (requested, unreserved, holders),
            (300, 200, vec![("llm".into(), 800)])
        ),
        e => panic!("{e}"),
    }
    let snap = s.snapshot().unwrap();
    assert_eq!(snap.contexts.len(), 1);
    assert_eq!((snap.reserved, snap.unreserved), (800, 200));
    let last = snap.decisions.last().unwrap();
    assert_eq!(
        (last.outcome, last.subject.as_str()),
        ("refused", "context 'big'")
    );
    s.remove_context("llm").unwrap();
    assert_eq!(s.snapshot().unwrap().unreserved, 1000);
    assert!(s.remove_context("llm").is_err());
}

#[test]
fn tasks_queue_by_tier_priority_arrival_and_run_their_lifecycle() {
    let s = sim(1000, None);
    s.create_context(spec("g", None, None, Some(400))).unwrap();
    s.create_context(spec("e", None, None, None)).unwrap();
    // The BestEffort context may borrow the 600 unreserved bytes.
    let (a, st) = s.submit("e", "a", 500, None).unwrap();
    assert_eq!(st, TaskState::Admitted);
    let (b, st) = s.submit("e", "b", 200, Some(1)).unwrap();
    assert_eq!(st, TaskState::Pending);
    let (c, _) = s.submit("e", "c", 200, Some(5)).unwrap();
    let (d, st) = s.submit("g", "d", 400, None).unwrap();
    assert_eq!(st, TaskState::Admitted, "within its reservation");
    assert!(matches!(
        s.submit("e", "huge", 601, None),
        Err(Error::Admission { .. })
    ));
    assert_eq!(
        s.task(b)
            .unwrap()
            .reason
            .as_deref()
            .map(|r| r.contains("borrow")),
        Some(true)
    );
    s.start(a).unwrap();
    assert!(s.start(a).is_err(), "running already");
    // a finishes: c (priority 5) is admitted before b (priority 1); both fit.
    let admitted = s.finish(a, None).unwrap();
    assert_eq!(admitted, vec![c, b]);
    s.cancel(b).unwrap();
    s.start(c).unwrap();
    s.finish(c, Some("boom".into())).unwrap();
    assert_eq!(s.task(c).unwrap().state, TaskState::Failed);
    s.cancel(d).unwrap();
    let snap = s.snapshot().unwrap();
    let e = snap.contexts.iter().find(|c| c.spec.name == "e").unwrap();
    assert_eq!(
        (
            e.tasks.submitted,
            e.tasks.completed,
            e.tasks.failed,
            e.tasks.cancelled
        ),
        (4, 1, 2, 1)
    );
    assert_eq!(e.claims, 0);
    assert!(s.remove_context("e").is_ok());
}

#[test]
fn a_waiting_task_a_new_reservation_makes_impossible_fails() {
    let s = sim(8, None);
    s.create_context(spec("e", None, None, None)).unwrap();
    let (a, _) = s.submit("e", "a", 5, None).unwrap();
    let (b, st) = s.submit("e", "b", 7, None).unwrap();
    assert_eq!(st, TaskState::Pending);
    s.create_context(spec("g", None, None, Some(2))).unwrap(); // 6 unreserved now
    s.start(a).unwrap();
    let changed = s.finish(a, None).unwrap();
    assert_eq!(changed, vec![b], "its waiter is woken");
    let t = s.task(b).unwrap();
    assert_eq!(t.state, TaskState::Failed);
    assert!(t.reason.unwrap().contains("unreserved"));
}

#[test]
fn simulated_sm_shares_are_planned() {
    let s = sim(1000, Some(100));
    let ctx = |n: &str, share: Option<f64>| {
        ContextSpec::resolve(n, None, None, Some(10), share, 0, None).unwrap()
    };
    let a = s.create_context(ctx("a", Some(0.3))).unwrap();
    assert_eq!(a.placement, Placement::Exclusive(30));
    assert_eq!(a.sm_count(), None, "nothing runs on SMs in the simulation");
    let b = s
        .create_context(
            ContextSpec::resolve("b", Some(QosClass::BestEffort), None, None, None, 0, None)
                .unwrap(),
        )
        .unwrap();
    assert_eq!(b.placement, Placement::Shared(70));
    assert!(s.create_context(ctx("c", Some(0.2))).is_err());
    assert!(s
        .snapshot()
        .unwrap()
        .sm_note
        .unwrap()
        .contains("simulation"));
}

#[test]
fn registry_keeps_one_scheduler_per_device() {
    let a = device_scheduler(-1, Some(1 << 30), None).unwrap();
    let b = device_scheduler(-1, None, None).unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    assert!(device_scheduler(-1, Some(1), None).is_err());
    assert!(shutdown_device_scheduler(-1));
    assert!(!shutdown_device_scheduler(-1));
}

#[derive(Debug, Clone)]
enum Req {
    Context(u8, u64, u64, Option<u8>),
    Close(u8),
    Submit(u8, u64, i8),
    Finish(usize, bool),
    Cancel(usize),
}

fn req() -> impl Strategy<Value = Req> {
    prop_oneof![
        (0u8..6, 0u64..3, 0u64..600, proptest::option::of(1u8..5))
            .prop_map(|(n, q, m, s)| Req::Context(n, q, m, s)),
        (0u8..6).prop_map(Req::Close),
        (0u8..6, 0u64..700, -3i8..3).prop_map(|(n, m, p)| Req::Submit(n, m, p)),
        (0usize..40, any::<bool>()).prop_map(|(i, ok)| Req::Finish(i, ok)),
        (0usize..40).prop_map(Req::Cancel),
    ]
}

/// Run a request sequence; return the outcome of each (as text) for the determinism check.
fn play(reqs: &[Req]) -> Vec<String> {
    let s = sim(1000, Some(132));
    let mut ids: Vec<u64> = Vec::new();
    let mut out = Vec::new();
    for r in reqs {
        let o = match r {
            Req::Context(n, q, m, share) => {
                let qos = [
                    QosClass::Guaranteed,
                    QosClass::Burstable,
                    QosClass::BestEffort,
                ][*q as usize];
                let (res, lim) = match qos {
                    QosClass::Guaranteed => (None, Some(m + 1)),
                    QosClass::Burstable => (Some(*m), Some(m + 100)),
                    QosClass::BestEffort => (None, None),
                };
                let share = share.map(|k| f64::from(k) / 10.0);
                let sp =
                    ContextSpec::resolve(&format!("c{n}"), Some(qos), res, lim, share, 0, None);
                match sp {
                    Ok(sp) => match s.create_context(sp) {
                        Ok(c) => format!("admitted {:?}", c.placement),
                        Err(e) => {
                            let Error::Admission { reason, .. } = &e else {
                                panic!("{e}")
                            };
                            assert!(!reason.is_empty());
                            format!("refused {e}")
                        }
                    },
                    Err(e) => format!("invalid {e}"),
                }
            }
            Req::Close(n) => format!(
                "{:?}",
                s.remove_context(&format!("c{n}"))
                    .map_err(|e| e.to_string())
            ),
            Req::Submit(n, m, p) => match s.submit(&format!("c{n}"), "", *m, Some(i32::from(*p))) {
                Ok((id, st)) => {
                    ids.push(id);
                    format!("{id} {st:?}")
                }
                Err(e) => format!("err {e}"),
            },
            Req::Finish(i, ok) => match ids.get(*i) {
                Some(&id) => {
                    let _ = s.start(id);
                    let err = if *ok { None } else { Some("x".to_string()) };
                    format!("{:?}", s.finish(id, err).map_err(|e| e.to_string()))
                }
                None => "skip".into(),
            },
            Req::Cancel(i) => match ids.get(*i) {
                Some(&id) => format!("{:?}", s.cancel(id).map_err(|e| e.to_string())),
                None => "skip".into(),
            },
        };
        // Invariants after every request.
        let snap = s.snapshot().unwrap();
        assert!(
            snap.reserved <= snap.capacity,
            "reservations exceed capacity"
        );
        assert_eq!(snap.reserved + snap.unreserved, snap.capacity);
        assert!(
            snap.borrowed <= snap.unreserved,
            "borrowed more than is unreserved"
        );
        let exclusive: u32 = snap
            .contexts
            .iter()
            .filter_map(|c| match c.placement {
                Placement::Exclusive(n) | Placement::Capped(n) => Some(n),
                _ => None,
            })
            .sum();
        assert!(exclusive <= 132);
        for c in &snap.contexts {
            if let Some(l) = c.spec.limit {
                assert!(c.claims <= l, "claims over the limit");
            }
            let live = c.tasks.admitted + c.tasks.running;
            assert!(live > 0 || c.claims == 0, "claims without tasks");
        }
        for t in &snap.tasks {
            assert!(t.state != TaskState::Admitted || t.admitted_ns.is_some());
            assert!(!t.state.is_final() || t.finished_ns.is_some());
        }
        out.push(o.split(" (requested").next().unwrap_or("").to_string());
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn admission_is_deterministic_and_keeps_its_invariants(reqs in proptest::collection::vec(req(), 1..40)) {
        let a = play(&reqs);
        let b = play(&reqs);
        prop_assert_eq!(a, b);
    }
}
