//! Child processes and what they say: [`orchestrator`] runs a program isolated (its own process
//! group, a deadline, output read line by line, killed as a group on timeout, never outliving
//! gpuprobe); [`protocol`] is the JSON-lines protocol the probe children write (`probes/PROTOCOL.md`).
//!
//! Below both `probe`, which starts the probe children, and `host`, which records and replays
//! their output and runs the toolkits' version commands, so neither imports the other for it.

// Process groups, signals, the parent-death signal: `unsafe` here as in `crate::process`.
#[allow(unsafe_code)]
pub mod orchestrator;
pub mod protocol;
