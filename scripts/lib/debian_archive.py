#!/usr/bin/env python3
"""Prints the Debian archive URIs this machine's apt sources use.

Usage: debian_archive.py CODENAME

Reads the machine's apt sources with the parsers of deb_src.py and prints
two lines, `main <uri>` (the entry whose suite is CODENAME) and
`security <uri>` (CODENAME-security), so another release of the same
archive (a local mirror included) can be reached through a private apt
configuration. Exits 1 when there is no main entry; the security line is
left out when the machine has none.
"""
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deb_src import from_deb822, from_list  # noqa: E402


def main():
    codename = sys.argv[1]
    entries = []
    files = ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*"))
    for path in files:
        if not os.path.isfile(path):
            continue
        if path.endswith(".sources"):
            entries += from_deb822(path)
        elif path.endswith(".list"):
            entries += from_list(path)
    found = {}
    for uri, suite, comps, _signed in entries:
        if "main" not in comps:
            continue
        if suite == codename:
            found.setdefault("main", uri)
        elif suite == codename + "-security" or suite == codename + "/updates":
            found.setdefault("security", uri)
    if "main" not in found:
        sys.stderr.write(f"debian_archive.py: no '{codename}' main entry in this machine's apt sources\n")
        return 1
    for k in ("main", "security"):
        if k in found:
            print(k, found[k].rstrip("/"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
