//! RSS over our driver on the emulated device: flows land on the receive
//! queue the redirection table names for their Toeplitz hash, the mbufs
//! carry that hash, and `port config 0 rss reta` takes tables that repeat a
//! permutation of the queues (period = queue count) and refuses every
//! other table with the reason in the log.

mod common;
use common::*;
use std::time::Duration;

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

const NAME: &str = "7870:00:00.0_port1";

fn reta_of(perm: &[u16]) -> [u16; 64] {
    let mut r = [0u16; 64];
    for (i, e) in r.iter_mut().enumerate() {
        *e = perm[i % perm.len()];
    }
    r
}

/// `show port 0 rss reta 64 (...)` parsed into the 64 entries.
fn query_reta(t: &mut Testpmd) -> [u16; 64] {
    let o = cmd(t, "show port 0 rss reta 64 (0xffffffffffffffff)");
    let mut r = [u16::MAX; 64];
    for l in o.lines() {
        if let Some(rest) = l.strip_prefix("RSS RETA configuration: hash index=") {
            let (i, q) = rest.split_once(", queue=").unwrap();
            r[i.trim().parse::<usize>().unwrap()] = q.trim().parse().unwrap();
        }
    }
    assert!(r.iter().all(|&q| q != u16::MAX), "incomplete RETA in {o}");
    r
}

/// Injects `frames`, waits until testpmd (rxonly) has them all, and returns
/// testpmd's per-queue counts from `stop` and the device's RQ counts.
fn receive(t: &mut Testpmd, frames: &[Vec<u8>], nq: usize) -> (Vec<u64>, Vec<u64>) {
    let before = t.port_stats(0).unwrap().rx_packets;
    let dev0 = t.device_counters().unwrap().port(MAC_A).unwrap().rx_packets;
    cmd(t, "start");
    t.inject(MAC_A, frames).unwrap();
    let n = frames.len() as u64;
    wait_dev(t, "frames received", |c| {
        c.port(MAC_A).unwrap().rx_packets == dev0 + n
    });
    let s = wait_stats(t, 0, |s| s.rx_packets >= before + n);
    assert_eq!(s.rx_packets, before + n, "testpmd received every frame");
    let out = cmd(t, "stop");
    let mut streams = parse_stream_stats(&out);
    streams.sort_by_key(|s| s.rx_queue);
    let per_q: Vec<u64> = if nq == 1 {
        vec![n]
    } else {
        streams.iter().map(|s| s.rx_packets).collect()
    };
    assert_eq!(per_q.len(), nq, "{out}");
    let dev = settled(t);
    (per_q, live_queue_packets(&dev, "rq", MAC_A))
}

/// `port config 0 rss reta` for the entries that swap the queues at
/// positions `i` and `j` of a period-`n` table (testpmd takes at most 126
/// characters of entries per command: 16 entries fit).
fn swap_cmd(perm: &[u16], i: usize, j: usize) -> String {
    let n = perm.len();
    let mut e = Vec::new();
    for k in (0..64).step_by(n) {
        e.push(format!("({},{})", k + i, perm[j]));
        e.push(format!("({},{})", k + j, perm[i]));
    }
    let c = format!("port config 0 rss reta {}", e.join(","));
    assert!(c.len() - "port config 0 rss reta ".len() <= 126, "{c}");
    c
}

