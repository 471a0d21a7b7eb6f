//! Streamable HTTP: the SDK's tower service behind a bearer-token check, served by hyper on
//! a TCP listener.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::ToolServer;
use super::handler::Connection;
use crate::McpError;

/// The path MCP is served on.
pub const MCP_PATH: &str = "/mcp";

/// The secret every HTTP request must carry as `Authorization: Bearer <token>`. Its
/// `Debug` never shows it.
#[derive(Clone)]
pub struct BearerToken(Arc<str>);

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(..)")
    }
}

impl BearerToken {
    /// A token; refused when empty, when it has whitespace or control characters (it could
    /// not be sent in a header as given).
    pub fn new(token: impl Into<String>) -> Result<Self, McpError> {
        let token = token.into();
        if token.is_empty() {
            return Err(McpError::Serve(
                "the bearer token is empty: an HTTP server needs one".into(),
            ));
        }
        if token
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || !c.is_ascii())
        {
            return Err(McpError::Serve(
                "the bearer token may hold only visible ASCII characters".into(),
            ));
        }
        Ok(Self(token.into()))
    }

    /// Whether an `Authorization` header value carries this token, compared in constant
    /// time (for a given length).
    pub fn admits(&self, authorization: Option<&[u8]>) -> bool {
        let Some(value) = authorization else {
            return false;
        };
        let Some(given) = strip_bearer(value) else {
            return false;
        };
        constant_time_eq(given, self.0.as_bytes())
    }
}

/// The credentials after `Bearer ` (the scheme is case-insensitive).
fn strip_bearer(value: &[u8]) -> Option<&[u8]> {
    let scheme = value.get(..7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    value.get(7..)
}

/// `a == b`, taking the same time whatever bytes differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

type Body = BoxBody<Bytes, Infallible>;

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// A running HTTP server; dropping it does not stop it ([`HttpServer::shutdown`] does).
#[derive(Debug)]
pub struct HttpServer {
    addr: SocketAddr,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl HttpServer {
    /// The address it listens on (with the port the system chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The endpoint's URL: `http://<addr>/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}{MCP_PATH}", self.addr)
    }

    /// Stops accepting connections and ends the sessions.
    pub fn shutdown(&self) {
        self.stop.cancel();
    }

    /// Waits until it stops.
    pub async fn wait(self) {
        let _ = self.task.await;
    }
}

impl ToolServer {
    /// Listens on `addr` and serves streamable HTTP at `/mcp`, each request checked for
    /// `Authorization: Bearer <token>` (401 without it, before anything else is read).
    /// Host headers are checked against loopback names and `addr`'s own address (DNS
    /// rebinding), unless `addr` is a wildcard address.
    pub async fn serve_http(
        &self,
        addr: SocketAddr,
        token: BearerToken,
    ) -> Result<HttpServer, McpError> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|err| McpError::Serve(format!("cannot listen on {addr}: {err}")))?;
        let addr = listener
            .local_addr()
            .map_err(|err| McpError::Serve(format!("cannot listen on {addr}: {err}")))?;
        let stop = CancellationToken::new();
        let mut config = StreamableHttpServerConfig::default()
            .with_cancellation_token(stop.child_token())
            .with_sse_keep_alive(Some(std::time::Duration::from_secs(15)));
        if addr.ip().is_unspecified() {
            config = config.disable_allowed_hosts();
        } else {
            let mut hosts = vec![
                "localhost".to_owned(),
                "127.0.0.1".to_owned(),
                "::1".to_owned(),
            ];
            hosts.push(addr.ip().to_string());
            config = config.with_allowed_hosts(hosts);
        }
        let server = self.clone();
        let service: StreamableHttpService<Connection, LocalSessionManager> =
            StreamableHttpService::new(
                move || Ok(server.connection()),
                Arc::new(LocalSessionManager::default()),
                config,
            );
        let task = tokio::spawn(accept_loop(listener, service, token, stop.clone()));
        tracing::info!(%addr, "MCP server listening");
        Ok(HttpServer { addr, stop, task })
    }
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    service: StreamableHttpService<Connection, LocalSessionManager>,
    token: BearerToken,
    stop: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(pair) => pair,
            Err(err) => {
                tracing::warn!("accept failed: {err}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let service = service.clone();
        let token = token.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let handler = hyper::service::service_fn(move |request: Request<Incoming>| {
                let service = service.clone();
                let token = token.clone();
                async move { Ok::<_, Infallible>(respond(&service, &token, request).await) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), handler);
            tokio::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(err) = result {
                        tracing::debug!(%peer, "HTTP connection ended: {err}");
                    }
                }
                () = stop.cancelled() => connection.as_mut().graceful_shutdown(),
            }
        });
    }
}

async fn respond(
    service: &StreamableHttpService<Connection, LocalSessionManager>,
    token: &BearerToken,
    request: Request<Incoming>,
) -> Response<Body> {
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(header::HeaderValue::as_bytes);
    if !token.admits(authorization) {
        let mut response = plain(StatusCode::UNAUTHORIZED, "a bearer token is required\n");
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
        return response;
    }
    if request.uri().path() != MCP_PATH {
        return plain(StatusCode::NOT_FOUND, "MCP is served at /mcp\n");
    }
    service.handle(request).await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn only_the_exact_token_is_admitted() {
        let token = BearerToken::new("s3cret-token").unwrap();
        assert!(token.admits(Some(b"Bearer s3cret-token")));
        assert!(token.admits(Some(b"bearer s3cret-token")));
        assert!(!token.admits(None));
        assert!(!token.admits(Some(b"Bearer s3cret-toke")));
        assert!(!token.admits(Some(b"Bearer s3cret-tokenX")));
        assert!(!token.admits(Some(b"Basic s3cret-token")));
        assert!(!token.admits(Some(b"s3cret-token")));
        assert!(!token.admits(Some(b"Bearer")));
        assert!(BearerToken::new("").is_err());
        assert!(BearerToken::new("a b").is_err());
        assert_eq!(format!("{token:?}"), "BearerToken(..)");
    }
}
