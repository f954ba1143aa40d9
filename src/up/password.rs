//! The password `shardis up` starts its nodes with, so that only the proxy
//! (and whoever can read the file) talks to them: `[backend_auth] password`
//! when the config gives one, else one made of 16 random bytes on the first
//! start and kept in `node-password` (mode 0600) in `up`'s state directory
//! — the state file's directory, else `.shardis/` (mode 0700) in the
//! working directory — and reused by every later start. `[up]
//! node_password = false` starts the nodes without one.
//!
//! The proxy sends it as every node's `[backend_auth]` password; the
//! nodes get it outside their command line (an environment variable for
//! the built-in node, a 0600 config file for redis-server), so `ps` does
//! not show it. The proxy's own clients log in to the proxy (its users),
//! not to the nodes: `redis-cli -p 7000` needs no password.

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use shardis::proxy::Config;

/// The password file's name in the state directory.
pub const FILE_NAME: &str = "node-password";
/// The built-in node reads its `requirepass` (and `masterauth`) from here
/// when the flags do not give one.
pub const ENV_REQUIREPASS: &str = "SHARDIS_NODE_REQUIREPASS";
/// ... and its `masterauth`, a replica's login to its primary.
pub const ENV_MASTERAUTH: &str = "SHARDIS_NODE_MASTERAUTH";

/// The nodes' password and, when generated, the file that keeps it.
pub struct NodePassword {
    pub password: String,
    pub file: Option<PathBuf>,
}

/// Where `up` keeps what it generates: next to the state file when there
/// is one, else `.shardis` in the working directory.
pub fn state_dir(config: &Config) -> PathBuf {
    match &config.state_file {
        Some(f) => Path::new(f)
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf(),
        None => PathBuf::from(".shardis"),
    }
}

/// Decides the nodes' password and makes the proxy send it: `None` when
/// `[up] node_password = false`.
pub fn resolve(config: &mut Config) -> Result<Option<NodePassword>, String> {
    if !config.up.node_password {
        return Ok(None);
    }
    if config.node_auth.default_has_user() {
        return Err("backend_auth.username: `shardis up` starts its nodes with a password for the default user only; drop the username, or set [up] node_password = false".into());
    }
    if let Some(p) = config.node_auth.default_password() {
        return Ok(Some(NodePassword {
            password: p.to_string(),
            file: None,
        }));
    }
    let file = state_dir(config).join(FILE_NAME);
    let password = read_or_create(&file)?;
    config.node_auth.set_default_password(password.clone());
    Ok(Some(NodePassword {
        password,
        file: Some(file),
    }))
}

/// The password in `file`, made (with its directory) when it is not there.
fn read_or_create(file: &Path) -> Result<String, String> {
    let shown = file.display();
    if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(file);
    match created {
        Ok(mut f) => {
            let password = random_hex()?;
            f.write_all(format!("{password}\n").as_bytes())
                .map_err(|e| format!("{shown}: {e}"))?;
            Ok(password)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let mut text = String::new();
            std::fs::File::open(file)
                .and_then(|mut f| f.read_to_string(&mut text))
                .map_err(|e| format!("{shown}: {e}"))?;
            match text.trim() {
                "" => Err(format!(
                    "{shown}: empty; delete it and `up` makes a new one"
                )),
                p => Ok(p.to_string()),
            }
        }
        Err(e) => Err(format!("{shown}: {e}")),
    }
}

/// 16 bytes from the kernel's random source, as 32 hex digits.
pub(super) fn random_hex() -> Result<String, String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| format!("/dev/urandom: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// What the node spawner needs: the password, and for redis-server the
/// config file that holds it (written now, next to the password file).
pub fn for_nodes(
    p: Option<&NodePassword>,
    redis_server: bool,
    config: &Config,
) -> Result<Option<(String, Option<PathBuf>)>, String> {
    let Some(p) = p else { return Ok(None) };
    if !redis_server {
        return Ok(Some((p.password.clone(), None)));
    }
    let dir = match p.file.as_deref().and_then(Path::parent) {
        Some(d) => d.to_path_buf(),
        None => state_dir(config),
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(Some((
        p.password.clone(),
        Some(redis_conf(&dir, &p.password)?),
    )))
}

/// Says on stdout where the nodes' password is kept.
pub fn announce(p: Option<&NodePassword>) {
    match p.map(|p| &p.file) {
        Some(Some(file)) => println!(
            "shardis: the nodes want a password, kept in {} (mode 0600): only the proxy talks to them; clients of the proxy need none",
            std::fs::canonicalize(file).unwrap_or(file.clone()).display()
        ),
        Some(None) => println!(
            "shardis: the nodes want [backend_auth] password: only the proxy talks to them"
        ),
        None => {}
    }
}

/// A redis-server config file holding the password (mode 0600), next to
/// the password file: given to redis-server first, so its command line
/// does not carry the password.
fn redis_conf(dir: &Path, password: &str) -> Result<PathBuf, String> {
    let path = dir.join("node-redis.conf");
    let quoted = password.replace('\\', "\\\\").replace('"', "\\\"");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    f.write_all(format!("requirepass \"{quoted}\"\nmasterauth \"{quoted}\"\n").as_bytes())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_is_made_once_with_mode_0600_and_then_reused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("shardis-pw-{}", std::process::id()));
        let file = dir.join("state").join(FILE_NAME);
        let first = read_or_create(&file).unwrap();
        assert_eq!(first.len(), 32);
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(file.parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o777, 0o700);
        assert_eq!(read_or_create(&file).unwrap(), first);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
