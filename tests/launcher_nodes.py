"""Launcher processes ("nodes") on loopback for the multi-node tests.

Each node is a worker script (``tests/workers/node.py``, ``tests/workers/fault_node.py``) run in
its own session, so that a test can check afterwards that nothing it started (zygote, workers,
helpers) is left: :func:`started_nodes` does, for ``tests/test_launcher_multinode.py`` and
``tests/test_launcher_faults.py``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def session_pids(sid: int) -> list[int]:
    """Live processes of a session (zombies excluded)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[4]) == sid and fields[0] not in ("Z", "X"):
            out.append(int(entry))
    return out


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def wait_until(cond: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


class Node:
    """One launcher process (a "node"), in its own session."""

    def __init__(self, script: Path, *args: str, tmpdir: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(script), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            # TMPDIR: a launcher killed outright cannot clean its temp dir; the fixture does.
            env={**os.environ, "TMPDIR": tmpdir, **(env or {})},
        )
        self.out = ""
        self.err = ""

    def result(self, timeout: float = 90) -> tuple[int, dict[str, Any]]:
        try:
            self.out, self.err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        lines = [ln for ln in self.out.splitlines() if ln.startswith("{")]
        assert lines, f"no result; stderr:\n{self.err[-3000:]}"
        return self.proc.returncode, json.loads(lines[-1])

    def log_time(self, pattern: str) -> float:
        """The time stamp of the first log line matching ``pattern`` (after :meth:`result`)."""
        for line in self.err.splitlines():
            if re.search(pattern, line):
                return float(line.split(" ", 1)[0])
        raise AssertionError(f"no log line matches {pattern!r}; stderr:\n{self.err[-3000:]}")

    def signal_group(self, sig: int) -> None:
        os.killpg(self.proc.pid, sig)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.close()

    def close(self) -> None:
        """Reap the launcher and close its pipes (whatever state it is in)."""
        if self.proc.stdout is not None and not self.proc.stdout.closed:
            self.proc.communicate()


class Nodes(list[Node]):
    """The launchers a test started."""

    def __init__(self, script: Path, tmpdir: str) -> None:
        super().__init__()
        self.script = script
        self.tmpdir = tmpdir

    def start(self, *args: str, env: dict[str, str] | None = None) -> Node:
        node = Node(self.script, *args, tmpdir=self.tmpdir, env=env)
        self.append(node)
        return node


@contextmanager
def started_nodes(script: Path, prefix: str) -> Iterator[Nodes]:
    """Start launchers of ``script`` with ``nodes.start(...)``; afterwards nothing of theirs may be left."""
    tmpdir = tempfile.mkdtemp(prefix=prefix, dir="/tmp")  # short: fork server sockets live here
    started = Nodes(script, tmpdir)
    yield started
    leftovers = {}
    for n in started:
        if n.proc.poll() is None:
            n.kill()
        n.close()
        sid = n.proc.pid
        deadline = time.monotonic() + 10
        while session_pids(sid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if session_pids(sid):
            leftovers[sid] = session_pids(sid)
            os.killpg(sid, signal.SIGKILL)
    shutil.rmtree(tmpdir, ignore_errors=True)
    assert not leftovers, f"processes outlived their launcher: {leftovers}"
