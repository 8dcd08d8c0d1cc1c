//! Host checks and the device list they shape, driving the real `gpuprobe` binary on fake trees
//! (`GPUPROBE_SYSFS_ROOT`, extended here to `/dev`, `/proc` and `/etc`), fake probe programs and
//! fake compilers. No GPU is involved: the fakes stand in for the machine, never for a measurement.
//!
//! * visible-device variables applied (hidden GPUs listed as hidden, not planned for);
//! * `/dev/kfd` and render nodes this user cannot open, containers started without them;
//! * KFD listing no GPU while DRM shows one (architecture from IP discovery, marked a fallback);
//! * one target the local hipcc cannot build (real Debian hipcc 5.2 rejects gfx942) never
//!   blocks the others; a broken hipcc gives "probe program could not be built" with its error;
//! * the CUDA toolkit against the driver's CUDA version;
//! * NVIDIA: hidden GPUs matched by PCI bus id against what the (fake) driver lists.

// Only the fake driver and the module line are used here.
#[allow(dead_code)]
#[path = "common/fake_cuda.rs"]
mod fake_cuda;
#[allow(dead_code)]
#[path = "common/machine.rs"]
mod machine;

use std::path::{Path, PathBuf};

use serde_json::Value;

use machine::{Machine, chmod, fake_hipcc_rejecting_gfx942, fake_probe, fixture, gid_of, write};

fn checks<'a>(report: &'a Value, id: &str) -> Vec<&'a Value> {
    report["host_checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["id"] == id)
        .collect()
}

fn one<'a>(report: &'a Value, id: &str) -> &'a Value {
    let c = checks(report, id);
    assert_eq!(c.len(), 1, "one `{id}` check expected: {report:#}");
    c[0]
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str()
        .unwrap_or_else(|| panic!("`{k}` is not a string in {v:#}"))
}

fn hip(report: &Value) -> &Value {
    report["backends"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["backend"] == "hip")
        .unwrap_or_else(|| panic!("no hip backend: {report:#}"))
}

fn devices(report: &Value) -> &Vec<Value> {
    report["devices"].as_array().unwrap()
}

// ------------------------------------------------------------------------------------------
// Visible-device variables

#[test]
fn hip_visible_devices_hides_a_gpu_from_the_list_and_from_the_plan() {
    let m = Machine::from(Some("2x-r9700-gfx1201")).env("HIP_VISIBLE_DEVICES", "1");
    let (r, _) = m.detect(&["--backend", "hip"]);
    let ds = devices(&r);
    assert_eq!(ds.len(), 1, "{r:#}");
    assert_eq!(ds[0]["index"], 0, "renumbered from 0");
    assert_eq!(
        ds[0]["pci_bus_id"], "0000:08:00.0",
        "the second GPU is HIP's device 0"
    );
    let hidden = r["hidden_devices"].as_array().unwrap();
    assert_eq!(hidden.len(), 1, "{r:#}");
    assert_eq!(hidden[0]["index"], 0);
    assert_eq!(hidden[0]["pci_bus_id"], "0000:03:00.0");
    assert_eq!(hidden[0]["hidden_by"], "HIP_VISIBLE_DEVICES=1");
    let v = &r["visibility"][0];
    assert_eq!(v["backend"], "hip");
    assert_eq!(v["basis"], "predicted", "no toolchain: nothing measured");
    assert_eq!(v["devices"][0]["visible"], Value::Null);
    assert_eq!(v["devices"][1]["visible"], 0);
    let c = one(&r, "visible-devices");
    assert_eq!(c["level"], "note");
    let d = s(c, "detail");
    assert!(
        d.contains("ROCm0 = GPU 1 (AMD Radeon AI PRO R9700 gfx1201, 0000:08:00.0)"),
        "{d}"
    );
    assert!(
        d.contains("GPU 0 (AMD Radeon AI PRO R9700 gfx1201, 0000:03:00.0) is hidden"),
        "{d}"
    );

    // The plan is for one GPU: no multi-GPU advice (Q7 peer copy) for a GPU llama.cpp cannot see.
    let (code, out, err) = m.run(&[
        "cmake-flags",
        "--backend",
        "hip",
        "--format",
        "json",
        "--toolchain",
        "none",
        "--rocm",
        "7.2",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let plan: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        plan["groups"][0]["devices"],
        serde_json::json!([0]),
        "{plan:#}"
    );
    assert!(
        !plan.to_string().contains("GGML_CUDA_NO_PEER_COPY"),
        "{plan:#}"
    );

    let t = m.table(&["--backend", "hip"]);
    assert!(
        t.contains(
            "hidden: GPU 0 AMD Radeon AI PRO R9700 gfx1201 at 0000:03:00.0 (HIP_VISIBLE_DEVICES=1)"
        ),
        "{t}"
    );
}

#[test]
fn a_visible_devices_variable_that_hides_every_gpu_is_an_error_with_the_fix() {
    let m = Machine::from(Some("2x-r9700-gfx1201")).env("HIP_VISIBLE_DEVICES", "5");
    let (r, _) = m.detect(&["--backend", "hip"]);
    assert!(devices(&r).is_empty(), "{r:#}");
    assert_eq!(r["hidden_devices"].as_array().unwrap().len(), 2);
    assert_eq!(hip(&r)["status"], "no-device");
    assert!(
        s(hip(&r), "detail")
            .contains("HIP_VISIBLE_DEVICES=5 hides every AMD GPU (2 on this machine)")
    );
    let c = one(&r, "visible-devices-hide-all");
    assert_eq!(c["level"], "error");
    assert!(
        s(c, "detail").contains("`5` names no device (2 to choose from)"),
        "{c:#}"
    );
    assert_eq!(
        s(c, "fix"),
        "unset HIP_VISIBLE_DEVICES or list devices that exist (indices 0 to 1)"
    );
    // Planning finds nothing to plan for and says why (exit 3, the host check on stderr).
    let (code, _, err) = m.run(&["cmake-flags", "--backend", "hip", "--toolchain", "none"]);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("HIP_VISIBLE_DEVICES hides every AMD GPU"),
        "{err}"
    );
}

