//! Bundles: a compiled rubric frozen into one verifiable file (`NAME.rbk`), written by
//! `rubric build` after the front end and read by `run`, `test`, `inspect` and `diff` instead
//! of a source. A bundle is a strict ustar archive (`container`) of a manifest, the canonical
//! IR, the portable Wasm module, a source map and optionally the sources; its identity is the
//! SHA-256 of the manifest, which lists the size and SHA-256 of every other file. Loading
//! verifies everything and rejects, with a `rubric::bundle::*` code, anything it did not
//! write. The format is documented in `docs/bundle-format.md`.
//!
//! This module needs only `ir` and `source`: a runtime loads a bundle without the front end.

pub mod container;
pub mod describe;
pub mod diff;
mod manifest;

pub use describe::{describe, Description};
pub use manifest::{
    derive, Derived, EntryPoint, FileEntry, Manifest, OutputView, SourceEntry, SourceMapFile, FORMAT_NAME,
};

use crate::ir::validate::{self, Intrinsics};
use crate::ir::{Program, Site, SiteTable, IR_VERSION};
use crate::source::SourceMap;
use container::Entry;
use sha2::{Digest, Sha256};
use std::path::Path;

/// The container, manifest and source-map layout this code writes and reads. Bumped on any
/// change to one of them (2: source-map sites carry byte offsets, since the IR no longer does);
/// a reader accepts only its own.
pub const FORMAT_VERSION: u32 = 2;
/// The version of the language of `docs/language.md` the compiler accepts.
pub const LANGUAGE_VERSION: &str = "0.1";
/// The compiler that writes a bundle.
pub const COMPILER_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Entry names. `manifest.json` comes first, then the files the manifest lists, in its order,
/// then `manifest.sha256`.
pub const MANIFEST: &str = "manifest.json";
pub const MANIFEST_HASH: &str = "manifest.sha256";
pub const IR_FILE: &str = "ir.json";
pub const WASM_FILE: &str = "module.wasm";
pub const SOURCE_MAP_FILE: &str = "source-map.json";
/// Bundled sources live under this directory (`src/main.rubric`, `src/std/text.rubric`).
pub const SOURCES_DIR: &str = "src/";

/// The Wasm binary format's magic and version.
const WASM_HEADER: &[u8] = b"\0asm\x01\0\0\0";
/// The custom section of a compiled module that records, as decimal text, the ABI it was
/// compiled against (`backend::wasm::abi::ABI_SECTION`; a test keeps the two equal).
pub const WASM_ABI_SECTION: &str = "rubric.abi";

pub const CODE_READ: &str = "rubric::bundle::read";
pub const CODE_WRITE: &str = "rubric::bundle::write";
pub const CODE_TOO_LARGE: &str = "rubric::bundle::too_large";
pub const CODE_CONTAINER: &str = "rubric::bundle::container";
pub const CODE_HASH: &str = "rubric::bundle::hash_mismatch";
pub const CODE_MISSING: &str = "rubric::bundle::missing_file";
pub const CODE_UNLISTED: &str = "rubric::bundle::unlisted_file";
pub const CODE_MANIFEST: &str = "rubric::bundle::manifest";
pub const CODE_FORMAT_VERSION: &str = "rubric::bundle::format_version";
pub const CODE_ABI_VERSION: &str = "rubric::bundle::abi_version";
pub const CODE_IR_VERSION: &str = "rubric::bundle::ir_version";
pub const CODE_IR: &str = "rubric::bundle::ir";
pub const CODE_WASM: &str = "rubric::bundle::wasm";
pub const CODE_SOURCE_MAP: &str = "rubric::bundle::source_map";

/// Why a bundle could not be written or was rejected.
#[derive(Debug, Clone, PartialEq)]
pub struct BundleError {
    /// A stable `rubric::bundle::*` code (`docs/diagnostics.md`).
    pub code: &'static str,
    pub message: String,
    pub help: Option<String>,
}

impl BundleError {
    pub fn new(code: &'static str, message: impl Into<String>) -> BundleError {
        BundleError { code, message: message.into(), help: None }
    }

    pub fn with_help(mut self, help: impl Into<String>) -> BundleError {
        self.help = Some(help.into());
        self
    }
}

impl std::fmt::Display for BundleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for BundleError {}

