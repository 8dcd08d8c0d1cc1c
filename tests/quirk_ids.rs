//! Quirk ids named in the code must exist in the data: the named constants (`quirks::ids`) and
//! every id written in prose in `src/` (reasons, fixes, comments), so renaming or removing a
//! record cannot leave the code pointing at nothing.

use std::collections::BTreeSet;
use std::path::Path;

use gpuprobe::profiles::Knowledge;

fn known_ids() -> BTreeSet<String> {
    let k = Knowledge::bundled().expect("bundled profiles load");
    k.quirks.iter().map(|q| q.id.clone()).collect()
}

/// `Q` followed by digits, as a whole word (not `26.Q1`, a HIP SDK quarter, nor `Q999` in a
/// test that names a missing id on purpose: the scan stops at `#[cfg(test)]`).
fn ids_in(code: &str) -> Vec<String> {
    let re = regex::Regex::new(r"(^|[^A-Za-z0-9_.])(Q[0-9]+)\b").unwrap();
    let code = code.split("#[cfg(test)]").next().unwrap_or(code);
    re.captures_iter(code).map(|c| c[2].to_string()).collect()
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read src") {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn named_constants_exist_in_quirks_toml() {
    let known = known_ids();
    for id in gpuprobe::quirks::ids::ALL {
        assert!(
            known.contains(*id),
            "quirks::ids names {id}, which profiles/quirks.toml lacks"
        );
    }
}

#[test]
fn every_quirk_id_written_in_src_exists() {
    let known = known_ids();
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    let mut seen = 0;
    let mut missing = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("read source");
        for id in ids_in(&text) {
            seen += 1;
            if !known.contains(&id) {
                missing.push(format!("{}: {id}", f.display()));
            }
        }
    }
    assert!(
        seen > 10,
        "the scan found only {seen} ids: the pattern broke"
    );
    assert!(
        missing.is_empty(),
        "ids not in profiles/quirks.toml: {missing:?}"
    );
}

#[test]
fn the_scan_finds_ids_and_skips_quarters() {
    assert_eq!(ids_in("(Q19) see Q2, 26.Q1 and QA1"), ["Q19", "Q2"]);
    assert_eq!(ids_in("Q3 #[cfg(test)] Q999"), ["Q3"]);
    assert!(!known_ids().contains("Q999"));
}