#[test]
fn rocr_applies_first_then_hip_indexes_what_is_left_and_uuids_select() {
    let m = Machine::from(Some("rx9070xt-raphael-gfx1201-gfx1036"))
        .env("ROCR_VISIBLE_DEVICES", "1")
        .env("HIP_VISIBLE_DEVICES", "0");
    let (r, _) = m.detect(&["--backend", "hip"]);
    let ds = devices(&r);
    assert_eq!(ds.len(), 1, "{r:#}");
    assert_eq!(
        ds[0]["arch"], "gfx1036",
        "ROCr keeps GPU 1; HIP's 0 is that one"
    );
    assert_eq!(
        r["visibility"][0]["variables"],
        serde_json::json!(["ROCR_VISIBLE_DEVICES=1", "HIP_VISIBLE_DEVICES=0"])
    );

    // ROCm's UUID is GPU- and KFD's unique_id in hex.
    let props = std::fs::read_to_string(
        fixture("2x-r9700-gfx1201").join("sys/class/kfd/kfd/topology/nodes/2/properties"),
    )
    .unwrap();
    let id: u64 = props
        .lines()
        .find_map(|l| l.strip_prefix("unique_id "))
        .unwrap()
        .parse()
        .unwrap();
    let m = Machine::from(Some("2x-r9700-gfx1201"))
        .env("ROCR_VISIBLE_DEVICES", &format!("GPU-{id:016x}"));
    let (r, _) = m.detect(&["--backend", "hip"]);
    assert_eq!(devices(&r).len(), 1, "{r:#}");
    assert_eq!(devices(&r)[0]["pci_bus_id"], "0000:08:00.0");
}

#[test]
fn with_a_probe_the_visible_gpu_is_measured_and_the_hidden_one_is_not() {
    let m = Machine::from(Some("2x-r9700-gfx1201"));
    // The runtime applies the variable: the probe sees one device, the GPU at 0000:08:00.0.
    let probe = m.path("bin/probe-sees-gpu-1");
    write(
        &probe,
        &format!(
            "#!/bin/sh\n\"{}\" \"$@\" | sed -e 's/0000:03:00.0/0000:08:00.0/g'\n",
            fake_probe("pass-gfx1201").display()
        ),
    );
    chmod(&probe, 0o755);
    let m = m
        .env("HIP_VISIBLE_DEVICES", "1")
        .env("PATH", "/usr/bin:/bin")
        .env("GPUPROBE_HIP_PROBE", probe.to_str().unwrap())
        .env("FAKE_PROBE_DEVICES", "1");
    let (r, _) = m.detect(&["--backend", "hip"]);
    let ds = devices(&r);
    assert_eq!(ds.len(), 1, "{r:#}");
    // Measured (3 cycles: fewer than a pass needs, so `partial`).
    assert_eq!(ds[0]["smoke"]["outcome"], "partial");
    assert_eq!(ds[0]["pci_bus_id"], "0000:08:00.0");
    assert_eq!(r["hidden_devices"][0]["pci_bus_id"], "0000:03:00.0");
    assert_eq!(r["hidden_devices"][0]["smoke"]["outcome"], "not-run");
    assert_eq!(r["visibility"][0]["basis"], "measured", "{r:#}");
    assert!(
        r["peers"].as_array().unwrap().is_empty(),
        "one visible GPU has no peer"
    );
}

