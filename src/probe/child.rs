//! `gpuprobe __child BACKEND ...`: the isolated probe process. Only CUDA runs in-process here;
//! HIP uses the probe program built with the machine's hipcc (see `hip`).

use crate::cli::{BackendChoice, ChildArgs};

pub fn run(a: &ChildArgs) -> i32 {
    match a.backend {
        BackendChoice::Cuda => super::cuda::child::run(&super::cuda::child::Options {
            list: a.list,
            device: a.device,
            peer: a
                .peer
                .as_ref()
                .and_then(|p| Some((*p.first()?, *p.get(1)?))),
            cycles: a.cycles,
            chunks: a.chunks,
            smoke: !a.no_smoke,
        }),
        _ => {
            eprintln!("gpuprobe __child: only `cuda` runs in-process; HIP uses the probe program");
            2
        }
    }
}
