//! CUDA graphs: the work queued on one stream between `begin_capture` and `end_capture` is
//! recorded instead of run, then replayed with a single launch per step.
//!
//! Capture runs in relaxed mode: other driver calls of the process (module loads of a first
//! Triton compile, allocations on other streams) stay legal while a stream captures. Copies that
//! touch host memory are refused on a capturing stream (`refuse_host_copy`): a graph would replay
//! them from a host or staging buffer that no longer holds those bytes.

use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};

use cudarc::driver::sys;

use crate::context::ensure_current;
use crate::deferred::record_if_err;
use crate::error::{check, Error, Result};
use crate::stream::{Stream, STREAM_LEGACY, STREAM_PER_THREAD};

/// Captures in progress in this process: the host-copy guard asks the driver only when this is
/// non-zero, so copies outside any capture pay one atomic load.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// An instantiated graph (the template and its executable), destroyed on drop.
#[derive(Debug)]
pub struct Graph {
    graph: usize,
    exec: usize,
    device: i32,
}

impl Drop for Graph {
    fn drop(&mut self) {
        // SAFETY: both handles were created by end_capture and are destroyed only here; a launch
        // still in flight keeps its own reference inside the driver.
        unsafe {
            record_if_err(check(
                "cuGraphExecDestroy",
                sys::cuGraphExecDestroy(self.exec as sys::CUgraphExec),
            ));
            record_if_err(check(
                "cuGraphDestroy",
                sys::cuGraphDestroy(self.graph as sys::CUgraph),
            ));
        }
    }
}

impl Graph {
    pub fn device(&self) -> i32 {
        self.device
    }

    /// Replay the captured work on `stream` (any stream of the graph's device).
    pub fn launch(&self, stream: &Stream) -> Result<()> {
        stream.expect_device(self.device, "the graph")?;
        ensure_current(self.device)?;
        // SAFETY: a live executable graph and a live stream of the same context.
        check("cuGraphLaunch", unsafe {
            sys::cuGraphLaunch(self.exec as sys::CUgraphExec, stream.raw())
        })
    }
}

fn capturable(stream: &Stream) -> Result<()> {
    if stream.is_host() {
        return Err(Error::invalid(
            "CUDA graphs need a CUDA stream; this is the host pseudo-stream (no GPU)",
        ));
    }
    if stream.handle() == STREAM_LEGACY || stream.handle() == STREAM_PER_THREAD {
        return Err(Error::invalid(
            "the default stream cannot be captured into a CUDA graph: capture on a created stream",
        ));
    }
    Ok(())
}

/// True when `stream` is capturing (active or invalidated by an illegal call).
pub fn is_capturing(stream: &Stream) -> Result<bool> {
    if stream.is_host() {
        return Ok(false);
    }
    ensure_current(stream.device())?;
    let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: a live stream of the current context and a valid out-pointer.
    check("cuStreamIsCapturing", unsafe {
        sys::cuStreamIsCapturing(stream.raw(), &mut status)
    })?;
    Ok(status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
}

/// Start recording the work queued on `stream` (nothing queued from now on runs until a replay).
pub fn begin_capture(stream: &Stream) -> Result<()> {
    capturable(stream)?;
    ensure_current(stream.device())?;
    // SAFETY: a live stream of the current context.
    check("cuStreamBeginCapture_v2", unsafe {
        sys::cuStreamBeginCapture_v2(
            stream.raw(),
            sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
        )
    })?;
    ACTIVE.fetch_add(1, Ordering::AcqRel);
    Ok(())
}

/// Stop recording and instantiate the graph. The stream leaves capture mode even when this fails
/// (an invalidated capture, an empty one, or an instantiation error); the error names why.
pub fn end_capture(stream: &Stream) -> Result<Graph> {
    capturable(stream)?;
    ensure_current(stream.device())?;
    let mut graph: sys::CUgraph = ptr::null_mut();
    // SAFETY: a live stream of the current context and a valid out-pointer.
    let r = unsafe { sys::cuStreamEndCapture(stream.raw(), &mut graph) };
    if r != sys::CUresult::CUDA_ERROR_ILLEGAL_STATE {
        // ILLEGAL_STATE: the stream was not capturing, so no capture ended.
        let _ = ACTIVE.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }
    if let Err(e) = check("cuStreamEndCapture", r) {
        if !graph.is_null() {
            // SAFETY: the template the failed call still returned; nothing else refers to it.
            record_if_err(check("cuGraphDestroy", unsafe {
                sys::cuGraphDestroy(graph)
            }));
        }
        return Err(e);
    }
    let mut exec: sys::CUgraphExec = ptr::null_mut();
    // SAFETY: a valid template and out-pointer.
    let r = unsafe { sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0) };
    if let Err(e) = check("cuGraphInstantiateWithFlags", r) {
        // SAFETY: the template is ours and no executable refers to it.
        record_if_err(check("cuGraphDestroy", unsafe {
            sys::cuGraphDestroy(graph)
        }));
        return Err(e);
    }
    Ok(Graph {
        graph: graph as usize,
        exec: exec as usize,
        device: stream.device(),
    })
}

/// Fail when `stream` is capturing: `what` (a copy from or to host memory) cannot be replayed.
pub(crate) fn refuse_host_copy(stream: &Stream, what: &str) -> Result<()> {
    if ACTIVE.load(Ordering::Acquire) == 0 || !is_capturing(stream)? {
        return Ok(());
    }
    Err(Error::InvalidState(format!(
        "{what} on a stream that is capturing a CUDA graph: a replay would read or write a host \
         buffer that no longer holds these bytes; write inputs into device arrays before \
         capture or replay, and read results after replay"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_stream_cannot_capture() {
        let s = Stream::host();
        assert!(matches!(begin_capture(&s), Err(Error::InvalidArgument(_))));
        assert!(matches!(end_capture(&s), Err(Error::InvalidArgument(_))));
        assert!(!is_capturing(&s).unwrap());
        refuse_host_copy(&s, "a copy").unwrap();
    }
}
