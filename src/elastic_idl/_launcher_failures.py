"""Failure records of a launch, and the one exception a failed launch raises. Torch-free.

torch's ``ChildFailedError`` lists only the failed ranks of the last attempt.
The launcher's agent reports every failed worker of every attempt here, as it
happens (before a restart wipes the evidence); :class:`FailureLog` turns them
into ``FailureRecord`` messages, root cause first.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from elastic_idl._errors import ElasticIdlError
from elastic_idl._messages import FailureRecord, FailureReport

__all__ = [
    "FailureLog",
    "LaunchFailedError",
    "LaunchInterruptedError",
    "RendezvousIncompleteError",
    "RendezvousStoreLostError",
    "WorkerExit",
    "describe_record",
    "write_report",
]


class LaunchFailedError(ElasticIdlError, RuntimeError):
    """A launch failed for good: the one exception :func:`elastic_idl.launch` raises.

    Attributes:
        report: The ``FailureReport`` message (also written as JSON when the launch
            was given a ``failure_path``).
        failures: ``report.failures`` as a tuple of ``FailureRecord``, root cause first.
    """

    def __init__(self, message: str, report: Any) -> None:
        super().__init__(message)
        self.report = report
        self.failures: tuple[Any, ...] = tuple(report.failures)


class RendezvousIncompleteError(LaunchFailedError):
    """Not enough nodes joined the rendezvous within its join timeout.

    Attributes:
        joined: How many nodes were seen in the rendezvous (this one included);
            -1 when the backend cannot tell.
        needed: The minimum number of nodes (min_nodes).
        timeout_s: The join timeout that ran out, in seconds.
    """

    def __init__(self, message: str, report: Any, *, joined: int, needed: int, timeout_s: float) -> None:
        super().__init__(message, report)
        self.joined = joined
        self.needed = needed
        self.timeout_s = timeout_s


class RendezvousStoreLostError(LaunchFailedError):
    """The rendezvous store cannot be reached: its host (the endpoint's node, worker-0 in a pod) is gone.

    torch's c10d store lives in the process of the node that hosts it and does not
    survive it: the other nodes cannot re-form the group until that node is back.
    Raised when the store is unreachable at start, is lost during the rendezvous,
    or is found gone when the workers failed with no restart left. The pod
    entrypoint exits with a code the operator's ``ExitCode`` policy retries, so the
    group re-forms around the restarted host instead of the job failing.
    """


class LaunchInterruptedError(LaunchFailedError):
    """The launcher got a termination signal (SIGTERM, SIGINT, ...) and stopped every worker.

    Attributes:
        signal: The signal number received.
        stopped_pids: Worker processes that were running and have been stopped.
    """

    def __init__(self, message: str, report: Any, *, signum: int, stopped_pids: Sequence[int]) -> None:
        super().__init__(message, report)
        self.signal = signum
        self.stopped_pids = tuple(stopped_pids)


@dataclass(frozen=True)
class WorkerExit:
    """One failed worker as the agent saw it (plain data, no torch types).

    Attributes:
        rank: Global rank in that attempt.
        local_rank: Rank on this node.
        pid: Process id (0 when unknown).
        exitcode: Exit code, negative for a signal (Python's convention); None when
            the worker was found unhealthy while still running.
        error_file: torch's error file of the worker (may not exist).
        detected_ns: Fallback time (time.time_ns()) when the worker recorded no error:
            the last time the agent saw the worker group healthy, i.e. the earliest
            the failure can have happened.
        note: Message when there is neither an error file nor an exit code.
    """

    rank: int
    local_rank: int
    pid: int
    exitcode: int | None
    error_file: str
    detected_ns: int
    note: str = ""


def _read_error_file(path: str) -> tuple[str, str, int] | None:
    """(message, traceback, time_ns) from a torch error file, or None when absent/unreadable."""
    if not path or not os.path.isfile(path):
        return None
    try:
        with open(path) as fh:
            data = json.load(fh)
        mtime_ns = os.stat(path).st_mtime_ns
    except (OSError, ValueError):
        return None
    msg = data.get("message", "")
    if isinstance(msg, dict):
        extra = msg.get("extraInfo", {}) or {}
        return str(msg.get("message", "")), str(extra.get("py_callstack", "")), mtime_ns
    return str(msg), "", mtime_ns


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


class FailureLog:
    """Every worker failure of one launch on this node, in the order of attempts."""

    def __init__(self, *, run_id: str, role: str, node: str | None = None) -> None:
        self.run_id = run_id
        self.role = role
        self.node = node or socket.gethostname()
        self._records: list[tuple[int, int, int, Any]] = []  # (attempt, time_ns, seq, record)
        self.attempts_seen = 0

    def attempt_started(self, attempt: int) -> None:
        self.attempts_seen = max(self.attempts_seen, attempt + 1)

    def add(self, attempt: int, exits: Iterable[WorkerExit]) -> list[Any]:
        """Record the failed workers of one attempt; returns the new records."""
        self.attempt_started(attempt)
        new = []
        for w in exits:
            rec = FailureRecord(rank=w.rank, local_rank=w.local_rank, node=self.node, attempt=attempt, pid=w.pid)
            rec.role = self.role
            found = _read_error_file(w.error_file)
            when = w.detected_ns
            if found is not None:
                rec.message, rec.traceback, when = found[0], found[1], found[2]
            if w.exitcode is not None and w.exitcode < 0:
                rec.signal = -w.exitcode
                if not rec.message:
                    rec.message = f"killed by {_signal_name(-w.exitcode)}"
            elif w.exitcode is not None and w.exitcode > 0:
                rec.exit_code = w.exitcode
                if not rec.message:
                    rec.message = f"exited with code {w.exitcode} (no Python exception recorded)"
            if not rec.message:
                rec.message = w.note or "failed"
            rec.time.FromNanoseconds(when)
            self._records.append((attempt, when, len(self._records), rec))
            new.append(rec)
        return new

    @property
    def records(self) -> list[Any]:
        """Root cause first: the earliest failure of the first failed attempt, then by attempt and time."""
        return [r for *_, r in sorted(self._records, key=lambda t: (t[0], t[1], t[2]))]

    def report(self, summary: str, *, attempts: int | None = None) -> Any:
        rep = FailureReport(run_id=self.run_id, attempts=attempts if attempts is not None else self.attempts_seen)
        rep.failures.extend(self.records)
        rep.summary = summary
        return rep

    def describe_root(self) -> str:
        """One line about the root cause, or "" when there is no record."""
        recs = self.records
        return describe_record(recs[0]) if recs else ""


def write_report(report: Any, path: str | os.PathLike[str]) -> None:
    """Write a FailureReport as JSON (protobuf's JSON mapping), atomically."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{time.time_ns()}.tmp")
    tmp.write_text(json_format.MessageToJson(report) + "\n")
    os.replace(tmp, target)


def describe_record(r: Any) -> str:
    """One line about one FailureRecord: which rank, where, how it ended and why."""
    how = (
        f"exit code {r.exit_code}"
        if r.WhichOneof("termination") == "exit_code"
        else (f"signal {_signal_name(r.signal)}" if r.WhichOneof("termination") == "signal" else "still running")
    )
    return f"rank {r.rank} (local rank {r.local_rank}, pid {r.pid}) in attempt {r.attempt}, {how}: {r.message}"
