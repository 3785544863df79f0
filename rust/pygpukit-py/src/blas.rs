//! cuBLASLt bindings: loading the library and one (batched) row-major matmul call.
//!
//! Thin: pygpukit/backends/native/matmul.py validates arrays, maps views to transposes and strides,
//! allocates the output and workspace from the pool, and passes raw addresses here. The GIL is
//! released around the cuBLASLt calls (plan building and the enqueue).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use pygpukit_core::blas::{self, DType, Epilogue, Fp8, Fp8Gemm, Fp8Ptrs, Gemm, Ptrs, ScaleMode};

use crate::errors::IntoPyResult;

/// Load cuBLASLt (once per process): `extra` are candidate directories or files searched after
/// $PYGPUKIT_CUBLASLT_PATH and before the system. Returns (path, version). Raises CudaError
/// (name LIBRARY_NOT_FOUND) naming every place searched.
#[pyfunction]
#[pyo3(signature = (extra=Vec::new()))]
pub fn cublaslt_load(py: Python<'_>, extra: Vec<String>) -> PyResult<(String, usize)> {
    let lt = py.detach(|| blas::load(&extra)).py()?;
    Ok((lt.path.clone(), lt.version))
}

/// (path, version) when cuBLASLt is loaded, else None.
#[pyfunction]
pub fn cublaslt_loaded() -> Option<(String, usize)> {
    blas::loaded().map(|lt| (lt.path.clone(), lt.version))
}

/// Number of cached matmul plans, and a way to drop them (tests, memory).
#[pyfunction]
pub fn cublaslt_plan_count() -> usize {
    blas::plan_count()
}

#[pyfunction]
pub fn cublaslt_clear_plans() {
    blas::clear_plans()
}

/// D[M,N] = epilogue(A[M,K] @ B[K,N]) for `batch` matrices, row-major, strides in elements
/// (see pygpukit_core::blas::Gemm). Enqueued on `stream` (a CUstream address) of `device`.
/// The caller guarantees the addresses are valid device memory for the extents described and
/// stay alive until the stream reaches this work.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (
    device, stream, dtype, m, n, k, batch,
    a, a_trans, lda, stride_a,
    b, b_trans, ldb, stride_b,
    d, ldd, stride_d,
    epilogue="none", bias=0, tf32=false, workspace=0, workspace_size=0,
))]
pub fn cublaslt_matmul(
    py: Python<'_>,
    device: i32,
    stream: usize,
    dtype: &str,
    m: u64,
    n: u64,
    k: u64,
    batch: i32,
    a: u64,
    a_trans: bool,
    lda: i64,
    stride_a: i64,
    b: u64,
    b_trans: bool,
    ldb: i64,
    stride_b: i64,
    d: u64,
    ldd: i64,
    stride_d: i64,
    epilogue: &str,
    bias: u64,
    tf32: bool,
    workspace: u64,
    workspace_size: usize,
) -> PyResult<()> {
    let dt = DType::parse(dtype).ok_or_else(|| {
        PyValueError::new_err(format!(
            "cublaslt_matmul: dtype must be float16, bfloat16, float32 or float64, got {dtype:?}"
        ))
    })?;
    let epi = Epilogue::parse(epilogue).ok_or_else(|| {
        PyValueError::new_err(format!(
            "cublaslt_matmul: epilogue must be none, bias, relu, relu_bias, gelu_tanh or \
             gelu_tanh_bias, got {epilogue:?}"
        ))
    })?;
    let g = Gemm {
        dtype: dt,
        m,
        n,
        k,
        batch,
        a_trans,
        lda,
        stride_a,
        b_trans,
        ldb,
        stride_b,
        ldd,
        stride_d,
        epilogue: epi,
        tf32,
    };
    let p = Ptrs {
        a,
        b,
        d,
        bias,
        workspace,
        workspace_size,
    };
    // SAFETY: the documented contract of this function (the Python caller passes addresses of
    // live pool arrays it keeps referenced until after the call is enqueued; frees are ordered
    // on the same stream).
    py.detach(|| unsafe { blas::matmul(device, stream, &g, &p) })
        .py()
}

/// D[M,N] = (scale_a . A[M,K]) @ (scale_b . B[N,K])^T (+ bias[N]): FP8 operands, both K-major
/// (row strides lda, ldb bytes), D row-major with row stride ldd, scales in the layouts of
/// pygpukit_core::blas::fp8 for their modes ("tensor", "outer", "block1x128",
/// "block128x128"). Enqueued on `stream` of `device`; the caller guarantees the addresses are
/// valid device memory for those extents and stay alive until the stream reaches this work.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (
    device, stream, m, n, k,
    a, a_type, lda, scale_a, scale_a_mode,
    b, b_type, ldb, scale_b, scale_b_mode,
    d, out_dtype, ldd,
    bias=0, fast_accum=false, workspace=0, workspace_size=0,
))]
pub fn cublaslt_matmul_fp8(
    py: Python<'_>,
    device: i32,
    stream: usize,
    m: u64,
    n: u64,
    k: u64,
    a: u64,
    a_type: &str,
    lda: i64,
    scale_a: u64,
    scale_a_mode: &str,
    b: u64,
    b_type: &str,
    ldb: i64,
    scale_b: u64,
    scale_b_mode: &str,
    d: u64,
    out_dtype: &str,
    ldd: i64,
    bias: u64,
    fast_accum: bool,
    workspace: u64,
    workspace_size: usize,
) -> PyResult<()> {
    let fp8 = |name: &str, v: &str| {
        Fp8::parse(v).ok_or_else(|| {
            PyValueError::new_err(format!(
                "cublaslt_matmul_fp8: {name} must be float8_e4m3fn or float8_e5m2, got {v:?}"
            ))
        })
    };
    let mode = |name: &str, v: &str| {
        ScaleMode::parse(v).ok_or_else(|| {
            PyValueError::new_err(format!(
                "cublaslt_matmul_fp8: {name} must be tensor, outer, block1x128 or \
                 block128x128, got {v:?}"
            ))
        })
    };
    let out = DType::parse(out_dtype).ok_or_else(|| {
        PyValueError::new_err(format!(
            "cublaslt_matmul_fp8: out_dtype must be float16, bfloat16 or float32, got \
             {out_dtype:?}"
        ))
    })?;
    let g = Fp8Gemm {
        m,
        n,
        k,
        a_type: fp8("a_type", a_type)?,
        b_type: fp8("b_type", b_type)?,
        out,
        lda,
        ldb,
        ldd,
        scale_a: mode("scale_a_mode", scale_a_mode)?,
        scale_b: mode("scale_b_mode", scale_b_mode)?,
        bias: bias != 0,
        fast_accum,
    };
    let p = Fp8Ptrs {
        a,
        b,
        d,
        scale_a,
        scale_b,
        bias,
        workspace,
        workspace_size,
    };
    // SAFETY: the documented contract of this function (the Python caller passes addresses of
    // live pool arrays it keeps referenced until after the call is enqueued).
    py.detach(|| unsafe { blas::matmul_fp8(device, stream, &g, &p) })
        .py()
}

/// fp32 values an operand's scale holds in cuBLASLt's layout for `mode` (padding included),
/// for an operand of `rows` outer rows and inner dim `k`.
#[pyfunction]
pub fn cublaslt_fp8_scale_len(mode: &str, rows: u64, k: u64) -> PyResult<u64> {
    let m = ScaleMode::parse(mode).ok_or_else(|| {
        PyValueError::new_err(format!("cublaslt_fp8_scale_len: unknown mode {mode:?}"))
    })?;
    Ok(m.scale_len(rows, k))
}
