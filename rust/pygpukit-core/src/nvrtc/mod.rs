//! NVRTC: compiling CUDA C++ source at run time (no toolkit at build time), and loading and
//! launching the result (`module`).
//!
//! `compile` returns the image (a CUBIN for a real architecture, PTX for a virtual one) and the
//! compiler's log. A source or option error is not an `Error`: it comes back as `Err(log)` inside
//! `Ok`, so the caller can raise it with the log as the message; `Error` is for the library
//! itself failing (not found, out of memory, internal errors).

pub mod module;
pub mod sys;

use std::ffi::{c_char, CStr, CString};
use std::sync::{Mutex, OnceLock};

use libloading::Library;

use crate::dynlib::{self, LibSpec};
use crate::error::{Error, Result};

pub const SPEC: LibSpec = LibSpec {
    display: "NVRTC (libnvrtc)",
    env_var: "PYGPUKIT_NVRTC_PATH",
    sonames: &["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"],
    hint: "Install the NVRTC wheel matching the driver (pip install nvidia-cuda-nvrtc for CUDA \
           13, nvidia-cuda-nvrtc-cu12 for CUDA 12) or the CUDA toolkit, or set \
           PYGPUKIT_NVRTC_PATH to the library file or its directory.",
};

pub struct Nvrtc {
    pub api: sys::Api,
    pub path: String,
    /// (major, minor) of the NVRTC library.
    pub version: (i32, i32),
    /// Real architectures it can compile for, e.g. [75, 80, 86, 89, 90, 100, 120].
    pub archs: Vec<i32>,
    _builtins: Vec<Library>,
    _lib: Library,
}

/// NVRTC opens libnvrtc-builtins by soname at compile time. A library loaded by path from a
/// directory that is not on the loader's path (a wheel, CUDA_HOME) may not find it there, so
/// load the builtins next to it first: the dynamic loader then matches the soname to the copy
/// already loaded. Best effort: a failure here only means NVRTC searches on its own.
fn preload_builtins(path: &str) -> Vec<Library> {
    let Some(dir) = std::path::Path::new(path)
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
    else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libnvrtc-builtins.so"))
        })
        .collect();
    names.sort();
    names
        .into_iter()
        // SAFETY: loading NVRTC's own builtins library runs no user code.
        .filter_map(|p| unsafe { Library::new(p.as_os_str()) }.ok())
        .collect()
}

static LOADED: OnceLock<Nvrtc> = OnceLock::new();
static LOAD_LOCK: Mutex<()> = Mutex::new(());

/// Load NVRTC once per process (see `dynlib` for the search order). Failures are not cached.
pub fn load(extra: &[String]) -> Result<&'static Nvrtc> {
    if let Some(n) = LOADED.get() {
        return Ok(n);
    }
    let _guard = LOAD_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(n) = LOADED.get() {
        return Ok(n);
    }
    // The candidate whose entry points all resolve wins; they are resolved this once.
    let found = dynlib::search(&SPEC, extra, sys::Api::resolve)
        .map_err(|m| dynlib::library_error("load NVRTC", m))?;
    let api = found.resolved;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: valid out-pointers.
    let r = unsafe { (api.version)(&mut major, &mut minor) };
    check_with(&api, "nvrtcVersion", r)?;
    let mut n = 0;
    // SAFETY: valid out-pointer.
    let r = unsafe { (api.get_num_supported_archs)(&mut n) };
    check_with(&api, "nvrtcGetNumSupportedArchs", r)?;
    let mut archs = vec![0i32; n.max(0) as usize];
    if n > 0 {
        // SAFETY: the buffer holds the number of entries NVRTC reported.
        let r = unsafe { (api.get_supported_archs)(archs.as_mut_ptr()) };
        check_with(&api, "nvrtcGetSupportedArchs", r)?;
    }
    let builtins = preload_builtins(&found.path);
    let nv = Nvrtc {
        api,
        path: found.path,
        version: (major, minor),
        archs,
        _builtins: builtins,
        _lib: found.lib,
    };
    Ok(LOADED.get_or_init(|| nv))
}

