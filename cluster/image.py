"""The cluster's base image: the host's shared libraries and a shell, for pods that run this checkout.

    python cluster/image.py build --out ARCHIVE.tar [--python-prefix DIR] [--venv DIR] [--tag TAG]
        Builds the image into ARCHIVE.tar, an OCI image layout archive (oci-layout, index.json,
        blobs/sha256/...: one manifest, one config, one layer) that `ctr -n k8s.io images import`
        reads; prints what it built as JSON (the reference, the digests, the sizes, the packages).

The image holds no Python: a pod mounts the interpreter's prefix (pyenv's versions/3.11.7), the
checkout and its venv read-only at their host paths (hostPath volumes, as kind's extraMounts). The
image provides what those need at run time and do not hold themselves: the shared libraries that
`ldd` resolves for the interpreter and every ``*.so`` under its prefix and the venv (torch's too),
whole Debian packages as `dpkg -S` names them and `dpkg -L` lists them (without their
documentation), and a shell for probes and commands (dash as /bin/sh, a few coreutils, tar and gzip); plus
/etc/passwd, /etc/group, /etc/nsswitch.conf, the CA bundle, /tmp (1777) and empty /dev, /proc and
/sys. A library that resolves inside a mounted folder is left to the mount; one `ldd` cannot find on
the host either (libcuda.so.1, MPI, RDMA: a GPU node's runtime brings them) is reported, not fatal.

The build is reproducible: tar entries sorted, mtime SOURCE_DATE_EPOCH (0 unless set), uid/gid 0
and no owner names, the gzip header without name and time, JSON with sorted keys; the same host
files give the same manifest digest. The reference is ``localhost/elastic-idl/base:<12 hex digits
of that digest>`` unless a tag is given; index.json carries it (io.containerd.image.name, and the
tag as org.opencontainers.image.ref.name), so `ctr images import` names the image.

Stdlib only (the cluster tool imports it: ``build_image``). Needs a Debian host (dpkg-query, ldd).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import fnmatch
import gzip
import hashlib
import io
import json
import os
import re
import stat
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, BinaryIO, cast

REPO = Path(__file__).resolve().parent.parent
DEFAULT_NAME = "localhost/elastic-idl/base"
PAUSE_NAME = "localhost/elastic-idl/pause"
PATH_ENV = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: File names (fnmatch) under the prefix and the venv whose libraries the image does not carry:
#: tkinter would bring Tcl/Tk and X11, which no pod uses.
DEFAULT_EXCLUDES = ("_tkinter.*",)
#: The shell and tools a pod's probes and commands may use: Debian package -> file names in it.
SHELL_TOOLS: Mapping[str, tuple[str, ...]] = {
    "dash": ("dash", "sh"),
    "coreutils": (
        "[", "basename", "cat", "chmod", "cp", "cut", "date", "dirname", "du", "echo", "env",
        "false", "head", "id", "ln", "ls", "mkdir", "mktemp", "mv", "nproc", "printenv", "printf",
        "pwd", "readlink", "realpath", "rm", "rmdir", "seq", "sha256sum", "sleep", "sort", "stat",
        "tail", "tee", "test", "timeout", "touch", "tr", "true", "uname", "wc",
    ),
    # What the Flyte SDKs run to unpack a task's code bundle (a .tgz): flytekit's and flyte's both
    # call `tar`, which calls `gzip`.
    "tar": ("tar",),
    "gzip": ("gzip", "gunzip", "zcat"),
}  # fmt: skip
#: Parts of a package the image leaves out (documentation, translations, bug scripts).
SKIPPED_PREFIXES = (
    "/usr/share/doc/",
    "/usr/share/doc-base/",
    "/usr/share/man/",
    "/usr/share/info/",
    "/usr/share/lintian/",
    "/usr/share/locale/",
    "/usr/share/bug/",
    "/usr/share/gcc/",  # libstdc++'s pretty printers for gdb
    "/usr/share/gdb/",
)
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
ELF_MAGIC = b"\x7fELF"

MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar"

_LDD_FOUND = re.compile(r"^\s*(\S+) => (/\S*) \(0x[0-9a-f]+\)$")
_LDD_MISSING = re.compile(r"^\s*(\S+) => not found$")
_LDD_DIRECT = re.compile(r"^\s*(/\S+) \(0x[0-9a-f]+\)$")
#: A `dpkg-query -S` line: "libc6:amd64: /lib/x86_64-linux-gnu/libc.so.6" (first owner kept).
_OWNER = re.compile(r"^([^\s:,]+(?::[a-z0-9]+)?)(?:, [^\s:,]+(?::[a-z0-9]+)?)*: (/.*)$")

PASSWD = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
GROUP = "root:x:0:\nnogroup:x:65534:\n"
NSSWITCH = (
    "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\n"
    "protocols: files\nservices: files\nethers: files\nrpc: files\n"
)


class ImageError(Exception):
    """The image cannot be built on this host (not Debian, a library no package owns, ...)."""


@dataclass(frozen=True)
class Entry:
    """One member of the layer: a directory, a regular file (from the host or generated) or a symlink."""

    path: str  # absolute, in the image
    kind: str  # "dir", "file" or "symlink"
    mode: int = 0o755
    source: Path | None = None  # a file's host copy
    data: bytes | None = None  # a generated file's contents
    target: str = ""  # a symlink's


@dataclass(frozen=True)
class BuildResult:
    """What build_image wrote: the archive, the reference `ctr images import` gives it, digests, sizes."""

    archive: Path
    ref: str
    manifest_digest: str
    config_digest: str
    layer_digest: str
    diff_id: str
    layer_size: int  # the layer blob as stored (compressed unless compression="none")
    uncompressed_size: int  # the layer tar
    archive_size: int
    entries: int
    packages: tuple[str, ...]  # name=version
    unresolved: tuple[str, ...]  # libraries ldd found neither on the host nor in the mounts
    seconds: float
    paths: tuple[str, ...] = field(repr=False, default=())

    def summary(self) -> dict[str, object]:
        out = {k: v for k, v in self.__dict__.items() if k != "paths"}
        out["archive"] = str(self.archive)
        out["packages"] = list(self.packages)
        out["unresolved"] = list(self.unresolved)
        out["seconds"] = round(self.seconds, 2)
        return out


def _run(argv: Sequence[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}
    try:
        r = subprocess.run(list(argv), capture_output=True, text=True, env=env, check=False)
    except FileNotFoundError as e:
        raise ImageError(f"{argv[0]} is missing: the image is built from a Debian host's packages") from e
    if check and r.returncode != 0:
        raise ImageError(f"{' '.join(argv[:3])} ... failed ({r.returncode}): {r.stderr.strip()[:2000]}")
    return r


def _is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(4) == ELF_MAGIC
    except OSError:
        return False


def scan_targets(python_prefix: Path, venv: Path | None, excludes: Sequence[str] = DEFAULT_EXCLUDES) -> list[Path]:
    """The ELF files whose libraries the image must hold: the prefix's bin/ executables and every
    ``*.so``/``*.so.*`` under the prefix and the venv (regular files; symlinks point at one)."""
    found: set[Path] = set()
    bindir = python_prefix / "bin"
    if bindir.is_dir():
        for p in bindir.iterdir():
            if p.is_file() and not p.is_symlink() and _is_elf(p):
                found.add(p)
    for root in (python_prefix, venv):
        if root is None:
            continue
        for dirpath, _dirs, files in os.walk(root):
            for name in files:
                if not (name.endswith(".so") or ".so." in name):
                    continue
                if any(fnmatch.fnmatch(name, pat) for pat in excludes):
                    continue
                p = Path(dirpath, name)
                if not p.is_symlink() and p.is_file() and _is_elf(p):
                    found.add(p)
    return sorted(found)


def _ldd(path: Path) -> tuple[set[str], set[str]]:
    r = _run(["ldd", str(path)], check=False)
    libs: set[str] = set()
    missing: set[str] = set()
    for line in r.stdout.splitlines():
        if m := _LDD_FOUND.match(line):
            libs.add(m.group(2))
        elif m := _LDD_MISSING.match(line):
            missing.add(m.group(1))
        elif m := _LDD_DIRECT.match(line):
            libs.add(m.group(1))
    return libs, missing


def resolve_libraries(targets: Iterable[Path], jobs: int | None = None) -> tuple[set[str], dict[str, set[str]]]:
    """`ldd` of every target (in parallel): the library paths it resolves (the loader too) and, per
    library it cannot find, the targets that need it."""
    libs: set[str] = set()
    missing: dict[str, set[str]] = {}
    workers = jobs or min(16, 2 * (os.cpu_count() or 1))
    paths = list(targets)
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        for target, (found, lost) in zip(paths, pool.map(_ldd, paths), strict=True):
            libs |= found
            for name in lost:
                missing.setdefault(name, set()).add(str(target))
    return libs, missing


def _inside(path: str, roots: Sequence[str]) -> bool:
    real = os.path.realpath(path)
    return any(real == r or real.startswith(r + os.sep) for r in roots)


def _aliases(path: str) -> list[str]:
    """The names dpkg may have recorded a file under on a merged-/usr system (/lib/x vs /usr/lib/x)."""
    out = [path, os.path.realpath(path)]
    for p in list(out):
        if p.startswith("/usr/"):
            out.append(p[len("/usr") :])
        else:
            out.append("/usr" + p)
    return list(dict.fromkeys(out))


def dpkg_owners(paths: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    """Each path's Debian package (`dpkg-query -S`, trying its merged-/usr aliases), and the paths
    no package owns."""
    paths = sorted(set(paths))
    alias_of: dict[str, str] = {}
    for p in paths:
        for a in _aliases(p):
            alias_of.setdefault(a, p)
    owners: dict[str, str] = {}
    if alias_of:
        r = _run(["dpkg-query", "-S", *alias_of], check=False)
        for line in r.stdout.splitlines():
            if line.startswith(("diversion by", "package diverts")):
                continue
            if (m := _OWNER.match(line)) and m.group(2) in alias_of:
                owners.setdefault(alias_of[m.group(2)], m.group(1))
    return owners, [p for p in paths if p not in owners]


def dpkg_files(package: str) -> list[str]:
    """The paths `dpkg-query -L` lists for a package (directories too; the caller skips them)."""
    out = _run(["dpkg-query", "-L", package]).stdout.splitlines()
    return [line for line in out if line.startswith("/")]


def dpkg_versions(packages: Iterable[str]) -> list[str]:
    pkgs = sorted(set(packages))
    if not pkgs:
        return []
    fmt = "${Package}=${Version}\n"
    out = _run(["dpkg-query", "-W", "-f", fmt, *pkgs]).stdout.splitlines()
    return sorted(set(out))


def _canonical(path: str) -> str:
    """The path with its folder resolved on the host (/lib/x -> /usr/lib/x on merged /usr); the last
    component is kept as is (a symlink stays a symlink)."""
    head, tail = os.path.split(path)
    return os.path.join(os.path.realpath(head), tail)


class _Tree:
    """The layer's entries by image path, with the host's symlinked folders kept as symlinks."""

    def __init__(self) -> None:
        self.entries: dict[str, Entry] = {}

    def add(self, entry: Entry) -> None:
        old = self.entries.get(entry.path)
        if old is not None and old != entry:
            if old.kind == entry.kind == "file" and old.source and entry.source:
                if os.path.samefile(old.source, entry.source):
                    return
            raise ImageError(f"two different entries for {entry.path}: {old} and {entry}")
        self.entries[entry.path] = entry

    def add_host(self, path: str) -> None:
        """A host file (regular or symlink) at its canonical path, and every symlinked folder on its
        way as a symlink (/lib -> usr/lib), so the names packages use resolve in the image too."""
        parts = Path(path).parts
        for i in range(2, len(parts)):
            ancestor = os.path.join(*parts[:i])
            if os.path.islink(ancestor):
                self.add(Entry(_canonical(ancestor), "symlink", 0o777, target=os.readlink(ancestor)))
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return  # listed by dpkg but not on the host (a path-exclude of the base image)
        image_path = _canonical(path)
        if stat.S_ISLNK(st.st_mode):
            self.add(Entry(image_path, "symlink", 0o777, target=os.readlink(path)))
        elif stat.S_ISREG(st.st_mode):
            self.add(Entry(image_path, "file", stat.S_IMODE(st.st_mode), source=Path(path)))

    def complete(self) -> list[Entry]:
        """Every entry and its parent folders (0755), sorted by path; a folder under a symlink is
        an error (the tar would replace the symlink)."""
        dirs: set[str] = set()
        for p in self.entries:
            parent = os.path.dirname(p)
            while parent not in ("/", ""):
                dirs.add(parent)
                parent = os.path.dirname(parent)
        for d in sorted(dirs):
            e = self.entries.get(d)
            if e is None:
                self.entries[d] = Entry(d, "dir", 0o755)
            elif e.kind != "dir":
                raise ImageError(f"{d} is a {e.kind} in the image and a folder of other entries")
        return [self.entries[k] for k in sorted(self.entries)]


def collect(
    python_prefix: Path,
    venv: Path | None,
    mount_roots: Sequence[Path],
    excludes: Sequence[str] = DEFAULT_EXCLUDES,
) -> tuple[list[Entry], list[str], list[str]]:
    """The layer's entries, the packages they come from (name=version) and the libraries ldd could
    not find on the host (name: first target needing it)."""
    targets = scan_targets(python_prefix, venv, excludes)
    if not targets:
        raise ImageError(f"no ELF file under {python_prefix}: not an interpreter prefix")
    tools: list[str] = []
    for package, names in SHELL_TOOLS.items():
        files = [f for f in dpkg_files(package) if os.path.basename(f) in names and "/bin/" in f]
        lost = set(names) - {os.path.basename(f) for f in files}
        if lost:
            raise ImageError(f"package {package} has no {sorted(lost)}")
        tools += files
    libs, missing = resolve_libraries([*targets, *(Path(t) for t in tools)])
    roots = [os.path.realpath(r) for r in mount_roots]
    host_libs = sorted(lib for lib in libs if not _inside(lib, roots))
    owners, orphans = dpkg_owners(host_libs)
    if orphans:
        raise ImageError(
            f"no Debian package owns these libraries (copy them into a mount or install a package): {orphans}"
        )
    tree = _Tree()
    lib_packages = sorted(set(owners.values()))
    for package in lib_packages:
        for path in dpkg_files(package):
            if path.startswith(SKIPPED_PREFIXES) or (os.path.isdir(path) and not os.path.islink(path)):
                continue
            tree.add_host(path)
    for path in tools:
        tree.add_host(path)
    for path in host_libs:  # already there through their packages; a check that they are
        if _canonical(path) not in tree.entries and os.path.realpath(path) not in tree.entries:
            raise ImageError(f"{path} (package {owners[path]}) is not in the package's file list")
    _add_generated(tree)
    unresolved = [f"{name}: {sorted(needers)[0]}" for name, needers in sorted(missing.items())]
    return tree.complete(), dpkg_versions([*lib_packages, *SHELL_TOOLS]), unresolved


def _add_generated(tree: _Tree) -> None:
    for path, text in (("/etc/passwd", PASSWD), ("/etc/group", GROUP), ("/etc/nsswitch.conf", NSSWITCH)):
        tree.add(Entry(path, "file", 0o644, data=text.encode()))
    if not os.path.isfile(CA_BUNDLE):
        raise ImageError(f"{CA_BUNDLE} is missing (Debian's ca-certificates makes it)")
    tree.add(Entry(CA_BUNDLE, "file", 0o644, source=Path(CA_BUNDLE)))
    # OpenSSL's default locations (OPENSSLDIR /usr/lib/ssl), as Debian's openssl package links them.
    tree.add(Entry("/usr/lib/ssl/certs", "symlink", 0o777, target="/etc/ssl/certs"))
    tree.add(Entry("/usr/lib/ssl/cert.pem", "symlink", 0o777, target=CA_BUNDLE))
    if os.path.isfile("/usr/lib/os-release"):
        tree.add(Entry("/usr/lib/os-release", "file", 0o644, source=Path("/usr/lib/os-release")))
        tree.add(Entry("/etc/os-release", "symlink", 0o777, target="../usr/lib/os-release"))
    tree.add(Entry("/tmp", "dir", 0o1777))
    for d in ("/dev", "/proc", "/sys", "/etc/ssl/certs"):
        tree.add(Entry(d, "dir", 0o755))


class _Digest:
    """A write-only sink that counts and hashes what passes to the next one (or to nowhere)."""

    def __init__(self, sink: BinaryIO | _Digest | gzip.GzipFile | None = None) -> None:
        self.sink = sink
        self.sha = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        self.size += len(data)
        if self.sink is not None:
            self.sink.write(data)
        return len(data)

    def flush(self) -> None:
        if self.sink is not None:
            self.sink.flush()

    @property
    def digest(self) -> str:
        return "sha256:" + self.sha.hexdigest()


def _tarinfo(name: str, mtime: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mtime = mtime
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def write_layer(entries: Sequence[Entry], out: BinaryIO, mtime: int, compress: bool) -> tuple[_Digest, _Digest]:
    """The layer tar of the entries into out (gzip unless not compress): the digests and sizes of
    the stored blob and of the tar (the diff ID)."""
    blob = _Digest(out)
    gz = gzip.GzipFile(filename="", mode="wb", compresslevel=6, fileobj=blob, mtime=0) if compress else None
    raw = _Digest(gz if gz is not None else blob)
    # tarfile's stream mode only writes to fileobj (its _Fileobj type wants read/seek too).
    with tarfile.open(fileobj=cast("IO[bytes]", raw), mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for e in entries:
            info = _tarinfo(e.path.lstrip("/"), mtime)
            info.mode = e.mode
            if e.kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif e.kind == "symlink":
                info.type = tarfile.SYMTYPE
                info.linkname = e.target
                tar.addfile(info)
            elif e.data is not None:
                info.size = len(e.data)
                tar.addfile(info, io.BytesIO(e.data))
            else:
                assert e.source is not None
                with e.source.open("rb") as f:
                    info.size = os.fstat(f.fileno()).st_size
                    tar.addfile(info, f)
    if gz is not None:
        gz.close()
    return blob, raw


def _json(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def project_version() -> str:
    m = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M)
    return m.group(1) if m else "0"


def source_date_epoch() -> int:
    return int(os.environ.get("SOURCE_DATE_EPOCH", "0"))


def venv_home(venv: Path) -> Path | None:
    """The prefix of the interpreter a venv was made from (pyvenv.cfg's home is its bin/)."""
    try:
        text = (venv / "pyvenv.cfg").read_text()
    except OSError:
        return None
    m = re.search(r"^home\s*=\s*(.+?)\s*$", text, re.M)
    return Path(m.group(1)).parent if m else None


def build_image(
    out: Path,
    python_prefix: Path | None = None,
    venv: Path | None = None,
    *,
    checkout: Path | None = None,
    name: str = DEFAULT_NAME,
    tag: str | None = None,
    compression: str = "gzip",
    excludes: Sequence[str] = DEFAULT_EXCLUDES,
) -> BuildResult:
    """Build the base image into the OCI archive out (replaced atomically).

    venv defaults to this interpreter's venv (sys.prefix when it is one), python_prefix to the
    venv's interpreter (pyvenv.cfg's home) or this one's (sys.base_prefix), and checkout to this repository: what the pods mount, so what
    resolves in there is not copied. The tag defaults to 12 hex digits of the manifest digest.
    """
    start = time.monotonic()
    if venv is None and sys.prefix != sys.base_prefix:
        venv = Path(sys.prefix)
    prefix = Path(python_prefix or (venv_home(venv) if venv is not None else None) or sys.base_prefix)
    roots = [p for p in (prefix, venv, checkout or REPO) if p is not None]
    if compression not in ("gzip", "none"):
        raise ImageError(f"compression is gzip or none, not {compression!r}")
    entries, packages, unresolved = collect(prefix, venv, roots, excludes)
    labels = {
        "org.opencontainers.image.title": "elastic-idl base",
        "org.opencontainers.image.description": (
            "Shared libraries and a shell for pods that mount the interpreter, the checkout and its venv "
            "at their host paths (cluster/image.py)"
        ),
        "io.elastic-idl.packages": " ".join(packages),
    }
    return write_archive(
        out, entries, labels, {}, name=name, tag=tag, compression=compression, start=start,
        packages=packages, unresolved=unresolved,
    )  # fmt: skip


def build_pause_image(out: Path, binary: Path, *, name: str = PAUSE_NAME, tag: str | None = None) -> BuildResult:
    """The pod sandbox's image: the static `pause` (cluster/runtime/cmd/pause) as /pause, its entrypoint."""
    if not _is_elf(binary):
        raise ImageError(f"not an executable: {binary}")
    entries = [Entry("/pause", "file", 0o755, source=binary)]
    labels = {
        "org.opencontainers.image.title": "elastic-idl pause",
        "org.opencontainers.image.description": "The pod sandbox's process (cluster/runtime/cmd/pause)",
    }
    return write_archive(
        out, entries, labels, {"Entrypoint": ["/pause"]}, name=name, tag=tag, compression="gzip",
        start=time.monotonic(), packages=[], unresolved=[],
    )  # fmt: skip


def write_archive(
    out: Path,
    entries: Sequence[Entry],
    labels: dict[str, str],
    run_config: dict[str, object],
    *,
    name: str,
    tag: str | None,
    compression: str,
    start: float,
    packages: Sequence[str],
    unresolved: Sequence[str],
) -> BuildResult:
    """One image of one layer (the entries) as an OCI image layout archive at out (replaced
    atomically); run_config adds to the image config's Env PATH and WorkingDir /."""
    epoch = source_date_epoch()
    created = dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    layer_tmp = out.with_name(out.name + ".layer.tmp")
    archive_tmp = out.with_name(out.name + ".tmp")
    try:
        with layer_tmp.open("wb") as f:
            blob, raw = write_layer(entries, f, epoch, compression == "gzip")
        labels = {
            **labels,
            "org.opencontainers.image.version": project_version(),
            "org.opencontainers.image.created": created,
            "org.opencontainers.image.vendor": "elastic-idl",
        }
        config_obj: dict[str, object] = {"Env": [f"PATH={PATH_ENV}"], "WorkingDir": "/", "Labels": labels}
        config = _json(
            {
                "architecture": "amd64",
                "os": "linux",
                "created": created,
                "config": config_obj | run_config,
                "rootfs": {"type": "layers", "diff_ids": [raw.digest]},
                "history": [{"created": created, "created_by": "cluster/image.py build"}],
            }
        )
        layer_media = MEDIA_LAYER + ("+gzip" if compression == "gzip" else "")
        manifest = _json(
            {
                "schemaVersion": 2,
                "mediaType": MEDIA_MANIFEST,
                "config": {"mediaType": MEDIA_CONFIG, "digest": _sha(config), "size": len(config)},
                "layers": [{"mediaType": layer_media, "digest": blob.digest, "size": blob.size}],
            }
        )
        manifest_digest = _sha(manifest)
        tag = tag or manifest_digest.split(":", 1)[1][:12]
        ref = f"{name}:{tag}"
        index = _json(
            {
                "schemaVersion": 2,
                "mediaType": MEDIA_INDEX,
                "manifests": [
                    {
                        "mediaType": MEDIA_MANIFEST,
                        "digest": manifest_digest,
                        "size": len(manifest),
                        "platform": {"architecture": "amd64", "os": "linux"},
                        "annotations": {
                            "io.containerd.image.name": ref,
                            "org.opencontainers.image.ref.name": tag,
                        },
                    }
                ],
            }
        )
        blobs: dict[str, bytes | Path] = {
            _sha(config): config,
            manifest_digest: manifest,
            blob.digest: layer_tmp,
        }
        with archive_tmp.open("wb") as f, tarfile.open(fileobj=f, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for d in ("blobs", "blobs/sha256"):
                info = _tarinfo(d, epoch)
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            members: list[tuple[str, bytes | Path]] = [
                *((f"blobs/sha256/{d.split(':', 1)[1]}", v) for d, v in blobs.items()),
                ("index.json", index),
                ("oci-layout", _json({"imageLayoutVersion": "1.0.0"})),
            ]
            for member, content in sorted(members, key=lambda m: m[0]):
                info = _tarinfo(member, epoch)
                info.mode = 0o644
                if isinstance(content, bytes):
                    info.size = len(content)
                    tar.addfile(info, io.BytesIO(content))
                else:
                    info.size = content.stat().st_size
                    with content.open("rb") as src:
                        tar.addfile(info, src)
        os.replace(archive_tmp, out)
    finally:
        layer_tmp.unlink(missing_ok=True)
        archive_tmp.unlink(missing_ok=True)
    return BuildResult(
        archive=out,
        ref=ref,
        manifest_digest=manifest_digest,
        config_digest=_sha(config),
        layer_digest=blob.digest,
        diff_id=raw.digest,
        layer_size=blob.size,
        uncompressed_size=raw.size,
        archive_size=out.stat().st_size,
        entries=len(entries),
        packages=tuple(packages),
        unresolved=tuple(unresolved),
        seconds=time.monotonic() - start,
        paths=tuple(e.path for e in entries),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="image.py", description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the base image into an OCI archive")
    b.add_argument("--out", type=Path, required=True, help="the archive to write (an OCI image layout tar)")
    b.add_argument(
        "--python-prefix", type=Path, help="the interpreter's prefix (default: the venv's, else this interpreter's)"
    )
    b.add_argument("--venv", type=Path, help="the venv (default: this interpreter's, if it runs in one)")
    b.add_argument("--checkout", type=Path, help=f"the checkout the pods mount (default: {REPO})")
    b.add_argument("--name", default=DEFAULT_NAME, help="the repository part of the image reference")
    b.add_argument("--tag", help="the tag (default: 12 hex digits of the manifest digest)")
    b.add_argument("--compression", choices=("gzip", "none"), default="gzip")
    b.add_argument(
        "--exclude", action="append", help=f"a file name pattern to skip (default: {' '.join(DEFAULT_EXCLUDES)})"
    )
    args = parser.parse_args(argv)
    try:
        result = build_image(
            args.out,
            args.python_prefix,
            args.venv,
            checkout=args.checkout,
            name=args.name,
            tag=args.tag,
            compression=args.compression,
            excludes=tuple(args.exclude) if args.exclude is not None else DEFAULT_EXCLUDES,
        )
    except ImageError as e:
        print(f"image.py: {e}", file=sys.stderr)
        return 1
    print(json.dumps(result.summary(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
