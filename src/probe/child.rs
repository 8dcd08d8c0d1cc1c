//! `gpuprobe __child BACKEND ...`: the isolated probe process. Only CUDA runs in-process here;
//! HIP uses the probe program built with the machine's hipcc (see `hip`).

use crate::cli::{BackendChoice, ChildArgs};

pub fn run(a: &ChildArgs) -> i32 {
    match a.backend {
        BackendChoice::Cuda => {
            let code = super::cuda::child::run(&super::cuda::child::Options {
                list: a.list,
                device: a.device,
                peers: a.peers,
                cycles: a.cycles,
                smoke: !a.no_smoke,
                plan: a
                    .plan
                    .as_ref()
                    .and_then(|p| Some((*p.first()?, *p.get(1)?))),
            });
            leave(code)
        }
        _ => {
            eprintln!("gpuprobe __child: only `cuda` runs in-process; HIP uses the probe program");
            2
        }
    }
}

/// Ends the child at once. The report is complete and flushed by now; the driver's exit handlers
/// (and destructors of contexts after a GPU fault) can block, and the parent would count that as a
/// hang of a probe that already answered.
fn leave(code: i32) -> i32 {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    #[cfg(unix)]
    // SAFETY: _exit only ends the process; nothing after it runs.
    unsafe {
        libc::_exit(code)
    }
    #[cfg(not(unix))]
    std::process::exit(code)
}
