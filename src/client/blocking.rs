//! The std (blocking) variant of [`super::Conn`]: the same queue, flush and
//! whole-reply reads, for code without a runtime — readiness probes of child
//! processes (`procs`) and the integration tests' harness. Every connect,
//! write and wait for a reply is bounded by the connection's timeout.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::{Buffers, ClientError, READ_CHUNK_BYTES};
use crate::resp::encode;

/// One blocking connection, used by one thread.
pub struct Conn {
    sock: TcpStream,
    bufs: Buffers,
    timeout: Duration,
}

impl Conn {
    /// Connects to `addr` (`host:port`, Nagle off); `timeout` bounds the
    /// connect and then every write and every wait for one reply.
    pub(crate) fn connect(addr: &str, timeout: Duration) -> Result<Conn, ClientError> {
        let connect_err = |err| ClientError::Connect {
            addr: addr.to_string(),
            err,
        };
        let addrs: Vec<SocketAddr> = addr.to_socket_addrs().map_err(connect_err)?.collect();
        let mut last = None;
        for a in addrs {
            match TcpStream::connect_timeout(&a, timeout) {
                Ok(sock) => return Conn::over(sock, timeout).map_err(connect_err),
                Err(e) => last = Some(e),
            }
        }
        Err(match last {
            Some(e) if is_timeout(&e) => ClientError::ConnectTimeout {
                addr: addr.to_string(),
            },
            Some(e) => connect_err(e),
            None => connect_err(ErrorKind::NotFound.into()),
        })
    }

    /// [`Conn::connect`] to `127.0.0.1:port`.
    pub fn connect_loopback(port: u16, timeout: Duration) -> Result<Conn, ClientError> {
        Conn::connect(&format!("127.0.0.1:{port}"), timeout)
    }

    fn over(sock: TcpStream, timeout: Duration) -> std::io::Result<Conn> {
        sock.set_nodelay(true)?;
        sock.set_write_timeout(Some(timeout))?;
        Ok(Conn {
            sock,
            bufs: Buffers::new(),
            timeout,
        })
    }

    /// Adds one command to the outgoing batch.
    pub fn queue(&mut self, args: &[&[u8]]) {
        self.bufs.queue_with(|out| encode::command(out, args));
    }

    /// Writes the queued requests without waiting for their replies; returns
    /// how many.
    pub fn flush(&mut self) -> Result<usize, ClientError> {
        let (out, n) = self.bufs.take_out();
        self.write(&out)?;
        Ok(n)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), ClientError> {
        self.sock.write_all(bytes).map_err(|e| {
            if is_timeout(&e) {
                ClientError::WriteTimeout
            } else {
                ClientError::Write(e)
            }
        })
    }

    /// Writes one request now.
    pub fn send(&mut self, args: &[&[u8]]) -> Result<(), ClientError> {
        self.queue(args);
        self.flush().map(drop)
    }

    /// Reads one whole reply: [`ClientError::ReadTimeout`] if none came
    /// within the timeout, [`ClientError::Closed`] if the peer closed first.
    pub fn read_reply(&mut self) -> Result<Vec<u8>, ClientError> {
        let deadline = Instant::now() + self.timeout;
        let mut chunk = vec![0u8; READ_CHUNK_BYTES];
        loop {
            if let Some(reply) = self.bufs.take_reply()? {
                return Ok(reply.to_vec());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ClientError::ReadTimeout);
            }
            self.sock
                .set_read_timeout(Some(left))
                .map_err(ClientError::Read)?;
            match self.sock.read(&mut chunk) {
                Ok(0) => return Err(ClientError::Closed),
                Ok(n) => self.bufs.inbuf.extend_from_slice(&chunk[..n]),
                // A stop and continue of this process can interrupt a read
                // that has a timeout, even without a signal handler.
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => return Err(ClientError::ReadTimeout),
                Err(e) => return Err(ClientError::Read(e)),
            }
        }
    }

    /// One request, one reply.
    pub(crate) fn call(&mut self, args: &[&[u8]]) -> Result<Vec<u8>, ClientError> {
        self.send(args)?;
        self.read_reply()
    }

    /// [`Conn::call`] with text arguments.
    pub fn call_str(&mut self, args: &[&str]) -> Result<Vec<u8>, ClientError> {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.call(&args)
    }
}

/// Whether a socket error means a timeout ran out (std reports either kind).
fn is_timeout(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// Whether something on `127.0.0.1:port` answers PING within `timeout`,
/// with PONG or with the error of a server that wants a password first;
/// false on any other error or reply.
pub fn answers_ping(port: u16, timeout: Duration) -> bool {
    Conn::connect_loopback(port, timeout)
        .and_then(|mut c| c.call(&[b"PING"]))
        .is_ok_and(|r| r == b"+PONG\r\n" || r.starts_with(b"-NOAUTH "))
}
