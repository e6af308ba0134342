//! Trust checks of the files cctl makes decisions from: the `cctl apply` configuration
//! file and the registry's metadata directory (`/run/cctl`) refuse to be used when
//! anyone but root (or the user running cctl) could have written them.
//!
//! The rule is sshd's `StrictModes`, applied to the file or directory and to every
//! directory above it: each must be owned by root or by the effective user of this
//! process (so only root when cctl runs as root, as every state-changing command does)
//! and must not be writable by its group or by others. A directory above may be
//! group/other-writable only when it is sticky (`/tmp`): then nobody but the owner can
//! rename or remove what is inside it. Symbolic links are followed and the target's
//! directories are checked as well as the link's.
//!
//! Records and pins cctl wrote itself are read more strictly ([`read_record`],
//! [`check_pin`], [`check_trusted_dir`]): cctl never writes a symbolic link there, so
//! one is refused rather than followed (a record is opened with `O_NOFOLLOW` and judged
//! by the descriptor it opened, so it cannot be swapped between the check and the read).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

const S_IWGRP: u32 = 0o020;
const S_IWOTH: u32 = 0o002;
const S_ISVTX: u32 = 0o1000;

/// What is wrong with one path, if anything: owned by an untrusted user, or writable
/// by group/others. `sticky_ok` accepts a writable sticky directory (one *above* the
/// checked path). `euid` is the effective user allowed besides root.
fn judge(path: &Path, meta: &std::fs::Metadata, euid: u32, sticky_ok: bool) -> Option<Error> {
    let mode = meta.mode();
    let uid = meta.uid();
    let kind = if meta.is_dir() { "directory" } else { "file" };
    if uid != 0 && uid != euid {
        return Some(Error::Untrusted {
            path: path.to_path_buf(),
            reason: format!(
                "the {kind} is owned by uid {uid}, not by root, so that user could change it"
            ),
            fix: format!("chown root:root {}", path.display()),
        });
    }
    let writable = mode & (S_IWGRP | S_IWOTH);
    if writable != 0 && !(sticky_ok && meta.is_dir() && mode & S_ISVTX != 0) {
        let who = match (mode & S_IWGRP != 0, mode & S_IWOTH != 0) {
            (true, true) => "its group and by others",
            (true, false) => "its group",
            _ => "others",
        };
        return Some(Error::Untrusted {
            path: path.to_path_buf(),
            reason: format!(
                "the {kind} is writable by {who} (mode {:04o}), so someone other than root could change it",
                mode & 0o7777
            ),
            fix: format!("chmod go-w {}", path.display()),
        });
    }
    None
}

/// The directories above `path` (its parent up to `/`).
fn ancestors(path: &Path) -> Vec<PathBuf> {
    path.ancestors()
        .skip(1)
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .collect()
}

fn metadata(path: &Path, what: &str) -> Result<std::fs::Metadata> {
    std::fs::metadata(path).map_err(|e| Error::io(format!("checking {what}"), path, e))
}

fn check(path: &Path, what: &str, want_dir: bool) -> Result<()> {
    let euid = nix::unistd::geteuid().as_raw();
    let meta = metadata(path, what)?;
    if want_dir != meta.is_dir() {
        return Err(Error::Untrusted {
            path: path.to_path_buf(),
            reason: format!(
                "{what} must be a {}",
                if want_dir {
                    "directory"
                } else {
                    "regular file"
                }
            ),
            fix: format!("remove or rename {} and create it again", path.display()),
        });
    }
    if let Some(e) = judge(path, &meta, euid, false) {
        return Err(e);
    }
    // The directories of the path as given and of the file it resolves to: whoever can
    // write one of them can replace what is below it.
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let canonical = path
        .canonicalize()
        .map_err(|e| Error::io(format!("checking {what}"), path, e))?;
    let mut dirs = ancestors(&absolute);
    dirs.extend(ancestors(&canonical));
    dirs.sort();
    dirs.dedup();
    for dir in dirs {
        let Ok(m) = std::fs::metadata(&dir) else {
            // A lexical ancestor through `..` or a link that is gone: the canonical
            // chain (which exists) is checked too.
            continue;
        };
        if let Some(e) = judge(&dir, &m, euid, true) {
            return Err(e);
        }
    }
    Ok(())
}

