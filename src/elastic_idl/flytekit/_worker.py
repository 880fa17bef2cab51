"""What every worker of a flytekit task runs: the task function, inside a flytekit context.

Two ways in, one object (`TaskEntry`):

- warm (the launcher's warm fork server, or ``fork``): the worker is a fork of
  the task's own process, so it already holds the task's flytekit context; the
  entry is called as it is, never pickled (a ``@task`` function cannot be pickled
  by name: its module attribute is the task, not the function);
- cold (CPython's fork server, or ``spawn``): the entry is pickled. It carries
  the function and its inputs by value (cloudpickle) and the context settings
  (raw-output prefix, checkpoint paths), and the worker builds a flytekit
  context the way ``pyflyte-execute`` does (``setup_execution``) before calling it.

Either way the task's checkpoint restores from what an earlier worker group of this Flyte
attempt saved, when there is such a thing (`._checkpoint`).

A worker that raises ``FlyteRecoverableException`` (or a subclass) leaves a
marker for its (attempt, rank) in a directory the agent owns, so the agent can
tell flytekit a recoverable root cause from a user error.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple

__all__ = ["TaskEntry", "WorkerResult", "recoverable_marker"]


class WorkerResult(NamedTuple):
    """What a worker sends back to its agent (pickled by torch's multiprocessing).

    Attributes:
        value: The task function's return value.
        decks: flytekit Decks the function created in the worker (not the timeline deck).
        output_metadata: flytekit's output metadata for the value (artifacts), or None.
    """

    value: Any
    decks: list[Any]
    output_metadata: Any = None


def recoverable_marker(marker_dir: str, attempt: int, rank: int) -> Path:
    """Where a worker marks that its failure in ``attempt`` as global ``rank`` is recoverable."""
    return Path(marker_dir, f"recoverable-{attempt}-{rank}")


class TaskEntry:
    """The task function bound to its inputs, runnable in a worker (see the module docs).

    Args:
        fn: The task function (``task.task_function``).
        kwargs: Its inputs as Python values.
        marker_dir: Directory for recoverable-failure markers (the agent's).
        context: ``setup_execution`` arguments for a cold worker: ``raw_output_data_prefix``,
            ``checkpoint_path``, ``prev_checkpoint``.
    """

    def __init__(self, fn: Any, kwargs: dict[str, Any], marker_dir: str, context: dict[str, str | None]) -> None:
        self._fn = fn
        self._kwargs = kwargs
        self._marker_dir = marker_dir
        self._context = dict(context)
        self._fresh_context = False
        # torch names the entrypoint in its logs and failures by these two.
        self.__name__ = str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", "task"))
        self.__qualname__ = self.__name__

    def __repr__(self) -> str:
        return f"TaskEntry({self.__name__})"

    def __reduce__(self) -> tuple[Any, ...]:
        import cloudpickle

        payload = cloudpickle.dumps((self._fn, self._kwargs))
        return (_rebuild, (payload, self._marker_dir, self._context, self.__name__))

    def __call__(self) -> WorkerResult:
        from elastic_idl.flytekit._checkpoint import this_attempts_checkpoint

        dest, prev = self._context.get("checkpoint_path"), self._context.get("prev_checkpoint")
        if not self._fresh_context:
            with this_attempts_checkpoint(dest, prev):
                return self._run()
        from flytekit.bin.entrypoint import setup_execution

        with setup_execution(**self._context), this_attempts_checkpoint(dest, prev):
            return self._run()

    def _run(self) -> WorkerResult:
        import flytekit
        from flytekit.core.context_manager import FlyteContextManager
        from flytekit.deck.deck import TimeLineDeck
        from flytekit.exceptions.user import FlyteRecoverableException

        params = flytekit.current_context()
        before = {id(d) for d in params.decks}  # inherited from the task's process: not this worker's
        try:
            value = self._fn(**self._kwargs)
        except FlyteRecoverableException:
            self._mark_recoverable()
            raise
        tracker = FlyteContextManager.current_context().output_metadata_tracker
        metadata = tracker.get(value) if tracker is not None else None
        decks = [d for d in params.decks if id(d) not in before and not isinstance(d, TimeLineDeck)]
        return WorkerResult(value, decks, metadata)

    def _mark_recoverable(self) -> None:
        attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0)
        rank = int(os.environ.get("RANK", "0") or 0)
        try:
            recoverable_marker(self._marker_dir, attempt, rank).touch()
        except OSError:  # the agent then reports a user error: the failure itself is still raised
            pass


def _rebuild(payload: bytes, marker_dir: str, context: dict[str, str | None], name: str) -> TaskEntry:
    """A pickled TaskEntry in a cold worker: it builds its own flytekit context when called."""
    import cloudpickle

    fn, kwargs = cloudpickle.loads(payload)
    entry = TaskEntry(fn, kwargs, marker_dir, context)
    entry._fresh_context = True
    entry.__name__ = entry.__qualname__ = name
    return entry
