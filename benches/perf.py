#!/usr/bin/env python3
"""Per-packet cost of net_mana (Rust) against DPDK 22.11's C net/mana driver
on the same emulated MANA device. Run through benches/run.sh, which builds
everything first; doc/performance.md explains the method and the numbers.

Two parts, both drivers in one invocation:

1. Instructions per packet inside the drivers' rx/tx burst functions,
   counted by callgrind (deterministic), for txonly, rxonly and io
   forwarding, 64- and 1500-byte frames, burst 32, 1 and 4 queues. The
   emulator runs in its poll doorbell mode and benches/pace.c paces the
   bursts (see there), so the device model never runs on the measured
   thread and every count is reproducible.
2. Packets per second of testpmd io forwarding between two paired emulated
   ports (no valgrind), the drivers alternated A/B, the median of the
   per-pair ratios reported.
3. Cycles per packet on the forwarding lcore (testpmd's
   `--record-core-cycles`, no valgrind) for txonly, rxonly and io against
   the emulator's saturating benchmark mode (`bench = "saturate"`: TX
   completed by ring bookkeeping, RX completed from a template), so the
   device never makes the lcore wait; the drivers alternated A/B, the
   median of the per-pair ratios reported, with packets per burst call to
   show the queues stayed saturated.
"""

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
REL = REPO / "target" / "release"
OUT = REPO / "target" / "bench"
EMU_LIB = REL / "examples" / "libmana_emu.so"
EMU_CLI = REL / "mana-emu"
PACE_LIB = OUT / "libbench_pace.so"
UPSTREAM = REPO / "target" / "upstream-c"

DRIVERS = {
    "rust": {
        "label": "net_mana (Rust)",
        "plugin": REL / "librte_net_mana.so",
        "preload": [],
    },
    "c": {
        "label": "DPDK 22.11 net/mana (C)",
        "plugin": UPSTREAM / "librte_net_mana_upstream.so",
        # DPDK 22.11's C driver never reports its queues started; testpmd
        # then disables every stream (tests/upstream/queue-state-shim.c).
        "preload": [UPSTREAM / "libtestpmd_qstate_shim.so"],
    },
}



def use_dpdk(release):
    """Measures on another DPDK than bookworm's 22.11: benches/run.sh --dpdk
    built it (scripts/dpdk.sh), our driver and the pacing shim against it,
    put its testpmd first on PATH and names the binaries here. DPDK's own
    C driver of that release needs no queue-state shim (23.11 and later
    report their queues started)."""
    global PACE_LIB
    env = {k: os.environ.get(k) for k in
           ("NET_MANA_BENCH_PMD", "NET_MANA_BENCH_C_PMD", "NET_MANA_BENCH_PACE")}
    missing = [k for k, v in env.items() if not v]
    if missing:
        sys.exit(f"perf.py: --dpdk {release} needs {', '.join(missing)}: "
                 f"run benches/run.sh --dpdk {release}")
    DRIVERS["rust"]["plugin"] = Path(env["NET_MANA_BENCH_PMD"])
    DRIVERS["c"].update(label=f"DPDK {release} net/mana (C)",
                        plugin=Path(env["NET_MANA_BENCH_C_PMD"]), preload=[])
    PACE_LIB = Path(env["NET_MANA_BENCH_PACE"])


MAC_A, MAC_B = "00:0d:3a:00:00:0a", "00:0d:3a:00:00:0b"
PCI_A, PCI_B = "7870:00:00.0", "7871:00:00.0"
BURST = 32
TRAMPOLINES = ("bench_rx_busy", "bench_rx_idle", "bench_tx_busy", "bench_tx_prep")
# The offload rows: testpmd's csum engine with IP and TCP checksum offload and
# VLAN insertion on both ports, the RSS hash requested on receive.
CSUM_VLAN = 100


# DPDK's default RSS key (the one both drivers program when testpmd passes
# none); used only to spread injected frames evenly over the RX queues.
RSS_KEY = bytes([
    0x2c, 0xc6, 0x81, 0xd1, 0x5b, 0xdb, 0xf4, 0xf7, 0xfc, 0xa2, 0x83, 0x19, 0xdb, 0x1a, 0x3e, 0x94,
    0x6b, 0x9e, 0x38, 0xd9, 0x2c, 0x9c, 0x03, 0xd1, 0xad, 0x99, 0x44, 0xa7, 0xd9, 0x56, 0x3d, 0x59,
    0x06, 0x3c, 0x25, 0xf3, 0xfc, 0x1f, 0xdc, 0x2a,
])


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# Frames
# ---------------------------------------------------------------------------

