"""Failure records of a launch. Torch-free.

torch's ``ChildFailedError`` lists only the failed ranks of the last attempt.
The launcher's agent reports every failed worker of every attempt here, as it
happens (before a restart wipes the evidence); `FailureLog` turns them
into ``FailureRecord`` messages, root cause first.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import os
import re
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from elastic_idl._task.messages import FailureRecord, FailureReport

__all__ = [
    "STUCK_MARK",
    "TIMEOUT_MARKERS",
    "FailureLog",
    "SignalEnricher",
    "WorkerExit",
    "check_writable",
    "describe_attempt",
    "describe_record",
    "is_collateral",
    "raised_on_its_own",
    "report_json",
    "save_report",
    "timed_out_at",
    "user_traceback",
    "write_atomic",
    "write_report",
]

_log = logging.getLogger("elastic_idl")


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
        detected_ns: Fallback time when the worker recorded no error: the last time the
            agent saw the worker group healthy, i.e. the earliest the failure can have
            happened, read with `file_clock_ns` so that it compares with the
            error files' times of its peers.
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


def _file_time_ns(path: str) -> int | None:
    """The mtime of a file, or None when there is none."""
    if not path:
        return None
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


#: Linux's CLOCK_REALTIME_COARSE (CPython does not name it): the clock file times are stamped from.
_CLOCK_REALTIME_COARSE = 5


def file_clock_ns() -> int:
    """Now, on the clock the kernel stamps a file's mtime from.

    Linux dates a write with the coarse real-time clock, which lags ``time.time_ns()`` by
    up to a scheduler tick (1-10 ms): a peer's error file written 2 ms after a reading of
    ``time.time_ns()`` can carry an earlier mtime. A time read here is never later than
    the mtime of a file written afterwards.
    """
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            return time.clock_gettime_ns(_CLOCK_REALTIME_COARSE)
    return time.time_ns()  # pragma: no cover - not Linux


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


#: What enriches the message of a worker killed by a signal: (message, error_file) -> message. torch's (2.14.1, 2.15)
#: ``ErrorHandler.maybe_enrich_signal_failure_message``, which a torch build may override to add device-fault
#: context (a GPU memory fault) read near the worker's error file; the launcher passes it where torch has it.
SignalEnricher = Callable[[str, str], str]


class FailureLog:
    """Every worker failure of one launch on this node, in the order of attempts.

    ``enrich_signal``: applied to the message of every worker a signal ended, as torch's (2.14.1, 2.15) ``@record``
    failure rendering applies its error handler's hook (None: the message is kept as is).
    """

    def __init__(
        self, *, run_id: str, role: str, node: str | None = None, enrich_signal: SignalEnricher | None = None
    ) -> None:
        self.run_id = run_id
        self.role = role
        self.node = node or socket.gethostname()
        self.enrich_signal = enrich_signal
        # (attempt, time_ns, recorded, seq, record): recorded is 1 when the worker left an error file
        self._records: list[tuple[int, int, int, int, Any]] = []
        self.attempts_seen = 0

    def attempt_started(self, attempt: int) -> None:
        self.attempts_seen = max(self.attempts_seen, attempt + 1)

    def add(self, attempt: int, exits: Iterable[WorkerExit]) -> list[Any]:
        """Record the failed workers of one attempt; returns the new records, the first failure first."""
        self.attempt_started(attempt)
        new = []
        for w in exits:
            rec = FailureRecord(rank=w.rank, local_rank=w.local_rank, node=self.node, attempt=attempt, pid=w.pid)
            rec.role = self.role
            found = _read_error_file(w.error_file)
            when = w.detected_ns
            if found is not None:
                rec.message, rec.traceback, when = found[0], found[1], found[2]
            elif (begun := _file_time_ns(w.error_file)) is not None:
                # An error file that does not read: the worker was stopped while it wrote it (torch
                # opens it, then writes), so it was failing then, not when it was last seen running.
                when = max(when, begun)
            if not rec.message and w.note.startswith(STUCK_MARK):
                rec.message = w.note  # the agent ended it for not progressing: say why, not how
            if w.exitcode is not None and w.exitcode < 0:
                rec.signal = -w.exitcode
                if not rec.message:
                    rec.message = f"killed by {_signal_name(-w.exitcode)}"
                if self.enrich_signal is not None:
                    rec.message = self._enriched(rec.message, w.error_file)
            elif w.exitcode is not None and w.exitcode > 0:
                rec.exit_code = w.exitcode
                if not rec.message:
                    rec.message = f"exited with code {w.exitcode} (no Python exception recorded)"
            if not rec.message:
                rec.message = w.note or "failed"
            rec.time.FromNanoseconds(when)
            entry = (attempt, when, int(found is not None), len(self._records), rec)
            self._records.append(entry)
            new.append(entry)
        return [r for *_, r in sorted(new, key=_order)]

    def _enriched(self, message: str, error_file: str) -> str:
        """``message`` through `enrich_signal`; as it was when the hook fails (best effort, as torch does)."""
        assert self.enrich_signal is not None
        try:
            out = self.enrich_signal(message, error_file)
        except Exception:
            _log.warning("elastic-idl: torch's error handler failed to enrich a signal failure", exc_info=True)
            return message
        return out if isinstance(out, str) and out else message

    @property
    def records(self) -> list[Any]:
        """Root cause first: the earliest failure of the first failed attempt, then by attempt and time.

        At the same time a worker that recorded no error (a hard exit, dated when it was
        last seen running) comes before one that did: the hard exit is what broke the
        peer's collective, never the other way round within one poll.
        """
        return [r for *_, r in sorted(self._records, key=_order)]

    def report(self, summary: str, *, attempts: int | None = None) -> Any:
        rep = FailureReport(run_id=self.run_id, attempts=attempts if attempts is not None else self.attempts_seen)
        rep.failures.extend(self.records)
        rep.summary = summary
        return rep

    def raised_in(self, attempt: int) -> bool:
        """Whether a worker of ``attempt`` on this node raised an error of its own (`raised_on_its_own`)."""
        return any(r.attempt == attempt and raised_on_its_own(r) for r in self.records)

    def describe_root(self) -> str:
        """One line about the root cause, or "" when there is no record."""
        recs = self.records
        return describe_record(recs[0]) if recs else ""


def _order(entry: tuple[int, int, int, int, Any]) -> tuple[int, int, int, int]:
    attempt, when, recorded, seq, _ = entry
    return (attempt, when, recorded, seq)


def _zero_fields_option() -> dict[str, bool]:
    """The MessageToJson option that keeps zero values, in whichever spelling this protobuf has.

    proto3 JSON drops fields at their default (rank 0, attempt 0, ...); a reader of a
    failure report must always find them. protobuf < 5.26 (down to the 4.21 floor) calls
    the option ``including_default_value_fields``; 5.26+ (up to 7.x)
    ``always_print_fields_with_no_presence``.
    """
    params = inspect.signature(json_format.MessageToJson).parameters
    for name in ("always_print_fields_with_no_presence", "including_default_value_fields"):
        if name in params:
            return {name: True}
    return {}  # pragma: no cover - every supported protobuf has one of the two


_ZERO_FIELDS = _zero_fields_option()


def report_json(report: Any) -> str:
    """A FailureReport as protobuf JSON, with zero values written (``"rank": 0``, ``"attempt": 0``)."""
    to_json: Any = json_format.MessageToJson  # its keyword differs between protobuf versions
    return str(to_json(report, **_ZERO_FIELDS)) + "\n"


def check_writable(path: str | os.PathLike[str], what: str) -> None:
    """Fail now, before anything starts, if a file cannot be written at ``path`` later.

    Creates the parent directories (as the later write does) and a probe file beside the
    target. Raises OSError with ``filename`` set and ``what`` in the message.
    """
    target = Path(path)
    if target.is_dir():
        raise IsADirectoryError(21, f"cannot write the {what}: is a directory", str(target))
    # A parent that exists but is no directory (--log-dir /dev/null): name it, not the path below it.
    parent = next((p for p in target.parents if os.path.lexists(p)), None)
    if parent is not None and not parent.is_dir():
        raise NotADirectoryError(20, f"cannot write the {what}: not a directory", str(parent))
    probe = target.with_name(f".{target.name}.{os.getpid()}.{time.time_ns()}.probe")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise type(exc)(exc.errno, f"cannot write the {what}: {exc.strerror or exc}", str(target)) from None


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` (parents made) through a temp file and a rename: a reader sees all or nothing."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{time.time_ns()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, target)


def write_report(report: Any, path: str | os.PathLike[str]) -> None:
    """Write a FailureReport as JSON (protobuf's JSON mapping, zero values kept), atomically."""
    write_atomic(path, report_json(report))


def save_report(report: Any, path: str | os.PathLike[str] | None) -> None:
    """`write_report`, except that a failure to write is logged, never raised.

    Called while a launch fails: the launch's own error (the summary) must reach the
    caller, not an error about the report file.
    """
    if path is None:
        return
    try:
        write_report(report, path)
    except OSError as exc:
        _log.warning("elastic-idl: cannot write the failure report to %s: %s", path, exc.strerror or exc)


def describe_record(r: Any) -> str:
    """One line about one FailureRecord: which rank, where, how it ended and why."""
    how = (
        f"exit code {r.exit_code}"
        if r.WhichOneof("termination") == "exit_code"
        else (f"signal {_signal_name(r.signal)}" if r.WhichOneof("termination") == "signal" else "still running")
    )
    return f"rank {r.rank} (local rank {r.local_rank}, pid {r.pid}) in attempt {r.attempt}, {how}: {r.message}"


#: What a worker's error says when its collective or its store broke under it because a peer
#: ended: such a later failure of an attempt is a consequence of the first, not a cause.
PEER_LOSS_MARKERS = (
    "Connection closed by peer",
    "Connection reset by peer",
    "Broken pipe",
    "DistNetworkError",
    "DistBackendError",
    "DistStoreError",
    "connectFullMesh",
    "third_party/gloo",
    "Timed out waiting",
    "Socket Timeout",
    "NCCL communicator was aborted",
    "ProcessGroupNCCL",
    "ProcessGroupGloo",
)

#: Signals the agent stops the rest of a failed group with: a worker ended by one did not fail by itself.
_AGENT_STOP_SIGNALS = (int(signal.SIGTERM), int(signal.SIGKILL), int(signal.SIGINT))


#: How a record of a worker that stopped progressing begins (a stopped process, or a rank still
#: running when a peer's collective timed out): a root cause, never collateral.
STUCK_MARK = "stopped progressing"

#: What a worker's error says when its collective timed out (gloo, NCCL's watchdog, the store).
TIMEOUT_MARKERS = ("Timed out waiting", "Watchdog caught collective operation timeout", "Socket Timeout")


def timed_out_at(path: str) -> tuple[str, int] | None:
    """(message, time_ns) of a worker's error file that reports a timed-out collective, else None."""
    found = _read_error_file(path)
    if found is None or not any(marker in found[0] for marker in TIMEOUT_MARKERS):
        return None
    return found[0], found[2]


def is_collateral(r: Any) -> bool:
    """Whether a failure that came after another one of its attempt was caused by it.

    It was when its collective or store broke under it (`PEER_LOSS_MARKERS`), or when
    the agent stopped it without it recording an error of its own. A rank that raised its
    own exception (a ValueError of its data, say) failed on its own.
    """
    if r.message.startswith(STUCK_MARK):
        return False
    if any(marker in r.message for marker in PEER_LOSS_MARKERS):
        return True
    return r.WhichOneof("termination") == "signal" and r.signal in _AGENT_STOP_SIGNALS and not r.traceback


def raised_on_its_own(r: Any) -> bool:
    """Whether a worker recorded an exception of its own (a user error), not a consequence of a peer's end."""
    return bool(r.traceback) and not is_collateral(r)


def describe_attempt(records: Sequence[Any]) -> str:
    """The failed ranks of one attempt on one line each joined by "; ", the first failure first.

    A later failure caused by the first (`is_collateral`) is marked collateral; one that
    failed on its own is marked so, since it is a root cause too.
    """
    ordered = sorted(records, key=_record_time)
    parts = []
    for i, r in enumerate(ordered):
        line = describe_record(r).split("\n", 1)[0]
        if i:
            mark = "collateral: failed after" if is_collateral(r) else "failed on its own, after"
            line = f"[{mark} rank {ordered[0].rank}] {line}"
        parts.append(line)
    return "; ".join(parts)


def _record_time(r: Any) -> int:
    return int(r.time.ToNanoseconds())


_TRACEBACK_HEAD = "Traceback (most recent call last):"
_FRAME = re.compile(r'^  File "(?P<file>[^"]*)", line \d+')


def user_traceback(tb: str, internal: Sequence[str]) -> str:
    """A worker's traceback without the launcher's own frames on top (torch's ``@record``,
    the worker bootstrap, runpy), so that it starts at the user's code.

    ``internal`` lists directory prefixes whose frames are the launcher's; ``<frozen ...>``
    frames count too. Only the leading frames of the first traceback are dropped, and
    only when a user frame follows; anything else is returned unchanged.
    """
    lines = tb.splitlines()
    if not lines or lines[0] != _TRACEBACK_HEAD:
        return tb
    i = 1
    while i < len(lines):
        m = _FRAME.match(lines[i])
        if m is None:
            return tb  # the exception line came first: no user frame at all
        path = m.group("file")
        if not (path.startswith("<frozen ") or any(path.startswith(p) for p in internal)):
            break
        i += 1
        while i < len(lines) and lines[i].startswith("    "):  # the frame's source line(s) and markers
            i += 1
    else:
        return tb
    if i == 1:
        return tb
    return "\n".join([lines[0], *lines[i:]]) + ("\n" if tb.endswith("\n") else "")
