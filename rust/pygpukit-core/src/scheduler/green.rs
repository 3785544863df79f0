//! SM partitions through CUDA green contexts (driver 12.4+): split the device's SM resource by
//! count, make a green context of each group, and create streams in it. Kernels launched on such
//! a stream run only on the group's SMs; memory, modules and events stay those of the primary
//! context, so pointers and kernels pass freely between partitions.
//!
//! The device is split once into groups of the partition granularity; a partition is a green
//! context over some free groups, the shared partition one over every free group.
//! The entry points are optional: they are looked up at run time, and where any is missing (or
//! the driver is older than 12.4, or the device refuses) `SmPartitions::probe` returns the reason
//! and the scheduler runs every context on the whole device.

use std::mem::MaybeUninit;
use std::ptr;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys;

use super::ledger::SmSpace;
use crate::context::ensure_current;
use crate::deferred::record_if_err;
use crate::device::device_properties;
use crate::driver::{device_handle, driver_version, missing_symbol};
use crate::error::{check, Error, Result};
use crate::stream::Stream;

/// The driver entry points green contexts need (checked before the first call; see
/// driver::OPTIONAL_SYMBOLS).
pub const GREEN_SYMBOLS: &[&str] = &[
    "cuDeviceGetDevResource",
    "cuDevSmResourceSplitByCount",
    "cuDevResourceGenerateDesc",
    "cuGreenCtxCreate",
    "cuGreenCtxDestroy",
    "cuGreenCtxStreamCreate",
];

/// One green context: the SMs it runs on, alive while any stream made in it is.
pub struct GreenPartition {
    /// CUgreenCtx as an address (raw pointers are not Send/Sync).
    handle: usize,
    device: i32,
    sm_count: u32,
}

impl GreenPartition {
    pub fn sm_count(&self) -> u32 {
        self.sm_count
    }
    pub fn device(&self) -> i32 {
        self.device
    }
    /// The green context's address: equal for streams of the same partition.
    pub fn id(&self) -> usize {
        self.handle
    }

    /// A non-blocking stream whose kernels run on this partition's SMs.
    pub(crate) fn create_stream(&self, priority: i32) -> Result<usize> {
        ensure_current(self.device)?;
        let mut s: sys::CUstream = ptr::null_mut();
        // SAFETY: valid out-pointer and a live green context; NON_BLOCKING is required.
        check("cuGreenCtxStreamCreate", unsafe {
            sys::cuGreenCtxStreamCreate(
                &mut s,
                self.handle as sys::CUgreenCtx,
                sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
                priority,
            )
        })?;
        Ok(s as usize)
    }
}

impl Drop for GreenPartition {
    fn drop(&mut self) {
        // Runs after the last stream made in it was destroyed (streams hold an Arc to it).
        // SAFETY: we created it; no other handle exists.
        let r = unsafe { sys::cuGreenCtxDestroy(self.handle as sys::CUgreenCtx) };
        record_if_err(check("cuGreenCtxDestroy", r));
    }
}

impl std::fmt::Debug for GreenPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GreenPartition(device={}, sms={})",
            self.device, self.sm_count
        )
    }
}

/// A CUdevResource (plain data the driver reads and writes by value, no pointers).
#[derive(Clone, Copy)]
pub struct Resource(sys::CUdevResource);
// SAFETY: a plain-data struct the driver reads and writes by value.
unsafe impl Send for Resource {}

fn sm_count_of(r: &sys::CUdevResource) -> u32 {
    // SAFETY: an SM-type resource filled by the driver: `sm` is the active union field.
    unsafe { r.__bindgen_anon_1.sm.smCount }
}

/// The device's SMs as green contexts split them: one split of the whole device into groups of
/// the partition granularity (plus the few SMs left over), made once. A partition is a green
/// context over some free groups (a descriptor of several resources of that one split); the
/// shared partition is one over every free group and the leftover SMs. Groups go back to the
/// free list when their context is closed.
pub struct SmPartitions {
    device: i32,
    space: SmSpace,
    groups: Vec<Resource>,
    leftover: Option<Resource>,
    /// Per group: held by a partition.
    held: Mutex<Vec<bool>>,
}

