//! The judge cache: an embedded SQLite database (rusqlite, bundled SQLite) mapping a request
//! hash to the reply it got. Only replies whose every entry validated are stored, so a re-run
//! of the same requests makes no calls and reads the same replies, while failures are retried.

use super::reply::Reply;
use super::JudgeError;
use rusqlite::{params, Connection, OptionalExtension};
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
}

/// Buffered replies that trigger a commit.
pub const FLUSH_AT: usize = 256;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS judge_replies (
    hash    TEXT PRIMARY KEY NOT NULL,
    model   TEXT NOT NULL,
    reply   TEXT NOT NULL,
    created INTEGER NOT NULL
) WITHOUT ROWID;
";

fn err(e: impl std::fmt::Display) -> JudgeError {
    JudgeError::Cache(e.to_string())
}

impl Cache {
    /// Open (or create) the cache file at `path`, creating its directory.
    pub fn open(path: &Path) -> Result<Cache, JudgeError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| JudgeError::Io { path: dir.display().to_string(), message: e.to_string() })?;
        }
        let conn = Connection::open(path).map_err(|e| JudgeError::Cache(format!("{}: {e}", path.display())))?;
        let wait = std::time::Duration::from_secs(10);
        conn.busy_timeout(wait).map_err(err)?;
        // WAL lets several runs share one cache file. Switching a new file to WAL while other
        // connections open it can be refused at once with SQLITE_BUSY (SQLite does not wait for
        // that lock, to avoid a deadlock): the setup is retried until the busy timeout.
        let setup = |conn: &Connection| -> rusqlite::Result<()> {
            let _: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
            conn.execute_batch("PRAGMA synchronous=NORMAL;")?;
            conn.execute_batch(SCHEMA)
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
        Ok(Cache { conn: Mutex::new(conn), path: Some(path.to_path_buf()), pending: Mutex::default() })
    }

    /// A cache that lives as long as the process.
    pub fn in_memory() -> Result<Cache, JudgeError> {
        let conn = Connection::open_in_memory().map_err(err)?;
        conn.execute_batch(SCHEMA).map_err(err)?;
        Ok(Cache { conn: Mutex::new(conn), path: None, pending: Mutex::default() })
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

    pub fn get(&self, hash: &str) -> Result<Option<Reply>, JudgeError> {
        let buffered = self.pending().iter().rev().find(|p| p.0 == hash).map(|p| p.2.clone());
        let text: Option<String> = match buffered {
            Some(t) => Some(t),
            None => self
                .conn()
                .prepare("SELECT reply FROM judge_replies WHERE hash = ?1")
                .and_then(|mut st| st.query_row(params![hash], |r| r.get(0)).optional())
                .map_err(err)?,
        };
        match text {
            Some(t) => serde_json::from_str(&t).map(Some).map_err(|e| err(format!("entry {hash} is damaged: {e}"))),
            None => Ok(None),
        }
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
                .prepare("INSERT OR REPLACE INTO judge_replies (hash, model, reply, created) VALUES (?1, ?2, ?3, ?4)")
                .map_err(err)?;
            for (hash, model, text, created) in &batch {
                st.execute(params![hash, model, text, created]).map_err(err)?;
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
        assert_eq!(again.get("h2").unwrap(), Some(r));
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
        assert_eq!(c.get(&format!("w{}-{}", WRITERS - 1, EACH - 1)).unwrap(), Some(reply(EACH - 1)));
        let mode: String = c.conn().query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
        assert_eq!(mode, "wal");
        drop(c);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn round_trip() {
        let c = Cache::in_memory().unwrap();
        assert!(c.get("sha256:x").unwrap().is_none());
        let r = Reply {
            model: "m".into(),
            content: Some("{}".into()),
            refusal: None,
            finish_reason: Some("stop".into()),
            logprobs: None,
            usage: Usage { prompt_tokens: 3, completion_tokens: 1 },
        };
        c.put("sha256:x", &r).unwrap();
        assert_eq!(c.get("sha256:x").unwrap(), Some(r.clone()), "buffered");
        assert_eq!(c.len(), 1);
        assert_eq!(c.get("sha256:x").unwrap(), Some(r), "committed");
    }
}
