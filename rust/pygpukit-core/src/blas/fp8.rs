//! FP8 (e4m3 / e5m2) scaled matrix products on cuBLASLt.
//!
//! The problem, row-major as the Python side states it:
//! D[M,N] = (scale_a . A[M,K]) @ (scale_b . B[N,K])^T (+ bias[N]), A the activations and B the
//! weights, both K-major. That is the only form cuBLASLt's FP8 kernels take on Ada and Hopper
//! ("TN": cuBLASLt's A transposed, its B not): cuBLASLt's A is our B read column-major as
//! [K,N] with op T, its B our A read as [K,M] with op N, its D our D read as [N,M]. So
//! cuBLASLt's A scale is our scale_b and its B scale our scale_a.
//!
//! Scales are device fp32 values set through CUBLASLT_MATMUL_DESC_{A,B}_SCALE_POINTER; how many
//! and in which order is the operand's scale mode (CUBLASLT_MATMUL_DESC_{A,B}_SCALE_MODE,
//! cuBLASLt 12.9+), described here per operand with `rows` outer rows (M for A, N for B) and
//! L = ceil(K/128) (see [`ScaleMode::scale_len`]):
//! - `Tensor` (SCALAR_32F): one value.
//! - `Outer` (OUTER_VEC_32F): `rows` values, one per row of A / per row of B (column of D).
//! - `Block1x128` (VEC128_32F): one value per row and 128 elements of K, stored [L, rows] with
//!   the rows contiguous ("outer-dim-major", as torch._scaled_mm and TransformerEngine pass it).
//! - `Block128x128` (BLK128x128_32F): one value per 128x128 block, stored [ceil(rows/128), L4]
//!   with the K blocks contiguous and a row stride of L4 = round_up(L, 4) (16 bytes).
//!
//! Supported pairs (A, B) are those of cuBLASLt's scaling-mode table for Hopper, as torch lists
//! them: (Tensor, Tensor), (Outer, Outer), (Block1x128, Block128x128), (Block128x128,
//! Block1x128), (Block1x128, Block1x128). Dimensions: K % 16 == 0 and N % 16 == 0 (every FP8
//! matrix 16-byte aligned, cublasLtMatmul's FP8 requirements; torch checks the same), and under
//! block scaling M % 4 == 0: the Block1x128 scale of A has M-contiguous columns whose stride
//! public references state as M (torch) or round_up(M, 4) (TransformerEngine's GEMM-ready
//! scales); with M % 4 == 0 both agree. pygpukit/backends/native/matmul_fp8.py pads to meet these.
//!
//! Before asking cuBLASLt, a product the loaded library or the device cannot run is refused
//! with a message naming the modes, the library version and the compute capability; so is any
//! error cuBLASLt returns. Nothing falls back.

use std::ffi::c_void;
use std::sync::{Arc, Mutex};

use super::plan::{self, Plan, Problem};
use super::{alignment, loaded, sys, CublasLt, DType, Layout, Ptrs};
use crate::context::ensure_current;
use crate::device::device_properties;
use crate::error::{Error, Result};

/// cuBLASLt 12.9.0: the first version with the non-scalar scale modes.
pub const SCALE_MODES_VERSION: usize = 120900;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fp8 {
    E4M3,
    E5M2,
}

