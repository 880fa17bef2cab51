"""Fetch the npm files the documentation site serves itself (requirements/docs-npm.txt).

The site must work offline, so nothing is loaded from a CDN: each pinned package is fetched once with
``npm pack`` into ``~/.cache/elastic-idl/npm`` (``$XDG_CACHE_HOME`` respected), its tarball is checked
against the registry's integrity hash written in the pin file, and the named file is copied into
``build/docs-vendor/``. A second run finds the tarball in the cache and needs no network.

The minified files are not committed (mermaid.min.js alone is 3.6 MB): the pin and its hash are, which
makes the fetch reproducible. Run by the mkdocs hook (scripts/docs_hooks.py) before a build, or by hand:

    python3 scripts/docs_vendor.py            # prints the files it provides
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PINS = ROOT / "requirements" / "docs-npm.txt"
#: Where the copied files go; the hook serves them under assets/vendor/ in the site.
VENDOR_DIR = ROOT / "build" / "docs-vendor"


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    integrity: str
    files: tuple[str, ...]


class VendorError(RuntimeError):
    """A pinned npm file could not be provided (no npm, no registry, a hash that does not match)."""


def read_pins(text: str) -> list[Pin]:
    """The pins of a docs-npm.txt text: ``name version sha512-... file [file ...]`` per line."""
    pins = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) < 4 or not words[2].startswith("sha512-"):
            raise VendorError(f"{PINS.name}:{number}: want 'name version sha512-... file...', got {line!r}")
        pins.append(Pin(words[0], words[1], words[2], tuple(words[3:])))
    return pins


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "elastic-idl" / "npm"


def integrity_of(path: Path) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()


def tarball(pin: Pin) -> Path:
    """The pinned package's tarball from the cache, fetched with ``npm pack`` when missing."""
    cache = cache_dir()
    path = cache / f"{pin.name}-{pin.version}.tgz"
    if not path.exists():
        npm = shutil.which("npm")
        if npm is None:
            raise VendorError(f"{pin.name}@{pin.version} is not in {cache} and npm is not on PATH to fetch it")
        cache.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            [npm, "pack", f"{pin.name}@{pin.version}", "--pack-destination", str(cache)],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0 or not path.exists():
            raise VendorError(f"npm pack {pin.name}@{pin.version} failed: {proc.stderr.strip()[-2000:]}")
    got = integrity_of(path)
    if got != pin.integrity:
        raise VendorError(f"{path}: integrity {got} is not the pinned {pin.integrity} (delete it to fetch again)")
    return path


def provide(dest: Path = VENDOR_DIR) -> list[Path]:
    """Copy every pinned file into ``dest`` (flat, by file name); return the paths written."""
    out = []
    dest.mkdir(parents=True, exist_ok=True)
    for pin in read_pins(PINS.read_text()):
        with tarfile.open(tarball(pin)) as tar:
            for name in pin.files:
                member = tar.extractfile(f"package/{name}")
                if member is None:
                    raise VendorError(f"{pin.name}@{pin.version} has no file {name}")
                target = dest / Path(name).name
                data = member.read()
                if not target.exists() or target.read_bytes() != data:
                    target.write_bytes(data)
                out.append(target)
    return out


if __name__ == "__main__":
    try:
        for path in provide():
            print(path.relative_to(ROOT))
    except VendorError as exc:
        sys.exit(f"docs_vendor: {exc}")