def csum16(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(int.from_bytes(b[i:i + 2], "big") for i in range(0, len(b), 2))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return (~s) & 0xffff


def mac_bytes(m):
    return bytes(int(x, 16) for x in m.split(":"))


def udp_frame(dst_mac, src_ip, dst_ip, sport, size):
    """An Ethernet/IPv4/UDP frame of `size` bytes (no FCS), checksums valid."""
    payload = bytes((i * 7) & 0xff for i in range(size - 42))
    udp_len = 8 + len(payload)
    pseudo = bytes(src_ip) + bytes(dst_ip) + bytes([0, 17]) + udp_len.to_bytes(2, "big")
    udp = sport.to_bytes(2, "big") + (4789).to_bytes(2, "big") + udp_len.to_bytes(2, "big")
    uc = csum16(pseudo + udp + b"\0\0" + payload) or 0xffff
    udp += uc.to_bytes(2, "big") + payload
    ip = bytes([0x45, 0]) + (20 + udp_len).to_bytes(2, "big") + bytes([0, 1, 0, 0, 64, 17, 0, 0])
    ip += bytes(src_ip) + bytes(dst_ip)
    ip = ip[:10] + csum16(ip).to_bytes(2, "big") + ip[12:]
    return mac_bytes(dst_mac) + bytes([2, 0, 0, 0, 0, 1]) + b"\x08\x00" + ip + udp


def toeplitz(key, data):
    h = 0
    k = int.from_bytes(key, "big")
    kbits = len(key) * 8
    for i, byte in enumerate(data):
        for b in range(8):
            if byte & (0x80 >> b):
                bit = i * 8 + b
                h ^= (k >> (kbits - 32 - bit)) & 0xffffffff
    return h


def tcp_frame(dst_mac, src_ip, dst_ip, sport, size):
    """An Ethernet/IPv4/TCP frame of `size` bytes (no FCS), checksums valid."""
    payload = bytes((i * 7) & 0xff for i in range(size - 54))
    tcp_len = 20 + len(payload)
    pseudo = bytes(src_ip) + bytes(dst_ip) + bytes([0, 6]) + tcp_len.to_bytes(2, "big")
    tcp = (sport.to_bytes(2, "big") + (80).to_bytes(2, "big") + (1).to_bytes(4, "big")
           + (0).to_bytes(4, "big") + bytes([0x50, 0x18]) + (65535).to_bytes(2, "big"))
    tc = csum16(pseudo + tcp + b"\0\0\0\0" + payload)
    tcp += tc.to_bytes(2, "big") + b"\0\0" + payload
    ip = bytes([0x45, 0]) + (20 + tcp_len).to_bytes(2, "big") + bytes([0, 1, 0, 0, 64, 6, 0, 0])
    ip += bytes(src_ip) + bytes(dst_ip)
    ip = ip[:10] + csum16(ip).to_bytes(2, "big") + ip[12:]
    return mac_bytes(dst_mac) + bytes([2, 0, 0, 0, 0, 1]) + b"\x08\x00" + ip + tcp


def frames_for(dst_mac, size, count, nq, seed, proto="udp"):
    """`count` frames spread evenly over `nq` RSS queues (IPv4 src+dst hash,
    64-entry table filled round robin), distinct flows."""
    want = [count // nq + (1 if q < count % nq else 0) for q in range(nq)]
    out, i = [], 0
    dst_ip = [10, 9, 9, 9]
    while len(out) < count:
        src_ip = [10, seed, (i >> 8) & 0xff, i & 0xff]
        q = (toeplitz(RSS_KEY, bytes(src_ip + dst_ip)) & 63) % nq
        i += 1
        if want[q] > 0:
            want[q] -= 1
            make = tcp_frame if proto == "tcp" else udp_frame
            out.append(make(dst_mac, src_ip, dst_ip, 1024 + (i & 0x3fff), size))
    return out


# ---------------------------------------------------------------------------
# Emulated device and testpmd
# ---------------------------------------------------------------------------

class Env:
    """A private directory with the emulator config and fake sysfs trees."""

    def __init__(self, name, ports, doorbell, rdma_core="v44", bench="off"):
        self.dir = Path(tempfile.mkdtemp(prefix=f"mana-bench-{name}-"))
        os.chmod(self.dir, 0o755)
        lines = [
            "[options]",
            f'doorbell_mode = "{doorbell}"',
            f'rdma_core = "{rdma_core}"',
            f'bench = "{bench}"',
            f'sysfs_root = "{self.dir}/sys"',
            f'run_dir = "{self.dir}/run"',
        ]
        # One adapter (PCI function, verbs context, doorbell page) per port.
        for pci, mac, backend in ports:
            lines += ["", "[[adapter]]", f'pci = "{pci}"', "", "[[adapter.port]]",
                      f'mac = "{mac}"', f"backend = {backend}", "lossless_rx = true"]
        self.cfg = self.dir / "config.toml"
        self.cfg.write_text("\n".join(lines) + "\n")
        subprocess.run([str(EMU_CLI), "sysfs", str(self.cfg)], check=True,
                       stdout=subprocess.DEVNULL)
        self.pcis = [p[0] for p in ports]

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)


# testpmd's event callback: "\nPort <id>: <name> event\n", written whole.
EVENT_LINE = re.compile(r"\n?Port \d+: [a-z ]+ event\n")


def prompt_seen(seg):
    """Whether testpmd's prompt ended `seg`'s command, once its asynchronous
    event lines (written by the interrupt thread, e.g. a link state change)
    are taken out: they may split the prompt."""
    plain = EVENT_LINE.sub("", seg)
    return "testpmd> \r\n" in plain or "testpmd> \n" in plain


class Testpmd:
    """An interactive dpdk-testpmd on the emulated device."""

    def __init__(self, env, driver, args, wrapper=(), extra_preload=(), extra_env=None,
                 startup_timeout=600):
        d = DRIVERS[driver]
        preload = [str(EMU_LIB)] + [str(p) for p in d["preload"]] + [str(p) for p in extra_preload]
        self.prefix = f"manabench{os.getpid()}-{time.monotonic_ns()}"
        cmd = ["stdbuf", "-oL", "-eL"] + list(wrapper) + [
            "dpdk-testpmd", "--no-huge", "-m", "1024", "--iova-mode=va",
            "--file-prefix", self.prefix, "-l", "0,1", "-d", str(d["plugin"])]
        for pci in env.pcis:
            cmd += ["-a", pci]
        cmd += ["--", "-i"] + list(args)
        e = dict(os.environ)
        e.update({
            "LD_PRELOAD": " ".join(preload),
            "MANA_EMU_CONFIG": str(env.cfg),
            "SYSFS_PCI_DEVICES": str(env.dir / "sys/bus/pci/devices"),
        })
        e.update(extra_env or {})
        self.env = env
        self.cmdline = cmd
        self.out = ""
        self.lock = threading.Lock()
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, env=e, start_new_session=True)
        threading.Thread(target=self._reader, daemon=True).start()
        self.cmd("", timeout=startup_timeout)

    def _reader(self):
        for line in iter(self.p.stdout.readline, b""):
            with self.lock:
                self.out += line.decode(errors="replace")

    def cmd(self, c, timeout=300):
        """Sends one command; returns what it printed up to the next prompt
        (with a pipe on stdin the prompt follows the next input line)."""
        with self.lock:
            start = len(self.out)
        self.p.stdin.write((c + "\n\n").encode())
        self.p.stdin.flush()
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            with self.lock:
                seg = self.out[start:]
            if prompt_seen(seg):
                return seg
            if self.p.poll() is not None:
                raise RuntimeError(f"testpmd exited ({self.p.returncode}):\n{self.tail()}")
            time.sleep(0.02)
        raise RuntimeError(f"testpmd: no prompt after {c!r}:\n{self.tail()}")

    def tail(self, n=4000):
        with self.lock:
            return self.out[-n:]

    def request(self, req):
        path = self.env.dir / "run" / f"mana-emu-{self.p.pid}.sock"
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(120)
        s.connect(str(path))
        s.sendall((json.dumps(req) + "\n").encode())
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            buf += chunk
        s.close()
        rep = json.loads(buf)
        if not rep.get("ok"):
            raise RuntimeError(f"emulator: {rep}")
        return rep

    def device_port(self, mac):
        c = self.request({"cmd": "counters"})["counters"]
        for p in c["ports"]:
            if p["mac"] == mac:
                return p["counters"]
        raise RuntimeError(f"no port {mac}")

    def rq_packets(self, mac):
        c = self.request({"cmd": "counters"})["counters"]
        rqs = sorted((q["id"], q["counters"]["packets"]) for q in c["queues"]
                     if q["kind"] == "rq" and q["port"] == mac and q["live"])
        return [p for _, p in rqs]

    def inject(self, mac, frames):
        for i in range(0, len(frames), 256):
            self.request({"cmd": "inject", "mac": mac,
                          "frames": [f.hex() for f in frames[i:i + 256]]})

    def port_stats(self, port):
        o = self.cmd(f"show port stats {port}")
        m = re.search(r"RX-packets:\s*(\d+)\s+RX-missed:\s*(\d+)\s+RX-bytes:\s*(\d+)", o)
        t = re.search(r"TX-packets:\s*(\d+)\s+TX-errors:\s*(\d+)\s+TX-bytes:\s*(\d+)", o)
        if not m or not t:
            raise RuntimeError(f"no stats in {o!r}")
        return {"rx": int(m.group(1)), "rx_bytes": int(m.group(3)),
                "tx": int(t.group(1)), "tx_errors": int(t.group(2)), "tx_bytes": int(t.group(3))}

    def quit(self, timeout=300):
        try:
            self.p.stdin.write(b"quit\n")
            self.p.stdin.flush()
        except BrokenPipeError:
            pass
        try:
            self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(f"testpmd did not quit:\n{self.tail()}")
        self.remove_runtime_dir()
        return self.out

    def kill(self):
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.p.wait()
        self.remove_runtime_dir()

    def remove_runtime_dir(self):
        """EAL leaves its runtime directory (13 MB with --no-huge) behind."""
        base = "/var/run" if os.getuid() == 0 else os.environ.get("XDG_RUNTIME_DIR", "/tmp")
        shutil.rmtree(Path(base) / "dpdk" / self.prefix, ignore_errors=True)


def wait_until(what, pred, timeout, poll=0.05):
    t0 = time.monotonic()
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() - t0 > timeout:
            raise RuntimeError(f"timeout waiting for {what}")
        time.sleep(poll)


# ---------------------------------------------------------------------------
# Callgrind output
# ---------------------------------------------------------------------------

class Profile:
    """Self costs (per function and per source line) and call arcs (calls,
    inclusive cost) of callgrind output files (`--dump-instr=no`, line
    positions, one event: Ir)."""

    def __init__(self):
        self.self_cost = {}     # fn -> Ir
        self.line_cost = {}     # (fn, file, line) -> Ir
        self.arcs = {}          # (caller, callee) -> [calls, inclusive Ir]
        self.obj = {}           # fn -> object file
        self.total = 0

    def load(self, path):
        names = {"fl": {}, "fn": {}, "ob": {}}
        kind_of = {"fl": "fl", "fi": "fl", "fe": "fl", "cfi": "fl", "cfl": "fl",
                   "fn": "fn", "cfn": "fn", "ob": "ob", "cob": "ob"}

        def name(kind, rest):
            m = re.match(r"\((\d+)\)(?: (.*))?$", rest)
            if not m:
                return rest
            tab = names[kind_of[kind]]
            if m.group(2) is not None:
                tab[m.group(1)] = m.group(2)
            return tab.get(m.group(1), "?")

        fn = ob = fl = cur_file = cfn = cob = None
        pending_calls = None
        last = 0
        with open(path, errors="replace") as f:
            for raw in f:
                line = raw.rstrip("\n")
                if not line or line.startswith("#"):
                    continue
                c0 = line[0]
                if c0.isdigit() or c0 in "+-*":
                    parts = line.split()
                    pos = parts[0]
                    if pos == "*":
                        p = last
                    elif pos[0] in "+-":
                        p = last + int(pos)
                    else:
                        p = int(pos)
                    last = p
                    ir = int(parts[1]) if len(parts) > 1 else 0
                    if pending_calls is not None:
                        a = self.arcs.setdefault((fn, cfn), [0, 0])
                        a[0] += pending_calls
                        a[1] += ir
                        # A call without cob= stays in the caller's object.
                        self.obj.setdefault(cfn, cob or ob)
                        pending_calls = None
                        cob = None
                    else:
                        self.self_cost[fn] = self.self_cost.get(fn, 0) + ir
                        k = (fn, cur_file, p)
                        self.line_cost[k] = self.line_cost.get(k, 0) + ir
                        self.total += ir
                    continue
                key, _, rest = line.partition("=")
                if key == "fn":
                    fn = name("fn", rest)
                    self.obj[fn] = ob
                    cur_file = fl
                    cob = None
                elif key == "fl":
                    fl = cur_file = name("fl", rest)
                elif key in ("fi", "fe"):
                    cur_file = name(key, rest)
                elif key == "ob":
                    ob = name("ob", rest)
                elif key == "cob":
                    cob = name("cob", rest)
                elif key in ("cfi", "cfl"):
                    name(key, rest)
                elif key == "cfn":
                    cfn = name("cfn", rest)
                elif key == "calls":
                    pending_calls = int(rest.split()[0])
                elif key in ("part", "thread", "totals", "summary", "events", "cmd",
                             "version", "creator", "pid", "desc", "positions", "event"):
                    pass

    # With --separate-callers=N a function context is "f'caller'caller2...".
    @staticmethod
    def base(ctx):
        return ctx.split("'")[0]

    def root_arcs(self, trampoline):
        """Arcs from a trampoline context to the driver's burst function."""
        return [(callee, a) for (caller, callee), a in self.arcs.items()
                if self.base(caller) == trampoline]

    def inclusive(self, ctx, seen=None):
        seen = seen or set()
        if ctx in seen:
            return 0
        seen = seen | {ctx}
        return self.self_cost.get(ctx, 0) + sum(
            a[1] for (caller, _), a in self.arcs.items() if caller == ctx)

    def emu_cost_under(self, ctx, depth=0):
        """Self cost of emulator code reachable from `ctx` (inclusive arcs
        into the emulator's object)."""
        total = 0
        for (caller, callee), a in self.arcs.items():
            if caller != ctx:
                continue
            if "libmana_emu" in (self.obj.get(callee) or ""):
                total += a[1]
            elif depth < 6:
                total += self.emu_cost_under(callee, depth + 1)
        return total


