"""flytekit's task checkpoint across worker-group restarts and pod incarnations.

flytekit gives a task one checkpoint (``flytekit.current_context().checkpoint``): it saves to
a destination (propeller's ``--checkpoint-path``: the same for every pod of the job and for
every restart within one Flyte attempt) and restores from a source (``--prev-checkpoint``:
what the previous Flyte attempt saved; nothing on the first). Within one Flyte attempt the
task's function can run more than once: the launcher restarts the worker group
(``max_restarts``), and the operator recreates a pod that was lost (the job re-forms). Each of
those runs would still restore from the previous Flyte attempt (or from nothing), and the
progress the failed group saved would be lost.

So every worker group restores from the destination when something was saved there already
in this attempt, else from the previous attempt's checkpoint: `this_attempts_checkpoint`
puts a flytekit ``SyncCheckpoint`` with that source into the worker's context.

flytekit has no public getter for a checkpoint's two paths: `checkpoint_paths` reads them
from the ``SyncCheckpoint`` behind the public ``ExecutionParameters.checkpoint``, and says so
(once, as a warning) when that class no longer holds them, instead of failing silently.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

__all__ = ["checkpoint_paths", "restore_source", "this_attempts_checkpoint"]

_log = logging.getLogger("elastic_idl")
#: The SyncCheckpoint attributes (flytekit 1.16 and later) holding the destination and the source.
_DEST, _SRC = "_checkpoint_dest", "_checkpoint_src"
_warned = False


def _warn_once(text: str) -> None:
    global _warned
    if not _warned:
        _warned = True
        _log.warning("elastic-idl flytekit: %s", text)


def checkpoint_paths(params: Any) -> tuple[str | None, str | None]:
    """(destination, previous) of the task's checkpoint; (None, None) when the task has none."""
    from flytekit.core.checkpointer import SyncCheckpoint

    try:
        checkpoint = params.checkpoint
    except NotImplementedError:  # flytekit's answer when the platform gave no checkpoint
        return None, None
    if not isinstance(checkpoint, SyncCheckpoint):
        _warn_once(
            f"the task's checkpoint is a {type(checkpoint).__name__}, not flytekit's SyncCheckpoint: "
            "a restarted worker group restores from the previous Flyte attempt's checkpoint only"
        )
        return None, None
    fields = vars(checkpoint)
    if _DEST not in fields or _SRC not in fields:
        _warn_once(
            f"this flytekit's SyncCheckpoint holds no {_DEST} / {_SRC}: a restarted worker group "
            "restores from the previous Flyte attempt's checkpoint only"
        )
        return None, None
    dest, src = fields[_DEST], fields[_SRC]
    return (str(dest) if dest else None), (str(src) if src else None)


def _holds_files(file_access: Any, path: str) -> bool:
    fs = file_access.get_filesystem_for_path(path)
    fs.invalidate_cache(path)  # s3fs and gcsfs cache listings: another process may have saved since
    try:
        return bool(fs.find(path, maxdepth=None, withdirs=False))
    except FileNotFoundError:
        return False


def restore_source(file_access: Any, dest: str | None, prev: str | None) -> str | None:
    """Where this worker group restores from: ``dest`` when it holds a file (saved earlier in this
    Flyte attempt), else ``prev`` (the previous attempt's checkpoint, or None)."""
    if dest and _holds_files(file_access, dest):
        return dest
    return prev


@contextlib.contextmanager
def this_attempts_checkpoint(dest: str | None, prev: str | None) -> Iterator[None]:
    """Within a flytekit context: the task's checkpoint restoring from `restore_source`."""
    from flytekit.core.checkpointer import SyncCheckpoint
    from flytekit.core.context_manager import ExecutionParameters, FlyteContextManager

    ctx = FlyteContextManager.current_context()
    state = ctx.execution_state
    if (
        not dest
        or state is None
        or state.user_space_params is None
        # Listing dest is I/O (remote on s3:// or gs://): only once the context can use it.
        or (source := restore_source(ctx.file_access, dest, prev)) == prev
    ):
        yield
        return
    _log.info("elastic-idl flytekit: restoring the checkpoint saved earlier in this attempt (%s)", dest)
    builder = ExecutionParameters.new_builder(state.user_space_params)
    builder.checkpoint = SyncCheckpoint(checkpoint_dest=dest, checkpoint_src=source)
    params = builder.build()
    with FlyteContextManager.with_context(ctx.with_execution_state(state.with_params(user_space_params=params))):
        yield
