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
    #[error("{input}{}: {message}\n  fix: {fix}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Input {
        input: String,
        line: Option<usize>,
        message: String,
        fix: String,
    },
    /// A plan that cannot work (exit 1).
    #[error("no safe plan: {}", reasons.join("; "))]
    Refused { reasons: Vec<String> },
    /// The machine lacks something that was required (exit 3).
    #[error("{message}\n  fix: {fix}")]
    Environment { message: String, fix: String },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Input { .. } => exit::USAGE,
            Error::Refused { .. } => exit::PROBLEM,
            Error::Environment { .. } | Error::Io { .. } => exit::ENVIRONMENT,
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

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
