//! The command line nutcracker's deployment scripts use, given to
//! `shardis proxy`: `-t`, `-D`, `-d -p -o -v -i`, and a memcache pool
//! refused by name.

use super::common::{free_port, output, BIN};
use super::site::{self, show, At, Client, Site};
use std::process::Command;
use std::time::{Duration, Instant};

fn pool(port: u16, server: u16, redis: bool) -> String {
    format!(
        "alpha:\n  listen: 127.0.0.1:{port}\n  redis: {redis}\n  servers:\n   - 127.0.0.1:{server}:1\n"
    )
}

#[test]
fn t_says_the_syntax_is_ok_or_names_the_error() {
    let ok = Site::new(&pool(free_port(), 6379, true));
    let out = output(Command::new(BIN).args(["proxy", "-t", "-c"]).arg(&ok.yml));
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("syntax is ok"), "{said}");
    let bad = Site::new("alpha:\n  listen: 127.0.0.1:1\n  hash: sha1\n  redis: true\n");
    let out = output(Command::new(BIN).args(["proxy", "-t", "-c"]).arg(&bad.yml));
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("syntax is invalid"), "{said}");
    assert!(
        said.contains(":3: pool 'alpha': hash: unknown hash 'sha1'"),
        "{said}"
    );
    let unknown = Site::new(&format!(
        "{}  colour: blue\n",
        pool(free_port(), 6379, true)
    ));
    let out = output(
        Command::new(BIN)
            .args(["proxy", "-t", "-c"])
            .arg(&unknown.yml),
    );
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(":6: pool 'alpha': colour: unknown directive, ignored"),
        "{said}"
    );
    let memcache = Site::new(&pool(free_port(), 11211, false));
    let out = output(Command::new(BIN).args(["proxy", "-c"]).arg(&memcache.yml));
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("pool 'alpha': is a memcache pool"), "{said}");
}

#[test]
fn describe_stats_prints_nutcracker_s_list() {
    let ours = output(Command::new(BIN).args(["proxy", "-D"]));
    assert!(ours.status.success());
    let ours = String::from_utf8_lossy(&ours.stdout).into_owned();
    if !site::tools() {
        return;
    }
    let theirs = output(Command::new("nutcracker").arg("-D"));
    let theirs = String::from_utf8_lossy(&theirs.stderr).into_owned();
    let theirs = &theirs[theirs.find("pool stats:").unwrap()..];
    assert_eq!(ours, theirs);
}

#[test]
fn d_and_p_run_it_in_the_background_until_sigterm() {
    if !site::tools() {
        return;
    }
    let redis = site::redis_servers(1, &[]);
    let port = free_port();
    let site = Site::new(&pool(port, redis[0].port, true));
    let (pid_file, log) = (site.path("shardis.pid"), site.path("shardis.log"));
    let out = output(
        Command::new(BIN)
            .args(["proxy", "-d", "-c"])
            .arg(&site.yml)
            .arg("-p")
            .arg(&pid_file)
            .arg("-o")
            .arg(&log)
            .args([
                "-v",
                "6",
                "-i",
                "1000",
                "-s",
                &free_port().to_string(),
                "-a",
                "127.0.0.1",
            ]),
    );
    assert!(out.status.success(), "{out:?}");
    site::wait_answering(port);
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(
        show(&Client::connect(&At::Tcp(port)).call(&[b"SET", b"a", b"1"])),
        "+OK\r\n"
    );
    // SAFETY: the pid is the daemon this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while pid_file.exists() {
        assert!(
            Instant::now() < deadline,
            "the pid file outlived the process"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("pool ready"), "{logged}");
}
