//! cuBLASLt matrix products, loaded at run time.
//!
//! The problem is stated row-major, as the Python side sees it: D[M,N] = A[M,K] @ B[K,N] (times
//! `batch`), with optional epilogue (bias over N, ReLU, tanh-GELU). cuBLASLt is column-major; a
//! row-major matrix is the column-major view of its transpose, so D^T = B^T A^T is computed
//! with B as cuBLASLt's first operand (see [`to_col_major`]), which also makes the bias a
//! per-row vector of cuBLASLt's D, the layout its BIAS epilogues take.
//!
//! Descriptors, layouts and the heuristic's algorithm are cached per problem (shape, strides,
//! dtype, transposes, epilogue, precision, pointer alignments, workspace size); the handle is
//! created once per device. The caller owns every byte: operands, output, bias and the workspace
//! come from the pygpukit pool, and everything is enqueued on the caller's stream.

pub mod fp8;
mod plan;
pub mod sys;

pub use fp8::{matmul_fp8, Fp8, Fp8Gemm, Fp8Ptrs, ScaleMode};
pub use plan::{clear_plans, plan_count};

use std::ffi::{c_void, CStr};
use std::sync::{Mutex, OnceLock};

use libloading::Library;

use crate::context::ensure_current;
use crate::dynlib::{self, LibSpec};
use crate::error::{Error, Result};

pub const SPEC: LibSpec = LibSpec {
    display: "cuBLASLt (libcublasLt)",
    env_var: "PYGPUKIT_CUBLASLT_PATH",
    sonames: &["libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"],
    hint: "Install the cuBLAS wheel matching the driver (pip install nvidia-cublas for CUDA 13, \
           nvidia-cublas-cu12 for CUDA 12) or the CUDA toolkit, or set PYGPUKIT_CUBLASLT_PATH \
           to the library file or its directory.",
};

/// The loaded library: entry points, where it came from, its version (e.g. 130100).
pub struct CublasLt {
    pub api: sys::Api,
    pub path: String,
    pub version: usize,
    _lib: Library,
}

static LOADED: OnceLock<CublasLt> = OnceLock::new();
static LOAD_LOCK: Mutex<()> = Mutex::new(());

/// Load cuBLASLt (once per process; later calls return the same library). `extra` are the
/// caller's candidate directories or files, searched after $PYGPUKIT_CUBLASLT_PATH and before
/// the system. A failure is an error naming every place searched; it is not cached, so a later
/// call with other candidates may succeed.
pub fn load(extra: &[String]) -> Result<&'static CublasLt> {
    if let Some(lt) = LOADED.get() {
        return Ok(lt);
    }
    let _guard = LOAD_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(lt) = LOADED.get() {
        return Ok(lt);
    }
    // The candidate whose entry points all resolve wins; they are resolved this once.
    let found = dynlib::search(&SPEC, extra, sys::Api::resolve)
        .map_err(|m| dynlib::library_error("load cuBLASLt", m))?;
    let api = found.resolved;
    // SAFETY: cublasLtGetVersion has no preconditions.
    let version = unsafe { (api.get_version)() };
    let lt = CublasLt {
        api,
        path: found.path,
        version,
        _lib: found.lib,
    };
    Ok(LOADED.get_or_init(|| lt))
}

/// The library if a previous `load` succeeded.
pub fn loaded() -> Option<&'static CublasLt> {
    LOADED.get()
}

