//! Finding and loading a CUDA library at run time (cuBLASLt, NVRTC), with no CUDA headers or
//! toolkit at build time.
//!
//! Search order: the library's environment variable (a file, or a directory holding one of the
//! sonames), then the directories the caller passes (the Python side finds the `nvidia-*` PyPI
//! wheels' lib directories), then the system: `$CUDA_HOME/lib64`, `$CUDA_PATH/lib64`,
//! `/usr/local/cuda/lib64`, then the plain sonames through the dynamic loader's own path.
//! A library that cannot be found is an error that names every place searched and why each
//! failed, never a panic.

use std::path::Path;

use libloading::Library;

use crate::error::Error;

/// What to look for: a display name, the environment variable, the sonames (newest first).
#[derive(Clone, Copy, Debug)]
pub struct LibSpec {
    pub display: &'static str,
    pub env_var: &'static str,
    pub sonames: &'static [&'static str],
    /// Hint appended to the not-found message (which wheel or package provides the library).
    pub hint: &'static str,
}

/// A loaded library, the path (or soname) it was loaded from, and what the caller's `accept`
/// made of it (its resolved entry points, valid while `lib` stays loaded).
pub struct Loaded<T> {
    pub lib: Library,
    pub path: String,
    pub resolved: T,
}

/// One place to try, and whether it is a filesystem path (checked for existence first) or a
/// bare soname for the dynamic loader's search.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Candidate {
    Path(String),
    Soname(String),
    /// The environment variable is unset: listed so the message says it was considered.
    EnvUnset(String),
}

fn expand(entry: &str, sonames: &[&str], out: &mut Vec<Candidate>) {
    let p = Path::new(entry);
    if p.is_dir() {
        for s in sonames {
            out.push(Candidate::Path(p.join(s).to_string_lossy().into_owned()));
        }
    } else {
        out.push(Candidate::Path(entry.to_string()));
    }
}

/// Every candidate in search order, duplicates removed. `env` is the environment variable's
/// value, `extra` the caller's directories or files, `cuda_homes` the values of CUDA_HOME and
/// CUDA_PATH (pure: the tests pass their own values).
pub fn candidates(
    spec: &LibSpec,
    env: Option<&str>,
    extra: &[String],
    cuda_homes: &[String],
) -> Vec<Candidate> {
    let mut out = Vec::new();
    match env {
        Some(v) if !v.is_empty() => expand(v, spec.sonames, &mut out),
        _ => out.push(Candidate::EnvUnset(spec.env_var.to_string())),
    }
    for e in extra {
        expand(e, spec.sonames, &mut out);
    }
    let mut system: Vec<String> = cuda_homes
        .iter()
        .filter(|h| !h.is_empty())
        .map(|h| Path::new(h).join("lib64").to_string_lossy().into_owned())
        .collect();
    system.push("/usr/local/cuda/lib64".to_string());
    for dir in system {
        for s in spec.sonames {
            out.push(Candidate::Path(
                Path::new(&dir).join(s).to_string_lossy().into_owned(),
            ));
        }
    }
    for s in spec.sonames {
        out.push(Candidate::Soname((*s).to_string()));
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|c| seen.insert(c.clone()));
    out
}

/// Try the candidates in order; the first that loads and passes `accept` wins, and what
/// `accept` returned for it comes back with it (entry points are resolved once, by `accept`).
/// On failure the message lists every candidate with the reason it was skipped.
pub fn load_first<T>(
    spec: &LibSpec,
    cands: &[Candidate],
    accept: impl Fn(&Library) -> std::result::Result<T, String>,
) -> std::result::Result<Loaded<T>, String> {
    let mut tried: Vec<String> = Vec::new();
    for c in cands {
        let (name, is_path) = match c {
            Candidate::EnvUnset(var) => {
                tried.push(format!("${var} (unset)"));
                continue;
            }
            Candidate::Path(p) => (p, true),
            Candidate::Soname(s) => (s, false),
        };
        if is_path && !Path::new(name).exists() {
            tried.push(format!("{name} (no such file)"));
            continue;
        }
        // SAFETY: loading a CUDA library runs its initialisers, which have no preconditions.
        match unsafe { Library::new(name.as_str()) } {
            Ok(lib) => match accept(&lib) {
                Ok(resolved) => {
                    return Ok(Loaded {
                        lib,
                        path: name.clone(),
                        resolved,
                    })
                }
                Err(why) => tried.push(format!("{name} ({why})")),
            },
            Err(e) => {
                // libloading's Display is only "dlopen failed"; the loader's text is the source.
                let why =
                    std::error::Error::source(&e).map_or_else(|| e.to_string(), |s| s.to_string());
                tried.push(format!("{name} (dlopen failed: {why})"))
            }
        }
    }
    Err(not_found_message(spec, &tried))
}

pub fn not_found_message(spec: &LibSpec, tried: &[String]) -> String {
    format!(
        "{} could not be loaded; searched, in order: {}. {}",
        spec.display,
        tried.join("; "),
        spec.hint
    )
}

/// A library that could not be loaded, as the core's error type: a CudaError in Python whose
/// call names the load ("load cuBLASLt") and whose message lists every place searched.
pub fn library_error(call: &'static str, message: String) -> Error {
    Error::Cuda {
        call,
        code: -1,
        name: "LIBRARY_NOT_FOUND".to_string(),
        message,
    }
}

