//! Build step: langdetect's 55 built-in profiles, loaded once here as `detect_language` loads
//! them (CPython 3.11 compatibility) and saved in langdetect's own serialised form, so that a
//! process that detects a language restores the table (`DetectorFactory::from_bytes`) instead
//! of rebuilding it from the profiles: about a third of the time, paid once per process
//! (`docs/performance.md`). `stdlib::intrinsics::ifeval` embeds the file; a test compares the
//! restored table's answers with a table built from the profiles.

use langdetect::{Compat, DetectorFactory};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let mut f = DetectorFactory::new(Compat::python(11));
    if let Err((i, e)) = f.load_builtin(&DetectorFactory::builtin_files()) {
        println!("cargo:warning=langdetect's built-in profile {i} does not load: {e}");
        std::process::exit(1);
    }
    let Some(out) = std::env::var_os("OUT_DIR") else {
        println!("cargo:warning=cargo did not set OUT_DIR");
        std::process::exit(1);
    };
    let path = std::path::Path::new(&out).join("langdetect-profiles.bin");
    if let Err(e) = std::fs::write(&path, f.to_bytes()) {
        println!("cargo:warning=cannot write {}: {e}", path.display());
        std::process::exit(1);
    }
}
