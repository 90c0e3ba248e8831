//! Local judges (`judge NAME { local "DIR" }`) in the dispatcher: where a model directory is,
//! its fingerprint (part of every request, so the cache never answers for another model), the
//! loaded models (once per dispatcher), and their answers as `Reply`s, so that a local
//! answer is cached, recorded and read (`reply::interpret`) exactly like an HTTP one.
//!
//! A local answer is the reply `{"answer": "yes"}` (or `"no"`, whichever is likelier) whose
//! one answer token carries ln P(yes) and ln P(no) as its top log-probabilities; reading it
//! gives P(yes) / (P(yes) + P(no)). Without the `models` feature every local request ends
//! `judge_local_model: ...`.

use super::prompt::Message;
use super::reply::{Reply, TokenLogprob, Usage};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

#[cfg(feature = "models")]
type Loaded = crate::models::local_judge::LocalJudge;
#[cfg(not(feature = "models"))]
type Loaded = ();

/// The local models of one dispatcher, loaded on first use.
#[derive(Default)]
pub(super) struct LocalModels {
    models: Mutex<HashMap<PathBuf, Result<Arc<Loaded>, String>>>,
    fingerprints: Mutex<HashMap<PathBuf, Result<String, String>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The reply of a local judge whose first answer token had these yes/no log-probabilities.
pub fn local_reply(model: &str, logprob_yes: f64, logprob_no: f64, prompt_tokens: u64) -> Reply {
    let said = if logprob_yes >= logprob_no { "yes" } else { "no" };
    Reply {
        model: model.to_string(),
        content: Some(format!("{{\"answer\": \"{said}\"}}")),
        refusal: None,
        finish_reason: Some("stop".into()),
        logprobs: Some(vec![TokenLogprob {
            token: said.to_string(),
            logprob: if said == "yes" { logprob_yes } else { logprob_no },
            top: vec![("yes".to_string(), logprob_yes), ("no".to_string(), logprob_no)],
        }]),
        usage: Usage::new(prompt_tokens, 1),
        batched: false,
    }
}

impl LocalModels {
    /// The identity of the model in `dir`, computed once.
    pub fn fingerprint(&self, dir: &Path) -> Result<String, String> {
        if let Some(f) = lock(&self.fingerprints).get(dir) {
            return f.clone();
        }
        #[cfg(feature = "models")]
        let f = crate::models::local_judge::fingerprint(dir).map_err(|e| format!("judge_local_model: {e}"));
        #[cfg(not(feature = "models"))]
        let f = Err(no_models());
        lock(&self.fingerprints).insert(dir.to_path_buf(), f.clone());
        f
    }

    /// The model in `dir`, loaded once (a failure is remembered too).
    fn model(&self, dir: &Path) -> Result<Arc<Loaded>, String> {
        let mut models = lock(&self.models);
        if let Some(m) = models.get(dir) {
            return m.clone();
        }
        #[cfg(feature = "models")]
        let m = crate::models::local_judge::LocalJudge::load(dir, crate::models::device())
            .map(Arc::new)
            .map_err(|e| format!("judge_local_model: {e}"));
        #[cfg(not(feature = "models"))]
        let m: Result<Arc<Loaded>, String> = Err(no_models());
        models.insert(dir.to_path_buf(), m.clone());
        m
    }

    /// Answer every prompt with the model in `dir` in one batched call: a reply per prompt,
    /// or why there is none.
    pub fn answer(&self, dir: &Path, model_name: &str, prompts: &[&[Message]]) -> Vec<Result<Reply, String>> {
        let model = match self.model(dir) {
            Ok(m) => m,
            Err(e) => return prompts.iter().map(|_| Err(e.clone())).collect(),
        };
        #[cfg(feature = "models")]
        {
            use crate::models::chat::ChatMessage;
            let chats: Vec<Vec<ChatMessage>> = prompts
                .iter()
                .map(|ms| ms.iter().map(|m| ChatMessage::new(m.role.clone(), m.content.clone())).collect())
                .collect();
            model
                .score(&chats)
                .into_iter()
                .map(|r| match r {
                    Ok(s) => Ok(local_reply(model_name, s.logprob_yes, s.logprob_no, s.prompt_tokens as u64)),
                    Err(e) => Err(format!("judge_local_model: {e}")),
                })
                .collect()
        }
        #[cfg(not(feature = "models"))]
        {
            let _ = (model, model_name);
            prompts.iter().map(|_| Err(no_models())).collect()
        }
    }
}

#[cfg(not(feature = "models"))]
fn no_models() -> String {
    "judge_local_model: this build has no local models (build with the `models` feature)".into()
}

/// Where the model of `local "WRITTEN"` is: the directory `[local]` of the judges
/// configuration maps `WRITTEN` to, else `WRITTEN` itself; a relative path is taken from
/// `base` (the configuration file's directory), or from the working directory without one.
pub fn resolve_dir(written: &str, mapped: Option<&str>, base: Option<&Path>) -> PathBuf {
    let p = PathBuf::from(mapped.unwrap_or(written));
    match base {
        Some(b) if p.is_relative() => b.join(p),
        _ => p,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_reply_reads_as_p_yes() {
        let r = local_reply("local:m", (0.2f64).ln(), (0.6f64).ln(), 10);
        assert_eq!(r.content.as_deref(), Some("{\"answer\": \"no\"}"));
        let t = &r.logprobs.as_ref().unwrap()[0];
        assert_eq!(t.token, "no");
        assert_eq!(t.top.len(), 2);
        assert_eq!(resolve_dir("m", None, Some(Path::new("/etc/x"))), PathBuf::from("/etc/x/m"));
        assert_eq!(resolve_dir("m", Some("/abs"), Some(Path::new("/etc/x"))), PathBuf::from("/abs"));
        assert_eq!(resolve_dir("/a/m", None, Some(Path::new("/etc/x"))), PathBuf::from("/a/m"));
        assert_eq!(resolve_dir("m", None, None), PathBuf::from("m"));
    }
}
