//! QoS classes and the context spec they govern, as Kubernetes defines them for pods.
//!
//! - Guaranteed: reservation == limit. The memory is held for the context from its creation,
//!   it is never paced, and its pool keeps the reservation through every trim.
//! - Burstable: a reservation (held like a Guaranteed one) plus headroom up to its limit, which
//!   it borrows from the unreserved memory while that is free.
//! - BestEffort: no reservation. It runs on what is left, is paced while a Guaranteed context
//!   is active, and its cached memory is the first to go when an allocation runs short.
//!
//! With no class given, the class follows from the numbers as in Kubernetes: a limit alone (or
//! a reservation equal to it) is Guaranteed, a reservation below the limit (or without one) is
//! Burstable, nothing is BestEffort.

use std::fmt;

use crate::error::{Error, Result};

/// The share of GPU time a BestEffort context gets while a Guaranteed context is active,
/// unless its spec says otherwise (measured: BENCHMARKS.md, co-location).
pub const DEFAULT_BEST_EFFORT_PACE: f64 = 0.5;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl QosClass {
    /// Admission order and trim order: 0 first (Guaranteed), 2 last (BestEffort).
    pub fn rank(self) -> u8 {
        match self {
            QosClass::Guaranteed => 0,
            QosClass::Burstable => 1,
            QosClass::BestEffort => 2,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            QosClass::Guaranteed => "guaranteed",
            QosClass::Burstable => "burstable",
            QosClass::BestEffort => "best_effort",
        }
    }

    /// Parse "guaranteed", "burstable", "best_effort" (also "besteffort", "best-effort"; any
    /// case).
    pub fn parse(s: &str) -> Result<QosClass> {
        let k: String = s
            .chars()
            .filter(|c| *c != '_' && *c != '-')
            .flat_map(char::to_lowercase)
            .collect();
        match k.as_str() {
            "guaranteed" => Ok(QosClass::Guaranteed),
            "burstable" => Ok(QosClass::Burstable),
            "besteffort" => Ok(QosClass::BestEffort),
            _ => Err(Error::invalid(format!(
                "qos must be 'guaranteed', 'burstable' or 'best_effort', got {s:?}"
            ))),
        }
    }
}

impl fmt::Display for QosClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a context asks of its device. Built by [`ContextSpec::resolve`], which fills in the
/// class and checks the numbers against it.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextSpec {
    pub name: String,
    pub qos: QosClass,
    /// Bytes held for the context from its creation (0 for BestEffort).
    pub reservation: u64,
    /// The most the context may allocate (None: no limit but the device).
    pub limit: Option<u64>,
    /// The fraction of the device's SMs this context runs on, exclusively (None: the SMs no
    /// context holds).
    pub sm_share: Option<f64>,
    /// Admission order within a tier: higher first.
    pub priority: i32,
    /// The share of GPU time this context may use while a Guaranteed context is active (None:
    /// not paced).
    pub pace: Option<f64>,
}

fn check_fraction(what: &str, v: Option<f64>) -> Result<()> {
    match v {
        Some(x) if !(x > 0.0 && x <= 1.0) => {
            Err(Error::invalid(format!("{what} must be in (0, 1], got {x}")))
        }
        _ => Ok(()),
    }
}

