//! Untrusted input, third round: documents and logs shaped to stall or blind gpuprobe rather than
//! to inject into what it writes. A `kubectl get nodes -o json` dump or an inference document
//! with very many labels, devices or runs must be read in time linear in its size; a llama.cpp
//! log with carriage-return line ends or terminal colours must be read as the same log written
//! plainly (a failing log must not pass because of how its lines end).

#![cfg(unix)]

mod common;
#[path = "common/linear.rs"]
mod linear;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

const PREFIX: &str = "gpuprobe.feature.node.kubernetes.io";
const INFERENCE_HANG: &str =
    "tests/fixtures/synthetic-inference/gfx1201-rocm7.14-linux-inference-hang.json";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

// ---- linear time in documents with very many entries -------------------------------------------

/// One node labelled for an H200 (so the dump plans), plus `n` arch labels and `n` smoke labels
/// for architectures that no arch label lists: every smoke label is matched against every arch.
fn node_dump(n: usize) -> String {
    let mut labels = serde_json::Map::new();
    let mut label = |name: String, value: &str| {
        labels.insert(format!("{PREFIX}/{name}"), json!(value));
    };
    label("arch.sm_90".into(), "true");
    label("vmm-smoke.sm_90".into(), "pass");
    label("cuda-runtime".into(), "12.8");
    for i in 0..n {
        label(format!("arch.x{i}"), "true");
        label(format!("vmm-smoke.y{i}"), "pass");
    }
    json!({"apiVersion": "v1", "kind": "List", "items": [{
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "gpu-1", "labels": labels},
        "status": {"nodeInfo": {"operatingSystem": "linux"}}}]})
    .to_string()
}

#[test]
fn a_node_dump_with_very_many_labels_is_read_in_linear_time() {
    // Pairing each smoke label with its arch label by a search of the node's list was quadratic:
    // 120k labels (7.7 MB, under the 8 MiB limit of a document) took 306 s of CPU.
    let dir = tempfile::tempdir().unwrap();
    linear::assert_linear("node labels", 10_000, |n| {
        let p = write(dir.path(), "nodes.json", &node_dump(n));
        let mut c = common::gpuprobe_process();
        c.args([
            "cmake-flags",
            "--toolchain",
            "none",
            "--cuda",
            "12.8",
            "--from",
        ])
        .arg(p);
        linear::cpu_seconds(c, "cmake-flags --from nodes.json")
    });
}

