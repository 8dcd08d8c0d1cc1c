//! Loading the data in `profiles/`: bundled files compiled in, user quirk files merged over them.
//!
//! Every parse error names the file, the line and the field, and exits with code 2.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::llama::facts::FactTable;
use crate::llama::options::OptionTable;
use crate::quirks::{Quirk, QuirkFile};
use crate::targets::TargetTable;
use crate::toml_file::parse_toml;

pub const BUNDLED_QUIRKS: &str = include_str!("../profiles/quirks.toml");
pub const BUNDLED_TARGETS: &str = include_str!("../profiles/targets.toml");
pub const BUNDLED_OPTIONS: &str = include_str!("../profiles/llama-options.toml");
pub const BUNDLED_FACTS: &str = include_str!("../profiles/llama-facts.toml");
pub const BUNDLED_SIGNATURES: &str = include_str!("../profiles/log-signatures.toml");

/// Environment variable naming extra quirk directories (`:`-separated), merged over the bundled ones.
pub const QUIRKS_ENV: &str = "GPUPROBE_QUIRKS_DIR";

/// Everything the resolver knows, loaded once.
#[derive(Debug, Clone)]
pub struct Knowledge {
    pub quirks: Vec<Quirk>,
    pub targets: TargetTable,
    pub options: OptionTable,
    /// Per-build facts read from llama.cpp's sources (`profiles/llama-facts.toml`).
    pub facts: FactTable,
    /// Where user quirks came from, for `--explain`.
    pub user_quirk_files: Vec<PathBuf>,
}

impl Knowledge {
    /// Bundled data plus user quirk files from `$GPUPROBE_QUIRKS_DIR` and the per-user config dir.
    pub fn load() -> Result<Self> {
        let mut k = Knowledge::bundled()?;
        for dir in user_quirk_dirs() {
            k.merge_quirk_dir(&dir)?;
        }
        Ok(k)
    }

    pub fn bundled() -> Result<Self> {
        let quirks: QuirkFile = parse_toml(BUNDLED_QUIRKS, "profiles/quirks.toml")?;
        quirks.validate(BUNDLED_QUIRKS, "profiles/quirks.toml")?;
        let targets = bundled_targets()?;
        quirks.check_targets(BUNDLED_QUIRKS, "profiles/quirks.toml", &targets)?;
        let options: OptionTable = parse_toml(BUNDLED_OPTIONS, "profiles/llama-options.toml")?;
        let facts: FactTable = parse_toml(BUNDLED_FACTS, "profiles/llama-facts.toml")?;
        Ok(Knowledge {
            quirks: quirks.quirk,
            targets,
            options,
            facts,
            user_quirk_files: Vec::new(),
        })
    }

    /// Reads every `*.toml` in `dir` (sorted by name); a record whose id exists replaces it.
    pub fn merge_quirk_dir(&mut self, dir: &Path) -> Result<()> {
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            #[cfg(unix)]
            Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENOTDIR)) => {
                return Err(Error::input(
                    dir.display().to_string(),
                    format!("is not a directory of quirk files ({e})"),
                    "point GPUPROBE_QUIRKS_DIR at a directory, or remove the link loop",
                ));
            }
            Err(e) => return Err(Error::io(dir, e)),
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        for path in files {
            self.merge_quirk_file(&path)?;
        }
        Ok(())
    }

    pub fn merge_quirk_file(&mut self, path: &Path) -> Result<()> {
        let origin = path.display().to_string();
        // A quirk changes plans and build flags: one that another user could have written is
        // refused, as ssh refuses such a configuration file.
        if let Some((why, fix)) = crate::private_dir::planted(path) {
            return Err(Error::input(&origin, format!("not read: {why}"), fix));
        }
        let text = crate::files::read_input(
            path,
            &origin,
            crate::files::MAX_QUIRK_BYTES,
            "a quirk file is a TOML text file (same format as profiles/quirks.toml); move anything else out of the quirk directory",
        )?;
        let file: QuirkFile = parse_toml(&text, &origin)?;
        file.validate(&text, &origin)?;
        file.check_targets(&text, &origin, &self.targets)?;
        // An index keeps merging linear in the number of records.
        let mut at: std::collections::HashMap<String, usize> = self
            .quirks
            .iter()
            .enumerate()
            .map(|(i, q)| (q.id.clone(), i))
            .collect();
        for q in file.quirk {
            match at.get(&q.id) {
                Some(&i) => self.quirks[i] = q,
                None => {
                    at.insert(q.id.clone(), self.quirks.len());
                    self.quirks.push(q);
                }
            }
        }
        self.user_quirk_files.push(path.to_path_buf());
        Ok(())
    }

    pub fn quirk(&self, id: &str) -> Option<&Quirk> {
        self.quirks.iter().find(|q| q.id.eq_ignore_ascii_case(id))
    }
}

/// Only the target table (the probe needs nothing else from the profiles).
pub fn bundled_targets() -> Result<TargetTable> {
    let targets: TargetTable = parse_toml(BUNDLED_TARGETS, "profiles/targets.toml")?;
    targets.validate("profiles/targets.toml")?;
    Ok(targets)
}

/// `$GPUPROBE_QUIRKS_DIR` entries, then `$XDG_CONFIG_HOME/gpuprobe/quirks` (or `~/.config/...`).
pub fn user_quirk_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(v) = std::env::var_os(QUIRKS_ENV) {
        dirs.extend(std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty()));
    }
    if let Some(cfg) = config_dir() {
        dirs.push(cfg.join("quirks"));
    }
    dirs
}

pub fn config_dir() -> Option<PathBuf> {
    // Absolute only, as the XDG specification requires: a relative value would read quirk
    // files from whatever directory gpuprobe runs in (a pull request's checkout, in CI).
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|h| h.join(".config"))
        })?;
    Some(base.join("gpuprobe"))
}
