"""What runs first in every worker process, whatever the start method.

torch hands each worker one callable (the entrypoint). The launcher always
gives it a `WorkerMain`, which first makes the process look like a
fresh interpreter (signals, parent-death signal, thread count) and then runs
the user's function, script or module.

A function's return value goes to the launcher by pickle, which torch does after the
function returned, outside what it records of the worker: a value that cannot be pickled
ended the worker with no recorded cause ("no Python exception recorded"). So it is
pickled here, inside the recorded call (`Sent`), and one that cannot be is a
``TypeError`` naming it, with its cause.

Torch-free on purpose: a spawned worker imports this module before torch, and
a forked one already has torch in ``sys.modules``.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import logging
import multiprocessing.forkserver
import os
import pickle
import runpy
import signal
import string
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from elastic_idl._launch import blas
from elastic_idl._launch.collective import apply_collective_timeout
from elastic_idl._task.names import AGENT_SIGNALS

__all__ = [
    "KIND_CALLABLE",
    "KIND_MODULE",
    "KIND_SCRIPT",
    "Sent",
    "WorkerMain",
    "cwd_first_on_path",
    "note_launcher_threads",
    "set_parent_death_signal",
    "stash",
    "unstash",
]

KIND_CALLABLE = "callable"
KIND_SCRIPT = "script"
KIND_MODULE = "module"

#: Linux prctl option: the signal this process gets when its parent (thread) dies.
_PR_SET_PDEATHSIG = 1

#: Entrypoints kept in memory for workers forked from a copy of this process
#: (the warm fork server): key -> (function, args). Never pickled.
_STASH: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {}


def stash(key: str, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """Keep ``fn(*args)`` for workers forked after this call (no pickling needed)."""
    _STASH[key] = (fn, args)


def unstash(key: str) -> None:
    """Forget a stashed entrypoint (the launcher's copy; forked copies are unaffected)."""
    _STASH.pop(key, None)


@contextlib.contextmanager
def cwd_first_on_path() -> Iterator[str]:
    """While inside, the working directory is first on ``sys.path``, as ``python -m`` has it.

    A launcher started as a console script (``elastic-idl``) or from a script elsewhere has
    that script's directory there instead, so ``pkg.train`` in the working directory would
    not be found. Yields the directory; afterwards the entry is removed again (modules
    imported meanwhile stay imported).
    """
    cwd = os.getcwd()
    sys.path.insert(0, cwd)
    try:
        yield cwd
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(cwd)  # the first occurrence: the one inserted above


def _reset_signals() -> None:
    """Give the worker a fresh interpreter's signal dispositions.

    A forked worker inherits the agent's handlers, which raise a Python exception
    that only runs once the interpreter regains control: a worker blocked in a C++
    collective then ignores SIGTERM and is only SIGKILLed after torch's fixed 30 s
    grace period. With the default disposition SIGTERM ends it at once.
    """
    names = set(AGENT_SIGNALS)
    names.update(s.strip() for s in os.environ.get("TORCHELASTIC_SIGNALS_TO_HANDLE", "").split(",") if s.strip())
    for name in sorted(names):
        sig = getattr(signal, name, None)
        if sig is None:
            continue
        try:
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
        except (OSError, ValueError, RuntimeError):  # not the main thread, or not a real signal
            pass


def set_parent_death_signal(sig: int) -> bool:
    """Ask Linux to send ``sig`` to this process when its parent (thread) dies; False when libc cannot."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - exotic libc
        return False
    return True


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this worker when its parent (agent or fork server) dies.

    torch's own hook sends SIGINT, which a worker stuck in a C++ call never acts
    on; SIGKILL guarantees no orphan survives a launcher that was killed outright.
    """
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    if not set_parent_death_signal(int(signal.SIGKILL)):
        return
    if os.getppid() != parent or (parent == 1 and not _pid1_is_a_launcher()):
        os._exit(1)  # the parent died before prctl: we are already orphaned


def _pid1_is_a_launcher() -> bool:
    """Whether PID 1 runs this Python: in a container the launcher is PID 1 (the pod's command)
    and spawns its workers itself, so a parent of 1 is the launcher, not init adopting an orphan."""
    try:
        return os.path.realpath("/proc/1/exe") == os.path.realpath(sys.executable)
    except OSError:
        return False


def _forget_fork_server() -> None:
    """Drop the fork server's "alive" pipe that a forked worker inherits.

    CPython's fork server stays up while any holder of that pipe lives; a worker
    keeping it would keep the server (and so itself) alive after the launcher
    died. A worker that later wants a fork server of its own starts a fresh one.
    """
    fs: Any = multiprocessing.forkserver._forkserver
    fd = fs._forkserver_alive_fd
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass
    fs._forkserver_alive_fd = None
    fs._forkserver_address = None
    fs._forkserver_pid = None


#: OMP_NUM_THREADS of the launcher before a launch changed it (None: unset); _NOT_NOTED in a
#: process that is no copy of a launcher (a spawned worker, a cold fork server).
_NOT_NOTED = "<not noted>"
_LAUNCHER_THREADS: str | None = _NOT_NOTED


def note_launcher_threads(value: str | None) -> None:
    """Remember the launcher's own OMP_NUM_THREADS (call before a launch changes it); forked workers inherit it."""
    global _LAUNCHER_THREADS
    _LAUNCHER_THREADS = value


def _apply_thread_count() -> None:
    """Give the worker the intra-op thread count a fresh interpreter would have, as under torchrun.

    torch fixes its thread count when it is imported, from OMP_NUM_THREADS, which an MKL
    build of torch caps at the physical cores (MKL's dynamic mode): OMP_NUM_THREADS=3 on
    2 cores gives 2. A worker that imported torch itself (spawn, the cold fork server)
    already has that count. A forked one inherits the launcher's, which torch computed
    from the same variable, unless the launch changed it (``OMP_NUM_THREADS=1`` for
    several workers, torchrun's default): only then is the value applied.
    """
    if _LAUNCHER_THREADS == _NOT_NOTED:
        return
    # OpenBLAS (numpy's, loaded with torch) read its count in the launcher; its pool was stopped
    # before the fork and restarts at the first threaded call, with the count set here.
    blas.apply_env_threads()
    value = os.environ.get("OMP_NUM_THREADS", "")
    if value != _LAUNCHER_THREADS:
        _set_torch_threads(value)


def _set_torch_threads(value: str) -> None:
    """``torch.set_num_threads`` of an ``OMP_NUM_THREADS`` value, when torch is loaded and it is a count."""
    torch = sys.modules.get("torch")
    if torch is not None and value.strip().isdigit() and int(value) > 0:
        torch.set_num_threads(int(value))


def _own_session() -> None:
    """Put the worker in a session of its own, as torchrun's workers are.

    A terminal's Ctrl-C (and a ``kill`` of the launcher's process group) then reaches the
    launcher alone, which stops the workers with one signal each: a worker in the launcher's
    group got the terminal's SIGINT and then the agent's, so a script that catches
    KeyboardInterrupt to save a checkpoint was interrupted again while saving.
    """
    with contextlib.suppress(OSError):  # already a session or group leader
        os.setsid()


def _fresh_start_method() -> None:
    """Leave multiprocessing's start method unset, as in a fresh interpreter.

    A worker started by a fork server or by spawn has it set by CPython's bootstrap, so a
    script's own ``multiprocessing.set_start_method("spawn")`` raised "context has already
    been set"; under torchrun the script is a fresh interpreter and it succeeds.
    """
    with contextlib.suppress(RuntimeError, ValueError):
        multiprocessing.set_start_method(None, force=True)


#: The env variables a script may set before ``import torch`` or ``import numpy`` to choose their
#: thread counts (read once, at that import, in a fresh interpreter).
_THREAD_ENV = frozenset({"OMP_NUM_THREADS", *blas.THREAD_ENV})


def _thread_env_hook(event: str, args: tuple[Any, ...]) -> None:
    """Audit hook: a thread-count variable the script sets takes effect in this worker.

    In a fresh interpreter (torchrun's workers) a script that sets ``OMP_NUM_THREADS``
    before ``import torch`` gets that many threads; here torch (and numpy's OpenBLAS) are
    already loaded, so the value is applied when it is set.
    """
    if event != "os.putenv" or len(args) != 2:
        return
    try:
        key, value = (a.decode() if isinstance(a, bytes) else str(a) for a in args)
        if key not in _THREAD_ENV:
            return
        blas.apply_env_threads({**os.environ, key: value})
        if key == "OMP_NUM_THREADS":
            _set_torch_threads(value)
    except Exception:  # an audit hook must never break the script's os.environ write
        pass


def _follow_thread_env() -> None:
    sys.addaudithook(_thread_env_hook)


def _substitute(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """torch's ``${local_rank}`` macro in string arguments (as torchrun does)."""
    local_rank = os.environ.get("LOCAL_RANK", "0")
    return tuple(string.Template(a).safe_substitute(local_rank=local_rank) if isinstance(a, str) else a for a in args)


def _write_error_file(message: str, tb: str) -> None:
    """Record a failure in torch's error-file format (what ``@record`` writes)."""
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path:
        return
    data = {"message": {"message": message, "extraInfo": {"py_callstack": tb, "timestamp": str(int(time.time()))}}}
    try:
        with open(path, "w") as fh:
            json.dump(data, fh)
    except OSError:  # pragma: no cover - the agent owns the directory
        pass


def _ignore_interrupts() -> None:
    """The user's code has ended: from here on the worker only exits, and SIGINT must not stop that.

    Ctrl-C sends SIGINT to the whole process group: the worker's script gets its
    KeyboardInterrupt, and the agent, on its own SIGINT, sends the workers another one
    (torch stops workers with the signal the agent got). Arriving in an atexit handler,
    that second one printed ``Exception ignored in atexit callback ... KeyboardInterrupt``.
    A worker that hangs while exiting is still ended by the agent's SIGKILL after
    ``shutdown_timeout``.
    """
    with contextlib.suppress(OSError, ValueError):  # ValueError: not the main thread
        signal.signal(signal.SIGINT, signal.SIG_IGN)


class Sent:
    """A worker function's return value, pickled in the worker; unpickled where torch hands it over.

    Build one with `pickled` (or from bytes already pickled, with the function that reads
    them back: it is pickled by reference, so it must be a module-level function).
    """

    def __init__(self, payload: bytes, loads: Callable[[bytes], Any] = pickle.loads) -> None:
        self._payload = payload
        self._loads = loads

    @classmethod
    def pickled(cls, value: Any, what: str) -> Sent:
        """``value`` pickled as torch would (``ForkingPickler``: tensors go by shared memory).

        Raises:
            TypeError: It cannot be pickled; says ``what`` it is, with the pickler's error as cause.
        """
        from multiprocessing.reduction import ForkingPickler

        try:
            return cls(bytes(ForkingPickler.dumps(value)))
        except Exception as exc:
            raise TypeError(
                f"{what} (a {type(value).__name__}) cannot be sent from the worker to the launcher: pickle fails "
                f"with {type(exc).__name__}: {exc}. Return values that pickle: numbers, strings, tensors, and "
                "classes defined at the top level of a module (not inside a function)"
            ) from exc

    def __reduce__(self) -> tuple[Any, ...]:
        return (self._loads, (self._payload,))


def _run_as_main(kind: str, target: str, argv: tuple[str, ...], *, fresh: bool) -> None:
    """Run a script or module as ``__main__`` with ``sys.argv`` set, like ``python`` does.

    ``fresh``: this process is a fresh interpreter (spawn), not a copy of the launcher.
    """
    if not fresh:
        # A forked worker is a copy of the launcher: its atexit handlers are not the script's.
        # A spawned worker's are its own (torch's among them: weakref.finalize's hook, which
        # runs torch.library's finalizers before the interpreter tears its modules down).
        atexit._clear()
        if "logging" in sys.modules:
            atexit.register(logging.shutdown)
    # python puts the script's directory (or, for -m, the working directory) first on
    # sys.path. The launcher's own entries stay behind it: it found the module with them.
    sys.path.insert(0, os.path.dirname(os.path.abspath(target)) if kind == KIND_SCRIPT else os.getcwd())
    try:
        sys.argv = [target, *argv]  # for a module, runpy puts the module's file in argv[0]
        if kind == KIND_SCRIPT:
            runpy.run_path(target, run_name="__main__")
        else:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
        if code is None or code == 0:
            return
        # Keep the script's exit code, but say why it ended (torch records no file for SystemExit).
        what = f"exit code {code}" if isinstance(code, int) else repr(code)
        _write_error_file(f"SystemExit: {target} exited with {what}", traceback.format_exc())
        raise
    finally:
        _ignore_interrupts()
        atexit._run_exitfuncs()


class WorkerMain:
    """The entrypoint torch starts in every worker: bootstrap, then the user's code.

    Picklable (a spawned worker receives it by pickle) unless it holds an
    unpicklable function, which only happens with the fork start method.

    Attributes:
        kind: "callable", "script" or "module".
        target: The function (callable kind, unless stashed), the script path, or the module name.
        args: Arguments: to the function, or the script's / module's argv after its name.
        stash_key: When set, the function and its arguments are looked up in this
            process's stash (workers forked from a warm copy of the launcher);
            nothing about them is pickled.
        fresh: The workers are fresh interpreters (spawn), not copies of the launcher:
            the atexit handlers they have when the script starts are their own.
    """

    def __init__(
        self,
        kind: str,
        target: Any,
        args: tuple[Any, ...] = (),
        *,
        stash_key: str = "",
        name: str = "",
        fresh: bool = False,
    ) -> None:
        self.kind = kind
        self.target = target
        self.args = args
        self.stash_key = stash_key
        self.fresh = fresh
        # torch names the entrypoint in its logs and failures by these two.
        self.__name__ = name or getattr(target, "__qualname__", None) or str(target)
        self.__qualname__ = self.__name__

    def __repr__(self) -> str:
        return f"WorkerMain({self.kind}, {self.__name__!r})"

    def spawned(self) -> WorkerMain:
        """The same entrypoint, for workers that are fresh interpreters (the spawn start method)."""
        return WorkerMain(self.kind, self.target, self.args, stash_key=self.stash_key, name=self.__name__, fresh=True)

    def __call__(self) -> Any:
        _reset_signals()
        _die_with_parent()
        _own_session()
        _forget_fork_server()
        _fresh_start_method()
        _apply_thread_count()
        _follow_thread_env()
        apply_collective_timeout()  # the task's collective_timeout for every group created without one
        try:
            if self.kind == KIND_CALLABLE:
                if self.stash_key:
                    fn, args = _STASH[self.stash_key]
                else:
                    fn, args = self.target, self.args
                value = fn(*_substitute(args))
                return value if isinstance(value, Sent) else Sent.pickled(value, f"the value {self.__name__} returned")
            _run_as_main(self.kind, str(self.target), tuple(str(a) for a in _substitute(self.args)), fresh=self.fresh)
            return None
        finally:
            _ignore_interrupts()
