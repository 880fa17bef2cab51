"""The cluster's base image (cluster/image.py): reproducible, a valid OCI layout, only what pods need.

The builds read this host's Debian packages (dpkg-query, ldd) for this interpreter and its venv:
elsewhere the tests that build are skipped. The chroot test needs root (mount namespaces).
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import json
import os
import posixpath
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
IMAGE_PY = REPO / "cluster" / "image.py"

_spec = importlib.util.spec_from_file_location("cluster_image", IMAGE_PY)
assert _spec is not None and _spec.loader is not None
image = importlib.util.module_from_spec(_spec)
sys.modules["cluster_image"] = image
_spec.loader.exec_module(image)

DEBIAN = bool(shutil.which("dpkg-query") and shutil.which("ldd")) and os.path.isfile("/etc/debian_version")
needs_debian = pytest.mark.skipif(
    not DEBIAN, reason="the image is built from a Debian host's packages (dpkg-query, ldd)"
)

#: Where the layer may put anything: the merged-/usr links, the empty mount points, /tmp, /etc, and
#: the library, binary and data folders of Debian packages. Nothing of the interpreter, the venv or
#: the checkout (the pods mount those), nothing of a user's (/root, /home).
ALLOWED = ("bin", "lib", "lib64", "sbin", "dev", "proc", "sys", "tmp", "etc/", "usr/bin/", "usr/sbin/", "usr/lib/", "usr/lib64/", "usr/libexec/", "usr/share/")  # fmt: skip
#: What kubelet/runc provide per container: the image must not carry its own.
NOT_IN_IMAGE = ("etc/hosts", "etc/hostname", "etc/resolv.conf", "etc/shadow")


@dataclass
class Built:
    result: Any  # image.BuildResult
    second: Any
    members: dict[str, bytes]  # the archive's files
    layer: dict[str, tarfile.TarInfo]
    layer_names: list[str]  # in archive order


def _blob(members: dict[str, bytes], digest: str) -> bytes:
    return members["blobs/sha256/" + digest.split(":", 1)[1]]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    if not DEBIAN:
        pytest.skip("the image is built from a Debian host's packages (dpkg-query, ldd)")
    out = tmp_path_factory.mktemp("image")
    first = image.build_image(out / "a.tar")
    second = image.build_image(out / "b.tar")
    with tarfile.open(first.archive) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    index = json.loads(members["index.json"])
    manifest = json.loads(_blob(members, index["manifests"][0]["digest"]))
    layer_bytes = _blob(members, manifest["layers"][0]["digest"])
    with tarfile.open(fileobj=io.BytesIO(layer_bytes)) as layer:
        infos = layer.getmembers()
    yield Built(first, second, members, {m.name: m for m in infos}, [m.name for m in infos])
    shutil.rmtree(out, ignore_errors=True)


@needs_debian
def test_two_builds_give_the_same_digest(built: Built) -> None:
    a, b = built.result, built.second
    assert a.manifest_digest == b.manifest_digest
    assert (a.layer_digest, a.diff_id, a.ref) == (b.layer_digest, b.diff_id, b.ref)
    assert a.archive.read_bytes() == b.archive.read_bytes()
    assert a.ref == f"{image.DEFAULT_NAME}:{a.manifest_digest[7:19]}"


@needs_debian
def test_the_archive_is_an_oci_layout(built: Built) -> None:
    m = built.members
    assert json.loads(m["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    # Every blob is named by its digest.
    blobs = {name for name in m if name.startswith("blobs/")}
    for name in blobs:
        assert name == "blobs/sha256/" + hashlib.sha256(m[name]).hexdigest()
    index = json.loads(m["index.json"])
    assert index["schemaVersion"] == 2 and index["mediaType"] == image.MEDIA_INDEX
    [desc] = index["manifests"]
    assert desc["annotations"]["io.containerd.image.name"] == built.result.ref
    assert desc["annotations"]["org.opencontainers.image.ref.name"] == built.result.ref.rsplit(":", 1)[1]
    assert desc["platform"] == {"architecture": "amd64", "os": "linux"}
    manifest_bytes = _blob(m, desc["digest"])
    assert desc["size"] == len(manifest_bytes) and desc["digest"] == built.result.manifest_digest
    manifest = json.loads(manifest_bytes)
    assert manifest["mediaType"] == desc["mediaType"] == image.MEDIA_MANIFEST
    config_bytes = _blob(m, manifest["config"]["digest"])
    assert manifest["config"]["size"] == len(config_bytes)
    [layer] = manifest["layers"]
    layer_bytes = _blob(m, layer["digest"])
    assert layer["size"] == len(layer_bytes) == built.result.layer_size
    assert layer["mediaType"] == image.MEDIA_LAYER + "+gzip"
    # Nothing but these three blobs.
    assert {desc["digest"], manifest["config"]["digest"], layer["digest"]} == {"sha256:" + n[13:] for n in blobs}
    # The gzip header holds no time and no name; the diff ID is the tar's digest.
    assert layer_bytes[3] == 0 and layer_bytes[4:8] == b"\0\0\0\0"
    tar_bytes = gzip.decompress(layer_bytes)
    config = json.loads(config_bytes)
    assert config["rootfs"] == {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(tar_bytes).hexdigest()]}
    assert config["architecture"] == "amd64" and config["os"] == "linux"
    assert config["config"]["Env"] == [f"PATH={image.PATH_ENV}"] and config["config"]["WorkingDir"] == "/"
    labels = config["config"]["Labels"]
    assert labels["org.opencontainers.image.title"] == "elastic-idl base"
    assert "libc6=" in labels["io.elastic-idl.packages"]


def _resolve(layer: dict[str, tarfile.TarInfo], path: str) -> tarfile.TarInfo:
    """The member an absolute path names in the image, following the layer's symlinks."""
    parts = [p for p in path.split("/") if p]
    done: list[str] = []
    for hops in range(40):
        if not parts:
            return layer[posixpath.join(*done)] if done else pytest.fail("/ is no member")
        name = posixpath.join(*done, parts.pop(0))
        info = layer.get(name)
        assert info is not None, f"{path}: {name} is not in the layer"
        if info.issym():
            target = info.linkname
            base = [] if target.startswith("/") else done
            parts = [p for p in posixpath.normpath(posixpath.join("/", *base, target)).split("/") if p] + parts
            done = []
        else:
            done = name.split("/")
        assert hops < 39, f"{path}: too many symlinks"
    raise AssertionError(path)


