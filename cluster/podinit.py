"""A pod's sandbox and its containers, in Linux namespaces (the node agent's runtime; test equipment).

    python podinit.py sandbox HOSTNAME POD_DIR
        The pod sandbox (what a runtime's pause container is): new network, UTS and IPC
        namespaces with the hostname set; prints "ready" once they exist, then sleeps until
        killed. The node agent wires a veth into its network namespace (/proc/PID/ns/net).
        It dies with the thread of the node agent that started it.

    python podinit.py container SPEC.json
        One container: joins the sandbox's network, UTS and IPC namespaces, makes a PID and a
        mount namespace of its own and forks the container's PID 1, which mounts its /proc,
        /sys, /run, /dev (the host's device nodes null, zero, full, random, urandom, tty; a private
        /dev/shm; /dev/termination-log), /tmp (keeping the spec's `keep` folders under /tmp
        visible: a checkout there is part of the image), /etc/hosts, /etc/hostname, /etc/resolv.conf and the
        pod's volumes, changes to the working directory and execs the command with exactly the
        spec's environment. This process waits for it, writes its host PID to the spec's
        pid_file first (the node agent signals that PID: SIGTERM reaches a PID 1 only when it
        handles SIGTERM, as in a container), and exits with its status: the exit code, or
        128 + N when signal N killed it. A command that cannot start exits 128 (the runtime's
        StartError) with the reason on stderr.

Only the node agent runs this, as root; the spec is a file the agent wrote (JSON, never a shell
string). The host's file system is the image: the root is shared, the listed mounts are not.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC = 2, 4, 8
MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 4096, 8192, 16384, 1 << 18
PR_SET_PDEATHSIG = 1
#: The exit code of a container whose command could not start (runc's StartError).
START_ERROR = 128
#: Folders of the container's own (not the host's): a volume's mount point may be made there.
OWN_FOLDERS = ("/dev/", "/tmp/", "/run/", "/var/run/")
#: The host's device nodes a container sees (what a runtime's default /dev holds).
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")

_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def die_with_parent() -> None:
    """SIGKILL this process when the thread that started it ends."""
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def setns(path: str, nstype: int) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        _check(_libc.setns(fd, nstype), f"setns {path}")
    finally:
        os.close(fd)


def mount(source: str, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(
        _libc.mount(
            source.encode(),
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {source} on {target}",
    )


def sandbox(hostname: str) -> None:
    die_with_parent()
    unshare(CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWIPC)
    socket.sethostname(hostname)
    # The pod gets IPv4 only (the pod range); no IPv6 link-local chatter.
    for conf in ("all", "default"):
        Path(f"/proc/sys/net/ipv6/conf/{conf}/disable_ipv6").write_text("1\n")
    print("ready", flush=True)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    while True:
        signal.pause()


def _mount_dev(termination_log: str) -> None:
    """A /dev of the container's own: made on a staging folder while the host's /dev is still in
    sight (its device nodes are bound from there), then moved onto /dev."""
    stage = "/run/.dev"
    os.mkdir(stage)
    mount("tmpfs", stage, "tmpfs", MS_NOSUID, "mode=755,size=65536k")
    for name in DEVICES:
        Path(f"{stage}/{name}").touch()
        mount(f"/dev/{name}", f"{stage}/{name}", None, MS_BIND)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2"), ("ptmx", "pts/ptmx")):  # fmt: skip
        os.symlink(target, f"{stage}/{name}")
    os.mkdir(f"{stage}/shm")
    mount("shm", f"{stage}/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=1777,size=65536k")
    Path(f"{stage}/termination-log").touch()
    mount(termination_log, f"{stage}/termination-log", None, MS_BIND)
    mount(stage, "/dev", None, MS_MOVE)
    os.rmdir(stage)


def _pid1(spec: dict[str, Any]) -> None:
    """In the new PID namespace (this is PID 1): the mounts, then exec. Never returns."""
    mount("none", "/", None, MS_REC | MS_PRIVATE)
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC)  # the pod's own network devices
    # /run (and /var/run) of its own, as an image has: the host's sockets and state stay out of
    # sight, and mount points such as the service account's /var/run/secrets can be made here.
    mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=65536k")
    _mount_dev(spec["termination_log"])
    # /tmp of its own; host folders under /tmp that stand in for the image (a checkout under /tmp)
    # stay where they are: moved aside first, back on top of the new /tmp after.
    keep = [p for p in spec.get("keep", []) if p.startswith("/tmp/")]
    for i, path in enumerate(keep):
        os.mkdir(f"/run/.keep{i}")
        mount(path, f"/run/.keep{i}", None, MS_BIND | MS_REC)
    mount(spec["tmp"], "/tmp", None, MS_BIND)
    for i, path in enumerate(keep):
        os.makedirs(path, exist_ok=True)  # in the pod's own /tmp folder
        mount(f"/run/.keep{i}", path, None, MS_MOVE)
        os.rmdir(f"/run/.keep{i}")
    for source, target in spec["etc"].items():  # hosts, hostname, resolv.conf
        mount(source, target, None, MS_BIND)
    for m in spec["mounts"]:
        target = m["path"]
        if not os.path.isdir(target) and target.startswith(OWN_FOLDERS):
            os.makedirs(target)
        if not os.path.isdir(target):
            raise OSError(f"volume mount {m['name']}: {target} is not a folder on this machine (there is no image)")
        if m["medium"] == "Memory":
            mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={m['size_kib']}k")
        else:
            mount(m["source"], target, None, MS_BIND | MS_REC)
    os.chdir(spec["cwd"])
    argv = spec["argv"]
    try:
        os.execvpe(argv[0], argv, spec["env"])
    except FileNotFoundError:
        raise OSError(f'exec: "{argv[0]}": executable file not found in $PATH') from None


def container(spec_path: str) -> int:
    die_with_parent()
    spec = json.loads(Path(spec_path).read_text())
    sandbox_pid = spec["sandbox_pid"]
    for ns, flag in (("net", CLONE_NEWNET), ("uts", CLONE_NEWUTS), ("ipc", CLONE_NEWIPC)):
        setns(f"/proc/{sandbox_pid}/ns/{ns}", flag)
    unshare(CLONE_NEWNS | CLONE_NEWPID)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        try:
            die_with_parent()
            os.set_inheritable(write_fd, False)
            _pid1(spec)
        except BaseException as e:  # the command never started: say why, the runtime's StartError
            os.write(write_fd, f"{type(e).__name__}: {e}".encode()[:2000])
        os._exit(START_ERROR)
    os.close(write_fd)
    Path(spec["pid_file"]).write_text(f"{pid}\n")
    # A TERM or INT for this process goes to the container's PID 1 (the agent signals PID 1 itself).
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda s, _f: os.kill(pid, s))
    _, status = os.waitpid(pid, 0)
    start_error = os.read(read_fd, 4096).decode(errors="replace")
    if start_error:
        print(f"podinit: cannot start the container: {start_error}", file=sys.stderr, flush=True)
        return START_ERROR
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


#: The ethtool ioctl and its legacy set commands (linux/ethtool.h): checksum, scatter-gather, TSO, GSO, GRO.
def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "sandbox":  # POD_DIR: names the cluster's processes for `down`
        sandbox(argv[1])
        return 0
    if len(argv) == 2 and argv[0] == "container":
        return container(argv[1])
    print("usage: podinit.py sandbox HOSTNAME POD_DIR | container SPEC.json", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
