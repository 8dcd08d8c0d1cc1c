//! Directories only this user can write: where a cached program may be kept and later run.
//!
//! A cache under `$XDG_CACHE_HOME` or `$HOME/.cache` belongs to the user by convention. Without
//! either, the shared temporary directory is the only place left, and there anyone can create a
//! name first (a directory full of planted programs, a symlink to a file of someone else's). So
//! every directory used is checked before use: owned by us, a directory and not a link, and
//! writable by nobody else; one that fails the check is not used at all.

use std::path::{Path, PathBuf};

/// Why a directory cannot be trusted, as a sentence fragment for a note.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct Untrusted(pub String);

/// The user's own cache root for gpuprobe: `$XDG_CACHE_HOME/gpuprobe` (absolute only, as the XDG
/// specification requires) or `$HOME/.cache/gpuprobe`; else a per-user `gpuprobe-<uid>` directory
/// in the temporary directory, created 0700. `None` when neither gives a directory we can trust.
pub fn cache_root() -> Result<PathBuf, Untrusted> {
    let xdg = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .map(|h| h.join(".cache"));
    if let Some(base) = xdg.or(home) {
        let dir = base.join("gpuprobe");
        std::fs::create_dir_all(&dir)
            .map_err(|e| Untrusted(format!("cannot create {}: {e}", dir.display())))?;
        check(&dir)?;
        return Ok(dir);
    }
    let dir = std::env::temp_dir().join(format!("gpuprobe-{}", euid()));
    make_private(&dir)?;
    Ok(dir)
}

/// Creates `dir` (mode 0700) if missing, then [`check`]s it: an existing one that someone else
/// made first, or made writable for others, is refused rather than repaired.
pub fn make_private(dir: &Path) -> Result<(), Untrusted> {
    let mut b = std::fs::DirBuilder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        b.mode(0o700);
    }
    match b.create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(Untrusted(format!("cannot create {}: {e}", dir.display()))),
    }
    check(dir)
}

/// `dir` is a real directory (not a symlink), owned by us, and not writable by group or others.
pub fn check(dir: &Path) -> Result<(), Untrusted> {
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|e| Untrusted(format!("cannot inspect {}: {e}", dir.display())))?;
    if meta.file_type().is_symlink() {
        return Err(Untrusted(format!("{} is a symbolic link", dir.display())));
    }
    if !meta.is_dir() {
        return Err(Untrusted(format!("{} is not a directory", dir.display())));
    }
    owned_and_private(dir, &meta)
}

/// The metadata of something we are about to trust: ours, and writable by nobody else.
#[cfg(unix)]
pub fn owned_and_private(path: &Path, meta: &std::fs::Metadata) -> Result<(), Untrusted> {
    use std::os::unix::fs::MetadataExt;
    if meta.uid() != euid() {
        return Err(Untrusted(format!(
            "{} belongs to uid {}, not to this user (uid {})",
            path.display(),
            meta.uid(),
            euid()
        )));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(Untrusted(format!(
            "{} is writable by other users (mode {:o})",
            path.display(),
            meta.mode() & 0o7777
        )));
    }
    Ok(())
}

#[cfg(not(unix))]
pub fn owned_and_private(_path: &Path, _meta: &std::fs::Metadata) -> Result<(), Untrusted> {
    Ok(())
}

/// Why a file read as configuration (a user quirk file) could be someone else's words: the file
/// is writable by every user, its directory is (without the sticky bit), or it lies in a shared
/// sticky directory (`/tmp`) and belongs to another user. `None` when only its owner, root or
/// this user could have put it there; else why, and the command that fixes it.
#[cfg(unix)]
pub fn planted(path: &Path) -> Option<(String, String)> {
    use std::os::unix::fs::MetadataExt;
    const OTHERS_WRITE: u32 = 0o002;
    const STICKY: u32 = 0o1000;
    let meta = std::fs::metadata(path).ok()?;
    // Anything but a regular file is refused by the reader, naming what it is.
    if !meta.is_file() {
        return None;
    }
    if meta.mode() & OTHERS_WRITE != 0 {
        return Some((
            format!(
                "{} is writable by every user (mode {:o})",
                path.display(),
                meta.mode() & 0o7777
            ),
            format!("check its content, then `chmod o-w {}`", quoted(path)),
        ));
    }
    let named = std::fs::symlink_metadata(path).ok()?;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let dir_meta = std::fs::metadata(dir).ok()?;
    if dir_meta.mode() & OTHERS_WRITE != 0 {
        if dir_meta.mode() & STICKY == 0 {
            return Some((
                format!(
                    "its directory {} is writable by every user (mode {:o}): anyone could have put it there",
                    dir.display(),
                    dir_meta.mode() & 0o7777
                ),
                format!(
                    "check the directory's quirk files, then `chmod o-w {}`",
                    quoted(dir)
                ),
            ));
        }
        for uid in [named.uid(), meta.uid()] {
            if uid != euid() && uid != 0 {
                return Some((
                    format!(
                        "{} belongs to uid {uid}, another user, in the shared directory {}",
                        path.display(),
                        dir.display()
                    ),
                    "keep your quirk files in ~/.config/gpuprobe/quirks/ (or a GPUPROBE_QUIRKS_DIR only you can write)".into(),
                ));
            }
        }
    }
    None
}

#[cfg(not(unix))]
pub fn planted(_path: &Path) -> Option<(String, String)> {
    None
}

#[cfg(unix)]
fn quoted(path: &Path) -> String {
    crate::neutral::sh_word(&path.display().to_string())
}

fn euid() -> u32 {
    crate::process::euid()
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn only_our_own_private_directories_pass() {
        let t = tempfile::tempdir().unwrap();
        let mine = t.path().join("mine");
        make_private(&mine).unwrap();
        let mode = std::fs::metadata(&mine).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let open = t.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(
            make_private(&open)
                .unwrap_err()
                .0
                .contains("writable by other users")
        );
        let link = t.path().join("link");
        std::os::unix::fs::symlink(&mine, &link).unwrap();
        assert!(check(&link).unwrap_err().0.contains("symbolic link"));
        let file = t.path().join("file");
        std::fs::write(&file, "").unwrap();
        assert!(make_private(&file).is_err());
    }
}
