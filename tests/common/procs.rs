//! Every process a test starts: a [`Proc`] is killed when its handle drops,
//! and — through [`spawn_dying_with_test`] — also when the test binary itself
//! dies, even by SIGKILL, so an interrupted `cargo test` leaves nothing behind.

use std::io;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use shardis::client::blocking::answers_ping;
use shardis::procs::StderrCapture;

use super::BIN;

/// A spawn request for the spawner thread: the command, and where to send it
/// back with its outcome.
type Spawn = (Command, mpsc::Sender<(Command, io::Result<Child>)>);

/// Spawns `cmd` so that the child is SIGKILLed when the test binary exits.
///
/// Linux sends the parent-death signal when the *thread* that forked the
/// child ends, and every test runs on a thread of its own that ends with it:
/// a process shared by several tests would die with the first. So every
/// child is forked by one spawner thread that lives as long as the binary.
pub fn spawn_dying_with_test(cmd: &mut Command) -> io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Spawn>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Spawn>();
        std::thread::Builder::new()
            .name("spawner".into())
            .spawn(move || {
                for (mut cmd, back) in rx {
                    let child = spawn_with_parent_death(&mut cmd);
                    let _ = back.send((cmd, child));
                }
            })
            .expect("start the spawner thread");
        Mutex::new(tx)
    });
    // The command travels to the spawner and back, so the caller's stays
    // usable (some read it again after spawning).
    let taken = std::mem::replace(cmd, Command::new("true"));
    let (back, reply) = mpsc::channel();
    spawner
        .lock()
        .unwrap()
        .send((taken, back))
        .expect("spawner thread");
    let (taken, child) = reply.recv().expect("spawner thread");
    *cmd = taken;
    child
}

/// `spawn` and `output` for any other command a test runs (a client, a
/// browser, a `shardis` run to its end): the child dies with the test binary.
pub trait DieWithTest {
    fn spawn_dying(&mut self) -> io::Result<Child>;
    fn output_dying(&mut self) -> io::Result<std::process::Output>;
}

impl DieWithTest for Command {
    fn spawn_dying(&mut self) -> io::Result<Child> {
        spawn_dying_with_test(self)
    }

    /// As `Command::output`: stdin from /dev/null, stdout and stderr kept.
    fn output_dying(&mut self) -> io::Result<std::process::Output> {
        self.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        spawn_dying_with_test(self)?.wait_with_output()
    }
}

fn spawn_with_parent_death(cmd: &mut Command) -> io::Result<Child> {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died before the signal was armed.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    cmd.spawn()
}

/// A child process killed on drop, its stderr captured; a panic in it fails
/// the test.
pub struct Proc {
    pub child: Child,
    pub port: u16,
    pub(crate) stderr: StderrCapture,
    /// What it is (`node`, `proxy`, …), for messages.
    name: String,
    /// `name (port N)`, for failure reports.
    what: String,
    /// Set by a test that makes this process panic on purpose.
    panics_expected: bool,
}

impl Proc {
    /// Spawns `cmd` (stdout as the caller set it, stderr captured); `what`
    /// names it in failure messages.
    pub fn spawn(cmd: &mut Command, port: u16, what: &str) -> Proc {
        Proc::spawn_logged(cmd, port, what, None)
    }

    /// [`Proc::spawn`], with its stderr also copied to `log`.
    pub fn spawn_logged(
        cmd: &mut Command,
        port: u16,
        what: &str,
        log: Option<std::fs::File>,
    ) -> Proc {
        cmd.stderr(Stdio::piped());
        let mut child = spawn_dying_with_test(cmd).unwrap_or_else(|e| panic!("start {what}: {e}"));
        let stderr = StderrCapture::attach(&mut child, log);
        Proc {
            child,
            port,
            stderr,
            name: what.to_string(),
            what: format!("{what} (port {port})"),
            panics_expected: false,
        }
    }

    /// This process is made to panic on purpose: its panics fail nothing.
    pub fn expect_panics(&mut self) {
        self.panics_expected = true;
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Kills and reaps the process, then reads the rest of its stderr.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stderr.finish();
    }

    /// Waits until it answers PING; fails with the tail of its stderr if it
    /// exits first or stays silent for 15 s.
    pub fn wait_ready(&mut self) {
        if let Err(e) = shardis::procs::wait_ping(self.port, &mut self.child, &self.name) {
            self.kill();
            panic!(
                "{e}\n--- last lines of its stderr ---\n{}",
                self.stderr.tail(40)
            );
        }
    }

    /// Fails now if the process has printed a panic so far.
    pub fn assert_no_panic(&self) {
        if let Some(report) = self.stderr.panic_report(&self.what) {
            panic!("{report}");
        }
    }

    /// The last `n` lines of its stderr.
    pub fn stderr_tail(&self, n: usize) -> String {
        self.stderr.tail(n)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
        if self.panics_expected {
            return;
        }
        // A second panic while unwinding would abort the whole test binary;
        // the test is failing already, so just print what the child said.
        if std::thread::panicking() {
            if let Some(report) = self.stderr.panic_report(&self.what) {
                eprintln!("{report}");
            }
            return;
        }
        self.assert_no_panic();
    }
}

/// Waits until something answers PING on `port`.
pub fn wait_ping(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if answers_ping(port, Duration::from_secs(5)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "nothing answered PING on port {port}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts a built-in node.
pub fn start_node(port: u16) -> Proc {
    let mut p = Proc::spawn(
        Command::new(BIN)
            .args(["node", "--port", &port.to_string()])
            .stdout(Stdio::null()),
        port,
        "node",
    );
    p.wait_ready();
    p
}

/// The arguments of a redis-server on loopback `port` with no persistence;
/// callers add their own after them.
pub fn redis_args(port: u16) -> Vec<String> {
    let port_s = port.to_string();
    [
        "--port",
        &port_s,
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
    ]
    .map(String::from)
    .into_iter()
    .chain(redis_scratch(port))
    .collect()
}

/// Where a redis-server without persistence keeps what it still writes (a
/// replica's full sync, a SAVE): a file of its own in the temp directory,
/// removed first (under the checkout's `target/tmp`). A shared `dump.rdb` would be loaded by the next server
/// started in that directory, which would then not start empty.
pub fn redis_scratch(port: u16) -> Vec<String> {
    let name = format!("shardis-test-{}-{port}.rdb", std::process::id());
    let dir = super::tempdir::scratch();
    let _ = std::fs::remove_file(dir.join(&name));
    vec![
        "--dir".into(),
        dir.to_string_lossy().into_owned(),
        "--dbfilename".into(),
        name,
    ]
}

/// Starts a redis-server with no persistence.
pub fn start_redis(port: u16) -> Proc {
    let mut args = redis_args(port);
    // As the built-in node's (see src/listen.rs): bursts of pinned
    // connections must not overflow the accept queue.
    args.extend(["--tcp-backlog", "4096"].map(String::from));
    spawn_redis(port, args)
}

/// Starts `redis-server args…` (which name `port`) and waits until it listens.
pub fn spawn_redis<S: AsRef<std::ffi::OsStr>>(
    port: u16,
    args: impl IntoIterator<Item = S>,
) -> Proc {
    let mut p = Proc::spawn(
        Command::new("redis-server")
            .args(args)
            .stdout(Stdio::null()),
        port,
        "redis-server",
    );
    p.wait_ready();
    p
}
