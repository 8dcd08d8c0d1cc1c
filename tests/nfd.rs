//! `detect --format nfd`: a Node Feature Discovery local feature file, read back by the rules
//! NFD documents for its `local` source (docs/usage/customization-guide.md, "Local feature
//! source": `<namespace>/<name>[=<value>]` lines, `#` comments, `# +expiry-time=` in RFC 3339,
//! files over 64 kB ignored, dot files ignored; labels limited to `feature.node.kubernetes.io`
//! and its sub-namespaces unless the master is told otherwise), on the real H200 captures.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use gpuprobe::emit::nfd;
use proptest::prelude::*;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// NFD's reading of a feature file: the labels it would publish, or why it would not.
fn nfd_reads(file: &str) -> Result<(BTreeMap<String, String>, Option<String>), String> {
    if file.len() > nfd::MAX_FILE_BYTES {
        return Err(format!("{} bytes: NFD ignores the file", file.len()));
    }
    let mut labels = BTreeMap::new();
    let mut expiry = None;
    for (n, line) in file.lines().enumerate() {
        let line = line.trim();
        if let Some(t) = line.strip_prefix("# +expiry-time=") {
            expiry = Some(t.to_string());
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, value) = line.split_once('=').unwrap_or((line, "true"));
        let (ns, name) = key
            .split_once('/')
            .ok_or(format!("line {}: `{key}` has no namespace", n + 1))?;
        if ns != "feature.node.kubernetes.io" && !ns.ends_with(".feature.node.kubernetes.io") {
            return Err(format!(
                "line {}: namespace `{ns}` is denied by default",
                n + 1
            ));
        }
        if !nfd::name_ok(name) || !nfd::value_ok(value) {
            return Err(format!(
                "line {}: `{name}={value}` is not label syntax",
                n + 1
            ));
        }
        labels.insert(name.to_string(), value.to_string());
    }
    Ok((labels, expiry))
}

