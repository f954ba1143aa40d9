//! Pub/sub through the proxy under load and under change: a publish storm
//! (1 000 subscribers over 100 channels and patterns, every delivery
//! counted: each matching subscriber gets each message exactly once), a
//! subscriber that does not read closed at its output limit while the
//! others keep receiving, and subscriptions that survive REMOVENODE of
//! their node, ADDNODE, and the death of their node.

mod common;
#[path = "pubsub_load/harness.rs"]
mod harness;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use harness::*;
use shardis::client::Conn;

fn publish_storm_reaches_every_matching_subscriber_exactly_once(b: Backend) {
    if !b.is_available() {
        return;
    }
    const SUBSCRIBERS: usize = 1000;
    const CHANNELS: usize = 100;
    const PER_CHANNEL: usize = 5;
    let c = b.cluster(3);
    let port = c.proxy.port;
    let subs: Vec<Sub> = (0..SUBSCRIBERS)
        .map(|i| {
            let resp3 = i % 10 == 1;
            if i % 4 == 0 {
                Sub {
                    channels: vec![],
                    patterns: vec![format!("ch:{}*", (i / 4) % 10)],
                    resp3,
                }
            } else {
                let mut channels = vec![format!("ch:{}", i % CHANNELS)];
                let other = format!("ch:{}", (i * 7 + 3) % CHANNELS);
                if other != channels[0] {
                    channels.push(other);
                }
                Sub {
                    channels,
                    patterns: vec![],
                    resp3,
                }
            }
        })
        .collect();
    let msgs: Vec<(String, String)> = (0..CHANNELS * PER_CHANNEL)
        .map(|i| (format!("ch:{}", i % CHANNELS), format!("{i:06}")))
        .collect();
    let rt = runtime();
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(240), async {
            let gate = Arc::new(tokio::sync::Semaphore::new(100));
            let mut conns = Vec::new();
            for s in &subs {
                let (s, gate) = (s.clone(), gate.clone());
                conns.push(tokio::spawn(async move {
                    let _p = gate.acquire().await.unwrap();
                    subscribe(port, &s).await
                }));
            }
            let mut readers = Vec::new();
            for h in conns {
                let mut conn = h.await.unwrap();
                readers.push(tokio::spawn(
                    async move { count_until_end(&mut conn).await },
                ));
            }
            let started = Instant::now();
            let total = publish_all(port, &msgs).await;
            let want_total: usize = msgs
                .iter()
                .map(|(ch, _)| subs.iter().filter(|s| s.matches(ch)).count())
                .sum();
            assert_eq!(total, want_total as i64, "PUBLISH counts");
            let end = publish_all(port, &[("ctl".into(), END.into())]).await;
            assert_eq!(end, SUBSCRIBERS as i64);
            let mut delivered = 0;
            for (s, r) in subs.iter().zip(readers) {
                let got = r.await.unwrap();
                for (ch, m) in &msgs {
                    let n = got.get(m).copied().unwrap_or(0);
                    let want = u32::from(s.matches(ch));
                    assert_eq!(n, want, "message {m} on {ch}: {n} deliveries");
                }
                assert_eq!(got.values().sum::<u32>() as usize, got.len());
                delivered += got.len();
            }
            assert_eq!(delivered, want_total);
            println!(
                "{delivered} deliveries to {SUBSCRIBERS} subscribers, each exactly once, in {:?}",
                started.elapsed()
            );
        })
        .await
        .expect("the storm ends in time");
    });
    c.proxy.assert_no_panic();
}

