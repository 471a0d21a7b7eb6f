//! A loopback HTTP/1.1 server that misbehaves on purpose, for faults wiremock cannot
//! produce: a stream cut in the middle, or a server that stops sending.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;

/// How a scripted response ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The body is completed properly.
    Complete,
    /// The connection is closed mid-body, without the final chunk.
    Cut,
    /// Nothing more is sent, and the connection stays open.
    Hang,
    /// The last chunk is sent again and again, a few milliseconds apart, until the client
    /// goes: a trickle of keep-alive pings, or a body without end.
    RepeatLast,
}

/// One scripted response: status, body pieces sent as chunks, and how it ends.
#[derive(Debug, Clone)]
pub struct RawResponse {
    /// The HTTP status.
    pub status: u16,
    /// Body pieces, each sent as one chunk.
    pub chunks: Vec<Vec<u8>>,
    /// How it ends.
    pub ending: Ending,
}

impl RawResponse {
    /// A `200 text/event-stream` with these chunks.
    pub fn sse(chunks: Vec<Vec<u8>>, ending: Ending) -> Self {
        Self {
            status: 200,
            chunks,
            ending,
        }
    }
}

/// The server. Each connection gets the next scripted response; once the script is used up,
/// the last response repeats.
pub struct RawHttpServer {
    addr: std::net::SocketAddr,
    requests: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl RawHttpServer {
    /// Starts serving `script` on 127.0.0.1.
    pub async fn start(script: Vec<RawResponse>) -> Self {
        assert!(
            !script.is_empty(),
            "a raw server needs at least one response"
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicUsize::new(0));
        let script = Arc::new(Mutex::new(script.into_iter().collect::<Vec<_>>()));
        let counter = requests.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                let n = counter.fetch_add(1, Ordering::SeqCst);
                let response = {
                    let script = script.lock().await;
                    script[n.min(script.len() - 1)].clone()
                };
                tokio::spawn(serve(socket, response));
            }
        });
        Self {
            addr,
            requests,
            task,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// How many connections were answered.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for RawHttpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn read_request(socket: &mut TcpStream) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let header_end = loop {
        let n = socket.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < header_end + length {
        let n = socket.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn serve(mut socket: TcpStream, response: RawResponse) {
    read_request(&mut socket).await;
    let head = format!(
        "HTTP/1.1 {} X\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
        response.status
    );
    if socket.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    for chunk in &response.chunks {
        if send_chunk(&mut socket, chunk).await.is_err() {
            return;
        }
    }
    match response.ending {
        Ending::Complete => {
            let _ = socket.write_all(b"0\r\n\r\n").await;
            let _ = socket.shutdown().await;
        }
        Ending::Cut => {
            let _ = socket.shutdown().await;
        }
        Ending::Hang => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        Ending::RepeatLast => {
            let Some(last) = response.chunks.last() else {
                return;
            };
            while send_chunk(&mut socket, last).await.is_ok() {}
        }
    }
}

/// Sends one chunk of a chunked body, then pauses a little, as a network would.
async fn send_chunk(socket: &mut TcpStream, chunk: &[u8]) -> std::io::Result<()> {
    let mut framed = format!("{:x}\r\n", chunk.len()).into_bytes();
    framed.extend_from_slice(chunk);
    framed.extend_from_slice(b"\r\n");
    socket.write_all(&framed).await?;
    let _ = socket.flush().await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    Ok(())
}