/// The synthetic gfx1201 inference document with `n` devices, each in its one hanging
/// configuration (a run that lists every device).
fn inference_document(n: usize) -> String {
    let mut d: Value =
        serde_json::from_str(&std::fs::read_to_string(root().join(INFERENCE_HANG)).unwrap())
            .unwrap();
    let names: Vec<String> = (0..n).map(|i| format!("ROCm{i}")).collect();
    d["build"]["devices"] = names
        .iter()
        .map(|x| json!({"device": x, "name": "AMD Radeon AI PRO R9700", "arch": "gfx1201"}))
        .collect();
    let mut hang = d["configurations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["outcome"] == "hang")
        .unwrap()
        .clone();
    hang["devices"] = json!(names);
    d["configurations"] = json!([hang]);
    d.to_string()
}

#[test]
fn an_inference_document_with_very_many_devices_is_read_in_linear_time() {
    // Finding each device's runs by searching every run's device list was quadratic.
    let dir = tempfile::tempdir().unwrap();
    linear::assert_linear("inference devices", 25_000, |n| {
        let p = write(dir.path(), "inference.json", &inference_document(n));
        let mut c = common::gpuprobe_process();
        c.args([
            "cmake-flags",
            "--toolchain",
            "none",
            "--targets",
            "gfx1201",
            "--rocm",
            "7.2.1",
            "--from",
        ])
        .arg(p);
        linear::cpu_seconds(c, "cmake-flags --from inference.json")
    });
}

#[test]
fn quirks_record_from_an_inference_document_with_very_many_devices_is_linear() {
    let dir = tempfile::tempdir().unwrap();
    linear::assert_linear("quirks record devices", 8_000, |n| {
        let p = write(dir.path(), "inference.json", &inference_document(n));
        let file = dir.path().join("local.toml");
        let _ = std::fs::remove_file(&file);
        let mut c = common::gpuprobe_process();
        c.args(["quirks", "record", "--from"])
            .arg(p)
            .arg("--file")
            .arg(&file);
        linear::cpu_seconds(c, "quirks record --from inference.json")
    });
    // What it recorded: one record for the configuration, however many devices hung in it.
    let text = std::fs::read_to_string(dir.path().join("local.toml")).unwrap();
    assert_eq!(text.matches("[[quirk]]").count(), 1, "{text}");
}

// ---- line ends and terminal colours in logs ----------------------------------------------------

/// Exit code and the ids of the findings of `check-build --no-probe --json --log path`.
fn findings(path: &Path) -> (i32, Vec<String>, Value) {
    let out = common::gpuprobe()
        .args(["check-build", "--no-probe", "--json", "--log"])
        .arg(path)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{}: {e}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let mut ids: Vec<String> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    (out.status.code().unwrap_or(-1), ids, v)
}

#[test]
fn a_log_with_carriage_return_line_ends_is_read_like_one_with_newlines() {
    // Carriage returns were dropped, so a log whose lines end in `\r` alone became one line and
    // every finding was lost: two logs of failing runs passed as "nothing recognised".
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "llama-26054-hipvmm-invalid-argument",
        "ollama-11713-rocm-legacy-oom-2025",
        "h200-b11434-sdist-list-devices-verbose",
    ] {
        let lf = root().join(format!("tests/fixtures/llama-logs/{name}.txt"));
        let text = std::fs::read_to_string(&lf).unwrap();
        let (code, ids, _) = findings(&lf);
        assert!(
            !ids.iter().any(|i| i == "nothing-recognised"),
            "{name}: {ids:?}"
        );
        for (ends, cr_text) in [
            ("CR", text.replace('\n', "\r")),
            ("CR CR LF", text.replace('\n', "\r\r\n")),
        ] {
            let cr = write(dir.path(), &format!("{name}.txt"), &cr_text);
            assert_eq!(findings(&cr).0, code, "{name} with {ends} line ends");
            assert_eq!(findings(&cr).1, ids, "{name} with {ends} line ends");
        }
    }
}

/// `text` as llama.cpp writes it with `--log-colors on --log-prefix --log-timestamps`
/// (common/log.cpp: a blue timestamp, the level letter in its colour, and a reset at the end of
/// a warning, error or debug message).
fn coloured(text: &str) -> String {
    let mut out = String::new();
    for line in text.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        let prefix = body.split_once(' ').and_then(|(ts, rest)| {
            let mut level = rest.chars();
            let l = level.next()?;
            (ts.split('.').count() == 4
                && ts.chars().all(|c| c.is_ascii_digit() || c == '.')
                && "IWED".contains(l)
                && level.next() == Some(' '))
            .then(|| (ts, l, &rest[2..]))
        });
        match prefix {
            Some((ts, 'I', msg)) => {
                out.push_str(&format!("\x1b[34m{ts}\x1b[0m \x1b[32mI \x1b[0m{msg}{nl}"))
            }
            Some((ts, l, msg)) => {
                let colour = match l {
                    'W' => 35,
                    'E' => 31,
                    _ => 33,
                };
                out.push_str(&format!(
                    "\x1b[34m{ts}\x1b[0m \x1b[{colour}m{l} {msg}\x1b[0m{nl}"
                ))
            }
            None => out.push_str(line),
        }
    }
    out
}

#[test]
fn a_coloured_log_is_read_like_the_same_log_without_colours() {
    // With colours around the log prefix, `build: 4526 (a94f3b272)` was no longer read: the
    // build became unknown, and every quoted line carried the escape sequences.
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "ggml-ci-v100-b4526",
        "h200-b11434-sdist-server-lv4",
        "h200-b11434-sdist-list-devices-verbose",
    ] {
        let plain = root().join(format!("tests/fixtures/llama-logs/{name}.txt"));
        let text = std::fs::read_to_string(&plain).unwrap();
        let with_colours = coloured(&text);
        assert!(
            with_colours.contains("\x1b[32mI "),
            "{name}: nothing coloured"
        );
        let p = write(dir.path(), &format!("{name}.txt"), &with_colours);
        let (code, ids, doc) = findings(&plain);
        let (c_code, c_ids, c_doc) = findings(&p);
        assert_eq!((c_code, &c_ids), (code, &ids), "{name}");
        assert_eq!(c_doc["extracted"], doc["extracted"], "{name}");
    }
}

