//! The parent's side of the shared CUDA child (`__child cuda --all`, issue #13): one process
//! initialises the driver once and probes every device from its own thread. Its stream is split
//! per device (every line carries `device`, every device ends with its own `done`), so what a
//! device finished stays whatever happens to the process later. At the deadline, devices without
//! their `done` are `hang` at their own last stage. If the process ends early otherwise (a crash,
//! a report cut short), the devices that had not finished are probed again, each in a child of its
//! own, so one faulty GPU cannot cost the others their results.

use std::time::{Duration, Instant};

use super::{ChildCommand, Children, ProbeOptions, count, recorded, start_device};
use crate::children::orchestrator::{Exit, Outcome, signal_name};
use crate::children::protocol::{Done, Event, Message, Received};
use crate::report::{ChildMode, SharedCrash, Smoke, SmokeOutcome};

/// The shared child's name for recording and replay.
pub(crate) const KEY: &str = "cuda shared";

/// Whether `detect` uses the shared child: live unless `--isolate`; in a replay, when the dump
/// holds one (dumps taken with `--isolate`, or before the shared child existed, hold none).
pub(crate) fn wanted(opts: &ProbeOptions) -> bool {
    match opts.host.replay_has_child(KEY) {
        Some(has) => has,
        None => !opts.isolate,
    }
}

/// The final `done` of the whole stream (per-device ones carry `device`).
fn complete(out: &Outcome) -> bool {
    out.events.iter().any(Received::ends_stream)
}

/// The shared `hello` (it carries no device).
fn is_hello(e: &Received) -> bool {
    matches!(e.event(), Event::Hello(_)) && e.device().is_none()
}

/// Device `i`'s part of the stream, as if a child of its own had printed it: the shared `hello`,
/// then its own lines. Finished (its `done` came) whatever the process did afterwards; otherwise
/// it ended as the process did.
fn split(out: &Outcome, i: u32) -> Outcome {
    let events: Vec<Received> = out
        .events
        .iter()
        .filter(|e| is_hello(e) || e.device() == Some(i))
        .cloned()
        .collect();
    let done = events.iter().find_map(|e| match e.event() {
        Event::Done(d) => Some(d),
        _ => None,
    });
    let elapsed = done
        .and_then(|d| d.elapsed_ms)
        .filter(|v| v.is_finite() && *v >= 0.0)
        .map_or(out.elapsed, |v| Duration::from_secs_f64(v / 1000.0));
    Outcome {
        exit: if done.is_some() {
            Exit::Code(0)
        } else {
            out.exit.clone()
        },
        garbage: out.garbage.clone(),
        stderr_tail: if done.is_some() {
            Vec::new()
        } else {
            out.stderr_tail.clone()
        },
        events,
        elapsed,
    }
}

/// How the process ended, in words.
fn how(exit: &Exit) -> String {
    match exit {
        Exit::Signal(s) => format!("died with {} ({s})", signal_name(*s)),
        Exit::Code(c) => format!("exited with code {c} before its report was complete"),
        Exit::TimedOut => "was killed at the deadline".into(),
        Exit::SpawnFailed(w) => format!("could not be started: {w}"),
        Exit::AfterDone => "ended after its report".into(),
    }
}

/// The peer checks' part of the stream (the `peer` lines and `peers_done`), as the peer child's
/// outcome; complete when `peers_done` came. Its start is when the first pair began.
fn peer_part(out: &Outcome, start: Duration) -> (Duration, Outcome) {
    let mut events: Vec<Received> = out
        .events
        .iter()
        .filter(|e| matches!(e.event(), Event::Peer(_) | Event::PeersDone(_)))
        .cloned()
        .collect();
    let done = out.peers_done().cloned();
    let f = |v: Option<f64>| {
        v.filter(|v| v.is_finite() && *v >= 0.0)
            .map(|v| Duration::from_secs_f64(v / 1000.0))
    };
    let elapsed = f(done.as_ref().and_then(|d| d.elapsed_ms));
    let first_pair = f(done.as_ref().and_then(|d| d.first_pair_ms));
    let exit = if done.is_some() {
        events.push(Received::made(Message {
            device: None,
            event: Event::Done(Done::default()),
        }));
        Exit::Code(0)
    } else {
        out.exit.clone()
    };
    let o = Outcome {
        events,
        garbage: Vec::new(),
        stderr_tail: Vec::new(),
        exit,
        elapsed: elapsed.unwrap_or(out.elapsed),
    };
    (start + first_pair.unwrap_or_default(), o)
}

/// What a pair the shared child never reported gets.
pub(crate) fn missing_pair(out: &Outcome, timeout: Duration) -> Smoke {
    let (outcome, why) = match &out.exit {
        Exit::TimedOut => (
            SmokeOutcome::Hang,
            format!(
                "not checked: the shared probe was killed at the deadline ({} s) before this pair's turn (a pair is checked once both of its devices are done; see their results)",
                timeout.as_secs_f64()
            ),
        ),
        e => (
            if matches!(e, Exit::Signal(_)) {
                SmokeOutcome::Crash
            } else {
                SmokeOutcome::BadOutput
            },
            format!(
                "not checked: the shared probe {} before this pair's turn, and the pair was not among those checked again afterwards (pairs of devices that then finished in processes of their own)",
                how(e)
            ),
        ),
    };
    Smoke::with_outcome(outcome, why)
}

