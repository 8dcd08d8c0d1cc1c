//! What the explanations are given: the build's facts and number, the machine, the knowledge, the
//! signatures found in the text and the text itself, to quote.

use super::build_number::BuildNumber;
use super::corpus::Corpus;
use super::machine::Machine;
use super::parse::BuildFacts;
use super::signatures::{Hit, SignatureTable};
use crate::platform::Os;
use crate::profiles::Knowledge;

/// Everything the explanations and the judge read.
pub struct Input<'a> {
    pub facts: &'a BuildFacts,
    pub build: BuildNumber,
    pub knowledge: &'a Knowledge,
    pub signatures: &'a SignatureTable,
    pub machine: Option<Machine<'a>>,
    pub os: Os,
    /// Relevant environment variables set where check-build runs (quirk `env_set`).
    pub env_set: Vec<String>,
    /// How to get the commented build script, e.g. `gpuprobe cmake-flags --llama-build 11434`.
    pub script_hint: String,
    /// The text judged, for quoting.
    pub corpus: &'a Corpus,
    /// The signatures found in it.
    pub hits: &'a [Hit],
    /// The folder of the binary examined (for the `--exercise` command in fixes).
    pub binary_dir: Option<String>,
}
