"""The worst case from a fault to the job's end, computed from the task's own values. Pure.

The derivation, term by term: docs/guide/when-pods-die.md, "The worst case, computed". The Go
backend computes the same (go/elasticidl/worst_case.go), both checked against
contract/worst_case.json. Every figure is in seconds, a float: the sums are done in the same
order in both languages, so both give the same number.

- R = max_restarts + 1 restart rounds.
- D = max(D_stuck, D_peer, D_store), detection (the slowest fault class wins):
  D_stuck = collective_timeout + monitor_interval + `STUCK_MARGIN_S` (a worker alive but stuck);
  D_peer = keep_alive_interval x (keep_alive_max_attempt + 1) + monitor_interval (a peer lost);
  D_store = read_timeout + keep_alive_interval x keep_alive_max_attempt + 1 s + monitor_interval
  (the rendezvous store's host lost).
- S = shutdown_timeout (the workers stop: SIGTERM, SIGKILL after it).
- Z = join_timeout + cas_backoff_max_seconds (the next round forms, or fails after join_timeout; torch
  2.15's rendezvous checks that deadline only after the random delay that follows a failed write of the
  rendezvous state, so the last delay, up to cas_backoff_max_seconds, can begin just before the deadline
  and end after it; unset, 0).
- L = 1 s + monitor_interval + shutdown_timeout, the leave: a node that ends with an error waits
  until the other nodes of its round have decided (they see the closed rendezvous within 1 s +
  monitor_interval and stop their workers), so that none takes a finished store host for a lost one.
- P = R x (D + S + Z) + L, one pod incarnation.
- T by the Worker's restartPolicy: Never P; OnFailure or Always (backoff_limit + 1) x P + the
  kubelet's crash-loop back-off delays when run_policy.backoff_limit is set, else unbounded;
  ExitCode unbounded (the operator re-creates a pod that exits >= 128 without counting it);
  run_policy.active_deadline_seconds, when set, caps T.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Final

from elastic_idl._errors import ValidationError, Violation
from elastic_idl._task.names import (
    CAS_BACKOFF_MAX,
    DEFAULT_JOIN_TIMEOUT_S,
    DEFAULT_READ_TIMEOUT_S,
    DEFAULT_SHUTDOWN_TIMEOUT_S,
    JOIN_TIMEOUT,
    READ_TIMEOUT,
)
from elastic_idl._task.view import TaskView, duration_seconds, rdzv_configs, seconds_number, values_of

__all__ = [
    "CRASH_LOOP_BASE_S",
    "CRASH_LOOP_CAP_S",
    "DEFAULT_KEEP_ALIVE_INTERVAL_S",
    "DEFAULT_KEEP_ALIVE_MAX_ATTEMPT",
    "KEEP_ALIVE_INTERVAL",
    "KEEP_ALIVE_MAX_ATTEMPT",
    "KEEP_ALIVE_RULE",
    "MAX_WORST_CASE_RULE",
    "STATE_CACHE_S",
    "STUCK_MARGIN_S",
    "WorstCase",
    "check_ceiling",
    "crash_loop_backoff_s",
    "format_seconds",
    "parse_ceiling",
    "worst_case",
    "worst_case_line",
]

# ------------------------------------------------------------------ the constants (the Go backend's are the same)

#: What a worker alive but stuck costs beyond collective_timeout + monitor_interval: the time for the
#: collective's timeout to surface as a failed worker the agent sees (the lead measures it).
STUCK_MARGIN_S: Final = 5.0
#: The rendezvous options torch's dynamic rendezvous reads for its keep-alive, and its defaults.
KEEP_ALIVE_INTERVAL: Final = "keep_alive_interval"
KEEP_ALIVE_MAX_ATTEMPT: Final = "keep_alive_max_attempt"
DEFAULT_KEEP_ALIVE_INTERVAL_S: Final = 5
DEFAULT_KEEP_ALIVE_MAX_ATTEMPT: Final = 3
#: How long torch caches the rendezvous state it reads (a fresh read comes within this + monitor_interval).
STATE_CACHE_S: Final = 1.0
#: The kubelet's crash-loop back-off: the first delay, doubled at each restart up to the cap.
CRASH_LOOP_BASE_S: Final = 10
CRASH_LOOP_CAP_S: Final = 300
#: The rule a task whose worst case exceeds the given ceiling breaks (``--max-worst-case``).
MAX_WORST_CASE_RULE: Final = "worst_case.max"
#: The rule of a keep-alive option that is not a whole number torch can read.
KEEP_ALIVE_RULE: Final = "worst_case.keep_alive"

#: Restart policies the kubelet restarts in place, counted against backoffLimit.
_IN_PLACE = ("OnFailure", "Always")
_NEVER = "Never"
_EXIT_CODE = "ExitCode"
_POLICIES = (_NEVER, *_IN_PLACE, _EXIT_CODE)
#: A keep-alive option's text: ASCII spaces around it are dropped, at most this many digits (int32-safe in Go).
_ASCII_SPACE = " \t\n\r\v\f"
_MAX_DIGITS = 9


@dataclass(frozen=True)
class WorstCase:
    """The worst-case time from a fault to the job's end, and every term it is made of.

    Attributes:
        seconds: The bound, None when unbounded.
        per_incarnation_s: P, the bound within one pod incarnation: R x (D + S + Z) + L.
        restart_policy: The Worker's restartPolicy it was computed for.
        terms: The inputs and the intermediate terms, by name (seconds unless the name says).
    """

    seconds: float | None
    per_incarnation_s: float
    restart_policy: str
    terms: dict[str, Any]

    @property
    def bounded(self) -> bool:
        return self.seconds is not None

    def as_dict(self) -> dict[str, Any]:
        """The JSON form: seconds (null when unbounded), bounded, per_incarnation_s, restart_policy, terms."""
        return {
            "seconds": None if self.seconds is None else seconds_number(self.seconds),
            "bounded": self.bounded,
            "per_incarnation_s": seconds_number(self.per_incarnation_s),
            "restart_policy": self.restart_policy,
            "terms": {k: seconds_number(v) if isinstance(v, float) else v for k, v in self.terms.items()},
        }


def crash_loop_backoff_s(restarts: int) -> int:
    """The kubelet's back-off delays before ``restarts`` in-place restarts: 10 s, doubled each time, at most 300 s."""
    total, delay, n = 0, CRASH_LOOP_BASE_S, 0
    while n < restarts and delay < CRASH_LOOP_CAP_S:
        total, delay, n = total + delay, delay * 2, n + 1
    return total + CRASH_LOOP_CAP_S * (restarts - n)


