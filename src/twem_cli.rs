//! The command-line flags twemproxy's deployment scripts pass to
//! `nutcracker` (`-c -t -s -a -i -v -o -d -p -D -m`), accepted by
//! `shardis proxy` with the same meaning, and the start of a
//! `nutcracker.yml`'s pools.

use std::path::{Path, PathBuf};

use clap::Args;

use shardis::proxy::twem;

/// nutcracker's default stats port (`-s`); shardis binds it on loopback
/// unless `-a` says otherwise.
const DEFAULT_STATS_PORT: u16 = 22222;
const DEFAULT_STATS_ADDR: &str = "127.0.0.1";
/// nutcracker's default log level (`-v`): notice.
const DEFAULT_VERBOSITY: u8 = 5;

#[derive(Args, Default)]
pub struct TwemArgs {
    /// Test the configuration for syntax errors and exit (nutcracker -t).
    #[arg(short = 't', long = "test-conf")]
    pub test_conf: bool,
    /// Where each pool of a nutcracker.yml keeps its state file
    /// ({pool}.state); the YAML itself is never written.
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// nutcracker.yml: the stats port (nutcracker -s) [default: 22222].
    #[arg(short = 's', long = "stats-port")]
    pub stats_port: Option<u16>,
    /// nutcracker.yml: the stats address (nutcracker -a) [default: 0.0.0.0].
    #[arg(short = 'a', long = "stats-addr")]
    pub stats_addr: Option<String>,
    /// nutcracker.yml: the stats interval in ms (nutcracker -i) [default: 30000].
    #[arg(short = 'i', long = "stats-interval")]
    pub stats_interval: Option<u64>,
    /// Log level 0..11 as nutcracker reads it (5 notice, 6 info, 7 debug);
    /// RUST_LOG, when set, wins.
    #[arg(short = 'v', long = "verbose", value_parser = clap::value_parser!(u8).range(0..=11))]
    pub verbose: Option<u8>,
    /// Log to this file instead of stderr (nutcracker -o).
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
    /// Run in the background (nutcracker -d).
    #[arg(short = 'd', long = "daemonize")]
    pub daemonize: bool,
    /// Write the process id to this file, removed at exit (nutcracker -p).
    #[arg(short = 'p', long = "pid-file")]
    pub pid_file: Option<PathBuf>,
    /// Print the stats nutcracker describes and exit (nutcracker -D).
    #[arg(short = 'D', long = "describe-stats")]
    pub describe_stats: bool,
    /// Accepted for nutcracker's scripts (its mbuf chunk size); shardis
    /// sizes its buffers itself.
    #[arg(short = 'm', long = "mbuf-size", hide = true)]
    pub mbuf_size: Option<usize>,
}

impl TwemArgs {
    /// The stats listener `-s` and `-a` ask for (or the defaults).
    pub fn stats(&self) -> Option<(String, bool)> {
        let asked = self.stats_port.is_some() || self.stats_addr.is_some();
        let addr = self.stats_addr.as_deref().unwrap_or(DEFAULT_STATS_ADDR);
        let port = self.stats_port.unwrap_or(DEFAULT_STATS_PORT);
        let host = if addr.contains(':') {
            format!("[{addr}]")
        } else {
            addr.to_string()
        };
        Some((format!("{host}:{port}"), asked))
    }

    /// The tracing filter `-v` asks for.
    pub fn log_filter(&self) -> &'static str {
        match self.verbose.unwrap_or(DEFAULT_VERBOSITY) {
            0..=3 => "error",
            4 => "warn",
            5 | 6 => "info",
            7 => "debug",
            _ => "trace",
        }
    }
}

/// `-t`: nutcracker's wording, on stdout for ok and stderr for an error.
pub fn test_conf(path: &Path, opts: &twem::Options) -> Result<(), String> {
    match twem::load(path, opts) {
        Ok((_, warnings)) => {
            for w in warnings {
                eprintln!("warning: {w}");
            }
            println!(
                "shardis: configuration file '{}' syntax is ok",
                path.display()
            );
            Ok(())
        }
        Err(e) => Err(format!(
            "configuration file '{}' syntax is invalid: {e}",
            path.display()
        )),
    }
}

/// Serves every pool of a nutcracker.yml until `shutdown` resolves: the
/// file read first (its errors reach the terminal), then `-d` and `-p`.
pub fn run<F: std::future::Future<Output = ()>>(
    path: &Path,
    opts: &twem::Options,
    args: &TwemArgs,
    shutdown: impl FnOnce() -> F,
    runtime: impl FnOnce() -> Result<tokio::runtime::Runtime, String>,
) -> Result<(), String> {
    let (served, warnings) = twem::load(path, opts)?;
    for w in &warnings {
        tracing::warn!("{w}");
    }
    if args.stats_interval.is_some() {
        tracing::info!("-i: shardis reads its stats live when asked; the interval is not needed");
    }
    if args.daemonize {
        daemonize()?;
    }
    let _pid = match &args.pid_file {
        Some(p) => Some(PidFile::write(p)?),
        None => None,
    };
    runtime()?.block_on(twem::run(served, opts, shutdown()))
}

/// `-d`: into the background, detached from the terminal, as nutcracker
/// does (its working directory kept, so relative paths still hold). Called
/// before any thread starts.
fn daemonize() -> Result<(), String> {
    // SAFETY: no other thread runs yet (the runtime starts after this);
    // daemon(3) forks, the parent exits, the child calls setsid and points
    // stdin, stdout and stderr at /dev/null.
    if unsafe { libc::daemon(1, 0) } != 0 {
        return Err(format!("-d: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// `-p`: the process id in a file, removed when dropped.
struct PidFile(PathBuf);

impl PidFile {
    fn write(path: &Path) -> Result<PidFile, String> {
        std::fs::write(path, format!("{}\n", std::process::id()))
            .map_err(|e| format!("-p {}: {e}", path.display()))?;
        Ok(PidFile(path.to_path_buf()))
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