/// The largest bundle a reader accepts (and `build` writes), in bytes.
pub const MAX_BYTES: u64 = 64 << 20;

/// The function that compiles a program to its portable Wasm module (the runtime's
/// `backend::wasm::compile_module`): a bundle's `module.wasm` must be exactly its output.
pub type CompileModule = fn(&Program) -> Result<Vec<u8>, String>;

/// What a reader accepts, and what it checks a bundle against: the runtime's Wasm ABI, its
/// intrinsic catalogue (the IR is validated against it) and its Wasm compiler (the stored
/// module must be what it produces from the IR). `bundle` needs only `ir`, so the runtime
/// hands the last two in.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest bundle file, in bytes.
    pub max_bytes: u64,
    /// Most container entries.
    pub max_entries: usize,
    /// Largest `manifest.json`, in bytes.
    pub max_manifest_bytes: usize,
    /// Newest Wasm ABI the runtime implements.
    pub wasm_abi_version: u32,
    /// The intrinsics the runtime implements.
    pub intrinsics: &'static dyn Intrinsics,
    /// The runtime's Wasm compiler.
    pub compile_module: CompileModule,
}

impl Limits {
    /// 64 MiB, 1024 entries, a 1 MiB manifest, and the runtime's ABI, intrinsics and compiler.
    pub fn new(wasm_abi_version: u32, intrinsics: &'static dyn Intrinsics, compile_module: CompileModule) -> Limits {
        Limits {
            max_bytes: MAX_BYTES,
            max_entries: 1024,
            max_manifest_bytes: 1 << 20,
            wasm_abi_version,
            intrinsics,
            compile_module,
        }
    }
}

/// `sha256:<hex>` of some bytes: the form of every hash in a bundle.
pub fn sha256(bytes: &[u8]) -> String {
    sha256_form(&Sha256::digest(bytes))
}

/// [`sha256`] of everything `reader` gives, read in 1 MiB blocks (a file of any size).
pub fn sha256_reader(mut reader: impl std::io::Read) -> std::io::Result<String> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => return Ok(sha256_form(&h.finalize())),
            Ok(n) => h.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

fn sha256_form(digest: &[u8]) -> String {
    let mut s = String::with_capacity(71);
    s.push_str("sha256:");
    for b in digest {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// The path of a module's source inside a bundle (relative to the root rubric's directory):
/// `main` → `main.rubric`, `lib.checks` → `lib/checks.rubric`, `std.text` → `std/text.rubric`.
pub fn module_path(module: &str) -> String {
    format!("{}.rubric", module.replace('.', "/"))
}

fn leb_u32(bytes: &[u8], at: &mut usize) -> Option<u32> {
    let mut value: u64 = 0;
    for shift in (0..35).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return u32::try_from(value).ok();
        }
    }
    None
}

/// The payload of the first custom section called `name` of a Wasm module (after its 8-byte
/// header), found by walking the section headers.
pub fn wasm_custom_section<'a>(module: &'a [u8], name: &str) -> Result<Option<&'a [u8]>, String> {
    let mut at = WASM_HEADER.len();
    while at < module.len() {
        let id = module[at];
        at += 1;
        let size = leb_u32(module, &mut at).ok_or("a section size is malformed")? as usize;
        let end = at
            .checked_add(size)
            .filter(|e| *e <= module.len())
            .ok_or(format!("section {id} at byte {at} runs past the end of the module"))?;
        if id == 0 {
            let mut p = at;
            let len = leb_u32(&module[..end], &mut p).ok_or("a custom section's name is malformed")? as usize;
            let name_end = p.checked_add(len).filter(|e| *e <= end).ok_or("a custom section's name is too long")?;
            if &module[p..name_end] == name.as_bytes() {
                return Ok(Some(&module[name_end..end]));
            }
        }
        at = end;
    }
    Ok(None)
}

/// The ABI version a module records in its `rubric.abi` section.
fn module_abi(module: &[u8]) -> Result<u32, String> {
    if !module.starts_with(WASM_HEADER) {
        return Err("it is not a Wasm binary (version 1)".into());
    }
    let payload = wasm_custom_section(module, WASM_ABI_SECTION)?
        .ok_or(format!("it does not record its ABI (no `{WASM_ABI_SECTION}` custom section)"))?;
    std::str::from_utf8(payload)
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        .ok_or(format!("its `{WASM_ABI_SECTION}` section is not a version number"))
}

