//! The operating systems a plan, a quirk, a target or a measured record can be for.

use serde::{Deserialize, Serialize};

// Where llama.cpp is built and run: `linux`, `windows`, or `wsl` (Linux under Windows, whose
// GPU driver is the Windows one). A plain comment: a doc comment would enter the schemas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Os {
    Linux,
    Windows,
    Wsl,
}

impl Os {
    /// `windows`, `wsl`, anything else is Linux (the OS names of a report's host).
    pub fn from_host(name: &str) -> Os {
        match name {
            "windows" => Os::Windows,
            "wsl" => Os::Wsl,
            _ => Os::Linux,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Os::Linux => "linux",
            Os::Windows => "windows",
            Os::Wsl => "wsl",
        }
    }
}
