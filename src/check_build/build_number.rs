//! The llama.cpp build number judged: `--llama-build`, else what the build's output says.

use schemars::JsonSchema;
use serde::Serialize;

use super::parse::BuildFacts;

/// The llama.cpp build number used for judging, and where it came from.
#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
pub struct BuildNumber {
    pub value: Option<u64>,
    #[schemars(with = "String")]
    pub source: BuildSource,
}

/// Where the build number judged came from; written `--llama-build`, `version line` (the line
/// that gave it), `output` or `unknown`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildSource {
    /// `--llama-build N` overrides what the build reports.
    Flag,
    /// The kind of line that gave it (`version`, `bench`, ...).
    Line(String),
    Output,
    Unknown,
}

impl std::fmt::Display for BuildSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildSource::Flag => f.write_str("--llama-build"),
            BuildSource::Line(kind) => write!(f, "{kind} line"),
            BuildSource::Output => f.write_str("output"),
            BuildSource::Unknown => f.write_str("unknown"),
        }
    }
}

impl Serialize for BuildSource {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The build number judged: `--llama-build`, else what the output says.
pub fn build_number(given: Option<u64>, facts: &BuildFacts) -> BuildNumber {
    match (given, facts.version.build) {
        (Some(n), _) => BuildNumber {
            value: Some(n),
            source: BuildSource::Flag,
        },
        (None, Some(n)) => BuildNumber {
            value: Some(n),
            source: facts
                .version
                .source
                .clone()
                .map_or(BuildSource::Output, BuildSource::Line),
        },
        (None, None) => BuildNumber {
            value: None,
            source: BuildSource::Unknown,
        },
    }
}
