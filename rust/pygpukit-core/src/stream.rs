//! CUDA streams, owned or borrowed, and the host pseudo-stream.
//!
//! A `Stream` is a cheap handle (one Arc). An owned stream is created non-blocking (it does not
//! synchronise with the legacy default stream, so work from other libraries on stream 0 does not
//! serialise ours) and destroyed when the last handle goes, including the handles that buffers
//! keep to the stream they were allocated on. A borrowed stream wraps an external handle (1 =
//! CU_STREAM_LEGACY, 2 = CU_STREAM_PER_THREAD, or another library's stream) and never destroys it.
//! The host pseudo-stream (device -1, handle 0) makes the same API run without a GPU: work on it is
//! synchronous, so synchronize/query are trivial.

use std::fmt;
use std::ptr;
use std::sync::Arc;

use cudarc::driver::sys;

use crate::context::{ensure_current, validate_device};
use crate::deferred::record_if_err;
use crate::error::{check, cuda_error, Error, Result};
use crate::event::Event;
use crate::scheduler::green::GreenPartition;

/// Handle value of CU_STREAM_LEGACY (the legacy default stream).
pub const STREAM_LEGACY: usize = 1;
/// Handle value of CU_STREAM_PER_THREAD (the per-thread default stream).
pub const STREAM_PER_THREAD: usize = 2;

struct StreamInner {
    /// CUstream as an address (raw pointers are not Send/Sync); 0 for the host pseudo-stream.
    handle: usize,
    device: i32,
    priority: i32,
    owned: bool,
    /// The green context the stream was made in (kept alive while the stream is); None for a
    /// stream that may run on every SM.
    partition: Option<Arc<GreenPartition>>,
}

impl Drop for StreamInner {
    fn drop(&mut self) {
        if self.owned && self.partition.is_some() {
            // The green context goes with its last stream, and destroying it does not wait for
            // the work queued on its streams: let that finish first.
            // SAFETY: our live stream.
            let r = unsafe { sys::cuStreamSynchronize(self.handle as sys::CUstream) };
            record_if_err(check("cuStreamSynchronize", r));
        }
        if self.owned {
            // cuStreamDestroy returns at once; pending work (e.g. async frees of buffers that
            // kept this stream alive) still completes before the driver releases the stream.
            // SAFETY: we created this stream and this is the last handle to it.
            let r = unsafe { sys::cuStreamDestroy_v2(self.handle as sys::CUstream) };
            record_if_err(check("cuStreamDestroy_v2", r));
        }
    }
}

#[derive(Clone)]
pub struct Stream {
    inner: Arc<StreamInner>,
}

impl Stream {
    /// The host pseudo-stream (device -1).
    pub fn host() -> Stream {
        Stream {
            inner: Arc::new(StreamInner {
                handle: 0,
                device: -1,
                priority: 0,
                owned: false,
                partition: None,
            }),
        }
    }

    /// A new stream on `device` (-1 gives the host pseudo-stream). `priority` follows CUDA: lower
    /// numbers are higher priority; out-of-range values are clamped by the driver, and the
    /// priority actually given is what `priority()` reports.
    pub fn new(device: i32, priority: i32, non_blocking: bool) -> Result<Stream> {
        validate_device(device)?;
        if device < 0 {
            return Ok(Stream::host());
        }
        ensure_current(device)?;
        let flags = if non_blocking {
            sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32
        } else {
            sys::CUstream_flags::CU_STREAM_DEFAULT as u32
        };
        let mut s: sys::CUstream = ptr::null_mut();
        // SAFETY: valid out-pointer; the device's primary context is current.
        check("cuStreamCreateWithPriority", unsafe {
            sys::cuStreamCreateWithPriority(&mut s, flags, priority)
        })?;
        Self::own(s as usize, device, priority, None)
    }

    /// Take ownership of a created stream handle, then read the priority the driver gave it.
    fn own(
        handle: usize,
        device: i32,
        priority: i32,
        partition: Option<Arc<GreenPartition>>,
    ) -> Result<Stream> {
        // Own it before anything else can fail, so an error below still destroys it.
        let mut stream = Stream {
            inner: Arc::new(StreamInner {
                handle,
                device,
                priority,
                owned: true,
                partition,
            }),
        };
        let actual = query_priority(handle as sys::CUstream)?;
        if let Some(inner) = Arc::get_mut(&mut stream.inner) {
            inner.priority = actual;
        }
        Ok(stream)
    }

    /// A new non-blocking stream whose kernels run only on the SMs of `partition`.
    pub fn in_partition(partition: Arc<GreenPartition>, priority: i32) -> Result<Stream> {
        let handle = partition.create_stream(priority)?;
        let device = partition.device();
        Self::own(handle, device, priority, Some(partition))
    }

    /// A new stream that runs where this one does (the same partition, or the whole device),
    /// at `priority`. For the host pseudo-stream: the host pseudo-stream.
    pub fn sibling(&self, priority: i32) -> Result<Stream> {
        if self.is_host() {
            return Ok(Stream::host());
        }
        match &self.inner.partition {
            Some(p) => Self::in_partition(p.clone(), priority),
            None => Stream::new(self.device(), priority, true),
        }
    }

    /// The SM partition (green context) this stream runs on, None for the whole device.
    pub fn partition(&self) -> Option<&Arc<GreenPartition>> {
        self.inner.partition.as_ref()
    }

