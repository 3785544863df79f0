//! DLPack (https://dmlc.github.io/dlpack/latest/c_api.html): the C structs, building exported
//! tensors whose deleter drops an owner value, and reading imported ones.
//!
//! Layouts follow dlpack.h v1.0 exactly (repr(C), same field order and widths); the legacy
//! `DLManagedTensor` is what "dltensor" capsules carry, `DLManagedTensorVersioned` what
//! "dltensor_versioned" capsules carry.

use std::ffi::c_void;

use crate::error::{Error, Result};

pub const DLPACK_MAJOR_VERSION: u32 = 1;
pub const DLPACK_MINOR_VERSION: u32 = 0;
/// DLManagedTensorVersioned.flags: the consumer must not write through the pointer.
pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1 << 0;
/// DLManagedTensorVersioned.flags: the producer made a copy for this export.
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 1 << 1;

/// DLDeviceType values used here.
pub const KDL_CPU: i32 = 1;
pub const KDL_CUDA: i32 = 2;
pub const KDL_CUDA_HOST: i32 = 3;
pub const KDL_CUDA_MANAGED: i32 = 13;

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLDevice {
    /// DLDeviceType (a C enum, int-sized).
    pub device_type: i32,
    pub device_id: i32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLDataType {
    /// DLDataTypeCode: 0 int, 1 uint, 2 float, 3 opaque handle, 4 bfloat, 5 complex, 6 bool.
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

#[repr(C)]
#[derive(Debug)]
pub struct DLTensor {
    pub data: *mut c_void,
    pub device: DLDevice,
    pub ndim: i32,
    pub dtype: DLDataType,
    pub shape: *mut i64,
    /// In elements; NULL means C-contiguous (allowed for legacy producers).
    pub strides: *mut i64,
    pub byte_offset: u64,
}

#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    pub dl_tensor: DLTensor,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLPackVersion {
    pub major: u32,
    pub minor: u32,
}

#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    pub version: DLPackVersion,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    pub flags: u64,
    pub dl_tensor: DLTensor,
}

/// What an exported tensor describes.
#[derive(Debug, Clone)]
pub struct TensorDesc {
    pub data: u64,
    pub shape: Vec<i64>,
    /// In elements; `None` gives C-contiguous strides.
    pub strides: Option<Vec<i64>>,
    pub dtype: DLDataType,
    pub device: DLDevice,
}

/// C-contiguous strides (in elements) of `shape`.
pub fn contiguous_strides(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![0i64; shape.len()];
    let mut acc = 1i64;
    for i in (0..shape.len()).rev() {
        strides[i] = acc;
        acc = acc.saturating_mul(shape[i].max(1));
    }
    strides
}

impl TensorDesc {
    fn validate(&self) -> Result<Vec<i64>> {
        if self.shape.len() > i32::MAX as usize {
            return Err(Error::invalid("shape has too many dimensions"));
        }
        if let Some(d) = self.shape.iter().find(|&&d| d < 0) {
            return Err(Error::invalid(format!("shape has a negative extent {d}")));
        }
        if self.dtype.bits == 0 || self.dtype.lanes == 0 {
            return Err(Error::invalid("dtype bits and lanes must be > 0"));
        }
        match &self.strides {
            Some(s) if s.len() != self.shape.len() => Err(Error::invalid(format!(
                "strides has {} entries but shape has {}",
                s.len(),
                self.shape.len()
            ))),
            Some(s) => Ok(s.clone()),
            None => Ok(contiguous_strides(&self.shape)),
        }
    }
}

/// The manager context of our exports: shape and strides storage, and the owner kept alive.
struct ExportCtx<T> {
    shape: Vec<i64>,
    strides: Vec<i64>,
    _owner: T,
}

fn tensor_of<T>(desc: &TensorDesc, ctx: &mut ExportCtx<T>) -> DLTensor {
    DLTensor {
        data: desc.data as *mut c_void,
        device: desc.device,
        ndim: ctx.shape.len() as i32,
        dtype: desc.dtype,
        // The Vec buffers do not move when the boxed context does: these pointers stay valid
        // until the deleter drops the context.
        shape: ctx.shape.as_mut_ptr(),
        strides: ctx.strides.as_mut_ptr(),
        byte_offset: 0,
    }
}

unsafe extern "C" fn delete_legacy<T>(p: *mut DLManagedTensor) {
    if p.is_null() {
        return;
    }
    // SAFETY: p and its manager_ctx were made by export_legacy::<T> with Box::into_raw.
    let m = Box::from_raw(p);
    drop(Box::from_raw(m.manager_ctx as *mut ExportCtx<T>));
}