/// What `build` needs besides the program.
pub struct BuildInput<'a> {
    pub program: &'a Program,
    /// Where the program's sites lie (`types::Compiled::sites`): the source map records it.
    pub sites: &'a SiteTable,
    /// The portable Wasm module compiled from `program` (never engine-specific machine code).
    pub wasm: &'a [u8],
    pub wasm_abi_version: u32,
    pub stdlib_version: &'a str,
    /// Every file the program was compiled from, with its module name.
    pub sources: &'a SourceMap,
    /// Also store the sources (`src/...`).
    pub with_sources: bool,
}

/// A bundle written in memory.
pub struct Built {
    pub bytes: Vec<u8>,
    /// The bundle's identity: `sha256:` of its manifest.
    pub hash: String,
    pub manifest: Manifest,
}

/// Line and column (1-based, in characters) of every byte offset of a text.
struct Lines<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> Lines<'a> {
    fn new(text: &'a str) -> Lines<'a> {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Lines { text, starts }
    }

    fn at(&self, offset: u32) -> (u32, u32) {
        let offset = (offset as usize).min(self.text.len());
        let line = self.starts.partition_point(|s| *s <= offset) - 1;
        let start = self.starts[line];
        let col = self.text.get(start..offset).map_or(offset - start, |s| s.chars().count());
        (line as u32 + 1, col as u32 + 1)
    }
}

fn source_map(
    program: &Program,
    sites: &SiteTable,
    sources: &SourceMap,
) -> Result<(SourceMapFile, Vec<(String, String)>), BundleError> {
    let mut files = Vec::new();
    let mut texts = Vec::new();
    for f in sources.files() {
        let Some(module) = &f.module else { continue };
        if files.iter().any(|e: &SourceEntry| &e.module == module) {
            continue;
        }
        let path = module_path(module);
        container::check_name(&format!("{SOURCES_DIR}{path}")).map_err(|m| {
            BundleError::new(CODE_SOURCE_MAP, format!("module `{module}` cannot be stored: {m}"))
                .with_help("rename the module so that its path is shorter and uses only [A-Za-z0-9._-]")
        })?;
        files.push(SourceEntry {
            module: module.clone(),
            path,
            size: f.text.len() as u64,
            sha256: sha256(f.text.as_bytes()),
        });
        texts.push((module.clone(), f.text.to_string()));
    }
    if sites.len() != program.site_count as usize {
        return Err(BundleError::new(
            CODE_SOURCE_MAP,
            format!("the site table has {} sites, but the program {}", sites.len(), program.site_count),
        ));
    }
    let lines: Vec<Lines<'_>> = texts.iter().map(|(_, t)| Lines::new(t)).collect();
    let mut entries = Vec::with_capacity(sites.len());
    for (i, s) in sites.iter().enumerate() {
        let Some(fi) = files.iter().position(|f| f.module == s.file) else {
            return Err(BundleError::new(
                CODE_SOURCE_MAP,
                format!("site {i} lies in module `{}`, whose source was not loaded", s.file),
            ));
        };
        let (l0, c0) = lines[fi].at(s.start);
        let (l1, c1) = lines[fi].at(s.end);
        entries.push([fi as u32, s.start, s.end, l0, c0, l1, c1]);
    }
    Ok((SourceMapFile { files, sites: entries }, texts))
}

#[expect(
    clippy::expect_used,
    reason = "serde_json cannot fail on these types: string keys, no maps with non-string keys, no fallible Serialize impls"
)]
fn json_compact<T: serde::Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect("bundle metadata serialises")
}

#[expect(
    clippy::expect_used,
    reason = "serde_json cannot fail on these types: string keys, no maps with non-string keys, no fallible Serialize impls"
)]
fn manifest_bytes(m: &Manifest) -> Vec<u8> {
    let mut b = serde_json::to_vec_pretty(m).expect("manifest serialises");
    b.push(b'\n');
    b
}

