//! Writing protocol events (probes/PROTOCOL.md) from a child: one JSON object per line, flushed
//! at once, so a hang or crash right after a line still leaves it with the parent.

use std::io::Write;

use serde_json::{Value, json};

use crate::report::ApiError;

pub struct Emitter {
    out: std::io::Stdout,
}

impl Emitter {
    pub fn stdout() -> Self {
        Emitter {
            out: std::io::stdout(),
        }
    }

    pub fn emit(&mut self, v: Value) {
        let mut lock = self.out.lock();
        // A parent that went away makes writes fail; the child has nothing better to do then.
        let _ = writeln!(lock, "{v}");
        let _ = lock.flush();
    }

    /// Announces a stage before it starts (flushed, so a hang inside it still names it).
    pub fn stage(&mut self, stage: &str, cycle: u32, pool: u32, growth: u32) {
        self.emit(json!({"event":"stage","stage":stage,"cycle":cycle,"pool":pool,"growth":growth}));
    }

    pub fn cycle(&mut self, cycle: u32) {
        self.emit(json!({"event":"cycle","cycle":cycle}));
    }
}

pub fn api_error_json(e: &ApiError) -> Value {
    json!({"api": e.api, "code": e.code, "name": e.name, "message": e.message})
}
