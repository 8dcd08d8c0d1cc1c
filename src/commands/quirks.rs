use anyhow::Result;

use super::print;
use crate::cli::{QuirksAction, QuirksArgs};
use crate::profiles::Knowledge;

pub fn run(a: &QuirksArgs) -> Result<i32> {
    let k = Knowledge::load()?;
    match &a.action {
        None | Some(QuirksAction::List { json: false }) => {
            let mut out = String::new();
            for q in &k.quirks {
                let tag = if q.contested {
                    " (contested: explanation only)"
                } else {
                    ""
                };
                out.push_str(&format!(
                    "{:<14} {:<8} {:<11} {}{tag}\n",
                    q.id,
                    word(&q.severity),
                    word(&q.confidence),
                    q.title
                ));
            }
            print(&out)?;
        }
        Some(QuirksAction::List { json: true }) => {
            print(&(serde_json::to_string_pretty(&k.quirks)? + "\n"))?
        }
        Some(QuirksAction::Show { id }) => {
            let Some(q) = k.quirk(id) else {
                let ids: Vec<&str> = k.quirks.iter().map(|q| q.id.as_str()).collect();
                return Err(crate::Error::input(
                    format!("quirk id `{id}`"),
                    "no such quirk",
                    format!("use one of: {}", ids.join(", ")),
                )
                .into());
            };
            let mut out = format!("{}: {}\n\n{}\n\n", q.id, q.title, q.summary);
            out.push_str(&format!(
                "severity: {}\nconfidence: {}\n",
                word(&q.severity),
                word(&q.confidence)
            ));
            if q.contested {
                out.push_str(
                    "contested: yes (recorded for explanation; never turned into a flag or deny)\n",
                );
            }
            out.push_str("\nmatch:\n");
            out.push_str(&indent(&toml::to_string(&q.when).unwrap_or_default()));
            out.push_str("\neffect:\n");
            out.push_str(&indent(&toml::to_string(&q.effect).unwrap_or_default()));
            out.push_str("\nsources:\n");
            for s in &q.sources {
                out.push_str(&format!("  {s}\n"));
            }
            print(&out)?;
        }
        Some(QuirksAction::Targets) => {
            let mut out = String::from("families:\n");
            for f in &k.targets.family {
                out.push_str(&format!("  {:<9} = {}\n", f.token, f.members.join(";")));
            }
            out.push_str("targets:\n");
            for t in &k.targets.target {
                out.push_str(&format!(
                    "  {:<8} {:<6} wave{:<3} {}{} toolkit \"{}\"  {}\n",
                    t.name,
                    format!("{:?}", t.vendor).to_lowercase(),
                    t.wave_size,
                    if t.apu { "apu " } else { "" },
                    t.generation.as_deref().unwrap_or(""),
                    t.toolkit,
                    t.products.as_deref().unwrap_or("")
                ));
            }
            print(&out)?;
        }
    }
    Ok(0)
}

fn indent(s: &str) -> String {
    if s.trim().is_empty() {
        return "  (none)\n".into();
    }
    s.lines().map(|l| format!("  {l}\n")).collect()
}

/// The spelling used in the TOML files (serde's), e.g. `medium-high`.
fn word<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}