/// Write a bundle. The result depends only on the program, the module, the sources' module
/// names and texts and the versions: never on paths, time or the machine.
pub fn build(input: &BuildInput<'_>) -> Result<Built, BundleError> {
    let p = input.program;
    match module_abi(input.wasm) {
        Ok(v) if v == input.wasm_abi_version => {}
        Ok(v) => {
            return Err(BundleError::new(
                CODE_WASM,
                format!("the compiled module records ABI version {v}, not {}", input.wasm_abi_version),
            ))
        }
        Err(m) => return Err(BundleError::new(CODE_WASM, format!("the compiled module is unusable: {m}"))),
    }
    let (map, texts) = source_map(p, input.sites, input.sources)?;
    let mut files: Vec<Entry> = vec![
        Entry { name: IR_FILE.into(), data: p.canonical_bytes() },
        Entry { name: WASM_FILE.into(), data: input.wasm.to_vec() },
        Entry { name: SOURCE_MAP_FILE.into(), data: json_compact(&map) },
    ];
    if input.with_sources {
        for (entry, (_, text)) in map.files.iter().zip(&texts) {
            files.push(Entry { name: format!("{SOURCES_DIR}{}", entry.path), data: text.clone().into_bytes() });
        }
    }
    let derived = manifest::derive(p);
    let manifest = Manifest {
        format: FORMAT_NAME.into(),
        format_version: FORMAT_VERSION,
        language_version: LANGUAGE_VERSION.into(),
        compiler_version: COMPILER_VERSION.into(),
        ir_version: derived.ir_version,
        wasm_abi_version: input.wasm_abi_version,
        stdlib_version: input.stdlib_version.into(),
        rubric: derived.rubric,
        ir_hash: derived.ir_hash,
        entry_points: derived.entry_points,
        judges: derived.judges,
        examples: derived.examples,
        capabilities: derived.capabilities,
        files: files
            .iter()
            .map(|e| FileEntry { path: e.name.clone(), size: e.data.len() as u64, sha256: sha256(&e.data) })
            .collect(),
    };
    let mbytes = manifest_bytes(&manifest);
    let hash = sha256(&mbytes);
    let mut entries = vec![Entry { name: MANIFEST.into(), data: mbytes }];
    entries.extend(files);
    entries.push(Entry { name: MANIFEST_HASH.into(), data: format!("{hash}\n").into_bytes() });
    let bytes = container::write(&entries);
    let limit = MAX_BYTES;
    if bytes.len() as u64 > limit {
        return Err(BundleError::new(
            CODE_TOO_LARGE,
            format!("the bundle would be {} bytes, over the limit of {limit} bytes", bytes.len()),
        ));
    }
    Ok(Built { bytes, hash, manifest })
}

/// A verified bundle.
#[derive(Debug, Clone)]
pub struct Bundle {
    /// The identity: `sha256:` of `manifest.json`.
    pub hash: String,
    pub manifest: Manifest,
    pub program: Program,
    /// The portable Wasm module: byte for byte what this runtime compiles from `program`.
    pub wasm: Vec<u8>,
    pub source_map: SourceMapFile,
    /// Where each site of the program lies, from the source map (module and byte offsets).
    pub sites: SiteTable,
    /// Bundled sources, `(module, text)`, in source-map order; empty unless built with them.
    pub sources: Vec<(String, String)>,
    /// Size of the bundle file.
    pub size: u64,
    /// Every entry with its size, in container order.
    pub entries: Vec<(String, u64)>,
}

impl Bundle {
    /// The bundled sources as a `SourceMap` (for rendering diagnostics); empty without them.
    pub fn sources_map(&self) -> SourceMap {
        let mut map = SourceMap::new();
        for (module, text) in &self.sources {
            let id = map.add(module_path(module), text.as_str());
            map.set_module(id, module);
        }
        map
    }

    /// `path:line:column` of an IR site, from the source map.
    pub fn site_location(&self, site: u32) -> Option<String> {
        let [file, _, _, line, col, _, _] = *self.source_map.sites.get(site as usize)?;
        let f = self.source_map.files.get(file as usize)?;
        Some(format!("{}:{line}:{col}", f.path))
    }
}

/// Read and verify a bundle file; the size limit is checked before anything is read.
pub fn load_path(path: &Path, limits: &Limits) -> Result<Bundle, BundleError> {
    let read_err = |e: std::io::Error| {
        BundleError::new(CODE_READ, format!("cannot read `{}`: {e}", path.display()))
            .with_help("check the path and its permissions")
    };
    let meta = std::fs::metadata(path).map_err(read_err)?;
    if meta.len() > limits.max_bytes {
        return Err(too_large(meta.len(), limits.max_bytes));
    }
    let bytes = std::fs::read(path).map_err(read_err)?;
    load_bytes(&bytes, limits)
}

