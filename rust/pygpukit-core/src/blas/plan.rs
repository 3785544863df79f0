//! Cached cuBLASLt plans: per problem, the matmul descriptor, the three layouts (A, B, and D,
//! which also serves as C) and the heuristic's algorithm; and the handle of each device.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock};

use super::fp8::Fp8Gemm;
use super::{check, loaded, sys, to_col_major, CublasLt, DType, Gemm, Layout, Ptrs};
use crate::deferred::record_if_err;
use crate::error::{Error, Result};

/// The problem a plan serves: a float GEMM or an FP8 scaled GEMM (one cache for both).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Problem {
    Gemm(Gemm),
    Fp8(Fp8Gemm),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Key {
    pub device: i32,
    pub problem: Problem,
    pub align: [u32; 3],
    pub workspace_size: usize,
}

/// Descriptors and the chosen algorithm of one problem. Raw handles are kept as addresses.
pub(super) struct Plan {
    pub desc: usize,
    pub layouts: [usize; 3],
    pub algo: sys::cublasLtMatmulAlgo_t,
}

impl Drop for Plan {
    fn drop(&mut self) {
        if let Some(lt) = loaded() {
            // SAFETY: these handles were created by this library and are destroyed once.
            unsafe {
                record_if_err(check(
                    lt,
                    "cublasLtMatmulDescDestroy",
                    (lt.api.matmul_desc_destroy)(self.desc as *mut c_void),
                ));
                for l in self.layouts.into_iter().filter(|l| *l != 0) {
                    record_if_err(check(
                        lt,
                        "cublasLtMatrixLayoutDestroy",
                        (lt.api.matrix_layout_destroy)(l as *mut c_void),
                    ));
                }
            }
        }
    }
}

const MAX_PLANS: usize = 4096;

fn plans() -> &'static Mutex<HashMap<Key, Arc<Mutex<Plan>>>> {
    static PLANS: OnceLock<Mutex<HashMap<Key, Arc<Mutex<Plan>>>>> = OnceLock::new();
    PLANS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Number of cached plans (problems seen since start or the last `clear_plans`).
pub fn plan_count() -> usize {
    plans().lock().unwrap_or_else(|p| p.into_inner()).len()
}

/// Drop every cached plan (in-flight calls keep theirs alive until they return).
pub fn clear_plans() {
    plans().lock().unwrap_or_else(|p| p.into_inner()).clear();
}

/// The cuBLASLt handle of `device` (created on first use, with the device's context current).
pub(super) fn handle(lt: &CublasLt, device: i32) -> Result<usize> {
    static HANDLES: Mutex<Vec<(i32, usize)>> = Mutex::new(Vec::new());
    let mut hs = HANDLES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(&(_, h)) = hs.iter().find(|(d, _)| *d == device) {
        return Ok(h);
    }
    let mut h: sys::cublasLtHandle_t = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the device's context is current (checked by the caller).
    check(lt, "cublasLtCreate", unsafe { (lt.api.create)(&mut h) })?;
    hs.push((device, h as usize));
    Ok(h as usize)
}

pub(super) fn set_attr<T>(
    lt: &CublasLt,
    call: &'static str,
    f: unsafe extern "C" fn(*mut c_void, u32, *const c_void, usize) -> u32,
    obj: usize,
    attr: u32,
    value: &T,
) -> Result<()> {
    // SAFETY: `obj` is a live descriptor of the kind `f` takes; the value is read during the call.
    let s = unsafe {
        f(
            obj as *mut c_void,
            attr,
            value as *const T as *const c_void,
            std::mem::size_of::<T>(),
        )
    };
    check(lt, call, s)
}

/// A layout of element type `cuda` (a cudaDataType_t value).
pub(super) fn make_layout(lt: &CublasLt, cuda: u32, l: Layout, batch: i32) -> Result<usize> {
    let mut h: sys::cublasLtMatrixLayout_t = std::ptr::null_mut();
    // SAFETY: valid out-pointer.
    check(lt, "cublasLtMatrixLayoutCreate", unsafe {
        (lt.api.matrix_layout_create)(&mut h, cuda, l.rows, l.cols, l.ld)
    })?;
    let addr = h as usize;
    let f = lt.api.matrix_layout_set_attribute;
    let set = || -> Result<()> {
        if batch > 1 {
            let call = "cublasLtMatrixLayoutSetAttribute";
            set_attr(
                lt,
                call,
                f,
                addr,
                sys::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                &batch,
            )?;
            let stride = l.batch_stride;
            let attr = sys::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET;
            set_attr(lt, call, f, addr, attr, &stride)?;
        }
        Ok(())
    };
    if let Err(e) = set() {
        // SAFETY: created above, destroyed once.
        unsafe { (lt.api.matrix_layout_destroy)(h) };
        return Err(e);
    }
    Ok(addr)
}