pub fn loaded() -> Option<&'static Nvrtc> {
    LOADED.get()
}

fn check_with(api: &sys::Api, call: &'static str, r: sys::nvrtcResult) -> Result<()> {
    if r == sys::NVRTC_SUCCESS {
        return Ok(());
    }
    Err(Error::Cuda {
        call,
        code: r as i32,
        name: sys::result_name(r).to_string(),
        message: error_string(api, r),
    })
}

fn error_string(api: &sys::Api, r: sys::nvrtcResult) -> String {
    // SAFETY: returns a pointer to a static string.
    let p = unsafe { (api.get_error_string)(r) };
    if p.is_null() {
        "unknown error".to_string()
    } else {
        // SAFETY: non-null pointers point at static C strings.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// The one checker for NVRTC results: names the call, the result and its description.
pub fn check(nv: &Nvrtc, call: &'static str, r: sys::nvrtcResult) -> Result<()> {
    check_with(&nv.api, call, r)
}

/// What a successful compile produced.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// CUBIN (an ELF image) or NUL-terminated PTX text.
    pub image: Vec<u8>,
    /// The compiler's log (warnings), possibly empty.
    pub log: String,
    /// For each requested name expression, the symbol to look up in the module.
    pub lowered: Vec<String>,
}

fn cstring(what: &str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::invalid(format!("{what} contains a NUL byte")))
}

/// A program that is destroyed on every path out of `compile`.
struct Program<'a> {
    nv: &'a Nvrtc,
    prog: sys::nvrtcProgram,
}

impl Drop for Program<'_> {
    fn drop(&mut self) {
        // SAFETY: created by nvrtcCreateProgram, destroyed once. A failure here leaks only
        // host memory of the compiler; nothing to report it to.
        let _ = unsafe { (self.nv.api.destroy_program)(&mut self.prog) };
    }
}

impl Program<'_> {
    fn bytes(
        &self,
        size_call: &'static str,
        get_size: unsafe extern "C" fn(sys::nvrtcProgram, *mut usize) -> u32,
        call: &'static str,
        get: unsafe extern "C" fn(sys::nvrtcProgram, *mut c_char) -> u32,
    ) -> Result<Vec<u8>> {
        let mut n = 0usize;
        // SAFETY: live program, valid out-pointer.
        check(self.nv, size_call, unsafe { get_size(self.prog, &mut n) })?;
        let mut buf = vec![0u8; n];
        if n > 0 {
            // SAFETY: the buffer has the size NVRTC reported.
            check(self.nv, call, unsafe {
                get(self.prog, buf.as_mut_ptr() as *mut c_char)
            })?;
        }
        Ok(buf)
    }

    fn log(&self) -> Result<String> {
        let api = &self.nv.api;
        let mut b = self.bytes(
            "nvrtcGetProgramLogSize",
            api.get_program_log_size,
            "nvrtcGetProgramLog",
            api.get_program_log,
        )?;
        while b.last() == Some(&0) {
            b.pop();
        }
        Ok(String::from_utf8_lossy(&b).trim_end().to_string())
    }
}

