"""The project's exception and warning types, all of them. Every error a user can cause is one of these.

The public ones are re-exported by ``elastic_idl``; the exit code each maps to is
`elastic_idl.exit_codes`.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import re
import reprlib
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_ERROR_CHARS",
    "MAX_FIELD_CHARS",
    "MAX_VIOLATIONS_SHOWN",
    "SUGGESTION_CUTOFF",
    "CaseError",
    "DecodeError",
    "ElasticIdlError",
    "EncodeError",
    "HostNotFoundError",
    "LaunchFailedError",
    "LaunchInterruptedError",
    "NotBuiltError",
    "PeerLostError",
    "RenderError",
    "RendezvousClosedError",
    "RendezvousIncompleteError",
    "RendezvousStoreLostError",
    "SkewError",
    "SkewWarning",
    "TargetLoss",
    "TargetLossError",
    "TorchPrivateAPIError",
    "TorchVersionError",
    "TorchrunError",
    "TorchrunUsageError",
    "TorchrunValidationError",
    "UnknownArgumentError",
    "UnsupportedFlagError",
    "UnsupportedVersionError",
    "ValidationError",
    "Violation",
    "brief",
    "close_match",
    "deprecated",
    "did_you_mean",
    "one_line",
    "os_error_text",
    "reject_unknown_keywords",
    "shown_path",
    "violation_lines",
]

#: The longest message an error or violation carries, in characters; longer text
#: (echoed input, a long value) is cut, so an error stays short whatever the input.
MAX_ERROR_CHARS = 500
#: The longest field path a DecodeError carries (an unknown key is echoed in it).
MAX_FIELD_CHARS = 120
#: How many violations a ValidationError's message (and the CLI) lists; the rest are counted.
MAX_VIOLATIONS_SHOWN = 20


class _Repr(reprlib.Repr):
    def repr_int(self, x: int, level: int) -> str:
        # repr() refuses an int of more digits than Python converts (4300): say how large it is instead.
        if x.bit_length() > _INT_BITS_SHOWN:
            return f"<an integer of {x.bit_length():,} bits>"
        return super().repr_int(x, level)


#: Ints up to this many bits are written out (and cut like any long number); larger ones by their size.
_INT_BITS_SHOWN = 4096


_repr = _Repr()
_repr.maxlevel = 2
_repr.maxstring = 60
_repr.maxother = 60
_repr.maxlong = 40
_repr.maxlist = _repr.maxtuple = _repr.maxset = _repr.maxfrozenset = _repr.maxdeque = _repr.maxarray = 4
_repr.maxdict = 4
_LINE_BREAKS = re.compile(r"\s*[\r\n]+\s*")


def deprecated(old: str, new: str) -> None:
    """Warn that the public name ``old`` is deprecated in favour of ``new`` (removed in 0.3).

    Called first thing by a shim, so ``stacklevel=3`` points at the shim's caller.
    """
    warnings.warn(f"{old} is deprecated and will be removed in 0.3; use {new}", DeprecationWarning, stacklevel=3)


def brief(value: object) -> str:
    """A bounded ``repr`` for messages: long strings, deep or large containers, huge ints are cut."""
    return _repr.repr(value)


def one_line(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` on one line, at most ``limit`` characters (cut text ends with "...")."""
    flat = _LINE_BREAKS.sub(" ", text.strip())
    if len(flat) > limit:
        flat = flat[: limit - 3] + "..."
    return flat


#: How alike an unknown name and a known one must be for a "did you mean": difflib's ratio (twice the
#: matching characters over both lengths) at least this. The Go backend ports the same algorithm and reads
#: this threshold (``tables_gen.go``); ``contract/spelling.json`` holds the vectors both languages pass.
SUGGESTION_CUTOFF = 0.75


