//! DLPack capsules: export any memory (kept alive through an owner object) and import a
//! producer's capsule.
//!
//! Protocol (https://dmlc.github.io/dlpack/latest/python_spec.html): a capsule named "dltensor"
//! (or "dltensor_versioned") holds a managed tensor; the consumer renames it to "used_dltensor"
//! (or "used_dltensor_versioned") and becomes responsible for calling the deleter. The capsule
//! destructor calls the deleter only if nobody consumed it (its name is unchanged).

use std::ffi::{c_void, CStr};

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use pygpukit_core::dlpack::{
    export_legacy, export_versioned, DLDataType, DLDevice, DLManagedTensor,
    DLManagedTensorVersioned, ImportedTensor, TensorDesc,
};

use crate::errors::IntoPyResult;

const DLTENSOR: &CStr = c"dltensor";
const DLTENSOR_VERSIONED: &CStr = c"dltensor_versioned";
const USED_DLTENSOR: &CStr = c"used_dltensor";
const USED_DLTENSOR_VERSIONED: &CStr = c"used_dltensor_versioned";

/// The exported tensor's owner: a strong reference to a Python object, released by the DLPack
/// deleter. The deleter may run on any thread, so the reference is dropped with the GIL held
/// (try_attach: during interpreter shutdown it is left to PyO3's deferred release instead).
struct Owner(Option<Py<PyAny>>);

impl Drop for Owner {
    fn drop(&mut self) {
        if let Some(obj) = self.0.take() {
            let _ = Python::try_attach(move |_py| drop(obj));
        }
    }
}

/// Run `f` with the current Python exception (if any) set aside, as capsule destructors must:
/// they can be called while an exception is propagating, and the deleter may run Python code.
unsafe fn preserving_exception(f: impl FnOnce()) {
    let py = Python::assume_attached();
    let pending = PyErr::take(py);
    f();
    if let Some(e) = pending {
        e.restore(py);
    }
}

unsafe extern "C" fn destroy_legacy_capsule(capsule: *mut ffi::PyObject) {
    // A consumed capsule was renamed: the consumer owns the tensor then.
    if ffi::PyCapsule_IsValid(capsule, DLTENSOR.as_ptr()) == 1 {
        preserving_exception(|| {
            let p = ffi::PyCapsule_GetPointer(capsule, DLTENSOR.as_ptr()) as *mut DLManagedTensor;
            if let Some(d) = p.as_ref().and_then(|m| m.deleter) {
                d(p)
            }
        });
    }
}

unsafe extern "C" fn destroy_versioned_capsule(capsule: *mut ffi::PyObject) {
    if ffi::PyCapsule_IsValid(capsule, DLTENSOR_VERSIONED.as_ptr()) == 1 {
        preserving_exception(|| {
            let p = ffi::PyCapsule_GetPointer(capsule, DLTENSOR_VERSIONED.as_ptr())
                as *mut DLManagedTensorVersioned;
            if let Some(d) = p.as_ref().and_then(|m| m.deleter) {
                d(p)
            }
        });
    }
}

/// Export `ptr` as a DLPack capsule. `strides` are in elements (None: C-contiguous); `owner` is
/// kept alive until the consumer (or the capsule, if never consumed) releases the tensor.
/// versioned=True gives a DLPack 1.0 "dltensor_versioned" capsule, which carries `read_only`;
/// a legacy capsule cannot carry it, so a read-only export must be versioned.
#[pyfunction]
#[pyo3(signature = (owner, ptr, shape, strides, dtype_code, bits, lanes, device_type, device_id, versioned=false, read_only=false))]
#[allow(clippy::too_many_arguments)]
pub fn dlpack_export<'py>(
    py: Python<'py>,
    owner: Py<PyAny>,
    ptr: u64,
    shape: Vec<i64>,
    strides: Option<Vec<i64>>,
    dtype_code: u8,
    bits: u8,
    lanes: u16,
    device_type: i32,
    device_id: i32,
    versioned: bool,
    read_only: bool,
) -> PyResult<Bound<'py, PyAny>> {
    if read_only && !versioned {
        return Err(pyo3::exceptions::PyBufferError::new_err(
            "a read-only array cannot be exported as a legacy (pre-1.0) DLPack capsule, which \
             has no read-only flag; ask for max_version=(1, 0) or export a copy",
        ));
    }
    let desc = TensorDesc {
        data: ptr,
        shape,
        strides,
        dtype: DLDataType {
            code: dtype_code,
            bits,
            lanes,
        },
        device: DLDevice {
            device_type,
            device_id,
        },
    };
    let owner = Owner(Some(owner));
    // SAFETY: the managed tensor is handed to the capsule, whose destructor (or a consumer)
    // calls its deleter exactly once; on capsule creation failure we call it ourselves.
    unsafe {
        let cap = if versioned {
            let m = export_versioned(&desc, owner, read_only).py()?;
            let cap = ffi::PyCapsule_New(
                m as *mut c_void,
                DLTENSOR_VERSIONED.as_ptr(),
                Some(destroy_versioned_capsule),
            );
            if cap.is_null() {
                if let Some(d) = (*m).deleter {
                    d(m)
                }
            }
            cap
        } else {
            let m = export_legacy(&desc, owner).py()?;
            let cap = ffi::PyCapsule_New(
                m as *mut c_void,
                DLTENSOR.as_ptr(),
                Some(destroy_legacy_capsule),
            );
            if cap.is_null() {
                if let Some(d) = (*m).deleter {
                    d(m)
                }
            }
            cap
        };
        Bound::from_owned_ptr_or_err(py, cap)
    }
}

