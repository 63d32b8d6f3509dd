//! mana-preflight: is this VM ready for DPDK on MANA, what to fix, and the
//! EAL arguments to use.
//!
//!   mana-preflight [--iface NAME | --mac MAC]... [--json]
//!   mana-preflight --apply (--iface NAME | --mac MAC)... [--state FILE]
//!   mana-preflight --undo [--state FILE]
//!
//!   --sysfs-root DIR, --proc-root DIR (or MANA_PREFLIGHT_SYSFS /
//!   MANA_PREFLIGHT_PROC): read another tree than /sys and /proc.
//!
//! Exit status: 0 ready (or the change done), 1 not ready (or it failed),
//! 2 bad arguments.

use mana_preflight::{inspect, prepare, undo, Changes, Roots};
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: mana-preflight [--iface NAME | --mac MAC]... [--json]
       mana-preflight --apply (--iface NAME | --mac MAC)... [--state FILE]
       mana-preflight --undo [--state FILE]
  --sysfs-root DIR, --proc-root DIR: read another tree than /sys and /proc";

fn main() -> ExitCode {
    let mut roots = Roots::default();
    if let Some(d) = std::env::var_os("MANA_PREFLIGHT_SYSFS") {
        roots.sys = d.into();
    }
    if let Some(d) = std::env::var_os("MANA_PREFLIGHT_PROC") {
        roots.proc = d.into();
    }
    let (mut json, mut apply, mut revert) = (false, false, false);
    let mut select = Vec::new();
    let mut state = PathBuf::from("/run/mana-preflight/state.json");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |what: &str| {
            args.next().ok_or_else(|| {
                eprintln!("mana-preflight: {a} needs {what}\n{USAGE}");
            })
        };
        let ok = match a.as_str() {
            "--json" => {
                json = true;
                Ok(())
            }
            "--apply" => {
                apply = true;
                Ok(())
            }
            "--undo" => {
                revert = true;
                Ok(())
            }
            "--iface" | "--mac" => value("a value").map(|v| select.push(v)),
            "--state" => value("a file").map(|v| state = v.into()),
            "--sysfs-root" => value("a directory").map(|v| roots.sys = v.into()),
            "--proc-root" => value("a directory").map(|v| roots.proc = v.into()),
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            _ => {
                eprintln!("mana-preflight: unknown argument {a}\n{USAGE}");
                Err(())
            }
        };
        if ok.is_err() {
            return ExitCode::from(2);
        }
    }
    if apply && revert {
        eprintln!("mana-preflight: --apply or --undo, not both");
        return ExitCode::from(2);
    }
    if revert {
        let ch: Changes = match std::fs::read_to_string(&state)
            .map_err(|e| e.to_string())
            .and_then(|s| serde_json::from_str(&s).map_err(|e| e.to_string()))
        {
            Ok(c) => c,
            Err(e) => {
                eprintln!(
                    "mana-preflight: no state to undo in {}: {e}",
                    state.display()
                );
                return ExitCode::FAILURE;
            }
        };
        return match undo(&roots, &ch) {
            Ok(()) => {
                let _ = std::fs::remove_file(&state);
                println!(
                    "restored: {} interface(s) up, {} hugepage setting(s), {} synthetic NIC(s) back to hv_netvsc",
                    ch.downed.len(),
                    ch.hugepages.len(),
                    ch.moved.len()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!(
                    "mana-preflight: undo: {e} (state kept in {})",
                    state.display()
                );
                ExitCode::FAILURE
            }
        };
    }
    if apply {
        let (ch, err) = match prepare(&roots, &select) {
            Ok(c) => (c, None),
            Err((c, e)) => (c, Some(e)),
        };
        if ch != Changes::default() {
            let saved = state
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::write(&state, serde_json::to_string_pretty(&ch).unwrap()));
            if let Err(e) = saved {
                eprintln!("mana-preflight: cannot record the changes in {}: {e}; undo them by hand: {ch:?}", state.display());
            }
        }
        for n in &ch.downed {
            println!("set {n} down");
        }
        for (p, was) in &ch.hugepages {
            // What the kernel reserved, which may be fewer than asked.
            let now = std::fs::read_to_string(p).unwrap_or_default();
            println!(
                "reserved {} hugepages in {} (was {was})",
                now.trim(),
                p.display()
            );
        }
        for u in &ch.moved {
            println!("moved synthetic NIC {u} from hv_netvsc to uio_hv_generic");
        }
        if let Some(e) = err {
            eprintln!("mana-preflight: --apply: {e}");
            return ExitCode::FAILURE;
        }
        println!(
            "recorded in {} (mana-preflight --undo restores it)",
            state.display()
        );
    }
    let report = inspect(&roots, &select);
    if json {
        println!("{}", serde_json::to_string_pretty(&report).unwrap());
    } else {
        print!("{}", report.render());
    }
    if report.ready {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