#[test]
fn reta_permutations_are_taken_and_steer_flows_others_are_refused() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if skip() {
        return;
    }
    let env = EmuEnv::new("rs-reta", single(vec![PortDef::sink(MAC_A).lossless()])).unwrap();
    let mut t = spawn(
        &env,
        &[
            "--rxq=8",
            "--txq=8",
            "--rxd=256",
            "--txd=256",
            "--forward-mode=rxonly",
        ],
    );
    let mut perm: Vec<u16> = (0..8).collect();
    assert_eq!(query_reta(&mut t), default_reta(8));

    // While the port runs the table cannot change.
    let o = cmd(&mut t, &swap_cmd(&perm, 0, 7));
    assert_has(
        &o,
        &drv_line(
            NAME,
            "stop the port before changing its RSS redirection table",
        ),
    );
    assert_has(&o, "Bad redirection table parameter, return code = -16");

    cmd(&mut t, "port stop 0");
    // A queue twice in the first period.
    let o = cmd(&mut t, "port config 0 rss reta (0,1),(1,1)");
    assert_has(&o, &drv_line(NAME, "redirection table rejected: entries 0..8 must name each of the 8 receive queues exactly once (got [1, 1, 2, 3, 4, 5, 6, 7])"));
    assert_has(&o, "Bad redirection table parameter, return code = -22");
    // A table that does not repeat with period 8.
    let o = cmd(&mut t, "port config 0 rss reta (9,2)");
    assert_has(&o, &drv_line(NAME, "redirection table rejected: MANA repeats the queue list every 8 entries: entry 9 must equal entry 1 (1), not 2"));
    // A permutation of the first period only.
    let o = cmd(&mut t, "port config 0 rss reta (0,7),(7,0)");
    assert_has(&o, &drv_line(NAME, "redirection table rejected: MANA repeats the queue list every 8 entries: entry 8 must equal entry 0 (7), not 0"));
    // A queue that does not exist (ethdev refuses it before the driver).
    let o = cmd(&mut t, "port config 0 rss reta (0,8)");
    assert_has(&o, "Bad redirection table parameter, return code = -22");
    // Refused tables leave the old one in place.
    assert_eq!(query_reta(&mut t), default_reta(8));

    // Swapping two queues all over the table keeps it a repeated
    // permutation: taken, twice.
    for (i, j) in [(0, 7), (2, 5)] {
        let o = cmd(&mut t, &swap_cmd(&perm, i, j));
        assert!(!o.contains("Bad redirection table"), "{o}");
        assert!(!o.contains("net_mana:"), "{o}");
        perm.swap(i, j);
    }
    assert_eq!(perm, [7, 1, 5, 3, 4, 2, 6, 0]);
    assert_eq!(query_reta(&mut t), reta_of(&perm));
    cmd(&mut t, "port start 0");
    assert_eq!(query_reta(&mut t), reta_of(&perm), "kept across start");

    let fr = udp_frames(MAC_A, 1500, 3);
    let want = rss_spread(&fr, &reta_of(&perm), 8, false);
    assert!(want.iter().all(|&x| x > 0), "{want:?}");
    assert_ne!(
        want,
        rss_spread(&fr, &default_reta(8), 8, false),
        "the test tells the tables apart"
    );
    let (got, dev) = receive(&mut t, &fr, 8);
    assert_eq!(got, want, "per-queue counts follow the new RETA");
    // The device numbers RQs in table order: its i-th RQ is queue perm[i].
    let dev_want: Vec<u64> = perm.iter().map(|&q| want[usize::from(q)]).collect();
    assert_eq!(dev, dev_want);

    // The mbufs carry the hash, the queue of the table, the packet type and
    // the flags (testpmd's verbose dump).
    cmd(&mut t, "set verbose 1");
    let few = udp_frames(MAC_A, 24, 5);
    cmd(&mut t, "start");
    t.inject(MAC_A, &few).unwrap();
    let last = format!("RSS hash=0x{:x}", rss_hash(&few[23], false));
    let seen = t.wait_for(&last, Duration::from_secs(10)).unwrap();
    let out = cmd(&mut t, "stop");
    let all = seen + &out;
    for f in &few {
        let h = rss_hash(f, false);
        let q = perm[(h & 63) as usize % 8];
        assert_has(&all, &format!("RSS hash=0x{h:x} - RSS queue=0x{q:x}"));
    }
    assert_has(&all, "hw ptype: L2_ETHER L3_IPV4_EXT_UNKNOWN L4_UDP");
    assert_has(&all, "RTE_MBUF_F_RX_RSS_HASH");
    assert_has(&all, "RTE_MBUF_F_RX_L4_CKSUM_GOOD");
    assert_has(&all, "RTE_MBUF_F_RX_IP_CKSUM_GOOD");
    cmd(&mut t, "set verbose 0");

    // Hashing the UDP ports too: flows that differ only in their ports
    // spread over the queues.
    cmd(&mut t, "port stop 0");
    cmd(&mut t, "port config all rss udp");
    cmd(&mut t, "port start 0");
    let fr: Vec<Vec<u8>> = (0..800u16)
        .map(|i| {
            pkt::build::udp4(
                mac(MAC_A),
                [2, 0, 0, 0, 0, 9],
                [10, 1, 1, 1],
                [10, 2, 2, 2],
                1024 + i % 97,
                7000,
                40,
            )
        })
        .collect();
    let want = rss_spread(&fr, &reta_of(&perm), 8, true);
    assert!(want.iter().all(|&x| x > 0), "{want:?}");
    let (got, _) = receive(&mut t, &fr, 8);
    assert_eq!(got, want, "UDP-port hashing");

    // A new queue count resets the table to the default of that count.
    // (testpmd's `port config all rxq` re-applies its global hash types at
    // the next configure, so they are set back to IP first.)
    cmd(&mut t, "port stop 0");
    cmd(&mut t, "port config all rss ip");
    cmd(&mut t, "port config all rxq 4");
    cmd(&mut t, "port config all txq 4");
    cmd(&mut t, "port start 0");
    assert_eq!(query_reta(&mut t), default_reta(4));
    let o = cmd(&mut t, "show port 0 rss-hash");
    assert_has(&o, "ipv4  ipv4-frag  ipv4-other  ipv6  ipv6-frag");
    assert!(!o.contains("udp"), "{o}");
    let fr = udp_frames(MAC_A, 600, 7);
    let want = rss_spread(&fr, &default_reta(4), 4, false);
    let (got, dev) = receive(&mut t, &fr, 4);
    assert_eq!(got, want, "4 queues, default table");
    assert_eq!(dev, want);
    t.quit().unwrap();
}
