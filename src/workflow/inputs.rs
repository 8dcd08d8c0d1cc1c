//! What the user asked the workflow for, checked: targets (never `native`), OSes, the toolkit
//! version, the llama.cpp ref and build, and the targets each OS's job can build.

use std::path::Path;

use crate::error::{Error, Result};
use crate::evidence::Evidence;
use crate::llama::LlamaTarget;
use crate::platform::Os;
use crate::profiles::Knowledge;
use crate::report::Backend;
use crate::version::ToolVersion;

use super::Options;

/// The checked input of one workflow.
pub(super) struct Inputs {
    pub oses: Vec<Os>,
    pub backend: Option<Backend>,
    pub rocm: Option<ToolVersion>,
    pub cuda: Option<ToolVersion>,
    pub llama_ref: String,
    /// The build number a `bN` ref names.
    pub ref_build: Option<u64>,
    /// The build number the plans use: given, else the ref's.
    pub build_number: Option<u64>,
    pub llama: LlamaTarget,
    pub evidence: Evidence,
    /// The targets each OS's job builds.
    pub per_os: Vec<(Os, Vec<String>)>,
    /// What was dropped from a job and why.
    pub dropped: Vec<String>,
}

impl Inputs {
    pub fn read(k: &Knowledge, o: &Options, note: &mut dyn FnMut(&str)) -> Result<Self> {
        refuse_native(&o.targets)?;
        let targets = k.targets.expand(&o.targets)?;
        let oses = parse_oses(&o.os)?;
        let version = |flag: &str, v: &Option<String>| {
            v.as_deref()
                .map(|s| ToolVersion::parse(flag, s))
                .transpose()
        };
        let rocm = version("--rocm", &o.rocm)?;
        let cuda = version("--cuda", &o.cuda)?;
        let (llama_ref, ref_build, build_number) = llama_ref_and_build(k, o, note)?;
        let (llama, notes) = LlamaTarget::select(None, build_number, &k.options)?;
        for n in &notes {
            note(n);
        }
        let evidence = super::evidence_of(o, note)?;
        let (per_os, dropped) = targets_per_os(k, &targets, &oses)?;
        Ok(Inputs {
            oses,
            backend: o.backend,
            rocm,
            cuda,
            llama_ref,
            ref_build,
            build_number,
            llama,
            evidence,
            per_os,
            dropped,
        })
    }
}

