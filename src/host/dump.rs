//! `gpuprobe detect --dump FILE`: one JSON file holding every input gpuprobe read on this machine
//! (kernel files, identity as numbers, relevant environment, toolkit `--version` outputs, HIP
//! probe builds, the probe children's raw output) and the report it made from them, redacted.
//! `GPUPROBE_REPLAY=FILE` replays it into the same report; `tests/dumps.rs` replays every dump
//! under `tests/fixtures/`.
//!
//! Redaction replaces, everywhere in the file (keys included): the user's name and home
//! directory, the host name, and hardware serial numbers (KFD `unique_id`, NVIDIA GPU UUIDs, DRM
//! serial numbers) with stable placeholders, so that what depended on them (a UUID in
//! `ROCR_VISIBLE_DEVICES` naming a GPU) still replays the same.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{HostView, Inputs};
use crate::error::Error;
use crate::report::Report;

pub const SCHEMA: &str = "gpuprobe.dump/v1";
const MAX_DUMP: u64 = 32 << 20;

/// The probe options the dump was taken with; a replay uses them, since the recorded children
/// ran with them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Options {
    /// `auto`, `cuda` or `hip`.
    pub backend: crate::report::BackendChoice,
    pub smoke: bool,
    pub timeout_s: f64,
    pub cycles: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dump {
    pub schema: String,
    pub gpuprobe_version: String,
    pub options: Options,
    /// What was replaced, by kind (`user name`, `2 serial numbers`); never the values.
    pub redacted: Vec<String>,
    pub inputs: Inputs,
    /// The report gpuprobe made from these inputs (redacted like them).
    pub report: Report,
}

/// Reads and checks a dump; errors name the file and the fix (exit 2).
pub fn load(path: &Path) -> Result<Dump, Error> {
    let shown = path.display().to_string();
    let input = format!("{} {shown}", super::REPLAY_ENV);
    // A regular file only (a FIFO would block), bounded before it is parsed.
    let bytes = crate::files::read_bytes(path, MAX_DUMP).map_err(|e| {
        Error::input(
            &input,
            format!("cannot read: {e}"),
            "point it at a file written by `gpuprobe detect --dump FILE`",
        )
    })?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|e| Error::Input {
        input: input.clone(),
        line: Some(e.line()),
        message: format!("not JSON: {e}"),
        fix: "point it at a file written by `gpuprobe detect --dump FILE`".into(),
    })?;
    let schema = value.get("schema").and_then(Value::as_str).unwrap_or("");
    if schema != SCHEMA {
        return Err(Error::input(
            &input,
            format!("schema is `{schema}`, this gpuprobe replays `{SCHEMA}`"),
            "take the dump again with this gpuprobe: `gpuprobe detect --dump FILE`",
        ));
    }
    // The dump format itself has no published schema; the report it carries has one.
    if let Some(report) = value.get("report") {
        crate::published::enforce(
            crate::published::Document::Report,
            report,
            &format!("{input} (its report)"),
        )?;
    }
    serde_json::from_value(value).map_err(|e| {
        Error::input(
            &input,
            format!("does not match the dump schema: {e}"),
            "take the dump again with `gpuprobe detect --dump FILE`",
        )
    })
}

/// A view that answers from `dump`.
pub fn view(dump: &Dump, origin: &str) -> HostView {
    HostView::replay(dump.inputs.clone(), origin)
}

/// Redacts `dump` and writes it whole (atomically, through `files::write_atomic`), or not at all.
pub fn write(path: &Path, dump: Dump) -> Result<Dump, Error> {
    let redactor = Redactor::for_machine(&dump.inputs);
    let redacted = redactor.apply(dump)?;
    let text = serde_json::to_string_pretty(&redacted)
        .map_err(|e| Error::input("--dump", format!("cannot encode: {e}"), "report this bug"))?;
    crate::files::write_atomic(path, (text + "\n").as_bytes(), "--dump")?;
    Ok(redacted)
}

/// Replacements applied to every string of a dump.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// (value, placeholder, whole word only, kind), longest values first.
    pairs: Vec<(String, String, bool, String)>,
    /// The kinds that replaced something.
    hits: std::cell::RefCell<Vec<String>>,
}