fn a_subscriber_that_does_not_read_is_closed_while_others_keep_receiving(b: Backend) {
    if !b.is_available() {
        return;
    }
    let nodes = vec![b.start(), b.start()];
    let c = Cluster::over(
        nodes,
        "client_output_hard_limit = 1048576\nclient_output_soft_limit = 0\n",
    );
    let port = c.proxy.port;
    let payload = "x".repeat(8192);
    let rt = runtime();
    rt.block_on(async {
        let sub = Sub {
            channels: vec!["big".into()],
            patterns: vec![],
            resp3: false,
        };
        // The slow one subscribes and then never reads.
        let mut slow = subscribe(port, &sub).await;
        let mut fast = subscribe(port, &sub).await;
        let reader = tokio::spawn(async move {
            let mut n = 0;
            loop {
                let f = fast.read_reply().await.unwrap();
                if f.ends_with(b"END___\r\n") {
                    return n;
                }
                n += 1;
            }
        });
        const MSGS: usize = 2000;
        let mut p = Conn::connect(&format!("127.0.0.1:{port}"), TIMEOUT)
            .await
            .unwrap();
        for _ in 0..MSGS {
            p.queue_raw(&command(&["PUBLISH", "big", &payload]));
            p.flush().await.unwrap();
            p.read_reply().await.unwrap();
        }
        p.queue_raw(&command(&["PUBLISH", "big", END]));
        p.flush().await.unwrap();
        assert_eq!(
            &p.read_reply().await.unwrap()[..],
            b":1\r\n",
            "the slow one is gone"
        );
        assert_eq!(
            reader.await.unwrap(),
            MSGS,
            "the reading subscriber got everything"
        );
        // The slow one finds its connection closed after what was written.
        let deadline = Instant::now() + TIMEOUT;
        loop {
            match slow
                .fill_until(tokio::time::Instant::from_std(deadline))
                .await
            {
                Ok(()) => while slow.try_reply().unwrap().is_some() {},
                Err(shardis::client::ClientError::Closed) => break,
                Err(e) => panic!("slow subscriber: {e}"),
            }
        }
    });
    let mut q = Raw::connect(port);
    assert!(q.info_field("stats", "client_output_buffer_limit_disconnections") >= 1);
    c.proxy.assert_no_panic();
}

