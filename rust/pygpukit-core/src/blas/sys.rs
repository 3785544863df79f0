//! The part of the cuBLASLt C API this crate calls, declared by hand (no headers at build time).
//!
//! Enum values and signatures are copied from cudarc 0.19's generated bindings
//! (src/cublaslt/sys/mod.rs), which bindgen produced from cublasLt.h of CUDA 12.x/13.x; the
//! values used here are the same in every version from 12.0 to 13.x. Statuses and enums are
//! taken as plain integers so that a value this file does not know can never be undefined
//! behaviour.

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_void};

use libloading::Library;

use crate::dynlib::symbol;

pub type cublasStatus_t = u32;
pub type cublasLtHandle_t = *mut c_void;
pub type cublasLtMatmulDesc_t = *mut c_void;
pub type cublasLtMatrixLayout_t = *mut c_void;
pub type cublasLtMatmulPreference_t = *mut c_void;
pub type cudaStream_t = *mut c_void;

pub const CUBLAS_STATUS_SUCCESS: u32 = 0;
pub const CUBLAS_STATUS_NOT_SUPPORTED: u32 = 15;

// cublasComputeType_t
pub const CUBLAS_COMPUTE_32F: u32 = 68;
pub const CUBLAS_COMPUTE_32F_FAST_TF32: u32 = 77;
pub const CUBLAS_COMPUTE_64F: u32 = 70;

// cudaDataType_t
pub const CUDA_R_16F: u32 = 2;
pub const CUDA_R_16BF: u32 = 14;
pub const CUDA_R_32F: u32 = 0;
pub const CUDA_R_64F: u32 = 1;
pub const CUDA_R_8F_E4M3: u32 = 28;
pub const CUDA_R_8F_E5M2: u32 = 29;

// cublasOperation_t
pub const CUBLAS_OP_N: i32 = 0;
pub const CUBLAS_OP_T: i32 = 1;

// cublasLtMatmulDescAttributes_t
pub const CUBLASLT_MATMUL_DESC_TRANSA: u32 = 3;
pub const CUBLASLT_MATMUL_DESC_TRANSB: u32 = 4;
pub const CUBLASLT_MATMUL_DESC_EPILOGUE: u32 = 7;
pub const CUBLASLT_MATMUL_DESC_BIAS_POINTER: u32 = 8;
// FP8 (cublasLt.h of 12.9+/13.x; pointers are `const void *`, FAST_ACCUM an int8_t, the scale
// modes int32_t values of cublasLtMatmulMatrixScale_t).
pub const CUBLASLT_MATMUL_DESC_A_SCALE_POINTER: u32 = 17;
pub const CUBLASLT_MATMUL_DESC_B_SCALE_POINTER: u32 = 18;
pub const CUBLASLT_MATMUL_DESC_FAST_ACCUM: u32 = 25;
pub const CUBLASLT_MATMUL_DESC_A_SCALE_MODE: u32 = 31;
pub const CUBLASLT_MATMUL_DESC_B_SCALE_MODE: u32 = 32;

// cublasLtMatmulMatrixScale_t (cuBLASLt 12.9+; SCALAR_32F is the behaviour of older versions)
pub const CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F: i32 = 0;
pub const CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F: i32 = 3;
pub const CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F: i32 = 4;
pub const CUBLASLT_MATMUL_MATRIX_SCALE_BLK128X128_32F: i32 = 5;

// cublasLtEpilogue_t
pub const CUBLASLT_EPILOGUE_DEFAULT: u32 = 1;
pub const CUBLASLT_EPILOGUE_RELU: u32 = 2;
pub const CUBLASLT_EPILOGUE_BIAS: u32 = 4;
pub const CUBLASLT_EPILOGUE_RELU_BIAS: u32 = 6;
pub const CUBLASLT_EPILOGUE_GELU: u32 = 32;
pub const CUBLASLT_EPILOGUE_GELU_BIAS: u32 = 36;

// cublasLtMatrixLayoutAttribute_t
pub const CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: u32 = 5;
pub const CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: u32 = 6;

// cublasLtMatmulPreferenceAttributes_t
pub const CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: u32 = 1;
pub const CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: u32 = 5;
pub const CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: u32 = 6;
pub const CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: u32 = 7;
pub const CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: u32 = 8;

/// cublasLtMatmulAlgo_t: opaque, 64 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct cublasLtMatmulAlgo_t {
    pub data: [u64; 8],
}

/// cublasLtMatmulHeuristicResult_t.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct cublasLtMatmulHeuristicResult_t {
    pub algo: cublasLtMatmulAlgo_t,
    pub workspace_size: usize,
    pub state: cublasStatus_t,
    pub waves_count: f32,
    pub reserved: [c_int; 4],
}

type SetAttr = unsafe extern "C" fn(*mut c_void, u32, *const c_void, usize) -> cublasStatus_t;

