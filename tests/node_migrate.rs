//! DUMP, RESTORE and MIGRATE between built-in nodes over real TCP: values
//! and TTLs carried across, the source copy deleted exactly once, and every
//! refusal with Redis's words; exact RESP bytes, every read under a timeout.

mod common;

use common::inproc::{command_bytes, node, Client};

#[tokio::test]
async fn dump_and_restore_carry_a_value_and_ttl_between_nodes() {
    let (a, b) = (node().await, node().await);
    let (mut ca, mut cb) = (Client::connect(&a).await, Client::connect(&b).await);
    ca.check(&["SET", "k", "hello\r\nworld"], "+OK\r\n").await;
    ca.send(&["DUMP", "k"]).await;
    let dump = ca.reply().await;
    let payload = &dump[dump.windows(2).position(|w| w == b"\r\n").unwrap() + 2..dump.len() - 2];
    let restore = |ttl: &str, extra: &[&[u8]]| {
        let mut args: Vec<&[u8]> = vec![b"RESTORE", b"k", ttl.as_bytes(), payload];
        args.extend_from_slice(extra);
        command_bytes(&args)
    };
    let (first, busy, replace) = (
        restore("5000", &[]),
        restore("0", &[]),
        restore("0", &[b"REPLACE"]),
    );
    let negative = restore("-1", &[]);
    cb.send_raw(&first).await;
    assert_eq!(cb.reply().await, b"+OK\r\n");
    cb.check(&["GET", "k"], "$12\r\nhello\r\nworld\r\n").await;
    let pttl: i64 = cb.call(&["PTTL", "k"]).await[1..].trim().parse().unwrap();
    assert!((4000..=5000).contains(&pttl), "{pttl}");
    cb.send_raw(&busy).await;
    assert_eq!(
        cb.reply().await,
        b"-BUSYKEY Target key name already exists.\r\n"
    );
    cb.send_raw(&replace).await;
    assert_eq!(cb.reply().await, b"+OK\r\n");
    cb.check(&["TTL", "k"], ":-1\r\n").await;
    cb.check(
        &["RESTORE", "j", "0", "garbage"],
        "-ERR DUMP payload version or checksum are wrong\r\n",
    )
    .await;
    cb.check(&["DEL", "k"], ":1\r\n").await;
    cb.send_raw(&negative).await;
    assert_eq!(
        cb.reply().await,
        b"-ERR Invalid TTL value, must be >= 0\r\n"
    );
    ca.check(&["DUMP", "missing"], "$-1\r\n").await;
}

fn migrate_args<'a>(target: &'a str, key: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["MIGRATE", "127.0.0.1", target, key, "0", "1000"];
    args.extend_from_slice(extra);
    args
}

#[tokio::test]
async fn migrate_moves_a_key_and_deletes_the_source_copy() {
    let (a, b) = (node().await, node().await);
    let port = b.addr.port().to_string();
    let (mut ca, mut cb) = (Client::connect(&a).await, Client::connect(&b).await);
    ca.check(&["SET", "k", "v", "EX", "100"], "+OK\r\n").await;
    ca.check(&migrate_args(&port, "k", &[]), "+OK\r\n").await;
    ca.check(&["EXISTS", "k"], ":0\r\n").await;
    cb.check(&["GET", "k"], "$1\r\nv\r\n").await;
    cb.check(&["TTL", "k"], ":100\r\n").await;
    // The cached connection is reused for the next one.
    ca.check(&["SET", "k2", "v2"], "+OK\r\n").await;
    ca.check(&migrate_args(&port, "k2", &["COPY"]), "+OK\r\n")
        .await;
    ca.check(&["GET", "k2"], "$2\r\nv2\r\n").await;
    cb.check(&["GET", "k2"], "$2\r\nv2\r\n").await;
}

#[tokio::test]
async fn migrate_to_itself_is_refused_and_keeps_the_key() {
    let a = node().await;
    let port = a.addr.port().to_string();
    let mut ca = Client::connect(&a).await;
    ca.check(&["SET", "k", "v"], "+OK\r\n").await;
    for extra in [&[][..], &["REPLACE"][..]] {
        ca.check(
            &migrate_args(&port, "k", extra),
            "-ERR MIGRATE target is this node itself\r\n",
        )
        .await;
        ca.check(&["GET", "k"], "$1\r\nv\r\n").await;
    }
}

