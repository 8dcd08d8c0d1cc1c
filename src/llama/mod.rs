//! What gpuprobe knows about llama.cpp itself: the option table by build range, and real
//! source trees (which options a checkout declares, and its build number where it can be known).

pub mod checkout;
pub mod facts;
pub mod options;

use std::path::Path;

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
    /// The build a plan is for: a checkout `dir` (its options, its build number where it can be
    /// known, `build` overriding it), else `build` against the option table, else the newest build
    /// the table knows. Returns the notes the choice is worth telling (an unknown build number, a
    /// build newer than the table).
    pub fn select(
        dir: Option<&Path>,
        build: Option<u64>,
        table: &OptionTable,
    ) -> crate::Result<(Self, Vec<String>)> {
        if build == Some(0) {
            return Err(crate::Error::input(
                "--llama-build",
                "build 0 is what llama.cpp reports when built without git",
                "give the real build number (the N of tag bN)",
            ));
        }
        let mut notes = Vec::new();
        let target = match (dir, build) {
            (Some(dir), _) => {
                let c = Checkout::open(dir)?;
                let (b, source) = match (build, c.build, &c.build_source) {
                    (Some(b), _, _) => (
                        Some(b),
                        format!("--llama-build, options read from {}", dir.display()),
                    ),
                    (None, Some(b), Some(src)) => {
                        (Some(b), format!("checkout {} ({src})", dir.display()))
                    }
                    _ => {
                        notes.push(format!(
                            "the build number of {} cannot be known ({}); build-dependent quirks count as possibly matching",
                            dir.display(),
                            c.build_unknown.as_deref().unwrap_or(
                                "no git, no sdist PKG-INFO; pass --llama-build N to be precise"
                            )
                        ));
                        (
                            None,
                            format!("checkout {} (build number unknown)", dir.display()),
                        )
                    }
                };
                LlamaTarget {
                    build: b,
                    source,
                    checkout: Some(c),
                }
            }
            (None, Some(b)) => {
                if b > table.meta.newest_build {
                    notes.push(format!(
                        "build {b} is newer than the newest build in the option table ({}); options are taken from that one",
                        table.meta.newest_build
                    ));
                }
                LlamaTarget {
                    build: Some(b),
                    source: "--llama-build".into(),
                    checkout: None,
                }
            }
            (None, None) => LlamaTarget {
                build: None,
                // The number itself is the plan's effective build: said once, where it is shown.
                source:
                    "the newest build gpuprobe knows; pass --llama-build or --llama-cpp to choose"
                        .into(),
                checkout: None,
            },
        };
        Ok((target, notes))
    }

    /// Whether `name` is declared: from the checkout when there is one, else from the table.
    pub fn declares(&self, table: &OptionTable, name: &str) -> bool {
        match &self.checkout {
            Some(c) => c.declares(name),
            None => table.declared(name, self.effective_build(table)),
        }
    }

    /// Whether data (a quirk's `effect.set`) may set `name`: only an option the chosen build
    /// declares (its checkout's `option()`/cache declarations, else the option table), never one
    /// of CMake's own variables, which name compilers, launchers and toolchain files.
    pub fn settable(&self, table: &OptionTable, name: &str) -> bool {
        if name.starts_with("CMAKE_") {
            return false;
        }
        match &self.checkout {
            Some(c) => c.options.contains_key(name),
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