/// Resolved entry points (function pointers stay valid while the library stays loaded, which
/// is for the life of the process).
pub struct Api {
    pub create: unsafe extern "C" fn(*mut cublasLtHandle_t) -> cublasStatus_t,
    pub get_version: unsafe extern "C" fn() -> usize,
    pub get_status_name: unsafe extern "C" fn(cublasStatus_t) -> *const c_char,
    pub get_status_string: unsafe extern "C" fn(cublasStatus_t) -> *const c_char,
    pub matmul_desc_create:
        unsafe extern "C" fn(*mut cublasLtMatmulDesc_t, u32, u32) -> cublasStatus_t,
    pub matmul_desc_destroy: unsafe extern "C" fn(cublasLtMatmulDesc_t) -> cublasStatus_t,
    pub matmul_desc_set_attribute: SetAttr,
    pub matrix_layout_create:
        unsafe extern "C" fn(*mut cublasLtMatrixLayout_t, u32, u64, u64, i64) -> cublasStatus_t,
    pub matrix_layout_destroy: unsafe extern "C" fn(cublasLtMatrixLayout_t) -> cublasStatus_t,
    pub matrix_layout_set_attribute: SetAttr,
    pub preference_create: unsafe extern "C" fn(*mut cublasLtMatmulPreference_t) -> cublasStatus_t,
    pub preference_destroy: unsafe extern "C" fn(cublasLtMatmulPreference_t) -> cublasStatus_t,
    pub preference_set_attribute: SetAttr,
    #[allow(clippy::type_complexity)]
    pub algo_get_heuristic: unsafe extern "C" fn(
        cublasLtHandle_t,
        cublasLtMatmulDesc_t,
        cublasLtMatrixLayout_t,
        cublasLtMatrixLayout_t,
        cublasLtMatrixLayout_t,
        cublasLtMatrixLayout_t,
        cublasLtMatmulPreference_t,
        c_int,
        *mut cublasLtMatmulHeuristicResult_t,
        *mut c_int,
    ) -> cublasStatus_t,
    #[allow(clippy::type_complexity)]
    pub matmul: unsafe extern "C" fn(
        cublasLtHandle_t,
        cublasLtMatmulDesc_t,
        *const c_void,
        *const c_void,
        cublasLtMatrixLayout_t,
        *const c_void,
        cublasLtMatrixLayout_t,
        *const c_void,
        *const c_void,
        cublasLtMatrixLayout_t,
        *mut c_void,
        cublasLtMatrixLayout_t,
        *const cublasLtMatmulAlgo_t,
        *mut c_void,
        usize,
        cudaStream_t,
    ) -> cublasStatus_t,
}

impl Api {
    /// Resolve every entry point, naming the first one missing.
    pub fn resolve(lib: &Library) -> std::result::Result<Api, String> {
        // SAFETY: each type below is the C signature of the named symbol (cublasLt.h), and the
        // library outlives the pointers (it is never unloaded).
        unsafe {
            Ok(Api {
                create: symbol(lib, "cublasLtCreate")?,
                get_version: symbol(lib, "cublasLtGetVersion")?,
                get_status_name: symbol(lib, "cublasLtGetStatusName")?,
                get_status_string: symbol(lib, "cublasLtGetStatusString")?,
                matmul_desc_create: symbol(lib, "cublasLtMatmulDescCreate")?,
                matmul_desc_destroy: symbol(lib, "cublasLtMatmulDescDestroy")?,
                matmul_desc_set_attribute: symbol(lib, "cublasLtMatmulDescSetAttribute")?,
                matrix_layout_create: symbol(lib, "cublasLtMatrixLayoutCreate")?,
                matrix_layout_destroy: symbol(lib, "cublasLtMatrixLayoutDestroy")?,
                matrix_layout_set_attribute: symbol(lib, "cublasLtMatrixLayoutSetAttribute")?,
                preference_create: symbol(lib, "cublasLtMatmulPreferenceCreate")?,
                preference_destroy: symbol(lib, "cublasLtMatmulPreferenceDestroy")?,
                preference_set_attribute: symbol(lib, "cublasLtMatmulPreferenceSetAttribute")?,
                algo_get_heuristic: symbol(lib, "cublasLtMatmulAlgoGetHeuristic")?,
                matmul: symbol(lib, "cublasLtMatmul")?,
            })
        }
    }
}

/// Status names of cublas_api.h, for messages when the library cannot say (and for tests).
pub fn status_name(s: cublasStatus_t) -> &'static str {
    match s {
        0 => "CUBLAS_STATUS_SUCCESS",
        1 => "CUBLAS_STATUS_NOT_INITIALIZED",
        3 => "CUBLAS_STATUS_ALLOC_FAILED",
        7 => "CUBLAS_STATUS_INVALID_VALUE",
        8 => "CUBLAS_STATUS_ARCH_MISMATCH",
        11 => "CUBLAS_STATUS_MAPPING_ERROR",
        13 => "CUBLAS_STATUS_EXECUTION_FAILED",
        14 => "CUBLAS_STATUS_INTERNAL_ERROR",
        15 => "CUBLAS_STATUS_NOT_SUPPORTED",
        16 => "CUBLAS_STATUS_LICENSE_ERROR",
        _ => "CUBLAS_STATUS_UNKNOWN",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_layouts_match_the_header() {
        // cublasLt.h: the algo is 8 x uint64 (64 bytes); the heuristic result adds a size_t,
        // the status, a float and int[4]: 64 + 8 + 4 + 4 + 16 = 96 bytes.
        assert_eq!(std::mem::size_of::<cublasLtMatmulAlgo_t>(), 64);
        assert_eq!(std::mem::size_of::<cublasLtMatmulHeuristicResult_t>(), 96);
    }

    #[test]
    fn status_names() {
        assert_eq!(status_name(15), "CUBLAS_STATUS_NOT_SUPPORTED");
        assert_eq!(status_name(999), "CUBLAS_STATUS_UNKNOWN");
    }
}