/// Runs the shared child (and, after an early end, the isolated re-runs).
pub(crate) fn run(
    make: ChildCommand<'_>,
    opts: &ProbeOptions,
    counted: count::Count,
    t0: Instant,
) -> Children {
    let h = &*opts.host;
    let at = t0.elapsed();
    let out = recorded::start(
        h,
        KEY,
        || {
            let mut c = make();
            c.arg("--all").arg("--cycles").arg(opts.cycles.to_string());
            if opts.smoke {
                c.arg("--peers");
            } else {
                c.arg("--no-smoke");
            }
            c
        },
        opts.timeout,
    )
    .finish(h);
    let hello = out
        .events
        .iter()
        .find(|e| is_hello(e))
        .and_then(|e| match e.event() {
            Event::Hello(h) => Some(h.clone()),
            _ => None,
        });
    let n = hello.as_ref().and_then(|h| h.usable_devices()).unwrap_or(0);
    let mut children = Children {
        hello: hello.clone(),
        // Without hello, the shared outcome stands for the backend (what no_hello_status reads).
        devices: if hello.is_none() {
            vec![(0, out.clone())]
        } else {
            (0..n).map(|i| (i, split(&out, i))).collect()
        },
        starts: (0..n.max(1)).map(|i| (i, at)).collect(),
        peer: (opts.smoke && n >= 2).then(|| peer_part(&out, at)),
        count: counted,
        wall: Duration::ZERO,
        mode: ChildMode::Shared,
        shared: None,
        missing_pair: Some(missing_pair(&out, opts.timeout)),
    };
    let ended_early = hello.is_some() && !complete(&out) && out.exit != Exit::TimedOut;
    if ended_early {
        let unfinished: Vec<u32> = children
            .devices
            .iter()
            .filter(|(_, o)| !o.complete())
            .map(|(i, _)| *i)
            .collect();
        // All at once, as isolated children, under the same keys as `--isolate` uses.
        let started: Vec<_> = unfinished
            .iter()
            .map(|&i| start_device(make, opts, "cuda", i, t0))
            .collect();
        for (i, at, s) in started {
            let o = s.finish(h);
            if let Some(slot) = children.devices.iter_mut().find(|(d, _)| *d == i) {
                slot.1 = o;
            }
            if let Some(slot) = children.starts.iter_mut().find(|(d, _)| *d == i) {
                slot.1 = at;
            }
        }
        children.shared = Some(SharedCrash {
            how: how(&out.exit),
            rerun_isolated: unfinished,
        });
        recheck_pairs(make, opts, &mut children);
    }
    children.wall = t0.elapsed();
    children
}

/// After an early end: the pairs the shared child never reached whose two devices have finished
/// (before the end, or in their own child) are checked in a peer child of their own, limited to
/// those devices; what it reports joins the shared child's pairs. Pairs with a device that did
/// not finish stay unchecked.
fn recheck_pairs(make: ChildCommand<'_>, opts: &ProbeOptions, children: &mut Children) {
    let Some((_, peers)) = children.peer.as_mut() else {
        return;
    };
    let reported = |a: u32, b: u32, o: &Outcome| o.peers().any(|p| p.is_pair(a, b));
    let finished: Vec<u32> = children
        .devices
        .iter()
        .filter(|(_, o)| o.complete() && o.exit.code() == Some(0))
        .map(|(i, _)| *i)
        .collect();
    let mut only: Vec<u32> = Vec::new();
    for (n, a) in finished.iter().enumerate() {
        for b in &finished[n + 1..] {
            if !reported(*a, *b, peers) {
                only.extend([*a, *b]);
            }
        }
    }
    only.sort_unstable();
    only.dedup();
    if only.is_empty() {
        return;
    }
    let h = &*opts.host;
    let list = only
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let again = recorded::start(
        h,
        "cuda peers",
        || {
            let mut c = make();
            c.args(["--peers", "--only", &list]);
            c
        },
        opts.timeout,
    )
    .finish(h);
    let new: Vec<Received> = again
        .events
        .iter()
        .filter(|e| match e.event() {
            Event::Peer(p) => match (p.from, p.to) {
                (Some(a), Some(b)) => !reported(a, b, peers),
                _ => false,
            },
            _ => false,
        })
        .cloned()
        .collect();
    // Pairs neither reported stay missing (the outcome keeps its early end: `missing_pair`).
    peers.events.extend(new);
}

/// The note on the backend's status after an early end.
pub(crate) fn crash_note(c: &SharedCrash) -> String {
    let list = c
        .rerun_isolated
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "the shared CUDA probe {}; device(s) {list} had not finished and were probed again, each in a process of its own",
        c.how
    )
}
