//! Copies and memsets, ordered on a stream.
//!
//! Addresses are raw (u64 device addresses, host pointers); the caller guarantees they are valid
//! for the given sizes while the call runs (and, for the async device forms, until the stream
//! reaches the copy). On the host pseudo-stream (device -1) every "device" address is a host
//! address and the operation runs synchronously on the CPU, so the same code works without a GPU.

use std::ptr;

use cudarc::driver::sys;

use crate::context::ensure_current;
use crate::error::{check, Error, Result};
use crate::graph;
use crate::staging::{self, Block};
use crate::stream::Stream;

pub use crate::staging::{staging_bytes, trim_staging};

fn need_nonnull(nbytes: usize, ptrs: &[(&str, u64)]) -> Result<()> {
    if nbytes > 0 {
        for (name, p) in ptrs {
            if *p == 0 {
                return Err(Error::invalid(format!(
                    "{name} is a null pointer but {nbytes} bytes were asked for"
                )));
            }
        }
    }
    Ok(())
}

/// Host memory -> device memory on `stream`. The source is pageable: the driver stages it before
/// returning, so the caller may reuse it as soon as this returns.
///
/// # Safety
/// `src` is readable and `dst` writable for `nbytes` bytes.
pub unsafe fn memcpy_htod(dst: u64, src: *const u8, nbytes: usize, stream: &Stream) -> Result<()> {
    need_nonnull(nbytes, &[("dst", dst), ("src_host", src as u64)])?;
    if nbytes == 0 {
        return Ok(());
    }
    if stream.is_host() {
        ptr::copy(src, dst as *mut u8, nbytes);
        return Ok(());
    }
    graph::refuse_host_copy(stream, "a host-to-device copy")?;
    ensure_current(stream.device())?;
    check(
        "cuMemcpyHtoDAsync_v2",
        sys::cuMemcpyHtoDAsync_v2(dst, src as *const _, nbytes, stream.raw()),
    )
}

/// Device memory -> host memory; returns when the bytes are in `dst` (waits for `stream`).
///
/// # Safety
/// `src` is readable and `dst` writable for `nbytes` bytes.
pub unsafe fn memcpy_dtoh(dst: *mut u8, src: u64, nbytes: usize, stream: &Stream) -> Result<()> {
    need_nonnull(nbytes, &[("dst_host", dst as u64), ("src", src)])?;
    if nbytes == 0 {
        return Ok(());
    }
    if stream.is_host() {
        ptr::copy(src as *const u8, dst, nbytes);
        return Ok(());
    }
    graph::refuse_host_copy(stream, "a device-to-host copy")?;
    ensure_current(stream.device())?;
    check(
        "cuMemcpyDtoHAsync_v2",
        sys::cuMemcpyDtoHAsync_v2(dst as *mut _, src, nbytes, stream.raw()),
    )?;
    stream.synchronize()
}

/// Device -> device, asynchronous on `stream`.
///
/// # Safety
/// `src` is readable and `dst` writable for `nbytes` bytes when the stream reaches the copy.
pub unsafe fn memcpy_dtod(dst: u64, src: u64, nbytes: usize, stream: &Stream) -> Result<()> {
    need_nonnull(nbytes, &[("dst", dst), ("src", src)])?;
    if nbytes == 0 {
        return Ok(());
    }
    if stream.is_host() {
        ptr::copy(src as *const u8, dst as *mut u8, nbytes);
        return Ok(());
    }
    ensure_current(stream.device())?;
    check(
        "cuMemcpyDtoDAsync_v2",
        sys::cuMemcpyDtoDAsync_v2(dst, src, nbytes, stream.raw()),
    )
}

/// A strided 2D copy: `height` rows of `width_bytes`, rows `src_pitch`/`dst_pitch` bytes apart.
/// Both sides are given as unified addresses (CU_MEMORYTYPE_UNIFIED), so any direction works
/// (host or device on either side) on a unified-addressing system (every 64-bit CUDA platform).
///
/// # Safety
/// Both regions are valid for `height` rows of their pitch.
pub unsafe fn memcpy_2d(
    dst: u64,
    dst_pitch: usize,
    src: u64,
    src_pitch: usize,
    width_bytes: usize,
    height: usize,
    stream: &Stream,
) -> Result<()> {
    if width_bytes > dst_pitch || width_bytes > src_pitch {
        return Err(Error::invalid(format!(
            "width_bytes ({width_bytes}) must not exceed dst_pitch ({dst_pitch}) or src_pitch \
             ({src_pitch})"
        )));
    }
    let total = width_bytes
        .checked_mul(height)
        .ok_or_else(|| Error::invalid("width_bytes * height overflows"))?;
    need_nonnull(total, &[("dst", dst), ("src", src)])?;
    if total == 0 {
        return Ok(());
    }
    if stream.is_host() {
        for row in 0..height {
            ptr::copy(
                (src as *const u8).add(row * src_pitch),
                (dst as *mut u8).add(row * dst_pitch),
                width_bytes,
            );
        }
        return Ok(());
    }
    ensure_current(stream.device())?;
    graph::refuse_host_pointers(stream, &[dst, src], "a 2D copy from or to host memory")?;
    let p = sys::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED,
        srcHost: ptr::null(),
        srcDevice: src,
        srcArray: ptr::null_mut(),
        srcPitch: src_pitch,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED,
        dstHost: ptr::null_mut(),
        dstDevice: dst,
        dstArray: ptr::null_mut(),
        dstPitch: dst_pitch,
        WidthInBytes: width_bytes,
        Height: height,
    };
    check(
        "cuMemcpy2DAsync_v2",
        sys::cuMemcpy2DAsync_v2(&p, stream.raw()),
    )
}

