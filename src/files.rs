//! Reading and writing files that someone else may control.
//!
//! Reads are bounded and open only regular files (a FIFO would block forever, `/dev/zero` never
//! ends); writes go to a unique temporary file in the target's directory, are synced and renamed
//! over the target, keep a symlinked target's link and an existing file's permissions, and refuse
//! to replace anything that is not a regular file.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The most gpuprobe reads from a report, quirk file or log (64 MiB). A real report is a few KiB,
/// the bundled quirk file some 100 KiB, a llama.cpp log rarely more than a few MiB.
pub const MAX_INPUT_BYTES: u64 = 64 << 20;

/// The most read from a small system file (sysfs, procfs, version files, PKG-INFO, CMake files).
pub const MAX_SMALL_BYTES: u64 = 4 << 20;

/// The most one quirk file may hold (the bundled one is some 100 KiB): checked before parsing,
/// as a TOML document takes many times its size in memory.
pub const MAX_QUIRK_BYTES: u64 = 4 << 20;

/// The most gpuprobe reads from all inputs of one run together (reports, documents, logs, quirk
/// files, dumps, system files): one run's memory stays bounded however many inputs it is given.
pub const MAX_RUN_BYTES: u64 = 64 << 20;

static READ_SO_FAR: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Counts `n` more bytes against the run's [`MAX_RUN_BYTES`]; an error once past it.
pub fn charge(n: u64) -> std::io::Result<()> {
    use std::sync::atomic::Ordering;
    let before = READ_SO_FAR.fetch_add(n, Ordering::Relaxed);
    if before.saturating_add(n) > MAX_RUN_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "would take what this run reads past {} MiB in all (the limit for all inputs together)",
                MAX_RUN_BYTES >> 20
            ),
        ));
    }
    Ok(())
}

/// Opens `path` for reading only if it is a regular file, without blocking on a FIFO.
fn open_regular(path: &Path) -> std::io::Result<(File, std::fs::Metadata)> {
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer; O_NOCTTY: a
        // terminal device never becomes our controlling terminal. Neither changes regular files.
        opts.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    #[cfg(not(unix))]
    {
        let meta = std::fs::metadata(path)?;
        if !meta.is_file() {
            return Err(not_regular(&meta));
        }
    }
    let file = match opts.open(path) {
        Ok(f) => f,
        // A socket cannot be opened at all (ENXIO): say what it is rather than the errno.
        Err(e) => match std::fs::metadata(path) {
            Ok(meta) if !meta.is_file() => return Err(not_regular(&meta)),
            _ => return Err(e),
        },
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(not_regular(&meta));
    }
    Ok((file, meta))
}

fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    let ft = meta.file_type();
    if ft.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if ft.is_char_device() {
            return "a character device";
        }
        if ft.is_block_device() {
            return "a block device";
        }
        if ft.is_socket() {
            return "a socket";
        }
    }
    "not a regular file"
}

fn not_regular(meta: &std::fs::Metadata) -> std::io::Error {
    let kind = if meta.is_dir() {
        std::io::ErrorKind::IsADirectory
    } else {
        std::io::ErrorKind::InvalidInput
    };
    std::io::Error::new(kind, format!("is {}, not a regular file", kind_of(meta)))
}

fn too_large(limit: u64) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("is larger than {} MiB", limit >> 20),
    )
}

/// Reads at most `limit` bytes of a regular file; more is an error (`InvalidData`), as is going
/// past the run's budget ([`charge`]).
pub fn read_bytes(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let (file, meta) = open_regular(path)?;
    if meta.len() > limit {
        return Err(too_large(limit));
    }
    charge(meta.len())?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(limit));
    }
    Ok(bytes)
}

/// Reads a program or library gpuprobe inspects (an ELF file next to `--binary`): regular files
/// only, at most `limit` bytes, one at a time and dropped after, so not counted in the run's
/// budget for text inputs.
pub fn read_binary(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let (file, meta) = open_regular(path)?;
    if meta.len() > limit {
        return Err(too_large(limit));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(limit));
    }
    Ok(bytes)
}

/// A bounded, regular-file-only `std::fs::read_to_string` for small system files (sysfs,
/// procfs, version files): the same `io::Result`, so it drops in where errors are skipped.
pub fn read_to_string(path: impl AsRef<Path>) -> std::io::Result<String> {
    let bytes = read_bytes(path.as_ref(), MAX_SMALL_BYTES)?;
    String::from_utf8(bytes)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "is not UTF-8 text"))
}

