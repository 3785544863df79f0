//! One scheduler per device for the process (`pygpukit.scheduler.initialize`).

use std::sync::{Arc, Mutex};

use super::Scheduler;
use crate::error::{Error, Result};

static REGISTRY: Mutex<Vec<(i32, Arc<Scheduler>)>> = Mutex::new(Vec::new());

/// The process's scheduler of `device`, made on first use with `capacity` / `sim_sms`. Asking
/// again with a different explicit capacity is an error (the first one stands).
pub fn device_scheduler(
    device: i32,
    capacity: Option<u64>,
    sim_sms: Option<u32>,
) -> Result<Arc<Scheduler>> {
    let mut reg = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, s)) = reg.iter().find(|(d, _)| *d == device) {
        let have = s.capacity();
        if let Some(c) = capacity {
            if c != have {
                return Err(Error::invalid(format!(
                    "the scheduler of device {device} exists with a capacity of {have} bytes; \
                     shut it down before initializing it with {c}"
                )));
            }
        }
        return Ok(s.clone());
    }
    let s = Arc::new(Scheduler::new(device, capacity, sim_sms)?);
    reg.push((device, s.clone()));
    Ok(s)
}

/// Forget the process's scheduler of `device` (its contexts live on while referenced). True
/// if there was one.
pub fn shutdown_device_scheduler(device: i32) -> bool {
    let mut reg = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    let n = reg.len();
    reg.retain(|(d, _)| *d != device);
    reg.len() != n
}