/// A tensor consumed from a DLPack capsule; the producer's deleter runs when this is dropped.
#[pyclass(name = "DLPackTensor", module = "pygpukit._core", frozen)]
pub struct PyDLPackTensor {
    inner: ImportedTensor,
}

#[pymethods]
impl PyDLPackTensor {
    /// data + byte_offset.
    #[getter]
    fn ptr(&self) -> u64 {
        self.inner.ptr
    }
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.inner.shape)
    }
    /// In elements (computed C-contiguous when the producer gave none).
    #[getter]
    fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.inner.strides)
    }
    /// (code, bits, lanes).
    #[getter]
    fn dtype(&self) -> (u8, u8, u16) {
        let d = self.inner.dtype;
        (d.code, d.bits, d.lanes)
    }
    /// (device_type, device_id).
    #[getter]
    fn device(&self) -> (i32, i32) {
        (self.inner.device.device_type, self.inner.device.device_id)
    }
    /// Whether the producer marked the tensor read-only (versioned capsules only).
    #[getter]
    fn read_only(&self) -> bool {
        self.inner.read_only
    }
    #[getter]
    fn versioned(&self) -> bool {
        self.inner.is_versioned()
    }
    fn __repr__(&self) -> String {
        format!(
            "DLPackTensor(ptr={:#x}, shape={:?}, strides={:?}, dtype={:?}, device={:?})",
            self.inner.ptr,
            self.inner.shape,
            self.inner.strides,
            self.dtype(),
            self.device()
        )
    }
}

/// Take the managed tensor out of a capsule named `name`, rename the capsule to `used`, and
/// build the import with `make`. On any error the capsule keeps the tensor.
unsafe fn consume<T>(
    cap: *mut ffi::PyObject,
    name: &CStr,
    used: &CStr,
    make: unsafe fn(*mut T) -> pygpukit_core::Result<ImportedTensor>,
) -> PyResult<ImportedTensor> {
    let p = ffi::PyCapsule_GetPointer(cap, name.as_ptr()) as *mut T;
    if p.is_null() {
        return Err(Python::assume_attached().fetch_err());
    }
    let t = make(p).map_err(|e| PyValueError::new_err(e.to_string()))?;
    if ffi::PyCapsule_SetName(cap, used.as_ptr()) != 0 {
        // The capsule still owns the tensor: do not run its deleter twice.
        std::mem::forget(t);
        return Err(Python::assume_attached().fetch_err());
    }
    Ok(t)
}

trait FetchErr {
    fn fetch_err(self) -> PyErr;
}
impl FetchErr for Python<'_> {
    fn fetch_err(self) -> PyErr {
        PyErr::take(self).unwrap_or_else(|| PyValueError::new_err("capsule operation failed"))
    }
}

/// Consume a "dltensor" or "dltensor_versioned" capsule. ValueError for anything else,
/// including an already consumed capsule.
#[pyfunction]
pub fn dlpack_import(capsule: &Bound<'_, PyAny>) -> PyResult<PyDLPackTensor> {
    let cap = capsule.as_ptr();
    // SAFETY: capsule calls on a live object; PyCapsule_IsValid never fails.
    unsafe {
        let inner = if ffi::PyCapsule_IsValid(cap, DLTENSOR_VERSIONED.as_ptr()) == 1 {
            consume::<DLManagedTensorVersioned>(
                cap,
                DLTENSOR_VERSIONED,
                USED_DLTENSOR_VERSIONED,
                ImportedTensor::from_versioned,
            )?
        } else if ffi::PyCapsule_IsValid(cap, DLTENSOR.as_ptr()) == 1 {
            consume::<DLManagedTensor>(cap, DLTENSOR, USED_DLTENSOR, ImportedTensor::from_legacy)?
        } else if ffi::PyCapsule_IsValid(cap, USED_DLTENSOR.as_ptr()) == 1
            || ffi::PyCapsule_IsValid(cap, USED_DLTENSOR_VERSIONED.as_ptr()) == 1
        {
            return Err(PyValueError::new_err(
                "this DLPack capsule was already consumed",
            ));
        } else {
            return Err(PyValueError::new_err(
                "expected a DLPack capsule named 'dltensor' or 'dltensor_versioned'",
            ));
        };
        Ok(PyDLPackTensor { inner })
    }
}
