//! A fleet's measurements as Kubernetes publishes them: the node labels `detect --format nfd`
//! wrote through Node Feature Discovery, read back from a `kubectl get nodes -o json` dump (or
//! one node's `kubectl get node NAME -o json`), so a release pipeline can plan from what the
//! cluster measured.
//!
//! Labels are only as trustworthy as whoever may label nodes, and lossy: one smoke outcome per
//! architecture (the worst of that node's devices), runtime versions, no VMM granularity. So a
//! node's labels count as smoke evidence, never more, and every label gpuprobe cannot read is
//! named rather than skipped.

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::platform::Os;
use crate::report::{Backend, SmokeOutcome};

/// The label namespace `detect --format nfd` writes: a sub-namespace of NFD's own, which its
/// master accepts by default.
pub const PREFIX: &str = "gpuprobe.feature.node.kubernetes.io";

/// Most nodes one dump may hold (Kubernetes' documented scale limit is 5,000 nodes).
const MAX_NODES: usize = 10_000;

/// The `kind`s a `kubectl get node(s) -o json` dump has: a list, or one node.
pub fn is_node_dump(value: &serde_json::Value) -> bool {
    value.get("schema").is_none()
        && matches!(
            value.get("kind").and_then(|k| k.as_str()),
            Some("List" | "NodeList" | "Node")
        )
}

/// One node that carries gpuprobe's labels.
#[derive(Debug, Clone, PartialEq)]
pub struct LabelledNode {
    pub name: String,
    pub os: Os,
    /// Each GPU architecture the node reported, with its VMM smoke outcome where one was labelled.
    pub archs: Vec<(String, Option<SmokeOutcome>)>,
    /// Runtime version per backend (`cuda-runtime`, `hip-runtime`).
    pub runtimes: Vec<(Backend, String)>,
}

impl LabelledNode {
    pub fn runtime(&self, backend: Backend) -> Option<&str> {
        self.runtimes
            .iter()
            .find(|(b, _)| *b == backend)
            .map(|(_, v)| v.as_str())
    }
}

/// What one dump holds: the labelled nodes, the nodes without gpuprobe's labels, and every
/// label that was gpuprobe's but could not be read (each a sentence naming the node and label).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeDump {
    pub nodes: Vec<LabelledNode>,
    pub unlabelled: Vec<String>,
    pub unread: Vec<String>,
}

#[derive(Deserialize)]
struct Dump {
    kind: String,
    #[serde(default)]
    items: Vec<NodeJson>,
    #[serde(default)]
    metadata: Metadata,
    #[serde(default)]
    status: Status,
}

#[derive(Deserialize)]
struct NodeJson {
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    metadata: Metadata,
    #[serde(default)]
    status: Status,
}

