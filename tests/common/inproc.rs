//! A built-in node run inside the test process (on port 0, stopped when
//! dropped) and an async RESP client that panics on transport errors: for
//! tests that assert exact bytes of one node.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::BytesMut;
use shardis::backend::{run, NodeConfig};
use shardis::client::{ClientError, Conn};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// A node running in this process; stops when dropped.
pub struct TestNode {
    pub addr: SocketAddr,
    _stop: oneshot::Sender<()>,
}

pub async fn start(config: NodeConfig) -> TestNode {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = oneshot::channel::<()>();
    tokio::spawn(run(listener, config, async {
        let _ = rx.await;
    }));
    TestNode { addr, _stop: tx }
}

pub async fn node() -> TestNode {
    start(NodeConfig::default()).await
}

/// A RESP client on the crate's connection, panicking on transport errors.
pub struct Client {
    conn: Conn,
}

pub fn command(args: &[&str]) -> Vec<u8> {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    command_bytes(&args)
}

pub fn command_bytes(args: &[&[u8]]) -> Vec<u8> {
    let mut out = BytesMut::new();
    shardis::resp::encode::command(&mut out, args);
    out.to_vec()
}

impl Client {
    pub async fn connect(node: &TestNode) -> Client {
        Client::to(node.addr).await
    }

    pub async fn to(addr: SocketAddr) -> Client {
        let conn = Conn::connect(&addr.to_string(), READ_TIMEOUT)
            .await
            .unwrap();
        Client { conn }
    }

    pub async fn send_raw(&mut self, bytes: &[u8]) {
        self.conn.queue_raw(bytes);
        self.conn.flush().await.unwrap();
    }

    pub async fn send(&mut self, args: &[&str]) {
        self.send_raw(&command(args)).await;
    }

    /// Reads one complete reply.
    pub async fn reply(&mut self) -> Vec<u8> {
        match self.conn.read_reply().await {
            Ok(r) => r.to_vec(),
            Err(e) => panic!("no reply: {e}"),
        }
    }

    /// Sends a command and asserts its reply, byte for byte.
    pub async fn check(&mut self, args: &[&str], want: &str) {
        self.send(args).await;
        let got = self.reply().await;
        assert_eq!(String::from_utf8_lossy(&got), want, "reply to {args:?}");
    }

    pub async fn call(&mut self, args: &[&str]) -> String {
        self.send(args).await;
        String::from_utf8_lossy(&self.reply().await).into_owned()
    }

    /// Asserts the server closes the connection (after any pending bytes).
    pub async fn expect_closed(&mut self) {
        loop {
            match self.conn.read_reply().await {
                Ok(_) => continue,
                Err(ClientError::Closed | ClientError::Read(_)) => return,
                Err(e) => panic!("connection was not closed: {e}"),
            }
        }
    }
}