/// The targets as typed (`--targets gfx1100,gfx120X`), for the regeneration command.
pub(super) fn target_items(list: &str) -> Vec<&str> {
    list.split([',', ';', ' '])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// `native` detects the GPU of the build machine, and a CI build machine has none.
fn refuse_native(list: &str) -> Result<(), Error> {
    if let Some(n) = target_items(list)
        .iter()
        .find(|i| i.eq_ignore_ascii_case("native"))
    {
        return Err(Error::input(
            "--targets",
            format!(
                "`{n}` is not a target here: a CI build machine has no GPU for CMake to detect, so `native` builds for nothing or for the wrong GPU ({})",
                crate::quirks::ids::NATIVE_ARCH_IN_CI
            ),
            "name the architectures, e.g. --targets gfx1100,gfx120X or --targets sm_86,sm_90",
        ));
    }
    Ok(())
}

/// The llama.cpp ref to build, the build number a `bN` ref names, and the build number the plans
/// use (given, else the ref's; None: the newest known build, said on stderr).
fn llama_ref_and_build(
    k: &Knowledge,
    a: &Options,
    note: &mut dyn FnMut(&str),
) -> Result<(String, Option<u64>, Option<u64>)> {
    let llama_ref = match &a.llama_ref {
        Some(r) => {
            check_git_ref(r)?;
            r.clone()
        }
        None => format!("b{}", k.options.meta.newest_build),
    };
    let ref_build = llama_ref
        .strip_prefix('b')
        .and_then(|n| n.parse::<u64>().ok())
        .filter(|n| *n > 0);
    if let (Some(given), Some(from_ref)) = (a.llama_build, ref_build)
        && given != from_ref
    {
        return Err(Error::input(
            "--llama-build",
            format!("build {given} does not match --llama-ref {llama_ref} (build {from_ref})"),
            "leave --llama-build out (a bN ref gives the build), or make them agree",
        ));
    }
    let build_number = a.llama_build.or(ref_build);
    if build_number.is_none() {
        note(&format!(
            "--llama-ref {llama_ref} is not a bN tag and --llama-build is not given: options and quirks are taken for the newest known build ({}), and the built binary's build number is not checked",
            k.options.meta.newest_build
        ));
    }
    Ok((llama_ref, ref_build, build_number))
}

/// The targets each OS's job builds, and what was dropped from a job and why: a target the OS's
/// toolkit does not support (Instinct on Windows ROCm) leaves that OS's job.
#[allow(clippy::type_complexity)]
fn targets_per_os(
    k: &Knowledge,
    targets: &[String],
    oses: &[Os],
) -> Result<(Vec<(Os, Vec<String>)>, Vec<String>), Error> {
    let mut dropped: Vec<String> = Vec::new();
    let mut per_os: Vec<(Os, Vec<String>)> = Vec::new();
    for os in oses {
        let (keep, drop): (Vec<String>, Vec<String>) = targets
            .iter()
            .cloned()
            .partition(|t| k.targets.get(t).is_none_or(|t| t.supported_on(*os)));
        if !drop.is_empty() {
            let why = drop
                .iter()
                .filter_map(|t| k.targets.get(t).and_then(|t| t.os_note.clone()))
                .next()
                .unwrap_or_else(|| "its toolkit does not support them".into());
            dropped.push(format!(
                "{} dropped from the {} job: {why}",
                drop.join(", "),
                os.as_str()
            ));
        }
        if keep.is_empty() {
            return Err(Error::input(
                "--targets",
                format!(
                    "no target is left for {}: {}",
                    os.as_str(),
                    dropped.last().map(String::as_str).unwrap_or("")
                ),
                format!(
                    "leave {} out of --os, or add targets it supports",
                    os.as_str()
                ),
            ));
        }
        per_os.push((*os, keep));
    }
    Ok((per_os, dropped))
}

/// The version of the toolkit the workflow installs: the one given for the plans' backend.
pub(super) fn toolkit_version(
    plan_backend: Backend,
    rocm: Option<&ToolVersion>,
    cuda: Option<&ToolVersion>,
) -> Result<ToolVersion, Error> {
    let version = match (plan_backend, rocm, cuda) {
        (Backend::Hip, Some(v), None) => v.clone(),
        (Backend::Cuda, None, Some(v)) => v.clone(),
        (Backend::Hip, None, Some(_)) => {
            return Err(Error::input(
                "--cuda",
                "the targets are AMD GPUs, built with ROCm",
                "give --rocm VER instead, e.g. --rocm 7.2.1 or --rocm 7.14.0",
            ));
        }
        (Backend::Cuda, Some(_), None) => {
            return Err(Error::input(
                "--rocm",
                "the targets are NVIDIA GPUs, built with CUDA",
                "give --cuda VER instead, e.g. --cuda 12.8",
            ));
        }
        (Backend::Hip, None, None) => {
            return Err(Error::input(
                "--rocm",
                "the workflow installs ROCm, and needs its version",
                "give --rocm VER, e.g. --rocm 7.2.1 (AMD's rocm/dev image, Linux) or --rocm 7.14.0 (TheRock wheels)",
            ));
        }
        (Backend::Cuda, None, None) => {
            return Err(Error::input(
                "--cuda",
                "the workflow installs CUDA, and needs its version",
                "give --cuda VER, e.g. --cuda 12.8",
            ));
        }
        (_, Some(_), Some(_)) => {
            return Err(Error::input(
                "--rocm/--cuda",
                "give the version of one toolkit only",
                "drop --rocm or --cuda",
            ));
        }
    };
    Ok(version)
}

fn parse_oses(list: &str) -> Result<Vec<Os>, Error> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let os = match item.to_ascii_lowercase().as_str() {
            "linux" | "ubuntu" => Os::Linux,
            "windows" => Os::Windows,
            _ => {
                return Err(Error::input(
                    "--os",
                    format!("unknown OS `{item}`"),
                    "use linux, windows or linux,windows",
                ));
            }
        };
        if !out.contains(&os) {
            out.push(os);
        }
    }
    if out.is_empty() {
        return Err(Error::input(
            "--os",
            "no operating system given",
            "use linux, windows or linux,windows",
        ));
    }
    Ok(out)
}

/// A git ref that can go into the workflow as data: tag, branch or commit, the characters of
/// `git check-ref-format` minus everything a shell or YAML would read specially.
pub fn check_git_ref(r: &str) -> Result<(), Error> {
    let ok_chars = r
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "._/-".contains(c));
    let ok_shape = !r.is_empty()
        && r.len() <= 200
        && !r.starts_with(['-', '/', '.'])
        && !r.ends_with(['/', '.'])
        && !r.contains("..")
        && !r.contains("//")
        && !r.ends_with(".lock");
    if ok_chars && ok_shape {
        Ok(())
    } else {
        Err(Error::input(
            "--llama-ref",
            format!("`{r}` is not a git tag, branch or commit that gpuprobe can put in a workflow"),
            "use a release tag such as b11434, a branch name or a commit hash (letters, digits, . _ / -)",
        ))
    }
}

/// A `--from` path as it may appear in the workflow's header comment: plain characters only.
pub(super) fn shown_path(p: &Path) -> Result<String, Error> {
    let text = p.display().to_string();
    if !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._/-+".contains(c))
    {
        Ok(text)
    } else {
        Err(Error::input(
            "--from",
            format!("`{text}` cannot be written into the workflow's regenerate command"),
            "use a path of letters, digits and . _ / - +",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_only_plain_git_refs() {
        for ok in [
            "b11434",
            "master",
            "feature/x-1",
            "0123456789abcdef0123456789abcdef01234567",
        ] {
            assert!(check_git_ref(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "$(touch x)",
            "-rf",
            "a..b",
            "a b",
            "x;y",
            "v1.lock",
            "a\nb",
            "${{ github.token }}",
        ] {
            assert!(check_git_ref(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parses_os_lists() {
        assert_eq!(
            parse_oses("linux, windows,linux").unwrap(),
            vec![Os::Linux, Os::Windows]
        );
        assert!(parse_oses("macos").is_err());
        assert!(parse_oses(" , ").is_err());
    }
}
