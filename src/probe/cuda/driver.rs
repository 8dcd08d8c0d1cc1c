//! The driver library, loaded at run time: a missing symbol is an error value for the call that
//! needs it (old drivers lack the VMM entry points), not a failed start. The calls themselves are
//! `calls.rs`.

use std::ffi::{CStr, c_char};

use super::sys;
use crate::report::ApiError;

/// Library names tried in order. `GPUPROBE_LIBCUDA` overrides (tests point it at a fake driver).
#[cfg(not(windows))]
const CANDIDATES: &[&str] = &["libcuda.so.1", "libcuda.so"];
#[cfg(windows)]
const CANDIDATES: &[&str] = &["nvcuda.dll"];

pub struct Driver {
    lib: sys::CudaDriver,
}

/// dlerror's text names the file it tried (as asked, or the path it resolved); prefix the name
/// only where it does not.
fn naming_once(name: &str, message: &str) -> String {
    let file = std::path::Path::new(name)
        .file_name()
        .map_or(name.into(), |f| f.to_string_lossy());
    if message.contains(file.as_ref()) {
        message.to_string()
    } else {
        format!("{name}: {message}")
    }
}

impl Driver {
    pub fn load() -> Result<Driver, String> {
        let names: Vec<String> = match std::env::var("GPUPROBE_LIBCUDA") {
            Ok(p) if !p.is_empty() => vec![p],
            _ => CANDIDATES.iter().map(|s| s.to_string()).collect(),
        };
        let mut first_error = None;
        for name in &names {
            // SAFETY: loading a shared library runs its initialisers; libcuda's are what every
            // CUDA program runs, and this happens only in the isolated child process.
            match unsafe { sys::CudaDriver::new(name) } {
                Ok(lib) => return Ok(Driver { lib }),
                Err(e) => {
                    let message =
                        std::error::Error::source(&e).map_or(e.to_string(), |s| s.to_string());
                    first_error.get_or_insert_with(|| naming_once(name, &message));
                }
            }
        }
        // The driver's own name (libcuda.so.1) failed first; the fallbacks failing too says
        // nothing more.
        Err(first_error.unwrap_or_else(|| "no library name to load".into()))
    }

    pub fn raw(&self) -> &sys::CudaDriver {
        &self.lib
    }

    pub fn missing(&self, api: &str) -> ApiError {
        ApiError {
            api: api.trim_end_matches("_v2").to_string(),
            code: -1,
            name: Some(ApiError::SYMBOL_NOT_FOUND.into()),
            message: Some("this driver does not export the function (driver too old?)".into()),
        }
    }

    pub fn check(&self, api: &str, r: sys::CUresult) -> Result<(), ApiError> {
        if r == sys::CUDA_SUCCESS {
            return Ok(());
        }
        Err(ApiError {
            api: api.trim_end_matches("_v2").to_string(),
            code: i64::from(r),
            name: self.error_name(r),
            message: self.error_string(r),
        })
    }

    fn error_name(&self, r: sys::CUresult) -> Option<String> {
        let f = self.lib.cuGetErrorName.as_ref().ok()?;
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: p receives a pointer to a static string owned by the driver.
        let ok = unsafe { f(r, &mut p) } == sys::CUDA_SUCCESS && !p.is_null();
        // SAFETY: non-null, NUL-terminated static string from the driver.
        ok.then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }

    fn error_string(&self, r: sys::CUresult) -> Option<String> {
        let f = self.lib.cuGetErrorString.as_ref().ok()?;
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: as in error_name.
        let ok = unsafe { f(r, &mut p) } == sys::CUDA_SUCCESS && !p.is_null();
        // SAFETY: as in error_name.
        ok.then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::naming_once;

    #[test]
    fn the_library_is_named_once() {
        assert_eq!(
            naming_once(
                "libcuda.so.1",
                "libcuda.so.1: cannot open shared object file: No such file or directory"
            ),
            "libcuda.so.1: cannot open shared object file: No such file or directory"
        );
        assert_eq!(
            naming_once(
                "libcuda.so.1",
                "/usr/local/nvidia/lib64/libcuda.so.1: file too short"
            ),
            "/usr/local/nvidia/lib64/libcuda.so.1: file too short"
        );
        assert_eq!(
            naming_once("/opt/x/libcuda.so.1", "undefined symbol: cuInit"),
            "/opt/x/libcuda.so.1: undefined symbol: cuInit"
        );
    }
}