impl Redactor {
    /// What identifies this machine or its user, found in the process environment and in the
    /// inputs themselves.
    pub fn for_machine(inputs: &Inputs) -> Self {
        let mut r = Redactor::default();
        // `/root` names no one; a home below /home does.
        if let Some(home) = std::env::var("HOME")
            .ok()
            .map(|h| h.trim_end_matches('/').to_string())
            .filter(|h| h.len() > 1 && h != "/root")
        {
            r.add(&home, "/home/<user>", true, "home directory");
        }
        for var in ["USER", "LOGNAME", "SUDO_USER"] {
            if let Ok(u) = std::env::var(var)
                && u.len() >= 2
                && u != "root"
            {
                r.add(&u, "<user>", true, "user name");
            }
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .map(|h| h.trim().to_string())
            .filter(|h| h.len() >= 2 && h != "localhost");
        if let Some(h) = host {
            r.add(&h, "<host>", true, "host name");
        }
        r.add_serials(inputs);
        r
    }

    pub fn add(&mut self, value: &str, placeholder: &str, whole_word: bool, kind: &str) {
        if value.is_empty() || self.pairs.iter().any(|(v, ..)| v == value) {
            return;
        }
        self.pairs.push((
            value.to_string(),
            placeholder.to_string(),
            whole_word,
            kind.to_string(),
        ));
        self.pairs.sort_by_key(|p| std::cmp::Reverse(p.0.len()));
    }

    /// KFD `unique_id` (decimal in `properties`, hex in ROCm's `GPU-` UUIDs), NVIDIA `GPU UUID`,
    /// DRM `serial_number` and `unique_id` files.
    fn add_serials(&mut self, inputs: &Inputs) {
        let mut n = 0u64;
        for (path, text) in &inputs.files {
            let Some(text) = text else { continue };
            if path.ends_with("/properties") {
                for l in text.lines() {
                    if let Some(v) = l.strip_prefix("unique_id ")
                        && let Ok(id) = v.trim().parse::<u64>()
                        && id != 0
                    {
                        n += 1;
                        let k = n;
                        // A stand-in that is still a number, so the replay parses it the same.
                        let fake = 0x6770_7500_0000_0000u64 + k;
                        self.add(&id.to_string(), &fake.to_string(), true, "serial numbers");
                        // ROCm's device UUID: `GPU-` and the id in hex.
                        for form in [format!("GPU-{id:016x}"), format!("GPU-{id:016X}")] {
                            self.add(&form, &format!("GPU-{fake:016x}"), true, "serial numbers");
                        }
                    }
                }
            } else if path.ends_with("/information") {
                for l in text.lines() {
                    if let Some(v) = l.strip_prefix("GPU UUID:") {
                        let uuid = v.trim();
                        if let Some(body) = uuid.strip_prefix("GPU-")
                            && body.len() >= 8
                        {
                            n += 1;
                            let k = n;
                            self.add(
                                uuid,
                                &format!("GPU-00000000-0000-0000-0000-{k:012}"),
                                true,
                                "serial numbers",
                            );
                        }
                    }
                }
            } else if path.ends_with("/serial_number") || path.ends_with("/device/unique_id") {
                let v = text.trim();
                if v.len() >= 4 {
                    n += 1;
                    let k = n;
                    self.add(v, &format!("SERIAL{k}"), true, "serial numbers");
                }
            }
        }
    }

    pub fn apply(&self, dump: Dump) -> Result<Dump, Error> {
        let mut v = serde_json::to_value(&dump).map_err(|e| {
            Error::input("--dump", format!("cannot encode: {e}"), "report this bug")
        })?;
        self.walk(&mut v);
        let mut out: Dump = serde_json::from_value(v).map_err(|e| {
            Error::input("--dump", format!("cannot encode: {e}"), "report this bug")
        })?;
        out.redacted = self.hits.borrow().clone();
        Ok(out)
    }

    fn walk(&self, v: &mut Value) {
        match v {
            Value::String(s) => *s = self.text(s),
            Value::Array(a) => a.iter_mut().for_each(|x| self.walk(x)),
            Value::Object(o) => {
                let old = std::mem::take(o);
                for (k, mut x) in old {
                    self.walk(&mut x);
                    o.insert(self.text(&k), x);
                }
            }
            _ => {}
        }
    }

    /// `s` with every value replaced.
    pub fn text(&self, s: &str) -> String {
        let mut out = s.to_string();
        for (value, placeholder, whole_word, kind) in &self.pairs {
            let next = if *whole_word {
                replace_words(&out, value, placeholder)
            } else {
                out.replace(value.as_str(), placeholder)
            };
            if next != out {
                let mut hits = self.hits.borrow_mut();
                if !hits.contains(kind) {
                    hits.push(kind.clone());
                }
            }
            out = next;
        }
        out
    }
}

/// Replaces `word` where it is not part of a longer name (letters, digits, `_` or `-` next to it
/// would make it one).
fn replace_words(s: &str, word: &str, with: &str) -> String {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(word) {
        let before = rest[..i].chars().next_back();
        let after = rest[i + word.len()..].chars().next();
        let bounded = before.is_none_or(|c| !is_name(c)) && after.is_none_or(|c| !is_name(c));
        out.push_str(&rest[..i]);
        out.push_str(if bounded { with } else { word });
        rest = &rest[i + word.len()..];
    }
    out.push_str(rest);
    out
}

/// The dump's files grouped by top folder, for a short summary line.
pub fn summary(d: &Dump) -> String {
    let mut by: BTreeMap<&str, usize> = BTreeMap::new();
    for (p, v) in &d.inputs.files {
        if v.is_some() {
            let top = p.trim_start_matches('/').split('/').next().unwrap_or("");
            *by.entry(top).or_default() += 1;
        }
    }
    let files: Vec<String> = by.iter().map(|(k, n)| format!("{n} under /{k}")).collect();
    format!(
        "{} files ({}), {} probe runs, {} toolkit outputs, {} probe builds",
        d.inputs.files.values().filter(|v| v.is_some()).count(),
        if files.is_empty() {
            "none".into()
        } else {
            files.join(", ")
        },
        d.inputs.children.len(),
        d.inputs.tools.values().filter(|v| v.is_some()).count(),
        d.inputs.builds.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_replaced_only_as_words() {
        assert_eq!(
            replace_words("/home/ann/x ann-b ann", "ann", "<u>"),
            "/home/<u>/x ann-b <u>"
        );
        assert_eq!(replace_words("joanna ann.", "ann", "<u>"), "joanna <u>.");
        assert_eq!(
            replace_words("box1 box1.lan box10", "box1", "<h>"),
            "<h> <h>.lan box10"
        );
    }

    #[test]
    fn serials_are_replaced_consistently_in_every_form() {
        let mut i = Inputs::default();
        i.files.insert(
            "/sys/class/kfd/kfd/topology/nodes/1/properties".into(),
            Some("simd_count 128\nunique_id 11834239412352125837\n".into()),
        );
        i.files.insert(
            "/proc/driver/nvidia/gpus/0000:00:06.0/information".into(),
            Some(
                "Model: \t NVIDIA H200\nGPU UUID: \t GPU-8f6e2c1a-1111-2222-3333-444455556666\n"
                    .into(),
            ),
        );
        i.env.insert(
            "ROCR_VISIBLE_DEVICES".into(),
            Some(format!("GPU-{:016x}", 11834239412352125837u64)),
        );
        let mut r = Redactor::default();
        r.add_serials(&i);
        let mut v = serde_json::to_value(&i).unwrap();
        r.walk(&mut v);
        let text = v.to_string();
        assert!(!text.contains("11834239412352125837"), "{text}");
        assert!(
            !text.contains(&format!("{:016x}", 11834239412352125837u64)),
            "{text}"
        );
        assert!(!text.contains("8f6e2c1a"), "{text}");
        // The stand-in of the decimal id, in hex, is what the env now names.
        let back: Inputs = serde_json::from_value(v).unwrap();
        let props = back.files["/sys/class/kfd/kfd/topology/nodes/1/properties"]
            .clone()
            .unwrap();
        let id: u64 = props
            .lines()
            .find_map(|l| l.strip_prefix("unique_id "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(
            back.env["ROCR_VISIBLE_DEVICES"].clone().unwrap(),
            format!("GPU-{id:016x}")
        );
    }
}
