//! The part of the NVRTC C API this crate calls, declared by hand (no headers at build time).
//! Signatures and result values are copied from cudarc 0.19's generated bindings
//! (src/nvrtc/sys/mod.rs, bindgen over nvrtc.h of CUDA 12.x/13.x). Results are plain integers
//! so that a value this file does not know cannot be undefined behaviour.

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_void};

use libloading::Library;

use crate::dynlib::symbol;

pub type nvrtcResult = u32;
pub type nvrtcProgram = *mut c_void;

pub const NVRTC_SUCCESS: u32 = 0;
pub const NVRTC_ERROR_INVALID_OPTION: u32 = 5;
pub const NVRTC_ERROR_COMPILATION: u32 = 6;

type GetSize = unsafe extern "C" fn(nvrtcProgram, *mut usize) -> nvrtcResult;
type GetBytes = unsafe extern "C" fn(nvrtcProgram, *mut c_char) -> nvrtcResult;

pub struct Api {
    pub version: unsafe extern "C" fn(*mut c_int, *mut c_int) -> nvrtcResult,
    pub get_num_supported_archs: unsafe extern "C" fn(*mut c_int) -> nvrtcResult,
    pub get_supported_archs: unsafe extern "C" fn(*mut c_int) -> nvrtcResult,
    pub get_error_string: unsafe extern "C" fn(nvrtcResult) -> *const c_char,
    #[allow(clippy::type_complexity)]
    pub create_program: unsafe extern "C" fn(
        *mut nvrtcProgram,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> nvrtcResult,
    pub destroy_program: unsafe extern "C" fn(*mut nvrtcProgram) -> nvrtcResult,
    pub compile_program:
        unsafe extern "C" fn(nvrtcProgram, c_int, *const *const c_char) -> nvrtcResult,
    pub add_name_expression: unsafe extern "C" fn(nvrtcProgram, *const c_char) -> nvrtcResult,
    pub get_lowered_name:
        unsafe extern "C" fn(nvrtcProgram, *const c_char, *mut *const c_char) -> nvrtcResult,
    pub get_program_log_size: GetSize,
    pub get_program_log: GetBytes,
    pub get_ptx_size: GetSize,
    pub get_ptx: GetBytes,
    pub get_cubin_size: GetSize,
    pub get_cubin: GetBytes,
}

impl Api {
    /// Resolve every entry point, naming the first one missing.
    pub fn resolve(lib: &Library) -> std::result::Result<Api, String> {
        // SAFETY: each type is the C signature of the named symbol (nvrtc.h); the library is
        // never unloaded.
        unsafe {
            Ok(Api {
                version: symbol(lib, "nvrtcVersion")?,
                get_num_supported_archs: symbol(lib, "nvrtcGetNumSupportedArchs")?,
                get_supported_archs: symbol(lib, "nvrtcGetSupportedArchs")?,
                get_error_string: symbol(lib, "nvrtcGetErrorString")?,
                create_program: symbol(lib, "nvrtcCreateProgram")?,
                destroy_program: symbol(lib, "nvrtcDestroyProgram")?,
                compile_program: symbol(lib, "nvrtcCompileProgram")?,
                add_name_expression: symbol(lib, "nvrtcAddNameExpression")?,
                get_lowered_name: symbol(lib, "nvrtcGetLoweredName")?,
                get_program_log_size: symbol(lib, "nvrtcGetProgramLogSize")?,
                get_program_log: symbol(lib, "nvrtcGetProgramLog")?,
                get_ptx_size: symbol(lib, "nvrtcGetPTXSize")?,
                get_ptx: symbol(lib, "nvrtcGetPTX")?,
                get_cubin_size: symbol(lib, "nvrtcGetCUBINSize")?,
                get_cubin: symbol(lib, "nvrtcGetCUBIN")?,
            })
        }
    }
}

/// Result names of nvrtc.h, for error messages.
pub fn result_name(r: nvrtcResult) -> &'static str {
    match r {
        0 => "NVRTC_SUCCESS",
        1 => "NVRTC_ERROR_OUT_OF_MEMORY",
        2 => "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
        3 => "NVRTC_ERROR_INVALID_INPUT",
        4 => "NVRTC_ERROR_INVALID_PROGRAM",
        5 => "NVRTC_ERROR_INVALID_OPTION",
        6 => "NVRTC_ERROR_COMPILATION",
        7 => "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
        8 => "NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
        9 => "NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
        10 => "NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
        11 => "NVRTC_ERROR_INTERNAL_ERROR",
        _ => "NVRTC_ERROR_UNKNOWN",
    }
}
