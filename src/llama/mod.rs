//! What gpuprobe knows about llama.cpp itself: the option table by build range, and real
//! source trees (which options a checkout declares, and its build number where it can be known).

pub mod checkout;
pub mod options;

use checkout::Checkout;
use options::{OptionTable, Plain12x};

/// The llama.cpp build a plan is for, and how to know which options it has.
#[derive(Debug, Clone)]
pub struct LlamaTarget {
    pub build: Option<u64>,
    /// How the build was chosen, for explanations: `--llama-build`, `checkout DIR`, `latest known`.
    pub source: String,
    pub checkout: Option<Checkout>,
}

impl LlamaTarget {
    /// Whether `name` is declared: from the checkout when there is one, else from the table.
    pub fn declares(&self, table: &OptionTable, name: &str) -> bool {
        match &self.checkout {
            Some(c) => c.declares(name),
            None => table.declared(name, self.effective_build(table)),
        }
    }

    /// The option that compiles the VMM pool out of a HIP build, by era: `GGML_HIP_NO_VMM` (4555
    /// on, default ON), `GGML_CUDA_NO_VMM` (4548-4554, default OFF: VMM on), or `""` (before 4548:
    /// no VMM pool on HIP whatever the flags).
    pub fn hip_vmm_switch(&self, table: &OptionTable) -> String {
        match &self.checkout {
            Some(c) => c.hip_vmm_switch.clone(),
            None => table
                .era("hip_vmm_switch", self.effective_build(table))
                .unwrap_or("GGML_HIP_NO_VMM")
                .to_string(),
        }
    }

    /// What the build does with a plain `120`/`121` in CMAKE_CUDA_ARCHITECTURES.
    pub fn plain_12x(&self, table: &OptionTable) -> Plain12x {
        match &self.checkout {
            Some(c) => c.plain_12x,
            None => table
                .era("cuda_arch_12x", self.effective_build(table))
                .and_then(Plain12x::parse)
                .unwrap_or(Plain12x::Rewritten),
        }
    }

    /// The build number used for table look-ups and quirk ranges.
    pub fn effective_build(&self, table: &OptionTable) -> u64 {
        self.build.unwrap_or(table.meta.newest_build)
    }
}
