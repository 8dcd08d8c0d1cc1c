//! `cmake-flags --from` and `workflow --from` a `kubectl get nodes -o json` dump: the labels
//! `detect --format nfd` published through Node Feature Discovery, read back as a fleet's
//! measurements. tests/fixtures/kubectl-nodes/nodes.json holds the H200 node's labels exactly as
//! the real capture's feature file wrote them, a CPU node, and a SYNTHETIC gfx1101 node (see the
//! folder's README); each of its nodes passes Kubernetes' Node schema (scripts/lint-deploy.sh).

mod common;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

const NODES: &str = "tests/fixtures/kubectl-nodes/nodes.json";
const H200_NFD: &str = "tests/fixtures/nvidia-h200-driver580-nfd/detect.nfd";
const PREFIX: &str = "gpuprobe.feature.node.kubernetes.io";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

use common::run_in_repo as run;

fn plan(args: &[&str]) -> (Value, String) {
    let mut a = vec!["cmake-flags", "--format", "json", "--toolchain", "none"];
    a.extend_from_slice(args);
    let (code, out, err) = run(&a);
    assert_eq!(code, 0, "{err}");
    (serde_json::from_str(&out).unwrap(), err)
}

/// (targets, vmm) of each group.
fn groups(p: &Value) -> Vec<(String, bool)> {
    p["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let t: Vec<&str> = g["targets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap())
                .collect();
            (t.join(";"), g["vmm"].as_bool().unwrap())
        })
        .collect()
}

fn nodes() -> Value {
    serde_json::from_str(&std::fs::read_to_string(root().join(NODES)).unwrap()).unwrap()
}

/// The fixture with the synthetic node's labels changed by `edit`, written under `dir`.
fn nodes_with(dir: &Path, edit: impl Fn(&mut serde_json::Map<String, Value>)) -> PathBuf {
    let mut v = nodes();
    for item in v["items"].as_array_mut().unwrap() {
        if item["metadata"]["name"] == "synthetic-gfx1101-node" {
            edit(item["metadata"]["labels"].as_object_mut().unwrap());
        }
    }
    let p = dir.join("nodes.json");
    std::fs::write(&p, v.to_string()).unwrap();
    p
}

fn label(name: &str) -> String {
    format!("{PREFIX}/{name}")
}

#[test]
fn the_h200_node_carries_exactly_what_the_real_feature_file_says() {
    let file = std::fs::read_to_string(root().join(H200_NFD)).unwrap();
    let want: Vec<(String, String)> = file
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect();
    let v = nodes();
    let h200 = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["metadata"]["name"] == "h200-node-1")
        .unwrap();
    let got: Vec<(String, String)> = h200["metadata"]["labels"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| k.starts_with(PREFIX))
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn a_node_dump_plans_the_fleet_and_its_smoke_labels_are_evidence() {
    // CUDA: the H200 node's sm_90, with its measured pass.
    let (p, err) = plan(&["--backend", "cuda", "--cuda", "13.0", "--from", NODES]);
    assert_eq!(groups(&p), [("sm_90".to_string(), true)], "{p:#}");
    assert!(
        err.contains("cpu-node-1") && err.contains("no gpuprobe labels"),
        "the unlabelled node is named: {err}"
    );
    // HIP on ROCm 7.14: the synthetic node's gfx1101 pass lifts the legacy pool (Q3), as the
    // same measurement in a detect report does.
    let (p, _) = plan(&["--backend", "hip", "--rocm", "7.14.0", "--from", NODES]);
    assert_eq!(groups(&p), [("gfx1101".to_string(), true)], "{p:#}");
    let text = p.to_string();
    assert!(
        text.contains("node synthetic-gfx1101-node"),
        "the evidence names its node: {p:#}"
    );
    // On another ROCm series the same labels are no evidence.
    let (p, _) = plan(&["--backend", "hip", "--rocm", "7.13.0", "--from", NODES]);
    assert_eq!(groups(&p), [("gfx1101".to_string(), false)], "{p:#}");
}

#[test]
fn a_failing_node_keeps_the_legacy_pool_and_odd_labels_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let hang = nodes_with(dir.path(), |l| {
        l.insert(label("vmm-smoke.gfx1101"), json!("hang"));
        l.insert(label("colour"), json!("blue"));
    });
    let hang = hang.to_str().unwrap();
    let (p, err) = plan(&["--backend", "hip", "--rocm", "7.14.0", "--from", hang]);
    assert_eq!(groups(&p), [("gfx1101".to_string(), false)], "{p:#}");
    assert!(
        err.contains("colour=blue") && err.contains("not one gpuprobe writes"),
        "{err}"
    );
    // A report that passed elsewhere does not outvote the node that hung.
    let (p, _) = plan(&[
        "--backend",
        "hip",
        "--rocm",
        "7.14.0",
        "--from",
        hang,
        "--from",
        "tests/fixtures/synthetic/gfx1101-rocm7.14-linux-smoke-pass.json",
    ]);
    assert_eq!(groups(&p), [("gfx1101".to_string(), false)], "{p:#}");
}