fn check_align(dst: u64, align: u64, what: &str) -> Result<()> {
    if dst % align != 0 {
        return Err(Error::invalid(format!(
            "{what} needs dst aligned to {align} bytes, got {dst:#x}"
        )));
    }
    Ok(())
}

/// Set `count` bytes at `dst` to `value`, asynchronously on `stream`.
///
/// # Safety
/// `dst` is writable for `count` bytes.
pub unsafe fn memset_d8(dst: u64, value: u8, count: usize, stream: &Stream) -> Result<()> {
    need_nonnull(count, &[("dst", dst)])?;
    if count == 0 {
        return Ok(());
    }
    if stream.is_host() {
        ptr::write_bytes(dst as *mut u8, value, count);
        return Ok(());
    }
    ensure_current(stream.device())?;
    check(
        "cuMemsetD8Async",
        sys::cuMemsetD8Async(dst, value, count, stream.raw()),
    )
}

/// Set `count` 16-bit words at `dst` (2-byte aligned) to `value`.
///
/// # Safety
/// `dst` is writable for `2 * count` bytes.
pub unsafe fn memset_d16(dst: u64, value: u16, count: usize, stream: &Stream) -> Result<()> {
    need_nonnull(count, &[("dst", dst)])?;
    if count == 0 {
        return Ok(());
    }
    check_align(dst, 2, "memset_d16")?;
    if stream.is_host() {
        std::slice::from_raw_parts_mut(dst as *mut u16, count).fill(value);
        return Ok(());
    }
    ensure_current(stream.device())?;
    check(
        "cuMemsetD16Async",
        sys::cuMemsetD16Async(dst, value, count, stream.raw()),
    )
}

/// Set `count` 32-bit words at `dst` (4-byte aligned) to `value`.
///
/// # Safety
/// `dst` is writable for `4 * count` bytes.
pub unsafe fn memset_d32(dst: u64, value: u32, count: usize, stream: &Stream) -> Result<()> {
    need_nonnull(count, &[("dst", dst)])?;
    if count == 0 {
        return Ok(());
    }
    check_align(dst, 4, "memset_d32")?;
    if stream.is_host() {
        std::slice::from_raw_parts_mut(dst as *mut u32, count).fill(value);
        return Ok(());
    }
    ensure_current(stream.device())?;
    check(
        "cuMemsetD32Async",
        sys::cuMemsetD32Async(dst, value, count, stream.raw()),
    )
}

/// Host -> device without waiting: the bytes are copied into a pinned staging block, the DMA is
/// queued on `stream`, and the call returns. `src` may be reused as soon as this returns.
///
/// # Safety
/// `src` is readable for `nbytes`; `dst` is writable for `nbytes` when the stream reaches it.
pub unsafe fn copy_htod_async(
    dst: u64,
    src: *const u8,
    nbytes: usize,
    stream: &Stream,
) -> Result<()> {
    if stream.is_host() {
        return memcpy_htod(dst, src, nbytes, stream);
    }
    need_nonnull(nbytes, &[("dst", dst), ("src_host", src as u64)])?;
    if nbytes == 0 {
        return Ok(());
    }
    graph::refuse_host_copy(stream, "a host-to-device copy")?;
    let block = staging::acquire(stream.device(), nbytes)?;
    ptr::copy_nonoverlapping(src, block.ptr(), nbytes);
    let r = issue(&block, stream, |s| {
        check(
            "cuMemcpyHtoDAsync_v2",
            sys::cuMemcpyHtoDAsync_v2(dst, block.ptr() as *const _, nbytes, s),
        )
    });
    staging::release(block);
    r
}

/// Queue `op` on the stream, then record the block's event after it. If the event cannot be
/// recorded, wait for the stream so the block is not reused under a DMA in flight.
unsafe fn issue(
    block: &Block,
    stream: &Stream,
    op: impl FnOnce(sys::CUstream) -> Result<()>,
) -> Result<()> {
    ensure_current(stream.device())?;
    op(stream.raw())?;
    let rec = check(
        "cuEventRecord",
        sys::cuEventRecord(block.event(), stream.raw()),
    );
    if rec.is_err() {
        let _ = stream.synchronize();
    }
    rec
}

enum Pending {
    Device(Block),
    /// Host pseudo-stream: the copy already happened.
    Host(Vec<u8>),
}

/// A device -> host copy in flight into a pinned staging block.
pub struct PendingHostCopy {
    pending: Option<Pending>,
    nbytes: usize,
}

impl PendingHostCopy {
    pub fn nbytes(&self) -> usize {
        self.nbytes
    }

