//! Every live pool, by device, for the OOM ladder: when one pool runs out of memory, the cached
//! memory of other pygpukit pools on that device is released too, not only its own, BestEffort
//! pools first. Weak references, so the registry never keeps a pool alive.

use std::sync::{Arc, Mutex, Weak};

use super::memory_pool::PoolShared;
use crate::deferred::record_if_err;

type Entry = (i32, Weak<PoolShared>);

static REGISTRY: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

fn lock() -> std::sync::MutexGuard<'static, Vec<Entry>> {
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn register(pool: &Arc<PoolShared>) {
    let mut reg = lock();
    // Prune dead entries here (pool creation is rare) so the list stays as long as the live pools.
    reg.retain(|(_, w)| w.strong_count() > 0);
    reg.push((pool.device(), Arc::downgrade(pool)));
}

/// Live pools of `device`. The lock is released before they are used, and a pool dropped by the
/// caller afterwards never re-enters the registry.
pub(crate) fn live_on(device: i32) -> Vec<Arc<PoolShared>> {
    lock()
        .iter()
        .filter(|(d, _)| *d == device)
        .filter_map(|(_, w)| w.upgrade())
        .collect()
}

/// Release the cached memory of the pools on `device` whose trim rank is at least `min_rank`
/// (2: BestEffort pools only; 0: all), each down to its floor (the reservation it holds). A
/// failure of one pool's trim must not stop the ladder for the others, so it is recorded and
/// reported later. Returns how many pools were trimmed.
pub(crate) fn trim_device(device: i32, min_rank: u8) -> usize {
    let mut n = 0;
    for p in live_on(device) {
        if p.trim_rank() >= min_rank {
            record_if_err(p.trim_to_floor(0));
            n += 1;
        }
    }
    n
}
