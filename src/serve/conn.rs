//! The reward server's accept loop: HTTP/1 connections served by hyper (the axum router as the
//! service), under limits that idle and slow clients cannot wear down. A connection over
//! `--max-connections-per-client` for its IP address gets a 503 written without waiting and is
//! closed at once, so it holds neither a slot nor a descriptor. At `--max-connections`, a new
//! connection takes the slot of the connection that has waited longest for a request (closing
//! it), or, when every connection is in a request, is refused the same way. A watchdog per
//! connection closes it when its request headers are not complete within `--header-timeout-s`
//! of opening, or the next request's within `--keep-alive-s` of the last response. On shutdown
//! the loop stops accepting, closes connections waiting for a request, lets those in a request
//! finish, and returns when all are closed.

use super::limits::Limits;
use super::metrics::Metrics;
use axum::Router;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// Open connections by client address, and the most one address may hold.
struct Clients {
    open: Mutex<HashMap<IpAddr, usize>>,
    max: usize,
}

/// One connection's place in [`Clients`], given back when dropped.
struct ClientSlot {
    clients: Arc<Clients>,
    ip: IpAddr,
}

impl Clients {
    fn take(self: &Arc<Self>, ip: IpAddr) -> Option<ClientSlot> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(ip).or_insert(0);
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(ClientSlot { clients: self.clone(), ip })
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut open = self.clients.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// What a connection is doing, as its watchdog sees it: requests whose response has not been
/// handed to the socket yet, and when there are none, since when it has waited for one and the
/// deadline for the next request's headers.
#[derive(Debug, Clone, Copy)]
struct Phase {
    busy: usize,
    idle_since: Instant,
    deadline: Instant,
}

/// How long a connection that took an idle connection's slot waits for that slot to be given
/// back before it is refused after all.
const EVICTION_WAIT: Duration = Duration::from_millis(500);

/// A connection as the [`Registry`] sees it: its phase, and how to ask it to close.
type Entry = (watch::Receiver<Phase>, Arc<Notify>);

/// The open connections, for choosing one to close when every slot is taken.
#[derive(Default)]
struct Registry {
    next: std::sync::atomic::AtomicU64,
    open: Mutex<HashMap<u64, Entry>>,
}

/// A connection's entry in the [`Registry`], removed when dropped.
struct Registered {
    registry: Arc<Registry>,
    id: u64,
    evict: Arc<Notify>,
}

impl Registry {
    fn register(self: &Arc<Self>, phase: watch::Receiver<Phase>) -> Registered {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let evict = Arc::new(Notify::new());
        self.open.lock().unwrap_or_else(|e| e.into_inner()).insert(id, (phase, evict.clone()));
        Registered { registry: self.clone(), id, evict }
    }

    /// Ask the connection that has waited longest for a request to close; `false` when every
    /// connection is in a request.
    fn evict_longest_idle(&self) -> bool {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let victim = open
            .iter()
            .filter_map(|(id, (phase, _))| {
                let p = *phase.borrow();
                (p.busy == 0).then_some((p.idle_since, *id))
            })
            .min();
        match victim.and_then(|(_, id)| open.remove(&id)) {
            Some((_, evict)) => {
                evict.notify_one();
                true
            }
            None => false,
        }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.registry.open.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.id);
    }
}

/// A response body that tells the watchdog when hyper is done with it: the connection is then
/// waiting for its next request.
struct Tracked<B> {
    inner: B,
    phase: Arc<watch::Sender<Phase>>,
    keep_alive: Duration,
}

impl<B> Drop for Tracked<B> {
    fn drop(&mut self) {
        let keep_alive = self.keep_alive;
        let now = Instant::now();
        self.phase.send_modify(|p| {
            p.busy = p.busy.saturating_sub(1);
            p.idle_since = now;
            p.deadline = now + keep_alive;
        });
    }
}

