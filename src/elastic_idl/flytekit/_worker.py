"""What every worker of a flytekit task runs: the task function, inside a flytekit context.

Two ways in, one object (`TaskEntry`):

- warm (the launcher's warm fork server, or ``fork``): the worker is a fork of
  the task's own process, so it already holds the task's flytekit context; the
  entry is called as it is, never pickled (a ``@task`` function cannot be pickled
  by name: its module attribute is the task, not the function);
- cold (CPython's fork server, or ``spawn``): the entry is pickled. It carries
  the function and its inputs (cloudpickle: by value where they live in ``__main__``,
  by reference to their module otherwise), the directory that module is imported
  from (``pyflyte run wf.py`` puts it on ``sys.path`` only while it imports the file;
  a fresh worker would not find the module) and the context settings (raw-output
  prefix, checkpoint paths). The worker unpacks them only when it is called, so that
  a failure is recorded as the worker's own, then builds a flytekit context the way
  ``pyflyte-execute`` does (``setup_execution``) and calls the function.

The worker's result goes back to the task's process by pickle, after the function has
returned and outside what torch records of the worker: a value that cannot be pickled
ended the worker with no recorded cause. So the worker pickles it itself, inside the
recorded call (`send`), with the pickler that matches how the entry came:
torch's own (``ForkingPickler``) on the warm path, cloudpickle on the cold one, where a
class defined in the script comes back as the task's own class (cloudpickle keeps track
of the classes it sent by value). A value that cannot be sent raises a ``TypeError``
naming it, recorded with its cause.

Either way the task's checkpoint restores from what an earlier worker group of this Flyte
attempt saved, when there is such a thing (`._checkpoint`).

A worker that raises ``FlyteRecoverableException`` (or a subclass) leaves a
marker for its (attempt, rank) in a directory the agent owns, so the agent can
tell flytekit a recoverable root cause from a user error.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from elastic_idl._sdk.local import import_root
from elastic_idl.flytekit._runtime import Sent

__all__ = ["TaskEntry", "WorkerResult", "import_root", "recoverable_marker", "send"]


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


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def send(result: WorkerResult, name: str, *, by_value: bool) -> Sent:
    """``result`` pickled in the worker, inside its recorded call (see the module docs).

    Args:
        result: What the task function gave.
        name: The task function's name, for the error.
        by_value: Pickle with cloudpickle (a cold worker) rather than torch's ``ForkingPickler``.

    Raises:
        TypeError: The result cannot be pickled; names the value (or the decks and metadata)
            and carries the pickler's error as its cause.
    """
    if by_value:
        import cloudpickle

        dumps, loads, pickler = cloudpickle.dumps, cloudpickle.loads, "cloudpickle"
    else:
        import pickle
        from multiprocessing.reduction import ForkingPickler

        dumps, loads, pickler = ForkingPickler.dumps, pickle.loads, "pickle"
    try:
        return Sent(bytes(dumps(result)), loads)
    except Exception as exc:
        what, cause = "the decks or output metadata it made", exc
        try:
            dumps(result.value)
        except Exception as value_exc:
            what, cause = f"the value it returned (a {type(result.value).__name__})", value_exc
        raise TypeError(
            f"task {name}: {what} cannot be sent from the worker to the task's process: {pickler} fails "
            f"with {_describe(cause)}. Return values that pickle: numbers, strings, tensors, and classes "
            "defined at the top level of a module (not inside a function)"
        ) from cause


class TaskEntry:
    """The task function bound to its inputs, runnable in a worker (see the module docs).

    Args:
        fn: The task function (``task.task_function``).
        kwargs: Its inputs as Python values.
        marker_dir: Directory for recoverable-failure markers (the agent's).
        context: ``setup_execution`` arguments for a cold worker: ``raw_output_data_prefix``,
            ``checkpoint_path``, ``prev_checkpoint``.
        sys_path: Entries a cold worker puts first on ``sys.path`` (when missing) before it
            unpacks the function: where the function's module is imported from.
    """

    def __init__(
        self,
        fn: Any,
        kwargs: dict[str, Any],
        marker_dir: str,
        context: dict[str, str | None],
        sys_path: Sequence[str] = (),
    ) -> None:
        self._fn = fn
        self._kwargs = kwargs
        self._marker_dir = marker_dir
        self._context = dict(context)
        self._sys_path = tuple(sys_path)
        self._payload: bytes | None = None  # a cold worker's function and inputs, not unpacked yet
        # torch names the entrypoint in its logs and failures by these two.
        self.__name__ = str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", "task"))
        self.__qualname__ = self.__name__

    def __repr__(self) -> str:
        return f"TaskEntry({self.__name__})"

    def __reduce__(self) -> tuple[Any, ...]:
        import cloudpickle

        payload = self._payload if self._payload is not None else cloudpickle.dumps((self._fn, self._kwargs))
        return (_rebuild, (payload, self._marker_dir, self._context, self.__name__, self._sys_path))

    def __call__(self) -> Sent:
        from elastic_idl.flytekit._checkpoint import this_attempts_checkpoint

        dest, prev = self._context.get("checkpoint_path"), self._context.get("prev_checkpoint")
        if self._payload is None:
            with this_attempts_checkpoint(dest, prev):
                return send(self._run(), self.__name__, by_value=False)
        self._unpack()
        from flytekit.bin.entrypoint import setup_execution

        with setup_execution(**self._context), this_attempts_checkpoint(dest, prev):
            return send(self._run(), self.__name__, by_value=True)

    def _unpack(self) -> None:
        """A cold worker: the function's import root on sys.path, then the function and its inputs."""
        import cloudpickle

        assert self._payload is not None
        for entry in reversed(self._sys_path):
            if entry not in sys.path:
                sys.path.insert(0, entry)
        try:
            self._fn, self._kwargs = cloudpickle.loads(self._payload)
        except Exception as exc:
            raise ImportError(
                f"task {self.__name__}: a worker cannot load the task function and its inputs: {_describe(exc)}. "
                "Workers that start cold (spawn, a cold fork server, every pod with a remote raw-output "
                "prefix) import the modules the function and its inputs come from again: make them "
                "importable there (PYTHONPATH, or install them in the image)"
            ) from exc

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


def _rebuild(
    payload: bytes, marker_dir: str, context: dict[str, str | None], name: str, sys_path: Sequence[str]
) -> TaskEntry:
    """A pickled TaskEntry in a cold worker: unpacked and given its own flytekit context when called."""
    entry = TaskEntry(None, {}, marker_dir, context, sys_path)
    entry._payload = payload
    entry.__name__ = entry.__qualname__ = name
    return entry