def close_match(name: str, known: Iterable[str]) -> str | None:
    """The one of ``known`` that ``name`` looks like a typo of (the most alike; of equals, the greatest), or None."""
    # difflib's first bound (real_quick_ratio, from the lengths alone), here before difflib indexes ``name``:
    # a long name (a hostile input's key of a million characters) costs nothing.
    n = len(name)
    alike = [k for k in known if (2.0 * min(len(k), n) / (len(k) + n) if k or n else 1.0) >= SUGGESTION_CUTOFF]
    close = difflib.get_close_matches(name, alike, n=1, cutoff=SUGGESTION_CUTOFF) if alike else []
    return close[0] if close else None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """ "; did you mean 'x'?" when ``name`` looks like a typo of one of ``known``, else ""."""
    match = close_match(name, known)
    return f"; did you mean {match!r}?" if match else ""


def shown_path(path: object) -> str:
    """A path the user gave, for a one-line message: as written, or its repr when it holds a line
    break or another character a terminal would not show as is (a newline, a surrogate of a bad byte)."""
    text = str(path)
    return text if text.isprintable() else repr(text)


def os_error_text(exc: OSError, source: str | None = None) -> str:
    """An OSError in one line that names what failed: ``<path>: <reason>`` (``source``, e.g. "stdin",
    when the error carries no file name: an I/O error on a standard stream)."""
    where = exc.filename if exc.filename is not None else source
    reason = exc.strerror or one_line(str(exc)) or type(exc).__name__
    return f"{shown_path(where)}: {reason}" if where is not None else reason


class ElasticIdlError(Exception):
    """Base class of every error elastic-idl raises on purpose."""


class DecodeError(ElasticIdlError, ValueError):
    """Input could not be decoded into a task message.

    Attributes:
        field: Dotted path of the offending field ("" when the input as a whole is bad).
        reason: What is wrong, in words.
        format: The input format that was being decoded ("binary", "json", ...).
        line, column, offset: Where the input is bad, when known (see below).

    Where the parser gives one, the position of the error: ``line`` and
    ``column`` (1-based) in text, ``offset`` (0-based byte) in binary or
    undecodable input; None when unknown. The message ends with the format and
    the position, e.g. ``(yaml, line 2, column 1)``.
    """

    def __init__(
        self,
        field: str,
        reason: str,
        *,
        format: str = "",
        line: int | None = None,
        column: int | None = None,
        offset: int | None = None,
    ) -> None:
        self.field = one_line(field, MAX_FIELD_CHARS)
        self.reason = one_line(reason)
        self.format = format
        self.line = line
        self.column = column
        self.offset = offset
        where = f"{self.field}: " if self.field else ""
        at = [format] if format else []
        if line is not None:
            at.append(f"line {line}" + (f", column {column}" if column is not None else ""))
        if offset is not None:
            at.append(f"byte {offset}")
        suffix = f" ({', '.join(at)})" if at else ""
        super().__init__(f"{where}{self.reason}{suffix}")


class UnsupportedVersionError(ElasticIdlError, ValueError):
    """A task_type_version that neither side knows (only 0 and 1 exist)."""

    def __init__(self, version: object) -> None:
        self.version = version
        super().__init__(
            f"task_type_version: unsupported task template version {brief(version)} "
            "(0 = legacy DistributedPyTorchTrainingTask, 1 = kubeflow DistributedPyTorchTrainingTask)"
        )


@dataclass(frozen=True, order=True)
class Violation:
    """One broken rule.

    Attributes:
        field: Dotted path of the field in the task message, e.g. "elastic_config.min_replicas".
        rule: Stable rule id, e.g. "elastic.min_le_max" (see ``elastic_idl.RULES``).
        message: Human-readable explanation with the offending values.
    """

    field: str
    rule: str
    message: str

    def __post_init__(self) -> None:
        # Messages quote values from the input: keep them one bounded line.
        object.__setattr__(self, "message", one_line(self.message))

    def __str__(self) -> str:
        # An empty field is the task as a whole.
        where = f"{self.field}: " if self.field else ""
        return f"{where}{self.rule}: {self.message}"