impl Fp8 {
    pub fn parse(s: &str) -> Option<Fp8> {
        Some(match s {
            "float8_e4m3fn" => Fp8::E4M3,
            "float8_e5m2" => Fp8::E5M2,
            _ => return None,
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            Fp8::E4M3 => "float8_e4m3fn",
            Fp8::E5M2 => "float8_e5m2",
        }
    }
    fn cuda(self) -> u32 {
        match self {
            Fp8::E4M3 => sys::CUDA_R_8F_E4M3,
            Fp8::E5M2 => sys::CUDA_R_8F_E5M2,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScaleMode {
    Tensor,
    Outer,
    Block1x128,
    Block128x128,
}

impl ScaleMode {
    pub fn parse(s: &str) -> Option<ScaleMode> {
        Some(match s {
            "tensor" => ScaleMode::Tensor,
            "outer" => ScaleMode::Outer,
            "block1x128" => ScaleMode::Block1x128,
            "block128x128" => ScaleMode::Block128x128,
            _ => return None,
        })
    }
    fn code(self) -> i32 {
        match self {
            ScaleMode::Tensor => sys::CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F,
            ScaleMode::Outer => sys::CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F,
            ScaleMode::Block1x128 => sys::CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F,
            ScaleMode::Block128x128 => sys::CUBLASLT_MATMUL_MATRIX_SCALE_BLK128X128_32F,
        }
    }
    /// The cublasLtMatmulMatrixScale_t name, for messages.
    pub fn cublas_name(self) -> &'static str {
        match self {
            ScaleMode::Tensor => "CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F",
            ScaleMode::Outer => "CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F",
            ScaleMode::Block1x128 => "CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F",
            ScaleMode::Block128x128 => "CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F",
        }
    }
    pub fn is_block(self) -> bool {
        matches!(self, ScaleMode::Block1x128 | ScaleMode::Block128x128)
    }
    /// fp32 values the scale of an operand with `rows` outer rows and inner dim `k` holds in
    /// cuBLASLt's layout (module docs), padding included.
    pub fn scale_len(self, rows: u64, k: u64) -> u64 {
        let l = k.div_ceil(128);
        match self {
            ScaleMode::Tensor => 1,
            ScaleMode::Outer => rows,
            ScaleMode::Block1x128 => rows * l,
            ScaleMode::Block128x128 => rows.div_ceil(128) * l.div_ceil(4) * 4,
        }
    }
}

/// The (A, B) = (activations, weights) scale-mode pairs cuBLASLt supports (module docs).
pub const PAIRS: [(ScaleMode, ScaleMode); 5] = [
    (ScaleMode::Tensor, ScaleMode::Tensor),
    (ScaleMode::Outer, ScaleMode::Outer),
    (ScaleMode::Block1x128, ScaleMode::Block128x128),
    (ScaleMode::Block128x128, ScaleMode::Block1x128),
    (ScaleMode::Block1x128, ScaleMode::Block1x128),
];

/// One FP8 product (module docs); leading dimensions in elements (bytes for the operands).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fp8Gemm {
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub a_type: Fp8,
    pub b_type: Fp8,
    pub out: DType,
    pub lda: i64,
    pub ldb: i64,
    pub ldd: i64,
    pub scale_a: ScaleMode,
    pub scale_b: ScaleMode,
    /// bias[N] of the result's dtype added to the fp32 accumulator before the one rounding.
    pub bias: bool,
    /// CUBLASLT_MATMUL_DESC_FAST_ACCUM: accumulate in the tensor cores' reduced precision
    /// without periodic promotion to fp32 (faster, less accurate; an explicit opt-in).
    pub fast_accum: bool,
}

/// Device addresses of one call (scales in the layouts of the module docs) and the workspace.
#[derive(Clone, Copy, Debug, Default)]
pub struct Fp8Ptrs {
    pub a: u64,
    pub b: u64,
    pub d: u64,
    pub scale_a: u64,
    pub scale_b: u64,
    pub bias: u64,
    pub workspace: u64,
    pub workspace_size: usize,
}

/// cuBLASLt's layouts (A_lt, B_lt, D_lt): our B as [K,N], our A as [K,M], our D as [N,M].
pub fn layouts(g: &Fp8Gemm) -> [Layout; 3] {
    let l = |rows, cols, ld| Layout {
        rows,
        cols,
        ld,
        batch_stride: 0,
    };
    [l(g.k, g.n, g.ldb), l(g.k, g.m, g.lda), l(g.n, g.m, g.ldd)]
}

fn out_size(d: DType) -> i64 {
    match d {
        DType::F16 | DType::BF16 => 2,
        DType::F32 => 4,
        DType::F64 => 8,
    }
}

/// Reject what cuBLASLt's FP8 kernels cannot take, naming the field (no library needed).
pub fn validate_fp8(g: &Fp8Gemm) -> Result<()> {
    let bad = |m: String| Err(Error::invalid(format!("matmul_fp8: {m} ({g:?})")));
    if g.m == 0 || g.n == 0 || g.k == 0 {
        return bad("M, N and K must be >= 1 (empty products are handled by the caller)".into());
    }
    if g.k % 16 != 0 {
        return bad(format!("K = {} must be a multiple of 16", g.k));
    }
    if g.n % 16 != 0 {
        return bad(format!(
            "N = {} must be a multiple of 16 (pad the weight rows)",
            g.n
        ));
    }
    if (g.scale_a.is_block() || g.scale_b.is_block()) && g.m % 4 != 0 {
        return bad(format!(
            "M = {} must be a multiple of 4 under block scaling (pad the activation rows)",
            g.m
        ));
    }
    if g.a_type == Fp8::E5M2 && g.b_type == Fp8::E5M2 {
        return bad(
            "float8_e5m2 x float8_e5m2 has no cuBLASLt kernel: make one operand \
                    float8_e4m3fn"
                .into(),
        );
    }
    for (name, ld) in [("lda", g.lda), ("ldb", g.ldb)] {
        if ld < g.k as i64 || ld % 16 != 0 {
            return bad(format!(
                "{name} = {ld} must be >= K and a multiple of 16 bytes"
            ));
        }
    }
    if !matches!(g.out, DType::F16 | DType::BF16 | DType::F32) {
        return bad("the result must be float16, bfloat16 or float32".into());
    }
    if g.ldd < g.n as i64 || (g.ldd * out_size(g.out)) % 16 != 0 {
        return bad(format!(
            "ldd = {} must be >= N and a multiple of 16 bytes",
            g.ldd
        ));
    }
    if !PAIRS.contains(&(g.scale_a, g.scale_b)) {
        return bad(format!(
            "scale modes (A {:?}, B {:?}) are not a pair cuBLASLt supports; pairs: {PAIRS:?}",
            g.scale_a, g.scale_b
        ));
    }
    if g.fast_accum && (g.scale_a.is_block() || g.scale_b.is_block()) {
        return bad("fast_accum is not available with block scaling".into());
    }
    if g.bias && g.out == DType::F32 {
        return bad(
            "a fused bias needs a float16 or bfloat16 result (cuBLASLt's FP8 bias for \
                    a float32 result is bfloat16)"
                .into(),
        );
    }
    Ok(())
}

/// A descriptor that passed [`validate_fp8`]. `build_plan` takes only this, so the plan cache
/// never holds a plan of an invalid descriptor, and a cache hit may skip validating.
#[derive(Clone, Copy)]
struct Validated<'a>(&'a Fp8Gemm);

fn validated(g: &Fp8Gemm) -> Result<Validated<'_>> {
    validate_fp8(g)?;
    Ok(Validated(g))
}

