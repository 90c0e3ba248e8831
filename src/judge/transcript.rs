//! Transcripts: every judge request and its reply as one JSON line (`--record FILE`), and the
//! replay source that answers requests from such a file by their hash (`--judge replay:FILE`).
//! A line holds the request body as sent, with the run's secret fence tags (no URL, no headers,
//! so never a key), its hash (over the stable-tag form, the same in every run), the normalised
//! reply or the failure reason, where the reply came from, and the attempts it took.

use super::reply::Reply;
use super::JudgeError;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// One line of a transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub hash: String,
    pub judge: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    pub sample: u32,
    /// The chat-completions body as this run sent it (or would have: an answer from the cache,
    /// memory or a replay), with this run's fence tags.
    pub request: Json,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<Reply>,
    /// Why there is no usable reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `http`, `cache`, `memo` (an earlier identical request of this run) or `replay`.
    pub source: String,
    #[serde(default)]
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<f64>,
}

/// Appends entries to a JSONL file, one flushed line each.
#[derive(Debug)]
pub struct TranscriptWriter {
    out: Mutex<BufWriter<std::fs::File>>,
    path: PathBuf,
}

impl TranscriptWriter {
    /// Create (truncate) `path`.
    pub fn create(path: &Path) -> Result<TranscriptWriter, JudgeError> {
        let f = std::fs::File::create(path)
            .map_err(|e| JudgeError::Io { path: path.display().to_string(), message: e.to_string() })?;
        Ok(TranscriptWriter { out: Mutex::new(BufWriter::new(f)), path: path.to_path_buf() })
    }

    /// Append to `path`, creating it if needed.
    pub fn append(path: &Path) -> Result<TranscriptWriter, JudgeError> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| JudgeError::Io { path: path.display().to_string(), message: e.to_string() })?;
        Ok(TranscriptWriter { out: Mutex::new(BufWriter::new(f)), path: path.to_path_buf() })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn write(&self, e: &Entry) -> std::io::Result<()> {
        let line = serde_json::to_string(e).map_err(std::io::Error::other)?;
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        out.write_all(line.as_bytes())?;
        out.write_all(b"\n")?;
        out.flush()
    }
}

/// Replies recorded in a transcript, by request hash (the last reply for a hash wins).
#[derive(Debug, Default)]
pub struct Replay {
    replies: HashMap<String, Reply>,
}

impl Replay {
    pub fn load(path: &Path) -> Result<Replay, JudgeError> {
        let io = |e: std::io::Error| JudgeError::Io { path: path.display().to_string(), message: e.to_string() };
        let f = std::fs::File::open(path).map_err(io)?;
        let mut replies = HashMap::new();
        for (n, line) in BufReader::new(f).lines().enumerate() {
            let line = line.map_err(io)?;
            if line.trim().is_empty() {
                continue;
            }
            let e: Entry = serde_json::from_str(&line)
                .map_err(|e| JudgeError::Config(format!("{}:{}: not a transcript line: {e}", path.display(), n + 1)))?;
            if let Some(r) = e.reply {
                replies.insert(e.hash, r);
            }
        }
        Ok(Replay { replies })
    }

    pub fn from_entries(entries: impl IntoIterator<Item = Entry>) -> Replay {
        Replay { replies: entries.into_iter().filter_map(|e| Some((e.hash, e.reply?))).collect() }
    }

    pub fn get(&self, hash: &str) -> Option<&Reply> {
        self.replies.get(hash)
    }

    pub fn len(&self) -> usize {
        self.replies.len()
    }

    pub fn is_empty(&self) -> bool {
        self.replies.is_empty()
    }
}