    /// True once the bytes have arrived.
    pub fn ready(&self) -> Result<bool> {
        match &self.pending {
            Some(Pending::Device(b)) => b.idle(),
            _ => Ok(true),
        }
    }

    /// Wait for the copy, then copy the bytes into `dst`. May be called more than once.
    ///
    /// # Safety
    /// `dst` is writable for `nbytes()` bytes.
    pub unsafe fn wait_into(&self, dst: *mut u8) -> Result<()> {
        need_nonnull(self.nbytes, &[("dst_host", dst as u64)])?;
        match &self.pending {
            Some(Pending::Device(b)) => {
                b.wait()?;
                ptr::copy_nonoverlapping(b.ptr(), dst, self.nbytes);
            }
            Some(Pending::Host(v)) => ptr::copy_nonoverlapping(v.as_ptr(), dst, self.nbytes),
            None => {}
        }
        Ok(())
    }
}

impl Drop for PendingHostCopy {
    fn drop(&mut self) {
        // The block goes back busy or not: its event keeps it from reuse until the DMA is done.
        if let Some(Pending::Device(b)) = self.pending.take() {
            staging::release(b);
        }
    }
}

/// Device -> host without waiting: queue a DMA into a pinned staging block and return a handle
/// to wait on (`ready`, `wait_into`).
///
/// # Safety
/// `src` is readable for `nbytes` when the stream reaches the copy.
pub unsafe fn copy_dtoh_async(src: u64, nbytes: usize, stream: &Stream) -> Result<PendingHostCopy> {
    need_nonnull(nbytes, &[("src", src)])?;
    if nbytes == 0 {
        return Ok(PendingHostCopy {
            pending: None,
            nbytes,
        });
    }
    if stream.is_host() {
        let v = std::slice::from_raw_parts(src as *const u8, nbytes).to_vec();
        return Ok(PendingHostCopy {
            pending: Some(Pending::Host(v)),
            nbytes,
        });
    }
    graph::refuse_host_copy(stream, "a device-to-host copy")?;
    let block = staging::acquire(stream.device(), nbytes)?;
    let r = issue(&block, stream, |s| {
        check(
            "cuMemcpyDtoHAsync_v2",
            sys::cuMemcpyDtoHAsync_v2(block.ptr() as *mut _, src, nbytes, s),
        )
    });
    match r {
        Ok(()) => Ok(PendingHostCopy {
            pending: Some(Pending::Device(block)),
            nbytes,
        }),
        Err(e) => {
            staging::release(block);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_stream_copies_and_memsets() {
        let s = Stream::host();
        let src: Vec<u8> = (0..64u8).collect();
        let mut a = vec![0u8; 64];
        let mut b = vec![0u8; 64];
        unsafe {
            memcpy_htod(a.as_mut_ptr() as u64, src.as_ptr(), 64, &s).unwrap();
            assert_eq!(a, src);
            memcpy_dtod(b.as_mut_ptr() as u64, a.as_ptr() as u64, 32, &s).unwrap();
            assert_eq!(&b[..32], &src[..32]);
            let mut out = vec![0u8; 64];
            memcpy_dtoh(out.as_mut_ptr(), a.as_ptr() as u64, 64, &s).unwrap();
            assert_eq!(out, src);
            // 2D: 4 rows of 3 bytes from pitch 8 into pitch 4.
            let mut d2 = vec![0xffu8; 16];
            memcpy_2d(d2.as_mut_ptr() as u64, 4, src.as_ptr() as u64, 8, 3, 4, &s).unwrap();
            assert_eq!(
                d2,
                [0, 1, 2, 255, 8, 9, 10, 255, 16, 17, 18, 255, 24, 25, 26, 255]
            );
            assert!(memcpy_2d(d2.as_mut_ptr() as u64, 2, 1, 8, 3, 4, &s).is_err());
            let mut w = vec![0u32; 8];
            memset_d32(w.as_mut_ptr() as u64, 0xdeadbeef, 8, &s).unwrap();
            assert!(w.iter().all(|&x| x == 0xdeadbeef));
            memset_d16(w.as_mut_ptr() as u64, 0x1234, 2, &s).unwrap();
            assert_eq!(w[0], 0x12341234);
            assert!(memset_d32(w.as_mut_ptr() as u64 + 2, 0, 1, &s).is_err());
            memset_d8(b.as_mut_ptr() as u64, 7, 64, &s).unwrap();
            assert!(b.iter().all(|&x| x == 7));
            assert!(memcpy_htod(0, src.as_ptr(), 1, &s).is_err());
            memcpy_htod(0, ptr::null(), 0, &s).unwrap();
            copy_htod_async(b.as_mut_ptr() as u64, src.as_ptr(), 64, &s).unwrap();
            assert_eq!(b, src);
            let p = copy_dtoh_async(a.as_ptr() as u64, 64, &s).unwrap();
            a[0] = 99; // the pending copy already holds the bytes
            assert!(p.ready().unwrap());
            let mut out2 = vec![0u8; 64];
            p.wait_into(out2.as_mut_ptr()).unwrap();
            assert_eq!(out2, src);
        }
    }
}
