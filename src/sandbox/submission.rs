//! A submission directory on disk as an execution's extra files (`exec(..., dir: PATH)`): the
//! directory named by a row, relative to the root the user configured (`--exec-dir-root`), read
//! whole into memory (its files' bytes, by relative path) so that it becomes part of the
//! execution's identity and is written into the scratch directory like any other file.
//!
//! Rows are untrusted: the path may not be absolute or climb out with `..`, no component of it
//! and nothing inside it may be a symbolic link (which could point anywhere on the host), and
//! only regular files and directories are read (a FIFO would block the reader, a device would
//! be the host's). A directory over [`MAX_FILES`] files or [`MAX_BYTES`] bytes is refused, never
//! cut short.

use std::fs;
use std::path::{Component, Path, PathBuf};

/// The most files a submission directory may hold.
pub const MAX_FILES: usize = 10_000;

/// The most bytes its files may hold together.
pub const MAX_BYTES: u64 = 64 << 20;

/// The files under `root/rel` (relative path with `/` → bytes), sorted by path; the error says
/// what is wrong, naming the path as the row gave it.
pub fn read(root: &Path, rel: &str) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut dir = PathBuf::from(root);
    let mut parts = 0;
    for c in Path::new(rel).components() {
        match c {
            Component::Normal(name) => {
                dir.push(name);
                parts += 1;
                let m = fs::symlink_metadata(&dir).map_err(|e| format!("`{rel}`: {e}"))?;
                if m.file_type().is_symlink() {
                    return Err(format!("`{rel}` goes through a symbolic link: submission paths may not"));
                }
            }
            Component::CurDir => {}
            _ => {
                return Err(format!(
                    "`{rel}` is not a relative path inside the execution root (absolute, or with `..`)"
                ))
            }
        }
    }
    if parts == 0 {
        return Err(format!("`{rel}` names no directory inside the execution root"));
    }
    if !fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
        return Err(format!("`{rel}` is not a directory"));
    }
    let mut out = Vec::new();
    let mut bytes = 0u64;
    walk(&dir, "", rel, &mut out, &mut bytes)?;
    Ok(out)
}

fn walk(dir: &Path, prefix: &str, rel: &str, out: &mut Vec<(String, Vec<u8>)>, bytes: &mut u64) -> Result<(), String> {
    let mut entries = fs::read_dir(dir)
        .map_err(|e| format!("`{rel}`: {e}"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("`{rel}`: {e}"))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            return Err(format!("`{rel}`: a file name in it is not UTF-8 ({name:?})"));
        };
        let path = format!("{prefix}{name}");
        // the entry's own type: a link is not followed
        let kind = entry.file_type().map_err(|e| format!("`{rel}/{path}`: {e}"))?;
        if kind.is_symlink() {
            return Err(format!("`{rel}/{path}` is a symbolic link: a submission holds only files and directories"));
        } else if kind.is_dir() {
            walk(&entry.path(), &format!("{path}/"), rel, out, bytes)?;
        } else if kind.is_file() {
            if out.len() == MAX_FILES {
                return Err(format!("`{rel}` holds more than {MAX_FILES} files"));
            }
            let size = entry.metadata().map_err(|e| format!("`{rel}/{path}`: {e}"))?.len();
            *bytes = bytes.saturating_add(size);
            if *bytes > MAX_BYTES {
                return Err(format!("`{rel}` holds more than {} MiB", MAX_BYTES >> 20));
            }
            let content = fs::read(entry.path()).map_err(|e| format!("`{rel}/{path}`: {e}"))?;
            out.push((path, content));
        } else {
            return Err(format!("`{rel}/{path}` is not a regular file or a directory"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree of its own for each test (`name`): the tests run at once in one process.
    fn tree(name: &str) -> PathBuf {
        let root = std::env::temp_dir().join(format!("rubric-submission-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("sub/pkg")).unwrap();
        fs::write(root.join("sub/main.py"), "print(1)\n").unwrap();
        fs::write(root.join("sub/pkg/data.bin"), [0u8, 159, 146, 150, 255]).unwrap();
        fs::create_dir_all(root.join("linked")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", root.join("linked/host")).unwrap();
        std::os::unix::fs::symlink(root.join("sub"), root.join("alias")).unwrap();
        root
    }

    #[test]
    fn a_directory_is_read_whole_in_path_order_bytes_and_all() {
        let root = tree("whole");
        let files = read(&root, "sub").unwrap();
        assert_eq!(
            files,
            vec![
                ("main.py".to_string(), b"print(1)\n".to_vec()),
                ("pkg/data.bin".to_string(), vec![0u8, 159, 146, 150, 255])
            ]
        );
        assert_eq!(read(&root, "./sub/pkg").unwrap().len(), 1);
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn escapes_links_and_non_directories_are_refused() {
        let root = tree("refused");
        for (rel, says) in [
            ("../etc", "not a relative path"),
            ("/etc", "not a relative path"),
            ("sub/../../x", "not a relative path"),
            ("", "names no directory"),
            (".", "names no directory"),
            ("alias", "symbolic link"),
            ("linked", "symbolic link"),
            ("sub/main.py", "not a directory"),
            ("missing", "No such file"),
        ] {
            let e = read(&root, rel).unwrap_err();
            assert!(e.contains(says), "{rel}: {e}");
        }
        fs::remove_dir_all(&root).unwrap();
    }
}