/// Refuses a file that anyone but root (or the effective user of this process) could
/// have written: the file must be owned by root (or that user) and not group- or
/// other-writable, and so must every directory above it (a sticky one may be
/// writable). `what` names it in errors (`the configuration file`).
///
/// Errors: [`Error::Untrusted`] saying why and the `chown`/`chmod` that fixes it;
/// [`Error::Io`] when it cannot be examined (missing, unreadable directory).
pub fn check_trusted_file(path: &Path, what: &str) -> Result<()> {
    check(path, what, false)
}

/// As [`check_trusted_file`], for a directory whose files cctl reads for decisions
/// (the registry's `/run/cctl`, the pin directories in bpffs): the directory, every
/// directory above it, and each regular file and directory directly inside it must be
/// trusted, and no entry may be a symbolic link. A directory that does not exist is
/// accepted (nothing is recorded yet).
///
/// Errors: as [`check_trusted_file`].
pub fn check_trusted_dir(path: &Path, what: &str) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Ok(m) if m.file_type().is_symlink() => return Err(symlink_refused(path, what)),
        _ => {}
    }
    check(path, what, true)?;
    let euid = nix::unistd::geteuid().as_raw();
    let entries =
        std::fs::read_dir(path).map_err(|e| Error::io(format!("reading {what}"), path, e))?;
    for entry in entries.flatten() {
        let p = entry.path();
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if m.file_type().is_symlink() {
            return Err(Error::Untrusted {
                path: p.clone(),
                reason: format!(
                    "{what} holds a symbolic link; cctl writes only regular files there"
                ),
                fix: format!("rm {}", p.display()),
            });
        }
        if m.is_file() || m.is_dir() {
            if let Some(e) = judge(&p, &m, euid, false) {
                return Err(e);
            }
        }
    }
    Ok(())
}

fn symlink_refused(path: &Path, what: &str) -> Error {
    Error::Untrusted {
        path: path.to_path_buf(),
        reason: format!("{what} is a symbolic link; cctl writes only regular files there"),
        fix: format!("rm {}", path.display()),
    }
}

/// Reads a record cctl wrote (`/run/cctl/<name>.json`, `/run/cctl-policy/cgroups.json`):
/// its directory and every one above must be trusted (as [`check_trusted_file`]); the
/// file is opened with `O_NOFOLLOW` and the opened descriptor must be a regular file
/// owned by root (or this effective user) and not writable by group or others.
/// `Ok(None)` when there is no such file. `what` names it in errors (`the record of
/// bpf_htcp`).
///
/// Errors: [`Error::Untrusted`] (a symbolic link, another owner, a writable file or
/// directory, or not a regular file; with the `rm`/`chown`/`chmod` that fixes it);
/// [`Error::Io`] (unreadable).
pub fn read_record(path: &Path, what: &str) -> Result<Option<Vec<u8>>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        match std::fs::symlink_metadata(dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            _ => check(dir, &format!("the directory of {what}"), true)?,
        }
    }
    let mut file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => {
            return Err(symlink_refused(path, what))
        }
        Err(e) => return Err(Error::io(format!("reading {what}"), path, e)),
    };
    let meta = file
        .metadata()
        .map_err(|e| Error::io(format!("reading {what}"), path, e))?;
    if !meta.is_file() {
        return Err(Error::Untrusted {
            path: path.to_path_buf(),
            reason: format!("{what} must be a regular file"),
            fix: format!("rm {}", path.display()),
        });
    }
    if let Some(e) = judge(path, &meta, nix::unistd::geteuid().as_raw(), false) {
        return Err(e);
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| Error::io(format!("reading {what}"), path, e))?;
    Ok(Some(bytes))
}

