//! The Triton launch fast path.
//!
//! One pass over a launch's Python arguments computes the specialization key (what Triton
//! specializes a compiled kernel on: dtype and 16-byte alignment of each pointer, the value class
//! of each int, the constexpr values) and the raw argument values; a cache maps the key to the
//! loaded kernel, which is launched with cuLaunchKernel (cuLaunchKernelEx with the
//! programmatic stream serialization attribute for a kernel Triton compiled with launch_pdl).
//! Anything unusual (an argument of another type, an int beyond 64 bits, a device other than the
//! caller's) is a miss, and the Python side takes Triton's own path, which also registers the
//! kernel here once compiled.

use std::collections::HashMap;
use std::sync::Mutex;

use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyTuple, PyType};

use pygpukit_core::launch::{launch_raw, with_slot_pointers, LaunchConfig};

use crate::errors::IntoPyResult;

/// The C type of one kernel parameter, from Triton's signature string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    Skip, // constexpr: compiled in, not passed
    Ptr,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F32,
    F64,
}

fn parse_ty(s: &str) -> Option<Ty> {
    if s.starts_with('*') {
        return Some(Ty::Ptr);
    }
    Some(match s {
        "constexpr" => Ty::Skip,
        "i1" | "i8" => Ty::I8,
        "i16" => Ty::I16,
        "i32" => Ty::I32,
        "i64" => Ty::I64,
        "u1" | "u8" => Ty::U8,
        "u16" => Ty::U16,
        "u32" => Ty::U32,
        "u64" => Ty::U64,
        "fp32" | "f32" => Ty::F32,
        "fp64" => Ty::F64,
        _ => return None, // fp16/bf16 scalars, tensor descriptors, tuples: Triton's launcher
    })
}

/// One argument's raw value, as Triton's launcher would receive it.
#[derive(Clone, Copy)]
enum Val {
    Int(i64),
    Ptr(u64),
    Float(f64),
    Null,
}

struct Entry {
    function: usize,
    cfg_block: u32,
    shared: u32,
    pdl: bool,
    types: Vec<Ty>,
    consts: Py<PyTuple>,
}

#[pyclass(module = "pygpukit._core", name = "TritonFastPath", frozen)]
pub struct PyTritonFastPath {
    array_type: Py<PyType>,
    entries: Mutex<HashMap<Vec<u64>, Entry>>,
}

const TAG_ARRAY: u64 = 1;
const TAG_INT: u64 = 2;
const TAG_FLOAT: u64 = 3;
const TAG_NONE: u64 = 4;
const TAG_BOOL: u64 = 5;

impl PyTritonFastPath {
    /// (key, values), or None when an argument needs Triton's own path.
    fn key_values(
        &self,
        py: Python<'_>,
        kernel_id: u64,
        device: i64,
        args: &Bound<'_, PyTuple>,
        consts: &Bound<'_, PyTuple>,
    ) -> PyResult<Option<(Vec<u64>, Vec<Val>)>> {
        let mut key = Vec::with_capacity(3 + 2 * args.len());
        let mut vals = Vec::with_capacity(args.len());
        key.push(kernel_id);
        key.push(device as u64);
        key.push(consts.hash()? as u64);
        let array_type = self.array_type.bind(py);
        for a in args.iter() {
            if a.get_type().is(array_type) {
                let base: u64 = a.getattr(intern!(py, "_ptr"))?.extract()?;
                let offset: i64 = a.getattr(intern!(py, "_offset"))?.extract()?;
                let dtype = a.getattr(intern!(py, "_dtype"))?;
                let bits: i64 = dtype.getattr(intern!(py, "bits"))?.extract()?;
                let dev: i64 = a
                    .getattr(intern!(py, "_device"))?
                    .getattr(intern!(py, "index"))?
                    .extract()?;
                if dev != device {
                    return Ok(None);
                }
                // data_ptr(): the byte offset of the first element (int4-aware: bits / 8).
                let p = base.wrapping_add(((offset * bits) >> 3) as u64);
                key.push(TAG_ARRAY);
                key.push(((dtype.as_ptr() as u64) << 1) | u64::from(p & 15 == 0));
                vals.push(Val::Ptr(p));
            } else if a.is_exact_instance_of::<PyBool>() {
                let v: bool = a.extract()?;
                key.push(TAG_BOOL);
                key.push(u64::from(v));
                vals.push(Val::Int(i64::from(v)));
            } else if a.is_exact_instance_of::<PyInt>() {
                let Ok(v) = a.extract::<i64>() else {
                    return Ok(None);
                };
                // Triton specializes ints equal to 1 and divisible by 16, i32 vs i64 by range.
                let class = if v == 1 {
                    1
                } else if v % 16 == 0 {
                    16
                } else {
                    0
                };
                let wide = if i32::try_from(v).is_ok() { 0 } else { 4 };
                key.push(TAG_INT);
                key.push(class + wide);
                vals.push(Val::Int(v));
            } else if a.is_exact_instance_of::<PyFloat>() {
                key.push(TAG_FLOAT);
                vals.push(Val::Float(a.extract()?));
            } else if a.is_none() {
                key.push(TAG_NONE);
                vals.push(Val::Null);
            } else {
                return Ok(None);
            }
        }
        Ok(Some((key, vals)))
    }
}

