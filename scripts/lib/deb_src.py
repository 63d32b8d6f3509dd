#!/usr/bin/env python3
"""Writes deb-src entries derived from this machine's own apt sources.

Usage: deb_src.py SUITE_PREFIX OUT_FILE

Reads /etc/apt/sources.list and /etc/apt/sources.list.d/*.{list,sources}
(classic one-line and deb822 formats), keeps the `deb` entries whose suite
starts with SUITE_PREFIX (e.g. "bookworm": bookworm, bookworm-updates,
bookworm-security), and writes the same URIs, suites, components and
Signed-By as `deb-src` entries, in deb822 format, to OUT_FILE. The file is
meant for a private apt configuration (Dir::Etc::sourcelist), so it never
conflicts with the machine's own entries. Exits 1 when nothing matches.
"""
import glob
import os
import re
import sys


def deb822_stanzas(text):
    stanza, key = {}, None
    for line in text.splitlines() + [""]:
        if line.startswith("#"):
            continue
        if not line.strip():
            if stanza:
                yield stanza
            stanza, key = {}, None
        elif line[0] in " \t" and key:
            stanza[key] += "\n" + line.strip()
        elif ":" in line:
            key, value = line.split(":", 1)
            key = key.strip().lower()
            stanza[key] = value.strip()


def from_deb822(path):
    for s in deb822_stanzas(open(path, encoding="utf-8", errors="replace").read()):
        if s.get("enabled", "yes").lower() == "no":
            continue
        if "deb" not in s.get("types", "").split():
            continue
        for uri in s.get("uris", "").split():
            for suite in s.get("suites", "").split():
                yield uri, suite, s.get("components", "").split(), s.get("signed-by")


def from_list(path):
    for line in open(path, encoding="utf-8", errors="replace"):
        line = line.split("#", 1)[0].strip()
        m = re.match(r"^deb\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)\s*(.*)$", line)
        if not m:
            continue
        opts = dict(o.split("=", 1) for o in (m.group(1) or "").split() if "=" in o)
        yield m.group(2), m.group(3), m.group(4).split(), opts.get("signed-by")


def main():
    prefix, out = sys.argv[1], sys.argv[2]
    entries = []
    # NET_MANA_APT_ETC: another apt configuration directory (the tests' fixtures).
    etc = os.environ.get("NET_MANA_APT_ETC", "/etc/apt")
    files = [etc + "/sources.list"] + sorted(glob.glob(etc + "/sources.list.d/*"))
    for path in files:
        if not os.path.isfile(path):
            continue
        if path.endswith(".sources"):
            entries += from_deb822(path)
        elif path.endswith(".list"):
            entries += from_list(path)
    keep = []
    for uri, suite, comps, signed in entries:
        if (suite == prefix or suite.startswith(prefix + "-") or suite.startswith(prefix + "/")) \
                and (uri, suite) not in [(k[0], k[1]) for k in keep]:
            keep.append((uri, suite, comps or ["main"], signed))
    if not keep:
        sys.stderr.write(f"deb_src.py: no '{prefix}' deb entry in this machine's apt sources\n")
        return 1
    with open(out + ".tmp", "w") as f:
        for uri, suite, comps, signed in keep:
            f.write(f"Types: deb-src\nURIs: {uri}\nSuites: {suite}\nComponents: {' '.join(comps)}\n")
            if signed:
                # A multi-line inline key keeps its continuation lines indented.
                f.write("Signed-By: " + signed.replace("\n", "\n ") + "\n")
            f.write("\n")
    os.replace(out + ".tmp", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