/// A matmul descriptor of (compute type, scale type), owned by the returned (empty) plan so
/// that an early return destroys it.
pub(super) fn new_plan(lt: &CublasLt, compute: u32, scale: u32) -> Result<Plan> {
    let mut desc: sys::cublasLtMatmulDesc_t = std::ptr::null_mut();
    // SAFETY: valid out-pointer.
    check(lt, "cublasLtMatmulDescCreate", unsafe {
        (lt.api.matmul_desc_create)(&mut desc, compute, scale)
    })?;
    Ok(Plan {
        desc: desc as usize,
        layouts: [0; 3],
        algo: sys::cublasLtMatmulAlgo_t::default(),
    })
}

/// The float GEMM's plan (the FP8 one is built by fp8::build_plan).
pub(super) fn build_plan(lt: &CublasLt, handle: usize, key: &Key, g: &Gemm) -> Result<Plan> {
    let cm = to_col_major(g);
    let (compute, scale) = match g.dtype {
        DType::F64 => (sys::CUBLAS_COMPUTE_64F, sys::CUDA_R_64F),
        DType::F32 if g.tf32 => (sys::CUBLAS_COMPUTE_32F_FAST_TF32, sys::CUDA_R_32F),
        _ => (sys::CUBLAS_COMPUTE_32F, sys::CUDA_R_32F),
    };
    let mut plan = new_plan(lt, compute, scale)?;
    let call = "cublasLtMatmulDescSetAttribute";
    let f = lt.api.matmul_desc_set_attribute;
    set_attr(
        lt,
        call,
        f,
        plan.desc,
        sys::CUBLASLT_MATMUL_DESC_TRANSA,
        &cm.transa,
    )?;
    set_attr(
        lt,
        call,
        f,
        plan.desc,
        sys::CUBLASLT_MATMUL_DESC_TRANSB,
        &cm.transb,
    )?;
    let epi = g.epilogue.code();
    set_attr(
        lt,
        call,
        f,
        plan.desc,
        sys::CUBLASLT_MATMUL_DESC_EPILOGUE,
        &epi,
    )?;
    for (i, l) in [cm.a, cm.b, cm.d].into_iter().enumerate() {
        // On an error the plan's Drop destroys what exists (layouts not made stay 0).
        plan.layouts[i] = make_layout(lt, g.dtype.cuda(), l, g.batch)?;
    }
    let what = || format!("{g:?}");
    plan.algo = heuristic(lt, handle, &plan, key, &what)?;
    Ok(plan)
}

/// The heuristic's first algorithm for the plan's descriptors under the key's alignments and
/// workspace; "no algorithm" is CUBLAS_STATUS_NOT_SUPPORTED naming `what` (the problem).
pub(super) fn heuristic(
    lt: &CublasLt,
    handle: usize,
    plan: &Plan,
    key: &Key,
    what: &dyn Fn() -> String,
) -> Result<sys::cublasLtMatmulAlgo_t> {
    let mut pref: sys::cublasLtMatmulPreference_t = std::ptr::null_mut();
    // SAFETY: valid out-pointer.
    check(lt, "cublasLtMatmulPreferenceCreate", unsafe {
        (lt.api.preference_create)(&mut pref)
    })?;
    let run = || -> Result<sys::cublasLtMatmulAlgo_t> {
        let call = "cublasLtMatmulPreferenceSetAttribute";
        let f = lt.api.preference_set_attribute;
        let p = pref as usize;
        let ws = key.workspace_size as u64;
        set_attr(
            lt,
            call,
            f,
            p,
            sys::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
            &ws,
        )?;
        // cuBLASLt's A is our B, its B our A; C and D are our D.
        let [al_a, al_b, al_d] = key.align;
        let attrs = [
            (sys::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, al_b),
            (sys::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, al_a),
            (sys::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, al_d),
            (sys::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, al_d),
        ];
        for (attr, v) in attrs {
            set_attr(lt, call, f, p, attr, &v)?;
        }
        let mut results = [sys::cublasLtMatmulHeuristicResult_t::default(); 1];
        let mut count: i32 = 0;
        let [la, lb, ld] = plan.layouts.map(|h| h as *mut c_void);
        // SAFETY: live descriptors; results has room for the one algorithm requested.
        let s = unsafe {
            (lt.api.algo_get_heuristic)(
                handle as *mut c_void,
                plan.desc as *mut c_void,
                la,
                lb,
                ld,
                ld,
                pref,
                1,
                results.as_mut_ptr(),
                &mut count,
            )
        };
        if s == sys::CUBLAS_STATUS_NOT_SUPPORTED || (s == 0 && count == 0) {
            return Err(Error::Cuda {
                call: "cublasLtMatmulAlgoGetHeuristic",
                code: sys::CUBLAS_STATUS_NOT_SUPPORTED as i32,
                name: sys::status_name(sys::CUBLAS_STATUS_NOT_SUPPORTED).to_string(),
                message: format!(
                    "cuBLASLt has no algorithm for {} with alignments (A, B, D) {:?} bytes",
                    what(),
                    key.align
                ),
            });
        }
        check(lt, "cublasLtMatmulAlgoGetHeuristic", s)?;
        check(lt, "cublasLtMatmulAlgoGetHeuristic", results[0].state)?;
        Ok(results[0].algo)
    };
    let out = run();
    // SAFETY: created above, destroyed once.
    let s = unsafe { (lt.api.preference_destroy)(pref) };
    let destroyed = check(lt, "cublasLtMatmulPreferenceDestroy", s);
    let algo = out?;
    destroyed?;
    Ok(algo)
}

