"""OpenBLAS's thread pool, as the launcher and its forked workers see it.

numpy ships OpenBLAS, and ``import torch`` imports numpy when it is installed: the
import starts OpenBLAS's thread pool (one thread fewer than the CPUs), so a launcher
that imported torch runs more than one thread, which would rule out the warm fork
server (`elastic_idl._launch.forkserver`). OpenBLAS itself makes forking safe:
it registers a ``pthread_atfork`` handler that stops the pool before every fork and
starts it again, lazily, at the next threaded BLAS call. `stop_pools` calls
the same exported function ahead of time, so the thread count tells the truth about
the threads that remain.

A forked worker then inherits the launcher's thread setting, where a fresh
interpreter would have computed its own from the environment (``OMP_NUM_THREADS=1``,
which the launch sets for several workers as torchrun does, gives one thread):
`apply_env_threads` sets what OpenBLAS would have read.

Found by the exported symbols of every OpenBLAS mapped into the process (the plain
build, numpy's ``scipy_openblas`` with its 64-bit suffix). Torch-free, numpy-free,
Linux only (elsewhere nothing is found and nothing changes).
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Mapping

__all__ = ["apply_env_threads", "env_threads", "pool_libraries", "stop_pools"]

#: The env variables OpenBLAS reads its thread count from at start, first set one wins.
THREAD_ENV = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
#: What the pool's stop function is exported as (the name its fork handler calls).
_STOP = "blas_thread_shutdown_"
#: The name stems of ``openblas_set_num_threads`` in the builds seen (prefix, suffix).
_SET_NAMES = (
    "openblas_set_num_threads",
    "openblas_set_num_threads64_",
    "scipy_openblas_set_num_threads64_",
    "scipy_openblas_set_num_threads",
)


def _mapped_openblas() -> list[str]:
    """Paths of the shared objects mapped into this process whose name says OpenBLAS."""
    try:
        with open("/proc/self/maps") as fh:
            lines = fh.read().splitlines()
    except OSError:  # not Linux
        return []
    seen: dict[str, None] = {}
    for line in lines:
        path = line.rpartition(" ")[2]
        if path.startswith("/") and ".so" in path and "openblas" in os.path.basename(path).lower():
            seen.setdefault(path, None)
    return list(seen)


def pool_libraries() -> list[ctypes.CDLL]:
    """Handles of the OpenBLAS libraries already loaded here that export the pool's stop function.

    Opened with ``RTLD_NOLOAD``: a library that is not loaded yet is never loaded by this.
    """
    handles = []
    for path in _mapped_openblas():
        try:
            lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        except OSError:
            continue
        if hasattr(lib, _STOP):
            handles.append(lib)
    return handles


def stop_pools() -> int:
    """Stop every loaded OpenBLAS thread pool now, as OpenBLAS's own fork handler would; how many.

    The pool starts again by itself at the next threaded BLAS call, in this process and
    in any forked from it.
    """
    libs = pool_libraries()
    for lib in libs:
        getattr(lib, _STOP)()
    return len(libs)


def env_threads(env: Mapping[str, str], cpus: int) -> int:
    """The thread count OpenBLAS starts with in a fresh process with this env on ``cpus`` CPUs."""
    for name in THREAD_ENV:
        value = env.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return min(int(value), cpus)
    return cpus


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def apply_env_threads(env: Mapping[str, str] | None = None) -> int | None:
    """Give every loaded OpenBLAS the thread count a fresh interpreter would read from ``env``.

    ``env``: os.environ when None. For a worker forked from the launcher (it inherited the
    launcher's count). Returns the
    count set, or None when no OpenBLAS is loaded.
    """
    libs = pool_libraries()
    if not libs:
        return None
    n = env_threads(os.environ if env is None else env, _cpus())
    for lib in libs:
        for name in _SET_NAMES:
            fn = getattr(lib, name, None)
            if fn is not None:
                fn(ctypes.c_int(n))
                break
    return n