@needs_debian
def test_the_layer_holds_the_loader_libc_a_shell_and_etc(built: Built) -> None:
    layer = built.layer
    for path in ("/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/libc.so.6", "/bin/sh", "/usr/bin/env"):
        info = _resolve(layer, path)
        assert info.isfile() and info.size > 0, path
    assert _resolve(layer, "/bin/sh").mode & 0o111
    for lib in (
        "libm.so.6",
        "libz.so.1",
        "libssl.so.3",
        "libcrypto.so.3",
        "libffi.so.8",
        "libstdc++.so.6",
        "libgcc_s.so.1",
    ):
        assert _resolve(layer, f"/usr/lib/x86_64-linux-gnu/{lib}").isfile(), lib
    assert _resolve(layer, "/etc/ssl/certs/ca-certificates.crt").size > 0
    assert _resolve(layer, "/usr/lib/ssl/cert.pem").name == "etc/ssl/certs/ca-certificates.crt"
    for name in ("etc/passwd", "etc/group", "etc/nsswitch.conf"):
        assert layer[name].isfile(), name
    tmp = layer["tmp"]
    assert tmp.isdir() and tmp.mode == 0o1777
    # Reproducible members: sorted, owned by 0:0 without names, at SOURCE_DATE_EPOCH (0 here).
    assert built.layer_names == sorted(built.layer_names)
    assert {(i.uid, i.gid, i.uname, i.gname, i.mtime) for i in layer.values()} == {
        (0, 0, "", "", image.source_date_epoch())
    }


