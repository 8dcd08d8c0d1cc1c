//! The human-readable answer of `gpuprobe prebuilt`.

use std::fmt::Write;

use super::coverage::How;
use super::{Candidate, Outcome};

fn how_text(how: How) -> &'static str {
    match how {
        How::Native => "machine code for it",
        How::PtxJit => "PTX only, JIT-compiled by the driver on first use",
        How::Override => "only through an override",
        How::Vulkan => "through Vulkan",
    }
}

fn gpus_text(gpus: &[String]) -> String {
    let mut seen: Vec<(&String, usize)> = Vec::new();
    for g in gpus {
        match seen.iter_mut().find(|(n, _)| *n == g) {
            Some((_, c)) => *c += 1,
            None => seen.push((g, 1)),
        }
    }
    seen.iter()
        .map(|(n, c)| {
            if *c > 1 {
                format!("{c}x {n}")
            } else {
                (*n).clone()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn candidate(out: &mut String, c: &Candidate) {
    let _ = writeln!(out, "  {}", c.url);
    if let Some(comp) = &c.companion {
        let _ = writeln!(
            out,
            "  with {} (the runtime libraries: {})",
            comp.name,
            c.bundles.join(", ")
        );
        let _ = writeln!(out, "  {}", comp.url);
    }
    let _ = writeln!(out, "why it fits:");
    for g in &c.coverage {
        let _ = writeln!(
            out,
            "  - {}: {} ({}){}",
            g.gpu,
            how_text(g.how),
            g.code,
            g.env
                .as_ref()
                .map(|e| format!(", set {e}"))
                .unwrap_or_default()
        );
    }
    if let Some(d) = &c.driver {
        let _ = writeln!(out, "  - driver: {}", d.message);
    }
    if let Some(p) = &c.pool {
        let _ = writeln!(out, "  - memory pool: {}", p.message);
    }
    for n in &c.runtime_notes {
        let _ = writeln!(out, "  - runtime note: {n}");
    }
    for n in &c.cautions {
        let _ = writeln!(out, "  - caution: {n}");
    }
}

pub fn text(o: &Outcome) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "llama.cpp b{} release assets for {} {}; GPUs: {}",
        o.llama_build,
        o.os.as_str(),
        o.cpu.as_str(),
        gpus_text(&o.gpus)
    );
    match &o.choice {
        Some(c) => {
            let fit = match c.fit {
                How::Native => "native code for every GPU",
                How::PtxJit => "PTX JIT: no asset of this build has machine code for every GPU",
                How::Override => "an override: no asset of this build has code for every GPU",
                How::Vulkan => "Vulkan (no NVIDIA or AMD asset of this build runs on these GPUs)",
            };
            let _ = writeln!(out, "download: {} ({fit})", c.name);
            candidate(&mut out, c);
        }
        None => {
            let _ = writeln!(
                out,
                "no asset fits: {}",
                o.none_fits.as_deref().unwrap_or("")
            );
        }
    }
    if !o.alternatives.is_empty() {
        let _ = writeln!(out, "also fits, ranked below:");
        for a in &o.alternatives {
            let _ = writeln!(out, "  - {} ({})", a.name, how_text(a.fit));
        }
    }
    if !o.rejected.is_empty() {
        let _ = writeln!(out, "rejected:");
        for r in &o.rejected {
            let _ = writeln!(out, "  - {}: {}", r.name, r.reason);
        }
    }
    if let Some(cmd) = &o.build_instead {
        let _ = writeln!(out, "build instead: {cmd}");
    }
    if let Some(n) = &o.next_step {
        let _ = writeln!(out, "next: {n}");
    }
    let _ = writeln!(
        out,
        "source: era {} (builds {}{}; workflow read at builds {}){}; {}",
        o.era.id,
        o.era.from,
        o.era
            .until
            .map(|u| format!(" to {}", u - 1))
            .unwrap_or_else(|| " on".into()),
        o.era
            .samples
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        o.era
            .inferred_from
            .map(|s| format!(
                "; build {} is past the last workflow read (b{s}): its assets are inferred from it",
                o.llama_build
            ))
            .unwrap_or_default(),
        o.provenance
    );
    out
}
