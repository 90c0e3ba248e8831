//! The reward server's limits on what clients may hold: the `rubric serve` flags (`LimitArgs`)
//! and their defaults, checked into `Limits`; and `Bounded`, the request body that stops at
//! `--max-body-bytes` or at `--body-timeout-s`, whichever comes first, without reading further.

use axum::body::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// The file-descriptor limit assumed where `/proc/self/limits` cannot be read (the usual soft
/// `RLIMIT_NOFILE`).
const ASSUMED_NOFILE: u64 = 1024;

/// The connection limits of `rubric serve`, as flags. Every one has a default, so that a
/// server started with none of them cannot be starved by idle or slow clients.
#[derive(Debug, Clone, clap::Args)]
pub struct LimitArgs {
    /// A connection that has not sent complete request headers this long after it opened is
    /// closed (one that sends nothing included).
    #[arg(long, value_name = "S", default_value_t = 10.0)]
    pub header_timeout_s: f64,
    /// A request whose body has not arrived in full this long after its headers gets 408.
    #[arg(long, value_name = "S", default_value_t = 60.0)]
    pub body_timeout_s: f64,
    /// A kept-alive connection is closed when the next request's headers are not complete
    /// this long after the last response.
    #[arg(long, value_name = "S", default_value_t = 30.0)]
    pub keep_alive_s: f64,
    /// Connections open at once. At the limit, a new connection closes the one that has waited
    /// longest for a request; when every one is in a request, it gets 503 and is closed at
    /// once. Default: half the soft file-descriptor limit (`ulimit -n`; 512 of the usual
    /// 1024), between 16 and 4096.
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// Connections open at once from one client IP address; one over the limit gets 503 and is
    /// closed at once. Default: a quarter of `--max-connections` (128 of 512).
    #[arg(long, value_name = "N")]
    pub max_connections_per_client: Option<usize>,
}

/// The checked limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub header_timeout: Duration,
    pub body_timeout: Duration,
    pub keep_alive: Duration,
    pub max_connections: usize,
    pub max_connections_per_client: usize,
}

fn seconds(flag: &str, s: f64) -> Result<Duration, String> {
    if s > 0.0 && s.is_finite() && s <= 1e9 {
        Ok(Duration::from_secs_f64(s))
    } else {
        Err(format!("`--{flag}` must be a positive number of seconds"))
    }
}

impl LimitArgs {
    /// The limits these flags give, with the defaults filled in from the file-descriptor limit.
    pub fn resolve(&self) -> Result<Limits, String> {
        let max_connections = match self.max_connections {
            Some(0) => return Err("`--max-connections` must be at least 1".into()),
            Some(n) => n,
            None => default_max_connections(nofile_limit()),
        };
        let max_connections_per_client = match self.max_connections_per_client {
            Some(0) => return Err("`--max-connections-per-client` must be at least 1".into()),
            Some(n) => n.min(max_connections),
            None => (max_connections / 4).max(1),
        };
        Ok(Limits {
            header_timeout: seconds("header-timeout-s", self.header_timeout_s)?,
            body_timeout: seconds("body-timeout-s", self.body_timeout_s)?,
            keep_alive: seconds("keep-alive-s", self.keep_alive_s)?,
            max_connections,
            max_connections_per_client,
        })
    }
}

/// Half the file-descriptor limit, between 16 and 4096: the other half is left for the
/// listener, judge connections, the cache and whatever else the process opens.
pub fn default_max_connections(nofile: u64) -> usize {
    (nofile / 2).clamp(16, 4096) as usize
}

/// The soft `RLIMIT_NOFILE` of this process, read from `/proc/self/limits` (no `unsafe`
/// `getrlimit` call); [`ASSUMED_NOFILE`] where that file is missing or says `unlimited`.
pub fn nofile_limit() -> u64 {
    std::fs::read_to_string("/proc/self/limits").ok().and_then(|t| parse_nofile(&t)).unwrap_or(ASSUMED_NOFILE)
}

/// The soft limit from the `Max open files` line of a `/proc/PID/limits` text.
fn parse_nofile(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..].split_whitespace().next()?.parse().ok()
}