/// The one checker for cuBLASLt statuses: names the call, the status and its description.
pub fn check(lt: &CublasLt, call: &'static str, status: sys::cublasStatus_t) -> Result<()> {
    if status == sys::CUBLAS_STATUS_SUCCESS {
        return Ok(());
    }
    // SAFETY: returns a pointer to a static string (or null for unknown values).
    let p = unsafe { (lt.api.get_status_string)(status) };
    let message = if p.is_null() {
        "unknown status".to_string()
    } else {
        // SAFETY: non-null pointers from the library point at static C strings.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    };
    Err(Error::Cuda {
        call,
        code: status as i32,
        name: sys::status_name(status).to_string(),
        message,
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F16,
    BF16,
    F32,
    F64,
}

impl DType {
    pub fn parse(s: &str) -> Option<DType> {
        Some(match s {
            "float16" => DType::F16,
            "bfloat16" => DType::BF16,
            "float32" => DType::F32,
            "float64" => DType::F64,
            _ => return None,
        })
    }
    fn cuda(self) -> u32 {
        match self {
            DType::F16 => sys::CUDA_R_16F,
            DType::BF16 => sys::CUDA_R_16BF,
            DType::F32 => sys::CUDA_R_32F,
            DType::F64 => sys::CUDA_R_64F,
        }
    }
}

/// What cuBLASLt applies to the accumulator before the single rounding to D's type.
/// GELU here is the tanh approximation (cuBLASLt's only GELU).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Epilogue {
    None,
    Bias,
    Relu,
    ReluBias,
    GeluTanh,
    GeluTanhBias,
}

impl Epilogue {
    pub fn parse(s: &str) -> Option<Epilogue> {
        Some(match s {
            "none" => Epilogue::None,
            "bias" => Epilogue::Bias,
            "relu" => Epilogue::Relu,
            "relu_bias" => Epilogue::ReluBias,
            "gelu_tanh" => Epilogue::GeluTanh,
            "gelu_tanh_bias" => Epilogue::GeluTanhBias,
            _ => return None,
        })
    }
    pub fn has_bias(self) -> bool {
        matches!(
            self,
            Epilogue::Bias | Epilogue::ReluBias | Epilogue::GeluTanhBias
        )
    }
    fn code(self) -> u32 {
        match self {
            Epilogue::None => sys::CUBLASLT_EPILOGUE_DEFAULT,
            Epilogue::Bias => sys::CUBLASLT_EPILOGUE_BIAS,
            Epilogue::Relu => sys::CUBLASLT_EPILOGUE_RELU,
            Epilogue::ReluBias => sys::CUBLASLT_EPILOGUE_RELU_BIAS,
            Epilogue::GeluTanh => sys::CUBLASLT_EPILOGUE_GELU,
            Epilogue::GeluTanhBias => sys::CUBLASLT_EPILOGUE_GELU_BIAS,
        }
    }
}

/// One (batched) row-major product D[M,N] = A[M,K] @ B[K,N], strides in elements.
///
/// `a_trans == false`: A[i,k] is at a + i*lda + k (rows contiguous); `true`: at a + k*lda + i
/// (A is a transposed view of a row-major [K,M] buffer). Likewise B with ldb; D is row-major
/// with row stride ldd. Batch i adds i*stride_{a,b,d}; a stride of 0 broadcasts the operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Gemm {
    pub dtype: DType,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub batch: i32,
    pub a_trans: bool,
    pub lda: i64,
    pub stride_a: i64,
    pub b_trans: bool,
    pub ldb: i64,
    pub stride_b: i64,
    pub ldd: i64,
    pub stride_d: i64,
    pub epilogue: Epilogue,
    /// fp32 only: let cuBLASLt round inputs to TF32 (CUBLAS_COMPUTE_32F_FAST_TF32).
    pub tf32: bool,
}

/// Device addresses of one call, and the workspace (from the caller's pool).
#[derive(Clone, Copy, Debug, Default)]
pub struct Ptrs {
    pub a: u64,
    pub b: u64,
    pub d: u64,
    pub bias: u64,
    pub workspace: u64,
    pub workspace_size: usize,
}

/// A column-major matrix layout as cuBLASLt takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub rows: u64,
    pub cols: u64,
    pub ld: i64,
    pub batch_stride: i64,
}

/// The cuBLASLt problem: op(A_lt)[N,K] @ op(B_lt)[K,M] = D_lt[N,M], where A_lt is our B,
/// B_lt our A and D_lt our D, each read column-major.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColMajor {
    pub transa: i32,
    pub transb: i32,
    pub a: Layout,
    pub b: Layout,
    pub d: Layout,
}

/// Row-major problem -> cuBLASLt's column-major one (no data moves: transposes are flags).
pub fn to_col_major(g: &Gemm) -> ColMajor {
    // Our B, row-major [K,N] with row stride ldb, is column-major [N,K]: op = N. Transposed
    // (column-major [K,N] in memory), it is read with op = T.
    let (transa, a) = if g.b_trans {
        (sys::CUBLAS_OP_T, (g.k, g.n))
    } else {
        (sys::CUBLAS_OP_N, (g.n, g.k))
    };
    let (transb, b) = if g.a_trans {
        (sys::CUBLAS_OP_T, (g.m, g.k))
    } else {
        (sys::CUBLAS_OP_N, (g.k, g.m))
    };
    ColMajor {
        transa,
        transb,
        a: Layout {
            rows: a.0,
            cols: a.1,
            ld: g.ldb,
            batch_stride: g.stride_b,
        },
        b: Layout {
            rows: b.0,
            cols: b.1,
            ld: g.lda,
            batch_stride: g.stride_a,
        },
        d: Layout {
            rows: g.n,
            cols: g.m,
            ld: g.ldd,
            batch_stride: g.stride_d,
        },
    }
}