// ------------------------------------------------------------------------------------------
// Device nodes, groups, containers

#[test]
fn a_kfd_this_user_cannot_open_says_which_group_to_join() {
    let m = Machine::from(Some("2x-r9700-gfx1201")).playing_a_user_without_render();
    let (r, _) = m.detect(&["--backend", "hip"]);
    let c = one(&r, "kfd-no-access");
    assert_eq!(c["level"], "error");
    let d = s(c, "detail");
    assert!(
        d.contains("/dev/kfd is crw-rw----") || d.contains("/dev/kfd is -rw-rw----"),
        "{d}"
    );
    assert!(
        d.contains("group render") && d.contains("uid 1000, groups 44"),
        "{d}"
    );
    assert_eq!(
        s(c, "fix"),
        "add yourself to group render: `sudo usermod -aG render $USER`, then log out and back in"
    );
    assert_eq!(checks(&r, "render-node-no-access").len(), 2, "{r:#}");
    // The devices are still listed from sysfs.
    assert_eq!(devices(&r).len(), 2);
    let t = m.table(&["--backend", "hip"]);
    assert!(
        t.contains("host checks:\n  error   this user cannot open /dev/kfd"),
        "{t}"
    );
    assert!(t.contains("fix: add yourself to group render"), "{t}");
}

#[test]
fn a_user_listed_in_the_group_but_not_in_this_session_is_told_to_log_in_again() {
    let m = Machine::from(Some("strix-halo-gfx1151")).playing_a_user_without_render();
    let group = m.root().join("etc/group");
    let text = std::fs::read_to_string(&group).unwrap();
    let gid = gid_of(&m.root().join("dev/kfd"));
    std::fs::write(
        &group,
        text.replace(&format!("render:x:{gid}:"), &format!("render:x:{gid}:ann")),
    )
    .unwrap();
    let (r, _) = m.detect(&["--backend", "hip"]);
    let fix = s(one(&r, "kfd-no-access"), "fix");
    assert!(
        fix.contains("log out and back in (or run `newgrp render`)"),
        "{fix}"
    );
}

#[test]
fn a_container_started_without_the_amd_devices_is_recognised() {
    let m = Machine::from(Some("2x-r9700-gfx1201"));
    std::fs::remove_dir_all(m.root().join("dev")).unwrap();
    write(&m.root().join(".dockerenv"), "");
    let (r, _) = m.detect(&["--backend", "hip"]);
    assert_eq!(
        s(one(&r, "container"), "title"),
        "running in a container (docker)"
    );
    let c = one(&r, "kfd-device-missing");
    assert_eq!(c["level"], "error");
    assert!(
        s(c, "detail").contains("does not exist in this docker container"),
        "{c:#}"
    );
    // The group goes by number: `--group-add render` stops a container whose image lacks it.
    assert!(
        s(c, "fix").contains(
            "`docker run --device=/dev/kfd --device=/dev/dri --group-add $(stat -c %g /dev/kfd) ...`"
        ),
        "{c:#}"
    );
    assert!(!s(c, "fix").contains("--group-add render"), "{c:#}");
    assert_eq!(checks(&r, "render-node-missing").len(), 2);
    // Errors come first.
    assert_eq!(r["host_checks"][0]["level"], "error");
}

/// lemonade#2799: the container's user is in no group of /dev/kfd, whose host gid the image does
/// not define. The fix names that gid by number (a name would be looked up in the image).
#[test]
fn a_container_user_outside_an_undefined_host_group_is_given_the_group_id() {
    let m = Machine::from(Some("2x-r9700-gfx1201")).playing_a_user_without_render();
    write(&m.root().join(".dockerenv"), "");
    let gid = gid_of(&m.root().join("dev/kfd"));
    // The image defines video and its own user, not the host's render group.
    write(
        &m.root().join("etc/group"),
        "video:x:44:\nlemonade:x:1000:\n",
    );
    let (r, _) = m.detect(&["--backend", "hip"]);
    let c = one(&r, "kfd-no-access");
    assert!(
        s(c, "detail").contains(&format!("group gid {gid}")),
        "{c:#}"
    );
    let fix = s(c, "fix");
    assert!(
        fix.starts_with(&format!(
            "start the docker container with the node's group id: `--group-add {gid}`"
        )),
        "{fix}"
    );
    assert!(!fix.contains("usermod"), "{fix}");
    for n in checks(&r, "render-node-no-access") {
        assert!(s(n, "fix").contains("`--group-add "), "{n:#}");
    }
}

