//! gpuprobe: measures which CMake flags are safe and best for building llama.cpp on a machine's
//! GPUs. *What was measured or declared* ([`report`], [`probe`]) → *the plan* ([`resolve`],
//! [`plan`]) → *the output format* ([`emit`]); each stage is plain data and testable on its own.

pub mod build_facts;
pub mod check_build;
pub mod children;
pub mod cli;
pub mod commands;
pub mod devices;
pub mod emit;
pub mod error;
pub mod evidence;
pub mod files;
pub mod gguf;
pub mod host;
pub mod inference;
pub mod llama;
pub mod neutral;
pub mod node_labels;
pub mod plan;
pub mod platform;
pub mod prebuilt;
pub mod private_dir;
pub mod probe;
// Processes: groups, signals, the parent-death signal, _exit; `unsafe` only here and in the
// FFI modules (children::orchestrator, probe::cuda's driver layer).
#[allow(unsafe_code)]
pub mod process;
pub mod profiles;
pub mod published;
pub mod quirks;
pub mod report;
pub mod report_file;
pub mod resolve;
pub mod schema;
pub mod targets;
pub mod toml_file;
pub mod toolkits;
pub mod version;
pub mod workflow;

pub use error::{Error, Result};
