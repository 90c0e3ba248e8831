//! The scratch directory of one execution (`exec`, Linux): a fresh directory under the
//! temporary directory, the program and its extra files written into it at checked relative
//! paths, given to the slot's user, bound at `/work` in the sandbox, and removed afterwards
//! (also when the run fails or unwinds).

use super::SandboxError;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Scratch directories made by this process, for unique names.
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// The name prefix of the scratch directories of this process's runs in `slot`
/// (`rubric-exec-PID-SLOT-`, then a counter), under [`std::env::temp_dir`].
pub(super) fn prefix(slot: &str) -> String {
    format!("rubric-exec-{}-{slot}-", std::process::id())
}

/// A relative path inside the scratch directory: `/`-separated names, none empty, `.` or `..`,
/// no NUL byte, not absolute.
pub(super) fn check_relative(path: &str) -> Result<(), SandboxError> {
    let bad = |why: &str| Err(SandboxError::Invalid(format!("file path `{path}` {why}")));
    if path.is_empty() {
        return bad("is empty");
    }
    if path.starts_with('/') {
        return bad("is absolute: files are relative to the scratch directory");
    }
    if path.contains('\0') {
        return bad("contains a NUL byte");
    }
    for part in path.split('/') {
        match part {
            "" => return bad("has an empty component"),
            "." | ".." => return bad("has a `.` or `..` component: files stay inside the scratch directory"),
            _ => {}
        }
    }
    Ok(())
}

/// A scratch directory; removed when dropped unless [`Scratch::remove`] removed it first.
pub(super) struct Scratch {
    path: PathBuf,
    removed: bool,
}

impl Scratch {
    /// Makes the directory, writes `files` (relative path → contents; checked with
    /// [`check_relative`], no path twice) and then hands everything to `owner` (the slot's user,
    /// when running as root). Files are written while the directory still belongs to this
    /// process, so no other user can plant a link in it first.
    pub(super) fn create(slot: &str, owner: Option<u32>, files: &[(&str, &[u8])]) -> Result<Scratch, SandboxError> {
        for (i, (path, _)) in files.iter().enumerate() {
            check_relative(path)?;
            for (earlier, _) in &files[..i] {
                if earlier == path {
                    return Err(SandboxError::Invalid(format!("file path `{path}` is given twice")));
                }
                let (short, long) = if earlier.len() < path.len() { (earlier, path) } else { (path, earlier) };
                if long.strip_prefix(short).is_some_and(|rest| rest.starts_with('/')) {
                    return Err(SandboxError::Invalid(format!("file path `{short}` is also a directory of `{long}`")));
                }
            }
        }
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("{}{n}", prefix(slot)));
        let failed =
            |what: &str, p: &Path, e: io::Error| SandboxError::Failed(format!("{what} `{}`: {e}", p.display()));
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|e| failed("could not create the scratch directory", &path, e))?;
        let scratch = Scratch { path, removed: false };
        let mut made = vec![scratch.path.clone()];
        for (rel, contents) in files {
            let target = scratch.path.join(rel);
            // parent directories, one at a time, so each can be handed over below
            let mut dir = scratch.path.clone();
            let parts: Vec<&str> = rel.split('/').collect();
            for part in &parts[..parts.len().saturating_sub(1)] {
                dir.push(part);
                if !made.contains(&dir) {
                    fs::DirBuilder::new().mode(0o755).create(&dir).map_err(|e| failed("could not create", &dir, e))?;
                    made.push(dir.clone());
                }
            }
            let mut file = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .open(&target)
                .map_err(|e| failed("could not create", &target, e))?;
            file.write_all(contents).map_err(|e| failed("could not write", &target, e))?;
            made.push(target);
        }
        if let Some(uid) = owner {
            for p in &made {
                std::os::unix::fs::lchown(p, Some(uid), Some(uid))
                    .map_err(|e| failed("could not hand to the slot's user", p, e))?;
            }
        }
        Ok(scratch)
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the directory and everything the program left in it.
    pub(super) fn remove(mut self) -> Result<(), SandboxError> {
        self.removed = true;
        remove_tree(&self.path).map_err(|e| {
            SandboxError::Failed(format!("could not remove the scratch directory `{}`: {e}", self.path.display()))
        })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !self.removed {
            let _ = remove_tree(&self.path);
        }
    }
}

/// `remove_dir_all`, and if that fails (a directory the program made unreadable, when not
/// running as root), make every directory of the tree ours to list and try once more.
fn remove_tree(path: &Path) -> io::Result<()> {
    match fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(_) => {
            open_up(path);
            fs::remove_dir_all(path)
        }
    }
}

fn open_up(dir: &Path) {
    // symlink_metadata: never follow a link the program made
    match fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => {}
        _ => return,
    }
    let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            open_up(&entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_stay_inside() {
        for ok in ["main.py", "data/input.txt", "a/b/c", ".hidden", "a..b"] {
            assert!(check_relative(ok).is_ok(), "{ok}");
        }
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "a//b", "a/", "./a", "a/.", "a\0b"] {
            assert!(matches!(check_relative(bad), Err(SandboxError::Invalid(_))), "{bad:?}");
        }
    }

    #[test]
    fn scratch_is_written_and_removed() {
        let s = Scratch::create("unit", None, &[("main.py", b"print(1)"), ("d/e/f.txt", b"x")]).unwrap();
        let root = s.path().to_path_buf();
        assert_eq!(fs::read_to_string(root.join("d/e/f.txt")).unwrap(), "x");
        fs::create_dir(root.join("locked")).unwrap();
        fs::write(root.join("locked/f"), "y").unwrap();
        fs::set_permissions(root.join("locked"), fs::Permissions::from_mode(0o000)).unwrap();
        s.remove().unwrap();
        assert!(!root.exists());
    }

    #[test]
    fn a_path_twice_a_file_as_a_directory_or_escaping_is_invalid() {
        for files in [
            &[("a", &b""[..]), ("a", b"")][..],
            &[("a", b""), ("a/b", b"")],
            &[("a/b", b""), ("a", b"")],
            &[("../a", b"")],
        ] {
            assert!(matches!(Scratch::create("unit", None, files), Err(SandboxError::Invalid(_))), "{files:?}");
        }
        assert!(Scratch::create("unit", None, &[("a", &b""[..]), ("ab/c", b"")]).is_ok());
    }

    #[test]
    fn dropped_scratch_is_removed() {
        let root = {
            let s = Scratch::create("unit", None, &[("x", &b"1"[..])]).unwrap();
            s.path().to_path_buf()
        };
        assert!(!root.exists());
    }
}