fn too_large(size: u64, limit: u64) -> BundleError {
    BundleError::new(CODE_TOO_LARGE, format!("the bundle is {size} bytes, over the limit of {limit} bytes"))
        .with_help("a bundle holds one compiled rubric; one this large was not written by `rubric build`")
}

fn find<'a>(entries: &'a [Entry], name: &str) -> Option<&'a Entry> {
    entries.iter().find(|e| e.name == name)
}

fn missing(name: &str, why: &str) -> BundleError {
    BundleError::new(CODE_MISSING, format!("missing file `{name}`: {why}"))
}

/// `unknown field `x`, expected ...` → the field's name.
fn unknown_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    rest.split('`').next()
}

/// Verify a bundle held in memory; see `docs/bundle-format.md` for the order of the checks.
pub fn load_bytes(bytes: &[u8], limits: &Limits) -> Result<Bundle, BundleError> {
    // 1. size, then the container.
    if bytes.len() as u64 > limits.max_bytes {
        return Err(too_large(bytes.len() as u64, limits.max_bytes));
    }
    let entries = container::read(bytes, limits.max_entries)?;

    // 2. the manifest against its hash.
    let manifest_entry = find(&entries, MANIFEST).ok_or_else(|| missing(MANIFEST, "every bundle has a manifest"))?;
    let hash_entry =
        find(&entries, MANIFEST_HASH).ok_or_else(|| missing(MANIFEST_HASH, "it holds the manifest's hash"))?;
    let mbytes = &manifest_entry.data;
    if mbytes.len() > limits.max_manifest_bytes {
        return Err(BundleError::new(
            CODE_TOO_LARGE,
            format!("`{MANIFEST}` is {} bytes, over the limit of {} bytes", mbytes.len(), limits.max_manifest_bytes),
        ));
    }
    let hash = sha256(mbytes);
    let stated = String::from_utf8_lossy(&hash_entry.data);
    if stated != format!("{hash}\n") {
        return Err(BundleError::new(
            CODE_HASH,
            format!(
                "`{MANIFEST}` does not match `{MANIFEST_HASH}`: its hash is {hash}, `{MANIFEST_HASH}` says {}",
                stated.trim()
            ),
        )
        .with_help("one of the two files was altered or damaged; rebuild the bundle from its source"));
    }

    // 3. versions, read leniently first so that a newer bundle is reported as newer.
    let loose: serde_json::Value = serde_json::from_slice(mbytes)
        .map_err(|e| BundleError::new(CODE_MANIFEST, format!("`{MANIFEST}` is not valid JSON: {e}")))?;
    if loose.get("format").and_then(|f| f.as_str()) != Some(FORMAT_NAME) {
        return Err(BundleError::new(
            CODE_MANIFEST,
            format!("`{MANIFEST}` does not say `\"format\": \"{FORMAT_NAME}\"`"),
        ));
    }
    match loose.get("format_version").and_then(|v| v.as_u64()) {
        Some(v) if v > u64::from(FORMAT_VERSION) => {
            return Err(BundleError::new(
                CODE_FORMAT_VERSION,
                format!("bundle format version {v} is newer than this rubric reads (version {FORMAT_VERSION})"),
            )
            .with_help(format!(
                "upgrade rubric (this is {COMPILER_VERSION}), or rebuild the bundle with this version"
            )))
        }
        Some(v) if v < u64::from(FORMAT_VERSION) => {
            return Err(BundleError::new(
                CODE_FORMAT_VERSION,
                format!("bundle format version {v} is older than this rubric reads (version {FORMAT_VERSION})"),
            )
            .with_help("rebuild the bundle from its source"))
        }
        Some(_) => {}
        None => return Err(BundleError::new(CODE_MANIFEST, format!("`{MANIFEST}` has no numeric `format_version`"))),
    }
    if let Some(v) = loose.get("wasm_abi_version").and_then(|v| v.as_u64()) {
        if v > u64::from(limits.wasm_abi_version) {
            return Err(BundleError::new(
                CODE_ABI_VERSION,
                format!(
                    "the bundle's Wasm module needs ABI version {v}, newer than this runtime implements (version {})",
                    limits.wasm_abi_version
                ),
            )
            .with_help(format!(
                "upgrade rubric (this is {COMPILER_VERSION}), or rebuild the bundle with this version"
            )));
        }
    }
    let manifest: Manifest = serde_json::from_slice(mbytes).map_err(|e| {
        let msg = e.to_string();
        match unknown_field(&msg) {
            Some(field) => BundleError::new(
                CODE_MANIFEST,
                format!("unknown manifest field `{field}` (line {}, column {})", e.line(), e.column()),
            )
            .with_help(format!(
                "format version {FORMAT_VERSION} defines no such field; the manifest was altered or written by another tool"
            )),
            None => BundleError::new(CODE_MANIFEST, format!("`{MANIFEST}` is invalid: {msg}")),
        }
    })?;
    if manifest_bytes(&manifest) != *mbytes {
        return Err(BundleError::new(CODE_MANIFEST, format!("`{MANIFEST}` is not in canonical form"))
            .with_help("bundles are written only by `rubric build`; rebuild it from its source"));
    }
    if manifest.ir_version != IR_VERSION {
        let newer = manifest.ir_version > IR_VERSION;
        return Err(BundleError::new(
            CODE_IR_VERSION,
            format!(
                "the bundle's IR version {} is {} than the one this rubric reads (version {IR_VERSION})",
                manifest.ir_version,
                if newer { "newer" } else { "older" }
            ),
        )
        .with_help(if newer {
            format!("upgrade rubric (this is {COMPILER_VERSION})")
        } else {
            "rebuild the bundle from its source with this version".to_string()
        }));
    }

    // 4. every file listed, present, of the stated size and hash; nothing else.
    let mut listed: Vec<&str> = Vec::new();
    for f in &manifest.files {
        let name = f.path.as_str();
        container::check_name(name).map_err(|m| BundleError::new(CODE_MANIFEST, format!("`{MANIFEST}`: {m}")))?;
        let known = [IR_FILE, WASM_FILE, SOURCE_MAP_FILE].contains(&name)
            || (name.starts_with(SOURCES_DIR) && name.ends_with(".rubric"));
        if !known {
            return Err(BundleError::new(
                CODE_MANIFEST,
                format!("the manifest lists `{name}`, which bundle format version {FORMAT_VERSION} does not define"),
            ));
        }
        if listed.contains(&name) || name == MANIFEST || name == MANIFEST_HASH {
            return Err(BundleError::new(CODE_MANIFEST, format!("the manifest lists `{name}` twice")));
        }
        listed.push(name);
    }
    for required in [IR_FILE, WASM_FILE, SOURCE_MAP_FILE] {
        if !listed.contains(&required) {
            return Err(BundleError::new(CODE_MANIFEST, format!("the manifest does not list `{required}`")));
        }
    }
    for e in &entries {
        if e.name != MANIFEST && e.name != MANIFEST_HASH && !listed.contains(&e.name.as_str()) {
            return Err(BundleError::new(
                CODE_UNLISTED,
                format!("unlisted file `{}`: the bundle holds it but the manifest does not list it", e.name),
            )
            .with_help("a file was added to the bundle after it was built; rebuild it from its source"));
        }
    }
    for name in &listed {
        if find(&entries, name).is_none() {
            return Err(missing(name, "the manifest lists it but the bundle does not hold it")
                .with_help("the bundle is incomplete; rebuild it from its source"));
        }
    }
    let order: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    let mut want = vec![MANIFEST];
    want.extend(&listed);
    want.push(MANIFEST_HASH);
    if order != want {
        return Err(BundleError::new(
            CODE_CONTAINER,
            format!("the entries are not in canonical order: found {}, expected {}", order.join(", "), want.join(", ")),
        ));
    }
    for f in &manifest.files {
        let Some(e) = find(&entries, &f.path) else {
            return Err(missing(&f.path, "checked above, so this is a reader bug"));
        };
        let got = sha256(&e.data);
        if e.data.len() as u64 != f.size || got != f.sha256 {
            return Err(BundleError::new(
                CODE_HASH,
                format!(
                    "`{}` does not match the manifest: it has {} bytes and hash {got}, the manifest says {} bytes and {}",
                    f.path,
                    e.data.len(),
                    f.size,
                    f.sha256
                ),
            )
            .with_help("the file was altered or damaged; rebuild the bundle from its source"));
        }
    }

    // 5. the IR: strict, valid, canonical, and what the manifest says it is.
    let ir = &find(&entries, IR_FILE).ok_or_else(|| missing(IR_FILE, "checked above, so this is a reader bug"))?.data;
    let program = read_ir(ir, limits.intrinsics)?;
    if let Some(field) = manifest.disagreement(&manifest::derive(&program)) {
        return Err(BundleError::new(CODE_MANIFEST, format!("the manifest's `{field}` does not match `{IR_FILE}`"))
            .with_help("the manifest was edited after the bundle was built; rebuild it from its source"));
    }

    // 6. the module: the one this runtime compiles from the IR, so it is never trusted.
    let wasm = find(&entries, WASM_FILE)
        .ok_or_else(|| missing(WASM_FILE, "checked above, so this is a reader bug"))?
        .data
        .clone();
    match module_abi(&wasm) {
        Ok(v) if v == manifest.wasm_abi_version => {}
        Ok(v) => {
            return Err(BundleError::new(
                CODE_WASM,
                format!(
                    "`{WASM_FILE}` was compiled against ABI version {v}, but the manifest says {}",
                    manifest.wasm_abi_version
                ),
            ))
        }
        Err(m) => return Err(BundleError::new(CODE_WASM, format!("`{WASM_FILE}` is unusable: {m}"))),
    }
    let compiled = (limits.compile_module)(&program)
        .map_err(|e| BundleError::new(CODE_WASM, format!("`{IR_FILE}` does not compile to Wasm: {e}")))?;
    if compiled != wasm {
        return Err(BundleError::new(
            CODE_WASM,
            format!(
                "`{WASM_FILE}` is not the module `{IR_FILE}` compiles to: it has {} bytes and hash {}, the \
                 compiler gives {} bytes and {}",
                wasm.len(),
                sha256(&wasm),
                compiled.len(),
                sha256(&compiled)
            ),
        )
        .with_help("the module was replaced after the bundle was built; rebuild the bundle from its source"));
    }

    // 7. the source map.
    let sm_bytes = &find(&entries, SOURCE_MAP_FILE)
        .ok_or_else(|| missing(SOURCE_MAP_FILE, "checked above, so this is a reader bug"))?
        .data;
    let source_map: SourceMapFile = serde_json::from_slice(sm_bytes)
        .map_err(|e| BundleError::new(CODE_SOURCE_MAP, format!("`{SOURCE_MAP_FILE}` is invalid: {e}")))?;
    let (sites, sources) = check_source_map(&program, &source_map, &entries)?;
    Ok(Bundle {
        hash,
        manifest,
        program,
        wasm,
        source_map,
        sites,
        sources,
        size: bytes.len() as u64,
        entries: entries.iter().map(|e| (e.name.clone(), e.data.len() as u64)).collect(),
    })
}