/// The system part of the search: CUDA_HOME and CUDA_PATH from the environment.
pub fn cuda_homes_from_env() -> Vec<String> {
    ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .collect()
}

/// Search with the process environment: the spec's variable, `extra`, then the system.
pub fn search<T>(
    spec: &LibSpec,
    extra: &[String],
    accept: impl Fn(&Library) -> std::result::Result<T, String>,
) -> std::result::Result<Loaded<T>, String> {
    let env = std::env::var(spec.env_var).ok();
    let cands = candidates(spec, env.as_deref(), extra, &cuda_homes_from_env());
    load_first(spec, &cands, accept)
}

/// Copy a function pointer out of a library, naming the symbol when it is missing.
///
/// # Safety
/// `T` must be the exact `unsafe extern "C" fn` type of the symbol, and the returned pointer
/// must not outlive `lib` (callers keep their libraries loaded for the life of the process).
pub unsafe fn symbol<T: Copy>(lib: &Library, name: &str) -> std::result::Result<T, String> {
    // SAFETY: upheld by the caller.
    unsafe { lib.get::<T>(name.as_bytes()) }
        .map(|s| *s)
        .map_err(|e| format!("missing symbol {name}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: LibSpec = LibSpec {
        display: "libfoo (test)",
        env_var: "PYGPUKIT_FOO_PATH",
        sonames: &["libfoo-does-not-exist.so.13", "libfoo-does-not-exist.so"],
        hint: "Install foo.",
    };

    #[test]
    fn order_is_env_then_extra_then_system_then_sonames() {
        let extra = vec!["/nonexistent/wheel/lib".to_string()];
        let c = candidates(&SPEC, Some("/env/libfoo.so"), &extra, &["/opt/cuda".into()]);
        assert_eq!(c[0], Candidate::Path("/env/libfoo.so".into()));
        assert_eq!(c[1], Candidate::Path("/nonexistent/wheel/lib".into()));
        assert_eq!(
            c[2],
            Candidate::Path("/opt/cuda/lib64/libfoo-does-not-exist.so.13".into())
        );
        assert!(c.contains(&Candidate::Path(
            "/usr/local/cuda/lib64/libfoo-does-not-exist.so".into()
        )));
        let n = c.len();
        assert_eq!(
            &c[n - 2..],
            &[
                Candidate::Soname("libfoo-does-not-exist.so.13".into()),
                Candidate::Soname("libfoo-does-not-exist.so".into())
            ]
        );
    }

    #[test]
    fn directories_expand_to_sonames_and_duplicates_go() {
        let dir = std::env::temp_dir();
        let d = dir.to_string_lossy().into_owned();
        let c = candidates(&SPEC, Some(&d), std::slice::from_ref(&d), &[]);
        let first = Candidate::Path(dir.join(SPEC.sonames[0]).to_string_lossy().into_owned());
        assert_eq!(c[0], first);
        assert_eq!(c.iter().filter(|x| **x == first).count(), 1);
    }

    #[test]
    fn missing_library_names_every_place_searched() {
        let extra = vec!["/nonexistent/wheel/lib/libfoo.so".to_string()];
        let c = candidates(&SPEC, None, &extra, &["/opt/cuda-x".into()]);
        let err = match load_first(&SPEC, &c, |_| Ok(())) {
            Ok(_) => panic!("a library that does not exist loaded"),
            Err(e) => e,
        };
        assert!(
            err.starts_with("libfoo (test) could not be loaded"),
            "{err}"
        );
        assert!(err.contains("$PYGPUKIT_FOO_PATH (unset)"), "{err}");
        assert!(
            err.contains("/nonexistent/wheel/lib/libfoo.so (no such file)"),
            "{err}"
        );
        assert!(err.contains("/opt/cuda-x/lib64/libfoo-does-not-exist.so.13"));
        assert!(err.contains("/usr/local/cuda/lib64/libfoo-does-not-exist.so"));
        assert!(
            err.contains("libfoo-does-not-exist.so.13 (dlopen failed"),
            "{err}"
        );
        assert!(err.ends_with("Install foo."));
    }

    /// The winner's entry points come back from the one `accept` call that resolved them; a
    /// candidate that loads but lacks a symbol is skipped.
    #[test]
    fn accept_resolves_once_and_its_value_comes_back() {
        let cands = [
            Candidate::Soname("libc.so.6".into()), // no cos(): rejected
            Candidate::Soname("libm.so.6".into()),
        ];
        let calls = std::cell::Cell::new(0);
        type Cos = unsafe extern "C" fn(f64) -> f64;
        let found = load_first(&SPEC, &cands, |lib| {
            calls.set(calls.get() + 1);
            // SAFETY: cos has this C signature; the pointer is used while the library is held.
            unsafe { symbol::<Cos>(lib, "cos") }
        })
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(found.path, "libm.so.6");
        assert_eq!(calls.get(), 2);
        // SAFETY: `found.lib` keeps libm loaded.
        assert_eq!(unsafe { (found.resolved)(0.0) }, 1.0);
    }
}