impl SmPartitions {
    /// The device's SM groups, or why SM partitions are unavailable.
    pub fn probe(device: i32) -> std::result::Result<SmPartitions, String> {
        if device < 0 {
            return Err("the CPU device has no SMs to partition".into());
        }
        let version = driver_version().map_err(|e| e.to_string())?;
        if version < 12040 {
            return Err(format!(
                "green contexts need a CUDA 12.4 driver or newer; this one is {}.{}",
                version / 1000,
                (version % 1000) / 10
            ));
        }
        if let Some(name) = missing_symbol(GREEN_SYMBOLS) {
            return Err(format!("libcuda lacks {name}: no green contexts"));
        }
        let props = device_properties(device).map_err(|e| e.to_string())?;
        // Partition sizes the driver accepts (cuDevSmResourceSplitByCount): multiples of 8 on
        // compute capability 9.0 and newer, 4 on 8.x, 2 on 7.x.
        let granularity = match props.major {
            m if m >= 9 => 8,
            8 => 4,
            7 => 2,
            _ => {
                return Err(format!(
                    "compute capability {}.{}: no green contexts",
                    props.major, props.minor
                ))
            }
        };
        let whole = Self::device_resource(device).map_err(|e| e.to_string())?;
        let total = sm_count_of(&whole.0);
        if total < granularity {
            return Err(format!("the device reports {total} SMs to partition"));
        }
        let (groups, leftover) =
            Self::split(&whole, total / granularity, granularity).map_err(|e| e.to_string())?;
        if groups.is_empty() {
            return Err("the driver split the device into no SM groups".into());
        }
        if groups.len() >= 2 {
            // Partitions are descriptors of several groups of one split; a driver that takes
            // only one resource per descriptor cannot give them.
            let mut two = [groups[0].0, groups[1].0];
            let mut desc: sys::CUdevResourceDesc = ptr::null_mut();
            // SAFETY: two valid SM resources of one split.
            check("cuDevResourceGenerateDesc", unsafe {
                sys::cuDevResourceGenerateDesc(&mut desc, two.as_mut_ptr(), 2)
            })
            .map_err(|e| format!("the driver cannot combine SM groups: {e}"))?;
        }
        let n = groups.len();
        Ok(SmPartitions {
            device,
            space: SmSpace {
                total: n as u32 * granularity + leftover.as_ref().map_or(0, |r| sm_count_of(&r.0)),
                granularity,
                carvable: n as u32 * granularity,
            },
            groups,
            leftover,
            held: Mutex::new(vec![false; n]),
        })
    }

    /// Split `whole` into up to `n` groups of `count` SMs; (groups, the SMs left over if any).
    fn split(whole: &Resource, n: u32, count: u32) -> Result<(Vec<Resource>, Option<Resource>)> {
        let mut out: Vec<sys::CUdevResource> = (0..n)
            // SAFETY: an all-zero CUdevResource is a valid (invalid-type) value to overwrite.
            .map(|_| unsafe { MaybeUninit::<sys::CUdevResource>::zeroed().assume_init() })
            .collect();
        let mut left = MaybeUninit::<sys::CUdevResource>::zeroed();
        let mut groups = n;
        // SAFETY: `out` holds n resources; the driver writes at most n groups and the rest.
        check("cuDevSmResourceSplitByCount", unsafe {
            sys::cuDevSmResourceSplitByCount(
                out.as_mut_ptr(),
                &mut groups,
                &whole.0,
                left.as_mut_ptr(),
                0,
                count,
            )
        })?;
        out.truncate(groups as usize);
        // SAFETY: written by the driver above.
        let left = unsafe { left.assume_init() };
        let left = (sm_count_of(&left) > 0).then_some(Resource(left));
        Ok((out.into_iter().map(Resource).collect(), left))
    }

