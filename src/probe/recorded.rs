//! Probe children that can be recorded and replayed: live, a child is spawned through the
//! orchestrator and its outcome recorded in the host view (for `detect --dump`); in a replay
//! (`GPUPROBE_REPLAY`) the recorded outcome stands in and nothing runs.

use std::process::Command;
use std::time::Duration;

use crate::children::orchestrator::{self, Outcome, Running};
use crate::children::protocol::Hello;
use crate::host::HostView;

/// A child that is running, or whose outcome is already known (replayed, or it never started).
pub enum Started {
    Running { run: Box<Running>, key: String },
    Done(Outcome),
}

/// Starts the child `key` (`cuda device 0`, `hip peer 0 1`) with `cmd`, or replays it.
pub fn start(h: &HostView, key: &str, cmd: impl FnOnce() -> Command, timeout: Duration) -> Started {
    if let Some(o) = h.replayed_child(key) {
        return Started::Done(o);
    }
    match orchestrator::spawn(cmd(), timeout) {
        // Probe children end their report with `done`; nothing after it is worth waiting for.
        Ok(r) => Started::Running {
            run: Box::new(r.ends_at_done()),
            key: key.to_string(),
        },
        Err(e) => {
            let o = Outcome::spawn_failed(e);
            h.record_child(key, &o);
            Started::Done(o)
        }
    }
}

impl Started {
    /// Waits (until the deadline) for the child's `hello`.
    pub fn wait_for_hello(&mut self) -> Option<Hello> {
        match self {
            Started::Running { run, .. } => run.wait_for_hello(),
            Started::Done(o) => o.hello().cloned(),
        }
    }

    /// The child's whole outcome, recorded when it ran live.
    pub fn finish(self, h: &HostView) -> Outcome {
        match self {
            Started::Running { run, key } => {
                let o = run.finish();
                h.record_child(&key, &o);
                o
            }
            Started::Done(o) => o,
        }
    }
}