fn subscriptions_survive_removenode_addnode_and_a_dead_node(b: Backend) {
    if !b.is_available() {
        return;
    }
    const SUBS: usize = 30;
    let nodes: Vec<Proc> = (0..3).map(|_| b.start()).collect();
    let spare = b.start();
    let mut c = Cluster::over(nodes, "[migration]\nmax_keys_per_sec = 2000\nbatch = 100\n");
    let port = c.proxy.port;
    let node_ports: Vec<u16> = c.nodes.iter().map(|n| n.port).collect();
    set_keys(port, "fill:", 3000);
    let rt = runtime();
    let mut node1 = c.nodes.remove(0);
    rt.block_on(async {
        let subs: Vec<Sub> = (0..SUBS)
            .map(|i| Sub {
                channels: if i % 3 == 0 {
                    vec![format!("id:{i}")]
                } else {
                    vec!["t".into(), format!("id:{i}")]
                },
                patterns: if i % 3 == 0 {
                    vec!["t*".into()]
                } else {
                    vec![]
                },
                resp3: i % 2 == 0,
            })
            .collect();
        let mut readers = Vec::new();
        for s in &subs {
            let mut conn = subscribe(port, s).await;
            readers.push(tokio::spawn(
                async move { count_until_end(&mut conn).await },
            ));
        }
        // The publisher: one PUBLISH at a time, each answered before the next.
        let seq = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (s2, stop2) = (seq.clone(), stop.clone());
        let publisher = tokio::spawn(async move {
            let mut p = conn(port).await;
            let mut counts = Vec::new();
            while !stop2.load(std::sync::atomic::Ordering::SeqCst) {
                let n = s2.load(std::sync::atomic::Ordering::SeqCst);
                counts.push(call(&mut p, &["PUBLISH", "t", &format!("{n:06}")]).await);
                s2.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            counts
        });
        let now = || seq.load(std::sync::atomic::Ordering::SeqCst);
        let mut admin = conn(port).await;
        tokio::time::sleep(Duration::from_millis(200)).await;

        // REMOVENODE the third node: its subscribers move before the cutover.
        let on_removed = held_by(node_ports[2]).await;
        assert!(!on_removed.is_empty());
        let removal = now();
        assert_eq!(
            call(&mut admin, &["CLUSTER", "REMOVENODE", "node3"]).await,
            "+OK\r\n"
        );
        wait_until("REMOVENODE", || ring_ok(port)).await;
        wait_until("old subscriber connections closed", async || {
            held_by(node_ports[2]).await.is_empty()
        })
        .await;
        let removed = now() + 1;
        tokio::time::sleep(Duration::from_millis(200)).await;

        // ADDNODE: subscribers stay; PUBLISH reaches the new node from the cutover on.
        let r = call(
            &mut admin,
            &["CLUSTER", "ADDNODE", &spare.addr(), "NAME", "n4"],
        )
        .await;
        assert_eq!(r, "+OK\r\n");
        wait_until("ADDNODE", || ring_ok(port)).await;
        let mut late = subscribe(
            port,
            &Sub {
                channels: vec!["t".into()],
                patterns: vec![],
                resp3: false,
            },
        )
        .await;
        tokio::time::sleep(Duration::from_millis(200)).await;

        // Node 1 dies while in the routing: its subscribers move to others.
        let on_dead = held_by(node_ports[0]).await;
        let killed = now();
        node1.kill();
        wait_until("subscribers moved off the dead node", async || {
            let r = call(&mut conn(port).await, &["PUBSUB", "NUMSUB", "t"]).await;
            r.ends_with(&format!(":{}\r\n", SUBS * 2 / 3 + 1))
        })
        .await;
        let moved = now() + 1;
        tokio::time::sleep(Duration::from_millis(300)).await;
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let counts = publisher.await.unwrap();
        let end = now();
        // Every subscriber, and `late`, gets the end marker.
        let r = call(&mut admin, &["PUBLISH", "ctl", END]).await;
        assert_eq!(r, format!(":{}\r\n", SUBS + 1));
        let mut got = Vec::new();
        for r in readers {
            got.push(r.await.unwrap());
        }
        let all = || 0..SUBS;
        let stay = |away: &[usize]| (0..SUBS).filter(|i| !away.contains(i)).collect::<Vec<_>>();
        assert_eq!(misses(&got, all(), 0..removal), (0, 0), "before REMOVENODE");
        assert_eq!(
            misses(&got, stay(&on_removed).into_iter(), removal..removed),
            (0, 0)
        );
        let window = misses(&got, on_removed.iter().copied(), removal..removed);
        assert_eq!(
            window.0, 0,
            "lost by subscribers moved off the removed node"
        );
        assert_eq!(
            misses(&got, all(), removed..killed),
            (0, 0),
            "between the changes"
        );
        assert_eq!(
            misses(&got, stay(&on_dead).into_iter(), killed..moved),
            (0, 0)
        );
        let dead = misses(&got, on_dead.iter().copied(), killed..moved);
        assert_eq!(
            misses(&got, all(), moved..end),
            (0, 0),
            "after the node died"
        );
        // Every PUBLISH after the move counted every subscriber (and `late`).
        for c in &counts[moved as usize..end as usize] {
            assert_eq!(c, &format!(":{}\r\n", SUBS + 1));
        }
        let late_got = count_until_end(&mut late).await;
        assert_eq!(misses(&[late_got], [0].into_iter(), moved..end), (0, 0));
        println!(
            "REMOVENODE: {} subscribers moved, {} messages in the change, lost {}, duplicated {}; \
             dead node: {} subscribers moved, {} messages until all moved, lost {}, duplicated {}",
            on_removed.len(),
            removed - removal,
            window.0,
            window.1,
            on_dead.len(),
            moved - killed,
            dead.0,
            dead.1
        );
    });
    c.proxy.assert_no_panic();
}

crate::on_both_backends!(
    publish_storm_reaches_every_matching_subscriber_exactly_once,
    a_subscriber_that_does_not_read_is_closed_while_others_keep_receiving,
    subscriptions_survive_removenode_addnode_and_a_dead_node,
);