/// Reject what cuBLASLt would reject or misread, naming the field.
pub fn validate(g: &Gemm) -> Result<()> {
    let bad = |m: String| Err(Error::invalid(format!("matmul: {m} ({g:?})")));
    if g.m == 0 || g.n == 0 || g.k == 0 {
        return bad("M, N and K must be >= 1 (empty products are handled by the caller)".into());
    }
    if g.batch < 1 {
        return bad(format!("batch must be >= 1, got {}", g.batch));
    }
    let cm = to_col_major(g);
    for (name, l) in [("lda", cm.b), ("ldb", cm.a), ("ldd", cm.d)] {
        if l.ld < l.rows.max(1) as i64 {
            return bad(format!(
                "{name} = {} is smaller than the contiguous extent {}",
                l.ld, l.rows
            ));
        }
    }
    if g.stride_a < 0 || g.stride_b < 0 || g.stride_d < 0 {
        return bad("batch strides must be >= 0".into());
    }
    if g.batch > 1 && g.stride_d < (g.m as i64) * g.ldd {
        return bad("stride_d would make output batches overlap".into());
    }
    if g.tf32 && g.dtype != DType::F32 {
        return bad("tf32 applies to float32 only".into());
    }
    Ok(())
}

/// Largest power of two (up to 256) dividing the address: what cuBLASLt may assume.
pub fn alignment(ptr: u64) -> u32 {
    if ptr == 0 {
        256
    } else {
        1u32 << ptr.trailing_zeros().min(8)
    }
}

