//! The library's error type. Each variant maps to one of the documented exit codes.

use std::path::PathBuf;

/// Exit codes, documented in `--help` and the README.
pub mod exit {
    pub const OK: i32 = 0;
    /// The probe found a problem that blocks a safe plan, or check-build found problems.
    pub const PROBLEM: i32 = 1;
    /// Bad input or usage.
    pub const USAGE: i32 = 2;
    /// Environment problem, such as no driver when one was required.
    pub const ENVIRONMENT: i32 = 3;
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Something a user gave us is wrong: names the input, the place and the fix.
    #[error("{}{}: {}\n  fix: {}", one(input), line.map(|l| format!(":{l}")).unwrap_or_default(), one(message), one(fix))]
    Input {
        input: String,
        line: Option<usize>,
        message: String,
        fix: String,
    },
    /// A plan that cannot work (exit 1).
    #[error("no safe plan: {}", one(&reasons.join("; ")))]
    Refused { reasons: Vec<String> },
    /// The machine lacks something that was required (exit 3).
    #[error("{}\n  fix: {}", one(message), one(fix))]
    Environment { message: String, fix: String },
    /// A file could not be read or written. The OS error is part of the message (and not a
    /// `source`, so that it is printed once).
    #[error("{}: cannot {action}: {error}\n  fix: {}", one(&path.display().to_string()), one(fix))]
    Io {
        path: PathBuf,
        action: &'static str,
        error: std::io::Error,
        fix: String,
    },
    /// Standard output was closed by its reader (`gpuprobe ... | head`): not an error to report.
    #[error("standard output was closed")]
    StdoutClosed,
}

impl Error {
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Input { .. } => exit::USAGE,
            Error::Refused { .. } => exit::PROBLEM,
            Error::Environment { .. } | Error::StdoutClosed => exit::ENVIRONMENT,
            // A path the user named that is missing, unreadable or of the wrong kind is bad
            // input; a failing disk or a full file system is the environment.
            Error::Io { error, .. } => {
                use std::io::ErrorKind as K;
                match error.kind() {
                    K::NotFound
                    | K::PermissionDenied
                    | K::IsADirectory
                    | K::NotADirectory
                    | K::InvalidInput
                    | K::InvalidData
                    | K::InvalidFilename
                    | K::ReadOnlyFilesystem
                    | K::AlreadyExists => exit::USAGE,
                    _ => exit::ENVIRONMENT,
                }
            }
        }
    }

    pub fn input(
        input: impl Into<String>,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Error::Input {
            input: input.into(),
            line: None,
            message: message.into(),
            fix: fix.into(),
        }
    }

    /// A failed read of `path`, with a fix that fits the OS error.
    pub fn io(path: impl Into<PathBuf>, error: std::io::Error) -> Self {
        Error::io_on(path, "read", error)
    }

    /// A failed `action` (`read`, `write`, `create`, `lock`...) on `path`.
    pub fn io_on(path: impl Into<PathBuf>, action: &'static str, error: std::io::Error) -> Self {
        use std::io::ErrorKind as K;
        let fix = match error.kind() {
            K::NotFound => "check the path (the file or its directory does not exist)",
            K::PermissionDenied => "check the permissions, or use a path you can access",
            K::IsADirectory => "give the path of a file, not a directory",
            K::NotADirectory => "a part of the path is a file, not a directory: check the path",
            K::StorageFull | K::QuotaExceeded => "free some disk space and run gpuprobe again",
            K::ReadOnlyFilesystem => "use a path on a writable file system",
            K::InvalidData => "give a UTF-8 text file",
            _ => "check the path and the file system, then run gpuprobe again",
        };
        Error::Io {
            path: path.into(),
            action,
            error,
            fix: fix.into(),
        }
    }
}

/// Every part of a message may hold input: each is shown on one line, control characters escaped
/// (a path with a newline cannot forge a second line, e.g. a workflow command in a CI log).
fn one(s: &str) -> std::borrow::Cow<'_, str> {
    crate::neutral::inline(s)
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