#[test]
fn the_fixture_trees_have_usable_device_nodes() {
    for t in [
        "2x-r9700-gfx1201",
        "rx-vega56-gfx900",
        "mi300x-mi210-gfx942-gfx90a",
    ] {
        let (r, _) = Machine::from(Some(t)).detect(&["--backend", "hip"]);
        for c in r["host_checks"].as_array().unwrap() {
            assert_ne!(c["level"], "error", "{t}: {c:#}");
        }
    }
}

// ------------------------------------------------------------------------------------------
// KFD against DRM: IP discovery as a marked fallback

#[test]
fn an_apu_that_kfd_does_not_list_is_named_from_ip_discovery_and_marked_a_fallback() {
    let m = Machine::from(Some("strix-halo-no-kfd-node-gfx1151"));
    let (r, _) = m.detect(&["--backend", "hip"]);
    let b = hip(&r);
    assert_eq!(b["status"], "no-device");
    assert!(
        s(b, "detail").contains("KFD lists no AMD GPU, but DRM shows 1"),
        "{b:#}"
    );
    let ds = devices(&r);
    assert_eq!(ds.len(), 1, "{r:#}");
    assert_eq!(ds[0]["arch"], "gfx1151");
    assert_eq!(ds[0]["source"], "drm-ip-discovery");
    assert_eq!(
        ds[0]["integrated"], true,
        "gfx1151 is an APU by the target table"
    );
    assert_eq!(ds[0]["pci_bus_id"], "0000:c5:00.0");
    assert_eq!(ds[0]["smoke"]["outcome"], "not-run");
    let c = one(&r, "kfd-no-gpu-node");
    assert_eq!(c["level"], "warning");
    let d = s(c, "detail");
    assert!(
        d.contains("gfx1151 (from DRM IP discovery, GC 11.5.1: a fallback, not KFD's answer)"),
        "{d}"
    );
    assert!(d.contains("an APU"), "{d}");
    // --require-gpu does not count a GPU ROCm cannot reach.
    let (code, _, _) = m.run(&["detect", "--backend", "hip", "--require-gpu"]);
    assert_eq!(code, 3);
}

#[test]
fn gc_ip_versions_decode_like_the_kernel_for_igpus_and_mi300() {
    // (GC version, expected target): the numbered hardware-id folder without the `GC` link,
    // as some kernels show it.
    for (gc, want) in [
        ("10.3.6", "gfx1036"),
        ("9.4.3", "gfx942"),
        ("11.0.3", "gfx1101"),
        ("13.9.9", "unknown"),
    ] {
        let m = Machine::from(Some("strix-halo-no-kfd-node-gfx1151"));
        let disc = m
            .root()
            .join("sys/class/drm/renderD128/device/ip_discovery/die/0");
        std::fs::remove_file(disc.join("GC")).unwrap();
        let parts: Vec<&str> = gc.split('.').collect();
        for (f, v) in ["major", "minor", "revision"].iter().zip(parts) {
            write(&disc.join("11/0").join(f), &format!("{v}\n"));
        }
        let (r, _) = m.detect(&["--backend", "hip"]);
        assert_eq!(devices(&r)[0]["arch"], want, "GC {gc}: {r:#}");
    }
}