/// Reads a text input the user named (`--from`, a quirk file, `--log`): regular files only, at
/// most `limit` bytes, UTF-8. Errors name `input` (e.g. `--from report.json`) and the fix.
pub fn read_input(path: &Path, input: &str, limit: u64, fix: &str) -> Result<String> {
    let err = |message: String| Error::input(input, message, fix);
    let bytes = read_bytes(path, limit).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => err("does not exist".into()),
        std::io::ErrorKind::PermissionDenied => err("cannot be read: permission denied".into()),
        #[cfg(unix)]
        _ if e.raw_os_error() == Some(libc::ELOOP) => {
            err("is a loop of symbolic links (or a link gpuprobe does not follow)".into())
        }
        std::io::ErrorKind::InvalidInput | std::io::ErrorKind::IsADirectory => {
            err(format!("{e}; gpuprobe reads only regular files"))
        }
        std::io::ErrorKind::InvalidData if e.to_string().contains("in all") => Error::input(
            input,
            e.to_string(),
            "pass fewer or smaller inputs in one run",
        ),
        std::io::ErrorKind::InvalidData => Error::input(
            input,
            format!("{e} (the limit for an input file)"),
            "pass the file gpuprobe wrote, not a larger one",
        ),
        _ => Error::io(path, e),
    })?;
    // A byte-order mark (editors on Windows write one) is not part of the text.
    let bytes = match bytes.strip_prefix("\u{feff}".as_bytes()) {
        Some(rest) => rest.to_vec(),
        None => bytes,
    };
    String::from_utf8(bytes).map_err(|e| Error::Input {
        input: input.to_string(),
        line: None,
        message: format!(
            "is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ),
        fix: fix.to_string(),
    })
}

/// The file a write to `path` lands in: `path` itself, or where its symlinks lead (so that a
/// symlinked file stays a symlink).
fn final_target(path: &Path) -> Result<PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                if !may_follow(&p, &m) {
                    return Err(Error::input(
                        path.display().to_string(),
                        format!(
                            "`{}` is a symbolic link of another user's in a shared sticky directory; gpuprobe does not write through it",
                            p.display()
                        ),
                        "write to a path in a directory of your own",
                    ));
                }
                let link = std::fs::read_link(&p).map_err(|e| Error::io_on(&p, "read link", e))?;
                p = match p.parent() {
                    Some(dir) if link.is_relative() => dir.join(link),
                    _ => link,
                };
            }
            _ => return Ok(p),
        }
    }
    Err(Error::input(
        path.display().to_string(),
        "has too many levels of symbolic links",
        "point it at a regular file",
    ))
}

/// Replaces (or creates) `path` with `bytes` atomically: readers see the old file or the whole
/// new one, never a part. `input` names the option the path came from, for errors.
///
/// The target, after following symlinks, must be a regular file or not exist yet; its
/// permissions (and, where allowed, its owner) are kept; a new file gets 0666 less the umask.
pub fn write_atomic(path: &Path, bytes: &[u8], input: &str) -> Result<()> {
    let target = final_target(path)?;
    let shown = path.display().to_string();
    let existing = match std::fs::metadata(&target) {
        Ok(m) if m.is_file() => Some(m),
        Ok(m) => {
            return Err(Error::input(
                input,
                format!(
                    "`{shown}` is {}; gpuprobe only creates or replaces regular files",
                    kind_of(&m)
                ),
                "give the path of a regular file (or redirect standard output instead)",
            ));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::io_on(&target, "write", e)),
    };
    let Some(name) = target.file_name() else {
        return Err(Error::input(
            input,
            format!("`{shown}` is not a file name"),
            "give the path of a file",
        ));
    };
    let dir = target
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(Error::input(
            input,
            format!("directory `{}` does not exist", dir.display()),
            "create it first (mkdir -p), or choose another path",
        ));
    }
    let mut builder = tempfile::Builder::new();
    let prefix = format!(".{}.", name.to_string_lossy());
    builder.prefix(&prefix).suffix(".tmp");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // Subject to the umask, as a plain create would be.
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut tmp = builder
        .tempfile_in(dir)
        .map_err(|e| Error::io_on(dir, "create a file in", e))?;
    let written = (|| -> std::io::Result<()> {
        if let Some(m) = &existing {
            std::fs::set_permissions(tmp.path(), m.permissions())?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::MetadataExt;
                // Only root may give a file away; for anyone else this is a no-op or EPERM,
                // and the owner is then the writer, as with any editor.
                let _ = std::os::unix::fs::fchown(tmp.as_file(), Some(m.uid()), Some(m.gid()));
            }
        }
        tmp.as_file_mut().write_all(bytes)?;
        tmp.as_file_mut().sync_all()
    })();
    written.map_err(|e| Error::io_on(&target, "write", e))?;
    tmp.persist(&target)
        .map_err(|e| Error::io_on(&target, "replace", e.error))?;
    // The rename is durable once the directory is.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Creates the missing directories above `path` (for outputs whose natural place may not exist
/// yet, such as a fresh repository's `.github/workflows`). Returns the directories created,
/// deepest first, for [`remove_dirs`] to undo when the write then fails; empty when none were
/// missing. `input` names the option the path came from, for errors.
pub fn create_parent_dirs(path: &Path, input: &str) -> Result<Vec<PathBuf>> {
    let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) else {
        return Ok(Vec::new());
    };
    let missing: Vec<PathBuf> = dir
        .ancestors()
        .take_while(|p| !p.as_os_str().is_empty() && std::fs::symlink_metadata(p).is_err())
        .map(Path::to_path_buf)
        .collect();
    if missing.is_empty() {
        return Ok(missing);
    }
    std::fs::create_dir_all(dir).map_err(|e| {
        // Those made before the failure go again: nothing half-created stays.
        remove_dirs(&missing);
        Error::input(
            input,
            format!("cannot create directory `{}`: {e}", dir.display()),
            "give a path whose directories can be created, or create them first",
        )
    })?;
    Ok(missing)
}

