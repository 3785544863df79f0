//! Errors raised inside destructors.
//!
//! `Drop` cannot return an error and must not panic, yet a failed cuMemFreeAsync or
//! cuStreamDestroy must not vanish (docs/design.md convention 4, after cudarc's `record_err`). They are
//! recorded here; `MemoryPool::allocate` reports them at its next call, and callers can drain them
//! with `take_deferred_errors()`. `has_deferred_errors()` is one relaxed atomic load, cheap enough
//! for the allocation hot path.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use crate::error::Error;

/// Keep at most this many errors; beyond it only count them (a loop of failing frees must not
/// grow memory without bound).
const MAX_KEPT: usize = 1024;

struct Deferred {
    errors: Vec<Error>,
    omitted: usize,
}

static DEFERRED: Mutex<Deferred> = Mutex::new(Deferred {
    errors: Vec::new(),
    omitted: 0,
});
static HAS_DEFERRED: AtomicBool = AtomicBool::new(false);

fn lock() -> std::sync::MutexGuard<'static, Deferred> {
    // A poisoned lock only means a panic elsewhere while holding it; the list is still valid.
    DEFERRED.lock().unwrap_or_else(|p| p.into_inner())
}

/// Record an error from a destructor.
pub fn record_deferred(err: Error) {
    let mut d = lock();
    if d.errors.len() < MAX_KEPT {
        d.errors.push(err);
    } else {
        d.omitted += 1;
    }
    HAS_DEFERRED.store(true, Ordering::Release);
}

/// Record the error of a destructor's result, if any.
pub fn record_if_err(r: crate::error::Result<()>) {
    if let Err(e) = r {
        record_deferred(e);
    }
}

#[inline]
pub fn has_deferred_errors() -> bool {
    HAS_DEFERRED.load(Ordering::Relaxed)
}

/// Drain the recorded errors. If some were not kept (over the cap), the last entry is an
/// `Error::Deferred` with an empty list whose `omitted` says how many.
pub fn take_deferred_errors() -> Vec<Error> {
    let mut d = lock();
    HAS_DEFERRED.store(false, Ordering::Release);
    let mut errors = std::mem::take(&mut d.errors);
    let omitted = std::mem::take(&mut d.omitted);
    if omitted > 0 {
        errors.push(Error::Deferred {
            errors: Vec::new(),
            omitted,
        });
    }
    errors
}

/// All recorded errors as one `Error::Deferred`, or `None` when there are none.
pub(crate) fn take_as_error() -> Option<Error> {
    let mut d = lock();
    if d.errors.is_empty() && d.omitted == 0 {
        HAS_DEFERRED.store(false, Ordering::Release);
        return None;
    }
    HAS_DEFERRED.store(false, Ordering::Release);
    Some(Error::Deferred {
        errors: std::mem::take(&mut d.errors),
        omitted: std::mem::take(&mut d.omitted),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

    /// cargo runs tests in parallel and the deferred list is global: tests that record errors hold
    /// the write side, tests that allocate (and so would see them) hold the read side.
    static GATE: RwLock<()> = RwLock::new(());

    pub(crate) fn exclusive() -> RwLockWriteGuard<'static, ()> {
        GATE.write().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn shared() -> RwLockReadGuard<'static, ()> {
        GATE.read().unwrap_or_else(|p| p.into_inner())
    }

    #[test]
    fn record_then_take() {
        let _g = exclusive();
        take_deferred_errors();
        assert!(!has_deferred_errors());
        record_deferred(Error::invalid("a"));
        record_if_err(Err(Error::invalid("b")));
        record_if_err(Ok(()));
        assert!(has_deferred_errors());
        let errs = take_deferred_errors();
        assert_eq!(errs.len(), 2);
        assert!(!has_deferred_errors());
        assert!(take_as_error().is_none());
    }

    #[test]
    fn cap_counts_omitted() {
        let _g = exclusive();
        take_deferred_errors();
        for _ in 0..MAX_KEPT + 3 {
            record_deferred(Error::invalid("x"));
        }
        let errs = take_deferred_errors();
        assert_eq!(errs.len(), MAX_KEPT + 1);
        assert!(matches!(
            errs.last(),
            Some(Error::Deferred { omitted: 3, .. })
        ));
    }
}