#[test]
fn a_kfd_node_without_gfx_target_version_takes_its_arch_from_ip_discovery() {
    let m = Machine::from(Some("strix-halo-gfx1151"));
    let props = m
        .root()
        .join("sys/class/kfd/kfd/topology/nodes/1/properties");
    let text = std::fs::read_to_string(&props).unwrap();
    let without: String = text
        .lines()
        .filter(|l| !l.starts_with("gfx_target_version"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&props, without).unwrap();
    let disc = m
        .root()
        .join("sys/class/drm/renderD128/device/ip_discovery/die/0/GC/0");
    for (f, v) in [("major", "11"), ("minor", "5"), ("revision", "1")] {
        write(&disc.join(f), &format!("{v}\n"));
    }
    let (r, _) = m.detect(&["--backend", "hip"]);
    assert_eq!(devices(&r)[0]["arch"], "gfx1151", "{r:#}");
    assert_eq!(devices(&r)[0]["source"], "sysfs-ip-discovery");
    assert!(s(one(&r, "arch-from-ip-discovery"), "detail").contains("GC 11.5.1"));
}

#[test]
fn amdgpu_without_kfd_and_a_gpu_without_its_driver_are_named() {
    let m = Machine::from(Some("strix-halo-no-kfd-node-gfx1151"));
    std::fs::remove_dir_all(m.root().join("sys/class/kfd")).unwrap();
    let (r, _) = m.detect(&["--backend", "hip"]);
    let c = one(&r, "kfd-missing");
    assert!(
        s(c, "detail").contains("this kernel was built without KFD (CONFIG_HSA_AMD)"),
        "{c:#}"
    );

    let m = Machine::from(None);
    for (dev, vendor) in [("0000:03:00.0", "0x1002"), ("0000:21:00.0", "0x10de")] {
        let d = m.root().join("sys/bus/pci/devices").join(dev);
        write(&d.join("vendor"), &format!("{vendor}\n"));
        write(&d.join("class"), "0x030000\n");
    }
    write(&m.root().join("sys/module/nouveau/initstate"), "live\n");
    let (r, _) = m.detect(&[]);
    assert!(s(one(&r, "amdgpu-not-loaded"), "detail").contains("0000:03:00.0"));
    let nv = one(&r, "nvidia-not-loaded");
    assert!(
        s(nv, "detail").contains("the open-source nouveau driver has them"),
        "{nv:#}"
    );
}

#[test]
fn wsl_is_recognised() {
    let m = Machine::from(None).env("WSL_DISTRO_NAME", "Ubuntu");
    write(&m.root().join("dev/dxg"), "");
    let (r, _) = m.detect(&[]);
    assert_eq!(r["host"]["os"], "wsl");
    let c = one(&r, "wsl");
    assert_eq!(c["level"], "note");
    assert!(s(c, "detail").contains("/dev/dxg"));
}

// ------------------------------------------------------------------------------------------
// A distribution's HIP headers beside a ROCm install (llama.cpp#16320, #15196)

fn hip_version_h(major: u32, minor: u32, patch: u32) -> String {
    format!(
        "#ifndef HIP_VERSION_H\n#define HIP_VERSION_H\n#define HIP_VERSION_MAJOR {major}\n#define HIP_VERSION_MINOR {minor}\n#define HIP_VERSION_PATCH {patch}\n#endif\n"
    )
}

#[test]
fn distribution_hip_headers_beside_a_rocm_install_are_named_with_both_versions_and_the_fix() {
    let m = Machine::from(Some("2x-r9700-gfx1201"));
    write(
        &m.root().join("usr/include/hip/hip_version.h"),
        &hip_version_h(5, 7, 31921),
    );
    write(
        &m.root().join("opt/rocm-6.4.3/include/hip/hip_version.h"),
        &hip_version_h(6, 4, 43482),
    );
    let (r, _) = m.detect(&["--backend", "hip"]);
    let c = one(&r, "hip-headers-shadowed");
    assert_eq!(c["level"], "warning");
    let detail = s(c, "detail");
    assert!(detail.contains("(HIP 5.7.31921)"), "{c:#}");
    assert!(detail.contains("rocm-6.4.3 (HIP 6.4.43482)"), "{c:#}");
    assert!(detail.contains("llama.cpp#16320"), "{c:#}");
    assert!(s(c, "fix").contains("libamdhip64-dev"), "{c:#}");
    assert!(s(c, "fix").contains("empty build directory"), "{c:#}");
}

#[test]
fn equal_hip_versions_are_information_and_a_rocm_in_usr_is_no_pair() {
    let m = Machine::from(Some("2x-r9700-gfx1201"));
    write(
        &m.root().join("usr/include/hip/hip_version.h"),
        &hip_version_h(6, 4, 43482),
    );
    write(
        &m.root().join("opt/rocm/include/hip/hip_version.h"),
        &hip_version_h(6, 4, 43482),
    );
    let (r, _) = m.detect(&["--backend", "hip"]);
    assert_eq!(one(&r, "hip-headers-shadowed")["level"], "note");

    // Debian's own ROCm lives in /usr: the headers there are the install, not a second copy.
    let m = Machine::from(Some("2x-r9700-gfx1201")).env("ROCM_PATH", "/usr");
    write(
        &m.root().join("usr/include/hip/hip_version.h"),
        &hip_version_h(5, 2, 21153),
    );
    let (r, _) = m.detect(&["--backend", "hip"]);
    assert!(checks(&r, "hip-headers-shadowed").is_empty(), "{r:#}");

    // A ROCm install without distribution headers beside it says nothing either.
    let m = Machine::from(Some("2x-r9700-gfx1201"));
    write(
        &m.root().join("opt/rocm-7.2.1/include/hip/hip_version.h"),
        &hip_version_h(7, 2, 1),
    );
    let (r, _) = m.detect(&["--backend", "hip"]);
    assert!(checks(&r, "hip-headers-shadowed").is_empty(), "{r:#}");
}

// ------------------------------------------------------------------------------------------
// Building the HIP probe: one target never blocks the rest

fn real_hipcc() -> Option<PathBuf> {
    which::which("hipcc")
        .ok()
        .or_else(|| Some(PathBuf::from("/opt/rocm/bin/hipcc")).filter(|p| p.is_file()))
}

#[test]
fn real_hipcc_52_rejects_gfx942_and_still_builds_and_runs_the_probe_for_gfx90a() {
    let Some(hipcc) = real_hipcc() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install Debian's hipcc"
        );
        eprintln!("skipping: no hipcc");
        return;
    };
    let dir = hipcc.parent().unwrap().to_str().unwrap().to_string();
    let m = Machine::from(Some("mi300x-mi210-gfx942-gfx90a"))
        .env("PATH", &format!("{dir}:/usr/bin:/bin"))
        // Debian's hipcc finds its clang through ROCM_PATH: leave it as a user would.
        .unset("ROCM_PATH")
        .unset("HIP_PATH");
    let (r, err) = m.detect(&["--backend", "hip"]);
    let ds = devices(&r);
    assert_eq!(ds.len(), 2, "{r:#}");
    assert_eq!(ds[0]["arch"], "gfx942");
    assert_eq!(ds[0]["name"], "AMD Instinct MI300X");
    assert!(
        s(&ds[0]["smoke"], "reason").contains("the local hipcc cannot build gfx942"),
        "{:#}",
        ds[0]
    );
    assert_eq!(ds[1]["arch"], "gfx90a");
    let c = one(&r, "hip-target-unbuildable");
    assert_eq!(c["title"], "the local hipcc cannot build gfx942");
    let d = s(c, "detail");
    assert!(
        d.contains("(HIP 5.2."),
        "the local compiler's version is named: {d}"
    );
    assert!(d.contains("ROCm 5.7 or newer builds gfx942"), "{d}");
    let ev: Vec<&str> = c["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert!(
        ev[0].starts_with("command: HIP_PLATFORM=amd ") && ev[0].contains("--offload-arch=gfx942"),
        "{ev:?}"
    );
    assert!(
        ev.iter()
            .any(|l| l.contains("gfx942") && l.contains("error")),
        "{ev:?}"
    );
    // The gfx90a probe was built and run: the real runtime answered for it.
    assert!(err.contains("building the HIP probe for gfx90a"), "{err}");
    let cache = m.path("cache/gpuprobe");
    let built: Vec<PathBuf> = std::fs::read_dir(&cache)
        .unwrap()
        .flatten()
        .map(|e| e.path().join("gpuprobe-probe"))
        .filter(|p| p.is_file())
        .collect();
    assert_eq!(built.len(), 1, "one probe, for gfx90a: {built:?}");
    let b = hip(&r);
    assert!(b["runtime_version"].is_string(), "the runtime ran: {b:#}");
    if !Path::new("/dev/kfd").exists() {
        assert!(
            s(&ds[1]["smoke"], "reason").contains("hipErrorNoDevice"),
            "{:#}",
            ds[1]
        );
    }
}