#[derive(Deserialize, Default)]
struct Metadata {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

#[derive(Deserialize, Default)]
struct Status {
    #[serde(default, rename = "nodeInfo")]
    node_info: NodeInfo,
}

#[derive(Deserialize, Default)]
struct NodeInfo {
    #[serde(default, rename = "operatingSystem")]
    operating_system: Option<String>,
}

const FIX: &str = "pass the output of `kubectl get nodes -o json` (or `kubectl get node NAME -o json`) for nodes labelled by `gpuprobe detect --format nfd`";

/// Reads a dump already parsed as JSON (`shown` names it in errors). A dump with no node carrying
/// gpuprobe's labels is an error: there is nothing in it to plan from.
pub fn read(value: serde_json::Value, shown: &str) -> Result<NodeDump> {
    let dump: Dump = serde_json::from_value(value)
        .map_err(|e| Error::input(shown, format!("not a Kubernetes node list: {e}"), FIX))?;
    let items: Vec<NodeJson> = match dump.kind.as_str() {
        "Node" => vec![NodeJson {
            kind: Some("Node".into()),
            metadata: dump.metadata,
            status: dump.status,
        }],
        _ => dump.items,
    };
    if items.len() > MAX_NODES {
        return Err(Error::input(
            shown,
            format!("{} nodes; at most {MAX_NODES} are read", items.len()),
            "dump fewer nodes, e.g. `kubectl get nodes -l gpuprobe.feature.node.kubernetes.io/gpus -o json`",
        ));
    }
    let mut out = NodeDump::default();
    for (i, item) in items.into_iter().enumerate() {
        if let Some(kind) = item.kind.as_deref().filter(|k| *k != "Node") {
            return Err(Error::input(
                shown,
                format!(
                    "item {i} is a `{}`, not a Node",
                    crate::neutral::inline(kind)
                ),
                FIX,
            ));
        }
        let name = item
            .metadata
            .name
            .as_deref()
            .map(|n| crate::neutral::inline(n).into_owned())
            .unwrap_or_else(|| format!("item {i}"));
        match read_node(&name, &item.metadata.labels, &item.status, &mut out.unread) {
            Some(node) => out.nodes.push(node),
            None => out.unlabelled.push(name),
        }
    }
    if out.nodes.is_empty() {
        return Err(Error::input(
            shown,
            format!(
                "none of its {} node(s) carries a `{PREFIX}/` label",
                out.unlabelled.len()
            ),
            "label the GPU nodes first: run `gpuprobe detect --format nfd` on each (deploy/gpuprobe-nfd.yaml does it through Node Feature Discovery), then dump them again",
        ));
    }
    Ok(out)
}

/// One node's gpuprobe labels, or None where it has none.
fn read_node(
    name: &str,
    labels: &BTreeMap<String, String>,
    status: &Status,
    unread: &mut Vec<String>,
) -> Option<LabelledNode> {
    let ours: Vec<(&str, &str)> = labels
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(PREFIX)?.strip_prefix('/')?, v.as_str())))
        .collect();
    if ours.is_empty() {
        return None;
    }
    let os = status
        .node_info
        .operating_system
        .as_deref()
        .map_or(Os::Linux, Os::from_host);
    let mut node = LabelledNode {
        name: name.to_string(),
        os,
        archs: Vec::new(),
        runtimes: Vec::new(),
    };
    let mut smoke: BTreeMap<String, SmokeOutcome> = BTreeMap::new();
    for (label, value) in &ours {
        match read_label(label, value) {
            Label::Arch(a) => node.archs.push((a, None)),
            Label::Smoke(a, o) => {
                smoke.insert(a, o);
            }
            Label::Runtime(b, v) => node.runtimes.push((b, v.to_string())),
            Label::Known => {}
            Label::Unread(why) => unread.push(format!(
                "node {name}: label `{}/{}={}` {why}",
                PREFIX,
                crate::neutral::inline(label),
                crate::neutral::inline(value)
            )),
        }
    }
    // Where each architecture is listed (the first time), so that pairing smoke labels with
    // arch labels stays linear in a node with very many labels.
    let mut at: HashMap<String, usize> = HashMap::new();
    for (i, (a, _)) in node.archs.iter().enumerate() {
        at.entry(a.clone()).or_insert(i);
    }
    for (arch, outcome) in smoke {
        match at.get(&arch) {
            Some(&i) => node.archs[i].1 = Some(outcome),
            // A smoke label for an architecture the node does not list still names one of its
            // GPUs (the arch label may have been removed by hand): keep it.
            None => node.archs.push((arch, Some(outcome))),
        }
    }
    Some(node)
}

enum Label<'a> {
    Arch(String),
    Smoke(String, SmokeOutcome),
    Runtime(Backend, &'a str),
    /// A label gpuprobe writes that says nothing a plan reads (counts, versions, its own advice:
    /// a plan is made from the measurements, not from an earlier plan).
    Known,
    Unread(&'static str),
}

fn read_label<'a>(label: &str, value: &'a str) -> Label<'a> {
    if let Some(arch) = label.strip_prefix("arch.") {
        return match value {
            "true" => Label::Arch(bare(arch)),
            _ => Label::Unread("is not `true`"),
        };
    }
    if let Some(arch) = label.strip_prefix("vmm-smoke.") {
        return match smoke_outcome(value) {
            Some(o) => Label::Smoke(bare(arch), o),
            None => Label::Unread(
                "is not a smoke outcome (pass, partial, fail, hang, crash, bad-output, not-run)",
            ),
        };
    }
    match label {
        "cuda-runtime" => Label::Runtime(Backend::Cuda, value),
        "hip-runtime" => Label::Runtime(Backend::Hip, value),
        "gpuprobe-version" | "gpus" | "cuda-driver" | "hip-driver" | "backend" | "llama-build"
        | "build-groups" | "build-group" | "vmm-build" | "prebuilt" | "prebuilt-build"
        | "prebuilt-companion" => Label::Known,
        l if l.starts_with("build-group.") || l.starts_with("vmm-build.") => Label::Known,
        _ => Label::Unread("is not one gpuprobe writes"),
    }
}

