#!/usr/bin/env python3
"""Downloads the sdist of PKG==VER from PyPI into DEST, checked against the sha256 PyPI lists.

Reads PyPI's simple index (its JSON form), as pip does, but does not prepare the sdist's metadata
in a build environment, which is what makes `pip download` of an sdist slow.

Usage: pypi-sdist.py PKG VER DEST

Writes DEST/<file name PyPI gives> atomically (a .part file renamed once the digest matches) and
prints its path. Exit 1 on any failure, with the reason on stderr; nothing half-written is left.
"""
import hashlib
import json
import os
import re
import sys
import tempfile
import urllib.request

TIMEOUT_S = 120
MAX_BYTES = 512 * 1024 * 1024


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    pkg, ver, dest = sys.argv[1:4]
    if not re.fullmatch(r"[A-Za-z0-9._-]+", pkg) or not re.fullmatch(r"[A-Za-z0-9.+!_-]+", ver):
        print(f"pypi-sdist: not a package name and version: {pkg!r} {ver!r}", file=sys.stderr)
        return 2
    # The simple index in its JSON form (PEP 691), the same listing pip reads.
    req = urllib.request.Request(
        f"https://pypi.org/simple/{pkg}/",
        headers={"Accept": "application/vnd.pypi.simple.v1+json"},
    )
    with urllib.request.urlopen(req, timeout=TIMEOUT_S) as r:
        index = json.loads(r.read(64 * 1024 * 1024))
    # Older sdists keep the dashes of the project name in the file name.
    names = {f"{pkg.replace('-', '_')}-{ver}.tar.gz", f"{pkg}-{ver}.tar.gz"}
    found = [f for f in index.get("files", []) if f.get("filename") in names and not f.get("yanked")]
    if not found:
        print(f"pypi-sdist: {pkg}=={ver} has no sdist on PyPI", file=sys.stderr)
        return 1
    u = found[0]
    name = u.get("filename", "")
    want = u.get("hashes", {}).get("sha256", "")
    url = u.get("url", "")
    if not re.fullmatch(r"[A-Za-z0-9._+-]+\.tar\.gz", name) or not re.fullmatch(r"[0-9a-f]{64}", want):
        print(f"pypi-sdist: unexpected file entry for {pkg}=={ver}: {name!r}", file=sys.stderr)
        return 1
    if not url.startswith("https://files.pythonhosted.org/"):
        print(f"pypi-sdist: unexpected download address for {pkg}=={ver}: {url!r}", file=sys.stderr)
        return 1
    os.makedirs(dest, exist_ok=True)
    fd, part = tempfile.mkstemp(dir=dest, prefix=f".{name}.", suffix=".part")
    try:
        h = hashlib.sha256()
        size = 0
        with os.fdopen(fd, "wb") as f, urllib.request.urlopen(url, timeout=TIMEOUT_S) as r:
            while chunk := r.read(1 << 20):
                size += len(chunk)
                if size > MAX_BYTES:
                    raise OSError(f"{name} is larger than {MAX_BYTES} bytes")
                h.update(chunk)
                f.write(chunk)
        if h.hexdigest() != want:
            raise OSError(f"{name}: sha256 {h.hexdigest()} is not PyPI's {want}")
        os.chmod(part, 0o644)
        final = os.path.join(dest, name)
        os.replace(part, final)
    except BaseException:
        os.unlink(part)
        raise
    print(final)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, ValueError) as e:
        print(f"pypi-sdist: {e}", file=sys.stderr)
        sys.exit(1)
