//! Writing protocol events (probes/PROTOCOL.md) from a child: one JSON object per line, flushed
//! at once, so a hang or crash right after a line still leaves it with the parent. In the shared
//! CUDA child every device's thread has its own emitter, which tags each line with the device.

use std::io::Write;

use crate::children::protocol::{Cycle, Event, Message, Stage};
use crate::report::SmokeStage;

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

    pub fn emit(&mut self, event: impl Into<Event>) {
        let message = Message {
            device: self.device,
            event: event.into(),
        };
        // Through a JSON value, whose keys are sorted: the lines are byte for byte what they were
        // when the child built them as values.
        let Ok(v) = serde_json::to_value(&message) else {
            // Only `Event::Unknown` cannot be written, and no child writes it.
            debug_assert!(false, "unwritable event {message:?}");
            return;
        };
        // Whole lines in one write under stdout's lock: threads never interleave inside a line.
        let line = format!("{v}\n");
        let mut lock = self.out.lock();
        // A parent that went away makes writes fail; the child has nothing better to do then.
        let _ = lock.write_all(line.as_bytes());
        let _ = lock.flush();
    }

    /// Announces a stage before it starts (flushed, so a hang inside it still names it).
    pub fn stage(&mut self, stage: impl Into<SmokeStage>, cycle: u32, pool: u32, growth: u32) {
        self.emit(Event::Stage(Stage {
            stage: Some(stage.into()),
            cycle: Some(cycle),
            pool: Some(pool),
            growth: Some(growth),
        }));
    }

    pub fn cycle(&mut self, cycle: u32) {
        self.emit(Event::Cycle(Cycle { cycle: Some(cycle) }));
    }
}