#[pymethods]
impl PyTritonFastPath {
    #[new]
    fn new(array_type: Bound<'_, PyType>) -> Self {
        PyTritonFastPath {
            array_type: array_type.unbind(),
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// Cache a loaded kernel for calls shaped like this one. Returns False (nothing cached)
    /// when its signature has a parameter type this path does not pass, or a non-constexpr
    /// parameter after the positional arguments. pdl: launch it as a programmatic dependent
    /// launch (the caller checked the kernel waits: the constexprs, part of the key, say so).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (kernel_id, device, args, consts, function, num_warps, shared, signature, pdl = false))]
    fn register(
        &self,
        py: Python<'_>,
        kernel_id: u64,
        device: i64,
        args: Bound<'_, PyTuple>,
        consts: Bound<'_, PyTuple>,
        function: usize,
        num_warps: u32,
        shared: u32,
        signature: Vec<String>,
        pdl: bool,
    ) -> PyResult<bool> {
        let Some(types) = signature
            .iter()
            .map(|s| parse_ty(s))
            .collect::<Option<Vec<_>>>()
        else {
            return Ok(false);
        };
        if types.len() < args.len() || types[args.len()..].iter().any(|t| *t != Ty::Skip) {
            return Ok(false);
        }
        let Some((key, _)) = self.key_values(py, kernel_id, device, &args, &consts)? else {
            return Ok(false);
        };
        let entry = Entry {
            function,
            cfg_block: 32 * num_warps,
            shared,
            pdl,
            types,
            consts: consts.unbind(),
        };
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, entry);
        Ok(true)
    }

    /// Launch from the cache: True when launched (or the grid is empty), False on a miss.
    #[allow(clippy::too_many_arguments)]
    fn launch(
        &self,
        py: Python<'_>,
        kernel_id: u64,
        device: i64,
        stream: usize,
        grid: (u32, u32, u32),
        args: Bound<'_, PyTuple>,
        consts: Bound<'_, PyTuple>,
    ) -> PyResult<bool> {
        let Some((key, vals)) = self.key_values(py, kernel_id, device, &args, &consts)? else {
            return Ok(false);
        };
        let (function, cfg, mut storage) = {
            let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            let Some(e) = entries.get(&key) else {
                return Ok(false);
            };
            if !e.consts.bind(py).eq(&consts)? {
                return Ok(false); // a hash collision of different constexpr values
            }
            let cfg = LaunchConfig {
                grid: [grid.0, grid.1, grid.2],
                block: [e.cfg_block, 1, 1],
                shared_bytes: e.shared,
                pdl: e.pdl,
            };
            (e.function, cfg, pack(&e.types, &vals)?)
        };
        if grid.0 == 0 || grid.1 == 0 || grid.2 == 0 {
            return Ok(true);
        }
        // The slots move into the GIL-free section and outlive the launch there; the pointer
        // array is built there too, so nothing holding raw pointers crosses threads.
        py.detach(move || {
            with_slot_pointers(&mut storage, |params| {
                // SAFETY: `function` was registered from Triton's loaded kernel for this
                // device; `params` points at one 8-byte slot per passed parameter (values
                // stored little-endian in the slot's low bytes) plus the two scratch pointers
                // Triton kernels take last.
                unsafe { launch_raw(function, &cfg, stream, params) }
            })
        })
        .py()?;
        Ok(true)
    }

    /// Number of cached launchers.
    fn __len__(&self) -> usize {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    fn clear(&self) {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}

/// One 8-byte slot per passed parameter, in order, plus global and profile scratch (null).
fn pack(types: &[Ty], vals: &[Val]) -> PyResult<Vec<u64>> {
    let mut out = Vec::with_capacity(types.len() + 2);
    for (i, ty) in types.iter().enumerate() {
        if *ty == Ty::Skip {
            continue;
        }
        let v = vals.get(i).copied().ok_or_else(|| {
            PyValueError::new_err(format!("kernel parameter {i} has no argument"))
        })?;
        let word = match (ty, v) {
            (Ty::Ptr, Val::Ptr(p)) => p,
            (Ty::Ptr, Val::Null) => 0,
            (Ty::Ptr, Val::Int(p)) => p as u64,
            (Ty::F32, Val::Float(f)) => u64::from((f as f32).to_bits()),
            (Ty::F64, Val::Float(f)) => f.to_bits(),
            (Ty::F32, Val::Int(n)) => u64::from((n as f32).to_bits()),
            (Ty::F64, Val::Int(n)) => (n as f64).to_bits(),
            // Integers: the low bytes of the slot carry the C value (little-endian x86-64).
            (Ty::I8 | Ty::U8, Val::Int(n)) => u64::from(n as u8),
            (Ty::I16 | Ty::U16, Val::Int(n)) => u64::from(n as u16),
            (Ty::I32 | Ty::U32, Val::Int(n)) => u64::from(n as u32),
            (Ty::I64 | Ty::U64, Val::Int(n)) => n as u64,
            _ => {
                return Err(PyValueError::new_err(format!(
                    "kernel parameter {i} of type {ty:?} got an argument of another kind"
                )))
            }
        };
        out.push(word);
    }
    out.push(0); // global scratch
    out.push(0); // profile scratch
    Ok(out)
}
