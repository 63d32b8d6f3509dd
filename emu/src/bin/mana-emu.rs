//! `mana-emu`: set up and steer the emulated MANA device.
//!
//! ```text
//! mana-emu sysfs <config.toml>            create the fake PCI + IB sysfs trees
//! mana-emu example-config                 print a commented configuration
//! mana-emu counters [SOCKET-OPTS] [--mac M]
//! mana-emu state [SOCKET-OPTS]
//! mana-emu inject [SOCKET-OPTS] <fault> [fault options] [--after-ms N | --after-packets N | --at-create N | --at-rq-doorbell N]
//!     reset --pci P [--down-ms N] [--new-name NAME] | reset-end --pci P | hot-remove --pci P | hot-add --pci P
//!     link-down --mac M | link-up --mac M | tx-pause --mac M | tx-resume --mac M
//!     cqe-delay --ms N --count N | cqe-corrupt --count N | alloc-fail --count N
//!     lie --seed N --per-million N [--kinds K,K...] [--count N] [--ms N] | lie-stop
//!       (kinds: owner_phase unknown_type bad_length wrong_queue bad_wqe_offset
//!        duplicate drop unknown_event; all if not given)
//!     kernel-if --mac M up|down
//!     netdev-link --mac M [--speed MBPS] [--carrier 0|1]  (its sysfs speed, carrier)
//! mana-emu send [SOCKET-OPTS] --mac M (--pcap FILE | --hex HEX ...)
//! mana-emu ping [SOCKET-OPTS]
//!
//! SOCKET-OPTS: --socket PATH | --pid PID [--config C] | --config C
//!   (default: the newest process of MANA_EMU_CONFIG's run_dir)
//! ```

use mana_emu::control::{self, Request};
use mana_emu::device::{Fault, LieKind, Trigger};
use mana_emu::Config;
use std::path::PathBuf;
use std::process::ExitCode;