impl ContextSpec {
    /// Fill in the class (when `qos` is None) and check every number against it. `pace`:
    /// None takes the class default (BestEffort: DEFAULT_BEST_EFFORT_PACE, others: unpaced);
    /// Some(None) turns pacing off; Some(Some(x)) sets it.
    pub fn resolve(
        name: &str,
        qos: Option<QosClass>,
        reservation: Option<u64>,
        limit: Option<u64>,
        sm_share: Option<f64>,
        priority: i32,
        pace: Option<Option<f64>>,
    ) -> Result<ContextSpec> {
        if name.is_empty() {
            return Err(Error::invalid("context name must be a non-empty string"));
        }
        check_fraction("sm_share", sm_share)?;
        let qos = match qos {
            Some(q) => q,
            None => match (reservation, limit) {
                (None, Some(_)) => QosClass::Guaranteed,
                (Some(r), Some(l)) if r == l && r > 0 => QosClass::Guaranteed,
                (Some(r), _) if r > 0 => QosClass::Burstable,
                (_, Some(_)) => QosClass::Burstable,
                _ => QosClass::BestEffort,
            },
        };
        if let (Some(r), Some(l)) = (reservation, limit) {
            if r > l {
                return Err(Error::invalid(format!(
                    "context '{name}': reservation {r} bytes exceeds its limit {l} bytes"
                )));
            }
        }
        let reservation = match qos {
            QosClass::Guaranteed => {
                let Some(l) = limit else {
                    return Err(Error::invalid(format!(
                        "context '{name}': a Guaranteed context needs a limit (max_vram): its \
                         reservation equals its limit"
                    )));
                };
                if let Some(r) = reservation {
                    if r != l {
                        return Err(Error::invalid(format!(
                            "context '{name}': a Guaranteed context's reservation must equal its \
                             limit ({r} != {l}); use qos='burstable' for headroom above the \
                             reservation"
                        )));
                    }
                }
                l
            }
            QosClass::Burstable => {
                let r = reservation.unwrap_or(0);
                if r == 0 && limit.is_none() {
                    return Err(Error::invalid(format!(
                        "context '{name}': a Burstable context needs a reservation or a limit \
                         (with neither it is BestEffort)"
                    )));
                }
                r
            }
            QosClass::BestEffort => match reservation {
                Some(r) if r > 0 => {
                    return Err(Error::invalid(format!(
                        "context '{name}': a BestEffort context reserves nothing, got a \
                         reservation of {r} bytes; use qos='burstable'"
                    )))
                }
                _ => 0,
            },
        };
        let pace = match pace {
            None if qos == QosClass::BestEffort => Some(DEFAULT_BEST_EFFORT_PACE),
            None => None,
            Some(p) => p,
        };
        check_fraction("pace", pace)?;
        if qos == QosClass::Guaranteed && pace.is_some() {
            return Err(Error::invalid(format!(
                "context '{name}': a Guaranteed context is never paced (pace must be None)"
            )));
        }
        if limit == Some(0) {
            return Err(Error::invalid(format!(
                "context '{name}': a limit of 0 bytes could allocate nothing"
            )));
        }
        Ok(ContextSpec {
            name: name.to_string(),
            qos,
            reservation,
            limit,
            sm_share,
            priority,
            pace,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(
        qos: Option<QosClass>,
        res: Option<u64>,
        lim: Option<u64>,
        pace: Option<Option<f64>>,
    ) -> Result<ContextSpec> {
        ContextSpec::resolve("c", qos, res, lim, None, 0, pace)
    }

    #[test]
    fn class_follows_the_numbers_as_in_kubernetes() {
        let g = r(None, None, Some(10), None).unwrap();
        assert_eq!(
            (g.qos, g.reservation, g.pace),
            (QosClass::Guaranteed, 10, None)
        );
        assert_eq!(
            r(None, Some(10), Some(10), None).unwrap().qos,
            QosClass::Guaranteed
        );
        let b = r(None, Some(4), Some(10), None).unwrap();
        assert_eq!(
            (b.qos, b.reservation, b.limit),
            (QosClass::Burstable, 4, Some(10))
        );
        assert_eq!(
            r(None, Some(4), None, None).unwrap().qos,
            QosClass::Burstable
        );
        let e = r(None, None, None, None).unwrap();
        assert_eq!(
            (e.qos, e.reservation, e.pace),
            (QosClass::BestEffort, 0, Some(DEFAULT_BEST_EFFORT_PACE))
        );
    }

    #[test]
    fn each_class_refuses_numbers_that_contradict_it() {
        let g = Some(QosClass::Guaranteed);
        assert!(r(g, None, None, None).is_err());
        assert!(r(g, Some(3), Some(10), None).is_err());
        assert!(r(g, None, Some(10), Some(Some(0.5))).is_err());
        assert!(r(Some(QosClass::Burstable), None, None, None).is_err());
        assert!(r(Some(QosClass::BestEffort), Some(1), None, None).is_err());
        assert!(r(None, Some(11), Some(10), None).is_err());
        assert!(r(None, None, Some(0), None).is_err());
        assert!(r(None, None, None, Some(Some(0.0))).is_err());
        assert!(r(None, None, None, Some(Some(1.5))).is_err());
        assert!(ContextSpec::resolve("", None, None, None, None, 0, None).is_err());
        assert!(ContextSpec::resolve("c", None, None, None, Some(0.0), 0, None).is_err());
        assert!(ContextSpec::resolve("c", None, None, None, Some(f64::NAN), 0, None).is_err());
        // Pacing off for a BestEffort context is allowed.
        assert_eq!(
            r(Some(QosClass::BestEffort), None, None, Some(None))
                .unwrap()
                .pace,
            None
        );
    }

    #[test]
    fn parse_accepts_the_usual_spellings() {
        for s in ["best_effort", "BestEffort", "best-effort", "BESTEFFORT"] {
            assert_eq!(QosClass::parse(s).unwrap(), QosClass::BestEffort);
        }
        assert_eq!(QosClass::parse("Guaranteed").unwrap(), QosClass::Guaranteed);
        assert!(QosClass::parse("gold").is_err());
    }
}
