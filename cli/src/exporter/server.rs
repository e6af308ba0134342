//! The exporter's HTTP side (axum): `GET /metrics` (OpenMetrics text) and `GET /` (a link
//! to it). Nothing else is served: other paths are 404, other methods 405, and no request
//! changes anything.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use super::metrics::CONTENT_TYPE;
use super::Exporter;

/// Why the listening socket could not be opened.
#[derive(Debug)]
pub enum ListenError {
    /// Another process listens there (exit code 5).
    InUse(SocketAddr),
    /// The address is not one of this host's (exit code 2).
    NotLocal(SocketAddr),
    /// A port below 1024 without CAP_NET_BIND_SERVICE (exit code 3).
    Denied(SocketAddr),
    /// Anything else (exit code 1).
    Other(SocketAddr, std::io::Error),
}

impl std::fmt::Display for ListenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListenError::InUse(a) => write!(
                f,
                "--listen {a}: the address is already in use (another exporter?); \
                 choose a free port, e.g. --listen {}:{}",
                host(a),
                a.port().wrapping_add(1).max(1)
            ),
            ListenError::NotLocal(a) => write!(
                f,
                "--listen {a}: not an address of this host; use one of its addresses, \
                 127.0.0.1 (local scrapes only) or 0.0.0.0 (every interface)"
            ),
            ListenError::Denied(a) => write!(
                f,
                "--listen {a}: binding a port below 1024 is not permitted; use a port \
                 from 1024 to 65535 (default 9977) or grant CAP_NET_BIND_SERVICE"
            ),
            ListenError::Other(a, e) => write!(f, "--listen {a}: {e}"),
        }
    }
}

impl std::error::Error for ListenError {}

fn host(a: &SocketAddr) -> String {
    match a {
        SocketAddr::V4(v4) => v4.ip().to_string(),
        SocketAddr::V6(v6) => format!("[{}]", v6.ip()),
    }
}

/// Opens the listening socket on `addr` (before anything else is set up, so that a busy
/// port is reported before BPF programs are loaded).
pub fn bind(addr: SocketAddr) -> Result<std::net::TcpListener, ListenError> {
    std::net::TcpListener::bind(addr).map_err(|e| match e.kind() {
        std::io::ErrorKind::AddrInUse => ListenError::InUse(addr),
        std::io::ErrorKind::AddrNotAvailable => ListenError::NotLocal(addr),
        std::io::ErrorKind::PermissionDenied => ListenError::Denied(addr),
        _ => ListenError::Other(addr, e),
    })
}

const INDEX: &str = "<!doctype html><html><head><title>cctl exporter</title></head><body>\
<h1>cctl exporter</h1><p>TCP congestion-control metrics: <a href=\"/metrics\">/metrics</a></p>\
</body></html>\n";

/// The routes: `GET /metrics`, `GET /`; 404 elsewhere, 405 for other methods (HEAD is
/// answered like GET without a body).
pub fn router(exporter: Arc<Exporter>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/", get(|| async { Html(INDEX) }))
        .fallback(|| async {
            (
                StatusCode::NOT_FOUND,
                "not found: the exporter serves GET /metrics\n",
            )
        })
        .with_state(exporter)
}

async fn metrics(axum::extract::State(exporter): axum::extract::State<Arc<Exporter>>) -> Response {
    match tokio::task::spawn_blocking(move || exporter.render()).await {
        Ok(body) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("collecting metrics failed: {e}\n"),
        )
            .into_response(),
    }
}

/// Most connections served at once; further ones wait in the listen backlog until a slot
/// frees (a slow client holds one for at most [`HEADER_TIMEOUT`]).
pub const MAX_CONNECTIONS: usize = 64;
/// Time a client has to send a request's headers (from the connection, or the previous
/// response on a kept-alive one); a slower client is disconnected.
pub const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// Most bytes a request's line and headers may take (hyper's read buffer; its minimum is
/// 8 KiB); a larger request gets `431` and is disconnected.
pub const MAX_REQUEST_BYTES: usize = 16 * 1024;
/// Time the requests under way get to finish after `shutdown`.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(5);

