//! The CUDA backend: `libcuda.so.1` loaded at run time (no toolkit needed), declarations from
//! bindgen over the real `cuda.h`. Only the child process (`gpuprobe __child cuda`) loads it.

pub mod child;
mod driver;
mod gpu;
mod peer;
mod shared;
pub mod smoke;
#[allow(unsafe_op_in_unsafe_fn)]
#[rustfmt::skip]
pub mod sys;

pub use driver::Driver;