    /// Wrap a stream owned by someone else (never destroyed by us). The caller keeps it alive
    /// while we use it. `device` -1 gives the host pseudo-stream (the handle must then be 0).
    pub fn external(handle: usize, device: i32) -> Result<Stream> {
        validate_device(device)?;
        if device < 0 {
            if handle != 0 {
                return Err(Error::invalid(format!(
                    "host streams (device -1) have handle 0, got {handle:#x}"
                )));
            }
            return Ok(Stream::host());
        }
        ensure_current(device)?;
        let priority = query_priority(handle as sys::CUstream)?;
        Ok(Stream {
            inner: Arc::new(StreamInner {
                handle,
                device,
                priority,
                owned: false,
                partition: None,
            }),
        })
    }

    #[inline]
    pub fn handle(&self) -> usize {
        self.inner.handle
    }
    #[inline]
    pub fn raw(&self) -> sys::CUstream {
        self.inner.handle as sys::CUstream
    }
    #[inline]
    pub fn device(&self) -> i32 {
        self.inner.device
    }
    #[inline]
    pub fn is_host(&self) -> bool {
        self.inner.device < 0
    }
    pub fn priority(&self) -> i32 {
        self.inner.priority
    }
    pub fn is_owned(&self) -> bool {
        self.inner.owned
    }

    /// Block until all work queued on the stream is done.
    pub fn synchronize(&self) -> Result<()> {
        if self.is_host() {
            return Ok(());
        }
        ensure_current(self.device())?;
        // SAFETY: a live stream handle of the current context.
        check("cuStreamSynchronize", unsafe {
            sys::cuStreamSynchronize(self.raw())
        })
    }

    /// True when all work queued on the stream is done.
    pub fn query(&self) -> Result<bool> {
        if self.is_host() {
            return Ok(true);
        }
        ensure_current(self.device())?;
        // SAFETY: a live stream handle of the current context.
        match unsafe { sys::cuStreamQuery(self.raw()) } {
            sys::CUresult::CUDA_SUCCESS => Ok(true),
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            r => Err(cuda_error("cuStreamQuery", r)),
        }
    }

    /// Make future work on this stream wait for `event`'s last record. A host stream runs work
    /// synchronously, so waiting there means blocking until a device event completes.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        if self.is_host() {
            return if event.is_host() {
                Ok(())
            } else {
                event.synchronize()
            };
        }
        if event.device() != self.device() {
            return Err(Error::invalid(format!(
                "event is on device {} but the stream is on device {}",
                event.device(),
                self.device()
            )));
        }
        ensure_current(self.device())?;
        // SAFETY: live stream and event handles of the same context.
        check("cuStreamWaitEvent", unsafe {
            sys::cuStreamWaitEvent(self.raw(), event.raw(), 0)
        })
    }

    /// Fail unless the stream belongs to `device`.
    pub fn expect_device(&self, device: i32, what: &str) -> Result<()> {
        if self.device() != device {
            return Err(Error::invalid(format!(
                "{what} is on device {device} but the stream is on device {}",
                self.device()
            )));
        }
        Ok(())
    }
}

fn query_priority(s: sys::CUstream) -> Result<i32> {
    let mut p = 0;
    // SAFETY: valid out-pointer; the stream's context is current.
    check("cuStreamGetPriority", unsafe {
        sys::cuStreamGetPriority(s, &mut p)
    })?;
    Ok(p)
}

/// (least, greatest) stream priority of the device; (0, 0) for the host. Greatest is the most
/// urgent and numerically the smallest.
pub fn priority_range(device: i32) -> Result<(i32, i32)> {
    validate_device(device)?;
    if device < 0 {
        return Ok((0, 0));
    }
    ensure_current(device)?;
    let (mut least, mut greatest) = (0, 0);
    // SAFETY: valid out-pointers; a context is current.
    check("cuCtxGetStreamPriorityRange", unsafe {
        sys::cuCtxGetStreamPriorityRange(&mut least, &mut greatest)
    })?;
    Ok((least, greatest))
}

impl PartialEq for Stream {
    fn eq(&self, other: &Self) -> bool {
        self.handle() == other.handle() && self.device() == other.device()
    }
}
impl Eq for Stream {}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Stream(device={}, handle={:#x}, priority={}, owned={}",
            self.device(),
            self.handle(),
            self.priority(),
            self.is_owned()
        )?;
        match self.partition() {
            Some(p) => write!(f, ", sms={})", p.sm_count()),
            None => f.write_str(")"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_stream_works_without_gpu() {
        let s = Stream::new(-1, 0, true).unwrap();
        assert!(s.is_host() && s.handle() == 0);
        s.synchronize().unwrap();
        assert!(s.query().unwrap());
        assert_eq!(priority_range(-1).unwrap(), (0, 0));
        assert_eq!(s, Stream::host());
        assert!(Stream::external(5, -1).is_err());
        assert!(Stream::new(-2, 0, true).is_err());
    }

    #[test]
    fn device_stream_without_driver_is_an_error() {
        if crate::driver::device_count() == 0 {
            assert!(Stream::new(0, 0, true).is_err());
            assert!(matches!(
                Stream::external(STREAM_LEGACY, 0),
                Err(Error::NoDriver { .. })
            ));
        }
    }
}