def analyse(files, shim):
    prof = Profile()
    for f in files:
        prof.load(f)
    res = {}
    ports = shim["ports"]
    pkts = {
        "rx": sum(p["rx_busy_pkts"] for p in ports),
        "tx": sum(p["tx_busy_pkts"] for p in ports),
    }
    calls = {
        "bench_rx_busy": sum(p["rx_busy_calls"] for p in ports),
        "bench_rx_idle": sum(p["rx_idle_calls"] for p in ports),
        "bench_tx_busy": sum(p["tx_busy_calls"] for p in ports),
        "bench_tx_prep": sum(p.get("tx_prep_calls", 0) for p in ports),
    }
    for tramp in TRAMPOLINES:
        arcs = prof.root_arcs(tramp)
        n_calls = sum(a[0] for _, a in arcs)
        ir = sum(a[1] for _, a in arcs)
        emu = sum(prof.emu_cost_under(callee) for callee, _ in arcs)
        funcs = sorted({Profile.base(c) for c, _ in arcs})
        entry = {"calls": n_calls, "shim_calls": calls[tramp], "ir": ir, "emu_ir": emu,
                 "functions": funcs}
        if tramp != "bench_rx_idle" and arcs:
            entry["breakdown"] = breakdown(prof, [c for c, _ in arcs])
        res[tramp] = entry
    res["packets"] = pkts
    # Everything callgrind collected must be the trampolines' own
    # instructions or inside their calls (signal handlers, e.g. the
    # emulator's trapped doorbells, start with collection off).
    tramp_self = sum(v for k, v in prof.self_cost.items() if Profile.base(k) in TRAMPOLINES)
    res["collected_total"] = prof.total
    res["unattributed"] = prof.total - tramp_self - sum(res[t]["ir"] for t in TRAMPOLINES)
    return res


def breakdown(prof, roots):
    """Where a burst function's instructions go: its call tree (inclusive
    cost, three levels) and its own instructions by source line (inlined
    code included), summed over the given contexts."""
    lines, self_ir = {}, 0

    def tree(ctx, depth):
        kids = {}
        for (caller, callee), a in prof.arcs.items():
            if caller == ctx:
                k = kids.setdefault(Profile.base(callee), {"calls": 0, "ir": 0, "ctx": []})
                k["calls"] += a[0]
                k["ir"] += a[1]
                k["ctx"].append(callee)
        out = []
        for name, k in sorted(kids.items(), key=lambda x: -x[1]["ir"]):
            node = {"name": name, "calls": k["calls"], "ir": k["ir"],
                    "self": sum(prof.self_cost.get(c, 0) for c in k["ctx"])}
            if depth < 3:
                sub = [tree(c, depth + 1) for c in k["ctx"]]
                node["callees"] = merge([x for s in sub for x in s])
            out.append(node)
        return out

    def merge(nodes):
        m = {}
        for n in nodes:
            x = m.setdefault(n["name"], {"name": n["name"], "calls": 0, "ir": 0, "self": 0,
                                         "callees": []})
            x["calls"] += n["calls"]
            x["ir"] += n["ir"]
            x["self"] += n["self"]
            x["callees"] += n.get("callees", [])
        for x in m.values():
            x["callees"] = merge(x["callees"]) if x["callees"] else []
        return sorted(m.values(), key=lambda x: -x["ir"])

    # Own lines: of the burst function and of every function it calls in
    # the driver's own object (out-of-line parts of the burst), not of the
    # libraries it calls (mempool, libc) nor of the C shim's wrappers around
    # DPDK's inline functions.
    def driver_contexts(root):
        ob = prof.obj.get(root)
        seen, todo = {root}, [root]
        while todo:
            c = todo.pop()
            for (caller, callee) in prof.arcs:
                if (caller == c and callee not in seen and prof.obj.get(callee) == ob
                        and not Profile.base(callee).startswith("mana_shim_")):
                    seen.add(callee)
                    todo.append(callee)
        return seen

    callees = []
    for r in roots:
        self_ir += prof.self_cost.get(r, 0)
        callees += tree(r, 1)
        ctxs = driver_contexts(r)
        for (fn, fl, ln), ir in prof.line_cost.items():
            if fn in ctxs:
                k = f"{short_path(fl)}:{ln}"
                lines[k] = lines.get(k, 0) + ir
    return {
        "self": self_ir,
        "tree": merge(callees),
        "lines": sorted(([k, v] for k, v in lines.items()), key=lambda x: -x[1])[:25],
    }


def short_path(p):
    if not p:
        return "?"
    p = p.replace(str(REPO) + "/", "")
    m = re.search(r"(dpdk-stable-[^/]+/.*)$", p)
    if m:
        return m.group(1)
    m = re.search(r"(library/(?:core|alloc|std)/src/.*)$", p)
    if m:
        return m.group(1)
    return p


# ---------------------------------------------------------------------------
# Part 1: instructions per packet (callgrind)
# ---------------------------------------------------------------------------

