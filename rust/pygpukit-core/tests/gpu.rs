//! Device tests. They are `#[ignore]`d so `cargo test` on a machine without a GPU (CI) does not
//! run them; .ci/gpu/check.sh runs them on the GPU host with `--include-ignored`, where a
//! missing device is a failure, not a pass.

use std::sync::{Mutex, MutexGuard};

use pygpukit_core::copy::{
    copy_dtoh_async, copy_htod_async, memcpy_2d, memcpy_dtod, memcpy_dtoh, memcpy_htod, memset_d32,
    staging_bytes, trim_staging,
};
use pygpukit_core::{
    device_count, mem_get_info, primary_context, Error, Event, MemoryPool, Stream,
};

/// The tests share one device and its pools (the OOM ladder trims every pool of the device):
/// run them one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn gpu() -> Option<MutexGuard<'static, ()>> {
    let guard = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    assert!(device_count() > 0, "device tests need a CUDA device");
    Some(guard)
}

#[test]
#[ignore = "needs a CUDA device; run by .ci/gpu/check.sh"]
fn device_pool_copies_and_stats() {
    let Some(_serial) = gpu() else { return };
    let pool = MemoryPool::new(0, "t", None, true).unwrap();
    let s = Stream::new(0, 0, true).unwrap();
    let n = 1 << 20;
    let a = pool.allocate(n, Some(&s)).unwrap();
    let b = pool.allocate(n, Some(&s)).unwrap();
    let src: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
    let mut out = vec![0u8; n];
    unsafe {
        memcpy_htod(a.ptr(), src.as_ptr(), n, &s).unwrap();
        memcpy_dtod(b.ptr(), a.ptr(), n, &s).unwrap();
        memcpy_dtoh(out.as_mut_ptr(), b.ptr(), n, &s).unwrap();
    }
    assert_eq!(out, src);
    unsafe {
        memset_d32(a.ptr(), 0x01020304, n / 4, &s).unwrap();
        memcpy_2d(out.as_mut_ptr() as u64, 8, a.ptr(), 16, 8, 4, &s).unwrap();
    }
    s.synchronize().unwrap();
    assert!(out[..32].chunks(4).all(|c| c == [4, 3, 2, 1]));
    let st = pool.stats().unwrap();
    assert_eq!(st.current_bytes, 2 * n as u64);
    assert!(
        st.reserved_bytes >= st.used_bytes && st.used_bytes >= 2 * n as u64,
        "{st}"
    );
    drop((a, b));
    s.synchronize().unwrap();
    let st = pool.stats().unwrap();
    assert_eq!((st.current_bytes, st.used_bytes), (0, 0), "{st}");
    assert!(
        st.reserved_bytes > 0,
        "release threshold max keeps freed memory cached: {st}"
    );
    pool.trim(0).unwrap();
    assert_eq!(pool.stats().unwrap().reserved_bytes, 0);
    assert!(pygpukit_core::take_deferred_errors().is_empty());
}

#[test]
#[ignore = "needs a CUDA device; run by .ci/gpu/check.sh"]
fn staged_async_copies_reuse_blocks_safely() {
    let Some(_serial) = gpu() else { return };
    let pool = MemoryPool::new(0, "staging", None, true).unwrap();
    let s = Stream::new(0, 0, true).unwrap();
    let n = 3 << 20;
    let dst: Vec<_> = (0..8)
        .map(|_| pool.allocate(n, Some(&s)).unwrap())
        .collect();
    let mut src = vec![0u8; n];
    for (k, d) in dst.iter().enumerate() {
        src.fill(k as u8 + 1);
        // The source is overwritten right after each call: the staging copy must have taken it.
        unsafe { copy_htod_async(d.ptr(), src.as_ptr(), n, &s).unwrap() };
    }
    let pending: Vec<_> = dst
        .iter()
        .map(|d| unsafe { copy_dtoh_async(d.ptr(), n, &s).unwrap() })
        .collect();
    let mut out = vec![0u8; n];
    for (k, p) in pending.iter().enumerate() {
        unsafe { p.wait_into(out.as_mut_ptr()).unwrap() };
        assert!(p.ready().unwrap());
        assert!(out.iter().all(|&x| x == k as u8 + 1), "block {k}");
    }
    drop(pending);
    assert!(staging_bytes() > 0);
    assert!(trim_staging() > 0);
    assert_eq!(staging_bytes(), 0);
}