/// The source map's modules have their canonical paths, it locates exactly the program's
/// sites (each within its module's text, and where the text says when it is bundled), and
/// bundled sources are exactly the mapped modules. Returns the site table and the sources.
fn check_source_map(
    program: &Program,
    map: &SourceMapFile,
    entries: &[Entry],
) -> Result<(SiteTable, Vec<(String, String)>), BundleError> {
    let bad = |m: String| BundleError::new(CODE_SOURCE_MAP, format!("`{SOURCE_MAP_FILE}`: {m}"));
    for f in &map.files {
        if f.path != module_path(&f.module) {
            return Err(bad(format!(
                "module `{}` has path `{}`, expected `{}`",
                f.module,
                f.path,
                module_path(&f.module)
            )));
        }
    }
    if map.sites.len() != program.site_count as usize {
        return Err(bad(format!("{} sites, but the IR has {}", map.sites.len(), program.site_count)));
    }
    let mut sites = Vec::with_capacity(map.sites.len());
    for (i, [file, start, end, ..]) in map.sites.iter().enumerate() {
        let Some(f) = map.files.get(*file as usize) else {
            return Err(bad(format!("site {i} lies in file {file}, which the map does not list")));
        };
        if start > end || u64::from(*end) > f.size {
            return Err(bad(format!("site {i} ({start}..{end}) does not lie within module `{}`", f.module)));
        }
        sites.push(Site { file: f.module.clone(), start: *start, end: *end });
    }
    let sites = SiteTable::new(sites);
    let bundled: Vec<&Entry> = entries.iter().filter(|e| e.name.starts_with(SOURCES_DIR)).collect();
    if bundled.is_empty() {
        return Ok((sites, vec![]));
    }
    let mut out = Vec::new();
    for f in &map.files {
        let name = format!("{SOURCES_DIR}{}", f.path);
        let Some(e) = bundled.iter().find(|e| e.name == name) else {
            return Err(missing(&name, "the bundle holds sources, but not this module's"));
        };
        if sha256(&e.data) != f.sha256 || e.data.len() as u64 != f.size {
            return Err(bad(format!("`{name}` is not the source the map describes")));
        }
        let text = String::from_utf8(e.data.clone()).map_err(|_| bad(format!("`{name}` is not UTF-8")))?;
        out.push((f.module.clone(), text));
    }
    if let Some(extra) =
        bundled.iter().find(|e| !map.files.iter().any(|f| e.name == format!("{SOURCES_DIR}{}", f.path)))
    {
        return Err(bad(format!("`{}` is not a module of the program", extra.name)));
    }
    // With the sources at hand, every line and column must be where the byte offsets are.
    let lines: Vec<Lines<'_>> = out.iter().map(|(_, t)| Lines::new(t)).collect();
    for (i, [file, start, end, l0, c0, l1, c1]) in map.sites.iter().enumerate() {
        let text = &lines[*file as usize];
        if text.at(*start) != (*l0, *c0) || text.at(*end) != (*l1, *c1) {
            return Err(bad(format!("site {i} is not at the line and column its byte offsets give")));
        }
    }
    Ok((sites, out))
}