unsafe extern "C" fn delete_versioned<T>(p: *mut DLManagedTensorVersioned) {
    if p.is_null() {
        return;
    }
    // SAFETY: p and its manager_ctx were made by export_versioned::<T> with Box::into_raw.
    let m = Box::from_raw(p);
    drop(Box::from_raw(m.manager_ctx as *mut ExportCtx<T>));
}

/// A legacy DLManagedTensor for `desc` whose deleter drops `owner`. The caller hands the pointer
/// to a consumer (who calls the deleter exactly once) or calls the deleter itself.
pub fn export_legacy<T: Send + 'static>(
    desc: &TensorDesc,
    owner: T,
) -> Result<*mut DLManagedTensor> {
    let strides = desc.validate()?;
    let mut ctx = Box::new(ExportCtx {
        shape: desc.shape.clone(),
        strides,
        _owner: owner,
    });
    let dl_tensor = tensor_of(desc, &mut ctx);
    Ok(Box::into_raw(Box::new(DLManagedTensor {
        dl_tensor,
        manager_ctx: Box::into_raw(ctx) as *mut c_void,
        deleter: Some(delete_legacy::<T>),
    })))
}

/// A DLPack 1.0 DLManagedTensorVersioned for `desc` whose deleter drops `owner`.
pub fn export_versioned<T: Send + 'static>(
    desc: &TensorDesc,
    owner: T,
    read_only: bool,
) -> Result<*mut DLManagedTensorVersioned> {
    let strides = desc.validate()?;
    let mut ctx = Box::new(ExportCtx {
        shape: desc.shape.clone(),
        strides,
        _owner: owner,
    });
    let dl_tensor = tensor_of(desc, &mut ctx);
    Ok(Box::into_raw(Box::new(DLManagedTensorVersioned {
        version: DLPackVersion {
            major: DLPACK_MAJOR_VERSION,
            minor: DLPACK_MINOR_VERSION,
        },
        manager_ctx: Box::into_raw(ctx) as *mut c_void,
        deleter: Some(delete_versioned::<T>),
        flags: if read_only {
            DLPACK_FLAG_BITMASK_READ_ONLY
        } else {
            0
        },
        dl_tensor,
    })))
}

/// A consumed tensor: the view, and the producer's struct whose deleter runs on drop.
pub struct ImportedTensor {
    raw: Raw,
    /// data + byte_offset.
    pub ptr: u64,
    pub shape: Vec<i64>,
    /// In elements (computed C-contiguous when the producer gave NULL).
    pub strides: Vec<i64>,
    pub dtype: DLDataType,
    pub device: DLDevice,
    pub read_only: bool,
}

enum Raw {
    Legacy(*mut DLManagedTensor),
    Versioned(*mut DLManagedTensorVersioned),
}

// SAFETY: the view is plain data, and the producer's struct is only touched in Drop, once. DLPack
// producers must accept their deleter being called from any thread (e.g. NumPy's takes the GIL).
unsafe impl Send for ImportedTensor {}
unsafe impl Sync for ImportedTensor {}

unsafe fn read_view(t: &DLTensor) -> Result<(u64, Vec<i64>, Vec<i64>)> {
    if t.ndim < 0 {
        return Err(Error::invalid(format!("DLTensor has ndim {}", t.ndim)));
    }
    let n = t.ndim as usize;
    if n > 0 && t.shape.is_null() {
        return Err(Error::invalid("DLTensor has a NULL shape"));
    }
    let shape = if n == 0 {
        Vec::new()
    } else {
        std::slice::from_raw_parts(t.shape, n).to_vec()
    };
    let strides = if t.strides.is_null() || n == 0 {
        contiguous_strides(&shape)
    } else {
        std::slice::from_raw_parts(t.strides, n).to_vec()
    };
    Ok(((t.data as u64).wrapping_add(t.byte_offset), shape, strides))
}

impl ImportedTensor {
    /// Take ownership of a legacy managed tensor. On error the caller still owns it.
    ///
    /// # Safety
    /// `p` points at a valid DLManagedTensor not owned by anyone else.
    pub unsafe fn from_legacy(p: *mut DLManagedTensor) -> Result<Self> {
        if p.is_null() {
            return Err(Error::invalid("NULL DLManagedTensor"));
        }
        let t = &(*p).dl_tensor;
        let (ptr, shape, strides) = read_view(t)?;
        Ok(ImportedTensor {
            raw: Raw::Legacy(p),
            ptr,
            shape,
            strides,
            dtype: t.dtype,
            device: t.device,
            read_only: false,
        })
    }

