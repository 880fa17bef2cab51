"""A warm fork server: CPython's forkserver, but forked from the launcher itself.

torch's ``forkserver`` start method forks workers from a server process. CPython
starts that server as a fresh interpreter, which then imports torch again
(about as slow as spawning). Here the server is instead ``os.fork()``-ed from
the launcher once torch is imported and before any thread or CUDA context
exists, so every worker starts with torch already loaded, yet is forked from a
clean, single-threaded process: the speed of ``fork`` without its hazards
(locks held by other threads, CUDA state, the agent's signal handlers).

While a launch runs, this server stands in for CPython's forkserver (the
module-level singleton that torch's ``forkserver`` processes talk to); the
previous state is restored afterwards. The server dies with the launcher: it
has a parent-death signal, and exits when the launcher closes its "alive" pipe.

Torch-free: it reads ``sys.modules`` to check CUDA but never imports torch.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing.forkserver as _fs
import os
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from multiprocessing import connection, util
from typing import Any

from elastic_idl._launch import blas
from elastic_idl._launch.worker import set_parent_death_signal
from elastic_idl._task.names import AGENT_SIGNALS

__all__ = ["Zygote", "cpython_forkserver", "fork_hazard", "thread_count"]

_log = logging.getLogger("elastic_idl")


def thread_count() -> int:
    """Threads of this process, C/C++ ones included (Linux), else Python's count."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:  # pragma: no cover - not Linux
        return threading.active_count()


#: How long a thread that has been joined may still be listed by the kernel. CPython marks a thread
#: finished (``join`` returns) just before the OS thread exits, so right after a join the process
#: may still show it for a moment; on a loaded machine that moment was long enough for a fork check
#: to see two threads (a fresh-clone CI run).
THREAD_EXIT_GRACE_S = 0.25


def settled_thread_count(grace_s: float = THREAD_EXIT_GRACE_S) -> int:
    """`thread_count`, after giving threads that are ending up to ``grace_s`` to go.

    Returns at once when the process runs one thread; a thread that is really running keeps the
    count above one and costs the grace period once.
    """
    deadline = time.monotonic() + grace_s
    n = thread_count()
    while n > 1 and time.monotonic() < deadline:
        time.sleep(0.005)
        n = thread_count()
    return n


def thread_names() -> list[str]:
    """The kernel's name of each thread of this process (Linux), the main thread's first."""
    names = []
    try:
        tids = sorted(os.listdir("/proc/self/task"), key=int)
    except OSError:  # pragma: no cover - not Linux
        return []
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/comm") as fh:
                names.append(fh.read().strip())
        except OSError:  # ended meanwhile
            continue
    return names


def fork_hazard() -> str | None:
    """Why forking this process now would be unsafe, or None when it is safe.

    Thread pools that restart by themselves after a fork are stopped first (OpenBLAS's,
    which ``import torch`` starts when numpy is installed: `elastic_idl._launch.blas`),
    so only the threads that really make a fork unsafe count.
    """
    if not sys.platform.startswith("linux"):
        return f"a warm fork server needs Linux (this is {sys.platform})"
    if sys.version_info >= (3, 14):  # pragma: no cover - CPython 3.14 changed the forkserver protocol
        return "a warm fork server supports CPython 3.10 to 3.13"
    if thread_count() > 1:
        blas.stop_pools()
    n = settled_thread_count()
    if n > 1:
        others = ", ".join(thread_names()[1:]) or "?"
        return (
            f"the launcher process runs {n} threads (other than the main one: {others}); a fork copies only "
            "the calling one, with any lock the others held"
        )
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "CUDA is initialised in the launcher process (a forked child cannot use it)"
    return None


def cpython_forkserver() -> Any:
    """CPython's forkserver singleton (its private state is not in the type stubs)."""
    return _fs._forkserver


class Zygote:
    """One warm fork server, alive for one launch.

    Use `start`, then `installed` around the code that starts workers
    with torch's ``forkserver`` method, then `stop`.
    """

    def __init__(self) -> None:
        self.pid: int | None = None
        self._address: str | None = None
        self._alive_w: int | None = None

    def start(self) -> None:
        """Fork the server. Call only when `fork_hazard` returns None."""
        hazard = fork_hazard()
        if hazard is not None:
            raise RuntimeError(f"cannot start a warm fork server: {hazard}")
        listener = socket.socket(socket.AF_UNIX)
        address: str = connection.arbitrary_address("AF_UNIX")  # type: ignore[attr-defined]
        listener.bind(address)
        os.chmod(address, 0o600)
        listener.listen()
        alive_r, alive_w = os.pipe()
        parent = os.getpid()
        # Buffered output would otherwise be written twice, by both processes.
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the server process (checked by the launch tests)
            code = 0
            try:
                os.close(alive_w)
                set_parent_death_signal(int(signal.SIGKILL))
                if os.getppid() != parent:
                    os._exit(0)
                # A session of its own: a signal to the launcher's process group (a terminal's Ctrl-C,
                # `kill -TERM -<pgid>`) must not end the server and, through their parent-death
                # signal, the workers it forked while they save their state.
                with contextlib.suppress(OSError):
                    os.setsid()
                for name in AGENT_SIGNALS:
                    sig = getattr(signal, name)
                    signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
                # Children must never talk to a fork server the launcher had.
                fs = cpython_forkserver()
                fs._forkserver_pid = fs._forkserver_address = fs._forkserver_alive_fd = None
                _fs.main(listener.fileno(), alive_r, [], None, None)
            except SystemExit:
                code = 0
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                os._exit(code)  # never run the launcher's atexit handlers here
        os.close(alive_r)
        listener.close()
        self.pid, self._address, self._alive_w = pid, address, alive_w
        _log.debug("elastic-idl: warm fork server pid %d at %s", pid, address)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """Make CPython's forkserver singleton point at this server, then restore it."""
        if self.pid is None:
            raise RuntimeError("the warm fork server is not running")
        server = cpython_forkserver()
        with server._lock:
            saved = (server._forkserver_address, server._forkserver_alive_fd, server._forkserver_pid)
            server._forkserver_address = self._address
            server._forkserver_alive_fd = self._alive_w
            server._forkserver_pid = self.pid
        try:
            yield
        finally:
            with server._lock:
                if server._forkserver_pid not in (self.pid, saved[2]):
                    # Our server died and CPython started a regular one meanwhile: stop it, it is ours.
                    with contextlib.suppress(Exception):
                        server._stop_unlocked()
                (server._forkserver_address, server._forkserver_alive_fd, server._forkserver_pid) = saved

    def alive(self) -> bool:
        if self.pid is None:
            return False
        try:
            pid, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return False
        return pid == 0

    def stop(self, timeout: float = 5.0) -> None:
        """Close the alive pipe (the server exits), reap it; SIGKILL after ``timeout`` s."""
        if self.pid is None:
            return
        pid, self.pid = self.pid, None
        if self._alive_w is not None:
            with contextlib.suppress(OSError):
                os.close(self._alive_w)
            self._alive_w = None
        deadline = time.monotonic() + timeout
        while True:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                break
            if done:
                break
            if time.monotonic() >= deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)
                break
            time.sleep(0.01)
        if self._address and not util.is_abstract_socket_namespace(self._address):
            with contextlib.suppress(OSError):
                os.unlink(self._address)
        self._address = None
