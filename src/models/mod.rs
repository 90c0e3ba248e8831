//! Local models (the `models` feature): sentence embeddings for the embedding verifiers
//! (`similarity`, `covers`, `best_match`) and causal language models for local logprob judges,
//! on candle, on the CPU or (with the `cuda` feature) an NVIDIA GPU.
//!
//! Pipeline position: called by `stdlib` (embedding intrinsics) and `judge` (local judges);
//! configured once per process by the CLI (`--device`, `--embedding-model`) through
//! [`configure`]. Models are directories of safetensors weights, `config.json` and
//! `tokenizer.json`, named by the run configuration and never downloaded at run time.

pub mod bert;
pub mod causal;
pub mod chat;
pub mod embed;
pub mod local_judge;
pub mod random;

use std::path::PathBuf;
use std::sync::OnceLock;

/// Why a model could not be used. Reported as a trap (`rubric::trap::model`) or an unscored
/// verdict (`judge_local_model`), never a panic.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    #[error("{0}")]
    Config(String),
    #[error("{path}: {message}")]
    Load { path: String, message: String },
    #[error("model: {0}")]
    Run(String),
    /// The caller's poll said stop (a row over its limits).
    #[error("model: stopped by the row's limits")]
    Stopped,
}

impl From<candle_core::Error> for ModelError {
    fn from(e: candle_core::Error) -> ModelError {
        ModelError::Run(e.to_string())
    }
}

/// Where tensors live: `--device cpu|cuda|cuda:N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceSpec {
    #[default]
    Cpu,
    Cuda(usize),
}

impl std::str::FromStr for DeviceSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<DeviceSpec, String> {
        match s {
            "cpu" => Ok(DeviceSpec::Cpu),
            "cuda" => Ok(DeviceSpec::Cuda(0)),
            _ => match s.strip_prefix("cuda:").map(str::parse::<usize>) {
                Some(Ok(n)) => Ok(DeviceSpec::Cuda(n)),
                _ => Err(format!("unknown device `{s}`: expected cpu, cuda or cuda:N")),
            },
        }
    }
}

impl std::fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceSpec::Cpu => f.write_str("cpu"),
            DeviceSpec::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

impl DeviceSpec {
    /// The candle device. A CUDA device in a build without the `cuda` feature is an error; a
    /// CUDA build on a machine without a GPU reports candle's error (`CUDA_ERROR_NO_DEVICE`).
    pub fn open(self) -> Result<candle_core::Device, ModelError> {
        match self {
            DeviceSpec::Cpu => Ok(candle_core::Device::Cpu),
            DeviceSpec::Cuda(n) => {
                if !cfg!(feature = "cuda") {
                    return Err(ModelError::Config(format!(
                        "device `cuda:{n}` needs a build with the `cuda` feature (scripts/build-cuda.sh)"
                    )));
                }
                // candle's CUDA errors carry a backtrace after the message: keep the message
                candle_core::Device::new_cuda(n).map_err(|e| {
                    let e = e.to_string();
                    ModelError::Config(format!("device `cuda:{n}`: {}", e.lines().next().unwrap_or_default()))
                })
            }
        }
    }
}

/// The process's model settings, set once by the CLI before any row is scored.
#[derive(Debug, Clone, Default)]
pub struct ModelsConfig {
    pub device: DeviceSpec,
    /// The sentence-embedding model of `similarity`, `covers` and `best_match`.
    pub embedding: Option<PathBuf>,
}

static CONFIG: OnceLock<ModelsConfig> = OnceLock::new();

/// The directory name of the default embedding model.
pub const DEFAULT_EMBEDDING: &str = "all-MiniLM-L6-v2";

/// Where the default embedding model is looked for when neither `--embedding-model` nor
/// `RUBRIC_EMBEDDING_MODEL` names one, in order: `models/` beside the directory of the running
/// binary (`target/models/` for `target/debug/rubric`, where `scripts/fetch-models.sh` puts
/// it), then the user's data directory (`$XDG_DATA_HOME/rubric/models/`, else
/// `~/.local/share/rubric/models/`, where `scripts/fetch-models.sh --user` puts it).
pub fn embedding_search_path() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(bin_dir) = std::env::current_exe().ok().and_then(|e| e.parent().map(PathBuf::from)) {
        if let Some(up) = bin_dir.parent() {
            dirs.push(up.join("models").join(DEFAULT_EMBEDDING));
        }
    }
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")));
    if let Some(data) = data {
        dirs.push(data.join("rubric/models").join(DEFAULT_EMBEDDING));
    }
    dirs
}

/// The first directory of [`embedding_search_path`] that holds a model.
pub fn default_embedding() -> Option<PathBuf> {
    embedding_search_path().into_iter().find(|d| d.join("config.json").is_file())
}

/// The embedding model when no `--embedding-model` names one: `RUBRIC_EMBEDDING_MODEL`, else
/// [`default_embedding`].
pub fn env_embedding() -> Option<PathBuf> {
    std::env::var_os("RUBRIC_EMBEDDING_MODEL").map(PathBuf::from).or_else(default_embedding)
}

/// Set the process's model settings; the first call wins (later calls return `false`).
pub fn configure(config: ModelsConfig) -> bool {
    CONFIG.set(config).is_ok()
}

/// The process's model settings: those given to [`configure`], else the environment
/// (`RUBRIC_DEVICE`, `RUBRIC_EMBEDDING_MODEL`), else the CPU and the default embedding model
/// where [`default_embedding`] finds it.
/// Reading the settings does not fix them: a later [`configure`] still wins (models already
/// loaded stay loaded).
pub fn config() -> &'static ModelsConfig {
    static FROM_ENV: OnceLock<ModelsConfig> = OnceLock::new();
    CONFIG.get().unwrap_or_else(|| {
        FROM_ENV.get_or_init(|| ModelsConfig {
            device: std::env::var("RUBRIC_DEVICE").ok().and_then(|d| d.parse().ok()).unwrap_or_default(),
            embedding: env_embedding(),
        })
    })
}

/// The configured device, opened once. CUDA that cannot be opened falls back to the CPU with
/// a message on stderr (the results are the same; only the speed differs).
pub fn device() -> &'static candle_core::Device {
    static DEVICE: OnceLock<candle_core::Device> = OnceLock::new();
    DEVICE.get_or_init(|| {
        let spec = config().device;
        spec.open().unwrap_or_else(|e| {
            eprintln!("warning: {e}; using the CPU");
            candle_core::Device::Cpu
        })
    })
}

/// The devices this build and machine offer, one line each: the CPU, then every CUDA device
/// that opens (a build without the `cuda` feature, or a machine without a driver or a GPU,
/// says so). `rubric devices`; scripts/gpu-check.sh reads the exit status.
pub fn describe_devices() -> (Vec<String>, usize) {
    let mut lines = vec!["cpu".to_string()];
    let mut cuda = 0;
    if !cfg!(feature = "cuda") {
        lines.push("cuda: not in this build (the `cuda` feature; scripts/build-cuda.sh)".into());
        return (lines, 0);
    }
    for n in 0..64 {
        match DeviceSpec::Cuda(n).open() {
            Ok(_) => {
                lines.push(format!("cuda:{n}"));
                cuda += 1;
            }
            Err(e) => {
                if n == 0 {
                    lines.push(format!("cuda: no device ({e})"));
                }
                break;
            }
        }
    }
    (lines, cuda)
}