@needs_debian
def test_nothing_outside_the_expected_paths(built: Built) -> None:
    names = built.layer_names
    stray = [n for n in names if n != "usr" and n not in ALLOWED and not (n + "/").startswith(ALLOWED)]
    assert stray == []
    assert not [n for n in names if n in NOT_IN_IMAGE]
    mounted = [os.path.realpath(p).lstrip("/") for p in (sys.base_prefix, sys.prefix, REPO)]
    assert not [n for n in names if n.split("/")[0] in ("root", "home", "work") or n.startswith(tuple(mounted))]
    # No Python of its own (the pods mount the interpreter), no documentation.
    assert not [n for n in names if "python3" in posixpath.basename(n) or "site-packages" in n]
    assert not [n for n in names if n.startswith(("usr/share/doc/", "usr/share/man/", "usr/share/locale/"))]
    # Not setuid or setgid: the packages' files keep their modes, which are plain ones here.
    assert not [n for n, i in built.layer.items() if i.mode & 0o6000]


def test_the_layer_writer_is_deterministic(tmp_path: Path) -> None:
    """Without Debian: the same entries give the same bytes, whatever the files' times."""
    src = tmp_path / "f"
    src.write_bytes(b"x" * 1000)
    entries = [
        image.Entry("/etc", "dir"),
        image.Entry("/etc/f", "file", 0o644, source=src),
        image.Entry("/etc/g", "file", 0o600, data=b"generated"),
        image.Entry("/etc/l", "symlink", 0o777, target="f"),
        image.Entry("/tmp", "dir", 0o1777),
    ]
    outs = []
    for mtime in (1_000_000, 2_000_000):
        os.utime(src, (mtime, mtime))
        buf = io.BytesIO()
        blob, raw = image.write_layer(entries, buf, 0, compress=True)
        assert blob.size == len(buf.getvalue())
        assert raw.digest == "sha256:" + hashlib.sha256(gzip.decompress(buf.getvalue())).hexdigest()
        outs.append(buf.getvalue())
    assert outs[0] == outs[1]
    with tarfile.open(fileobj=io.BytesIO(outs[0])) as tar:
        got = {m.name: (m.type, m.mode, m.mtime) for m in tar.getmembers()}
    assert got["tmp"] == (tarfile.DIRTYPE, 0o1777, 0)
    assert got["etc/l"] == (tarfile.SYMTYPE, 0o777, 0)


@needs_debian
@pytest.mark.skipif(os.geteuid() != 0, reason="the chroot check needs root (a private mount namespace, bind mounts)")
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux's unshare")
def test_the_image_runs_the_venv_in_a_chroot(built: Built, tmp_path: Path) -> None:
    """The layer as a root file system with the interpreter, the checkout and the venv bound read-only
    at their host paths (as the pods' hostPath volumes): /bin/sh runs, and so does the venv's Python
    with this project, ssl and sqlite3. All mounts are in a private mount namespace of unshare's."""
    rootfs = tmp_path / "rootfs"
    rootfs.mkdir()
    index = json.loads(built.members["index.json"])
    manifest = json.loads(_blob(built.members, index["manifests"][0]["digest"]))
    with tarfile.open(fileobj=io.BytesIO(_blob(built.members, manifest["layers"][0]["digest"]))) as tar:
        tar.extractall(rootfs, filter="fully_trusted")  # our own layer
    binds = sorted({os.path.realpath(sys.base_prefix), str(REPO), sys.prefix})
    script = ["set -e", f'R="{rootfs}"']
    for d in binds:
        script += [f'mkdir -p "$R{d}"', f'mount --bind "{d}" "$R{d}"', f'mount -o remount,bind,ro "$R{d}"']
    script += [
        'mount -t proc proc "$R/proc"',
        'mount -t tmpfs -o mode=755 tmpfs "$R/dev"',
        'for n in null zero urandom random; do touch "$R/dev/$n"; mount --bind "/dev/$n" "$R/dev/$n"; done',
        "chroot \"$R\" /bin/sh -c 'echo shell ok'",
        f'chroot "$R" /usr/bin/env -i PATH={image.PATH_ENV} {sys.prefix}/bin/python -c '
        "\"import ssl, sqlite3, ctypes, elastic_idl; ssl.create_default_context(); print('python ok')\"",
    ]
    r = subprocess.run(
        ["unshare", "--mount", "--pid", "--fork", "--propagation", "private", "sh", "-c", "\n".join(script)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["shell", "ok", "python", "ok"]