impl<B: Body + Unpin> Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Resolves when the connection has waited past its deadline with no request in hand.
async fn watchdog(mut phase: watch::Receiver<Phase>) {
    loop {
        let now = *phase.borrow_and_update();
        if now.busy > 0 {
            if phase.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
            continue;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(now.deadline) => {
                // Unless a request arrived at the last moment.
                if !phase.has_changed().unwrap_or(false) {
                    return;
                }
            }
            changed = phase.changed() => {
                if changed.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        }
    }
}

/// The 503 an over-limit connection gets, written once without waiting.
fn refusal(message: &str) -> Vec<u8> {
    let body = serde_json::json!({ "error": { "code": "rubric::serve::too_many_connections", "message": message } })
        .to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\nretry-after: 1\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Accept connections on `listener` and serve `router` on each until `shutdown` resolves, then
/// finish the requests in flight and return.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    metrics: &'static Metrics,
    shutdown: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let clients = Arc::new(Clients { open: Mutex::new(HashMap::new()), max: limits.max_connections_per_client });
    let registry = Arc::new(Registry::default());
    let (stop_tx, stop_rx) = watch::channel(false);
    let service = TowerToHyperService::new(router);
    let mut conns = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(_) => {
                    // Out of descriptors (or a connection reset before it was accepted): the
                    // limits keep this rare; wait a moment instead of spinning.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
            _ = &mut shutdown => break,
        };
        metrics.connection_accepted();
        let Some(slot) = clients.take(peer.ip().to_canonical()) else {
            refuse(
                &stream,
                metrics,
                &format!(
                    "this client address has {} connections open, its limit (`--max-connections-per-client`): \
                     reuse them, or close some",
                    limits.max_connections_per_client
                ),
            );
            continue;
        };
        let conn =
            Conn { service: service.clone(), limits, metrics, stop: stop_rx.clone(), registry: registry.clone() };
        match slots.clone().try_acquire_owned() {
            Ok(permit) => {
                conns.spawn(conn.serve(stream, permit, slot));
            }
            Err(_) if registry.evict_longest_idle() => {
                metrics.connection_evicted();
                let slots = slots.clone();
                conns.spawn(async move {
                    match tokio::time::timeout(EVICTION_WAIT, slots.acquire_owned()).await {
                        Ok(Ok(permit)) => conn.serve(stream, permit, slot).await,
                        _ => refuse(&stream, metrics, &full(limits)),
                    }
                });
            }
            Err(_) => refuse(&stream, metrics, &full(limits)),
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    while conns.join_next().await.is_some() {}
}

fn full(limits: Limits) -> String {
    format!(
        "the server has {} connections open, its limit (`--max-connections`), all in a request: try again later",
        limits.max_connections
    )
}

/// Write the 503 of an over-limit connection if the socket takes it now, and close it.
fn refuse(stream: &TcpStream, metrics: &Metrics, message: &str) {
    let _ = stream.try_write(&refusal(message));
    metrics.connection_refused();
}

/// What every connection shares.
struct Conn {
    service: TowerToHyperService<Router>,
    limits: Limits,
    metrics: &'static Metrics,
    stop: watch::Receiver<bool>,
    registry: Arc<Registry>,
}

impl Conn {
    /// Serve one connection until it closes, its watchdog fires, it is evicted while waiting for
    /// a request, or shutdown finds it waiting.
    async fn serve(self, stream: TcpStream, _permit: OwnedSemaphorePermit, _slot: ClientSlot) {
        let Conn { service, limits, metrics, mut stop, registry } = self;
        if *stop.borrow() {
            // Shutdown began while this connection waited for a slot: it would serve nothing.
            return;
        }
        metrics.connection_opened();
        let _ = stream.set_nodelay(true);
        let opened = Instant::now();
        let (phase_tx, phase_rx) =
            watch::channel(Phase { busy: 0, idle_since: opened, deadline: opened + limits.header_timeout });
        let phase_tx = Arc::new(phase_tx);
        let registered = registry.register(phase_rx.clone());
        let dog = watchdog(phase_rx.clone());
        tokio::pin!(dog);
        let keep_alive = limits.keep_alive;
        let tx = phase_tx.clone();
        let svc = service_fn(move |req: hyper::Request<Incoming>| {
            tx.send_modify(|p| p.busy += 1);
            let tracker = tx.clone();
            let answer = hyper::service::Service::call(&service, req);
            async move {
                let resp = answer.await?;
                Ok::<_, std::convert::Infallible>(resp.map(|inner| Tracked { inner, phase: tracker, keep_alive }))
            }
        });
        let conn = http1::Builder::new().keep_alive(true).serve_connection(TokioIo::new(stream), svc);
        tokio::pin!(conn);
        let mut stopping = false;
        loop {
            tokio::select! {
                _ = conn.as_mut() => break,
                _ = &mut dog => {
                    metrics.connection_timed_out();
                    break;
                }
                _ = registered.evict.notified() => {
                    // A request may have begun since this connection was chosen: it finishes.
                    if phase_rx.borrow().busy == 0 {
                        break;
                    }
                }
                changed = stop.changed(), if !stopping => {
                    stopping = true;
                    if changed.is_err() || phase_rx.borrow().busy == 0 {
                        // Waiting for a request that shutdown will not serve: close now.
                        break;
                    }
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
        metrics.connection_closed();
    }
}