/// Enqueue D = epilogue(A @ B) on `stream` of `device`.
///
/// # Safety
/// The pointers must be device addresses on `device` valid for the extents `g` describes (and
/// the bias for N elements when the epilogue has one), the workspace for `workspace_size`
/// bytes; they must stay valid until the work on `stream` completes, and `stream` must be a
/// live stream of `device`.
pub unsafe fn matmul(device: i32, stream: usize, g: &Gemm, p: &Ptrs) -> Result<()> {
    validate(g)?;
    if g.epilogue.has_bias() && p.bias == 0 {
        return Err(Error::invalid(format!(
            "matmul: epilogue {:?} needs a bias pointer",
            g.epilogue
        )));
    }
    let lt = loaded().ok_or_else(|| {
        Error::invalid("matmul: cuBLASLt is not loaded (call blas::load first)".to_string())
    })?;
    ensure_current(device)?;
    let h = plan::handle(lt, device)?;
    // Every batch's matrix must be as aligned as cuBLASLt is told: fold the batch strides in.
    let esize: u64 = match g.dtype {
        DType::F16 | DType::BF16 => 2,
        DType::F32 => 4,
        DType::F64 => 8,
    };
    let align = |ptr: u64, stride: i64| {
        let a = alignment(ptr);
        if g.batch > 1 && stride > 0 {
            a.min(alignment(stride as u64 * esize))
        } else {
            a
        }
    };
    let key = plan::Key {
        device,
        problem: plan::Problem::Gemm(*g),
        align: [
            align(p.a, g.stride_a),
            align(p.b, g.stride_b),
            align(p.d, g.stride_d),
        ],
        workspace_size: p.workspace_size,
    };
    let plan = plan::plan_for(key, |k| plan::build_plan(lt, h, k, g))?;
    let plan = plan.lock().unwrap_or_else(|p| p.into_inner());
    if g.epilogue.has_bias() {
        // The bias pointer changes per call; the descriptor is shared, hence the plan's lock.
        let f = lt.api.matmul_desc_set_attribute;
        let attr = sys::CUBLASLT_MATMUL_DESC_BIAS_POINTER;
        let call = "cublasLtMatmulDescSetAttribute";
        plan::set_attr(lt, call, f, plan.desc, attr, &p.bias)?;
    }
    let (one32, zero32, one64, zero64) = (1f32, 0f32, 1f64, 0f64);
    let (alpha, beta) = if g.dtype == DType::F64 {
        (
            &one64 as *const f64 as *const c_void,
            &zero64 as *const f64 as *const c_void,
        )
    } else {
        (
            &one32 as *const f32 as *const c_void,
            &zero32 as *const f32 as *const c_void,
        )
    };
    // SAFETY: forwarded from this function's contract.
    unsafe { plan::enqueue(lt, h, &plan, alpha, beta, p, stream) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gemm(m: u64, n: u64, k: u64) -> Gemm {
        Gemm {
            dtype: DType::BF16,
            m,
            n,
            k,
            batch: 1,
            a_trans: false,
            lda: k as i64,
            stride_a: 0,
            b_trans: false,
            ldb: n as i64,
            stride_b: 0,
            ldd: n as i64,
            stride_d: 0,
            epilogue: Epilogue::None,
            tf32: false,
        }
    }

    #[test]
    fn row_major_nn_is_col_major_nn_with_operands_swapped() {
        let cm = to_col_major(&gemm(8, 16, 32));
        assert_eq!((cm.transa, cm.transb), (sys::CUBLAS_OP_N, sys::CUBLAS_OP_N));
        assert_eq!((cm.a.rows, cm.a.cols, cm.a.ld), (16, 32, 16)); // B^T: N x K
        assert_eq!((cm.b.rows, cm.b.cols, cm.b.ld), (32, 8, 32)); // A^T: K x M
        assert_eq!((cm.d.rows, cm.d.cols, cm.d.ld), (16, 8, 16)); // D^T: N x M
    }

    #[test]
    fn linear_weight_transpose_maps_to_op_t() {
        // x[M,K] @ w.T with w [N,K] row-major: B = w.T is a transposed view with ldb = K.
        let mut g = gemm(4, 6, 10);
        g.b_trans = true;
        g.ldb = 10;
        let cm = to_col_major(&g);
        assert_eq!(cm.transa, sys::CUBLAS_OP_T);
        assert_eq!((cm.a.rows, cm.a.cols, cm.a.ld), (10, 6, 10));
        validate(&g).unwrap();
        g.a_trans = true;
        g.lda = 4;
        let cm = to_col_major(&g);
        assert_eq!(cm.transb, sys::CUBLAS_OP_T);
        assert_eq!((cm.b.rows, cm.b.cols), (4, 10));
        validate(&g).unwrap();
    }

    #[test]
    fn validation_names_the_bad_field() {
        let mut g = gemm(4, 6, 10);
        g.lda = 9;
        let e = validate(&g).unwrap_err().to_string();
        assert!(e.contains("lda = 9"), "{e}");
        let mut g = gemm(4, 6, 10);
        g.ldd = 5;
        assert!(validate(&g).unwrap_err().to_string().contains("ldd = 5"));
        let mut g = gemm(4, 6, 10);
        g.batch = 2;
        g.stride_d = 6;
        assert!(validate(&g).unwrap_err().to_string().contains("overlap"));
        let mut g = gemm(4, 6, 10);
        g.tf32 = true;
        assert!(validate(&g).unwrap_err().to_string().contains("tf32"));
        assert!(validate(&gemm(0, 1, 1)).is_err());
    }

    #[test]
    fn alignment_is_the_lowest_set_bit_capped() {
        assert_eq!(alignment(0x1000), 256);
        assert_eq!(alignment(0x1002), 2);
        assert_eq!(alignment(0x1010), 16);
        assert_eq!(alignment(0), 256);
    }

    #[test]
    fn names_parse() {
        assert_eq!(DType::parse("bfloat16"), Some(DType::BF16));
        assert_eq!(DType::parse("int8"), None);
        assert_eq!(
            Epilogue::parse("gelu_tanh_bias"),
            Some(Epilogue::GeluTanhBias)
        );
        assert!(Epilogue::GeluTanhBias.has_bias() && !Epilogue::Relu.has_bias());
        assert_eq!(Epilogue::parse("gelu"), None); // erf GELU is not a cuBLASLt epilogue
    }

    #[test]
    fn matmul_without_library_is_an_error_not_a_panic() {
        if loaded().is_some() {
            return;
        }
        let p = Ptrs::default();
        // SAFETY: returns before touching any pointer (the library is not loaded).
        let e = unsafe { matmul(0, 0, &gemm(2, 2, 2), &p) }.unwrap_err();
        assert!(e.to_string().contains("not loaded"), "{e}");
    }
}
