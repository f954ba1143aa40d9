//! A pool's unix socket listener (`listen: /path/to.sock [perm]`): each
//! client accepted there is joined to the pool's own loopback listener, so
//! the session serving it is the same as for a TCP client.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use tokio::net::{TcpStream, UnixListener};

/// A bound unix socket, its file removed when dropped.
pub(crate) struct Socket {
    listener: UnixListener,
    path: PathBuf,
}

impl Socket {
    /// Binds `path` (a stale socket file there is replaced, as twemproxy
    /// does) with permissions `perm` when given.
    pub(crate) fn bind(path: &str, perm: Option<u32>) -> std::io::Result<Socket> {
        let path = PathBuf::from(path);
        if std::fs::symlink_metadata(&path)
            .is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()))
        {
            std::fs::remove_file(&path)?;
        }
        let listener = UnixListener::bind(&path)?;
        if let Some(mode) = perm {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
        }
        Ok(Socket { listener, path })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Joins every client accepted here to `to` until dropped.
    pub(crate) async fn bridge(self, to: SocketAddr) {
        loop {
            let (mut client, _) = match self.listener.accept().await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, path = %self.path.display(), "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                }
            };
            tokio::spawn(async move {
                let Ok(mut pool) = TcpStream::connect(to).await else {
                    return;
                };
                let _ = pool.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut client, &mut pool).await;
            });
        }
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
