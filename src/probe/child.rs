//! `gpuprobe __child BACKEND ...`: the isolated probe process. Only CUDA runs in-process here;
//! HIP uses the probe program built with the machine's hipcc (see `hip`).

pub use super::cuda::child::Options;
use crate::report::Backend;

pub fn run(backend: Option<Backend>, opts: &Options) -> i32 {
    match backend {
        Some(Backend::Cuda) => leave(super::cuda::child::run(opts)),
        _ => {
            crate::neutral::eprintln(
                "gpuprobe __child: only `cuda` runs in-process; HIP uses the probe program",
            );
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
    crate::process::exit_at_once(code)
}