/// Kubernetes' label rules written out independently of gpuprobe's own checks.
fn k8s_label_ok(name: &str, value: &str) -> bool {
    let re = regex::Regex::new(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$").unwrap();
    name.len() <= 63
        && re.is_match(name)
        && value.len() <= 63
        && (value.is_empty() || re.is_match(value))
}

fn replay_nfd(dump: &str, extra: &[&str]) -> std::process::Output {
    common::gpuprobe()
        .args(["detect", "--format", "nfd"])
        .args(extra)
        .env("GPUPROBE_REPLAY", fixture(dump))
        .output()
        .unwrap()
}

#[test]
fn h200_feature_file_is_what_nfd_reads_and_says_what_was_measured() {
    let out = replay_nfd("tests/fixtures/dumps/nvidia-h200-driver580.json", &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = String::from_utf8(out.stdout).unwrap();
    let (labels, expiry) = nfd_reads(&file).unwrap_or_else(|e| panic!("{e}\n{file}"));
    for (k, v) in &labels {
        assert!(k8s_label_ok(k, v), "{k}={v}");
    }
    let want = [
        ("gpus", "1"),
        ("arch.sm_90", "true"),
        ("vmm-smoke.sm_90", "pass"),
        ("backend", "cuda"),
        ("vmm-build", "true"),
        ("build-groups", "1"),
    ];
    for (k, v) in want {
        assert_eq!(labels.get(k).map(String::as_str), Some(v), "{k} in\n{file}");
    }
    assert!(
        labels
            .get("cuda-driver")
            .is_some_and(|v| v.starts_with("580")),
        "{file}"
    );
    assert!(labels.contains_key("build-group"), "{file}");
    // Expires a day after it was written (the default), in RFC 3339 UTC.
    let expiry = expiry.expect("an expiry directive");
    let re = regex::Regex::new(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$").unwrap();
    assert!(re.is_match(&expiry), "{expiry}");
    let now = nfd::rfc3339(std::time::SystemTime::now());
    assert!(expiry > now, "{expiry} is not after {now}");
    let in_25h =
        nfd::rfc3339(std::time::SystemTime::now() + std::time::Duration::from_secs(25 * 3600));
    assert!(expiry < in_25h, "{expiry}");
}

#[test]
fn a_partial_smoke_test_is_labelled_and_no_vmm_build_is_advised() {
    // Two R9700 (gfx1201) measured with a fake probe (partial): the labels must not advise VMM.
    let out = replay_nfd(
        "tests/fixtures/dumps/constructed-2x-r9700-fake-probe.json",
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = String::from_utf8(out.stdout).unwrap();
    let (labels, _) = nfd_reads(&file).unwrap_or_else(|e| panic!("{e}\n{file}"));
    assert_eq!(
        labels.get("arch.gfx1201").map(String::as_str),
        Some("true"),
        "{file}"
    );
    let smoke = labels.get("vmm-smoke.gfx1201").map(String::as_str);
    assert!(smoke.is_some_and(|s| s != "pass"), "{file}");
    assert_ne!(
        labels.get("vmm-build").map(String::as_str),
        Some("true"),
        "{file}"
    );
}

#[test]
fn output_is_written_whole_and_leaves_no_dot_file_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gpuprobe");
    let path_s = path.to_str().unwrap();
    let out = replay_nfd(
        "tests/fixtures/dumps/nvidia-h200-driver580.json",
        &["--output", path_s, "--expiry", "6"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    let file = std::fs::read_to_string(&path).unwrap();
    assert!(nfd_reads(&file).is_ok(), "{file}");
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["gpuprobe"]);
    // A bad expiry is refused, naming the option, and nothing is written.
    let bad = dir.path().join("bad");
    let out = replay_nfd(
        "tests/fixtures/dumps/nvidia-h200-driver580.json",
        &["--output", bad.to_str().unwrap(), "--expiry", "0"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--expiry"));
    assert!(!bad.exists());
}

#[test]
fn the_example_deployment_selects_labels_gpuprobe_writes() {
    let out = replay_nfd("tests/fixtures/dumps/nvidia-h200-driver580.json", &[]);
    let (labels, _) = nfd_reads(&String::from_utf8(out.stdout).unwrap()).unwrap();
    let manifest = std::fs::read_to_string(fixture("deploy/llama-server.yaml")).unwrap();
    let doc: serde_json::Value =
        serde_json::to_value(serde_yaml_like(&manifest).expect("deploy/llama-server.yaml parses"))
            .unwrap();
    let selector = &doc["spec"]["template"]["spec"]["nodeSelector"];
    let selector = selector.as_object().expect("a nodeSelector");
    assert!(!selector.is_empty());
    for (key, want) in selector {
        let name = key
            .strip_prefix(&format!("{}/", nfd::PREFIX))
            .unwrap_or_else(|| panic!("{key} is not a gpuprobe label"));
        assert_eq!(
            labels.get(name).map(String::as_str),
            want.as_str(),
            "the H200 node must match the example's {key}"
        );
    }
}

/// The manifest's nodeSelector, read with python3-yaml (installed by scripts/test.sh), the
/// YAML parser a Kubernetes user's tools agree with; gpuprobe has no YAML parser of its own.
fn serde_yaml_like(text: &str) -> Option<serde_json::Value> {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys, json, yaml; print(json.dumps(yaml.safe_load(sys.stdin.read())))",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(text.as_bytes())?;
            c.wait_with_output()
        })
        .ok()?;
    serde_json::from_slice(&out.stdout).ok()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn any_text_becomes_a_valid_label_value(s in "\\PC{0,200}") {
        let v = nfd::value_of(&s);
        prop_assert!(nfd::value_ok(&v), "{v:?}");
        prop_assert!(k8s_label_ok("x", &v), "{v:?}");
    }

    #[test]
    fn any_label_set_is_a_file_nfd_reads_whole(
        pairs in proptest::collection::btree_map("[a-z]{1,10}", "\\PC{0,80}", 0..20)
    ) {
        let labels: BTreeMap<String, String> =
            pairs.into_iter().map(|(k, v)| (k, nfd::value_of(&v))).collect();
        let file = nfd::feature_file(&labels, std::time::SystemTime::now(), std::time::Duration::from_secs(60));
        let (read, expiry) = nfd_reads(&file).map_err(TestCaseError::fail)?;
        prop_assert_eq!(read, labels);
        prop_assert!(expiry.is_some());
    }
}

#[test]
fn the_file_written_on_the_h200_is_what_nfd_reads() {
    // `gpuprobe detect --format nfd` on one H200 (driver 580.159.04), as it printed it.
    let file = std::fs::read_to_string(fixture(
        "tests/fixtures/nvidia-h200-driver580-nfd/detect.nfd",
    ))
    .unwrap();
    let (labels, expiry) = nfd_reads(&file).unwrap_or_else(|e| panic!("{e}\n{file}"));
    assert!(expiry.is_some());
    assert_eq!(
        labels.get("vmm-smoke.sm_90").map(String::as_str),
        Some("pass")
    );
    assert_eq!(labels.get("vmm-build").map(String::as_str), Some("true"));
    assert_eq!(
        labels.get("cuda-driver").map(String::as_str),
        Some("580.159.04")
    );
}

#[test]
fn the_prebuilt_label_is_the_asset_gpuprobe_prebuilt_chooses() {
    let dump = "tests/fixtures/dumps/nvidia-h200-driver580.json";
    let out = replay_nfd(dump, &[]);
    assert!(out.status.success());
    let file = String::from_utf8(out.stdout).unwrap();
    let (labels, _) = nfd_reads(&file).unwrap_or_else(|e| panic!("{e}\n{file}"));
    let chosen = common::gpuprobe()
        .args(["prebuilt", "--format", "json", "--os", "linux"])
        .env("GPUPROBE_REPLAY", fixture(dump))
        .output()
        .unwrap();
    let outcome: serde_json::Value = serde_json::from_slice(&chosen.stdout).unwrap();
    let name = outcome["choice"]["name"]
        .as_str()
        .expect("an asset fits the H200");
    assert_eq!(
        labels.get("prebuilt").map(String::as_str),
        Some(name),
        "{file}"
    );
    assert_eq!(
        labels.get("prebuilt-companion").map(String::as_str),
        outcome["choice"]["companion"]["name"].as_str(),
        "{file}"
    );
    assert_eq!(
        labels.get("prebuilt-build").map(String::as_str),
        Some(outcome["llama_build"].to_string().as_str())
    );
}

#[test]
fn the_real_h200_feature_file_names_the_asset_the_picker_chooses_for_its_report() {
    let dir = "tests/fixtures/nvidia-h200-driver580-nfd";
    let file = std::fs::read_to_string(fixture(&format!("{dir}/detect.nfd"))).unwrap();
    let (labels, _) = nfd_reads(&file).unwrap_or_else(|e| panic!("{e}\n{file}"));
    let chosen = common::gpuprobe()
        .args(["prebuilt", "--format", "json", "--os", "linux", "--from"])
        .arg(fixture(&format!("{dir}/detect.json")))
        .output()
        .unwrap();
    let outcome: serde_json::Value = serde_json::from_slice(&chosen.stdout).unwrap();
    assert_eq!(
        labels.get("prebuilt").map(String::as_str),
        outcome["choice"]["name"].as_str(),
        "{file}"
    );
    assert!(labels.contains_key("prebuilt-companion"), "{file}");
}
