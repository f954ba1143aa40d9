//! Listening sockets for the proxy and the node, with a deep accept queue.
//!
//! tokio's `TcpListener::bind` asks for a backlog of 1024. A burst of
//! connections larger than that (a thousand clients blocking at once, each
//! making the proxy open a pinned connection to the same node) overflows the
//! queue while the accepting task is busy; the kernel then drops the SYN and
//! the connecting side retransmits it after one second — as long as the
//! proxy's default connect timeout, so the connect fails. Asking for
//! [`BACKLOG`] lets the kernel's own cap (`net.core.somaxconn`, 4096 on
//! current Linux) decide, as Redis's `tcp-backlog` does.
//!
//! Used by `main.rs` and `up.rs` (proxy, node) and `backend::run`.

use std::io;

use tokio::net::{TcpListener, TcpSocket};

/// The accept queue asked for; the kernel caps it at `somaxconn`.
pub const BACKLOG: u32 = 65_535;

/// Binds `addr` (`host:port`, resolved; the first address is used) and
/// listens with [`BACKLOG`].
pub async fn listen(addr: &str) -> io::Result<TcpListener> {
    listen_with(addr, BACKLOG).await
}

/// [`listen`] with an accept queue of `backlog` (twemproxy's `backlog`).
pub async fn listen_with(addr: &str, backlog: u32) -> io::Result<TcpListener> {
    let sa = tokio::net::lookup_host(addr).await?.next().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("no address for {addr}"),
        )
    })?;
    listen_backlog(sa, backlog)
}

/// [`listen`] on an address already resolved.
pub fn listen_at(sa: std::net::SocketAddr) -> io::Result<TcpListener> {
    listen_backlog(sa, BACKLOG)
}

fn listen_backlog(sa: std::net::SocketAddr, backlog: u32) -> io::Result<TcpListener> {
    let sock = if sa.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    // As `TcpListener::bind` does: a restarted process rebinds its port at
    // once, even with connections of the previous one in TIME_WAIT.
    sock.set_reuseaddr(true)?;
    sock.bind(sa)?;
    sock.listen(backlog)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn listens_and_accepts() {
        let l = listen("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let c = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        assert_eq!(s.peer_addr().unwrap(), c.local_addr().unwrap());
        assert!(listen("no-such-host.invalid:1").await.is_err());
    }
}
