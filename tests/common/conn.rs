//! A raw async RESP connection for byte-for-byte comparisons: sends one
//! request (binary-safe arguments) and returns exactly one whole reply,
//! every read under a timeout.

use bytes::BytesMut;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// One client connection.
pub struct Conn {
    sock: TcpStream,
    buf: BytesMut,
}

impl Conn {
    pub async fn open(port: u16) -> Conn {
        Conn {
            sock: TcpStream::connect(("127.0.0.1", port)).await.unwrap(),
            buf: BytesMut::new(),
        }
    }

    /// Sends `args` and returns the raw reply.
    pub async fn call<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Vec<u8> {
        let mut req = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            let a = a.as_ref();
            req.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            req.extend_from_slice(a);
            req.extend_from_slice(b"\r\n");
        }
        self.sock.write_all(&req).await.unwrap();
        let shown = || {
            args.iter()
                .map(|a| {
                    String::from_utf8_lossy(&a.as_ref()[..a.as_ref().len().min(40)]).into_owned()
                })
                .collect::<Vec<_>>()
        };
        loop {
            if let Some(n) = shardis::resp::reply_len(&self.buf).unwrap() {
                return self.buf.split_to(n).to_vec();
            }
            let n = tokio::time::timeout(READ_TIMEOUT, self.sock.read_buf(&mut self.buf))
                .await
                .unwrap_or_else(|_| panic!("no reply to {:?}", shown()))
                .unwrap();
            assert!(n > 0, "connection closed on {:?}", shown());
        }
    }
}
