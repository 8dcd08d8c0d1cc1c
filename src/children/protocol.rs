//! The probe child protocol (probes/PROTOCOL.md) as types: the CUDA child writes its lines only
//! through [`Message`], the parent reads every line into one, and the probe program
//! (`probes/gpuprobe-probe.cpp`) conforms by test (`tests/protocol.rs` round-trips its recorded
//! output through these types).
//!
//! A child is untrusted. Reading one must never fail on what it printed, so the types are lenient
//! the way the protocol's readers always were: a field that is missing, `null` or of the wrong
//! type reads as `None` (the event stays), an event this gpuprobe does not know reads as
//! [`Event::Unknown`], and a line that is not a JSON object with a string `event` is no event
//! at all (the caller keeps it as garbage). Writing gives exactly the lines the protocol shows:
//! a field it always prints is printed (`null` when `None`); one that only some shapes carry
//! (`device`, `done`'s `elapsed_ms`, `first_pair_ms`, a not-run smoke's `reason`) only when set.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::report::{ApiError, BadCheck, SmokeStage};

/// Protocol version of the events (`hello`'s `protocol`).
pub const VERSION: u32 = 2;

/// One line: an event, and in the shared CUDA child the device whose thread wrote it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Present on every line of a device in the shared child; a tag that is not a device index
    /// makes the line unreadable (it must not pass for the untagged end of the whole stream).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub device: Option<u32>,
    #[serde(flatten)]
    pub event: Event,
}

/// The events, by their `event` name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    Hello(Hello),
    Device(DeviceEvent),
    Stage(Stage),
    Cycle(Cycle),
    Smoke(SmokeEvent),
    Peer(Peer),
    PeersDone(PeersDone),
    Plan(PlanEvent),
    Done(Done),
    /// An event this gpuprobe does not know (a newer probe), or a known one it cannot read:
    /// recorded as printed, read by nothing. Never written.
    #[serde(other, skip_serializing)]
    Unknown,
}

macro_rules! into_event {
    ($($variant:ident($t:ty)),*) => {$(
        impl From<$t> for Event {
            fn from(e: $t) -> Event {
                Event::$variant(e)
            }
        }
    )*};
}
into_event!(
    Hello(Hello),
    Device(DeviceEvent),
    Stage(Stage),
    Cycle(Cycle),
    Smoke(SmokeEvent),
    Peer(Peer),
    PeersDone(PeersDone),
    Plan(PlanEvent),
    Done(Done)
);

/// `hello`: the runtime answered (or, with `error`, could not enumerate devices).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    #[serde(default, deserialize_with = "lenient")]
    pub protocol: Option<u32>,
    /// `gpuprobe-cuda` (the CUDA child) or `gpuprobe-probe` (the probe program).
    #[serde(default, deserialize_with = "lenient")]
    pub probe: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub backend: Option<crate::report::Backend>,
    #[serde(default, deserialize_with = "lenient")]
    pub runtime_version: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub driver_version: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub device_count: Option<u32>,
    /// From the child's start to the runtime answering.
    #[serde(default, deserialize_with = "lenient")]
    pub init_ms: Option<f64>,
    #[serde(default, deserialize_with = "api_error")]
    pub error: Option<ApiError>,
}

impl Hello {
    /// The devices the runtime shows: none when enumeration failed.
    pub fn usable_devices(&self) -> Option<u32> {
        if self.error.is_some() {
            None
        } else {
            self.device_count
        }
    }
}

/// `device`: the facts of one device, or (the CUDA child, when the device cannot even be
/// opened) only its index and the error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DeviceEvent {
    Facts(Box<DeviceFacts>),
    Failed(DeviceFailed),
}

impl DeviceEvent {
    pub fn facts(&self) -> Option<&DeviceFacts> {
        match self {
            DeviceEvent::Facts(f) => Some(f),
            DeviceEvent::Failed(_) => None,
        }
    }
}

