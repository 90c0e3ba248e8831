//! The reward server's counters (`GET /metrics`): responses by status, rows scored, requests in
//! flight, connections (open, accepted, refused over a limit, closed by a timeout, closed to make
//! room), and latency percentiles of `POST /v1/score` over the most recent requests.

use serde_json::{json, Map, Value as Json};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Latencies kept for the percentiles: the most recent this many scoring requests.
const WINDOW: usize = 10_000;

#[derive(Default)]
pub struct Metrics {
    by_status: Mutex<BTreeMap<u16, u64>>,
    rows: AtomicU64,
    in_flight: AtomicU64,
    conns_open: AtomicU64,
    conns_accepted: AtomicU64,
    conns_refused: AtomicU64,
    conns_timed_out: AtomicU64,
    conns_evicted: AtomicU64,
    /// A ring of the latest scoring latencies in milliseconds, and the next slot to write.
    latencies: Mutex<(Vec<f64>, usize)>,
}

impl Metrics {
    pub fn enter(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
    }

    pub fn leave(&self) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn connection_accepted(&self) {
        self.conns_accepted.fetch_add(1, Ordering::Relaxed);
    }

    pub fn connection_refused(&self) {
        self.conns_refused.fetch_add(1, Ordering::Relaxed);
    }

    pub fn connection_opened(&self) {
        self.conns_open.fetch_add(1, Ordering::Relaxed);
    }

    pub fn connection_closed(&self) {
        self.conns_open.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn connection_timed_out(&self) {
        self.conns_timed_out.fetch_add(1, Ordering::Relaxed);
    }

    pub fn connection_evicted(&self) {
        self.conns_evicted.fetch_add(1, Ordering::Relaxed);
    }

    pub fn add_rows(&self, n: usize) {
        self.rows.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Count a response; `latency` for a scoring request.
    pub fn record(&self, status: u16, latency: Option<Duration>) {
        if let Ok(mut m) = self.by_status.lock() {
            *m.entry(status).or_default() += 1;
        }
        if let (Some(l), Ok(mut ring)) = (latency, self.latencies.lock()) {
            let ms = l.as_secs_f64() * 1000.0;
            let (xs, next) = &mut *ring;
            if xs.len() < WINDOW {
                xs.push(ms);
            } else {
                xs[*next] = ms;
            }
            *next = (*next + 1) % WINDOW;
        }
    }

    pub fn to_json(&self, judges: Option<Json>) -> Json {
        let by_status: Map<String, Json> = self
            .by_status
            .lock()
            .map(|m| m.iter().map(|(k, v)| (k.to_string(), json!(v))).collect())
            .unwrap_or_default();
        let total: u64 = by_status.values().filter_map(Json::as_u64).sum();
        let mut xs: Vec<f64> = self.latencies.lock().map(|r| r.0.clone()).unwrap_or_default();
        xs.sort_by(f64::total_cmp);
        json!({
            "requests": total,
            "requests_by_status": by_status,
            "rows_scored": self.rows.load(Ordering::Relaxed),
            "in_flight": self.in_flight.load(Ordering::Relaxed),
            "connections": {
                "open": self.conns_open.load(Ordering::Relaxed),
                "accepted": self.conns_accepted.load(Ordering::Relaxed),
                "refused": self.conns_refused.load(Ordering::Relaxed),
                "timed_out": self.conns_timed_out.load(Ordering::Relaxed),
                "evicted": self.conns_evicted.load(Ordering::Relaxed),
            },
            "score_latency_ms": {
                "n": xs.len(),
                "p50": percentile(&xs, 0.50),
                "p90": percentile(&xs, 0.90),
                "p99": percentile(&xs, 0.99),
                "max": xs.last(),
            },
            "judges": judges,
        })
    }
}

/// The nearest-rank percentile of sorted values; `None` when there are none.
fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let xs: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&xs, 0.5), Some(50.0));
        assert_eq!(percentile(&xs, 0.99), Some(99.0));
        assert_eq!(percentile(&[7.0], 0.9), Some(7.0));
        assert_eq!(percentile(&[], 0.5), None);
    }

    #[test]
    fn the_latency_window_keeps_the_latest() {
        let m = Metrics::default();
        for i in 0..(WINDOW + 5) {
            m.record(200, Some(Duration::from_millis(i as u64)));
        }
        let j = m.to_json(None);
        assert_eq!(j["requests"], json!(WINDOW + 5));
        assert_eq!(j["score_latency_ms"]["n"], json!(WINDOW));
        assert_eq!(j["score_latency_ms"]["max"], json!((WINDOW + 4) as f64));
    }
}