#[test]
fn workflow_from_a_node_dump_moves_only_the_measured_architecture() {
    let (code, out, err) = run(&[
        "workflow",
        "--targets",
        "gfx1101,gfx1201",
        "--rocm",
        "7.14.0",
        "--os",
        "linux",
        "--llama-ref",
        "b11434",
        "--from",
        NODES,
    ]);
    assert_eq!(code, 0, "{err}");
    // The matrix entry of each group: its targets, then whether VMM stays compiled out.
    let mut entries: Vec<(String, String)> = Vec::new();
    let mut targets = None;
    for l in out.lines().map(str::trim) {
        if let Some(t) = l.strip_prefix("targets: ") {
            targets = Some(t.trim_matches('"').to_string());
        } else if let Some(v) = l.strip_prefix("expect_no_vmm: ")
            && let Some(t) = targets.take()
        {
            entries.push((t, v.trim_matches('"').to_string()));
        }
    }
    entries.sort();
    assert_eq!(
        entries,
        [
            ("gfx1101".to_string(), "0".to_string()),
            ("gfx1201".to_string(), "1".to_string())
        ],
        "{out}"
    );
    assert!(err.contains("cpu-node-1"), "{err}");
}

#[test]
fn labels_written_by_detect_plan_the_same_as_its_report() {
    // Round trip through the binary: the real H200 capture replayed into a feature file, its
    // labels put on a node, and the node planned from.
    let out = common::gpuprobe()
        .args(["detect", "--format", "nfd"])
        .env(
            "GPUPROBE_REPLAY",
            root().join("tests/fixtures/dumps/nvidia-h200-driver580.json"),
        )
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut labels = serde_json::Map::new();
    for l in String::from_utf8(out.stdout).unwrap().lines() {
        if let Some((k, v)) = l.split_once('=').filter(|_| !l.starts_with('#')) {
            labels.insert(k.to_string(), json!(v));
        }
    }
    let dump = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "replayed", "labels": labels},
        "status": {"nodeInfo": {"operatingSystem": "linux"}}});
    let dir = tempfile::tempdir().unwrap();
    let node = dir.path().join("node.json");
    std::fs::write(&node, dump.to_string()).unwrap();
    let args = ["--backend", "cuda", "--cuda", "13.0", "--from"];
    let (from_node, _) = plan(&[&args[..], &[node.to_str().unwrap()]].concat());
    let (from_report, _) = plan(
        &[
            &args[..],
            &["tests/fixtures/nvidia-h200-driver580-nfd/detect.json"],
        ]
        .concat(),
    );
    assert_eq!(groups(&from_node), groups(&from_report));
}

#[test]
fn dumps_that_cannot_be_planned_from_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "unlabelled.json",
            json!({"apiVersion": "v1", "kind": "List", "items": [
                {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "labels": {"a": "b"}}}]})
            .to_string(),
            "detect --format nfd",
        ),
        (
            "pods.json",
            json!({"apiVersion": "v1", "kind": "List", "items": [
                {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}]})
            .to_string(),
            "not a Node",
        ),
        (
            "yaml.json",
            "apiVersion: v1\nkind: List\nitems: []\n".to_string(),
            "kubectl get nodes -o json",
        ),
        (
            "labels-not-strings.json",
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "labels": {"a": 1}}})
            .to_string(),
            "not a Kubernetes node list",
        ),
    ];
    for (name, text, says) in cases {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        let (code, out, err) = run(&[
            "cmake-flags",
            "--toolchain",
            "none",
            "--from",
            p.to_str().unwrap(),
        ]);
        assert_eq!(code, 2, "{name}: {err}");
        assert!(out.is_empty(), "{name}: nothing half-written: {out}");
        assert!(err.contains(name) && err.contains(says), "{name}: {err}");
    }
}

#[test]
fn hostile_names_and_labels_reach_the_terminal_neutralised() {
    let dir = tempfile::tempdir().unwrap();
    let mut v = nodes();
    for item in v["items"].as_array_mut().unwrap() {
        if item["metadata"]["name"] == "cpu-node-1" {
            item["metadata"]["name"] = json!("evil\u{1b}]0;pwned\u{7}\nnode");
        }
        if item["metadata"]["name"] == "synthetic-gfx1101-node" {
            item["metadata"]["labels"][label("x\u{1b}[31m")] = json!("\u{1b}[2J");
        }
    }
    let p = dir.path().join("nodes.json");
    std::fs::write(&p, v.to_string()).unwrap();
    let (code, _, err) = run(&[
        "cmake-flags",
        "--toolchain",
        "none",
        "--backend",
        "hip",
        "--rocm",
        "7.14.0",
        "--from",
        p.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains('\u{1b}') && !err.contains('\u{7}'), "{err:?}");
    assert!(err.contains("evil"), "the node is still named: {err}");
}

#[test]
fn the_h200_labels_plan_here_as_they_planned_on_the_h200() {
    // On the H200: `detect --format nfd`, its labels put on a Node, and `cmake-flags --from` that
    // node (tests/fixtures/nvidia-h200-driver580-nfd/{node,plan-from-node}.json). The same node
    // read here must give the same groups.
    let dir = "tests/fixtures/nvidia-h200-driver580-nfd";
    let there: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join(dir).join("plan-from-node.json")).unwrap(),
    )
    .unwrap();
    let node = format!("{dir}/node.json");
    let (here, _) = plan(&["--backend", "cuda", "--from", &node]);
    assert_eq!(groups(&here), groups(&there));
    assert_eq!(groups(&there), [("sm_90".to_string(), true)]);
}