def violation_lines(violations: Sequence[Violation], limit: int = MAX_VIOLATIONS_SHOWN) -> list[str]:
    """One line per violation, at most ``limit`` of them, then how many more there are."""
    lines = [str(v) for v in violations[:limit]]
    if len(violations) > limit:
        lines.append(f"... and {len(violations) - limit} more violations")
    return lines


class ValidationError(ElasticIdlError, ValueError):
    """A task broke one or more rules. ``violations`` lists all of them."""

    def __init__(self, violations: Iterable[Violation]) -> None:
        self.violations: tuple[Violation, ...] = tuple(violations)
        lines = "\n".join(f"  {line}" for line in violation_lines(self.violations))
        n = len(self.violations)
        super().__init__(f"{n} violation{'s' if n != 1 else ''}:\n{lines}")


class RenderError(ElasticIdlError, ValueError):
    """A Kubernetes object could not be rendered from the given task and options.

    Attributes:
        field: The option or task field at fault (e.g. "name", "image").
        reason: What is wrong.
    """

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = one_line(reason)
        super().__init__(f"{field}: {self.reason}")


class UnknownArgumentError(ElasticIdlError, TypeError):
    """A keyword argument the callee does not have (a TypeError, as Python's own), with a suggestion.

    Attributes:
        argument: The unknown keyword.
        known: The keywords the callee takes.
        suggestion: The known keyword it looks like a typo of, or None.
    """

    def __init__(self, callee: str, argument: str, known: Sequence[str]) -> None:
        self.argument = argument
        self.known = tuple(known)
        self.suggestion = close_match(argument, self.known)
        hint = f"did you mean {self.suggestion!r}?" if self.suggestion else f"known: {', '.join(self.known)}"
        super().__init__(f"{callee}() got an unexpected keyword argument {argument!r}; {hint}")


def reject_unknown_keywords(cls: type) -> None:
    """Make a keyword-only dataclass raise `UnknownArgumentError` (with a "did you mean")
    for a keyword it does not take, where Python's own TypeError names no alternative."""
    init: Any = getattr(cls, "__init__")  # noqa: B009 - mypy: the class's own method, not an instance's
    known = tuple(f.name for f in dataclasses.fields(cls) if f.init)

    @functools.wraps(init)
    def checked_init(self: Any, *args: Any, **kwargs: Any) -> None:
        for name in kwargs:
            if name not in known:
                raise UnknownArgumentError(cls.__name__, name, known)
        init(self, *args, **kwargs)

    setattr(cls, "__init__", checked_init)  # noqa: B010 - mypy refuses assigning a method


# --------------------------------------------------------------------------- formats (decode/encode)


class SkewError(ElasticIdlError, ValueError):
    """Emitting for an upstream-only reader would drop extension fields that are set.

    Attributes:
        fields: Paths of the extension fields that upstream would lose.
    """

    def __init__(self, fields: Sequence[str], *, allow: str = "pass allow_loss=True") -> None:
        # ``allow``: how the caller's interface allows the loss (the CLI says "add --allow-loss").
        self.fields = tuple(fields)
        super().__init__(
            "upstream readers do not know these fields and would lose them: "
            + ", ".join(self.fields)
            + f" (clear them, or {allow} to drop them with a warning)"
        )


@dataclass(frozen=True)
class TargetLoss:
    """A task field that a render target cannot carry (``elastic-idl render --target``'s warnings).

    Attributes:
        field: Dotted path of the task field, e.g. "elastic_config.min_replicas".
        target: The render target: "trainjob" or "jobset".
        why: What the target does instead, in words.
    """

    field: str
    target: str
    why: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "why", one_line(self.why))

    def __str__(self) -> str:
        return f"{self.field}: {self.why}"

    def as_dict(self) -> dict[str, str]:
        """``{"field", "target", "why"}``, the form of ``--json``."""
        return {"field": self.field, "target": self.target, "why": self.why}