/// Removes directories made by [`create_parent_dirs`] (deepest first; only while empty).
pub fn remove_dirs(dirs: &[PathBuf]) {
    for d in dirs {
        let _ = std::fs::remove_dir(d);
    }
}

/// Opens `path` to append to (creating it), as a regular file only: a FIFO named by
/// `$GITHUB_OUTPUT` would block, a device would swallow or refuse the text. `input` names it.
pub fn open_append(path: &Path, input: &str) -> Result<File> {
    let mut opts = std::fs::OpenOptions::new();
    opts.append(true).create(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let file = opts.open(path).map_err(|e| match e.raw_os_error() {
        // A FIFO without a reader refuses a non-blocking open for writing.
        #[cfg(unix)]
        Some(libc::ENXIO) => Error::input(
            input,
            format!(
                "`{}` is a FIFO (named pipe), not a regular file",
                path.display()
            ),
            "point it at a regular file",
        ),
        _ if e.kind() == std::io::ErrorKind::IsADirectory => Error::input(
            input,
            format!("`{}` is a directory, not a regular file", path.display()),
            "point it at a regular file",
        ),
        _ => Error::io_on(path, "open for appending", e),
    })?;
    let meta = file
        .metadata()
        .map_err(|e| Error::io_on(path, "inspect", e))?;
    if !meta.is_file() {
        return Err(Error::input(
            input,
            format!(
                "`{}` is {}, not a regular file",
                path.display(),
                kind_of(&meta)
            ),
            "point it at a regular file",
        ));
    }
    Ok(file)
}

/// The kernel's protected-symlink rule (`fs.protected_symlinks`), applied by gpuprobe itself
/// because it resolves links itself: in a sticky directory that others may write (`/tmp`), a
/// link is followed only if it belongs to us or to the directory's owner.
#[cfg(unix)]
fn may_follow(link: &Path, meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    let dir = link
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let Ok(d) = std::fs::metadata(dir) else {
        return false;
    };
    let sticky_shared = d.mode() & 0o1000 != 0 && d.mode() & 0o002 != 0;
    let me = crate::process::euid();
    !sticky_shared || meta.uid() == me || meta.uid() == d.uid()
}

#[cfg(not(unix))]
fn may_follow(_link: &Path, _meta: &std::fs::Metadata) -> bool {
    true
}

/// An exclusive lock held until dropped, on `<path>.lock` beside `path` (the file itself is
/// replaced by renames, so it cannot carry the lock). Blocks until other holders let go.
pub struct Lock {
    _file: File,
}

pub fn lock_beside(path: &Path) -> Result<Lock> {
    let target = final_target(path)?;
    let mut name = target
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".lock");
    let lock_path = target.with_file_name(name);
    let mut opts = std::fs::OpenOptions::new();
    opts.create(true).truncate(false).write(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // A planted link (or FIFO) in place of the lock is never followed or waited on.
        opts.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let file = opts.open(&lock_path).map_err(|e| {
        if e.raw_os_error() == Some(libc::ELOOP) {
            Error::input(
                path.display().to_string(),
                format!(
                    "`{}` is a symbolic link; gpuprobe does not lock through it",
                    lock_path.display()
                ),
                "remove the link, or keep the file in a directory of your own",
            )
        } else {
            Error::io_on(&lock_path, "create", e)
        }
    })?;
    match file.metadata() {
        Ok(m) if m.is_file() => {}
        Ok(m) => {
            return Err(Error::input(
                path.display().to_string(),
                format!(
                    "`{}` is {}, not a regular file",
                    lock_path.display(),
                    kind_of(&m)
                ),
                "remove it",
            ));
        }
        Err(e) => return Err(Error::io_on(&lock_path, "inspect", e)),
    }
    file.lock()
        .map_err(|e| Error::io_on(&lock_path, "lock", e))?;
    Ok(Lock { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, vec![b'a'; 100]).unwrap();
        assert_eq!(read_bytes(&p, 100).unwrap().len(), 100);
        let e = read_bytes(&p, 99).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert!(read_bytes(dir.path(), 100).is_err());
    }

    #[cfg(unix)]
    #[test]
    fn devices_and_fifos_are_refused_without_blocking() {
        let e = read_bytes(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        crate::process::mkfifo(&fifo);
        let e = read_bytes(&fifo, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn atomic_writes_keep_links_and_modes() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.toml");
        std::fs::write(&real, "old").unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.path().join("link.toml");
        std::os::unix::fs::symlink("real.toml", &link).unwrap();
        write_atomic(&link, b"new", "--file").unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
        let mode = std::fs::metadata(&real).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // Nothing left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        // A FIFO stands in for a device node: both must stay what they are.
        let fifo = dir.path().join("fifo");
        crate::process::mkfifo(&fifo);
        let e = write_atomic(&fifo, b"x", "--output").unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
        assert_eq!(e.exit_code(), crate::error::exit::USAGE);
    }
}