def callgrind_run(driver, mode, size, nq, budget, rxd, doorbell="poll"):
    name = f"{driver}-{mode}-{size}-{nq}q"
    out = RUN / "callgrind" / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    if mode == "txonly":
        ports = [(PCI_A, MAC_A, '{ kind = "sink" }')]
    elif mode == "rxonly":
        ports = [(PCI_A, MAC_A, '{ kind = "sink" }')]
    else:  # io, csum: two ports forwarding to each other
        ports = [(PCI_A, MAC_A, '{ kind = "sink" }'), (PCI_B, MAC_B, '{ kind = "sink" }')]
    env = Env(name, ports, doorbell=doorbell, rdma_core="modern")
    vg = ["valgrind", "--tool=callgrind", "--fair-sched=yes", "--separate-threads=yes", "--dump-instr=no",
          "--dump-line=yes", "--collect-atstart=no", "--separate-callers=3",
          f"--callgrind-out-file={out}/callgrind.out.%p"]
    vg += [f"--toggle-collect={t}" for t in TRAMPOLINES]
    if doorbell == "trap":
        # The emulator's SIGSEGV handler decodes the doorbell store at the
        # interrupted RIP. With VEX's IR optimisation on, valgrind 3.19
        # reports the RIP of the `sfence` before the store instead (both
        # drivers fence first); unoptimised IR keeps the guest state exact.
        # Instruction counts do not depend on it.
        vg.append("--vex-iropt-level=0")
    stats_file = out / "shim.json"
    args = [f"--forward-mode={mode}", f"--burst={BURST}", f"--rxq={nq}", f"--txq={nq}",
            f"--rxd={rxd}", f"--txd={rxd}", "--no-flush-rx", "--total-num-mbufs=32768"]
    if mode == "txonly":
        args.append(f"--txpkts={size}")
    t0 = time.monotonic()
    t = Testpmd(env, driver, args, wrapper=vg, extra_preload=[PACE_LIB], extra_env={
        "BENCH_RUN_DIR": str(env.dir / "run"),
        "BENCH_BUDGET": str(budget),
        "BENCH_STATS": str(stats_file),
        **({"BENCH_TX_VLAN": str(CSUM_VLAN)} if mode == "csum" else {}),
    })
    started = time.monotonic() - t0
    try:
        macs = [p[1] for p in ports]
        if mode == "csum":
            # Checksum offload for IP and TCP, VLAN insertion and the RSS
            # hash, on both ports (testpmd applies them at port start).
            t.cmd("port stop all")
            for i in range(len(macs)):
                cmds = [f"csum set ip hw {i}", f"csum set tcp hw {i}"]
                # testpmd configures RSS (and so accepts the RSS_HASH
                # offload) only with several RX queues; both drivers
                # deliver the device's hash either way.
                if nq > 1:
                    cmds.append(f"port config {i} rx_offload rss_hash on")
                for c in cmds:
                    o = t.cmd(c)
                    if "rror" in o or "nvalid" in o or "Bad arguments" in o:
                        raise RuntimeError(f"testpmd refused {c!r}: {o}")
            # Enables the VLAN_INSERT offload where the driver has it (DPDK
            # 22.11's C driver has not: testpmd says so, and the packets
            # stay untagged); the shim marks the packets (BENCH_TX_VLAN), as
            # the csum engine does not.
            for i in range(len(macs)):
                t.cmd(f"tx_vlan set {i} {CSUM_VLAN}")
            o = t.cmd("port start all")
            if "Fail" in o or "invalid" in o:
                raise RuntimeError(f"port start with offloads failed: {o}")
            for i in range(len(macs)):
                # Under valgrind the reply may trail the prompt: read on.
                t.cmd(f"csum show {i}")
                wait_until(f"csum show {i}", lambda: re.search(
                    r"IP checksum offload is hw\s+UDP checksum offload is sw\s+"
                    r"TCP checksum offload is hw", t.tail(), re.I), 120, 0.5)
        if mode == "txonly":
            t.cmd("start")
            wait_until("txonly packets", lambda: t.device_port(MAC_A)["tx_packets"]
                       >= budget + 2 * BURST * nq, 600, poll=0.5)
            t.cmd("stop")
        else:
            per_round = min(budget, nq * rxd // 2)
            done = 0
            seed = 1
            while done < budget:
                k = min(per_round, budget - done)
                for i, mac in enumerate(macs):
                    t.inject(mac, frames_for(mac, size, k, nq, seed + i * 50,
                                             "tcp" if mode == "csum" else "udp"))
                done += k
                seed += 1
                for mac in macs:
                    wait_until(f"device delivers {done} frames to {mac}",
                               lambda mac=mac: t.device_port(mac)["rx_packets"] >= done, 600, 0.2)
                spread = [t.rq_packets(mac) for mac in macs]
                t.cmd("start")
                for i in range(len(macs)):
                    wait_until(f"port {i} receives {done}",
                               lambda i=i: t.port_stats(i)["rx"] >= done, 600, 0.5)
                if mode in ("io", "csum"):
                    for i, mac in enumerate(macs):
                        wait_until(f"{mac} forwards {done}",
                                   lambda mac=mac: t.device_port(mac)["tx_packets"] >= done, 600, 0.2)
                t.cmd("stop")
            res_spread = spread
        stats = [t.port_stats(i) for i in range(len(ports))]
        dev = [t.device_port(m) for m in [p[1] for p in ports]]
        t.quit()
    except Exception:
        log(t.tail())
        t.kill()
        raise
    finally:
        env.cleanup()
    elapsed = time.monotonic() - t0
    shim = json.loads(stats_file.read_text())
    files = sorted(str(p) for p in out.glob("callgrind.out.*"))
    res = analyse(files, shim)
    res.update({
        "driver": driver, "mode": mode, "size": size, "nq": nq, "budget": budget,
        "shim": shim, "testpmd_stats": stats, "device": dev,
        "startup_s": round(started, 1), "elapsed_s": round(elapsed, 1),
    })
    if mode != "txonly":
        res["rq_spread"] = res_spread
    check(res)
    return res


def check(res):
    """Consistency: the shim saw the packets testpmd and the device counted,
    no pacing timeouts, no mispredicted bursts, no emulator code inside."""
    problems = []
    for p in res["shim"]["ports"]:
        for k in ("rx_busy_empty", "tx_timeouts", "db_timeouts", "rq_unmapped", "tx_partial"):
            if p[k]:
                problems.append(f"port {p['port']}: {k}={p[k]}")
        if p["rx_idle_pkts"]:
            problems.append(f"port {p['port']}: idle RX calls returned {p['rx_idle_pkts']} packets")
    mode, budget = res["mode"], res["budget"]
    two = mode in ("io", "csum")
    if mode != "txonly" and res["packets"]["rx"] != budget * (2 if two else 1):
        problems.append(f"collected RX packets {res['packets']['rx']}")
    if mode != "rxonly" and res["packets"]["tx"] != budget * (2 if two else 1):
        problems.append(f"collected TX packets {res['packets']['tx']}")
    if mode == "csum":
        # Every forwarded frame carries the inserted tag on the wire, where
        # the driver can insert one.
        for i, d in enumerate(res["device"]):
            tagged = res["shim"]["ports"][i].get("tx_vlan_tagged", 0)
            if d["tx_bytes"] != d["tx_packets"] * (res["size"] + 4 * tagged):
                problems.append(f"port {i}: {d['tx_bytes']} bytes sent for {d['tx_packets']} "
                                f"frames of {res['size']}+{4 * tagged} (VLAN insert)")
    if res["unattributed"]:
        problems.append(f"{res['unattributed']} Ir collected outside the burst calls")
    for tramp in TRAMPOLINES:
        e = res[tramp]
        if e["calls"] != e["shim_calls"]:
            problems.append(f"{tramp}: callgrind saw {e['calls']} calls, the shim {e['shim_calls']}")
        if e["emu_ir"]:
            problems.append(f"{tramp}: {e['emu_ir']} Ir of emulator code inside the bursts")
    res["problems"] = problems
    if problems:
        log(f"  WARNING {res['driver']} {res['mode']} {res['size']}B {res['nq']}q: " + "; ".join(problems))


def per_packet(res, tramp, kind):
    """Instructions per packet; TX includes tx_pkt_prepare where the
    forwarding engine calls it (csum)."""
    n = res["packets"][kind]
    e = res[tramp]
    ir = e["ir"] - e["emu_ir"]
    if tramp == "bench_tx_busy" and "bench_tx_prep" in res:
        ir += res["bench_tx_prep"]["ir"] - res["bench_tx_prep"]["emu_ir"]
    return ir / n if n else None


def empty_poll(res):
    """Instructions per rx_burst call that found nothing."""
    e = res and res["bench_rx_idle"]
    return e["ir"] / e["calls"] if e and e["calls"] else None


def prep_per_packet(res):
    n = res["packets"]["tx"]
    e = res.get("bench_tx_prep")
    return e["ir"] / n if n and e and e["calls"] else None


# ---------------------------------------------------------------------------
# Part 2: packets per second (native)
# ---------------------------------------------------------------------------

def pps_run(driver, size, window, population):
    ports = [(PCI_A, MAC_A, f'{{ kind = "pair", peer = "{MAC_B}" }}'),
             (PCI_B, MAC_B, f'{{ kind = "pair", peer = "{MAC_A}" }}')]
    env = Env(f"pps-{driver}", ports, doorbell="poll")
    args = ["--forward-mode=io", f"--burst={BURST}", "--rxd=256", "--txd=256",
            "--total-num-mbufs=8192", f"--txpkts={size}", "--record-core-cycles",
            "--record-burst-stats"]
    load = Path("/proc/loadavg").read_text().split()[0]
    t = Testpmd(env, driver, args, startup_timeout=120)
    try:
        t.cmd(f"start tx_first {population}")
        time.sleep(1.0)

        def rx_total():
            return t.port_stats(0)["rx"] + t.port_stats(1)["rx"]
        a, ta = rx_total(), time.monotonic()
        time.sleep(window)
        b, tb = rx_total(), time.monotonic()
        o = t.cmd("stop")
        m = re.search(r"CPU cycles/packet=([\d.]+)", o)
        # testpmd's own counts since `start`: RX packets per rx_burst call
        # (empty polls included) show who waits for whom.
        bursts = sum(int(x) for x in re.findall(r"RX-bursts : (\d+)", o))
        acc = o.split("Accumulated forward statistics")[-1]
        rxp = re.search(r"RX-packets:\s*(\d+)", acc)
        t.quit(60)
    except Exception:
        log(t.tail())
        t.kill()
        raise
    finally:
        env.cleanup()
    return {"pps": (b - a) / (tb - ta), "cycles_per_packet": float(m.group(1)) if m else None,
            "pkts_per_rx_call": int(rxp.group(1)) / bursts if rxp and bursts else None,
            "loadavg": load}


# ---------------------------------------------------------------------------
# Part 3: cycles per packet against the saturating device (native)
# ---------------------------------------------------------------------------

NATIVE_MODES = ("txonly", "rxonly", "io")
# A burst call longer than this (77 us at 2.6 GHz; a full burst takes a few
# thousand cycles) was preempted: benches/pace.c counts it apart.
PREEMPTED_CYCLES = 200_000


def burst_stats(o, kind):
    """testpmd's `--record-burst-stats` lines of one kind (RX/TX) summed over
    the streams: (burst calls that moved packets, packets)."""
    calls = sum(int(x) for x in re.findall(rf"{kind}-bursts : (\d+)", o))
    acc = o.split("Accumulated forward statistics")[-1]
    m = re.search(rf"{kind}-packets:\s*(\d+)", acc)
    return calls, int(m.group(1)) if m else 0


def native_run(driver, mode, window, ring, doorbell="poll"):
    """testpmd `mode` on two ports of the saturating device, polled
    doorbells, 1 queue each; cycles per packet of the measured window (a
    warm-up start/stop first: `start` resets the streams' counters)."""
    ports = [(PCI_A, MAC_A, '{ kind = "sink" }'), (PCI_B, MAC_B, '{ kind = "sink" }')]
    env = Env(f"native-{driver}-{mode}", ports, doorbell=doorbell, rdma_core="modern",
              bench="saturate")
    args = [f"--forward-mode={mode}", f"--burst={BURST}", f"--rxd={ring}", f"--txd={ring}",
            "--total-num-mbufs=32768", "--txpkts=64", "--record-core-cycles",
            "--record-burst-stats"]
    load = Path("/proc/loadavg").read_text().split()[0]
    stats_file = env.dir / "shim.json"
    t = Testpmd(env, driver, args, extra_preload=[PACE_LIB], startup_timeout=120, extra_env={
        "BENCH_CYCLES": str(PREEMPTED_CYCLES), "BENCH_STATS": str(stats_file)})
    try:
        t.cmd("start")
        time.sleep(1.0)
        t.cmd("stop")
        t.cmd("start")
        time.sleep(window)
        o = t.cmd("stop")
        dev = t.request({"cmd": "counters"})["counters"]["device"]
        t.quit(60)
        shim = json.loads(stats_file.read_text())
    except Exception:
        log(t.tail())
        t.kill()
        raise
    finally:
        env.cleanup()
    timing = {}
    for k, kind in enumerate(("rx", "tx")):
        tm = [p["timing"][k] for p in shim["ports"]]
        tot = {f: sum(x[f] for x in tm) for f in tm[0]}
        busy = tot["full_calls"] + tot["part_calls"]
        timing[kind] = {
            **tot,
            "full_cycles_per_packet": tot["full_cycles"] / tot["full_pkts"] if tot["full_pkts"] else None,
            "full_share": tot["full_calls"] / busy if busy else None,
            "empty_cycles_per_call": tot["empty_cycles"] / tot["empty_calls"] if tot["empty_calls"] else None,
        }
    m = re.search(r"CPU cycles/packet=([\d.]+)", o)
    rx_calls, rx_pkts = burst_stats(o, "RX")
    tx_calls, tx_pkts = burst_stats(o, "TX")
    return {
        "cycles_per_packet": float(m.group(1)) if m else None,
        "rx_packets": rx_pkts, "tx_packets": tx_pkts,
        # Every call, empty ones included (testpmd's burst stats count
        # them; its cycles do not: only iterations that moved packets).
        "pkts_per_rx_call": rx_pkts / rx_calls if rx_calls else None,
        "pkts_per_tx_call": tx_pkts / tx_calls if tx_calls else None,
        "mpps": (rx_pkts if mode != "txonly" else tx_pkts) / window / 1e6,
        "burst_timing": timing,
        "device": {k: dev.get(k) for k in ("bench_tx_wqes", "bench_rx_wqes",
                                            "bench_template_writes")},
        "loadavg": load,
    }


def fn_cycles(r, mode):
    """Cycles per packet inside the driver's burst functions, full bursts
    only, preempted calls left out (benches/pace.c): RX + TX per forwarded
    packet in io, the one direction in rxonly/txonly."""
    t = r["burst_timing"]
    parts = {"rxonly": ("rx",), "txonly": ("tx",), "io": ("rx", "tx")}[mode]
    v = [t[k]["full_cycles_per_packet"] for k in parts]
    return None if None in v else sum(v)


def load1():
    return float(Path("/proc/loadavg").read_text().split()[0])


def settle_load(limit, deadline_s=600):
    """Waits until the 1-minute load average is at most `limit` (a third of
    --native-quiet: the pair's own two busy threads add about 0.35 to it)
    and returns it; at the deadline returns what it is, and the pair will
    be dropped if it ends above the quiet limit."""
    t0 = time.monotonic()
    while load1() > limit and time.monotonic() - t0 < deadline_s:
        time.sleep(5)
    return load1()


def native_part(runs, window, ring, modes, doorbell="poll", quiet=None):
    out = {"runs": runs, "window": window, "ring": ring, "doorbell": doorbell, "modes": {},
           "quiet": quiet}
    for mode in modes:
        pairs = []
        for i in range(runs):
            order = ("rust", "c") if i % 2 == 0 else ("c", "rust")
            r = {}
            if quiet is not None:
                r["load_before"] = settle_load(quiet / 3)
            for d in order:
                x = native_run(d, mode, window, ring, doorbell)
                x["fn_cycles"] = fn_cycles(x, mode)
                r[d] = x
                bt = x["burst_timing"]
                log(f"native: {mode} pair {i + 1} {d}: testpmd "
                    f"{fmt(x['cycles_per_packet'])} cycles/packet; burst functions "
                    f"{fmt(x['fn_cycles'])} (rx {fmt(bt['rx']['full_cycles_per_packet'])}, "
                    f"tx {fmt(bt['tx']['full_cycles_per_packet'])}); "
                    f"{fmt(x['pkts_per_rx_call'], 2)} pkts/rx call, "
                    f"{fmt(x['pkts_per_tx_call'], 2)} pkts/tx call, "
                    f"preempted {bt['rx']['preempted'] + bt['tx']['preempted']}, "
                    f"{x['mpps']:.2f} Mpps, load {x['loadavg']}")
            r["order"] = "ours, C" if order[0] == "rust" else "C, ours"
            r["ratio"] = ratio(r["rust"]["cycles_per_packet"], r["c"]["cycles_per_packet"])
            r["fn_ratio"] = ratio(r["rust"]["fn_cycles"], r["c"]["fn_cycles"])
            if quiet is not None:
                r["load_after"] = load1()
                r["dropped"] = max(r["load_before"], r["load_after"]) > quiet
                log(f"native: {mode} pair {i + 1}: load {r['load_before']:.2f} before, "
                    f"{r['load_after']:.2f} after{' (dropped: above ' + str(quiet) + ')' if r['dropped'] else ''}")
            pairs.append(r)
        kept = [p for p in pairs if not p.get("dropped")]
        out["modes"][mode] = {
            "pairs": pairs,
            "kept": len(kept),
            "median_ratio": med([p["ratio"] for p in kept]),
            "median_rust": med([p["rust"]["cycles_per_packet"] for p in kept]),
            "median_c": med([p["c"]["cycles_per_packet"] for p in kept]),
            "median_fn_ratio": med([p["fn_ratio"] for p in kept]),
            "median_fn_rust": med([p["rust"]["fn_cycles"] for p in kept]),
            "median_fn_c": med([p["c"]["fn_cycles"] for p in kept]),
        }
    return out


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def render_native(n, results):
    m = results["machine"]
    L = []
    L.append("### Cycles per packet against the saturating device (native)")
    L.append("")
    L.append(f"Command: `{results['command']}` ({results['date']}); driver revision "
             f"`{m['revision']}`{' with uncommitted changes' if m['dirty'] else ''}, plugin sha256 "
             f"`{results['binaries'].get('librte_net_mana.so', '?')}`; {m['nproc']} CPUs, "
             f"{m['cpu']}; load average at start {' '.join(m['loadavg_at_start'])}.")
    L.append("")
    L.append(f"testpmd on two ports of the emulator's benchmark mode (`bench = \"saturate\"`, "
             f"{'polled' if n.get('doorbell', 'poll') == 'poll' else 'trapped'} doorbells), 1 queue each, burst {BURST}, 64-byte frames, {n['ring']} "
             f"descriptors per ring, `--record-core-cycles --record-burst-stats`; "
             f"{n['window']} s measured after a 1 s warm-up; {n['runs']} pairs per mode, the "
             "drivers alternated A/B (see Method)"
             + (f"; quiet core: before each pair the 1-minute load average fell to "
                f"{n['quiet'] / 3:.2f} or below, pairs above {n['quiet']} before or after are "
                "dropped from the medians" if n.get("quiet") is not None else "")
             + ". **testpmd**: its CPU cycles/packet of the "
             "measured window (forwarding-loop iterations that moved packets, testpmd's own "
             "work included). **burst fns**: TSC cycles inside the drivers' rx/tx burst "
             "functions per packet, full bursts only, calls longer than "
             f"{PREEMPTED_CYCLES:,} cycles (preempted) left out, whole run (benches/pace.c); "
             "io: RX + TX per forwarded packet. **pkts/rx call**: packets per `rx_burst` "
             "call, empty calls included (32 = saturated); **full**: share of the RX "
             "(txonly: TX) calls that moved packets which moved a full burst.")
    L.append("")
    L.append("| mode | pair | order | testpmd ours | testpmd C | ours/C | burst fns ours "
             "| burst fns C | ours/C | pkts/rx call ours, C | full ours, C | preempted ours, C "
             "| Mpps ours, C | load avg |")
    L.append("|---|---:|---|---:|---:|---:|---:|---:|---:|---|---|---|---|---|")

    def full(x, mode):
        t = x["burst_timing"]["tx" if mode == "txonly" else "rx"]
        return "n/a" if t["full_share"] is None else f"{t['full_share'] * 100:.0f}%"

    def pre(x):
        t = x["burst_timing"]
        return t["rx"]["preempted"] + t["tx"]["preempted"]

    def loads(r, a, b):
        if "load_before" not in r:
            return f"{a['loadavg']}, {b['loadavg']}"
        d = " **dropped**" if r["dropped"] else ""
        return f"{r['load_before']:.2f} before, {r['load_after']:.2f} after{d}"
    for mode, m in n["modes"].items():
        for i, r in enumerate(m["pairs"]):
            a, b = r["rust"], r["c"]
            L.append(f"| {mode} | {i + 1} | {r['order']} | {fmt(a['cycles_per_packet'])} | "
                     f"{fmt(b['cycles_per_packet'])} | {fmt(r['ratio'], 2)} | "
                     f"{fmt(a['fn_cycles'])} | {fmt(b['fn_cycles'])} | {fmt(r['fn_ratio'], 2)} | "
                     f"{fmt(a['pkts_per_rx_call'], 2)}, {fmt(b['pkts_per_rx_call'], 2)} | "
                     f"{full(a, mode)}, {full(b, mode)} | {pre(a)}, {pre(b)} | "
                     f"{a['mpps']:.2f}, {b['mpps']:.2f} | {loads(r, a, b)} |")
        L.append(f"| **{mode} median** | | | **{fmt(m['median_rust'])}** | "
                 f"**{fmt(m['median_c'])}** | **{fmt(m['median_ratio'], 2)}** | "
                 f"**{fmt(m['median_fn_rust'])}** | **{fmt(m['median_fn_c'])}** | "
                 f"**{fmt(m['median_fn_ratio'], 2)}** | | | | | |")
    return "\n".join(L) + "\n"


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------

def machine():
    def sh(*c):
        try:
            return subprocess.run(c, capture_output=True, text=True).stdout.strip()
        except OSError:
            return "?"
    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mhz = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("cpu MHz"):
            mhz = line.split(":", 1)[1].strip()
            break
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "cpu_mhz": mhz,
        "kernel": platform.release(),
        "os": sh("sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"),
        "dpdk": (sh("pkg-config", "--modversion", "libdpdk") if os.environ.get("NET_MANA_BENCH_DPDK")
                 else sh("dpkg-query", "-W", "-f=${Version}", "libdpdk-dev")),
        "valgrind": sh("valgrind", "--version"),
        "rustc": sh("rustc", "--version"),
        "cc": sh("cc", "--version").splitlines()[0] if sh("cc", "--version") else "?",
        "loadavg_at_start": Path("/proc/loadavg").read_text().split()[:3],
        "revision": sh("git", "-C", str(REPO), "rev-parse", "--short", "HEAD"),
        # Uncommitted changes to the driver's sources are built and measured.
        "dirty": bool(sh("git", "-C", str(REPO), "status", "--porcelain", "--", "src", "gdma",
                         "build.rs", "Cargo.toml")),
    }