/// A device's facts; `name` and `arch` are what make an event one (without them nothing in it
/// describes a device).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceFacts {
    #[serde(default, deserialize_with = "lenient")]
    pub index: Option<u32>,
    pub name: String,
    pub arch: String,
    #[serde(default, deserialize_with = "lenient")]
    pub arch_features: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub compute_capability: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub vram_total_bytes: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub vram_free_bytes: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub pci_bus_id: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub integrated: Option<bool>,
    #[serde(default, deserialize_with = "lenient")]
    pub wave_size: Option<u32>,
    #[serde(default, deserialize_with = "lenient")]
    pub vmm_supported: Option<bool>,
    #[serde(default, deserialize_with = "lenient")]
    pub granularity_min: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub granularity_recommended: Option<u64>,
    /// Creating the device's context (`--device` only).
    #[serde(default, deserialize_with = "lenient")]
    pub context_ms: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub queries_ms: Option<f64>,
    #[serde(default, deserialize_with = "api_error")]
    pub error: Option<ApiError>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceFailed {
    #[serde(default, deserialize_with = "lenient")]
    pub index: Option<u32>,
    #[serde(default, deserialize_with = "api_error")]
    pub error: Option<ApiError>,
}

/// `stage`: announced (and flushed) before the stage starts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stage {
    #[serde(default, deserialize_with = "lenient")]
    pub stage: Option<SmokeStage>,
    #[serde(default, deserialize_with = "lenient")]
    pub cycle: Option<u32>,
    #[serde(default, deserialize_with = "lenient")]
    pub pool: Option<u32>,
    #[serde(default, deserialize_with = "lenient")]
    pub growth: Option<u32>,
}

/// `cycle`: printed before each cycle starts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cycle {
    #[serde(default, deserialize_with = "lenient")]
    pub cycle: Option<u32>,
}

/// `smoke`: the smoke test's result, or (the CUDA child, where the device has no VMM) only that it
/// did not run, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SmokeEvent {
    Skipped(SmokeSkipped),
    Ran(Box<SmokeResult>),
}

impl SmokeEvent {
    /// The result, a skipped test as one with nothing measured.
    pub fn result(&self) -> std::borrow::Cow<'_, SmokeResult> {
        match self {
            SmokeEvent::Ran(r) => std::borrow::Cow::Borrowed(r),
            SmokeEvent::Skipped(s) => std::borrow::Cow::Owned(SmokeResult {
                outcome: Some(Verdict::NotRun),
                reason: Some(s.reason.clone()),
                ..SmokeResult::default()
            }),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SmokeSkipped {
    pub outcome: NotRun,
    pub reason: String,
}

/// The only outcome of a skipped smoke test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NotRun {
    #[serde(rename = "not-run")]
    NotRun,
}

/// The child's verdict (an outcome the parent does not know is bad output). The child says
/// `partial` only when free VRAM cut the test short (with `reason`); the parent still applies
/// its own `min_cycles` to a `pass`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Pass,
    Fail,
    NotRun,
    Partial,
}

