//! The admin HTTP listener (axum over hyper): `/metrics` (Prometheus),
//! `/cache/<key>` (the REST cache API), `/cluster` and `/stats` (JSON) and `/`
//! (the status page, one self-contained HTML file).
//!
//! Started by `proxy::run_with` when `[admin] listen` is set (or under
//! `shardis up`); the bound address is logged and shown by `CLUSTER RINGINFO`
//! as `admin_listen:`. Never blocks the RESP path: handlers read snapshots
//! and atomics and send through the shared upstream connections.

mod cache;
mod exposition;
mod families;
mod json;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;

use crate::proxy::Proxy;

pub(crate) use exposition::{node_keys, Scrape};

/// The status page: inline CSS, JS and SVG, no external assets.
const STATUS_PAGE: &str = include_str!("status.html");

/// The routes, over one proxy.
pub(crate) fn router(proxy: Arc<Proxy>) -> Router {
    // One byte over the limit is enough to know it is over; the handler
    // answers 413 with the limit, axum answers 413 for anything larger.
    let body_limit = proxy.config().limits.max_bulk_len.saturating_add(1);
    Router::new()
        .route("/", get(|| async { Html(STATUS_PAGE) }))
        .route("/metrics", get(metrics))
        .route("/cluster", get(json::cluster))
        .route("/stats", get(json::stats))
        .route(
            "/cache/{*key}",
            get(cache::get).put(cache::put).delete(cache::delete),
        )
        // No key at all: the handlers answer 400 rather than the router 404.
        .route(
            "/cache/",
            get(cache::get).put(cache::put).delete(cache::delete),
        )
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(axum::middleware::from_fn_with_state(proxy.clone(), guard))
        .with_state(proxy)
}

/// Binds `listen` and serves until `shutdown` completes; returns the bound
/// address once listening.
pub(crate) async fn start(
    proxy: Arc<Proxy>,
    listen: &str,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<SocketAddr, String> {
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|e| format!("admin.listen: cannot listen on {listen}: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let _ = proxy.ops.admin_addr.set(addr);
    tracing::info!(admin = %addr, "admin HTTP listening (/metrics, /cache/<key>, /cluster, /)");
    let app = router(proxy);
    tokio::spawn(async move {
        let app = app.into_make_service_with_connect_info::<SocketAddr>();
        if let Err(e) = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
        {
            tracing::warn!(error = %e, "admin HTTP listener stopped");
        }
    });
    Ok(addr)
}

/// Asks for the users' credentials where the API reveals or changes values
/// (see `conn::auth::http`).
async fn guard(
    State(p): State<Arc<Proxy>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    use crate::proxy::conn::auth::http::{check, is_guarded, Refused};
    if !is_guarded(req.uri().path()) {
        return next.run(req).await;
    }
    let writes =
        req.method() != axum::http::Method::GET && req.method() != axum::http::Method::HEAD;
    let h = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    let peer = req
        .extensions()
        .get::<axum::extract::ConnectInfo<SocketAddr>>();
    match check(&p.auth, h, writes, peer.map(|c| c.0.ip())) {
        Ok(()) => next.run(req).await,
        Err(Refused::Unauthorized(why)) => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Basic realm=\"shardis\"")],
            why,
        )
            .into_response(),
        Err(Refused::Forbidden(why)) => (StatusCode::FORBIDDEN, why).into_response(),
        Err(Refused::TooMany) => (
            StatusCode::TOO_MANY_REQUESTS,
            "too many failed authentication attempts from this address; retry later\n",
        )
            .into_response(),
    }
}

async fn metrics(State(p): State<Arc<Proxy>>) -> Response {
    let keys = node_keys(&p).await;
    match Scrape::read(&p, keys).encode() {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
            )],
            text,
        )
            .into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "encoding failed\n").into_response(),
    }
}