def _keep_alive(options: dict[str, Any], key: str, default: int) -> int:
    """A keep-alive rendezvous option as torch reads it (an integer), >= 1; a typed error otherwise."""
    value = options.get(key)
    if value is None:
        return default
    text = str(value).strip(_ASCII_SPACE)
    digits = text[1:] if text[:1] == "+" else text
    if not (digits.isascii() and digits.isdigit() and len(digits) <= _MAX_DIGITS and int(digits) > 0):
        raise ValidationError(
            [
                Violation(
                    f"elastic_config.rdzv_options[{key}]",
                    KEEP_ALIVE_RULE,
                    f"{value!r} is not a whole number from 1 to {10**_MAX_DIGITS - 1} (torch reads {key} as an "
                    "integer; the worst case is computed for one it can read)",
                )
            ]
        )
    return int(digits)


def worst_case(task: TaskView, restart_policy: str) -> WorstCase | None:
    """The worst case from a fault to the job's end of an elastic task whose Worker has ``restart_policy``
    (what the renderer writes: `elastic_idl._backend.pytorchjob.worker_restart_policy`); None without an
    elastic config (no launcher, no bound of ours).

    The values are the ones the launcher uses, defaults filled in as it fills them.

    Raises:
        ValidationError: A keep-alive rendezvous option is not a whole number >= 1 (rule worst_case.keep_alive).
        ValueError: ``restart_policy`` is none of Never, OnFailure, Always, ExitCode.
    """
    if restart_policy not in _POLICIES:
        raise ValueError(f"restart_policy {restart_policy!r} is not one of {', '.join(_POLICIES)}")
    e = values_of(task)
    if e is None:
        return None
    options = rdzv_configs(e)
    monitor = e.monitor_interval_s()
    collective = e.collective_timeout_s()
    interval = float(_keep_alive(options, KEEP_ALIVE_INTERVAL, DEFAULT_KEEP_ALIVE_INTERVAL_S))
    attempts = float(_keep_alive(options, KEEP_ALIVE_MAX_ATTEMPT, DEFAULT_KEEP_ALIVE_MAX_ATTEMPT))
    read = float(options.get(READ_TIMEOUT, DEFAULT_READ_TIMEOUT_S))
    join = float(options.get(JOIN_TIMEOUT, DEFAULT_JOIN_TIMEOUT_S))
    cas = float(options.get(CAS_BACKOFF_MAX, 0))
    shutdown = e.shutdown_timeout
    stop = float(DEFAULT_SHUTDOWN_TIMEOUT_S) if shutdown is None else duration_seconds(shutdown)

    # The order of every operation is the Go backend's: same order, same float.
    stuck = collective + monitor + STUCK_MARGIN_S
    peer = interval * (attempts + 1.0) + monitor
    store = read + interval * attempts + STATE_CACHE_S + monitor
    detect = max(stuck, peer, store)
    detected_by = "stuck" if detect == stuck else "peer" if detect == peer else "store"
    rounds = int(e.max_restarts) + 1
    leave = STATE_CACHE_S + monitor + stop
    rendezvous = join + cas
    per = float(rounds) * (detect + stop + rendezvous) + leave

    rp = task.run_policy
    backoff = int(rp.backoff_limit) if rp is not None else 0  # 0 is unset (proto3): not rendered
    deadline = int(rp.active_deadline_seconds) if rp is not None else 0
    incarnations: int | None = None
    crash_loop = 0
    total: float | None
    if restart_policy == _NEVER:
        incarnations, total = 1, per
    elif restart_policy in _IN_PLACE and backoff > 0:
        incarnations, crash_loop = backoff + 1, crash_loop_backoff_s(backoff)
        total = float(incarnations) * per + float(crash_loop)
    else:  # OnFailure/Always without a backoff_limit; ExitCode (its re-creations are never counted)
        total = None
    capped = deadline > 0 and (total is None or float(deadline) < total)
    if capped:
        total = float(deadline)
    terms: dict[str, Any] = {
        "rounds": rounds,
        "detect_s": detect,
        "detected_by": detected_by,
        "detect_stuck_s": stuck,
        "detect_peer_s": peer,
        "detect_store_s": store,
        "stop_s": stop,
        "rendezvous_s": rendezvous,
        "join_timeout_s": join,
        "cas_backoff_max_s": cas,
        "leave_s": leave,
        "collective_timeout_s": collective,
        "monitor_interval_s": monitor,
        "keep_alive_interval_s": interval,
        "keep_alive_max_attempt": int(attempts),
        "read_timeout_s": read,
        "stuck_margin_s": STUCK_MARGIN_S,
        "pod_incarnations": incarnations,
        "backoff_limit": backoff or None,
        "crash_loop_backoff_s": crash_loop,
        "active_deadline_s": deadline or None,
        "capped_by_deadline": capped,
    }
    return WorstCase(total, per, restart_policy, terms)