/// The IR as canonical JSON → a validated program (step 7 of `docs/bundle-format.md`): not
/// deeper than `validate::MAX_JSON_DEPTH` (checked on the bytes, before anything is built), a
/// strict parse, the IR version, `validate::validate` against the runtime's intrinsics, and
/// canonical form. Expressions nest as deep as the parser allows (several JSON levels each),
/// past serde_json's default limit of 128: the limit is off and the parse grows its stack on
/// the heap. The whole of it runs on a stack segment of its own, so that a program rejected
/// for its depth is also dropped there (dropping a tree recurses once per level).
fn read_ir(ir: &[u8], intrinsics: &dyn Intrinsics) -> Result<Program, BundleError> {
    let invalid = |m: String| {
        BundleError::new(CODE_IR, format!("`{IR_FILE}` is not a valid IR program: {m}")).with_help(
            "the IR was edited after it was compiled (anyone can recompute a bundle's hashes); rebuild the \
             bundle from its source",
        )
    };
    if let Some(at) = json_too_deep(ir, validate::MAX_JSON_DEPTH) {
        return Err(invalid(format!("it nests deeper than {} levels (at byte {at})", validate::MAX_JSON_DEPTH)));
    }
    stacker::grow(64 << 20, || {
        use serde::Deserialize;
        let mut de = serde_json::Deserializer::from_slice(ir);
        de.disable_recursion_limit();
        let program = Program::deserialize(serde_stacker::Deserializer::new(&mut de))
            .and_then(|p| de.end().map(|()| p))
            .map_err(|e| invalid(e.to_string()))?;
        if program.ir_version != IR_VERSION {
            return Err(BundleError::new(
                CODE_IR_VERSION,
                format!("`{IR_FILE}` has IR version {}, this rubric reads version {IR_VERSION}", program.ir_version),
            ));
        }
        validate::validate(&program, intrinsics).map_err(|e| invalid(e.to_string()))?;
        if program.canonical_bytes() != *ir {
            return Err(BundleError::new(CODE_IR, format!("`{IR_FILE}` is not in canonical form")));
        }
        Ok(program)
    })
}

/// The byte offset at which JSON text first nests deeper than `limit` arrays and objects.
fn json_too_deep(json: &[u8], limit: usize) -> Option<usize> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (i, b) in json.iter().enumerate() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return Some(i);
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}