/// Per-process VRAM accounting of the driver during the smoke test (NVML on NVIDIA, KFD's sysfs
/// on AMD): what this process held, and who else held memory on the GPU.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Accounting {
    /// `nvml` or `kfd`.
    #[serde(default, deserialize_with = "lenient")]
    pub source: Option<String>,
    /// VRAM charged to this process before the first cycle and after the last.
    #[serde(default, deserialize_with = "lenient")]
    pub own_before: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub own_after: Option<u64>,
    /// False where the driver's list did not name this process (another PID namespace).
    #[serde(default, deserialize_with = "lenient")]
    pub own_listed: Option<bool>,
    /// Other processes with a context or memory on the GPU at any sample.
    #[serde(default, deserialize_with = "lenient")]
    pub other_pids: Option<Vec<u32>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SmokeResult {
    #[serde(default, deserialize_with = "lenient")]
    pub outcome: Option<Verdict>,
    /// Only a test that did not run says why.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub reason: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub plan_version: Option<u32>,
    #[serde(default, deserialize_with = "lenient")]
    pub failed_stage: Option<SmokeStage>,
    #[serde(default, deserialize_with = "api_error")]
    pub error: Option<ApiError>,
    #[serde(default, deserialize_with = "lenient")]
    pub failed_cycle: Option<u32>,
    #[serde(default, deserialize_with = "lenient")]
    pub failed_pool: Option<u32>,
    #[serde(default, deserialize_with = "lenient")]
    pub failed_growth: Option<u32>,
    #[serde(default, deserialize_with = "lenient")]
    pub cycles_done: Option<u32>,
    #[serde(default, deserialize_with = "lenient")]
    pub cycles: Option<u32>,
    #[serde(default, deserialize_with = "lenient")]
    pub min_cycles: Option<u32>,
    #[serde(default, deserialize_with = "lenient")]
    pub pools: Option<u32>,
    /// Growths per cycle.
    #[serde(default, deserialize_with = "lenient")]
    pub chunks_per_cycle: Option<u32>,
    /// The granularity growths are rounded to.
    #[serde(default, deserialize_with = "lenient")]
    pub chunk_bytes: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub smallest_chunk_bytes: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub largest_chunk_bytes: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub largest_pool_bytes: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub long_target_bytes: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub long_growths: Option<u32>,
    #[serde(default, deserialize_with = "lenient")]
    pub host_checked_bytes: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub reserve_bytes: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub mismatches: Option<u64>,
    /// Byte offset from the failing pool's base.
    #[serde(default, deserialize_with = "lenient")]
    pub first_bad_offset: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub first_bad_value: Option<u32>,
    #[serde(default, deserialize_with = "lenient")]
    pub expected_value: Option<u32>,
    #[serde(default, deserialize_with = "lenient")]
    pub bad_check: Option<BadCheck>,
    #[serde(default, deserialize_with = "lenient")]
    pub whole_range_access_helped: Option<bool>,
    #[serde(default, deserialize_with = "lenient")]
    pub vram_free_before: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub vram_free_after: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub elapsed_ms: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub long_phase_ms: Option<f64>,
    /// Pools the test ran where free VRAM did not hold them all.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub pools_run: Option<u32>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub accounting: Option<Accounting>,
    /// What the measurement met that does not change the verdict (other processes moving free
    /// VRAM, a scaled-down plan).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "lenient_vec"
    )]
    pub notes: Vec<String>,
}

/// `peer`: one pair of devices, `from` < `to`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Peer {
    #[serde(default, deserialize_with = "lenient")]
    pub from: Option<u32>,
    #[serde(default, deserialize_with = "lenient")]
    pub to: Option<u32>,
    #[serde(default, deserialize_with = "lenient")]
    pub can_access: Option<bool>,
    #[serde(default, deserialize_with = "lenient")]
    pub reverse_can_access: Option<bool>,
    #[serde(default, deserialize_with = "lenient")]
    pub copy_ok: Option<bool>,
    #[serde(default, deserialize_with = "lenient")]
    pub mismatches: Option<u64>,
    #[serde(default, deserialize_with = "api_error")]
    pub error: Option<ApiError>,
    #[serde(default, deserialize_with = "lenient")]
    pub vmm_ok: Option<bool>,
    #[serde(default, deserialize_with = "lenient")]
    pub vmm_mismatches: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub vmm_stage: Option<String>,
    #[serde(default, deserialize_with = "api_error")]
    pub vmm_error: Option<ApiError>,
    #[serde(default, deserialize_with = "lenient")]
    pub copy_ms: Option<f64>,
}

impl Peer {
    /// Whether this is the event of the pair `a` < `b`.
    pub fn is_pair(&self, a: u32, b: u32) -> bool {
        self.from == Some(a) && self.to == Some(b)
    }
}

/// `peers_done`: the end of the peer checks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PeersDone {
    #[serde(default, deserialize_with = "lenient")]
    pub devices: Option<u32>,
    /// Creating every device's context (the peer child; `null` in the shared child).
    #[serde(default, deserialize_with = "lenient")]
    pub contexts_ms: Option<f64>,
    /// The shared child only: from its start to the first pair.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub first_pair_ms: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub elapsed_ms: Option<f64>,
}