/// The architecture a label names: earlier gpuprobe versions wrote the HIP feature suffix
/// (`gfx90a:sramecc+:xnack-` became `gfx90a-sramecc--xnack`); the target is the part before it.
fn bare(arch: &str) -> String {
    let cut = ["-sramecc", "-xnack"]
        .iter()
        .filter_map(|f| arch.find(f))
        .min()
        .unwrap_or(arch.len());
    arch[..cut].to_string()
}

fn smoke_outcome(value: &str) -> Option<SmokeOutcome> {
    [
        SmokeOutcome::Pass,
        SmokeOutcome::Partial,
        SmokeOutcome::Fail,
        SmokeOutcome::Hang,
        SmokeOutcome::Crash,
        SmokeOutcome::BadOutput,
        SmokeOutcome::NotRun,
    ]
    .into_iter()
    .find(|o| o.as_str() == value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, labels: serde_json::Value) -> serde_json::Value {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
               "status": {"nodeInfo": {"operatingSystem": "linux"}}})
    }

    #[test]
    fn a_list_yields_labelled_nodes_and_names_the_rest() {
        let p = |s: &str| format!("{PREFIX}/{s}");
        let dump = json!({"apiVersion": "v1", "kind": "List", "items": [
            node("gpu-a", json!({p("arch.gfx1101"): "true", p("vmm-smoke.gfx1101"): "pass",
                                 p("hip-runtime"): "7.14.60850", p("vmm-build"): "true",
                                 "kubernetes.io/os": "linux"})),
            node("cpu-b", json!({"kubernetes.io/os": "linux"})),
            node("gpu-c", json!({p("arch.gfx90a-sramecc--xnack"): "true",
                                 p("vmm-smoke.gfx90a-sramecc--xnack"): "sometimes",
                                 p("colour"): "blue"})),
        ]});
        let d = read(dump, "nodes.json").unwrap();
        assert_eq!(d.unlabelled, ["cpu-b"]);
        assert_eq!(d.nodes.len(), 2);
        assert_eq!(
            d.nodes[0].archs,
            [("gfx1101".to_string(), Some(SmokeOutcome::Pass))]
        );
        assert_eq!(d.nodes[0].runtime(Backend::Hip), Some("7.14.60850"));
        assert_eq!(d.nodes[1].archs, [("gfx90a".to_string(), None)]);
        assert_eq!(d.unread.len(), 2, "{:?}", d.unread);
        assert!(d.unread.iter().any(|u| u.contains("colour")));
        assert!(d.unread.iter().any(|u| u.contains("sometimes")));
    }

    #[test]
    fn only_hips_feature_suffix_is_cut_from_an_arch_label() {
        assert_eq!(bare("gfx90a-sramecc--xnack"), "gfx90a");
        assert_eq!(bare("gfx942-xnack"), "gfx942");
        assert_eq!(bare("gfx1201"), "gfx1201");
        // LLVM's generic targets have dashes of their own.
        assert_eq!(bare("gfx10-3-generic"), "gfx10-3-generic");
    }

    #[test]
    fn one_node_and_refusals() {
        let one = node(
            "n1",
            json!({format!("{PREFIX}/arch.sm_90"): "true", format!("{PREFIX}/vmm-smoke.sm_90"): "hang"}),
        );
        let d = read(one, "node.json").unwrap();
        assert_eq!(
            d.nodes[0].archs,
            [("sm_90".to_string(), Some(SmokeOutcome::Hang))]
        );
        let none = json!({"kind": "List", "items": [node("n1", json!({"a": "b"}))]});
        let e = read(none, "nodes.json").unwrap_err().to_string();
        assert!(
            e.contains("nodes.json") && e.contains("detect --format nfd"),
            "{e}"
        );
        let pods = json!({"kind": "List", "items": [{"kind": "Pod", "metadata": {"name": "p"}}]});
        let e = read(pods, "pods.json").unwrap_err().to_string();
        assert!(e.contains("`Pod`, not a Node"), "{e}");
    }
}
