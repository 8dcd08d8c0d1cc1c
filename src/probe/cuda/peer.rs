//! Peer checks of every pair of devices: in the shared child (`__child cuda --all --peers`) each
//! pair as soon as both of its devices finished their smoke test, on the contexts they already
//! have; with `--isolate`, in a peer child of their own (`__child cuda --peers`), started together
//! with the device children so peer checks add no serial phase (issue #13).
//!
//! Per pair and direction, a small VMM pool grown on one device like the smoke test's pool 0, with
//! access set in one call for the owner and the peer (llama.cpp does this with GGML_CUDA_P2P or an
//! NCCL/RCCL build, for every device that can access the owner: on two GPUs the same call), and
//! each new chunk verified by a kernel running on the peer. Then an ordinary 64 MiB peer copy,
//! verified (`GGML_CUDA_NO_PEER_COPY` decides on that).

use std::time::Instant;

use super::gpu::{Allocation, Context, DeviceBuffer, Kernels, Slots, Stream, VaRange};
use super::smoke::{alloc_prop, readwrite_access};
use super::{Driver, sys};
use crate::children::protocol::{Peer, PeersDone};
use crate::probe::events::Emitter;
use crate::probe::smoke_pattern::seed;
use crate::probe::smoke_plan;
use crate::report::ApiError;

const COPY_BYTES: usize = 64 << 20;

/// One device's handles in this child.
pub(super) struct Dev<'a> {
    ctx: Context<'a>,
    kernels: Kernels<'a>,
    stream: Stream<'a>,
    slots: Slots<'a>,
}

pub(super) fn open(drv: &Driver, ordinal: i32) -> Result<Dev<'_>, ApiError> {
    let ctx = Context::retain(drv, ordinal)?;
    Ok(Dev {
        kernels: Kernels::load(drv)?,
        stream: Stream::new(drv)?,
        slots: Slots::new(drv, 8)?,
        ctx,
    })
}

/// How reading one owner's pool from one peer went.
#[derive(Debug, Clone, Default)]
struct PeerRead {
    mismatches: u64,
    stage: Option<&'static str>,
    error: Option<ApiError>,
}

impl PeerRead {
    fn ok(&self) -> bool {
        self.mismatches == 0 && self.error.is_none()
    }
}

/// A device's handles, moved between threads (the handles are `Send`: see `gpu.rs`).
pub(super) struct Opened<'a>(pub(super) Result<Dev<'a>, ApiError>);

/// Every pair of devices, or (`only` not empty) every pair of those devices.
pub fn run(drv: &Driver, out: &mut Emitter, count: i32, only: &[u32]) {
    let started = Instant::now();
    let n = count.max(0) as usize;
    let wanted = |i: usize| only.is_empty() || only.contains(&(i as u32));
    // Creating a context costs as much as the rest of a device's probe; do all of them at once.
    let devs: Vec<Result<Dev<'_>, ApiError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                s.spawn(move || {
                    Opened(if wanted(i) {
                        open(drv, i as i32)
                    } else {
                        Err(thread_panicked())
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(o) => o.0,
                Err(_) => Err(thread_panicked()),
            })
            .collect()
    });
    let contexts_ms = started.elapsed().as_secs_f64() * 1000.0;
    for a in (0..n).filter(|a| wanted(*a)) {
        for b in ((a + 1)..n).filter(|b| wanted(*b)) {
            out.emit(check_pair(drv, &devs, a, b));
        }
    }
    out.emit(PeersDone {
        devices: Some(n as u32),
        contexts_ms: Some(contexts_ms),
        first_pair_ms: None,
        elapsed_ms: Some(started.elapsed().as_secs_f64() * 1000.0),
    });
    // The child leaves right after this; process exit tears the contexts down.
    std::mem::forget(devs);
}

pub(super) fn thread_panicked() -> ApiError {
    ApiError {
        api: "gpuprobe".into(),
        code: -1,
        name: Some("THREAD_PANICKED".into()),
        message: None,
    }
}

