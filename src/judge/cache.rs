//! The judge cache: an embedded SQLite database (rusqlite, bundled SQLite) mapping a request
//! hash to the reply it got. Only replies whose every entry validated are stored, so a re-run
//! of the same requests makes no calls and reads the same replies, while failures are retried.
//!
//! The cache proves what it returns: each entry is stored with a digest of its request hash,
//! model and reply ([`digest`]), verified on every read; an entry that does not verify (a
//! flipped byte, an entry written before digests) is a miss, asked again and rewritten, and is
//! counted. A file that fails SQLite's `quick_check` when opened is set aside (renamed, never
//! read again) and a new cache started in its place.

use super::reply::Reply;
use super::JudgeError;
use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A reply cache: one connection behind a mutex. Writes are buffered and committed in batches
/// (one transaction per [`FLUSH_AT`] replies, and at every [`Cache::flush`], which the
/// dispatcher calls after each batch of requests, and on drop), so storing thousands of replies
/// costs a few transactions instead of one commit each on the async workers.
#[derive(Debug)]
pub struct Cache {
    conn: Mutex<Connection>,
    path: Option<PathBuf>,
    /// Replies stored but not committed yet: (hash, model, reply JSON, created).
    pending: Mutex<Vec<(String, String, String, i64)>>,
    /// Where a damaged file found at `path` was moved when this cache was opened.
    set_aside: Option<PathBuf>,
}

/// What a read of the cache found.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    Hit(Reply),
    Miss,
    /// An entry is there but does not prove itself (why): the caller asks again.
    Unverified(String),
}

