//! `__child cuda --all [--peers]`: every device in this one process (issue #13). Driver
//! initialisation and context creation cost about as much as a whole smoke test, and in separate
//! processes they queue behind each other in the driver; here the driver is initialised once and
//! every device gets its own thread (context, queries, smoke test) at the same time. Each device's
//! lines carry `"device": N` and end with its own `done`, so the parent keeps what a device
//! finished even if another one later hangs or crashes the process. A pair's peer checks run as
//! soon as both of its devices are done, on the contexts they already have.

use std::sync::mpsc;
use std::time::Instant;

use super::Driver;
use super::child::{Options, ms, probe_device};
use super::peer::{self, Dev, Opened};
use crate::children::protocol::{Done, PeersDone};
use crate::probe::events::Emitter;
use crate::report::ApiError;

pub fn run(drv: &Driver, count: i32, opts: &Options, started: Instant) {
    let n = count.max(0) as usize;
    let peers = opts.peers && opts.smoke && n >= 2;
    let (tx, rx) = mpsc::channel::<(usize, Opened<'_>)>();
    std::thread::scope(|s| {
        for i in 0..n {
            let tx = tx.clone();
            s.spawn(move || {
                let mut out = Emitter::for_device(i as u32);
                let hold = probe_device(drv, &mut out, i as i32, opts);
                out.emit(Done {
                    elapsed_ms: Some(ms(started)),
                });
                // The peer checks' handles come after `done`: they are no part of the device's
                // result, and a device whose result is in must not lose it to them.
                if peers {
                    let _ = tx.send((i, Opened(peer::open(drv, i as i32))));
                }
                // Not released: the process leaves with _exit after the last `done`.
                std::mem::forget(hold);
            });
        }
        drop(tx);
        if peers {
            pairs(drv, &rx, n, started);
        }
    });
}

/// Checks each pair once both of its devices have sent their handles, in the order they become
/// ready. A device that never sends (its thread hangs) leaves its pairs unchecked; the parent
/// reports them with the deadline. One whose thread ended without handles fails its pairs.
fn pairs(drv: &Driver, rx: &mpsc::Receiver<(usize, Opened<'_>)>, n: usize, started: Instant) {
    let mut out = Emitter::stdout();
    let mut devs: Vec<Result<Dev<'_>, ApiError>> =
        (0..n).map(|_| Err(peer::thread_panicked())).collect();
    let mut ready = vec![false; n];
    let mut checked = vec![vec![false; n]; n];
    let mut first_pair_ms = None;
    let mut run_ready = |devs: &[Result<Dev<'_>, ApiError>], ready: &[bool], out: &mut Emitter| {
        for a in 0..n {
            for b in (a + 1)..n {
                if !checked[a][b] && ready[a] && ready[b] {
                    checked[a][b] = true;
                    first_pair_ms.get_or_insert_with(|| ms(started));
                    out.emit(peer::check_pair(drv, devs, a, b));
                }
            }
        }
    };
    while let Ok((i, Opened(d))) = rx.recv() {
        devs[i] = d;
        ready[i] = true;
        run_ready(&devs, &ready, &mut out);
    }
    // Every thread has ended; those that sent nothing fail their pairs (with their placeholder).
    run_ready(&devs, &vec![true; n], &mut out);
    let first = first_pair_ms.unwrap_or_else(|| ms(started));
    out.emit(PeersDone {
        devices: Some(n as u32),
        contexts_ms: None,
        first_pair_ms: Some(first),
        elapsed_ms: Some(ms(started) - first),
    });
    std::mem::forget(devs);
}