fn usage() -> ExitCode {
    eprintln!(
        "{}",
        include_str!("mana-emu.rs")
            .lines()
            .skip(2)
            .take(15)
            .map(|l| l.trim_start_matches("//! ").trim_start_matches("//!"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    ExitCode::from(2)
}

struct Args {
    rest: Vec<String>,
}

impl Args {
    fn take_opt(&mut self, name: &str) -> Option<String> {
        let i = self.rest.iter().position(|a| a == name)?;
        if i + 1 >= self.rest.len() {
            return None;
        }
        let v = self.rest.remove(i + 1);
        self.rest.remove(i);
        Some(v)
    }
    fn take_all(&mut self, name: &str) -> Vec<String> {
        let mut v = Vec::new();
        while let Some(x) = self.take_opt(name) {
            v.push(x);
        }
        v
    }
    fn need(&mut self, name: &str) -> Result<String, String> {
        self.take_opt(name).ok_or_else(|| format!("missing {name}"))
    }
    fn num(&mut self, name: &str) -> Result<u64, String> {
        self.need(name)?
            .parse()
            .map_err(|_| format!("{name}: not a number"))
    }
}

fn socket(a: &mut Args) -> Result<PathBuf, String> {
    if let Some(s) = a.take_opt("--socket") {
        return Ok(s.into());
    }
    let cfg = match a.take_opt("--config") {
        Some(c) => Config::load(std::path::Path::new(&c))?,
        None => Config::from_env()?,
    };
    let dir = cfg.options.run_dir;
    if let Some(pid) = a.take_opt("--pid") {
        let pid: u32 = pid.parse().map_err(|_| "--pid: not a number")?;
        return Ok(control::socket_path(&dir, pid));
    }
    Ok(control::latest_path(&dir))
}

fn fault(a: &mut Args) -> Result<(Fault, Trigger), String> {
    let trigger = if let Some(ms) = a.take_opt("--after-ms") {
        Trigger::AfterMs(ms.parse().map_err(|_| "--after-ms: not a number")?)
    } else if let Some(n) = a.take_opt("--after-packets") {
        Trigger::AfterPackets(n.parse().map_err(|_| "--after-packets: not a number")?)
    } else if let Some(n) = a.take_opt("--at-create") {
        Trigger::AtCreate(n.parse().map_err(|_| "--at-create: not a number")?)
    } else if let Some(n) = a.take_opt("--at-rq-doorbell") {
        Trigger::AtRqDoorbell(n.parse().map_err(|_| "--at-rq-doorbell: not a number")?)
    } else {
        Trigger::Now
    };
    if a.rest.is_empty() {
        return Err("missing fault kind".into());
    }
    let kind = a.rest.remove(0);
    let f = match kind.as_str() {
        "reset" => Fault::Reset {
            pci: a.need("--pci")?,
            down_ms: a.take_opt("--down-ms").map(|v| v.parse().unwrap_or(0)),
            new_name: a.take_opt("--new-name"),
        },
        "reset-end" => Fault::ResetEnd {
            pci: a.need("--pci")?,
        },
        "hot-remove" => Fault::HotRemove {
            pci: a.need("--pci")?,
        },
        "hot-add" => Fault::HotAdd {
            pci: a.need("--pci")?,
        },
        "link-down" => Fault::LinkDown {
            mac: a.need("--mac")?,
        },
        "link-up" => Fault::LinkUp {
            mac: a.need("--mac")?,
        },
        "tx-pause" => Fault::TxPause {
            mac: a.need("--mac")?,
        },
        "tx-resume" => Fault::TxResume {
            mac: a.need("--mac")?,
        },
        "cqe-delay" => Fault::CqeDelay {
            ms: a.num("--ms")?,
            count: a.num("--count")? as u32,
        },
        "cqe-corrupt" => Fault::CqeCorrupt {
            count: a.num("--count")? as u32,
        },
        "lie" => {
            let kinds = match a.take_opt("--kinds") {
                Some(k) => k
                    .split(',')
                    .map(|k| LieKind::parse(k.trim()).ok_or(format!("lie: unknown kind {k}")))
                    .collect::<Result<Vec<_>, _>>()?,
                None => Vec::new(),
            };
            let opt = |v: Option<String>, what: &str| -> Result<Option<u64>, String> {
                v.map(|v| v.parse().map_err(|_| format!("{what}: not a number")))
                    .transpose()
            };
            Fault::Lie {
                seed: a.num("--seed")?,
                per_million: a.num("--per-million")? as u32,
                kinds,
                count: opt(a.take_opt("--count"), "--count")?,
                ms: opt(a.take_opt("--ms"), "--ms")?,
            }
        }
        "lie-stop" => Fault::LieStop,
        "alloc-fail" => Fault::AllocFail {
            count: a.num("--count")? as u32,
        },
        "netdev-link" => {
            let mac = a.need("--mac")?;
            let speed_mbps = match a.take_opt("--speed") {
                Some(s) => Some(
                    s.parse()
                        .map_err(|_| format!("--speed {s}: not a number"))?,
                ),
                None => None,
            };
            let carrier = match a.take_opt("--carrier").as_deref() {
                Some("1") => Some(true),
                Some("0") => Some(false),
                Some(c) => return Err(format!("--carrier {c}: say 0 or 1")),
                None => None,
            };
            Fault::NetdevLink {
                mac,
                speed_mbps,
                carrier,
            }
        }
        "kernel-if" => {
            let mac = a.need("--mac")?;
            let up = match a.rest.first().map(String::as_str) {
                Some("up") => true,
                Some("down") => false,
                _ => return Err("kernel-if: say up or down".into()),
            };
            a.rest.remove(0);
            Fault::KernelIf { mac, up }
        }
        k => return Err(format!("unknown fault {k}")),
    };
    Ok((f, trigger))
}

fn run() -> Result<(), String> {
    let mut argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.is_empty() {
        return Err("usage".into());
    }
    let cmd = argv.remove(0);
    let mut a = Args { rest: argv };
    match cmd.as_str() {
        "sysfs" => {
            let path = a
                .rest
                .first()
                .cloned()
                .or_else(|| std::env::var("MANA_EMU_CONFIG").ok())
                .ok_or("sysfs <config>")?;
            let cfg = Config::load(std::path::Path::new(&path))?;
            mana_emu::sysfs::create_all(&cfg).map_err(|e| format!("sysfs: {e}"))?;
            println!("SYSFS_PCI_DEVICES={}", cfg.pci_devices_dir().display());
            for ad in &cfg.adapters {
                for name in mana_emu::sysfs::ib_names(ad) {
                    println!(
                        "{} {} {}",
                        ad.pci,
                        name,
                        mana_emu::sysfs::ib_dir(&cfg.options.sysfs_root, &name).display()
                    );
                }
            }
            Ok(())
        }
        "example-config" => {
            print!("{}", EXAMPLE);
            Ok(())
        }
        "counters" => {
            let mac = a.take_opt("--mac");
            let s = socket(&mut a)?;
            let rep = control::request(&s, &Request::Counters)?;
            let c = rep.counters.ok_or("no counters in reply")?;
            let out = match mac {
                Some(m) => serde_json::to_string_pretty(c.port(&m).ok_or(format!("no port {m}"))?),
                None => serde_json::to_string_pretty(&c),
            }
            .map_err(|e| e.to_string())?;
            println!("{out}");
            Ok(())
        }
        "state" => {
            let s = socket(&mut a)?;
            let rep = control::request(&s, &Request::State)?;
            let st = rep.state.ok_or("no state in reply")?;
            println!(
                "{}",
                serde_json::to_string_pretty(&st).map_err(|e| e.to_string())?
            );
            Ok(())
        }
        "inject" => {
            let s = socket(&mut a)?;
            let (f, t) = fault(&mut a)?;
            control::request(
                &s,
                &Request::Fault {
                    fault: f,
                    trigger: t,
                },
            )?;
            Ok(())
        }
        "send" => {
            let s = socket(&mut a)?;
            let mac = a.need("--mac")?;
            let mut frames: Vec<String> = a.take_all("--hex");
            if let Some(p) = a.take_opt("--pcap") {
                let fr = mana_emu::backend::read_pcap(std::path::Path::new(&p))
                    .map_err(|e| e.to_string())?;
                frames.extend(fr.iter().map(|f| control::hex_encode(f)));
            }
            let n = frames.len();
            for chunk in frames.chunks(256) {
                control::request(
                    &s,
                    &Request::Inject {
                        mac: mac.clone(),
                        frames: chunk.to_vec(),
                    },
                )?;
            }
            println!("sent {n} frame(s) into {mac}");
            Ok(())
        }
        "ping" => {
            let s = socket(&mut a)?;
            let r = control::request(&s, &Request::Ping)?;
            println!("pid {}", r.pid.unwrap_or(0));
            Ok(())
        }
        "help" | "--help" | "-h" => Err("usage".into()),
        c => Err(format!("unknown command {c}")),
    }
}

const EXAMPLE: &str = r#"# mana-emu configuration (MANA_EMU_CONFIG=<this file>)
[options]
doorbell_mode = "trap"        # "trap" (exact, SIGSEGV) or "poll" (memfd, for secondaries)
rx_coalesce = false           # CQE_RX_COALESCED_4 completions (DPDK 22.11 cannot parse them)
rdma_core = "v44"             # "v44": CQ/SQ/RQ <= 256 entries (Debian bookworm); "modern"
                              # (leave it out to take [limits] profile's)
sysfs_root = "/tmp/mana-emu/sys"   # SYSFS_PCI_DEVICES=<sysfs_root>/bus/pci/devices
run_dir = "/tmp/mana-emu/run"      # control sockets: mana-emu-<pid>.sock, mana-emu.sock
counters_dump = "/tmp/mana-emu/counters.json"   # written at process exit
reset_down_ms = 2000          # how long a reset hides the device
bench = "off"                 # "saturate": queues kept saturated for benchmarks (emu/README.md)

[limits]                      # ibv_query_device(_ex) attributes and kernel behaviour
# profile = "linux-7+rdma-core-65"   # a measured stack (linux-<6.12|7>+rdma-core-<44|56|65>):
#                                    # sets every field below and rdma_core; fields given override
# ib_devices = 2              # 7.x: the Ethernet IB device manae_0 beside the RNIC mana_0
# vport_busy_errno = 16       # a raw QP on a port whose netdev is up: EBUSY (7.x), 19 ENODEV (6.12)
max_qp = 64
max_qp_wr = 2048
max_sge = 15

[[adapter]]
pci = "7870:00:00.0"
numa_node = 0
ib_name = "mana_0"
# ib_name_after_reset = "manae_0"

[[adapter.port]]
mac = "00:0d:3a:00:00:01"
ifname = "eth1"
backend = { kind = "pair", peer = "00:0d:3a:00:00:02" }
mtu = 1500
kernel_if_up = false          # true: RAW QP creation fails (limits.vport_busy_errno)

[[adapter.port]]
mac = "00:0d:3a:00:00:02"
ifname = "eth2"
backend = { kind = "pair", peer = "00:0d:3a:00:00:01" }
# other backends: { kind = "loopback" }, { kind = "sink" },
#   { kind = "pcap", rx = "in.pcap", tx = "out.pcap" }, { kind = "af_packet", ifname = "veth0" }

# A Hyper-V synthetic NIC on VMBus for DPDK's netvsc PMD (uncomment): the
# MANA port with this MAC is its VF and shares its wire.
# [[netvsc]]
# mac = "00:0d:3a:00:00:01"
# max_queues = 8            # channels offered
# vf_add_delay_ms = 1500    # hot add: association this long after the PCI add
# vf_revoke_on_remove = false
"#;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e == "usage" => usage(),
        Err(e) => {
            eprintln!("mana-emu: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn example_config_parses() {
        let c = mana_emu::Config::parse(super::EXAMPLE).unwrap();
        assert_eq!(c.adapters[0].ports.len(), 2);
    }
}