/// Serves `router` on `listener` until `shutdown` completes, then lets the requests under
/// way finish (for at most 5 s). A network server's limits hold: at most
/// [`MAX_CONNECTIONS`] connections at once, [`HEADER_TIMEOUT`] to send the headers, and
/// [`MAX_REQUEST_BYTES`] of them, so that slow or oversized clients cannot keep
/// `/metrics` from answering.
pub async fn serve(
    listener: std::net::TcpListener,
    exporter: Arc<Exporter>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use hyper_util::service::TowerToHyperService;

    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let app = router(exporter);
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        // A slot first: over the limit, new connections wait in the backlog.
        let permit = tokio::select! {
            _ = &mut shutdown => break,
            p = slots.clone().acquire_owned() => p.expect("the semaphore is never closed"),
        };
        let stream = tokio::select! {
            _ = &mut shutdown => break,
            a = listener.accept() => match a {
                Ok((stream, _)) => stream,
                // Out of descriptors or a connection reset before accept: try again.
                Err(_) => {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let service = TowerToHyperService::new(app.clone());
        let mut stop = stop_rx.clone();
        connections.spawn(async move {
            let _permit = permit;
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(MAX_REQUEST_BYTES)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = stop.changed() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
        while connections.try_join_next().is_some() {}
    }
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(DRAIN, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// A raw HTTP/1.1 request to `addr`; returns the status line and the body.
    fn request(addr: SocketAddr, method: &str, path: &str) -> (String, String) {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        let status = out.lines().next().unwrap_or("").to_string();
        let body = out.split_once("\r\n\r\n").map_or("", |x| x.1).to_string();
        (status, body)
    }

    /// The exporter served on a loopback port by a runtime of `threads` workers.
    struct Served {
        rt: tokio::runtime::Runtime,
        tx: tokio::sync::oneshot::Sender<()>,
        task: tokio::task::JoinHandle<std::io::Result<()>>,
    }

    impl Served {
        fn start(threads: usize) -> (SocketAddr, Served) {
            let listener = bind("127.0.0.1:0".parse().unwrap()).unwrap();
            let addr = listener.local_addr().unwrap();
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(threads)
                .enable_all()
                .build()
                .unwrap();
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            let exporter = Arc::new(Exporter::new(Default::default()));
            let task = rt.spawn(serve(listener, exporter, async {
                let _ = rx.await;
            }));
            (addr, Served { rt, tx, task })
        }

        /// Shuts the server down and checks that it ended cleanly.
        fn stop(self) {
            let _ = self.tx.send(());
            self.rt.block_on(self.task).unwrap().unwrap();
        }
    }

    #[test]
    fn only_get_metrics_and_the_index_are_served() {
        let (addr, server) = Served::start(1);
        let (status, body) = request(addr, "GET", "/");
        assert!(status.contains(" 200 "), "{status}");
        assert!(body.contains("href=\"/metrics\""), "{body}");
        for (method, path, code) in [
            ("POST", "/metrics", " 405 "),
            ("PUT", "/metrics", " 405 "),
            ("DELETE", "/metrics", " 405 "),
            ("POST", "/", " 405 "),
            ("GET", "/debug", " 404 "),
            ("GET", "/metrics/x", " 404 "),
            ("POST", "/-/reload", " 404 "),
        ] {
            let (status, _) = request(addr, method, path);
            assert!(status.contains(code), "{method} {path}: {status}");
        }
        server.stop();
    }

    #[test]
    fn slow_and_oversized_clients_do_not_keep_metrics_from_answering() {
        use std::time::Instant;
        let (addr, server) = Served::start(2);
        // Every slot taken by a client that sends half a request and stalls, and more of
        // them waiting in the backlog.
        let extra = 8;
        let slow: Vec<std::net::TcpStream> = (0..MAX_CONNECTIONS + extra)
            .map(|_| {
                let mut s = std::net::TcpStream::connect(addr).unwrap();
                s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                    .unwrap();
                s
            })
            .collect();
        // Clients whose headers are far above the limit.
        let big: Vec<std::thread::JoinHandle<String>> = (0..4)
            .map(|_| {
                std::thread::spawn(move || {
                    let mut s = std::net::TcpStream::connect(addr).unwrap();
                    let header = "a".repeat(8 * MAX_REQUEST_BYTES);
                    let _ = write!(
                        s,
                        "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: {header}\r\n\r\n"
                    );
                    let mut out = String::new();
                    let _ = s.read_to_string(&mut out);
                    out.lines().next().unwrap_or("").to_string()
                })
            })
            .collect();
        let t = Instant::now();
        let (status, body) = request(addr, "GET", "/metrics");
        let waited = t.elapsed();
        println!(
            "/metrics answered after {:.2} s with {} slow clients and 4 of {} KiB",
            waited.as_secs_f64(),
            MAX_CONNECTIONS + extra,
            8 * MAX_REQUEST_BYTES / 1024
        );
        assert!(status.contains(" 200 "), "{status}");
        assert!(body.contains("# EOF"), "an OpenMetrics body: {body}");
        assert!(
            waited < HEADER_TIMEOUT * 2,
            "the slow clients are cut after {HEADER_TIMEOUT:?}: waited {waited:?}"
        );
        for h in big {
            let status = h.join().unwrap();
            assert!(
                status.is_empty() || status.contains(" 431 "),
                "an oversized request is refused: {status}"
            );
        }
        // The first slow clients were disconnected by the header timeout.
        let mut cut = 0;
        for mut s in slow.into_iter().take(MAX_CONNECTIONS) {
            s.set_read_timeout(Some(std::time::Duration::from_secs(1)))
                .unwrap();
            // Closed by the server: the read reaches the end (a 408 at most before it).
            let mut rest = Vec::new();
            cut += usize::from(s.read_to_end(&mut rest).is_ok());
        }
        println!("{cut} of the first {MAX_CONNECTIONS} slow clients were disconnected");
        assert!(
            cut >= MAX_CONNECTIONS / 2,
            "slow clients disconnected: {cut}"
        );
        server.stop();
    }

    #[test]
    fn a_busy_port_is_named_as_in_use() {
        let first = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = first.local_addr().unwrap();
        let e = bind(addr).unwrap_err();
        assert!(matches!(e, ListenError::InUse(_)));
        assert!(e.to_string().contains("already in use"), "{e}");
    }
}