#[tokio::test]
async fn migrate_of_a_missing_key_replies_nokey() {
    let (a, b) = (node().await, node().await);
    let port = b.addr.port().to_string();
    let mut ca = Client::connect(&a).await;
    ca.check(&migrate_args(&port, "missing", &[]), "+NOKEY\r\n")
        .await;
    ca.check(&migrate_args(&port, "", &["KEYS", "x", "y"]), "+NOKEY\r\n")
        .await;
}

#[tokio::test]
async fn migrate_to_a_target_that_has_the_key_keeps_it_at_the_source() {
    let (a, b) = (node().await, node().await);
    let port = b.addr.port().to_string();
    let (mut ca, mut cb) = (Client::connect(&a).await, Client::connect(&b).await);
    ca.check(&["SET", "k", "source"], "+OK\r\n").await;
    cb.check(&["SET", "k", "target"], "+OK\r\n").await;
    ca.check(
        &migrate_args(&port, "k", &[]),
        "-ERR Target instance replied with error: BUSYKEY Target key name already exists.\r\n",
    )
    .await;
    ca.check(&["GET", "k"], "$6\r\nsource\r\n").await;
    cb.check(&["GET", "k"], "$6\r\ntarget\r\n").await;
    ca.check(&migrate_args(&port, "k", &["REPLACE"]), "+OK\r\n")
        .await;
    cb.check(&["GET", "k"], "$6\r\nsource\r\n").await;
}

#[tokio::test]
async fn migrate_keys_moves_several_keys_with_their_ttls() {
    let (a, b) = (node().await, node().await);
    let port = b.addr.port().to_string();
    let (mut ca, mut cb) = (Client::connect(&a).await, Client::connect(&b).await);
    for i in 0..300 {
        ca.check(
            &["SET", &format!("k{i}"), &format!("v{i}"), "PX", "100000"],
            "+OK\r\n",
        )
        .await;
    }
    let names: Vec<String> = (0..300)
        .map(|i| format!("k{i}"))
        .chain(["absent".to_string()])
        .collect();
    let mut args = migrate_args(&port, "", &["KEYS"]);
    args.extend(names.iter().map(String::as_str));
    ca.check(&args, "+OK\r\n").await;
    ca.check(&["DBSIZE"], ":0\r\n").await;
    cb.check(&["DBSIZE"], ":300\r\n").await;
    cb.check(&["GET", "k299"], "$4\r\nv299\r\n").await;
    let pttl: i64 = cb.call(&["PTTL", "k7"]).await[1..].trim().parse().unwrap();
    assert!((90_000..=100_000).contains(&pttl), "{pttl}");
}

#[tokio::test]
async fn migrate_to_a_closed_port_reports_ioerr_and_keeps_the_key() {
    let a = node().await;
    let closed = common::free_port().to_string();
    let mut ca = Client::connect(&a).await;
    ca.check(&["SET", "k", "v"], "+OK\r\n").await;
    ca.check(
        &migrate_args(&closed, "k", &[]),
        "-IOERR error or timeout connecting to the client\r\n",
    )
    .await;
    ca.check(&["GET", "k"], "$1\r\nv\r\n").await;
}

#[tokio::test]
async fn concurrent_migrates_of_one_key_move_it_exactly_once() {
    let (a, b) = (node().await, node().await);
    let port = b.addr.port().to_string();
    let mut ca = Client::connect(&a).await;
    for round in 0..20 {
        let key = format!("k{round}");
        ca.check(&["SET", &key, "v"], "+OK\r\n").await;
        let mut clients = Vec::new();
        for _ in 0..4 {
            let mut c = Client::connect(&a).await;
            c.send(&migrate_args(&port, &key, &[])).await;
            clients.push(c);
        }
        let mut replies = Vec::new();
        for c in &mut clients {
            replies.push(String::from_utf8_lossy(&c.reply().await).into_owned());
        }
        replies.sort();
        assert_eq!(
            replies,
            ["+NOKEY\r\n", "+NOKEY\r\n", "+NOKEY\r\n", "+OK\r\n"],
            "round {round}"
        );
    }
    let mut cb = Client::connect(&b).await;
    cb.check(&["DBSIZE"], ":20\r\n").await;
}
