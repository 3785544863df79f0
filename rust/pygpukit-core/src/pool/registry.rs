//! Every live allocator, by device, for the OOM ladder: when one pool runs out of memory, the
//! cached memory of all pygpukit pools on that device is released, not only its own.
//! Weak references, so the registry never keeps a pool alive.

use std::sync::{Arc, Mutex, Weak};

use super::raw::RawAllocator;
use crate::deferred::record_if_err;

type Entry = (i32, Weak<dyn RawAllocator>);

static REGISTRY: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

fn lock() -> std::sync::MutexGuard<'static, Vec<Entry>> {
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn register(allocator: &Arc<dyn RawAllocator>) {
    let mut reg = lock();
    // Prune dead entries here (pool creation is rare) so the list stays as long as the live pools.
    reg.retain(|(_, w)| w.strong_count() > 0);
    reg.push((allocator.device(), Arc::downgrade(allocator)));
}

/// Live allocators of `device`. The lock is released before they are used, and an allocator
/// dropped by the caller afterwards never re-enters the registry.
pub(crate) fn live_on(device: i32) -> Vec<Arc<dyn RawAllocator>> {
    lock()
        .iter()
        .filter(|(d, _)| *d == device)
        .filter_map(|(_, w)| w.upgrade())
        .collect()
}

/// Release the cached memory of every pool on `device`. A failure of one pool's trim must not
/// stop the ladder for the others, so it is recorded and reported later.
pub(crate) fn trim_device(device: i32) {
    for a in live_on(device) {
        record_if_err(a.trim(0));
    }
}