/// Why this library version or device capability cannot run `g`, known before asking
/// cuBLASLt (None: ask it).
pub fn unsupported_reason(g: &Fp8Gemm, version: usize, cap: Option<(i32, i32)>) -> Option<String> {
    if let Some(c) = cap {
        if c < (8, 9) {
            return Some(
                "FP8 matrix products need a GPU of compute capability 8.9 or newer".into(),
            );
        }
    }
    let modes = [g.scale_a, g.scale_b];
    if version < SCALE_MODES_VERSION && modes.iter().any(|m| *m != ScaleMode::Tensor) {
        return Some(format!(
            "scale modes other than SCALAR_32F need cuBLASLt {} or newer",
            version_string(SCALE_MODES_VERSION)
        ));
    }
    None
}

/// 130100 -> "13.1.0".
pub fn version_string(v: usize) -> String {
    format!("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100)
}

/// The product, its modes, the library and the device, for error messages.
pub fn describe(g: &Fp8Gemm, version: usize, path: &str, cap: Option<(i32, i32)>) -> String {
    let cap = cap.map_or("unknown".to_string(), |(a, b)| format!("{a}.{b}"));
    format!(
        "FP8 product M={} N={} K={} ({} x {} -> {:?}{}{}) with scale modes A (activations) \
         {}, B (weights) {}; cuBLASLt {} ({version}) at {path}; device compute capability \
         {cap} (OUTER_VEC_32F, VEC128_32F and BLK128x128_32F need cuBLASLt 12.9+ and a \
         Hopper GPU)",
        g.m,
        g.n,
        g.k,
        g.a_type.name(),
        g.b_type.name(),
        g.out,
        if g.bias { ", bias" } else { "" },
        if g.fast_accum { ", fast_accum" } else { "" },
        g.scale_a.cublas_name(),
        g.scale_b.cublas_name(),
        version_string(version),
    )
}

/// A cuBLASLt error with the product's description appended (other errors pass through).
fn explained(e: Error, g: &Fp8Gemm, lt: &CublasLt, cap: Option<(i32, i32)>) -> Error {
    match e {
        Error::Cuda {
            call,
            code,
            name,
            message,
        } => Error::Cuda {
            call,
            code,
            name,
            message: format!("{message}; {}", describe(g, lt.version, &lt.path, cap)),
        },
        other => other,
    }
}

fn capability(device: i32) -> Option<(i32, i32)> {
    device_properties(device).ok().map(|p| (p.major, p.minor))
}

fn set_desc<T>(lt: &CublasLt, plan: &Plan, attr: u32, value: &T) -> Result<()> {
    let f = lt.api.matmul_desc_set_attribute;
    plan::set_attr(
        lt,
        "cublasLtMatmulDescSetAttribute",
        f,
        plan.desc,
        attr,
        value,
    )
}

/// The per-call pointers (scales, bias) on the plan's descriptor.
fn set_pointers(lt: &CublasLt, plan: &Plan, g: &Fp8Gemm, p: &Fp8Ptrs) -> Result<()> {
    set_desc(
        lt,
        plan,
        sys::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
        &p.scale_b,
    )?;
    set_desc(
        lt,
        plan,
        sys::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
        &p.scale_a,
    )?;
    if g.bias {
        set_desc(lt, plan, sys::CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias)?;
    }
    Ok(())
}

fn build_plan(
    lt: &CublasLt,
    handle: usize,
    key: &plan::Key,
    g: Validated<'_>,
    p: &Fp8Ptrs,
    cap: Option<(i32, i32)>,
) -> Result<Plan> {
    let g = g.0;
    if let Some(why) = unsupported_reason(g, lt.version, cap) {
        let st = sys::CUBLAS_STATUS_NOT_SUPPORTED;
        return Err(Error::Cuda {
            call: "matmul_fp8",
            code: st as i32,
            name: sys::status_name(st).to_string(),
            message: why,
        });
    }
    let mut plan = plan::new_plan(lt, sys::CUBLAS_COMPUTE_32F, sys::CUDA_R_32F)?;
    set_desc(
        lt,
        &plan,
        sys::CUBLASLT_MATMUL_DESC_TRANSA,
        &sys::CUBLAS_OP_T,
    )?;
    set_desc(
        lt,
        &plan,
        sys::CUBLASLT_MATMUL_DESC_TRANSB,
        &sys::CUBLAS_OP_N,
    )?;
    // Modes are set only when not scalar: cuBLASLt before 12.9 has no such attribute, and
    // scalar is its only behaviour.
    if g.scale_b != ScaleMode::Tensor {
        let code = g.scale_b.code();
        set_desc(lt, &plan, sys::CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &code)?;
    }
    if g.scale_a != ScaleMode::Tensor {
        let code = g.scale_a.code();
        set_desc(lt, &plan, sys::CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &code)?;
    }
    if g.fast_accum {
        set_desc(lt, &plan, sys::CUBLASLT_MATMUL_DESC_FAST_ACCUM, &1i8)?;
    }
    if g.bias {
        let epi = sys::CUBLASLT_EPILOGUE_BIAS;
        set_desc(lt, &plan, sys::CUBLASLT_MATMUL_DESC_EPILOGUE, &epi)?;
    }
    // The heuristic sees the same descriptor a call uses, pointers included.
    set_pointers(lt, &plan, g, p)?;
    let types = [g.b_type.cuda(), g.a_type.cuda(), g.out.cuda()];
    for (i, (l, t)) in layouts(g).into_iter().zip(types).enumerate() {
        // On an error the plan's Drop destroys what exists (layouts not made stay 0).
        plan.layouts[i] = plan::make_layout(lt, t, l, 1)?;
    }
    let what = || format!("{g:?}");
    plan.algo = plan::heuristic(lt, handle, &plan, key, &what)?;
    Ok(plan)
}

/// Enqueue D = (scale_a . A) @ (scale_b . B)^T (+ bias) on `stream` of `device`.
///
/// # Safety
/// The pointers must be device addresses on `device` valid for the extents `g` describes: A
/// for M rows of stride lda, B for N rows of stride ldb, D for M rows of stride ldd, each scale
/// for `scale_len` fp32 values of its mode, the bias for N values, the workspace for
/// `workspace_size` bytes; they must stay valid until the work on `stream` completes, and
/// `stream` must be a live stream of `device`.
///
/// `g` is validated when its plan is not cached (first, so the error is the same on every call
/// of an invalid descriptor, which is never cached); a cached plan was built from a validated
/// descriptor, so a hit skips it. The pointer checks run on every call.
pub unsafe fn matmul_fp8(device: i32, stream: usize, g: &Fp8Gemm, p: &Fp8Ptrs) -> Result<()> {
    let key = plan_key(device, g, p);
    let lookup = match plan::cached(&key) {
        Some(plan) => Lookup::Hit(plan),
        None => Lookup::Miss(validated(g)?),
    };
    let named = [
        ("a", p.a),
        ("b", p.b),
        ("d", p.d),
        ("scale_a", p.scale_a),
        ("scale_b", p.scale_b),
    ];
    for (name, ptr) in named {
        if ptr == 0 {
            return Err(Error::invalid(format!(
                "matmul_fp8: {name} is a null pointer"
            )));
        }
    }
    if g.bias && p.bias == 0 {
        return Err(Error::invalid(
            "matmul_fp8: bias requested with a null bias pointer".to_string(),
        ));
    }
    let lt = loaded().ok_or_else(|| {
        Error::invalid("matmul_fp8: cuBLASLt is not loaded (call blas::load first)".to_string())
    })?;
    ensure_current(device)?;
    let h = plan::handle(lt, device)?;
    let plan = match lookup {
        Lookup::Hit(plan) => plan,
        Lookup::Miss(valid) => plan::plan_for(key, |k| {
            let cap = capability(device);
            build_plan(lt, h, k, valid, p, cap).map_err(|e| explained(e, g, lt, cap))
        })?,
    };
    let plan = plan.lock().unwrap_or_else(|p| p.into_inner());
    // Scale and bias pointers change per call; the descriptor is shared, hence the lock.
    set_pointers(lt, &plan, g, p)?;
    let (one, zero) = (1f32, 0f32);
    let alpha = &one as *const f32 as *const c_void;
    let beta = &zero as *const f32 as *const c_void;
    let ptrs = Ptrs {
        a: p.a,
        b: p.b,
        d: p.d,
        bias: p.bias,
        workspace: p.workspace,
        workspace_size: p.workspace_size,
    };
    // SAFETY: forwarded from this function's contract.
    unsafe { plan::enqueue(lt, h, &plan, alpha, beta, &ptrs, stream) }
        .map_err(|e| explained(e, g, lt, capability(device)))
}

/// The plan-cache key of a call: the descriptor, the device, the operands' alignments and the
/// workspace size (all that the chosen algorithm depends on).
fn plan_key(device: i32, g: &Fp8Gemm, p: &Fp8Ptrs) -> plan::Key {
    plan::Key {
        device,
        problem: Problem::Fp8(*g),
        align: [alignment(p.a), alignment(p.b), alignment(p.d)],
        workspace_size: p.workspace_size,
    }
}

/// The plan cache's answer for one call: the plan, or (on a miss) the validated descriptor to
/// build it from.
enum Lookup<'a> {
    Hit(Arc<Mutex<Plan>>),
    Miss(Validated<'a>),
}

#[cfg(test)]
#[path = "fp8_tests.rs"]
mod tests;
