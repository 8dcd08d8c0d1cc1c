//! Every target LLVM's AMDGPU backend names is in profiles/targets.toml, with either the ROCm
//! releases that build it or an `unsupported` answer naming the alternative, so no real GPU is an
//! "unknown target". The list comes from the real clang-19 (installed by scripts/test.sh).

use std::process::Command;

use gpuprobe::profiles::bundled_targets;

fn llvm_amdgpu_cpus() -> Vec<String> {
    let clang = std::env::var("GPUPROBE_CLANG19").unwrap_or_else(|_| "clang-19".into());
    let out = Command::new(&clang)
        .args([
            "-print-supported-cpus",
            "--target=amdgcn-amd-amdhsa",
            "-nogpulib",
        ])
        .output()
        .unwrap_or_else(|e| {
            panic!("{clang} not runnable ({e}): install clang-19 (scripts/test.sh does)")
        });
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let names: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("gfx") && !l.contains(' '))
        .map(str::to_string)
        .collect();
    assert!(
        names.len() > 40,
        "{clang} listed too few AMDGPU targets:\n{text}"
    );
    names
}

#[test]
fn every_llvm19_amdgpu_target_has_an_answer() {
    let table = bundled_targets().expect("targets load");
    let mut missing = Vec::new();
    for name in llvm_amdgpu_cpus() {
        match table.get(&name) {
            None => missing.push(name),
            Some(t) => {
                // Either a usable ROCm range (no unsupported note) or a plain "no ROCm" answer
                // that names an alternative.
                if let Some(u) = &t.unsupported {
                    assert!(
                        u.contains("Vulkan") || u.contains("gfx target"),
                        "{name}: unsupported note names no alternative: {u}"
                    );
                }
                assert!(table.expand(&name).is_ok(), "{name} does not expand");
            }
        }
    }
    assert!(
        missing.is_empty(),
        "targets LLVM 19 names that profiles/targets.toml lacks: {missing:?}"
    );
}

/// The other way round: every AMD name in the table is one LLVM knows, so a made-up or
/// misspelt target cannot be added. A target newer than clang-19 names the LLVM source that
/// defines it (`llvm`); one clang-19 already lists must not (the field would hide a typo).
#[test]
fn every_amd_target_in_the_table_is_one_llvm_names() {
    let table = bundled_targets().expect("targets load");
    let llvm = llvm_amdgpu_cpus();
    let mut unknown = Vec::new();
    for t in table
        .target
        .iter()
        .filter(|t| t.vendor == gpuprobe::report::Vendor::Amd)
    {
        let listed = llvm.contains(&t.name);
        match (&t.llvm, listed) {
            (None, false) => unknown.push(t.name.clone()),
            (Some(url), true) => {
                panic!(
                    "{}: clang-19 lists it, so `llvm = {url}` is not needed",
                    t.name
                )
            }
            _ => {}
        }
    }
    assert!(
        unknown.is_empty(),
        "profiles/targets.toml names AMD targets clang-19 does not, without an `llvm` source: {unknown:?}"
    );
}