#[test]
fn with_one_target_rejected_the_other_gpu_is_measured() {
    let m = Machine::from(Some("mi300x-mi210-gfx942-gfx90a")).env("FAKE_PROBE_DEVICES", "2");
    fake_hipcc_rejecting_gfx942(&m);
    let m = m.with_bin_on_path();
    let (r, _) = m.detect(&["--backend", "hip"]);
    let ds = devices(&r);
    assert_eq!(ds.len(), 2, "{r:#}");
    assert_eq!(ds[0]["smoke"]["outcome"], "not-run", "{:#}", ds[0]);
    assert_eq!(ds[1]["arch"], "gfx90a");
    assert_eq!(ds[1]["source"], "probe-program");
    // Measured (3 cycles: fewer than a pass needs, so `partial`).
    assert_eq!(ds[1]["smoke"]["outcome"], "partial", "{:#}", ds[1]);
    assert!(s(one(&r, "hip-target-unbuildable"), "detail").contains("HIP 6.0.32830"));
    assert_eq!(hip(&r)["status"], "ok");
    // Planning keeps both targets, the unmeasured one on llama.cpp's default (legacy pool).
    let (code, out, err) = m.run(&[
        "cmake-flags",
        "--backend",
        "hip",
        "--format",
        "json",
        "--toolchain",
        "none",
        "--rocm",
        "6.4",
        "--cycles",
        "3",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let plan: Value = serde_json::from_str(&out).unwrap();
    let targets: Vec<String> = plan["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| {
            g["targets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap().to_string())
        })
        .collect();
    assert!(
        targets.contains(&"gfx942".to_string()) && targets.contains(&"gfx90a".to_string()),
        "{plan:#}"
    );
}

#[test]
fn a_broken_hipcc_prints_its_error_and_command_and_falls_back_to_kfd() {
    let m = Machine::from(Some("2x-radeon-pro-vii-gfx906"));
    m.tool(
        "hipcc",
        r#"case "$*" in *--version*) echo "HIP version: 6.2.41133-broken"; exit 0 ;; esac
echo "gpuprobe-probe.cpp:12:10: fatal error: 'hip/hip_runtime.h' file not found" >&2
echo "1 error generated when compiling for gfx906." >&2
exit 1"#,
    );
    let m = m.with_bin_on_path();
    let (r, err) = m.detect(&["--backend", "hip"]);
    let b = hip(&r);
    assert_eq!(b["status"], "probe-build-failed");
    assert_eq!(
        s(b, "detail"),
        "the HIP probe program could not be built: gpuprobe-probe.cpp:12:10: fatal error: 'hip/hip_runtime.h' file not found"
    );
    let c = one(&r, "hip-probe-build-failed");
    assert_eq!(c["level"], "error");
    let ev: Vec<&str> = c["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert!(
        ev[0].contains("--offload-arch=gfx906") && ev[0].contains("/bin/hipcc"),
        "{ev:?}"
    );
    assert!(
        ev.iter()
            .any(|l| l.contains("'hip/hip_runtime.h' file not found")),
        "{ev:?}"
    );
    assert!(s(c, "fix").contains("libamdhip64-dev"));
    // The devices, from KFD/DRM, with what could not be done.
    let ds = devices(&r);
    assert_eq!(ds.len(), 2);
    for d in ds {
        assert_eq!(d["source"], "sysfs");
        assert_eq!(d["arch"], "gfx906");
        assert!(
            s(&d["smoke"], "reason").contains("the probe program could not be built"),
            "{d:#}"
        );
    }
    // And on stderr, for a person: the error and the exact command.
    assert!(
        err.contains("gpuprobe: the HIP probe program could not be built (exit 1):"),
        "{err}"
    );
    assert!(err.contains("  command: HIP_PLATFORM=amd "), "{err}");
    assert!(
        err.contains(
            "  | gpuprobe-probe.cpp:12:10: fatal error: 'hip/hip_runtime.h' file not found"
        ),
        "{err}"
    );
    assert!(
        err.contains("falling back to what the kernel (KFD/DRM) says"),
        "{err}"
    );
}

// ------------------------------------------------------------------------------------------
// NVIDIA: visibility by PCI bus id, containers, toolkit against driver

/// Two GPUs in /proc (the fake driver's bus is 0000:19:00.0 for its device 0).
fn two_nvidia_gpus(m: &Machine) {
    let nv = m.root().join("proc/driver/nvidia");
    write(
        &nv.join("version"),
        &format!("{}\n", fake_cuda::OPEN_MODULE),
    );
    for (bus, uuid) in [
        ("0000:18:00.0", "GPU-11111111-2222-3333-4444-555555555555"),
        ("0000:19:00.0", "GPU-66666666-7777-8888-9999-000000000000"),
    ] {
        write(
            &nv.join("gpus").join(bus).join("information"),
            &format!("Model: \t\t Fake GPU\nBus Location: \t {bus}\nGPU UUID: \t {uuid}\n"),
        );
    }
    write(&m.root().join("sys/module/nvidia/initstate"), "live\n");
}

fn with_fake_driver(m: Machine) -> Machine {
    let lib = fake_cuda::libcuda(fake_cuda::Build::Current);
    m.env("GPUPROBE_LIBCUDA", lib.to_str().unwrap())
        .env("FAKE_CUDA_SCENARIO", "ok")
        .env("PATH", "/usr/bin:/bin")
}

#[test]
fn cuda_visible_devices_hidden_gpu_is_matched_by_pci_bus_id() {
    // The real driver applies CUDA_VISIBLE_DEVICES=1; the fake, showing one device at
    // 0000:19:00.0, plays that driver.
    let m = with_fake_driver(Machine::from(None)).env("CUDA_VISIBLE_DEVICES", "1");
    two_nvidia_gpus(&m);
    let (r, _) = m.detect(&["--backend", "cuda"]);
    assert_eq!(devices(&r).len(), 1, "{r:#}");
    assert_eq!(devices(&r)[0]["pci_bus_id"], "0000:19:00.0");
    let v = &r["visibility"][0];
    assert_eq!(v["basis"], "measured", "{v:#}");
    assert_eq!(v["devices"][0]["visible"], Value::Null);
    assert_eq!(v["devices"][1]["visible"], 0);
    assert_eq!(r["hidden_devices"][0]["pci_bus_id"], "0000:18:00.0");
    assert_eq!(
        r["hidden_devices"][0]["hidden_by"],
        "CUDA_VISIBLE_DEVICES=1"
    );
}

#[test]
fn without_a_driver_library_cuda_visibility_is_predicted_and_empty_hides_all() {
    let m = Machine::from(None).env("CUDA_VISIBLE_DEVICES", "");
    two_nvidia_gpus(&m);
    let (r, _) = m.detect(&["--backend", "cuda"]);
    assert!(devices(&r).is_empty(), "{r:#}");
    assert_eq!(r["hidden_devices"].as_array().unwrap().len(), 2);
    let c = one(&r, "visible-devices-hide-all");
    assert!(
        s(c, "detail").contains("CUDA_VISIBLE_DEVICES is set but empty"),
        "{c:#}"
    );

    let m = Machine::from(None).env("CUDA_VISIBLE_DEVICES", "GPU-6666");
    two_nvidia_gpus(&m);
    let (r, _) = m.detect(&["--backend", "cuda"]);
    assert_eq!(devices(&r).len(), 1, "{r:#}");
    assert_eq!(
        devices(&r)[0]["pci_bus_id"],
        "0000:19:00.0",
        "a UUID prefix selects"
    );
    assert_eq!(r["visibility"][0]["basis"], "predicted");
}

#[test]
fn a_container_without_the_nvidia_devices_is_told_to_pass_them() {
    let m = Machine::from(None);
    two_nvidia_gpus(&m);
    write(&m.root().join(".dockerenv"), "");
    let (r, _) = m.detect(&["--backend", "cuda"]);
    let c = one(&r, "nvidia-device-missing");
    assert!(s(c, "fix").contains("--gpus all"), "{c:#}");
    // The kernel module is there (its /proc files are), libcuda.so.1 is not.
    let u = one(&r, "nvidia-userspace-missing");
    assert!(
        s(u, "detail").contains("580.95.05") && s(u, "detail").contains("in this container"),
        "{u:#}"
    );
    assert!(s(u, "fix").contains("NVIDIA Container Toolkit"), "{u:#}");
}

#[test]
fn a_cuda_toolkit_newer_than_the_driver_is_refused_or_warned_with_the_fix() {
    // The fake driver supports CUDA 12.8.
    let m = with_fake_driver(Machine::from(None)).env("FAKE_CUDA_DEVICES", "1");
    let plan = |cuda: &str| {
        let (code, out, err) = m.run(&[
            "cmake-flags",
            "--backend",
            "cuda",
            "--format",
            "json",
            "--toolchain",
            "none",
            "--cuda",
            cuda,
            "--cycles",
            "3",
        ]);
        (
            code,
            serde_json::from_str::<Value>(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}")),
        )
    };
    let (code, p) = plan("13.0");
    assert_eq!(code, 1, "{p:#}");
    let refusal = p["refusals"][0]["message"].as_str().unwrap();
    assert!(
        refusal.contains("CUDA 13.0") && refusal.contains("supports CUDA 12.8"),
        "{refusal}"
    );
    assert!(
        refusal.contains("driver branch 580 or newer") && refusal.contains("--cuda 12.8"),
        "{refusal}"
    );
    let (code, p) = plan("12.9");
    assert_eq!(code, 0, "{p:#}");
    assert!(
        p["warnings"]
            .to_string()
            .contains("minor-version compatibility"),
        "{p:#}"
    );
    // 12.4 on a 12.8 driver: no warning about this driver (the plan's general note on the
    // driver a CUDA build needs may still name minor-version compatibility).
    let (code, p) = plan("12.4");
    assert_eq!(code, 0);
    assert!(
        !p["warnings"]
            .to_string()
            .contains("minor-version compatibility"),
        "{p:#}"
    );

    // detect compares the nvcc found on PATH.
    m.tool(
        "nvcc",
        "echo 'nvcc: NVIDIA (R) Cuda compiler driver'; echo 'Cuda compilation tools, release 13.0, V13.0.88'",
    );
    let m = m.with_bin_on_path();
    let (r, _) = m.detect(&["--backend", "cuda"]);
    let c = one(&r, "cuda-toolkit-newer-than-driver");
    assert_eq!(c["level"], "error");
    assert!(
        s(c, "detail").contains("bin/nvcc) builds with CUDA 13.0"),
        "{c:#}"
    );
}
