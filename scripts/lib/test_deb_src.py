#!/usr/bin/env python3
"""Tests of deb_src.py on the apt configurations a fresh machine may have.

The defect it guards against: setup.sh once wrote a fixed deb-src entry
without `Signed-By` next to the stock deb822 `debian.sources` (which has
one), and apt refused the machine's sources. The entries must be derived
from the machine's own: same URIs (a local mirror stays a local mirror),
suites, components and `Signed-By`, and apt must accept the result.
Run: python3 -m unittest scripts/lib/test_deb_src.py (scripts/test.sh does).
"""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"

STOCK_DEB822 = f"""Types: deb
# http://snapshot.debian.org/archive/debian/20250101T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: {KEYRING}

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: {KEYRING}
"""


def derive(files):
    """Runs deb_src.py over an apt directory holding `files`; returns
    (exit code, stderr, the written stanzas as dicts)."""
    with tempfile.TemporaryDirectory() as d:
        etc = os.path.join(d, "etc")
        os.makedirs(os.path.join(etc, "sources.list.d"))
        for name, text in files.items():
            with open(os.path.join(etc, name), "w") as f:
                f.write(text)
        out = os.path.join(d, "deb-src.sources")
        r = subprocess.run([sys.executable, os.path.join(HERE, "deb_src.py"), "bookworm", out],
                           env=dict(os.environ, NET_MANA_APT_ETC=etc),
                           capture_output=True, text=True)
        stanzas = []
        if os.path.exists(out):
            with open(out) as f:
                text = f.read()
            accepted = apt_accepts(etc, out)
            for block in text.strip().split("\n\n"):
                stanzas.append(dict(line.split(": ", 1) for line in block.splitlines()))
            return r.returncode, r.stderr, stanzas, accepted
        return r.returncode, r.stderr, stanzas, None


def apt_accepts(etc, deb_src):
    """apt reads the machine's sources and ours together (as a machine whose
    sources.list.d held both would), without fetching anything."""
    with tempfile.TemporaryDirectory() as d:
        parts = os.path.join(d, "parts")
        os.makedirs(os.path.join(d, "lists", "partial"))
        os.makedirs(parts)
        for name in os.listdir(os.path.join(etc, "sources.list.d")):
            os.symlink(os.path.join(etc, "sources.list.d", name), os.path.join(parts, name))
        os.symlink(deb_src, os.path.join(parts, "net-mana-deb-src.sources"))
        src_list = os.path.join(etc, "sources.list")
        r = subprocess.run(
            ["apt-get", "-o", "Dir::Etc::SourceList=" + (src_list if os.path.exists(src_list) else "/dev/null"),
             "-o", "Dir::Etc::SourceParts=" + parts, "-o", "Dir::State::Lists=" + os.path.join(d, "lists"),
             "-o", "Dir::Cache=" + d, "--print-uris", "update"],
            capture_output=True, text=True)
        return r.returncode == 0 and not r.stderr.strip(), r.stdout + r.stderr


class DebSrc(unittest.TestCase):
    def test_stock_deb822_keeps_signed_by(self):
        rc, err, st, (ok, apt_out) = derive({"sources.list.d/debian.sources": STOCK_DEB822})
        self.assertEqual(rc, 0, err)
        self.assertEqual([(s["URIs"], s["Suites"]) for s in st], [
            ("http://deb.debian.org/debian", "bookworm"),
            ("http://deb.debian.org/debian", "bookworm-updates"),
            ("http://deb.debian.org/debian-security", "bookworm-security")])
        for s in st:
            self.assertEqual(s["Types"], "deb-src")
            self.assertEqual(s["Signed-By"], KEYRING)
        self.assertTrue(ok, apt_out)
        self.assertIn("bookworm/main/source/Sources", apt_out)

    def test_classic_sources_list(self):
        rc, err, st, (ok, apt_out) = derive({"sources.list": (
            "# a comment\n"
            "deb http://deb.debian.org/debian bookworm main contrib\n"
            "deb [arch=amd64 signed-by=/etc/apt/keyrings/x.gpg] http://security.debian.org/debian-security bookworm-security main\n"
            "deb-src http://deb.debian.org/debian sid main\n")})
        self.assertEqual(rc, 0, err)
        self.assertEqual(st[0], {"Types": "deb-src", "URIs": "http://deb.debian.org/debian",
                                 "Suites": "bookworm", "Components": "main contrib"})
        self.assertEqual(st[1]["Signed-By"], "/etc/apt/keyrings/x.gpg")
        self.assertEqual(len(st), 2)
        self.assertTrue(ok, apt_out)

    def test_local_mirror_and_disabled_entries(self):
        rc, err, st, (ok, apt_out) = derive({"sources.list.d/mirror.sources": (
            "Types: deb\nURIs: http://mirror.example.internal/debian\nSuites: bookworm\n"
            f"Components: main\nSigned-By: {KEYRING}\n\n"
            "Enabled: no\nTypes: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\n")})
        self.assertEqual(rc, 0, err)
        self.assertEqual([s["URIs"] for s in st], ["http://mirror.example.internal/debian"])
        self.assertTrue(ok, apt_out)

    def test_no_bookworm_entry_is_an_error(self):
        rc, err, st, _ = derive({"sources.list": "deb http://deb.debian.org/debian trixie main\n"})
        self.assertEqual(rc, 1)
        self.assertIn("no 'bookworm' deb entry", err)
        self.assertEqual(st, [])


if __name__ == "__main__":
    unittest.main()
