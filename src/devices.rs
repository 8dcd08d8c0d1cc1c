//! Which GPUs a plan is for, where they are not measured here: named one by one (`--machine`),
//! gathered from several reports (a fleet), and the backends they need; the OS of the host.

use crate::error::{Error, Result};
use crate::platform::Os;
use crate::profiles::Knowledge;
use crate::report::{Backend, Report};
use crate::resolve::Devices;
use crate::version::Version;

/// `--machine`: one name per GPU (repeats mean several of a kind); family tokens are refused,
/// since a machine has concrete GPUs.
pub fn machine_gpus(k: &Knowledge, list: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for item in list
        .split([',', ';', ' '])
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let name = crate::targets::normalise(item);
        if k.targets
            .family
            .iter()
            .any(|f| f.token.eq_ignore_ascii_case(&name))
        {
            return Err(Error::input(
                "--machine",
                format!("`{item}` is a family of GPUs, not one GPU"),
                "name each GPU of the machine (e.g. --machine gfx1201,gfx1103), or use --targets for a family",
            ));
        }
        let expanded = k.targets.expand(item).map_err(|e| match e {
            Error::Input { message, fix, .. } => Error::input("--machine", message, fix),
            other => other,
        })?;
        out.extend(expanded);
    }
    if out.is_empty() {
        return Err(Error::input(
            "--machine",
            "no GPU named",
            "name each GPU of the machine, e.g. --machine gfx1201,gfx1103",
        ));
    }
    Ok(out)
}

/// What several reports (or labelled nodes) have in common, for one plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Fleet {
    /// The union of their GPU architectures (known ones), in order of appearance.
    pub archs: Vec<String>,
    /// Their OS, where all agree.
    pub os: Option<Os>,
    /// Their HIP runtime series, where all agree.
    pub hip_series: Option<Version>,
    /// Architectures no plan can be made for, each with the machine that has it (named, since
    /// a fleet's GPU left out of the plan is not fine because it is unknown).
    pub unknown: Vec<String>,
}

/// One machine of a fleet: a detect report, or a node's labels.
#[derive(Debug, Clone)]
pub struct Member {
    /// Where it came from, for the notes: a file, or a file and node.
    pub origin: String,
    pub archs: Vec<String>,
    pub os: Os,
    pub hip_runtime: Option<String>,
}

impl Member {
    pub fn of_report(r: &Report, origin: &str) -> Member {
        Member {
            origin: origin.to_string(),
            archs: r.devices.iter().map(|d| d.arch.clone()).collect(),
            os: Os::from_host(&r.host.os),
            hip_runtime: r
                .backends
                .iter()
                .find(|b| b.backend == Backend::Hip)
                .and_then(|b| b.runtime_version.clone()),
        }
    }

    pub fn of_node(n: &crate::node_labels::LabelledNode, origin: &str) -> Member {
        Member {
            origin: format!("{origin} node {}", n.name),
            archs: n.archs.iter().map(|(a, _)| a.clone()).collect(),
            os: n.os,
            hip_runtime: n.runtime(Backend::Hip).map(str::to_string),
        }
    }
}

/// Several machines without --targets: a fleet. The union of their GPU architectures, their OS
/// and HIP runtime series where all agree.
pub fn fleet(k: &Knowledge, members: &[Member]) -> Result<Fleet> {
    let mut archs: Vec<String> = Vec::new();
    let mut unknown: Vec<String> = Vec::new();
    for m in members {
        for a in &m.archs {
            if k.targets.get(a).is_some() {
                if !archs.contains(a) {
                    archs.push(a.clone());
                }
            } else {
                unknown.push(format!(
                    "{}: `{}` is no GPU architecture gpuprobe knows, so the plan does not cover it",
                    m.origin,
                    crate::neutral::inline(a)
                ));
            }
        }
    }
    if archs.is_empty() {
        return Err(Error::input(
            "--from",
            "none of the reports lists a GPU with a known architecture",
            "pass reports from machines whose GPUs were found, or declare --targets",
        ));
    }
    let oses: Vec<Os> = crate::resolve::dedup(members.iter().map(|m| m.os));
    let series: Vec<Option<Version>> = crate::resolve::dedup(members.iter().map(|m| {
        m.hip_runtime
            .as_deref()
            .and_then(crate::evidence::series_of)
    }));
    Ok(Fleet {
        archs,
        os: (oses.len() == 1).then(|| oses[0]),
        hip_series: match series.as_slice() {
            [Some(v)] => Some(v.clone()),
            _ => None,
        },
        unknown,
    })
}

/// The backends a plan can be about: the one asked for, else those of its devices. Toolkits
/// are looked up only for these (a CUDA plan has no use for the ROCm on PATH).
pub fn plan_backends(k: &Knowledge, asked: Option<Backend>, devices: &Devices<'_>) -> Vec<Backend> {
    if let Some(b) = asked {
        return vec![b];
    }
    let of_vendor = |v: crate::report::Vendor| match v {
        crate::report::Vendor::Amd => Backend::Hip,
        crate::report::Vendor::Nvidia => Backend::Cuda,
    };
    let all: Vec<Backend> = match devices {
        Devices::Declared(names) | Devices::Machine(names) => names
            .iter()
            .filter_map(|n| k.targets.get(n))
            .map(|t| of_vendor(t.vendor))
            .collect(),
        Devices::Measured { report, .. } => report.devices.iter().map(|d| d.backend).collect(),
    };
    crate::resolve::dedup(all.into_iter())
}

/// The OS of the measured host, or of this one.
pub fn host_os(report: Option<&Report>) -> Os {
    match report {
        Some(r) => Os::from_host(&r.host.os),
        None => Os::from_host(&crate::probe::host().os),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_machine_names_gpus_not_families() {
        let k = Knowledge::bundled().unwrap();
        assert_eq!(
            machine_gpus(&k, "gfx1201, gfx1201;sm_90").unwrap(),
            ["gfx1201", "gfx1201", "sm_90"]
        );
        let e = machine_gpus(&k, "gfx120X").unwrap_err().to_string();
        assert!(e.contains("family"), "{e}");
        assert!(machine_gpus(&k, " , ").is_err());
    }

    #[test]
    fn backends_follow_the_devices_unless_one_is_asked_for() {
        let k = Knowledge::bundled().unwrap();
        let mixed = Devices::Declared(vec!["gfx1201".into(), "sm_90".into(), "sm_86".into()]);
        assert_eq!(
            plan_backends(&k, None, &mixed),
            [Backend::Hip, Backend::Cuda]
        );
        assert_eq!(
            plan_backends(&k, Some(Backend::Cuda), &mixed),
            [Backend::Cuda]
        );
    }
}