/// Buffered replies that trigger a commit.
pub const FLUSH_AT: usize = 256;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS judge_replies (
    hash    TEXT PRIMARY KEY NOT NULL,
    model   TEXT NOT NULL,
    reply   TEXT NOT NULL,
    created INTEGER NOT NULL,
    digest  TEXT
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS judge_batches (
    id       TEXT PRIMARY KEY NOT NULL,
    endpoint TEXT NOT NULL,
    state    TEXT NOT NULL,
    created  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS judge_batch_requests (
    hash  TEXT NOT NULL,
    batch TEXT NOT NULL,
    PRIMARY KEY (hash, batch)
) WITHOUT ROWID;
";

/// The digest an entry is stored with: SHA-256 over its request hash, its model and its reply
/// text, each followed by a NUL (none can hold one unescaped), in lowercase hex.
pub fn digest(hash: &str, model: &str, reply: &str) -> String {
    let mut h = Sha256::new();
    for part in [hash, model, reply] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// What SQLite's `check` pragma (`quick_check`, `integrity_check`) says about an open
/// database: `None` when it is sound, else its first `keep` problems; an error when the check
/// itself cannot run.
fn run_check(conn: &Connection, check: &str, keep: usize) -> rusqlite::Result<Option<String>> {
    let rows: Vec<String> = conn
        .prepare(&format!("PRAGMA {check}"))?
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<Result<_, _>>()?;
    Ok((rows.len() != 1 || rows[0] != "ok").then(|| rows.into_iter().take(keep).collect::<Vec<_>>().join("; ")))
}

/// What `quick_check` says about an open database: `None` when it is sound.
fn damage(conn: &Connection) -> Option<String> {
    run_check(conn, "quick_check", 3).unwrap_or_else(|e| Some(e.to_string()))
}

/// Whether the cache table has its `digest` column (a file written before digests has not).
fn has_digest(conn: &Connection) -> rusqlite::Result<bool> {
    conn.prepare("SELECT 1 FROM pragma_table_info('judge_replies') WHERE name = 'digest'")?.exists([])
}

/// The reply of an entry read under `key`, when it proves itself: its digest matches its stored
/// hash (which is `key`), its model and its text, and the text is a reply of that model.
fn proven(key: &str, hash: &str, model: &str, text: &str, stored: Option<&str>) -> Result<Reply, String> {
    let Some(stored) = stored else { return Err(format!("entry {key} was written without a digest")) };
    if hash != key || stored != digest(hash, model, text) {
        return Err(format!("entry {key} does not match its digest"));
    }
    match serde_json::from_str::<Reply>(text) {
        Ok(reply) if reply.model == model => Ok(reply),
        Ok(_) => Err(format!("entry {key} names another model than its reply")),
        Err(e) => Err(format!("entry {key} is not a reply: {e}")),
    }
}

/// What [`verify`] found in a cache file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verification {
    /// What SQLite's full `integrity_check` reported, when it did not say `ok`.
    pub damage: Option<String>,
    pub entries: u64,
    pub verified: u64,
    /// Entries written before digests (asked again once when a run meets them).
    pub without_digest: u64,
    /// Entries that do not verify: their request hash and why.
    pub unverified: Vec<(String, String)>,
}

impl Verification {
    pub fn is_sound(&self) -> bool {
        self.damage.is_none() && self.unverified.is_empty()
    }
}

/// Check every entry of the cache file at `path` without changing it: SQLite's integrity check,
/// then each entry's digest (`rubric cache verify`).
pub fn verify(path: &Path) -> Result<Verification, JudgeError> {
    let open_err = |e: rusqlite::Error| JudgeError::Cache(format!("{}: {e}", path.display()));
    if !path.is_file() {
        return Err(JudgeError::Io { path: path.display().to_string(), message: "no such file".into() });
    }
    let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(open_err)?;
    let mut v = Verification { damage: None, entries: 0, verified: 0, without_digest: 0, unverified: Vec::new() };
    match run_check(&conn, "integrity_check", 5) {
        Ok(damage) => v.damage = damage,
        Err(e) => {
            v.damage = Some(e.to_string());
            return Ok(v);
        }
    }
    let select = match has_digest(&conn) {
        Ok(true) => "SELECT hash, model, reply, digest FROM judge_replies",
        Ok(false) => "SELECT hash, model, reply, NULL FROM judge_replies",
        Err(e) => {
            v.damage.get_or_insert(e.to_string());
            return Ok(v);
        }
    };
    let walk = conn.prepare(select).and_then(|mut st| {
        let mut rows = st.query([])?;
        while let Some(r) = rows.next()? {
            let (hash, model, text, stored): (String, String, String, Option<String>) =
                (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
            v.entries += 1;
            match (stored.is_some(), proven(&hash, &hash, &model, &text, stored.as_deref())) {
                (_, Ok(_)) => v.verified += 1,
                (false, Err(_)) => v.without_digest += 1,
                (true, Err(why)) => v.unverified.push((hash, why)),
            }
        }
        Ok(())
    });
    if let Err(e) = walk {
        v.damage.get_or_insert(e.to_string());
    }
    Ok(v)
}

/// Add the `digest` column to a cache written before it (its entries then verify as nothing,
/// and are asked again once).
fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    if !has_digest(conn)? {
        conn.execute_batch("ALTER TABLE judge_replies ADD COLUMN digest TEXT")?;
    }
    Ok(())
}

fn err(e: impl std::fmt::Display) -> JudgeError {
    JudgeError::Cache(e.to_string())
}

impl Cache {
    /// Open (or create) the cache file at `path`, creating its directory. A file that is not a
    /// sound SQLite database is set aside first ([`Cache::set_aside`]).
    pub fn open(path: &Path) -> Result<Cache, JudgeError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| JudgeError::Io { path: dir.display().to_string(), message: e.to_string() })?;
        }
        let set_aside = match std::fs::metadata(path) {
            Ok(m) if m.len() > 0 => Self::set_aside_if_damaged(path)?,
            _ => None,
        };
        let mut cache = Self::open_sound(path)?;
        cache.set_aside = set_aside;
        Ok(cache)
    }

    /// Check the file at `path`; when it fails, move it (and its WAL and shared-memory files)
    /// to `PATH.damaged-SECONDS` and say where.
    fn set_aside_if_damaged(path: &Path) -> Result<Option<PathBuf>, JudgeError> {
        let why = match Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE) {
            Ok(conn) => {
                let _ = conn.busy_timeout(std::time::Duration::from_secs(10));
                damage(&conn)
            }
            Err(e) => Some(e.to_string()),
        };
        let Some(_why) = why else { return Ok(None) };
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let aside = PathBuf::from(format!("{}.damaged-{now}", path.display()));
        std::fs::rename(path, &aside)
            .map_err(|e| JudgeError::Io { path: path.display().to_string(), message: e.to_string() })?;
        for ext in ["-wal", "-shm"] {
            let side = PathBuf::from(format!("{}{ext}", path.display()));
            if side.exists() {
                let _ = std::fs::rename(&side, format!("{}{ext}", aside.display()));
            }
        }
        Ok(Some(aside))
    }

    /// Where a damaged file found at this cache's path was moved when it was opened.
    pub fn set_aside(&self) -> Option<&Path> {
        self.set_aside.as_deref()
    }

    fn open_sound(path: &Path) -> Result<Cache, JudgeError> {
        let conn = Connection::open(path).map_err(|e| JudgeError::Cache(format!("{}: {e}", path.display())))?;
        let wait = std::time::Duration::from_secs(10);
        conn.busy_timeout(wait).map_err(err)?;
        // WAL lets several runs share one cache file. Switching a new file to WAL while other
        // connections open it can be refused at once with SQLITE_BUSY (SQLite does not wait for
        // that lock, to avoid a deadlock): the setup is retried until the busy timeout.
        let setup = |conn: &Connection| -> rusqlite::Result<()> {
            let _: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
            conn.execute_batch("PRAGMA synchronous=NORMAL;")?;
            conn.execute_batch(SCHEMA)?;
            migrate(conn)
        };
        let deadline = std::time::Instant::now() + wait;
        let mut pause = std::time::Duration::from_millis(5);
        loop {
            match setup(&conn) {
                Ok(()) => break,
                Err(rusqlite::Error::SqliteFailure(e, _))
                    if matches!(e.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(std::time::Duration::from_millis(200));
                }
                Err(e) => return Err(err(e)),
            }
        }
        Ok(Cache { conn: Mutex::new(conn), path: Some(path.to_path_buf()), pending: Mutex::default(), set_aside: None })
    }

    /// A cache that lives as long as the process.
    pub fn in_memory() -> Result<Cache, JudgeError> {
        let conn = Connection::open_in_memory().map_err(err)?;
        conn.execute_batch(SCHEMA).map_err(err)?;
        Ok(Cache { conn: Mutex::new(conn), path: None, pending: Mutex::default(), set_aside: None })
    }

    /// `$XDG_CACHE_HOME/rubric/judge-cache.sqlite`, else `~/.cache/rubric/judge-cache.sqlite`.
    pub fn default_path() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").filter(|v| !v.is_empty()).map(|h| PathBuf::from(h).join(".cache")))?;
        Some(base.join("rubric").join("judge-cache.sqlite"))
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, Vec<(String, String, String, i64)>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The reply stored for request `hash`, when its entry proves itself: its digest matches
    /// the hash it is stored under, its model and its text, and the text is a reply.
    pub fn get(&self, hash: &str) -> Result<Lookup, JudgeError> {
        let buffered = self.pending().iter().rev().find(|p| p.0 == hash).map(|p| p.2.clone());
        if let Some(text) = buffered {
            return serde_json::from_str(&text).map(Lookup::Hit).map_err(err);
        }
        let row: Option<(String, String, String, Option<String>)> = self
            .conn()
            .prepare("SELECT hash, model, reply, digest FROM judge_replies WHERE hash = ?1")
            .and_then(|mut st| {
                st.query_row(params![hash], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))).optional()
            })
            .map_err(err)?;
        let Some((stored_hash, model, text, stored_digest)) = row else { return Ok(Lookup::Miss) };
        Ok(match proven(hash, &stored_hash, &model, &text, stored_digest.as_deref()) {
            Ok(reply) => Lookup::Hit(reply),
            Err(why) => Lookup::Unverified(why),
        })
    }

    /// The batch (`--dispatch batch`) still open at endpoint `endpoint` that holds request
    /// `hash`: a run that was stopped while it was in progress polls it instead of submitting
    /// the request again.
    pub fn open_batch(&self, endpoint: &str, hash: &str) -> Result<Option<String>, JudgeError> {
        self.conn()
            .prepare(
                "SELECT b.id FROM judge_batch_requests r JOIN judge_batches b ON r.batch = b.id \
                 WHERE r.hash = ?1 AND b.endpoint = ?2 AND b.state = 'open' ORDER BY b.created DESC LIMIT 1",
            )
            .and_then(|mut st| st.query_row(params![hash, endpoint], |r| r.get(0)).optional())
            .map_err(err)
    }

    /// Record batch `id`, submitted to `endpoint` with these requests, as open.
    pub fn record_batch(&self, id: &str, endpoint: &str, hashes: &[&str]) -> Result<(), JudgeError> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(err)?;
        tx.execute(
            "INSERT OR REPLACE INTO judge_batches (id, endpoint, state, created) VALUES (?1, ?2, 'open', ?3)",
            params![id, endpoint, now],
        )
        .map_err(err)?;
        {
            let mut st =
                tx.prepare("INSERT OR IGNORE INTO judge_batch_requests (hash, batch) VALUES (?1, ?2)").map_err(err)?;
            for h in hashes {
                st.execute(params![h, id]).map_err(err)?;
            }
        }
        tx.commit().map_err(err)
    }

    /// Mark batch `id` ended (`completed`, `failed`, `expired`, `cancelled`): not polled again.
    pub fn close_batch(&self, id: &str, state: &str) -> Result<(), JudgeError> {
        self.conn().execute("UPDATE judge_batches SET state = ?2 WHERE id = ?1", params![id, state]).map_err(err)?;
        Ok(())
    }

    pub fn put(&self, hash: &str, reply: &Reply) -> Result<(), JudgeError> {
        let text = serde_json::to_string(reply).map_err(err)?;
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        let full = {
            let mut p = self.pending();
            p.push((hash.to_string(), reply.model.clone(), text, now));
            p.len() >= FLUSH_AT
        };
        if full {
            self.flush()?;
        }
        Ok(())
    }

    /// Commit the buffered replies in one transaction.
    pub fn flush(&self) -> Result<(), JudgeError> {
        let batch = std::mem::take(&mut *self.pending());
        if batch.is_empty() {
            return Ok(());
        }
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(err)?;
        {
            let mut st = tx
                .prepare(
                    "INSERT OR REPLACE INTO judge_replies (hash, model, reply, created, digest) VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .map_err(err)?;
            for (hash, model, text, created) in &batch {
                st.execute(params![hash, model, text, created, digest(hash, model, text)]).map_err(err)?;
            }
        }
        tx.commit().map_err(err)
    }

    pub fn len(&self) -> usize {
        let _ = self.flush();
        self.conn().query_row("SELECT COUNT(*) FROM judge_replies", [], |r| r.get::<_, i64>(0)).unwrap_or(0) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::reply::Usage;

    #[test]
    fn buffered_replies_reach_the_file_on_drop_and_in_batches() {
        let dir = std::env::temp_dir().join(format!("rubric-cache-test-{}", std::process::id()));
        let path = dir.join("c.sqlite");
        let _ = std::fs::remove_file(&path);
        let r = Reply {
            model: "m".into(),
            content: Some("{}".into()),
            refusal: None,
            finish_reason: None,
            logprobs: None,
            usage: Usage::default(),
            batched: false,
        };
        {
            let c = Cache::open(&path).unwrap();
            for i in 0..FLUSH_AT + 3 {
                c.put(&format!("h{i}"), &r).unwrap();
            }
            assert_eq!(c.pending().len(), 3, "a full buffer was committed");
        }
        let again = Cache::open(&path).unwrap();
        assert_eq!(again.len(), FLUSH_AT + 3);
        assert_eq!(again.get("h2").unwrap(), Lookup::Hit(r));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Several connections to one new file (as several processes would open it: separate
    /// connections lock the file as processes do) create it, write and read at once without
    /// `database is locked`: WAL and the busy timeout let them take turns.
    #[test]
    fn connections_share_one_file_while_writing() {
        let dir = std::env::temp_dir().join(format!("rubric-cache-shared-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("shared.sqlite");
        let reply = |i: usize| Reply {
            model: format!("m{i}"),
            content: Some("{}".into()),
            refusal: None,
            finish_reason: None,
            logprobs: None,
            usage: Usage::default(),
            batched: false,
        };
        const WRITERS: usize = 6;
        const EACH: usize = 2 * FLUSH_AT + 17;
        let start = std::sync::Barrier::new(WRITERS);
        std::thread::scope(|scope| {
            for w in 0..WRITERS {
                let (path, start) = (&path, &start);
                scope.spawn(move || {
                    start.wait();
                    let c = Cache::open(path).unwrap_or_else(|e| panic!("writer {w} cannot open: {e}"));
                    for i in 0..EACH {
                        c.put(&format!("w{w}-{i}"), &reply(i)).unwrap_or_else(|e| panic!("writer {w}: {e}"));
                        if i % 50 == 0 {
                            c.flush().unwrap_or_else(|e| panic!("writer {w}: {e}"));
                            // and read what another writer committed, if it has
                            let other = (w + 1) % WRITERS;
                            let _ = c.get(&format!("w{other}-0")).unwrap_or_else(|e| panic!("writer {w}: {e}"));
                        }
                    }
                    c.flush().unwrap_or_else(|e| panic!("writer {w}: {e}"));
                });
            }
        });
        let c = Cache::open(&path).unwrap();
        assert_eq!(c.len(), WRITERS * EACH);
        assert_eq!(c.get(&format!("w{}-{}", WRITERS - 1, EACH - 1)).unwrap(), Lookup::Hit(reply(EACH - 1)));
        let mode: String = c.conn().query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
        assert_eq!(mode, "wal");
        drop(c);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A cache written before digests: its entries are found but prove nothing, so they are
    /// asked again once and rewritten with a digest; `verify` counts them apart from damage.
    #[test]
    fn entries_written_before_digests_are_asked_again_once() {
        let dir = std::env::temp_dir().join(format!("rubric-cache-legacy-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("old.sqlite");
        let r = Reply {
            model: "m".into(),
            content: Some("{\"met\": true}".into()),
            refusal: None,
            finish_reason: None,
            logprobs: None,
            usage: Usage::default(),
            batched: false,
        };
        {
            let old = Connection::open(&path).unwrap();
            old.execute_batch(
                "CREATE TABLE judge_replies (hash TEXT PRIMARY KEY NOT NULL, model TEXT NOT NULL, \
                 reply TEXT NOT NULL, created INTEGER NOT NULL) WITHOUT ROWID;",
            )
            .unwrap();
            let text = serde_json::to_string(&r).unwrap();
            old.execute("INSERT INTO judge_replies VALUES ('h', 'm', ?1, 0)", params![text]).unwrap();
        }
        let v = verify(&path).unwrap();
        assert_eq!((v.entries, v.verified, v.without_digest, v.is_sound()), (1, 0, 1, true), "{v:?}");
        let c = Cache::open(&path).unwrap();
        assert!(c.set_aside().is_none(), "an old file is sound, not damaged");
        assert!(matches!(c.get("h").unwrap(), Lookup::Unverified(why) if why.contains("without a digest")));
        c.put("h", &r).unwrap();
        c.flush().unwrap();
        assert_eq!(c.get("h").unwrap(), Lookup::Hit(r));
        let v = verify(&path).unwrap();
        assert_eq!((v.entries, v.verified, v.without_digest), (1, 1, 0), "{v:?}");
        drop(c);
        // A file that is not a database at all is set aside too.
        let junk = dir.join("junk.sqlite");
        std::fs::write(&junk, vec![0x5a; 10_000]).unwrap();
        let c = Cache::open(&junk).unwrap();
        let aside = c.set_aside().expect("set aside").to_path_buf();
        assert!(aside.display().to_string().contains("junk.sqlite.damaged-"), "{}", aside.display());
        assert_eq!(std::fs::read(&aside).unwrap().len(), 10_000, "kept as it was");
        assert!(c.is_empty());
        drop(c);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn round_trip() {
        let c = Cache::in_memory().unwrap();
        assert_eq!(c.get("sha256:x").unwrap(), Lookup::Miss);
        let r = Reply {
            model: "m".into(),
            content: Some("{}".into()),
            refusal: None,
            finish_reason: Some("stop".into()),
            logprobs: None,
            usage: Usage::new(3, 1),
            batched: false,
        };
        c.put("sha256:x", &r).unwrap();
        assert_eq!(c.get("sha256:x").unwrap(), Lookup::Hit(r.clone()), "buffered");
        assert_eq!(c.len(), 1);
        assert_eq!(c.get("sha256:x").unwrap(), Lookup::Hit(r), "committed");
    }
}