def fmt(x, d=1):
    return "n/a" if x is None else f"{x:,.{d}f}"


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def render(results):
    m = results["machine"]
    L = []
    L.append(f"Command: `{results['command']}` ({results['date']}, {results['elapsed_min']:.1f} min)")
    L.append("")
    L.append(f"Driver revision: `{m['revision']}`{' with uncommitted changes to src/, gdma/ or the build' if m['dirty'] else ''}; "
             f"plugin sha256 `{results['binaries'].get('librte_net_mana.so', '?')}`; "
             "C driver: DPDK's drivers/net/mana of the installed version, "
             "built by tests/upstream/build-c-driver.sh.")
    L.append("")
    L.append(f"Machine: {m['nproc']} CPUs, {m['cpu']} ({m['cpu_mhz']} MHz), kernel {m['kernel']}, "
             f"{m['os']}; DPDK {m['dpdk']}; {m['valgrind']}; {m['rustc']}; {m['cc']}; "
             f"load average at start {' '.join(m['loadavg_at_start'])}.")
    L.append("")
    L.append("### Instructions per packet inside the burst functions (callgrind)")
    L.append("")
    L.append(f"Burst {BURST}; {results['budget']} packets per port and direction per row; "
             "bursts paced by benches/pace.c; emulator doorbells polled for 1 queue, trapped for 4 "
             "queues (see Method). "
             "io rows: two ports forwarding to each other, RX and TX figures per packet in "
             "that direction.")
    L.append("")
    L.append("| mode | frame | queues | RX ours | RX C | RX ours/C | TX ours | TX C | TX ours/C |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    cg = results["callgrind"]
    for mode in ("txonly", "rxonly", "io"):
        for size in results["sizes"]:
            for nq in results["queues"]:
                r = {d: cg.get(f"{d}-{mode}-{size}-{nq}q") for d in DRIVERS}
                def pp(d, tramp, kind):
                    x = r[d]
                    return per_packet(x, tramp, kind) if x else None
                rx = {d: pp(d, "bench_rx_busy", "rx") if mode != "txonly" else None for d in DRIVERS}
                tx = {d: pp(d, "bench_tx_busy", "tx") if mode != "rxonly" else None for d in DRIVERS}
                cells = [mode, f"{size} B", str(nq)]
                for v in (rx, tx):
                    if v["rust"] is None and v["c"] is None:
                        cells += ["–", "–", "–"]
                    else:
                        cells += [fmt(v["rust"]), fmt(v["c"]), fmt(ratio(v["rust"], v["c"]), 2)]
                L.append("| " + " | ".join(cells) + " |")
    if any(k.split("-")[1] == "csum" for k in cg):
        L.append("")
        L.append("With offloads (testpmd `csum` engine, TCP/IPv4 frames: IP and TCP checksum "
                 f"offload and VLAN insertion (tag {CSUM_VLAN}) on transmit, the RSS hash "
                 "requested on receive; both ports forwarding to each other as in io). TX "
                 "includes `tx_pkt_prepare`, which the engine calls before each burst (ours "
                 "writes the pseudo-header checksums there; the C driver has none and does it "
                 "in `tx_burst`); its share in parentheses. Last columns: ours with "
                 "offloads over ours in the plain io row of the same frame size and queues.")
        L.append("")
        L.append("| frame | queues | RX ours | RX C | RX ours/C | TX ours (prepare) | TX C | "
                 "TX ours/C | RX offload/plain | TX offload/plain |")
        L.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for size in results["sizes"]:
            for nq in results["queues"]:
                r = {d: cg.get(f"{d}-csum-{size}-{nq}q") for d in DRIVERS}
                if not any(r.values()):
                    continue
                plain = cg.get(f"rust-io-{size}-{nq}q")

                def pp(d, tramp, kind):
                    return per_packet(r[d], tramp, kind) if r[d] else None
                rx = {d: pp(d, "bench_rx_busy", "rx") for d in DRIVERS}
                tx = {d: pp(d, "bench_tx_busy", "tx") for d in DRIVERS}
                prep = prep_per_packet(r["rust"]) if r["rust"] else None
                prx = per_packet(plain, "bench_rx_busy", "rx") if plain else None
                ptx = per_packet(plain, "bench_tx_busy", "tx") if plain else None
                txo = fmt(tx["rust"]) + (f" ({fmt(prep)})" if prep is not None else "")
                L.append(f"| {size} B | {nq} | {fmt(rx['rust'])} | {fmt(rx['c'])} | "
                         f"{fmt(ratio(rx['rust'], rx['c']), 2)} | {txo} | {fmt(tx['c'])} | "
                         f"{fmt(ratio(tx['rust'], tx['c']), 2)} | {fmt(ratio(rx['rust'], prx), 2)} | "
                         f"{fmt(ratio(tx['rust'], ptx), 2)} |")
    L.append("")
    L.append("Empty polls (instructions per `rx_burst` call that found nothing; not in the "
             "per-packet figures):")
    L.append("")
    L.append("| mode | frame | queues | ours | C | ours/C |")
    L.append("|---|---:|---:|---:|---:|---:|")
    for mode in ("rxonly", "io"):
        for size in results["sizes"]:
            for nq in results["queues"]:
                v = {}
                for d in DRIVERS:
                    v[d] = empty_poll(cg.get(f"{d}-{mode}-{size}-{nq}q"))
                L.append(f"| {mode} | {size} B | {nq} | {fmt(v['rust'])} | {fmt(v['c'])} | "
                         f"{fmt(ratio(v['rust'], v['c']), 2)} |")
    tc = results.get("trap_check") or {}
    if tc:
        parts = []
        for k, v in tc.items():
            if v["calls"] == v["poll_calls"] and v["calls"]:
                parts.append(f"{v['label']}: "
                             f"{(v['trap_ir'] - v['poll_ir']) / v['calls']:+.2f} per burst")
        L.append("")
        L.append("Trapped instead of polled doorbells, same 1-queue 64-byte rows (the "
                 "4-queue rows' artifact): " + "; ".join(parts) + ".")
    probs = [(k, x["problems"]) for k, x in cg.items() if x.get("problems")]
    if probs:
        L.append("")
        L.append("Consistency warnings: " + "; ".join(f"{k}: {', '.join(p)}" for k, p in probs))
    if results.get("pps"):
        p = results["pps"]
        L.append("")
        L.append("### Packets per second, testpmd io forwarding (native)")
        L.append("")
        L.append(f"Two paired emulated ports, 1 queue each, burst {BURST}, {p['size']}-byte frames, "
                 f"{p['population']}x{BURST} frames seeded per direction (`start tx_first "
                 f"{p['population']}`), {p['window']} s window after 1 s warm-up, "
                 f"{p['runs']} runs per driver alternated A/B.")
        L.append("")
        L.append("| run | order | ours Mpps | C Mpps | ours/C | ours cycles/pkt | C cycles/pkt "
                 "| ours pkts/rx call | C pkts/rx call | load avg |")
        L.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---|")
        for i, r in enumerate(p["pairs"]):
            L.append(f"| {i + 1} | {r['order']} | {r['rust']['pps'] / 1e6:.3f} | "
                     f"{r['c']['pps'] / 1e6:.3f} | {r['ratio']:.2f} | "
                     f"{fmt(r['rust']['cycles_per_packet'], 0)} | {fmt(r['c']['cycles_per_packet'], 0)} | "
                     f"{fmt(r['rust']['pkts_per_rx_call'], 2)} | {fmt(r['c']['pkts_per_rx_call'], 2)} | "
                     f"{r['rust']['loadavg']}, {r['c']['loadavg']} |")
        L.append(f"| **median** | | {p['median_rust'] / 1e6:.3f} | {p['median_c'] / 1e6:.3f} | "
                 f"**{p['median_ratio']:.2f}** | {fmt(p['median_cycles_rust'], 0)} | "
                 f"{fmt(p['median_cycles_c'], 0)} | | | |")
    return "\n".join(L) + "\n"


def render_breakdown(results):
    L = []
    cg = results["callgrind"]
    for key in results.get("breakdown_rows", []):
        for d in DRIVERS:
            x = cg.get(f"{d}-{key}")
            if not x:
                continue
            for tramp, kind in (("bench_rx_busy", "rx"), ("bench_tx_busy", "tx")):
                e = x[tramp]
                n = x["packets"][kind]
                if not n or "breakdown" not in e:
                    continue
                b = e["breakdown"]
                L.append(f"#### {DRIVERS[d]['label']}, {key}, {kind.upper()}: "
                         f"{(e['ir'] - e['emu_ir']) / n:.1f} Ir/packet "
                         f"({', '.join(e['functions'])})")
                L.append("")
                L.append("| function (callees indented) | calls/packet | inclusive Ir/packet | own Ir/packet |")
                L.append("|---|---:|---:|---:|")
                L.append(f"| `{', '.join(e['functions'])}` | {e['calls'] / n:.3f} | "
                         f"{e['ir'] / n:.1f} | {b['self'] / n:.1f} |")

                def rows(nodes, depth):
                    for x in nodes:
                        if x["ir"] / n < 0.5:
                            continue
                        L.append(f"| {'→ ' * depth}`{x['name']}` | {x['calls'] / n:.3f} | "
                                 f"{x['ir'] / n:.1f} | {x['self'] / n:.1f} |")
                        rows(x.get("callees", []), depth + 1)
                rows(b["tree"], 1)
                L.append("")
                L.append("| driver's own instructions by source line (burst function and the driver functions it calls) | Ir/packet |")
                L.append("|---|---:|")
                for where, ir in b["lines"][:16]:
                    L.append(f"| `{where}` | {ir / n:.1f} |")
                L.append("")
    return "\n".join(L) + "\n"


VERSIONS = OUT / "versions"


def report_version(a, results):
    """Keeps this release's figures beside the other releases' and renders
    the per-version table from all of them."""
    VERSIONS.mkdir(parents=True, exist_ok=True)
    results["release"] = results["machine"]["dpdk"]
    for d in (RUN, VERSIONS):
        name = "results.json" if d == RUN else f"{a.dpdk}.json"
        (d / name).write_text(json.dumps(results, indent=1, default=str))
    table = render_versions([json.loads(f.read_text()) for f in sorted(VERSIONS.glob("*.json"))])
    (VERSIONS / "versions.md").write_text(table)
    print(table)
    if a.update_doc:
        update_doc(REPO / "doc" / "performance.md", {"versions": table})
        log("doc/performance.md updated (per-version table)")
    log(f"results: {VERSIONS / (a.dpdk + '.json')}, {VERSIONS / 'versions.md'} (and {RUN})")


def render_versions(runs):
    """Ours over DPDK's own C driver, each built for and run on the same
    DPDK release, per callgrind row."""
    L = ["Command per release: `benches/run.sh --dpdk <release> --modes io,csum --sizes 64 "
         "--queues 1,4 --update-doc`. Each release's testpmd and libraries, our driver built "
         "against its headers, its own C `net/mana` (DPDK's meson build: `-O3`, "
         "`-Dplatform=generic`), the same emulated device and pacing as the 22.11 table. "
         "TX with offloads includes `tx_pkt_prepare` (ours; the C driver writes the "
         "pseudo-header in `tx_burst`).", ""]
    L.append("| DPDK | row | queues | RX ours | RX C | RX ours/C | TX ours | TX C | TX ours/C "
             "| empty poll ours | empty poll C | revision, date |")
    L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in sorted(runs, key=lambda r: [int(x) for x in re.findall(r"\d+", r["release"])]):
        cg = r["callgrind"]
        for mode in ("io", "csum"):
            for nq in r["queues"]:
                for size in r["sizes"]:
                    k = {d: cg.get(f"{d}-{mode}-{size}-{nq}q") for d in DRIVERS}
                    if not any(k.values()):
                        continue

                    def pp(d, tramp, kind):
                        return per_packet(k[d], tramp, kind) if k[d] else None
                    rx = {d: pp(d, "bench_rx_busy", "rx") for d in DRIVERS}
                    txv = {d: pp(d, "bench_tx_busy", "tx") for d in DRIVERS}
                    idle = {d: empty_poll(k[d]) for d in DRIVERS}
                    row = "io" if mode == "io" else "csum + VLAN + RSS hash"
                    L.append(
                        f"| {r['release']} | {row}, {size} B | {nq} | {fmt(rx['rust'])} | "
                        f"{fmt(rx['c'])} | {fmt(ratio(rx['rust'], rx['c']), 2)} | "
                        f"{fmt(txv['rust'])} | {fmt(txv['c'])} | "
                        f"{fmt(ratio(txv['rust'], txv['c']), 2)} | {fmt(idle['rust'])} | "
                        f"{fmt(idle['c'])} | `{r['machine']['revision']}`, {r['date'][:10]} |")
    return "\n".join(L) + "\n"


def update_doc(doc, sections):
    """Rewrites the doc's sections between `<!-- bench:<tag>:begin/end -->`;
    a section whose part did not run (body None) keeps its last results."""
    text = doc.read_text()
    for tag, body in sections.items():
        if body is None:
            continue
        b, e = f"<!-- bench:{tag}:begin -->", f"<!-- bench:{tag}:end -->"
        if b in text and e in text:
            pre, rest = text.split(b, 1)
            _, post = rest.split(e, 1)
            text = pre + b + "\n" + body + e + post
    doc.write_text(text)


RUN = OUT  # this invocation's directory (set by snapshot())


def snapshot():
    """Copies every binary the benchmark loads into a private directory of
    this invocation, so that a rebuild of target/ while it runs (cargo, a
    concurrent run.sh) cannot change what is measured half-way."""
    global RUN, EMU_LIB, EMU_CLI, PACE_LIB
    runs = OUT / "runs"
    if runs.is_dir():  # keep the last few invocations' outputs
        for old in sorted(runs.iterdir())[:-4]:
            shutil.rmtree(old, ignore_errors=True)
    RUN = runs / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    lib = RUN / "lib"
    lib.mkdir(parents=True)
    for d in (RUN.parent, RUN, lib):
        os.chmod(d, 0o755)  # EAL refuses -d plugins from world-writable dirs

    def cp(src):
        dst = lib / Path(src).name
        shutil.copy2(src, dst)
        return dst
    EMU_LIB, EMU_CLI, PACE_LIB = cp(EMU_LIB), cp(EMU_CLI), cp(PACE_LIB)
    sums = {}
    for d in DRIVERS.values():
        d["plugin"] = cp(d["plugin"])
        d["preload"] = [cp(p) for p in d["preload"]]
    for f in sorted(lib.iterdir()):
        sums[f.name] = hashlib.sha256(f.read_bytes()).hexdigest()[:16]
    return sums


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=int, default=2048,
                    help="packets per port and direction measured per callgrind row (multiple of 32)")
    ap.add_argument("--modes", default="txonly,rxonly,io,csum")
    ap.add_argument("--sizes", default="64,1500")
    ap.add_argument("--queues", default="1,4")
    ap.add_argument("--drivers", default="rust,c")
    ap.add_argument("--pps-runs", type=int, default=5, help="runs per driver (0: skip)")
    ap.add_argument("--pps-window", type=float, default=5.0)
    ap.add_argument("--pps-size", type=int, default=64)
    ap.add_argument("--pps-population", type=int, default=8, help="bursts seeded per direction")
    ap.add_argument("--native-runs", type=int, default=5,
                    help="A/B pairs per mode against the saturating device (0: skip)")
    ap.add_argument("--native-window", type=float, default=3.0)
    ap.add_argument("--native-quiet", type=float, default=None,
                    help="quiet-core pairs: wait for the 1-minute load average to fall to a "
                         "third of this before each pair, record it before and after, drop "
                         "pairs above it from the medians")
    ap.add_argument("--native-ring", type=int, default=1024, help="descriptors per ring")
    ap.add_argument("--native-modes", default=",".join(NATIVE_MODES))
    ap.add_argument("--native-doorbell", default="poll", choices=("poll", "trap"),
                    help="the emulator's doorbell mode in the native runs (poll: see Method)")
    ap.add_argument("--no-callgrind", action="store_true")
    ap.add_argument("--no-trap-check", dest="trap_check", action="store_false",
                    help="skip re-running the 1-queue 64-byte rows with trapped doorbells")
    ap.add_argument("--update-doc", action="store_true",
                    help="rewrite the result sections of doc/performance.md")
    ap.add_argument("--dpdk", default=None,
                    help="a DPDK release other than 22.11 (set up by benches/run.sh --dpdk): "
                         "results go to target/bench/versions/<release>.json, and --update-doc "
                         "rewrites only the per-version table")
    ap.add_argument("--smoke", action="store_true",
                    help="the test suite's check that the benchmark runs: one callgrind row "
                         "(our driver, io, 64 B, 1 queue) at --budget, nothing else; results in "
                         "target/bench/smoke/; exits non-zero if the row fails")
    ap.add_argument("--command", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.smoke:
        global OUT
        OUT = OUT / "smoke"
        a.modes, a.sizes, a.queues, a.drivers = "io", "64", "1", "rust"
        a.pps_runs, a.native_runs, a.trap_check, a.update_doc = 0, 0, False, False
    if a.command is None:
        a.command = " ".join(["benches/run.sh"] + sys.argv[1:])

    if a.dpdk:
        use_dpdk(a.dpdk)
    for p in (EMU_LIB, EMU_CLI, PACE_LIB) + tuple(DRIVERS[d]["plugin"] for d in DRIVERS):
        if not Path(p).exists():
            sys.exit(f"perf.py: {p} missing: run benches/run.sh")
    t_start = time.monotonic()
    OUT.mkdir(parents=True, exist_ok=True)
    machine_info = machine()
    sums = snapshot()
    drivers = a.drivers.split(",")
    results = {
        "command": a.command, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine_info, "binaries": sums, "run_dir": str(RUN), "budget": a.budget,
        "sizes": [int(s) for s in a.sizes.split(",")],
        "queues": [int(q) for q in a.queues.split(",")],
        "callgrind": {}, "breakdown_rows": ["io-64-1q"],
    }
    if not a.no_callgrind:
        for mode in a.modes.split(","):
            for size in results["sizes"]:
                for nq in results["queues"]:
                    for d in drivers:
                        log(f"callgrind: {d} {mode} {size}B {nq}q ...")
                        try:
                            r = callgrind_run(d, mode, size, nq, a.budget, rxd=1024,
                                              doorbell="poll" if nq == 1 else "trap")
                        except Exception as e:  # one row's failure loses only that row
                            log(f"  FAILED: {e}")
                            results.setdefault("failed", {})[f"{d}-{mode}-{size}-{nq}q"] = str(e)
                            continue
                        results["callgrind"][f"{d}-{mode}-{size}-{nq}q"] = r
                        rx = per_packet(r, "bench_rx_busy", "rx")
                        tx = per_packet(r, "bench_tx_busy", "tx")
                        log(f"  rx {fmt(rx)} Ir/pkt, tx {fmt(tx)} Ir/pkt "
                            f"({r['elapsed_s']} s, startup {r['startup_s']} s)")
    if not a.no_callgrind and a.trap_check:
        # The doorbell-mode artifact: the same 1-queue rows in trap mode.
        chk = {}
        for mode, tramp in (("rxonly", "bench_rx_busy"), ("txonly", "bench_tx_busy")):
            for d in drivers:
                base = results["callgrind"].get(f"{d}-{mode}-64-1q")
                if not base:
                    continue
                log(f"callgrind: {d} {mode} 64B 1q, trap doorbells ...")
                r = callgrind_run(d, mode, 64, 1, a.budget, rxd=1024, doorbell="trap")
                chk[f"{d}-{mode}"] = {
                    "label": f"{'ours' if d == 'rust' else 'C'} {mode}",
                    "poll_ir": base[tramp]["ir"], "trap_ir": r[tramp]["ir"],
                    "calls": r[tramp]["calls"], "poll_calls": base[tramp]["calls"],
                    "problems": r["problems"],
                }
        results["trap_check"] = chk
    if a.pps_runs > 0 and set(drivers) >= {"rust", "c"}:
        pairs = []
        for i in range(a.pps_runs):
            order = ("rust", "c") if i % 2 == 0 else ("c", "rust")
            r = {}
            for d in order:
                r[d] = pps_run(d, a.pps_size, a.pps_window, a.pps_population)
                log(f"pps: run {i + 1} {d}: {r[d]['pps'] / 1e6:.3f} Mpps, "
                    f"{fmt(r[d]['cycles_per_packet'], 0)} cycles/packet")
            r["order"] = "ours, C" if order[0] == "rust" else "C, ours"
            r["ratio"] = r["rust"]["pps"] / r["c"]["pps"]
            pairs.append(r)

        def med(xs):
            xs = [x for x in xs if x is not None]
            return statistics.median(xs) if xs else None
        results["pps"] = {
            "size": a.pps_size, "window": a.pps_window, "population": a.pps_population,
            "runs": a.pps_runs, "pairs": pairs,
            "median_ratio": med([p["ratio"] for p in pairs]),
            "median_rust": med([p["rust"]["pps"] for p in pairs]),
            "median_c": med([p["c"]["pps"] for p in pairs]),
            "median_cycles_rust": med([p["rust"]["cycles_per_packet"] for p in pairs]),
            "median_cycles_c": med([p["c"]["cycles_per_packet"] for p in pairs]),
        }
    # Another release (--dpdk) is compared by its callgrind rows only.
    if a.native_runs > 0 and not a.dpdk and set(drivers) >= {"rust", "c"}:
        results["native"] = native_part(a.native_runs, a.native_window, a.native_ring,
                                        a.native_modes.split(","), a.native_doorbell,
                                        a.native_quiet)
    results["elapsed_min"] = (time.monotonic() - t_start) / 60
    if a.dpdk:
        report_version(a, results)
        return
    table = render(results)
    bd = render_breakdown(results)
    native = render_native(results["native"], results) if results.get("native") else None
    for d in (RUN, OUT):
        (d / "results.json").write_text(json.dumps(results, indent=1, default=str))
        (d / "results.md").write_text(table + "\n" + (native or "") + "\n" + bd)
    print(table)
    print(native or "")
    print(bd)
    if a.update_doc:
        ran_cg = not a.no_callgrind
        update_doc(REPO / "doc" / "performance.md", {
            "results": table if ran_cg or results.get("pps") else None,
            "breakdown": bd if ran_cg else None,
            "native": native,
        })
        log("doc/performance.md updated")
    log(f"results: {OUT / 'results.md'}, {OUT / 'results.json'} (and {RUN})")
    if results.get("failed"):
        # The other rows are in the results; the exit status says some are not.
        sys.exit(f"perf.py: {len(results['failed'])} row(s) failed: "
                 + ", ".join(sorted(results["failed"])))


if __name__ == "__main__":
    main()