/// Compile `source`. `names` are name expressions (e.g. "&scale") whose lowered (mangled)
/// symbols come back in `Compiled::lowered`; `cubin` asks for a CUBIN (the options must then
/// name a real architecture, `-arch=sm_XY`), else PTX.
///
/// `Ok(Err(message))` when the source or the options are rejected: the message is NVRTC's log
/// (or its error string when the log is empty).
pub fn compile(
    source: &str,
    program_name: &str,
    options: &[String],
    names: &[String],
    cubin: bool,
) -> Result<std::result::Result<Compiled, String>> {
    let nv = loaded().ok_or_else(|| {
        Error::invalid("NVRTC is not loaded (call nvrtc::load first)".to_string())
    })?;
    let src = cstring("source", source)?;
    let pname = cstring("program name", program_name)?;
    let opts = options
        .iter()
        .map(|o| cstring("option", o))
        .collect::<Result<Vec<_>>>()?;
    let names_c = names
        .iter()
        .map(|n| cstring("name expression", n))
        .collect::<Result<Vec<_>>>()?;
    let mut prog: sys::nvrtcProgram = std::ptr::null_mut();
    // SAFETY: NUL-terminated strings; no headers.
    let r = unsafe {
        (nv.api.create_program)(
            &mut prog,
            src.as_ptr(),
            pname.as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    check(nv, "nvrtcCreateProgram", r)?;
    let p = Program { nv, prog };
    for n in &names_c {
        // SAFETY: live program, NUL-terminated expression.
        check(nv, "nvrtcAddNameExpression", unsafe {
            (nv.api.add_name_expression)(p.prog, n.as_ptr())
        })?;
    }
    let ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
    // SAFETY: live program; `ptrs` holds opts.len() NUL-terminated strings.
    let r = unsafe { (nv.api.compile_program)(p.prog, ptrs.len() as i32, ptrs.as_ptr()) };
    let log = p.log()?;
    if r == sys::NVRTC_ERROR_COMPILATION || r == sys::NVRTC_ERROR_INVALID_OPTION {
        let msg = if log.is_empty() {
            format!("{}: {}", sys::result_name(r), error_string(&nv.api, r))
        } else {
            log
        };
        return Ok(Err(msg));
    }
    check(nv, "nvrtcCompileProgram", r)?;
    let mut lowered = Vec::with_capacity(names_c.len());
    for n in &names_c {
        let mut out: *const c_char = std::ptr::null();
        // SAFETY: live, compiled program; the returned string lives as long as the program,
        // and is copied before the program is destroyed.
        let r = unsafe { (nv.api.get_lowered_name)(p.prog, n.as_ptr(), &mut out) };
        if r == 10 || out.is_null() {
            // NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID: no such function; a user error.
            return Ok(Err(format!(
                "{}: NVRTC found no function for the name expression {}",
                sys::result_name(r),
                n.to_string_lossy()
            )));
        }
        check(nv, "nvrtcGetLoweredName", r)?;
        // SAFETY: non-null, NUL-terminated, alive until the program is destroyed.
        lowered.push(
            unsafe { CStr::from_ptr(out) }
                .to_string_lossy()
                .into_owned(),
        );
    }
    let api = &nv.api;
    let image = if cubin {
        p.bytes(
            "nvrtcGetCUBINSize",
            api.get_cubin_size,
            "nvrtcGetCUBIN",
            api.get_cubin,
        )?
    } else {
        p.bytes(
            "nvrtcGetPTXSize",
            api.get_ptx_size,
            "nvrtcGetPTX",
            api.get_ptx,
        )?
    };
    if image.is_empty() {
        return Ok(Err(format!(
            "NVRTC produced no {} (compile for a real architecture, -arch=sm_XY, to get a CUBIN)",
            if cubin { "CUBIN" } else { "PTX" }
        )));
    }
    Ok(Ok(Compiled {
        image,
        log: p.log()?,
        lowered,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_names() {
        assert_eq!(sys::result_name(6), "NVRTC_ERROR_COMPILATION");
        assert_eq!(sys::result_name(77), "NVRTC_ERROR_UNKNOWN");
    }

    #[test]
    fn compile_without_library_is_an_error_not_a_panic() {
        if loaded().is_some() {
            return;
        }
        let e = compile("", "x.cu", &[], &[], true).unwrap_err();
        assert!(e.to_string().contains("not loaded"), "{e}");
    }

    #[test]
    fn missing_library_error_names_the_env_var() {
        // A search over candidates that cannot exist, through the same message builder.
        let cands = dynlib::candidates(&SPEC, Some("/nonexistent/libnvrtc.so.13"), &[], &[]);
        let Err(msg) = dynlib::load_first(&SPEC, &cands[..1], |_| Ok(())) else {
            panic!("loaded a file that does not exist");
        };
        assert!(
            msg.contains("/nonexistent/libnvrtc.so.13 (no such file)"),
            "{msg}"
        );
        assert!(msg.contains("PYGPUKIT_NVRTC_PATH"), "{msg}");
    }
}
