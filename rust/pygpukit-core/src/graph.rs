//! CUDA graphs: the work queued on one stream between `begin_capture` and `end_capture` is
//! recorded instead of run, then replayed with a single launch per step.
//!
//! Capture runs in relaxed mode: other driver calls of the process (module loads of a first
//! Triton compile, allocations on other streams) stay legal while a stream captures. Copies that
//! touch host memory are refused on a capturing stream (`refuse_host_copy`): a graph would replay
//! them from a host or staging buffer that no longer holds those bytes.
//!
//! Buffers released while any capture is in progress are not freed: the graph being recorded may
//! read them at every replay (an array made before the capture and replaced inside it), and a
//! free recorded into the graph would run at each replay. Their frees are held (`hold_free`) by
//! every capture in progress and run when the last graph holding them is dropped, after that
//! graph's replays have finished.

use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::sys;

use crate::context::ensure_current;
use crate::deferred::record_if_err;
use crate::error::{check, Error, Result};
use crate::pool::PoolShared;
use crate::stream::{Stream, STREAM_LEGACY, STREAM_PER_THREAD};

/// Number of entries in CAPTURES: Buffer::drop asks the registry only when this is non-zero.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
/// The captures begun here and not yet ended: (stream handle, the frees they hold).
static CAPTURES: Mutex<Vec<(usize, Vec<Arc<HeldFree>>)>> = Mutex::new(Vec::new());

fn captures() -> MutexGuard<'static, Vec<(usize, Vec<Arc<HeldFree>>)>> {
    CAPTURES.lock().unwrap_or_else(|p| p.into_inner())
}

/// A pool block released during a capture; freed (on its own stream) when dropped.
pub(crate) struct HeldFree {
    ptr: u64,
    nbytes: usize,
    stream: Stream,
    pool: Arc<PoolShared>,
}

impl Drop for HeldFree {
    fn drop(&mut self) {
        record_if_err(self.pool.release(self.ptr, self.nbytes, &self.stream));
    }
}

/// Hold back the free of a device block while captures are in progress (true: held; the caller
/// must not free it). Each capture in progress keeps a share; the free runs with the last one.
pub(crate) fn hold_free(ptr: u64, nbytes: usize, stream: &Stream, pool: &Arc<PoolShared>) -> bool {
    if ACTIVE.load(Ordering::Acquire) == 0 || stream.is_host() || nbytes == 0 {
        return false;
    }
    let mut caps = captures();
    if caps.is_empty() {
        return false;
    }
    let held = Arc::new(HeldFree {
        ptr,
        nbytes,
        stream: stream.clone(),
        pool: pool.clone(),
    });
    for (_, list) in caps.iter_mut() {
        list.push(held.clone());
    }
    true
}

/// An instantiated graph (the template and its executable), destroyed on drop.
pub struct Graph {
    graph: usize,
    exec: usize,
    device: i32,
    /// Frees held back during its capture, and the streams it was launched on.
    held: Vec<Arc<HeldFree>>,
    replayed: Mutex<Vec<Stream>>,
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Graph(device={}, held frees={})",
            self.device,
            self.held.len()
        )
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        if !self.held.is_empty() {
            // The held blocks may still be read by a replay in flight: wait for the replays
            // (only graphs that held frees pay this host sync, once, when dropped).
            let streams =
                std::mem::take(&mut *self.replayed.lock().unwrap_or_else(|p| p.into_inner()));
            for s in streams {
                record_if_err(s.synchronize());
            }
        }
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
        })?;
        if !self.held.is_empty() {
            let mut seen = self.replayed.lock().unwrap_or_else(|p| p.into_inner());
            if !seen.iter().any(|s| s == stream) {
                seen.push(stream.clone());
            }
        }
        Ok(())
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
    let mut caps = captures();
    caps.push((stream.handle(), Vec::new()));
    ACTIVE.store(caps.len(), Ordering::Release);
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
    // The registry entry goes once the stream no longer captures (whatever the call returned).
    let held = if is_capturing(stream).unwrap_or(false) {
        Vec::new()
    } else {
        let mut caps = captures();
        let i = caps.iter().position(|(h, _)| *h == stream.handle());
        let held = i.map(|i| caps.remove(i).1).unwrap_or_default();
        ACTIVE.store(caps.len(), Ordering::Release);
        held
    };
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
        held,
        replayed: Mutex::new(Vec::new()),
    })
}

/// Fail when `stream` is capturing: `what` (a copy from or to host memory) cannot be replayed.
/// Always asks the driver (a capture begun by another library counts too).
pub(crate) fn refuse_host_copy(stream: &Stream, what: &str) -> Result<()> {
    if !is_capturing(stream)? {
        return Ok(());
    }
    Err(host_copy_in_capture(what))
}

fn host_copy_in_capture(what: &str) -> Error {
    Error::NotCapturable(format!(
        "{what} on a stream that is capturing a CUDA graph: a replay would read or write a host \
         buffer that no longer holds these bytes; write inputs into device arrays before \
         capture or replay, and read results after replay"
    ))
}

/// Fail when `stream` is capturing and any of `ptrs` is not device memory (a 2D copy takes
/// unified addresses, so either side may be a host buffer that a replay would reread or
/// overwrite). Asks the driver for each pointer's memory type only while capturing.
pub(crate) fn refuse_host_pointers(stream: &Stream, ptrs: &[u64], what: &str) -> Result<()> {
    if !is_capturing(stream)? {
        return Ok(());
    }
    if ptrs.iter().all(|&p| is_device_memory(p)) {
        return Ok(());
    }
    Err(host_copy_in_capture(what))
}

/// True when the driver knows `p` as device memory (pageable host memory is unknown to it and
/// fails the query; pinned host memory reports CU_MEMORYTYPE_HOST).
fn is_device_memory(p: u64) -> bool {
    let mut kind: u32 = 0;
    // SAFETY: the attribute is a 32-bit CUmemorytype written into `kind`.
    let r = unsafe {
        sys::cuPointerGetAttribute(
            &mut kind as *mut u32 as *mut std::ffi::c_void,
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            p,
        )
    };
    r == sys::CUresult::CUDA_SUCCESS && kind == sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32
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
