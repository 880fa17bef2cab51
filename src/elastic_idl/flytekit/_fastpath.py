"""The warm start under flytekit, and every other use of flytekit internals, guarded by version.

The launcher forks its warm fork server (workers start with torch loaded, in
milliseconds) only from a process whose threads allow it (``fork_hazard`` of
``elastic_idl._launch.forkserver``: one thread, once the pools that survive a fork,
such as OpenBLAS's, are stopped): a fork copies just the calling thread, with any
lock another thread held. By the time a task runs, flytekit has started a
background thread per calling thread and process, its *loop runner*
(``flytekit.utils.asyn``: an asyncio loop on which every ``run_sync`` call, e.g.
reading inputs, runs). So the launcher fell back to its cold fork server: about
1.9 s more and a warning on every run.

`stop_idle_loop_runners` takes that thread away, when that can be shown to
be safe; flytekit starts a new one on its next ``run_sync`` (its runner table is
keyed by thread name and pid, and an entry that is gone is simply recreated).
Whether the process may then fork is the launcher's decision, made where it is
true: after torch is imported (which starts OpenBLAS's pool when numpy is
installed), right before it forks; when it may not, the launcher's warning says
why. Why stopping the runners is safe:

- threads: only threads that are flytekit loop runners of this process are
  stopped, and only when their loop has no task and no timer pending (checked on
  the loop itself); other threads are left alone (the launcher counts them);
- flytekit's context in workers: workers are forked from a copy of this process
  taken inside the task, so they hold the task's context (execution id, raw-output
  prefix, checkpoint, decks) as it is; a worker's own ``run_sync`` starts its own
  runner (a new pid is a new key);
- storage clients: only with a *local* raw-output prefix (a local run, or a pod
  whose prefixes are paths). flytekit's local file system is a plain synchronous
  one; a remote prefix means clients (s3fs, gcsfs, aiohttp sessions) bound to the
  runner's loop, and those are never inherited: the workers start cold and build
  a fresh context (``flytekit.bin.entrypoint.setup_execution``) instead;
- versions: the runner's private fields are read only on the flytekit lines this
  was written and tested for (``WARM_START_FLYTEKIT_LINES``); elsewhere, cold start.

Whenever something cannot be shown, nothing is stopped and the reason is returned
(the plugin logs it once per process; the launcher warns that it starts cold).
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

from elastic_idl.flytekit._support import WARM_START_FLYTEKIT_LINES, flytekit_line, flytekit_version, lines_text

__all__ = ["is_local_path", "stop_idle_loop_runners"]

#: How long to wait for a loop runner to answer or stop (seconds).
_RUNNER_TIMEOUT_S = 5.0


def is_local_path(path: str | None) -> bool:
    """Whether a flytekit data prefix is on this machine's file system (no scheme, or file://)."""
    if not path:
        return True
    text = str(path)
    return "://" not in text or text.startswith("file://")


async def _pending_work() -> int:
    """Tasks and timers on the running loop besides this probe."""
    loop = asyncio.get_running_loop()
    me = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks(loop) if t is not me and not t.done()]
    timers = [h for h in getattr(loop, "_scheduled", ()) if not h.cancelled()]
    return len(tasks) + len(timers)


def _runners() -> tuple[dict[str, Any], list[tuple[str, Any, threading.Thread]]]:
    """flytekit's runner table and this process's live runners as (key, loop, thread)."""
    from flytekit.utils import asyn

    table = asyn.loop_manager._runner_map
    found = []
    suffix = f"PID:{os.getpid()}"
    for key, runner in list(table.items()):
        loop = getattr(runner, "_TaskRunner__loop", None)
        thread = getattr(runner, "_TaskRunner__runner_thread", None)
        if not key.endswith(suffix) or thread is None or not thread.is_alive():
            continue  # a runner of the process this one was forked from: no thread here
        if loop is None:
            raise LookupError("a flytekit loop runner has a thread but no loop")
        found.append((key, loop, thread))
    return table, found


def stop_idle_loop_runners(raw_output_prefix: str | None) -> str | None:
    """Stop flytekit's idle loop runners of this process; None on success (or none ran), else why not.

    Call only from the main thread, right before the launch (see the module docs).
    """
    version = flytekit_version()
    if flytekit_line(version) not in WARM_START_FLYTEKIT_LINES:
        lines = lines_text(WARM_START_FLYTEKIT_LINES)
        return f"flytekit {version} is not a line whose loop runner the warm start knows ({lines})"
    if not is_local_path(raw_output_prefix):
        return f"the raw-output prefix {raw_output_prefix} is remote (storage clients are not inherited)"
    if threading.current_thread() is not threading.main_thread():
        return "the task runs outside the main thread"
    try:
        table, runners = _runners()
    except (ImportError, AttributeError, LookupError) as exc:
        return f"flytekit's loop runner is not what this version expects ({exc})"
    for _, loop, _ in runners:
        try:
            pending = asyncio.run_coroutine_threadsafe(_pending_work(), loop).result(_RUNNER_TIMEOUT_S)
        except Exception as exc:
            return f"flytekit's loop runner did not answer ({type(exc).__name__})"
        if pending:
            return f"flytekit's loop runner has {pending} pending task(s) or timer(s)"
    for key, loop, thread in runners:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(_RUNNER_TIMEOUT_S)
        if thread.is_alive():
            return "flytekit's loop runner did not stop"
        table.pop(key, None)  # flytekit makes a new runner on the next run_sync
    return None