/// `plan` (`--plan` only): the growth schedule, or why the plan could not be read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PlanEvent {
    Schedule(PlanSchedule),
    Failed { error: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanSchedule {
    pub version: u32,
    pub min_cycles: u32,
    pub pools: u32,
    pub long_target: u64,
    pub growths: Vec<PlanGrowth>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanGrowth {
    pub phase: Phase,
    pub pool: u32,
    pub offset: u64,
    pub bytes: u64,
}

/// Which part of the smoke test a growth belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Every cycle.
    Cycle,
    /// Cycle 0's long phase (pool 0 past 1 GiB).
    Long,
}

/// `done`: the end of a stream; in the shared child, with `device`, the end of that device's part.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Done {
    /// The shared child's per-device end: from the child's start.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub elapsed_ms: Option<f64>,
}

/// A line as the parent received it: what it says, and the line itself (recordings keep what the
/// child printed, including what this gpuprobe cannot read).
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    pub message: Message,
    pub raw: Value,
}

impl Received {
    /// The event of a line; `None` when the line is not one (not a JSON object with a string
    /// `event`).
    pub fn parse(line: &str) -> Option<Received> {
        Received::from_value(serde_json::from_str(line).ok()?)
    }

    /// As [`Received::parse`], for a line already parsed as JSON (a recording).
    pub fn from_value(raw: Value) -> Option<Received> {
        raw.get("event")?.as_str()?;
        let message = Message::deserialize(&raw).unwrap_or(Message {
            device: None,
            event: Event::Unknown,
        });
        Some(Received { message, raw })
    }

    /// A line made by the parent itself (a stream's part closed with its own `done`).
    pub fn made(message: Message) -> Received {
        let raw = serde_json::to_value(&message).unwrap_or(Value::Null);
        Received { message, raw }
    }

    pub fn event(&self) -> &Event {
        &self.message.event
    }

    pub fn device(&self) -> Option<u32> {
        self.message.device
    }

    /// The `done` of the whole stream (in the shared child, each device's part ends with a `done`
    /// tagged with the device, which does not end the stream).
    pub fn ends_stream(&self) -> bool {
        matches!(self.event(), Event::Done(_)) && self.device().is_none()
    }
}

/// A field a reader takes only if it is what the protocol says it is; anything else (`null`,
/// another type, a number out of range) reads as absent.
fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned>(d: D) -> Result<Option<T>, D::Error> {
    Ok(T::deserialize(Value::deserialize(d)?).ok())
}

/// A list of strings: anything else in its place is an empty list, other items are dropped.
fn lenient_vec<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Array(items) => items
            .into_iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    })
}

/// A field that, when present, must be what it says.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    u32::deserialize(d).map(Some)
}