/// The `peer` event of devices `a` < `b`: each device's VMM pool read by the other (where it can
/// access it), and the ordinary peer copy from a to b. `devs` is indexed by device; the two are
/// used from the calling thread only (each use makes its context current first).
pub(super) fn check_pair(
    drv: &Driver,
    devs: &[Result<Dev<'_>, ApiError>],
    a: usize,
    b: usize,
) -> Peer {
    let t = Instant::now();
    let can = |x: usize, y: usize| drv.can_access_peer(x as i32, y as i32).ok();
    let (ab, ba) = (can(a, b), can(b, a));
    // b reading a's pool, and a reading b's.
    let read = |owner: usize, peer: usize, allowed: Option<bool>| {
        (allowed == Some(true)).then(|| {
            vmm_pool_read_by_peers(drv, devs, owner, &[peer])
                .pop()
                .unwrap_or_default()
        })
    };
    let reads = [read(a, b, ba), read(b, a, ab)];
    let copy = match (&devs[a], &devs[b]) {
        (Ok(da), Ok(db)) => peer_copy(drv, da, db, ab == Some(true)),
        (Err(e), _) | (_, Err(e)) => Err(e.clone()),
    };
    let (copy_ok, mismatches, error) = match copy {
        Ok(m) => (Some(m == 0), m, None),
        Err(e) => (Some(false), 0, Some(e)),
    };
    let checked: Vec<&PeerRead> = reads.iter().flatten().collect();
    let bad = checked.iter().find(|r| !r.ok());
    Peer {
        from: Some(a as u32),
        to: Some(b as u32),
        can_access: ab,
        reverse_can_access: ba,
        copy_ok,
        mismatches: Some(mismatches),
        error,
        vmm_ok: (!checked.is_empty()).then(|| bad.is_none()),
        vmm_mismatches: Some(checked.iter().map(|r| r.mismatches).sum::<u64>()),
        vmm_stage: bad.and_then(|r| r.stage).map(str::to_string),
        vmm_error: bad.and_then(|r| r.error.clone()),
        copy_ms: Some(t.elapsed().as_secs_f64() * 1000.0),
    }
}

/// Grows a pool on `owner` (the smoke plan's pool 0 ops), granting access to the owner and its
/// peers in one cuMemSetAccess call as llama.cpp does, and verifies each new chunk from each peer.
fn vmm_pool_read_by_peers(
    drv: &Driver,
    devs: &[Result<Dev<'_>, ApiError>],
    owner: usize,
    peers: &[usize],
) -> Vec<PeerRead> {
    let failed = |stage, e: ApiError| {
        vec![
            PeerRead {
                mismatches: 0,
                stage: Some(stage),
                error: Some(e),
            };
            peers.len()
        ]
    };
    let od = match &devs[owner] {
        Ok(d) => d,
        Err(e) => return failed("peer_context", e.clone()),
    };
    let plan = match smoke_plan::bundled() {
        Ok(p) => p,
        Err(m) => {
            return failed(
                "peer_context",
                ApiError {
                    api: "gpuprobe".into(),
                    code: 0,
                    name: Some("BAD_PLAN".into()),
                    message: Some(m),
                },
            );
        }
    };
    if let Err(e) = od.ctx.make_current() {
        return failed("peer_context", e);
    }
    let prop = alloc_prop(od.ctx.dev);
    let g = match drv.allocation_granularity(&prop, sys::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) {
        Ok(g) => g,
        Err(e) => return failed("peer_context", e),
    };
    let mut access = vec![readwrite_access(od.ctx.dev)];
    access.extend(peers.iter().map(|p| readwrite_access(*p as i32)));
    let growths: Vec<_> = plan
        .schedule(g as u64, 0)
        .cycle
        .into_iter()
        .filter(|x| x.pool == 0)
        .collect();
    let s = seed(4096 + owner as u32, 0);
    let mut results = vec![PeerRead::default(); peers.len()];
    let mut range: Option<VaRange<'_>> = None;
    for gr in &growths {
        let base = match grow(drv, od, &prop, &access, &mut range, gr, plan.reserve_bytes) {
            Ok(base) => base,
            Err((stage, e)) => return failed(stage, e),
        };
        if let Err(e) = od
            .kernels
            .write(&od.stream, base, gr.offset / 4, gr.bytes / 4, s)
            .and_then(|()| od.stream.sync())
        {
            return failed("peer_write", e);
        }
        for (r, p) in results.iter_mut().zip(peers) {
            if !r.ok() {
                continue;
            }
            let read = match &devs[*p] {
                Ok(pd) => read_from_peer(pd, base, gr.offset / 4, gr.bytes / 4, s),
                Err(e) => Err(("peer_context", e.clone())),
            };
            match read {
                Ok(m) => r.mismatches += m,
                Err((stage, e)) => {
                    r.stage = Some(stage);
                    r.error = Some(e);
                }
            }
            if r.mismatches > 0 && r.stage.is_none() {
                r.stage = Some("peer_verify");
            }
        }
    }
    if let Some(r) = range
        && od.ctx.make_current().is_ok()
    {
        let _ = r.release();
    }
    results
}

/// One growth of the pool in `range` (reserved on the first); returns the pool's base.
fn grow<'a>(
    drv: &'a Driver,
    od: &Dev<'_>,
    prop: &sys::CUmemAllocationProp,
    access: &[sys::CUmemAccessDesc],
    range: &mut Option<VaRange<'a>>,
    g: &smoke_plan::Growth,
    reserve: u64,
) -> Result<u64, (&'static str, ApiError)> {
    od.ctx.make_current().map_err(|e| ("peer_context", e))?;
    // Released when it goes out of scope on a failure below.
    let memory = Allocation::create(drv, g.bytes, prop).map_err(|e| ("peer_create", e))?;
    let r = match range {
        Some(r) => r,
        None => range.insert(VaRange::reserve(drv, reserve).map_err(|e| ("peer_reserve", e))?),
    };
    r.map(g.offset, g.bytes, &memory)
        .map_err(|e| ("peer_map", e))?;
    memory.release().map_err(|e| ("peer_release", e))?;
    r.set_access(g.offset, g.bytes, access)
        .map_err(|e| ("peer_set_access", e))?;
    Ok(r.base())
}

/// Verifies words [begin, begin + count) of the owner's pool with a kernel on the peer.
fn read_from_peer(
    pd: &Dev<'_>,
    base: u64,
    begin: u64,
    count: u64,
    s: u32,
) -> Result<u64, (&'static str, ApiError)> {
    let e = |x| ("peer_verify", x);
    pd.ctx.make_current().map_err(e)?;
    pd.slots.reset(&pd.stream).map_err(e)?;
    pd.kernels
        .verify(&pd.stream, base, begin, count, s, pd.slots.addr(0))
        .map_err(e)?;
    pd.stream.sync().map_err(e)?;
    let v = pd.slots.read().map_err(e)?;
    Ok(v.first().map_or(0, |v| v.mismatches))
}

/// Writes a 64 MiB pattern on a, copies it to b with cuMemcpyPeer, and counts the words that
/// differ with the verify kernel on b.
fn peer_copy(drv: &Driver, da: &Dev<'_>, db: &Dev<'_>, enable: bool) -> Result<u64, ApiError> {
    let words = (COPY_BYTES / 4) as u64;
    let s = 7;
    db.ctx.make_current()?;
    let dst = DeviceBuffer::new(drv, COPY_BYTES)?;
    da.ctx.make_current()?;
    if enable {
        // Already-enabled is fine; anything else shows up in the copy.
        let _ = drv.ctx_enable_peer_access(db.ctx.ctx);
    }
    let src = DeviceBuffer::new(drv, COPY_BYTES)?;
    da.kernels.write(&da.stream, src.ptr, 0, words, s)?;
    da.stream.sync()?;
    drv.memcpy_peer(dst.ptr, db.ctx.ctx, src.ptr, da.ctx.ctx, COPY_BYTES)?;
    drv.ctx_synchronize()?;
    drop(src);
    db.ctx.make_current()?;
    db.slots.reset(&db.stream)?;
    db.kernels
        .verify(&db.stream, dst.ptr, 0, words, s, db.slots.addr(0))?;
    db.stream.sync()?;
    let v = db.slots.read()?;
    drop(dst);
    Ok(v.first().map_or(0, |v| v.mismatches))
}