#[test]
#[ignore = "needs a CUDA device; run by .ci/gpu/check.sh"]
fn oom_ladder_reclaims_another_pools_cache() {
    let Some(_serial) = gpu() else { return };
    let (free, total) = mem_get_info(0).unwrap();
    let big = (free as f64 * 0.6) as usize;
    let a = MemoryPool::new(0, "a", None, true).unwrap();
    let b = MemoryPool::new(0, "b", None, true).unwrap();
    let s = Stream::new(0, 0, true).unwrap();
    // Pool a keeps 60% of the free memory cached after its buffer is freed (asynchronously).
    drop(a.allocate(big, Some(&s)).unwrap());
    // Pool b needs it: first try fails, the ladder trims a's cache (after a sync), retry works.
    let got = b.allocate(big, Some(&s)).unwrap();
    let st = b.stats().unwrap();
    assert_eq!(
        (st.num_retries, st.num_ooms, st.num_allocs),
        (1, 0, 1),
        "{st}"
    );
    drop(got);
    b.trim(0).unwrap();
    // Beyond the device: OutOfMemory with the device numbers.
    match b.allocate(total as usize + (1 << 30), Some(&s)) {
        Err(Error::OutOfMemory {
            device_free,
            device_total,
            stats,
            ..
        }) => {
            assert_eq!(stats.num_ooms, 1);
            // The failed request's gathered memory went back to the device.
            assert!(
                device_free.unwrap() > device_total.unwrap() / 2,
                "{device_free:?}"
            );
            assert_eq!(b.stats().unwrap().reserved_bytes, 0);
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
}

#[test]
#[ignore = "needs a CUDA device; run by .ci/gpu/check.sh"]
fn events_streams_and_threads() {
    let Some(_serial) = gpu() else { return };
    let s = Stream::new(0, 0, true).unwrap();
    let pool = MemoryPool::new(0, "ev", None, true).unwrap();
    let buf = pool.allocate(64 << 20, Some(&s)).unwrap();
    let (e0, e1) = (
        Event::new(0, true, false).unwrap(),
        Event::new(0, true, true).unwrap(),
    );
    e0.record(&s).unwrap();
    unsafe { memset_d32(buf.ptr(), 5, (64 << 20) / 4, &s).unwrap() };
    e1.record(&s).unwrap();
    e1.synchronize().unwrap();
    assert!(e1.query().unwrap() && s.query().unwrap());
    assert!(e0.elapsed_ms(&e1).unwrap() > 0.0);
    let other = Stream::new(0, 0, true).unwrap();
    other.wait_event(&e1).unwrap();
    let legacy = Stream::external(1, 0).unwrap();
    legacy.synchronize().unwrap();
    // A buffer keeps its stream alive after every other handle is gone.
    let s2 = Stream::new(0, 0, true).unwrap();
    let b2 = pool.allocate(1024, Some(&s2)).unwrap();
    drop(s2);
    drop(b2);
    // Fresh threads have no current context; entry points make the primary one current.
    let ctx = primary_context(0).unwrap() as usize;
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let pool = pool.clone();
            std::thread::spawn(move || {
                for i in 0..200 {
                    drop(pool.allocate(4096 + i, None).unwrap());
                }
                primary_context(0).unwrap() as usize
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), ctx);
    }
    pool.default_stream().unwrap().synchronize().unwrap();
    assert_eq!(pool.stats().unwrap().current_bytes, 64 << 20);
    assert!(pygpukit_core::take_deferred_errors().is_empty());
}

#[test]
#[ignore = "needs a CUDA device; run by .ci/gpu/check.sh"]
fn graph_capture_replays_and_refuses_host_copies() {
    use pygpukit_core::graph::{begin_capture, end_capture, is_capturing};
    let Some(_serial) = gpu() else { return };
    let pool = MemoryPool::new(0, "graph", None, true).unwrap();
    let s = Stream::new(0, 0, true).unwrap();
    let n = 1 << 16;
    let a = pool.allocate(4 * n, Some(&s)).unwrap();
    let b = pool.allocate(4 * n, Some(&s)).unwrap();
    let mut out = vec![0u32; n];
    unsafe { memset_d32(a.ptr(), 0, n, &s).unwrap() };
    begin_capture(&s).unwrap();
    assert!(is_capturing(&s).unwrap());
    unsafe {
        memset_d32(a.ptr(), 7, n, &s).unwrap();
        memcpy_dtod(b.ptr(), a.ptr(), 4 * n, &s).unwrap();
        // A host copy would be replayed from a buffer that no longer holds these bytes.
        let err = memcpy_dtoh(out.as_mut_ptr() as *mut u8, b.ptr(), 4 * n, &s).unwrap_err();
        assert!(err.to_string().contains("capturing a CUDA graph"), "{err}");
        assert!(copy_htod_async(a.ptr(), out.as_ptr() as *const u8, 4, &s).is_err());
        // 2D copies take unified addresses: a host side is refused, device to device is not.
        let host = out.as_mut_ptr() as u64;
        let err = memcpy_2d(host, 8, b.ptr(), 16, 8, 4, &s).unwrap_err();
        assert!(err.to_string().contains("2D copy from or to host"), "{err}");
        assert!(memcpy_2d(a.ptr(), 16, host, 8, 8, 4, &s).is_err());
        memcpy_2d(b.ptr(), 16, a.ptr(), 16, 8, 4, &s).unwrap();
    }
    let g = end_capture(&s).unwrap();
    assert!(!is_capturing(&s).unwrap());
    unsafe { memcpy_dtoh(out.as_mut_ptr() as *mut u8, a.ptr(), 4 * n, &s).unwrap() };
    assert!(
        out.iter().all(|&x| x == 0),
        "captured work must not run at capture"
    );
    let other = Stream::new(0, 0, true).unwrap();
    g.launch(&other).unwrap();
    other.synchronize().unwrap();
    unsafe { memcpy_dtoh(out.as_mut_ptr() as *mut u8, b.ptr(), 4 * n, &s).unwrap() };
    assert!(out.iter().all(|&x| x == 7));
    // A block released while a capture is in progress (here one allocated before it, written
    // by the captured work) is not freed until the graph that may read it is dropped.
    let c = pool.allocate(4 * n, Some(&s)).unwrap();
    begin_capture(&s).unwrap();
    unsafe { memset_d32(c.ptr(), 9, n, &s).unwrap() };
    let c_ptr = c.ptr();
    drop(c);
    let held = pool.stats().unwrap();
    assert_eq!(
        held.current_bytes,
        12 * n as u64,
        "the free is held: {held}"
    );
    let g2 = end_capture(&s).unwrap();
    for _ in 0..2 {
        g2.launch(&s).unwrap(); // would double-free if the free had been recorded
    }
    s.synchronize().unwrap();
    unsafe { memcpy_dtoh(out.as_mut_ptr() as *mut u8, c_ptr, 4 * n, &s).unwrap() };
    assert!(out.iter().all(|&x| x == 9));
    drop(g2);
    assert_eq!(pool.stats().unwrap().current_bytes, 8 * n as u64);
    // Ending a capture that never began fails and leaves the stream usable.
    assert!(end_capture(&s).is_err());
    let legacy = Stream::external(1, 0).unwrap();
    assert!(matches!(
        begin_capture(&legacy),
        Err(Error::InvalidArgument(_))
    ));
    drop(g);
    drop((a, b));
    s.synchronize().unwrap();
    assert!(pygpukit_core::take_deferred_errors().is_empty());
}