/// `ERR`: any object is an error (a call failed), with what of it can be read; anything else is
/// none.
fn api_error<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ApiError>, D::Error> {
    #[derive(Deserialize)]
    struct Fields {
        #[serde(default, deserialize_with = "lenient")]
        api: Option<String>,
        #[serde(default, deserialize_with = "lenient")]
        code: Option<i64>,
        #[serde(default, deserialize_with = "lenient")]
        name: Option<String>,
        #[serde(default, deserialize_with = "lenient")]
        message: Option<String>,
    }
    let v = Value::deserialize(d)?;
    if !v.is_object() {
        return Ok(None);
    }
    Ok(Fields::deserialize(v).ok().map(|f| ApiError {
        api: f.api.unwrap_or_else(|| "unknown".into()),
        code: f.code.unwrap_or(-1),
        name: f.name,
        message: f.message,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(v: Value) -> Received {
        Received::from_value(v).expect("an event line")
    }

    #[test]
    fn lines_that_are_not_events_are_none() {
        for line in [
            "hello",
            "",
            "[1,2]",
            "{\"event\":3}",
            "{\"no_event\":\"hello\"}",
            "\"event\"",
        ] {
            assert!(Received::parse(line).is_none(), "{line}");
        }
    }

    #[test]
    fn unknown_events_are_kept_as_printed_and_read_as_unknown() {
        let v = json!({"event":"telemetry","watts":300});
        let r = read(v.clone());
        assert_eq!(r.event(), &Event::Unknown);
        assert_eq!(r.raw, v);
        assert!(serde_json::to_value(&r.message).is_err(), "never written");
    }

    #[test]
    fn fields_of_the_wrong_type_read_as_absent_and_the_event_stays() {
        let r = read(
            json!({"event":"smoke","outcome":"pass","cycles_done":"many",
            "cycles":-1,"first_bad_value":4294967296u64,"failed_stage":7,"error":"no",
            "elapsed_ms":12.5,"newer_field":{"x":1}}),
        );
        let Event::Smoke(s) = r.event() else {
            panic!("{r:?}")
        };
        let s = s.result();
        assert_eq!(s.outcome, Some(Verdict::Pass));
        assert_eq!(
            (s.cycles_done, s.cycles, s.first_bad_value),
            (None, None, None)
        );
        assert_eq!(s.failed_stage, None);
        assert_eq!(s.error, None);
        assert_eq!(s.elapsed_ms, Some(12.5));
    }

    #[test]
    fn an_unknown_outcome_reads_as_none_and_unknown_names_are_kept() {
        let r = read(
            json!({"event":"smoke","outcome":"exploded","failed_stage":"warp_drive",
            "bad_check":"psychic"}),
        );
        let Event::Smoke(s) = r.event() else {
            panic!("{r:?}")
        };
        let s = s.result();
        assert_eq!(s.outcome, None);
        assert_eq!(s.failed_stage, Some(SmokeStage::Other("warp_drive".into())));
        assert_eq!(s.bad_check, Some(BadCheck::Other("psychic".into())));
    }

    #[test]
    fn an_error_is_any_object_with_what_can_be_read() {
        let r = read(json!({"event":"hello","device_count":2,"error":{"code":"x"}}));
        let Event::Hello(h) = r.event() else {
            panic!("{r:?}")
        };
        let e = h.error.clone().expect("an object is an error");
        assert_eq!((e.api.as_str(), e.code, e.name), ("unknown", -1, None));
        assert_eq!(h.usable_devices(), None);
        for not_one in [json!(null), json!("failed"), json!([1, 2]), json!(3)] {
            let r = read(json!({"event":"hello","device_count":2,"error":not_one}));
            let Event::Hello(h) = r.event() else {
                panic!("{r:?}")
            };
            assert_eq!(h.error, None, "{not_one}");
            assert_eq!(h.usable_devices(), Some(2));
        }
    }

    #[test]
    fn a_device_tag_that_is_not_an_index_makes_the_line_unreadable() {
        // Else a hostile `done` with a bad tag would pass for the end of the whole stream.
        for tag in [json!(null), json!("0"), json!(-1)] {
            let r = read(json!({"event":"done","device":tag}));
            assert_eq!(r.event(), &Event::Unknown, "{tag}");
        }
        let r = read(json!({"event":"done","device":1,"elapsed_ms":5.0}));
        assert_eq!(r.device(), Some(1));
        assert_eq!(
            r.event(),
            &Event::Done(Done {
                elapsed_ms: Some(5.0)
            })
        );
    }

    #[test]
    fn a_device_event_without_name_or_arch_has_no_facts() {
        let r = read(json!({"event":"device","index":1,"name":"GPU","error":null}));
        let Event::Device(d) = r.event() else {
            panic!("{r:?}")
        };
        assert!(d.facts().is_none());
    }

    #[test]
    fn the_cuda_childs_short_shapes_are_written_as_they_always_were() {
        let lines = [
            json!({"event":"smoke","outcome":"not-run","reason":"no VMM"}),
            json!({"event":"device","index":3,"error":{"api":"cuDeviceGet","code":101,"name":null,"message":null}}),
            json!({"event":"plan","error":"no plan"}),
            json!({"event":"done"}),
            json!({"event":"done","device":0,"elapsed_ms":1.5}),
            json!({"event":"peers_done","devices":2,"contexts_ms":null,"first_pair_ms":3.0,"elapsed_ms":4.0}),
        ];
        for v in lines {
            let m: Message = serde_json::from_value(v.clone()).unwrap();
            assert_eq!(serde_json::to_value(&m).unwrap(), v);
        }
    }
}