def format_seconds(seconds: float) -> str:
    """A duration as ``1h 2m 5s`` (whole seconds, rounded up; ``0s`` for zero)."""
    left = math.ceil(seconds)
    hours, left = divmod(left, 3600)
    minutes, secs = divmod(left, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else "", f"{secs}s" if secs else ""]
    return " ".join(p for p in parts if p) or "0s"


def _s(x: float) -> str:
    """A term as written in the line: up to 3 decimals, no trailing zeros."""
    return f"{round(x, 3):.3f}".rstrip("0").rstrip(".")


def worst_case_line(w: WorstCase | Violation | None) -> str:
    """The one line ``validate`` and ``render`` print (no newline); ``w`` is a Violation when the worst case
    cannot be computed (`worst_case` raised it), None for a task without an elastic config."""
    head = "worst case from a fault to the job's end:"
    if w is None:
        return f"{head} not computed (no elastic_config: the launcher's bounds are for elastic tasks)"
    if isinstance(w, Violation):
        return f"{head} not computed ({w})"
    t = w.terms
    per = (
        f"{t['rounds']} round{'s' if t['rounds'] != 1 else ''} x (detect {_s(t['detect_s'])} s + "
        f"stop {_s(t['stop_s'])} s + rendezvous {_s(t['rendezvous_s'])} s) + leave {_s(t['leave_s'])} s"
    )
    policy = f"restartPolicy {w.restart_policy}"
    if t["capped_by_deadline"]:
        return f"{head} {format_seconds(t['active_deadline_s'])} (run_policy.active_deadline_seconds; {per} per pod; {policy})"
    if w.seconds is None:
        if w.restart_policy == _EXIT_CODE:
            why, fix = "re-creates a pod that exits >= 128 without a count", "run_policy.active_deadline_seconds"
        else:
            why = "restarts a pod in place without a limit (run_policy.backoff_limit unset)"
            fix = "run_policy.backoff_limit or active_deadline_seconds"
        return (
            f"{head} unbounded ({policy} {why}; per pod incarnation {format_seconds(w.per_incarnation_s)}: {per}; "
            f"set {fix} to bound it)"
        )
    if t["pod_incarnations"] == 1:
        return f"{head} {format_seconds(w.seconds)} ({per}; {policy})"
    return (
        f"{head} {format_seconds(w.seconds)} ({t['pod_incarnations']} pod incarnations x ({per}) "
        f"+ crash-loop back-off {t['crash_loop_backoff_s']} s; {policy} with backoff_limit {t['backoff_limit']})"
    )