class TargetLossError(ElasticIdlError, ValueError):
    """A strict render (``strict=True``, ``elastic-idl render --strict``) whose target would lose task fields.

    Attributes:
        target: The render target.
        losses: Every field the target cannot carry, in task order.
    """

    def __init__(self, target: str, losses: Sequence[TargetLoss]) -> None:
        self.target = target
        self.losses = tuple(losses)
        fields = ", ".join(loss.field for loss in self.losses)
        super().__init__(f"a {target} cannot carry {fields} (render without strict to accept the losses)")


class SkewWarning(UserWarning):
    """Something the task holds was not used, and is named: what an older or newer reader loses.

    Emitted when extension fields are dropped for an upstream reader (``allow_loss=True``), when a
    tolerant decode meets fields this version does not know (a newer SDK's task), and when the
    renderer drops a task resource the API server would refuse (``STORAGE``).

    Attributes:
        fields: The field paths concerned (may be empty for a warning built by hand).
    """

    def __init__(self, message: str, fields: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.fields = tuple(fields)


class EncodeError(ElasticIdlError, ValueError):
    """A message holds a value its JSON/YAML form cannot express (e.g. an invalid Duration).

    Attributes:
        field: Dotted path of the offending field ("" when unknown).
    """

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        reason = one_line(reason)
        super().__init__(f"{field}: {reason}" if field else reason)


# --------------------------------------------------------------------------- torchrun command lines


class TorchrunError(ElasticIdlError, ValueError):
    """A torchrun command line (or its ``PET_*`` env) could not be turned into a task, or back.

    Attributes:
        flag: The flag at fault in its dash spelling ("--nnodes"), or "training_script".
        reason: What is wrong; names the env variable when the value came from one.
    """

    def __init__(self, flag: str, reason: str) -> None:
        self.flag = flag
        self.reason = reason
        super().__init__(f"{flag}: {reason}")


class TorchrunValidationError(ValidationError):
    """A torchrun command line (or its ``PET_*`` env) that describes a task breaking a rule.

    A :class:`ValidationError` (``violations`` name the task's fields, as for any task) whose
    message names, for each violation, the flag and value it comes from, as the user wrote them.

    Attributes:
        flags: Per violation, in order: ``--nnodes=3:1``, ``PET_NNODES='3:1' (--nnodes)``, or
            ``--rdzv-backend (default static)`` for a value left at torchrun's default.
    """

    def __init__(self, violations: Iterable[Violation], flags: Sequence[str]) -> None:
        super().__init__(violations)
        self.flags = tuple(flags)
        lines = "\n".join(f"  {line}" for line in self.lines())
        n = len(self.violations)
        self.args = (f"{n} violation{'s' if n != 1 else ''}:\n{lines}",)

    def lines(self, limit: int = MAX_VIOLATIONS_SHOWN) -> list[str]:
        """One line per violation, the flag first: ``--nnodes=3:1: elastic.min_le_max: ... (elastic_config...)``."""
        shown = [
            f"{flag}: {v.rule}: {v.message} ({v.field})" if v.field else f"{flag}: {v.rule}: {v.message}"
            for flag, v in zip(self.flags[:limit], self.violations[:limit], strict=True)
        ]
        if len(self.violations) > limit:
            shown.append(f"... and {len(self.violations) - limit} more violations")
        return shown


class UnsupportedFlagError(TorchrunError):
    """A torchrun flag (or value) the schema cannot hold, so converting would drop it."""


class TorchrunUsageError(TorchrunError):
    """A command line torchrun's own parser rejects (no script, an unknown flag, a bad type, -h).

    torchrun exits 2 (argparse's usage error) on these; ``elastic-idl torchrun`` does too.
    """


class TorchPrivateAPIError(ElasticIdlError, RuntimeError):
    """The installed torch lacks a private name the launcher relies on (`elastic_idl._torch_private`).

    Attributes:
        torch_version: The installed torch's ``__version__``.
        missing: Each missing name as ``module.name`` or ``module:Class.name``.
    """

    def __init__(self, torch_version: str, missing: Sequence[str]) -> None:
        self.torch_version = torch_version
        self.missing = tuple(missing)
        super().__init__(
            f"torch {torch_version} lacks {', '.join(self.missing)}, which the elastic-idl launcher uses "
            "(private torch API: see elastic_idl._torch_private); use a torch this release supports"
        )


class TorchVersionError(ValidationError):
    """The task sets a field the installed torch cannot apply: refused at launch (rule
    ``launch.torch_version``), never by validation or rendering, which accept it on every torch.

    A `ValidationError` (the CLI exits 1): each violation names the field, and its message the
    installed torch version and the first that applies the field.

    Attributes:
        torch_version: The installed torch's version (``torch.__version__`` without its local part).
    """

    def __init__(self, torch_version: str, violations: Iterable[Violation]) -> None:
        self.torch_version = torch_version
        super().__init__(violations)


class NotBuiltError(ElasticIdlError, NotImplementedError):
    """A path elastic-idl does not have yet was taken; raised instead of doing something else silently.

    Attributes:
        missing: What is not built, e.g. "the Flyte 2 pod path".
    """

    def __init__(self, missing: str, detail: str) -> None:
        self.missing = missing
        super().__init__(f"{missing} is not built yet: {detail}")


# --------------------------------------------------------------------------- launches


class LaunchFailedError(ElasticIdlError, RuntimeError):
    """A launch failed for good: the one exception `elastic_idl.launch` raises.

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


class PeerLostError(RendezvousIncompleteError):
    """The group lost a node while it ran, and too few nodes re-formed within ``join_timeout``.

    A `RendezvousIncompleteError` (``joined``, ``needed``, ``timeout_s``) raised by a
    rendezvous that followed a completed one: a node of the running group was lost (its
    heartbeat expired, or it died and did not come back) and the survivors are fewer than
    ``min_nodes``. Unlike a job that never gathered its nodes, this is an infrastructure
    failure: exit code 200, which the operator's ``ExitCode`` policy retries; the flytekit task
    in a pod exits 200 too, writing nothing.

    Attributes:
        lost: The torch node descriptors (``addr_pid_id``) of the previous round that did not
            rejoin; empty when the state could not tell.
    """

    def __init__(
        self,
        message: str,
        report: Any,
        *,
        joined: int,
        needed: int,
        timeout_s: float,
        lost: Sequence[str] = (),
    ) -> None:
        super().__init__(message, report, joined=joined, needed=needed, timeout_s=timeout_s)
        self.lost = tuple(lost)


class RendezvousStoreLostError(LaunchFailedError):
    """The rendezvous store cannot be reached: its host (the endpoint's node, worker-0 in a pod) is gone.

    torch's c10d store lives in the process of the node that hosts it and does not
    survive it: the other nodes cannot re-form the group until that node is back.
    Raised when the store is lost during the rendezvous, or is found gone when the
    workers failed with no restart left. The pod entrypoint exits 200, a code the
    operator's ``ExitCode`` policy retries, so the group can re-form around the
    restarted host instead of waiting out a timeout.
    """


class RendezvousClosedError(LaunchFailedError):
    """The rendezvous was closed by another node: the job already ended there, for good or ill.

    Raised to a node that arrives (or comes back) after the others finished and shut the
    rendezvous down. That node's outcome is not the job's: the nodes that ran decided it. The
    flytekit task writes nothing for it (no error document that would fail a task another pod
    completed); the pod entrypoint exits 3, as for any failed launch.
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


class HostNotFoundError(ElasticIdlError, ValueError):
    """The rendezvous host of a local launch does not resolve.

    Attributes:
        host: The host name that did not resolve.
        endpoint: The whole rendezvous endpoint.
    """

    def __init__(self, host: str, endpoint: str, reason: str) -> None:
        self.host = host
        self.endpoint = endpoint
        super().__init__(
            f"rdzv_endpoint: the host {host!r} of {endpoint!r} does not resolve ({reason}); "
            "a one-machine launch can use 127.0.0.1"
        )


# --------------------------------------------------------------------------- contract cases


class CaseError(ValueError):
    """A case folder is malformed (unknown key, missing input, bad kind)."""