    fn device_resource(device: i32) -> Result<Resource> {
        let dev = device_handle(device)?;
        ensure_current(device)?;
        let mut r = MaybeUninit::<sys::CUdevResource>::zeroed();
        // SAFETY: valid out-pointer to a zeroed resource; SM is a valid type.
        check("cuDeviceGetDevResource", unsafe {
            sys::cuDeviceGetDevResource(
                dev,
                r.as_mut_ptr(),
                sys::CUdevResourceType::CU_DEV_RESOURCE_TYPE_SM,
            )
        })?;
        // SAFETY: written by the driver above.
        Ok(Resource(unsafe { r.assume_init() }))
    }

    pub fn space(&self) -> SmSpace {
        self.space
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<bool>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A partition of exactly `count` SMs (a multiple of the granularity) from the free groups,
    /// lowest first; returns it and the groups it holds (give them back with `release`).
    pub fn carve(&self, count: u32) -> Result<(Arc<GreenPartition>, Vec<usize>)> {
        let k = (count / self.space.granularity) as usize;
        let mut held = self.lock();
        let free: Vec<usize> = (0..held.len()).filter(|&i| !held[i]).take(k).collect();
        if free.len() < k || k == 0 {
            return Err(Error::invalid(format!(
                "{count} SMs asked, {} free groups of {} SMs",
                (0..held.len()).filter(|&i| !held[i]).count(),
                self.space.granularity
            )));
        }
        let res: Vec<sys::CUdevResource> = free.iter().map(|&i| self.groups[i].0).collect();
        let part = self.green_context(res)?;
        for &i in &free {
            held[i] = true;
        }
        Ok((part, free))
    }

    /// Give a closed partition's groups back.
    pub fn release(&self, groups: &[usize]) {
        let mut held = self.lock();
        for &i in groups {
            held[i] = false;
        }
    }

    /// A green context over every SM no partition holds.
    pub fn shared(&self) -> Result<Arc<GreenPartition>> {
        let held = self.lock();
        let mut res: Vec<sys::CUdevResource> = (0..held.len())
            .filter(|&i| !held[i])
            .map(|i| self.groups[i].0)
            .collect();
        if let Some(l) = &self.leftover {
            res.push(l.0);
        }
        if res.is_empty() {
            return Err(Error::invalid("every SM is held by a partition"));
        }
        self.green_context(res)
    }

    /// A green context over `res` (resources of this one split).
    fn green_context(&self, mut res: Vec<sys::CUdevResource>) -> Result<Arc<GreenPartition>> {
        let dev = device_handle(self.device)?;
        ensure_current(self.device)?;
        let sms = res.iter().map(sm_count_of).sum();
        let mut desc: sys::CUdevResourceDesc = ptr::null_mut();
        // SAFETY: res holds res.len() valid SM resources of one split.
        check("cuDevResourceGenerateDesc", unsafe {
            sys::cuDevResourceGenerateDesc(&mut desc, res.as_mut_ptr(), res.len() as u32)
        })?;
        let mut g: sys::CUgreenCtx = ptr::null_mut();
        // SAFETY: a descriptor made above; the default-stream flag is required by 12.x drivers.
        check("cuGreenCtxCreate", unsafe {
            sys::cuGreenCtxCreate(
                &mut g,
                desc,
                dev,
                sys::CUgreenCtxCreate_flags::CU_GREEN_CTX_DEFAULT_STREAM as u32,
            )
        })?;
        Ok(Arc::new(GreenPartition {
            handle: g as usize,
            device: self.device,
            sm_count: sms,
        }))
    }
}

/// A stream on `part` (or a plain stream of `device` when None), at `priority`.
pub fn partition_stream(
    device: i32,
    part: Option<&Arc<GreenPartition>>,
    priority: i32,
) -> Result<Stream> {
    match part {
        None => Stream::new(device, priority, true),
        Some(p) => Stream::in_partition(p.clone(), priority),
    }
}