// ---- quirks record with hostile strings in its document ------------------------------------------

/// A name that would end a TOML string's line, open a table, flip VMM back on, reorder the text
/// and clear the terminal, if it were written raw.
const HOSTILE: &str = "GPU\n[quirk.effect]\nvmm = \"allow\"\u{202e}\u{2028}\u{1b}[2J\u{7}";

#[test]
fn quirks_record_writes_hostile_names_of_its_document_escaped_and_the_file_stays_readable() {
    // The device names, run names, reasons and kernel of an exercise or inference document went
    // raw into the record's text, so the record was refused as if the quirk file were at fault
    // (`local.toml:8: ... holds a control character`): the error named the wrong input, and
    // the failure measured could not be recorded.
    let dir = tempfile::tempdir().unwrap();
    let mut inference: Value =
        serde_json::from_str(&std::fs::read_to_string(root().join(INFERENCE_HANG)).unwrap())
            .unwrap();
    inference["build"]["devices"][0]["device"] = json!(HOSTILE);
    inference["host"]["kernel"] = json!(HOSTILE);
    for c in inference["configurations"].as_array_mut().unwrap() {
        c["devices"] = json!([HOSTILE]);
        c["name"] = json!(format!("{HOSTILE} fa-on"));
        c["reason"] = json!(HOSTILE);
    }
    let mut exercise: Value = serde_json::from_str(
        &std::fs::read_to_string(
            root().join("tests/fixtures/nvidia-2x-h200-driver580-v2/exercise-vmm.json"),
        )
        .unwrap(),
    )
    .unwrap();
    exercise["devices"][0]["outcome"] = json!("hang");
    exercise["devices"][0]["name"] = json!(HOSTILE);
    exercise["devices"][0]["reason"] = json!(HOSTILE);
    exercise["host"]["kernel"] = json!(HOSTILE);
    for (name, doc) in [("inference.json", inference), ("exercise.json", exercise)] {
        let from = write(dir.path(), name, &doc.to_string());
        let quirks = dir.path().join(format!("quirks-{name}"));
        std::fs::create_dir_all(&quirks).unwrap();
        let file = quirks.join("local.toml");
        let out = common::gpuprobe()
            .args(["quirks", "record", "--from"])
            .arg(&from)
            .arg("--file")
            .arg(&file)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{name}: {err}");
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            !text.chars().any(|c| c != '\n' && c.is_control())
                && !text.contains('\u{202e}')
                && !text.contains('\u{2028}'),
            "{name}: {text:?}"
        );
        // One record, still denying VMM; the name is there, escaped.
        let v: toml::Value = toml::from_str(&text).unwrap();
        let records = v["quirk"].as_array().unwrap();
        assert_eq!(records.len(), 1, "{name}: {text}");
        assert_eq!(records[0]["effect"]["vmm"].as_str(), Some("deny"), "{text}");
        assert!(
            records[0]["title"]
                .as_str()
                .unwrap()
                .contains("GPU\\n[quirk.effect]"),
            "{name}: {text}"
        );
        // And every later run reads the file.
        let out = common::gpuprobe()
            .args(["quirks", "list"])
            .env("GPUPROBE_QUIRKS_DIR", &quirks)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

// ---- detect --format nfd -------------------------------------------------------------------------

#[test]
fn an_nfd_label_that_cannot_be_written_is_named_not_dropped() {
    // A GPU whose architecture name (as the driver gives it) is too long for a label name lost
    // its `arch.` and `vmm-smoke.` labels without a word: the node said `gpus=1` and nothing
    // about that GPU, and the exit code said all was well.
    let dir = tempfile::tempdir().unwrap();
    let long = format!("gfx1201{}", "a".repeat(60));
    let fake = root().join("tests/fake-probes/pass-gfx1201.sh");
    let probe = write(
        dir.path(),
        "probe.sh",
        &format!(
            "#!/bin/sh\n'{}' \"$@\" | sed -e 's|\"arch\":\"gfx1201\"|\"arch\":\"{long}\"|'\n",
            fake.display()
        ),
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&probe, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(dir.path().join("home")).unwrap();
    let out = common::gpuprobe()
        .args(["detect", "--format", "nfd"])
        .env("HOME", dir.path().join("home"))
        .env("PATH", "/usr/bin:/bin")
        .env("ROCM_PATH", dir.path().join("no-rocm"))
        .env("HIP_PATH", dir.path().join("no-rocm"))
        .env("CUDA_HOME", dir.path().join("no-cuda"))
        .env_remove("CUDA_PATH")
        .env(
            "GPUPROBE_SYSFS_ROOT",
            root().join("tests/fixtures/sysfs/2x-r9700-gfx1201"),
        )
        .env("GPUPROBE_LIBCUDA", "/nonexistent/libcuda.so.1")
        .env("GPUPROBE_HIP_PROBE", &probe)
        .env("FAKE_PROBE_DEVICES", "1")
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    let (text, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(text.contains(&format!("{PREFIX}/gpus=1")), "{text}");
    assert!(!text.contains(&long), "{text}");
    // Both labels are named (the name as it would have been written: shortened, with a hash).
    for label in ["arch", "vmm-smoke"] {
        let named = err.lines().any(|l| {
            l.contains(&format!("warning: the label `{PREFIX}/{label}.gfx1201aaaa"))
                && l.contains("is left out")
        });
        assert!(named, "{label}: {err}");
    }
}

// ---- check-build --log: what the file is, and bytes no log should hold ---------------------------

#[test]
fn a_log_that_is_no_regular_file_is_refused_by_name_without_waiting() {
    // Handled before this round, but `--log` had no test of its own: a FIFO would block a read
    // forever, /dev/zero never ends, a directory or a loop of links is no log.
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.log");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let (a, b) = (dir.path().join("a.log"), dir.path().join("b.log"));
    std::os::unix::fs::symlink(&b, &a).unwrap();
    std::os::unix::fs::symlink(&a, &b).unwrap();
    for (path, says) in [
        (fifo.as_path(), "FIFO"),
        (Path::new("/dev/zero"), "character device"),
        (dir.path(), "directory"),
        (a.as_path(), "symbolic links"),
    ] {
        let t = std::time::Instant::now();
        let out = common::gpuprobe()
            .args(["check-build", "--no-probe", "--log"])
            .arg(path)
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{path:?}: {err}");
        assert!(
            err.contains(&format!("--log {}", path.display())) && err.contains(says),
            "{path:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{path:?}: nothing half-written");
        assert!(
            t.elapsed().as_secs() < 30,
            "{path:?} took {:?}",
            t.elapsed()
        );
    }
}

#[test]
fn nul_bytes_invalid_utf8_and_a_megabyte_line_do_not_hide_a_failure() {
    // Handled before this round (lossy decoding, no line limit), untested: the failure of a real
    // log is still found when its lines carry NUL bytes and invalid UTF-8 and a 1 MiB line of
    // noise comes first.
    let dir = tempfile::tempdir().unwrap();
    let name = "llama-26054-hipvmm-invalid-argument";
    let plain = root().join(format!("tests/fixtures/llama-logs/{name}.txt"));
    let text = std::fs::read(&plain).unwrap();
    let mut hostile = vec![b'x'; 1 << 20];
    hostile.extend_from_slice(b"\n\x80\xfe\n");
    for line in text.split_inclusive(|b| *b == b'\n') {
        hostile.extend_from_slice(&line[..line.len() - 1]);
        hostile.extend_from_slice(b"\x00\xc3\x28\n");
    }
    let p = dir.path().join("hostile.log");
    std::fs::write(&p, hostile).unwrap();
    let (code, ids, _) = findings(&plain);
    let (h_code, h_ids, _) = findings(&p);
    assert!(
        ids.iter().any(|i| i == "log-hip-vmm-invalid-argument"),
        "{ids:?}"
    );
    assert_eq!((h_code, h_ids), (code, ids));
}
