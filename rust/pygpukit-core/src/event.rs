//! CUDA events, and host events (device -1) that record an `Instant` so that timing code written
//! against events also runs, and measures, on a machine without a GPU.

use std::ptr;
use std::sync::Mutex;
use std::time::Instant;

use cudarc::driver::sys;

use crate::context::{ensure_current, validate_device};
use crate::deferred::record_if_err;
use crate::error::{check, cuda_error, Error, Result};
use crate::stream::Stream;

pub struct Event {
    /// CUevent as an address; 0 for host events.
    handle: usize,
    device: i32,
    timing: bool,
    blocking: bool,
    /// Host events only: when it was last recorded.
    host_time: Mutex<Option<Instant>>,
}

impl Event {
    /// `enable_timing=false` makes record/wait cheaper (no timestamp). `blocking` makes
    /// `synchronize` sleep on the driver instead of spinning (CU_EVENT_BLOCKING_SYNC).
    pub fn new(device: i32, enable_timing: bool, blocking: bool) -> Result<Event> {
        validate_device(device)?;
        let mut handle = 0usize;
        if device >= 0 {
            ensure_current(device)?;
            let mut flags = 0u32;
            if !enable_timing {
                flags |= sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
            }
            if blocking {
                flags |= sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC as u32;
            }
            let mut ev: sys::CUevent = ptr::null_mut();
            // SAFETY: valid out-pointer; the device's primary context is current.
            check("cuEventCreate", unsafe {
                sys::cuEventCreate(&mut ev, flags)
            })?;
            handle = ev as usize;
        }
        Ok(Event {
            handle,
            device,
            timing: enable_timing,
            blocking,
            host_time: Mutex::new(None),
        })
    }

    #[inline]
    pub fn handle(&self) -> usize {
        self.handle
    }
    #[inline]
    pub fn raw(&self) -> sys::CUevent {
        self.handle as sys::CUevent
    }
    #[inline]
    pub fn device(&self) -> i32 {
        self.device
    }
    #[inline]
    pub fn is_host(&self) -> bool {
        self.device < 0
    }
    pub fn timing_enabled(&self) -> bool {
        self.timing
    }
    pub fn blocking(&self) -> bool {
        self.blocking
    }

    fn host_time(&self) -> Option<Instant> {
        *self.host_time.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Capture the work queued so far on `stream`.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        stream.expect_device(self.device, "the event")?;
        if self.is_host() {
            *self.host_time.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
            return Ok(());
        }
        ensure_current(self.device)?;
        // SAFETY: live event and stream of the same context.
        check("cuEventRecord", unsafe {
            sys::cuEventRecord(self.raw(), stream.raw())
        })
    }

    /// Block until the captured work is done (no-op for host events: host work is synchronous).
    pub fn synchronize(&self) -> Result<()> {
        if self.is_host() {
            return Ok(());
        }
        ensure_current(self.device)?;
        // SAFETY: live event handle.
        check("cuEventSynchronize", unsafe {
            sys::cuEventSynchronize(self.raw())
        })
    }

    /// True when the captured work is done (or the event was never recorded, as in CUDA).
    pub fn query(&self) -> Result<bool> {
        if self.is_host() {
            return Ok(true);
        }
        ensure_current(self.device)?;
        // SAFETY: live event handle.
        match unsafe { sys::cuEventQuery(self.raw()) } {
            sys::CUresult::CUDA_SUCCESS => Ok(true),
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            r => Err(cuda_error("cuEventQuery", r)),
        }
    }

    /// Milliseconds from this event to `end`. Both must be recorded, timed, on the same device.
    pub fn elapsed_ms(&self, end: &Event) -> Result<f64> {
        if !self.timing || !end.timing {
            return Err(Error::invalid(
                "elapsed time needs both events created with enable_timing=True",
            ));
        }
        if self.device != end.device {
            return Err(Error::invalid(format!(
                "events are on different devices ({} and {})",
                self.device, end.device
            )));
        }
        if self.is_host() {
            return match (self.host_time(), end.host_time()) {
                (Some(a), Some(b)) => {
                    let ms = if b >= a {
                        b.duration_since(a).as_secs_f64() * 1e3
                    } else {
                        -(a.duration_since(b).as_secs_f64() * 1e3)
                    };
                    Ok(ms)
                }
                _ => Err(Error::invalid(
                    "both events must be recorded before elapsed time is asked",
                )),
            };
        }
        ensure_current(self.device)?;
        let mut ms = 0f32;
        // SAFETY: valid out-pointer and live event handles.
        check("cuEventElapsedTime", unsafe {
            sys::cuEventElapsedTime(&mut ms, self.raw(), end.raw())
        })?;
        Ok(ms as f64)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.handle != 0 {
            // SAFETY: we created this event; no other handle to it exists.
            let r = unsafe { sys::cuEventDestroy_v2(self.raw()) };
            record_if_err(check("cuEventDestroy_v2", r));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_events_time_host_work() {
        let s = Stream::host();
        let a = Event::new(-1, true, false).unwrap();
        let b = Event::new(-1, true, false).unwrap();
        assert!(
            a.elapsed_ms(&b).is_err(),
            "unrecorded events have no elapsed time"
        );
        a.record(&s).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        b.record(&s).unwrap();
        b.synchronize().unwrap();
        assert!(b.query().unwrap());
        let ms = a.elapsed_ms(&b).unwrap();
        assert!((15.0..5000.0).contains(&ms), "{ms}");
        assert!(b.elapsed_ms(&a).unwrap() < 0.0);
        s.wait_event(&a).unwrap();
        let untimed = Event::new(-1, false, false).unwrap();
        untimed.record(&s).unwrap();
        assert!(a.elapsed_ms(&untimed).is_err());
    }

    #[test]
    fn device_event_without_driver_is_an_error() {
        if crate::driver::device_count() == 0 {
            assert!(matches!(
                Event::new(0, true, false),
                Err(Error::NoDriver { .. })
            ));
        }
    }
}
