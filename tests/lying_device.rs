//! A device that lies (`Fault::Lie`): for a bounded time, seeded, the
//! emulator corrupts completions and events at random under load (owner
//! bits out of phase, unknown CQE types, lengths beyond the posted buffer,
//! wrong queue ids, WQE offsets outside the ring or off a WQE boundary,
//! repeated and missing completions, async events of unknown type). The
//! driver must survive it: testpmd stays alive, every kind of lie is
//! counted in xstats (exactly where the kind allows), no mbuf is returned
//! twice or lost (the mempool audit after `port stop all`), and both ports
//! forward again once the device tells the truth. A second, shorter run
//! is under valgrind's memcheck: no invalid read or write.
//!
//! The first case lies until 600 lies are told (`LYING_COUNT`; 10 minutes
//! at most, a hang); with `LYING_MS` set, for that long (`LYING_COUNT` then
//! optional).
//! `LYING_SEED` sets its seed, `LYING_PER_MILLION` how often a completion
//! lies, `LYING_KINDS` which kinds (`scripts/lying.sh` runs it long).

mod common;
use common::*;
use mana_emu::device::LieKind;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn env_u64(k: &str, default: u64) -> u64 {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Two ports wired to each other.
fn pair(options: &str) -> Config {
    config(
        options,
        "",
        &[(
            PCI,
            vec![
                PortDef::new(MAC_A, &format!(r#"{{ kind = "pair", peer = "{MAC_B}" }}"#)),
                PortDef::new(MAC_B, &format!(r#"{{ kind = "pair", peer = "{MAC_A}" }}"#)),
            ],
        )],
    )
}

/// An xstat summed over both ports and every queue of direction `dir`
/// ("rx", "tx", or "" for both).
fn sum(xs: &[BTreeMap<String, u64>], dir: &str, name: &str) -> u64 {
    xs.iter()
        .flat_map(|x| x.iter())
        .filter(|(k, _)| {
            (k.starts_with("rx_q") || k.starts_with("tx_q"))
                && k.starts_with(dir)
                && k.split_once('_')
                    .and_then(|(_, r)| r.split_once('_'))
                    .is_some_and(|(_, n)| n == name)
        })
        .map(|(_, v)| *v)
        .sum()
}

/// Waits until both ports move `n` more frames each way on the device,
/// every queue of theirs moving too, and the driver receives on both;
/// panics otherwise.
fn forwarding(t: &mut Testpmd, n: u64, what: &str) {
    let before = t.device_counters().unwrap();
    let queues = |c: &Counters| -> Vec<u64> {
        [MAC_A, MAC_B]
            .iter()
            .flat_map(|m| {
                let mut v = live_queue_packets(c, "rq", m);
                v.extend(live_queue_packets(c, "sq", m));
                v
            })
            .collect()
    };
    let q0 = queues(&before);
    let rx0: Vec<u64> = (0..2).map(|p| port_stats(t, p).rx_packets).collect();
    t.wait_device(Duration::from_secs(20), |c| {
        [MAC_A, MAC_B].iter().all(|m| {
            let (p, b) = (c.port(m).unwrap(), before.port(m).unwrap());
            p.tx_packets > b.tx_packets + n && p.rx_packets > b.rx_packets + n
        }) && queues(c)
            .iter()
            .zip(&q0)
            .all(|(now, was)| *now > *was + n / 20)
    })
    .unwrap_or_else(|e| panic!("{what}: no traffic: {e}\n{}", t.output()));
    for p in 0..2u16 {
        let t0 = Instant::now();
        loop {
            let s = port_stats(t, p);
            if s.rx_packets > rx0[usize::from(p)] + n {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(120),
                "{what}: port {p} receives nothing: {s:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// `show port stats`, asked again when the reply was only a late prompt
/// (testpmd under valgrind can print the previous command's prompt late).
fn port_stats(t: &mut Testpmd, p: u16) -> PortStats {
    let mut last = String::new();
    for _ in 0..5 {
        match t.port_stats(p) {
            Ok(s) => return s,
            Err(e) => last = e,
        }
    }
    panic!("port {p} stats: {last}\n{}", t.output())
}

/// The kinds of lies (`LYING_KINDS`, comma separated; all by default).
fn kinds() -> Vec<LieKind> {
    std::env::var("LYING_KINDS")
        .map(|v| {
            v.split(',')
                .map(|k| LieKind::parse(k).unwrap_or_else(|| panic!("LYING_KINDS: {k}?")))
                .collect()
        })
        .unwrap_or_default()
}

/// How long a lie lasts: until `count` lies are told (if given; so a
/// loaded machine, moving fewer completions, still sees them all) or `ms`
/// pass, whichever comes first.
#[derive(Clone, Copy)]
struct Bound {
    count: Option<u64>,
    ms: u64,
}

/// Lies within `bound` (the process must stay alive throughout), then stops.
fn lie(t: &Testpmd, seed: u64, per_million: u32, bound: Bound) {
    lie_kinds(t, seed, per_million, bound, kinds())
}

fn lie_kinds(t: &Testpmd, seed: u64, per_million: u32, bound: Bound, kinds: Vec<LieKind>) {
    let told = || -> u64 { t.device_counters().unwrap().device.lies.values().sum() };
    let before = told();
    t.fault(Fault::Lie {
        seed,
        per_million,
        kinds,
        count: bound.count,
        ms: Some(bound.ms),
    })
    .unwrap();
    let end = Instant::now() + Duration::from_millis(bound.ms);
    while Instant::now() < end {
        if let Some(how) = t.exited() {
            panic!("testpmd died while the device lied: {how}\n{}", t.output());
        }
        if bound.count.is_some_and(|n| told() >= before + n) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    t.fault(Fault::LieStop).unwrap();
}

/// The driver never reports more received than the device delivered (a
/// length beyond its buffer taken at its word would).
fn no_bytes_invented(t: &mut Testpmd, dev: &Counters) {
    for (p, m) in [(0u16, MAC_A), (1, MAC_B)] {
        let s = port_stats(t, p);
        let d = dev.port(m).unwrap();
        assert!(
            s.rx_packets <= d.rx_packets && s.rx_bytes <= d.rx_bytes,
            "port {p}: driver {s:?}, device {d:?}"
        );
    }
}

/// After `stop` and `port stop all`: every mbuf is back in its pool, once
/// (`parse_mempools` fails if a pool holds more free objects than its size).
fn audit(t: &mut Testpmd, baseline: u64) {
    let pools = mempools(t);
    for p in &pools {
        assert!(p.free <= p.size, "{p:?}");
    }
    let in_use: u64 = pools.iter().map(|p| p.in_use).sum();
    assert_eq!(in_use, baseline, "mbufs held after port stop: {pools:?}");
}

#[test]
fn the_driver_survives_a_lying_device_and_counts_every_lie() {
    let _g = lock();
    if skip() {
        return;
    }
    // By default the lies end at their count; the time bound only catches
    // a device that stopped moving completions.
    let ms = env_u64("LYING_MS", 600_000);
    let seed = env_u64("LYING_SEED", 0x11e5_0fad_e71c_e000);
    let per_million = env_u64("LYING_PER_MILLION", 4000) as u32;
    let env = EmuEnv::new("lying", pair("")).unwrap();
    let mut t = spawn(
        &env,
        &[
            "--rxq=2",
            "--txq=2",
            "--rxd=256",
            "--txd=256",
            "--forward-mode=flowgen",
        ],
    );
    cmd(&mut t, "port stop all");
    let baseline = mbufs_in_use(&mut t);
    cmd(&mut t, "port start all");
    cmd(&mut t, "start");
    forwarding(&mut t, 5000, "before the lies");
    // LYING_MS alone (a long run) lies for that long; by default, 600
    // lies, however long a loaded machine takes to tell them.
    let count = match std::env::var("LYING_MS") {
        Ok(_) => std::env::var("LYING_COUNT")
            .ok()
            .and_then(|v| v.parse().ok()),
        Err(_) => Some(env_u64("LYING_COUNT", 600)),
    };
    let t_lie = Instant::now();
    lie(&t, seed, per_million, Bound { count, ms });
    let lied = t_lie.elapsed();
    forwarding(&mut t, 20_000, "after the lies");
    cmd(&mut t, "stop");
    cmd(&mut t, "port stop all");
    let dev = settled(&t);
    no_bytes_invented(&mut t, &dev);
    let xs = [xstats(&mut t, 0), xstats(&mut t, 1)];
    let lies = &dev.device.lies;
    eprintln!("lies told: {lies:?}");
    for k in [
        "owner_stale",
        "owner_ahead",
        "unknown_type",
        "bad_length",
        "wrong_queue",
        "wqe_outside",
        "wqe_misaligned",
        "duplicate",
        "drop",
        "unknown_event",
    ] {
        if std::env::var("LYING_KINDS").is_err() {
            assert!(dev.device.lies(k) > 0, "no {k} lie told: {lies:?}");
        }
    }
    let l = |k: &str| dev.device.lies(k);
    let counted: BTreeMap<&str, u64> = mana_emu::harness::REFUSED_COMPLETION_XSTATS
        .into_iter()
        .map(|n| (n, sum(&xs, "", n)))
        .collect();
    eprintln!("driver counted: {counted:?}");
    for (p, x) in xs.iter().enumerate() {
        let nz: BTreeMap<_, _> = x
            .iter()
            .filter(|(k, v)| **v > 0 && !k.ends_with("bytes"))
            .collect();
        eprintln!("port {p}: {nz:?}");
    }
    // A slot out of phase is skipped once; a repeated completion takes a
    // slot more than the queue's WQEs need, so the device may lap a CQ
    // sized to them, and the slot it overwrote reads out of phase too.
    let ahead = l("owner_ahead");
    let overflows = counted["cq_overflows"];
    assert!(
        (ahead..=ahead + l("duplicate")).contains(&overflows),
        "{counted:?} {lies:?}"
    );
    // Each lie in a completion is seen once and refused or skipped once,
    // unless the device lapped the CQ over it (at most one lie per lapped
    // slot; each lapped slot is an overflow more than the lies ahead).
    let lapped = overflows - ahead;
    for (name, told) in [
        ("unexpected_completions", l("unknown_type")),
        ("bad_length_drops", l("bad_length")),
        ("wrong_queue_completions", l("wrong_queue")),
    ] {
        assert!(
            (told.saturating_sub(lapped)..=told).contains(&counted[name]),
            "{name}: {counted:?} {lies:?}"
        );
    }
    let events: u64 = xs.iter().map(|x| xstat(x, "unknown_device_events")).sum();
    assert_eq!(events, l("unknown_event"));
    // A WQE offset outside the ring or off a WQE boundary is always
    // refused, and so is a repeated completion (the RX ring holds twice
    // the WQEs posted; a TX completion must name a WQE in flight).
    let bad_offsets = l("wqe_outside") + l("wqe_misaligned");
    assert!(
        (bad_offsets.saturating_sub(lapped)..=bad_offsets + l("duplicate"))
            .contains(&counted["bad_wqe_completions"]),
        "{counted:?} {lies:?}"
    );
    // A stale slot is skipped once a later one is written (some were
    // written over in their next lap instead: never seen). A lapped slot
    // (see above) is skipped as out of phase and reads stale a lap later.
    assert!(
        counted["stale_completions"] <= l("owner_stale") + l("duplicate"),
        "{counted:?} {lies:?}"
    );
    assert!(counted["stale_completions"] > 0);
    // Missing completions are found from the next one's WQE offset.
    assert!(counted["missed_completions"] > 0);
    assert!(counted["errors"] > 0);
    // The driver never ran ahead of the device (posting over WQEs it had
    // not taken yet, a doorbell the device refuses).
    assert_eq!(dev.device.bad_doorbells, 0);
    audit(&mut t, baseline);
    t.quit().unwrap();
    let refused: u64 = counted
        .iter()
        .filter(|(k, _)| **k != "errors" && **k != "missed_completions")
        .map(|(_, v)| v)
        .sum();
    eprintln!(
        "lying: {} ms, {} lies told, {refused} garbled completions refused, skipped or dropped, mbufs back: yes",
        lied.as_millis(),
        lies.values().sum::<u64>()
    );
}

/// Each kind of lie alone, one after the other on one testpmd: what the
/// driver counts matches what the device did exactly, and every queue
/// forwards again after each.
#[test]
fn each_kind_of_lie_alone_is_counted_exactly() {
    let _g = lock();
    if skip() {
        return;
    }
    let env = EmuEnv::new("lying-each", pair("")).unwrap();
    let mut t = spawn(
        &env,
        &[
            "--rxq=2",
            "--txq=2",
            "--rxd=256",
            "--txd=256",
            "--forward-mode=flowgen",
        ],
    );
    cmd(&mut t, "port stop all");
    let baseline = mbufs_in_use(&mut t);
    cmd(&mut t, "port start all");
    cmd(&mut t, "start");
    forwarding(&mut t, 2000, "before the lies");
    let read = |t: &mut Testpmd| {
        let xs = [xstats(t, 0), xstats(t, 1)];
        // The refused completions but the queues' error count.
        let mut m: BTreeMap<String, u64> = mana_emu::harness::REFUSED_COMPLETION_XSTATS
            .into_iter()
            .filter(|n| *n != "errors")
            .map(|n| (n.to_string(), sum(&xs, "", n)))
            .collect();
        let ev = xs.iter().map(|x| xstat(x, "unknown_device_events")).sum();
        m.insert("unknown_device_events".into(), ev);
        m
    };
    for (i, kind) in LieKind::ALL.into_iter().enumerate() {
        let x0 = read(&mut t);
        let l0 = t.device_counters().unwrap().device.lies;
        let bound = Bound {
            count: Some(150),
            ms: 10_000,
        };
        lie_kinds(&t, 1000 + i as u64, 20_000, bound, vec![kind]);
        forwarding(&mut t, 2000, &format!("after {kind:?} lies"));
        let x1 = read(&mut t);
        let l1 = t.device_counters().unwrap().device.lies;
        let d = |n: &str| x1[n] - x0[n];
        let l = |n: &str| l1.get(n).copied().unwrap_or(0) - l0.get(n).copied().unwrap_or(0);
        let moved: BTreeMap<&str, u64> = x1
            .keys()
            .map(|k| (k.as_str(), d(k)))
            .filter(|(_, v)| *v > 0)
            .collect();
        let told_now: BTreeMap<&str, u64> = l1
            .keys()
            .map(|k| (k.as_str(), l(k)))
            .filter(|(_, v)| *v > 0)
            .collect();
        eprintln!("{kind:?}: told {told_now:?}, counted {moved:?}");
        let (want, told): (&[(&str, u64)], u64) = match kind {
            LieKind::OwnerPhase => (
                &[
                    ("cq_overflows", l("owner_ahead")),
                    ("stale_completions", l("owner_stale")),
                ],
                l("owner_ahead") + l("owner_stale"),
            ),
            LieKind::UnknownType => (
                &[("unexpected_completions", l("unknown_type"))],
                l("unknown_type"),
            ),
            LieKind::BadLength => (&[("bad_length_drops", l("bad_length"))], l("bad_length")),
            LieKind::WrongQueue => (
                &[("wrong_queue_completions", l("wrong_queue"))],
                l("wrong_queue"),
            ),
            LieKind::BadWqeOffset => (
                &[(
                    "bad_wqe_completions",
                    l("wqe_outside") + l("wqe_misaligned"),
                )],
                l("wqe_outside") + l("wqe_misaligned"),
            ),
            LieKind::Duplicate => (&[], l("duplicate")),
            LieKind::Drop => (&[], l("drop")),
            LieKind::UnknownEvent => (
                &[("unknown_device_events", l("unknown_event"))],
                l("unknown_event"),
            ),
        };
        assert!(told > 0, "{kind:?}: no lie told");
        for (name, n) in want {
            assert_eq!(d(name), *n, "{kind:?}: {name}; counted {moved:?}");
        }
        match kind {
            // Each repeated completion is refused, unless the device
            // lapped the CQ first (it holds one entry per WQE; the
            // repeats overfill it), which overwrites it.
            LieKind::Duplicate => {
                let (refused, lapped) = (d("bad_wqe_completions"), d("cq_overflows"));
                assert!(refused <= told && refused + lapped >= told, "{moved:?}");
            }
            // A completion lost (skipped, refused or never written) is
            // found missing from the next one's WQE offset: one WQE each
            // (single-packet completions here).
            LieKind::OwnerPhase | LieKind::WrongQueue | LieKind::BadWqeOffset | LieKind::Drop => {
                assert_eq!(d("missed_completions"), told, "{moved:?}")
            }
            _ => {}
        }
    }
    cmd(&mut t, "stop");
    cmd(&mut t, "port stop all");
    let dev = settled(&t);
    no_bytes_invented(&mut t, &dev);
    assert_eq!(dev.device.bad_doorbells, 0);
    audit(&mut t, baseline);
    t.quit().unwrap();
}

/// The same lies, shorter and on one queue pair per port, under valgrind's
/// memcheck: the driver never reads or writes outside its rings and
/// buffers, whatever the completions say.
#[test]
fn a_lying_device_makes_no_invalid_access_under_valgrind() {
    let _g = lock();
    if skip() {
        return;
    }
    if std::process::Command::new("valgrind")
        .arg("--version")
        .output()
        .is_err()
    {
        panic!("valgrind missing: scripts/setup.sh installs it");
    }
    // Poll-mode doorbells: valgrind does not replay the emulator's
    // instruction-skipping SIGSEGV handler.
    let env = EmuEnv::new("lying-vg", pair(r#"doorbell_mode = "poll""#)).unwrap();
    let supp = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/dpdk.supp");
    let wrapper = env.config_path.with_file_name("testpmd-under-valgrind");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho testpmd under valgrind\nexec valgrind --fair-sched=yes --error-exitcode=99 --errors-for-leak-kinds=none -q --suppressions={} dpdk-testpmd \"$@\"\n",
            supp.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let mut t = Testpmd::builder(&env)
        .testpmd(wrapper)
        .driver(pmd())
        .args(&["--rxd=256", "--txd=256", "--forward-mode=flowgen"])
        .timeout(Duration::from_secs(300))
        .spawn()
        .expect("testpmd starts under valgrind");
    let t0 = Instant::now();
    cmd(&mut t, "start");
    forwarding(&mut t, 200, "under valgrind, before the lies");
    eprintln!("valgrind: traffic after {:?}", t0.elapsed());
    let bound = Bound {
        count: Some(80),
        ms: 20_000,
    };
    lie(&t, env_u64("LYING_SEED", 0x7a19e5), 50_000, bound);
    eprintln!("valgrind: lies over after {:?}", t0.elapsed());
    forwarding(&mut t, 500, "under valgrind, after the lies");
    eprintln!("valgrind: traffic again after {:?}", t0.elapsed());
    cmd(&mut t, "stop");
    cmd(&mut t, "port stop all");
    let dev = settled(&t);
    eprintln!("lies told under valgrind: {:?}", dev.device.lies);
    assert!(
        dev.device.lies.values().sum::<u64>() > 20,
        "{:?}",
        dev.device.lies
    );
    let out = t.quit().unwrap_or_else(|e| panic!("{e}"));
    assert!(out.contains("testpmd under valgrind"), "{out}");
    assert!(!out.contains("Invalid read"), "{out}");
    assert!(!out.contains("Invalid write"), "{out}");
}