_UNITS = {"h": 3600, "m": 60, "s": 1}


def parse_ceiling(text: str) -> float:
    """A ceiling as written on the command line: ``90m``, ``3600s``, ``1h``, ``1h30m``, ``2.5h``, or a bare
    number of seconds; > 0.

    Raises:
        ValueError: Anything else (the message says what to write).
    """
    raw = text.strip()
    groups = re.findall(r"(\d+(?:\.\d+)?)([hms]?)", raw)
    rebuilt = "".join(n + u for n, u in groups)
    units = [u for _, u in groups]
    if (
        not groups
        or rebuilt != raw
        or ("" in units and len(groups) > 1)
        or len(set(units)) != len(units)
        or units != sorted(units, key="hms".index)
    ):
        raise ValueError(f"{text!r} is not a duration: write e.g. 90m, 3600s, 1h, 1h30m (h, m, s)")
    seconds = sum(float(n) * _UNITS[u or "s"] for n, u in groups)
    if seconds <= 0:
        raise ValueError(f"{text!r} is not a duration > 0")
    return seconds


def check_ceiling(w: WorstCase | None, ceiling_s: float, given: str) -> None:
    """Refuse a worst case above ``ceiling_s`` (``given``: the ceiling as the user wrote it); unbounded is above
    any ceiling, and a task without an elastic config has no worst case of ours to refuse.

    Raises:
        ValidationError: Rule worst_case.max, with the worst case and the ceiling.
    """
    if w is None or (w.seconds is not None and w.seconds <= ceiling_s):
        return
    shown = "unbounded" if w.seconds is None else f"{format_seconds(w.seconds)} ({seconds_number(w.seconds)} s)"
    raise ValidationError(
        [
            Violation(
                "",
                MAX_WORST_CASE_RULE,
                f"the worst case from a fault to the job's end is {shown} under restartPolicy {w.restart_policy}, "
                f"above the ceiling {given} ({seconds_number(ceiling_s)} s, --max-worst-case)",
            )
        ]
    )
