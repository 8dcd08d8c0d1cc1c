//! The CUDA backend: `libcuda.so.1` loaded at run time (no toolkit needed), declarations from
//! bindgen over the real `cuda.h`. Only the child process (`gpuprobe __child cuda`) loads it.

// The FFI layer: the only modules of the child that may use `unsafe` (every block has its
// SAFETY comment, nvml.rs too); child, peer, shared and smoke are safe code over them.
#[allow(unsafe_code)]
mod calls;
pub mod child;
#[allow(unsafe_code)]
mod driver;
#[allow(unsafe_code)]
mod gpu;
#[allow(unsafe_code)]
mod nvml;
mod peer;
mod shared;
pub mod smoke;
// Generated: unsafe by nature, no SAFETY comments; only `calls.rs` and `driver.rs` use it unsafely.
#[allow(
    unsafe_op_in_unsafe_fn,
    unsafe_code,
    unused_imports,
    clippy::undocumented_unsafe_blocks
)]
#[rustfmt::skip]
pub(crate) mod sys;

pub use driver::Driver;
