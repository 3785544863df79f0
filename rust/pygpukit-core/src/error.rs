//! Errors of the core, and the one checker every CUDA driver status goes through.
//!
//! Convention (docs/design.md, "one error choke point per layer"): every `CUresult` is turned into an
//! `Error` by [`check`], which names the driver call and the error's name and description. Nothing
//! in this crate panics on a driver failure; failures travel as values.

use std::ffi::CStr;
use std::fmt;

use cudarc::driver::sys;

use crate::pool::PoolStats;

pub type Result<T> = std::result::Result<T, Error>;

#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// libcuda is missing, too old, `cuInit` failed, or no device is present.
    NoDriver {
        reason: String,
    },
    /// A driver call returned an error status.
    Cuda {
        call: &'static str,
        code: i32,
        name: String,
        message: String,
    },
    /// The allocator had no memory left, after the OOM ladder (trim, sync, trim, retry) if enabled.
    /// `device_free`/`device_total` come from cuMemGetInfo; `None` for host pools.
    OutOfMemory {
        requested: u64,
        context: String,
        /// CUDA ordinal of the pool, or -1 for host memory.
        device: i32,
        stats: Box<PoolStats>,
        device_free: Option<u64>,
        device_total: Option<u64>,
    },
    /// The allocation would take the pool over its quota; nothing was allocated.
    QuotaExceeded {
        requested: u64,
        context: String,
        quota: u64,
        current: u64,
    },
    InvalidArgument(String),
    /// The scheduler refused a context or a task; nothing was admitted. The numbers are those
    /// of the moment of the decision.
    Admission {
        /// What asked ("context 'llm'", "task 'etl-3' of context 'batch'").
        subject: String,
        reason: String,
        /// Bytes asked for (0 when the refusal is not about memory).
        requested: u64,
        /// The device's unreserved bytes.
        unreserved: u64,
        /// Who holds reservations: (context, bytes), in admission order.
        holders: Vec<(String, u64)>,
    },
    /// The call cannot be recorded into the CUDA graph its stream is capturing (a host copy: a
    /// replay would reread or overwrite a host buffer). Nothing was enqueued.
    NotCapturable(String),
    /// Errors recorded in destructors (Drop cannot return them), reported at the next
    /// `MemoryPool::allocate`. `omitted` counts errors beyond the kept list's cap.
    Deferred {
        errors: Vec<Error>,
        omitted: usize,
    },
}

impl Error {
    /// The CUDA status code when this is a driver error (also the first one of a deferred list).
    pub fn cuda_code(&self) -> Option<i32> {
        match self {
            Error::Cuda { code, .. } => Some(*code),
            Error::Deferred { errors, .. } => errors.iter().find_map(Error::cuda_code),
            _ => None,
        }
    }

    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidArgument(msg.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoDriver { reason } => write!(f, "CUDA driver unavailable: {reason}"),
            Error::Cuda {
                call,
                code,
                name,
                message,
            } => write!(f, "{call} failed: {name} (code {code}): {message}"),
            Error::OutOfMemory {
                requested,
                context,
                device,
                stats,
                device_free,
                device_total,
            } => {
                write!(
                    f,
                    "out of memory: could not allocate {requested} bytes in context '{context}' \
                     on device {device}"
                )?;
                match (device_free, device_total) {
                    (Some(fr), Some(to)) => write!(f, " (device free {fr} of {to} bytes)")?,
                    _ => write!(f, " (host memory)")?,
                }
                write!(f, "; pool stats: {stats}")
            }
            Error::QuotaExceeded {
                requested,
                context,
                quota,
                current,
            } => write!(
                f,
                "quota exceeded: allocating {requested} bytes in context '{context}' would exceed \
                 its quota of {quota} bytes (currently allocated: {current} bytes)"
            ),
            Error::InvalidArgument(msg) => write!(f, "invalid argument: {msg}"),
            Error::Admission {
                subject,
                reason,
                requested,
                unreserved,
                holders,
            } => write!(
                f,
                "admission refused for {subject}: {reason} (requested {requested} bytes; \
                 unreserved {unreserved} bytes; reservations held by {})",
                crate::scheduler::ledger::format_holders(holders)
            ),
            Error::NotCapturable(msg) => f.write_str(msg),
            Error::Deferred { errors, omitted } => {
                write!(f, "{} error(s) recorded in destructors:", errors.len())?;
                for (i, e) in errors.iter().enumerate() {
                    write!(f, " [{}] {e};", i + 1)?;
                }
                if *omitted > 0 {
                    write!(f, " ({omitted} further error(s) not kept)")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for Error {}

/// The one checker: turn a driver status into `Ok` or an `Error::Cuda` naming `call`.
///
/// Only called after libcuda was loaded and initialised (driver::init), so the error-name lookups
/// below cannot hit a missing library.
#[inline]
pub fn check(call: &'static str, r: sys::CUresult) -> Result<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(cuda_error(call, r))
    }
}

#[cold]
pub(crate) fn cuda_error(call: &'static str, r: sys::CUresult) -> Error {
    let (name, message) = error_strings(r);
    Error::Cuda {
        call,
        code: r as i32,
        name,
        message,
    }
}

fn error_strings(r: sys::CUresult) -> (String, String) {
    let mut name: *const std::ffi::c_char = std::ptr::null();
    let mut desc: *const std::ffi::c_char = std::ptr::null();
    // Without a loaded libcuda, cudarc's lazy symbol lookup would panic: fall back to the enum name.
    if crate::driver::library_loaded() {
        // SAFETY: both functions write a pointer to a static NUL-terminated string or leave it.
        unsafe {
            let _ = sys::cuGetErrorName(r, &mut name);
            let _ = sys::cuGetErrorString(r, &mut desc);
        }
    }
    let to_string = |p: *const std::ffi::c_char, fallback: String| {
        if p.is_null() {
            fallback
        } else {
            // SAFETY: non-null pointers from the driver point at static C strings.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    (
        to_string(name, format!("{r:?}")),
        to_string(desc, "unknown error".to_string()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_one_line_with_all_fields() {
        let e = Error::QuotaExceeded {
            requested: 10,
            context: "llm".into(),
            quota: 100,
            current: 95,
        };
        let s = e.to_string();
        assert!(s.contains("10") && s.contains("llm") && s.contains("100") && s.contains("95"));
        assert!(!s.contains('\n'));
        let e = Error::OutOfMemory {
            requested: 7,
            context: "c".into(),
            device: 0,
            stats: Box::default(),
            device_free: Some(1),
            device_total: Some(2),
        };
        let s = e.to_string();
        assert!(s.contains("7 bytes") && s.contains("'c'") && s.contains("free 1 of 2"));
        assert!(s.contains("num_ooms") && !s.contains('\n'));
        let e = Error::Cuda {
            call: "cuMemAllocFromPoolAsync",
            code: 2,
            name: "CUDA_ERROR_OUT_OF_MEMORY".into(),
            message: "out of memory".into(),
        };
        assert_eq!(
            e.to_string(),
            "cuMemAllocFromPoolAsync failed: CUDA_ERROR_OUT_OF_MEMORY (code 2): out of memory"
        );
    }

    #[test]
    fn success_is_ok() {
        assert!(check("cuInit", sys::CUresult::CUDA_SUCCESS).is_ok());
    }
}