/// Checks a pin before cctl opens it (`bpf_obj_get` follows links in bpffs and has no
/// `O_NOFOLLOW`): the pin must not be a symbolic link, must be owned by root (or this
/// effective user), not writable by group or others, and its directories must be
/// trusted. A missing pin passes (the caller reports it as it always has).
///
/// Errors: [`Error::Untrusted`] with its fix; [`Error::Io`] (cannot be examined).
pub fn check_pin(path: &Path, what: &str) -> Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(format!("checking {what}"), path, e)),
        Ok(m) => m,
    };
    if meta.file_type().is_symlink() {
        return Err(symlink_refused(path, what));
    }
    if let Some(e) = judge(path, &meta, nix::unistd::geteuid().as_raw(), false) {
        return Err(e);
    }
    match path.parent() {
        Some(dir) => check(dir, &format!("the directory of {what}"), true),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("cctl-sec-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        d
    }

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_file_writable_by_group_or_others_is_refused_with_the_chmod_that_fixes_it() {
        let d = scratch("file");
        let f = d.join("cctl.toml");
        std::fs::write(&f, "").unwrap();
        chmod(&f, 0o644);
        check_trusted_file(&f, "the configuration file").unwrap();
        for mode in [0o664, 0o646, 0o666] {
            chmod(&f, mode);
            let e = check_trusted_file(&f, "the configuration file")
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("writable by") && e.contains(&format!("chmod go-w {}", f.display())),
                "{e}"
            );
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_writable_directory_above_is_refused_unless_sticky() {
        let d = scratch("dir");
        let sub = d.join("etc");
        std::fs::create_dir(&sub).unwrap();
        let f = sub.join("cctl.toml");
        std::fs::write(&f, "").unwrap();
        chmod(&f, 0o600);
        chmod(&sub, 0o777);
        let e = check_trusted_file(&f, "the configuration file")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&sub.display().to_string()) && e.contains("directory is writable"),
            "{e}"
        );
        chmod(&sub, 0o1777);
        check_trusted_file(&f, "the configuration file").unwrap();
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_metadata_directory_with_a_writable_record_is_refused_and_a_missing_one_accepted() {
        let d = scratch("meta");
        let run = d.join("run-cctl");
        check_trusted_dir(&run, "cctl's metadata directory").unwrap();
        std::fs::create_dir(&run).unwrap();
        chmod(&run, 0o755);
        let rec = run.join("bpf_htcp.json");
        std::fs::write(&rec, "{}").unwrap();
        chmod(&rec, 0o644);
        check_trusted_dir(&run, "cctl's metadata directory").unwrap();
        chmod(&rec, 0o666);
        let e = check_trusted_dir(&run, "cctl's metadata directory")
            .unwrap_err()
            .to_string();
        assert!(e.contains("bpf_htcp.json"), "{e}");
        chmod(&rec, 0o644);
        chmod(&run, 0o775);
        let e = check_trusted_dir(&run, "cctl's metadata directory")
            .unwrap_err()
            .to_string();
        assert!(e.contains("chmod go-w") && e.contains("run-cctl"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_file_owned_by_another_user_is_refused_with_the_chown_that_fixes_it() {
        if !nix::unistd::geteuid().is_root() {
            return; // only root can give a file away
        }
        let d = scratch("owner");
        let f = d.join("cctl.toml");
        std::fs::write(&f, "").unwrap();
        chmod(&f, 0o644);
        std::os::unix::fs::chown(&f, Some(65534), None).unwrap();
        let e = check_trusted_file(&f, "the configuration file")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("owned by uid 65534") && e.contains("chown root:root"),
            "{e}"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_directory_given_as_a_file_is_refused() {
        let d = scratch("kind");
        let e = check_trusted_file(&d, "the configuration file")
            .unwrap_err()
            .to_string();
        assert!(e.contains("regular file"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
