//! The guest tier: boots the trixie 6.12 cloud kernel under QEMU with the
//! MANA function attached and runs the scenarios on it, one line each:
//! `<scenario>: ok` or `<scenario>: FAILED <reason>` (followed, on failure,
//! by the guest's kernel log and the device's log). Exits 1 if any failed.
//!
//! `mana-guest [-v] [--cpus N] [SCENARIO...]` (the stack's scenarios by
//! default; `MANA_GUEST_STACK` names the stack, `bookworm` if unset);
//! `mana-guest --shell CMD...` boots and runs guest commands instead.

use mana_pci::guest::scenarios::{describe_boot, Tier, OPT_IN_SCENARIOS, SCENARIOS};
use mana_pci::guest::stack;
use std::time::{Duration, Instant};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let verbose = args.iter().any(|a| a == "-v");
    args.retain(|a| a != "-v");
    let mut cpus = 4;
    if let Some(i) = args.iter().position(|a| a == "--cpus") {
        cpus = args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| {
                eprintln!("mana-guest: --cpus needs a number");
                std::process::exit(2)
            });
        args.drain(i..i + 2);
    }
    let shell = args.first().is_some_and(|a| a == "--shell");
    if shell {
        args.remove(0);
    }
    for a in &args {
        if !shell && !SCENARIOS.contains(&a.as_str()) && !OPT_IN_SCENARIOS.contains(&a.as_str()) {
            eprintln!(
                "mana-guest: unknown scenario {a} (known: {}; run only when named: {})",
                SCENARIOS.join(", "),
                OPT_IN_SCENARIOS.join(", ")
            );
            std::process::exit(2);
        }
    }
    let log_path = std::env::temp_dir().join(format!("mana-pci-{}.log", std::process::id()));
    let log = std::fs::File::create(&log_path).expect("device log file");
    mana_pci::logging::init(Some(log));
    let t0 = Instant::now();
    let stack = match stack::selected() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mana-guest: MANA_GUEST_STACK: {e}");
            std::process::exit(2)
        }
    };
    let mut tier = match Tier::start(stack, cpus, log_path.clone()) {
        Ok(t) => t,
        Err(e) => {
            let tail = std::fs::read_to_string(&log_path).unwrap_or_default();
            println!("guest: FAILED {e}\n--- device log ---\n{tail}");
            std::process::exit(1)
        }
    };
    println!("guest: {}", describe_boot(&tier));
    if shell {
        // `--sink PORT` first: a TCP sink in the peer namespace.
        let mut sink = None;
        if args.first().is_some_and(|a| a == "--sink") {
            let port: u16 = args[1].parse().expect("--sink PORT");
            args.drain(..2);
            sink = Some(tier.peer.tcp_sink(port, Duration::from_secs(60)));
        }
        for cmd in &args {
            match tier.vm.console.run(cmd, Duration::from_secs(120)) {
                Ok(o) => println!("$ {cmd}  [{}]\n{}", o.status, o.text),
                Err(e) => println!("$ {cmd}: {e}"),
            }
        }
        if let Some(s) = sink {
            println!("sink: {:?}", s.join().unwrap().map(|v| v.len()));
        }
        let d = mana_pci::vfio::lock(&tier.func.dev);
        let c = d.net.counters();
        println!("device: port {:?}", c.ports[0].counters);
        for q in c.queues.iter().filter(|q| q.live) {
            println!("device: {} {}: {:?}", q.kind, q.id, q.counters);
        }
        println!("device: {:?}, errors {:?}", c.device, d.errors);
        println!("--- device log ---\n{}", tier.device_log_tail(40));
        return;
    }
    let list: Vec<&str> = if args.is_empty() {
        stack.scenarios.unwrap_or(&SCENARIOS).to_vec()
    } else {
        SCENARIOS
            .iter()
            .chain(OPT_IN_SCENARIOS.iter())
            .copied()
            .filter(|s| args.iter().any(|a| a == s))
            .collect()
    };
    let mut failed = 0;
    let mut probe_ok = true;
    for name in list {
        let s0 = Instant::now();
        let r = if !probe_ok && name != "kernel-probe" {
            Err("not run: kernel-probe failed".to_string())
        } else {
            tier.run(name)
        };
        let took = s0.elapsed().as_secs_f64();
        match r {
            Ok(summary) => {
                println!("{name}: ok");
                if verbose {
                    println!("    {summary} ({took:.1} s)");
                }
            }
            Err(reason) => {
                failed += 1;
                if name == "kernel-probe" {
                    probe_ok = false;
                }
                println!("{name}: FAILED {reason}");
                println!("--- guest kernel log ---\n{}", tier.kernel_log().trim_end());
                println!("--- device log (tail) ---\n{}", tier.device_log_tail(60));
            }
        }
    }
    tier.vm.shutdown();
    tier.func.stop();
    if verbose {
        println!("guest tier: {:.1} s in all", t0.elapsed().as_secs_f64());
    }
    // Exit skips destructors: the run directory and the peer go first.
    drop(tier);
    // MANA_GUEST_KEEP_LOG keeps the whole device log (the failure report
    // shows its tail only).
    if std::env::var_os("MANA_GUEST_KEEP_LOG").is_some() {
        println!("device log kept in {}", log_path.display());
    } else {
        let _ = std::fs::remove_file(&log_path);
    }
    std::process::exit(i32::from(failed > 0));
}