    /// Take ownership of a versioned managed tensor (major version 1 only; on error the caller
    /// still owns it, as DLPack requires for an unsupported major version).
    ///
    /// # Safety
    /// `p` points at a valid DLManagedTensorVersioned not owned by anyone else.
    pub unsafe fn from_versioned(p: *mut DLManagedTensorVersioned) -> Result<Self> {
        if p.is_null() {
            return Err(Error::invalid("NULL DLManagedTensorVersioned"));
        }
        let v = (*p).version;
        if v.major != DLPACK_MAJOR_VERSION {
            return Err(Error::invalid(format!(
                "unsupported DLPack version {}.{} (this consumer reads major version {})",
                v.major, v.minor, DLPACK_MAJOR_VERSION
            )));
        }
        let t = &(*p).dl_tensor;
        let (ptr, shape, strides) = read_view(t)?;
        Ok(ImportedTensor {
            raw: Raw::Versioned(p),
            ptr,
            shape,
            strides,
            dtype: t.dtype,
            device: t.device,
            read_only: (*p).flags & DLPACK_FLAG_BITMASK_READ_ONLY != 0,
        })
    }

    pub fn is_versioned(&self) -> bool {
        matches!(self.raw, Raw::Versioned(_))
    }
}

impl Drop for ImportedTensor {
    fn drop(&mut self) {
        // SAFETY: we own the producer's struct; its deleter is called exactly once, here.
        unsafe {
            match self.raw {
                Raw::Legacy(p) => {
                    if let Some(d) = (*p).deleter {
                        d(p)
                    }
                }
                Raw::Versioned(p) => {
                    if let Some(d) = (*p).deleter {
                        d(p)
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    struct Owner(Arc<AtomicUsize>);
    impl Drop for Owner {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn desc(strides: Option<Vec<i64>>) -> TensorDesc {
        TensorDesc {
            data: 0x1000,
            shape: vec![2, 3, 4],
            strides,
            dtype: DLDataType {
                code: 2,
                bits: 32,
                lanes: 1,
            },
            device: DLDevice {
                device_type: KDL_CPU,
                device_id: 0,
            },
        }
    }

    #[test]
    fn layouts_match_dlpack_h() {
        use std::mem::{offset_of, size_of};
        assert_eq!(size_of::<DLDevice>(), 8);
        assert_eq!(size_of::<DLDataType>(), 4);
        assert_eq!(size_of::<DLTensor>(), 48);
        assert_eq!(offset_of!(DLTensor, shape), 24);
        assert_eq!(size_of::<DLManagedTensor>(), 64);
        assert_eq!(offset_of!(DLManagedTensorVersioned, dl_tensor), 32);
        assert_eq!(size_of::<DLManagedTensorVersioned>(), 80);
    }

    #[test]
    fn export_import_round_trip_runs_deleter_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let p = export_legacy(&desc(None), Owner(drops.clone())).unwrap();
        let t = unsafe { ImportedTensor::from_legacy(p) }.unwrap();
        assert_eq!(t.ptr, 0x1000);
        assert_eq!(t.shape, vec![2, 3, 4]);
        assert_eq!(t.strides, vec![12, 4, 1]);
        assert!(!t.read_only && !t.is_versioned());
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        drop(t);
        assert_eq!(drops.load(Ordering::SeqCst), 1);

        let p = export_versioned(&desc(Some(vec![1, 2, 6])), Owner(drops.clone()), true).unwrap();
        let t = unsafe { ImportedTensor::from_versioned(p) }.unwrap();
        assert_eq!(t.strides, vec![1, 2, 6]);
        assert!(t.read_only && t.is_versioned());
        drop(t);
        assert_eq!(drops.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn bad_descriptions_are_rejected() {
        let drops = Arc::new(AtomicUsize::new(0));
        assert!(export_legacy(&desc(Some(vec![1])), Owner(drops.clone())).is_err());
        let mut d = desc(None);
        d.shape[1] = -1;
        assert!(export_versioned(&d, Owner(drops.clone()), false).is_err());
        // The owner of a rejected export is dropped at once, not leaked.
        assert_eq!(drops.load(Ordering::SeqCst), 2);
        assert_eq!(contiguous_strides(&[]), Vec::<i64>::new());
        assert_eq!(contiguous_strides(&[5, 0, 2]), vec![2, 2, 1]);
    }
}
