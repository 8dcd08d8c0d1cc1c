//! Writing protocol events (probes/PROTOCOL.md) from a child: one JSON object per line, flushed
//! at once, so a hang or crash right after a line still leaves it with the parent. In the shared
//! CUDA child every device's thread has its own emitter, which tags each line with the device.

use std::io::Write;

use serde_json::{Value, json};

use crate::report::ApiError;

pub struct Emitter {
    out: std::io::Stdout,
    /// Added to every event as `device` (the shared child's per-device threads).
    device: Option<u32>,
}

impl Emitter {
    pub fn stdout() -> Self {
        Emitter {
            out: std::io::stdout(),
            device: None,
        }
    }

    /// An emitter whose events all carry `"device": index`.
    pub fn for_device(index: u32) -> Self {
        Emitter {
            out: std::io::stdout(),
            device: Some(index),
        }
    }

    pub fn emit(&mut self, mut v: Value) {
        if let (Some(d), Some(o)) = (self.device, v.as_object_mut()) {
            o.insert("device".into(), d.into());
        }
        // Whole lines in one write under stdout's lock: threads never interleave inside a line.
        let line = format!("{v}\n");
        let mut lock = self.out.lock();
        // A parent that went away makes writes fail; the child has nothing better to do then.
        let _ = lock.write_all(line.as_bytes());
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