/// Why a request body was not read to its end.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BodyError {
    #[error("the body is larger than {0} bytes (`--max-body-bytes`)")]
    TooLarge(usize),
    #[error("the body did not arrive within {0:.1}s of the headers (`--body-timeout-s`)")]
    Timeout(f64),
    #[error("the body could not be read: {0}")]
    Read(String),
}

/// A request body that ends with [`BodyError::TooLarge`] as soon as a frame would pass `limit`
/// bytes, and with [`BodyError::Timeout`] when the body is not complete at its deadline; after
/// either, it reads nothing more.
pub struct Bounded<B> {
    inner: B,
    left: usize,
    limit: usize,
    timeout: Duration,
    deadline: Pin<Box<tokio::time::Sleep>>,
    failed: bool,
}

impl<B> Bounded<B> {
    /// `inner`, at most `limit` bytes of it, complete within `timeout` from now.
    pub fn new(inner: B, limit: usize, timeout: Duration) -> Bounded<B> {
        Bounded { inner, left: limit, limit, timeout, deadline: Box::pin(tokio::time::sleep(timeout)), failed: false }
    }
}

impl<B> Body for Bounded<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        if this.failed {
            return Poll::Ready(None);
        }
        let fail = |this: &mut Self, e: BodyError| {
            this.failed = true;
            Poll::Ready(Some(Err(e)))
        };
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    if data.len() > this.left {
                        let limit = this.limit;
                        return fail(this, BodyError::TooLarge(limit));
                    }
                    this.left -= data.len();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => fail(this, BodyError::Read(e.to_string())),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => {
                if this.deadline.as_mut().poll(cx).is_ready() {
                    let secs = this.timeout.as_secs_f64();
                    return fail(this, BodyError::Timeout(secs));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[test]
    fn defaults_follow_the_descriptor_limit() {
        assert_eq!(default_max_connections(1024), 512);
        assert_eq!(default_max_connections(20), 16);
        assert_eq!(default_max_connections(1 << 20), 4096);
        let text = "Limit                     Soft Limit           Hard Limit           Units\n\
                    Max cpu time              unlimited            unlimited            seconds\n\
                    Max open files            1024                 524288               files\n";
        assert_eq!(parse_nofile(text), Some(1024));
        assert_eq!(parse_nofile("Max open files            unlimited  unlimited  files\n"), None);
        let args = LimitArgs {
            header_timeout_s: 10.0,
            body_timeout_s: 60.0,
            keep_alive_s: 30.0,
            max_connections: Some(100),
            max_connections_per_client: None,
        };
        let l = args.resolve().unwrap();
        assert_eq!((l.max_connections, l.max_connections_per_client), (100, 25));
        let l = LimitArgs { max_connections_per_client: Some(500), ..args.clone() }.resolve().unwrap();
        assert_eq!(l.max_connections_per_client, 100, "never above the whole limit");
        assert!(LimitArgs { max_connections: Some(0), ..args.clone() }.resolve().is_err());
        assert!(LimitArgs { header_timeout_s: 0.0, ..args.clone() }.resolve().is_err());
        assert!(LimitArgs { keep_alive_s: f64::NAN, ..args }.resolve().is_err());
    }

    /// A body whose next frame never comes.
    struct Never;

    impl Body for Never {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Poll::Pending
        }
    }

    #[test]
    fn a_bounded_body_stops_at_its_limit_and_its_deadline() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        rt.block_on(async {
            let full = http_body_util::Full::new(Bytes::from(vec![b'x'; 100]));
            let got = Bounded::new(full, 100, Duration::from_secs(5)).collect().await.unwrap().to_bytes();
            assert_eq!(got.len(), 100);
            let full = http_body_util::Full::new(Bytes::from(vec![b'x'; 101]));
            let err = Bounded::new(full, 100, Duration::from_secs(5)).collect().await.err().unwrap();
            assert_eq!(err, BodyError::TooLarge(100));
            // A body that never ends.
            let err = Bounded::new(Never, 100, Duration::from_millis(20)).collect().await.err().unwrap();
            assert!(matches!(err, BodyError::Timeout(_)), "{err:?}");
        });
    }
}