/// The cached plan of `key`, if one was built.
pub(super) fn cached(key: &Key) -> Option<Arc<Mutex<Plan>>> {
    plans()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(key)
        .map(Arc::clone)
}

/// The cached plan of `key`, made by `build` on first use.
pub(super) fn plan_for(
    key: Key,
    build: impl FnOnce(&Key) -> Result<Plan>,
) -> Result<Arc<Mutex<Plan>>> {
    if let Some(p) = cached(&key) {
        return Ok(p);
    }
    // Built outside the lock (the heuristic takes tens of microseconds); a race builds twice
    // and keeps one.
    let plan = Arc::new(Mutex::new(build(&key)?));
    let mut map = plans().lock().unwrap_or_else(|p| p.into_inner());
    if map.len() >= MAX_PLANS {
        map.clear();
    }
    Ok(Arc::clone(map.entry(key).or_insert(plan)))
}

/// Enqueue one cublasLtMatmul of `plan` (D = alpha * product + beta * D, D in place of C) on
/// `stream`, operands in cuBLASLt's column-major order: our B first, then our A (row-major
/// D = A B is column-major D^T = B^T A^T). Shared by the float and the FP8 products.
///
/// # Safety
/// alpha/beta point to scalars of the plan's scale type; the pointers of `p` are device
/// addresses valid for the plan's layouts and stay valid until the work on `stream` completes;
/// `stream` is a live stream of the device whose handle `h` is.
pub(super) unsafe fn enqueue(
    lt: &CublasLt,
    h: usize,
    plan: &Plan,
    alpha: *const c_void,
    beta: *const c_void,
    p: &Ptrs,
    stream: usize,
) -> Result<()> {
    let [la, lb, ld] = plan.layouts.map(|h| h as *mut c_void);
    let d = p.d as *mut c_void;
    // One enqueue at a time per process: concurrent cublasLtMatmul calls on one handle from
    // several host threads gave wrong products (8 threads of gp.matmul on an H200 with cuBLAS
    // 13: about 1 in 1000 results wrong, none with the calls serialized). The enqueue is a few
    // microseconds of host time; the kernels still overlap on the device.
    static ENQUEUE: Mutex<()> = Mutex::new(());
    let _one = ENQUEUE.lock().unwrap_or_else(|p| p.into_inner());
    // SAFETY: upheld by the caller (pointers, stream) and by the plan (live descriptors whose
    // algorithm was chosen for this workspace size and these alignments).
    let s = unsafe {
        (lt.api.matmul)(
            h as *mut c_void,
            plan.desc as *mut c_void,
            alpha,
            p.b as *const c_void,
            la,
            p.a as *const c_void,
            lb,
            beta,
            d,
            ld,
            d,
            ld,
            &plan.algo,
            p.workspace as *mut c_void,
            p.workspace_size,
            stream as *mut c_void,
        )
    };
    check(lt, "cublasLtMatmul", s)
}
