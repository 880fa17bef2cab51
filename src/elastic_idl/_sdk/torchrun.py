"""torchrun command lines <-> task messages: ``from_torchrun`` and ``to_torchrun``.

The parser is torch 2.13's ``torchrun`` parser rebuilt without torch: the same flags in
both spellings, the same argparse rules (``--flag=value``, abbreviations, everything after
the script goes to the script) and the same ``PET_<FLAG>`` env fallbacks (the command line
wins; booleans are ``"1"``/``"0"``). Then torchrun's own resolution (``--standalone``, the
implicit standalone of a one-node static rendezvous, the static endpoint from
``--master-addr``/``--master-port``) is applied, so the task means what torchrun would run.
A flag the schema cannot hold raises `UnsupportedFlagError` naming it; nothing is
dropped silently. Pure: the environment is an argument, torch is not imported.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import math
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, NoReturn, cast

from elastic_idl._errors import (
    TorchrunError,
    TorchrunUsageError,
    TorchrunValidationError,
    UnsupportedFlagError,
    ValidationError,
    Violation,
)
from elastic_idl._sdk.arguments import (
    Problems,
    duration_of,
    duration_text,
    parse_nnodes,
    parse_nproc,
    split_rdzv,
    task_of,
)
from elastic_idl._task.enums import NPROC_POLICY, NUMA_BINDING, START_METHOD
from elastic_idl._task.messages import ElasticConfig, Task
from elastic_idl._task.names import (
    C10D,
    CAS_BACKOFF_MAX,
    DEFAULT_MASTER_PORT,
    DEFAULT_PORTS,
    DEFAULT_RDZV_BACKEND,
    DEFAULT_SIGNALS,
    FAILURE_TIMEOUTS,
    INT32,
    LOG_LINE_PREFIX_TEMPLATE_ENV,
    LOOPBACK_HOST,
    NCCL_ENV_FIELDS,
    PET_PREFIX,
    RDZV_TIMEOUTS,
    RDZV_TYPED,
    STATIC,
    format_rdzv_conf,
    parse_rdzv_conf,
)
from elastic_idl._task.validate import violations
from elastic_idl._task.view import elastic_values, view
from elastic_idl.exit_codes import EXIT_CODES_TEXT

__all__ = [
    "DROP_IN_COLLECTIVE_TIMEOUT",
    "DROP_IN_FAILURE_FILE",
    "DROP_IN_PREFIX",
    "FLAGS",
    "NEWER_FLAGS",
    "TORCH_2_13",
    "NodeSettings",
    "TorchrunEntrypoint",
    "TorchrunSurface",
    "from_torchrun",
    "parse_torchrun",
    "to_torchrun",
    "torchrun_help",
]

_log = logging.getLogger("elastic_idl")

_HOST_RE = re.compile(r"^[\w\.:-]+$")  # torch's parse_rendezvous_endpoint
_STD_VALUE_RE = re.compile(r"^[0123]$")  # torch's Std.from_str
_STD_MAPPING_RE = re.compile(r"^(\d:[0123],)*(\d:[0123])$")
_UNSET: Any = object()


def _float_text(text: str) -> str:
    float(text)  # argparse's own check ("invalid float value"); the text is kept for an exact Duration
    return text


_float_text.__name__ = "float"


def _comma_separated_list(value: str) -> list[str]:
    """torchrun's --duplicate-*-filters parser: ",," escapes a comma."""
    placeholder = "<COMMA_PLACEHOLDER>"
    return [item.replace(placeholder, ",") for item in value.replace(",,", placeholder).split(",")]


class _Flag(NamedTuple):
    options: tuple[str, ...]
    kind: str  # "env": value with PET_ fallback; "bool": torchrun's check_env; "plain": no env fallback
    type: Callable[[str], Any]
    default: Any
    choices: tuple[str, ...] | None
    status: str  # "covered", "entrypoint", "launch" (a per-node or per-run setting, not the task's) or "refused"
    note: str  # where it goes in the task, or why it is refused
    #: Puts the flag's value on the config being built (from_torchrun); None: read elsewhere or not at all.
    read: Callable[[_Flag, _Value, _Reading], None] | None = None
    #: The flag's text for a task (to_torchrun): a value, True for a bare switch, None to leave it out.
    #: Raises TorchrunError for what no command line can say.
    write: Callable[[_Flag, _Writing], str | bool | None] | None = None

    @property
    def dest(self) -> str:
        return next(o for o in self.options if o.startswith("--"))[2:].replace("-", "_")

    @property
    def env_var(self) -> str | None:
        return None if self.kind == "plain" else PET_PREFIX + self.dest.upper()


def _f(
    options: tuple[str, ...],
    kind: str,
    default: Any,
    status: str,
    note: str,
    type: Callable[[str], Any] = str,
    choices: tuple[str, ...] | None = None,
    read: Callable[[_Flag, _Value, _Reading], None] | None = None,
    write: Callable[[_Flag, _Writing], str | bool | None] | None = None,
) -> _Flag:
    return _Flag(options, kind, type, default, choices, status, note, read, write)


class _Value(NamedTuple):
    value: Any
    source: str  # "argv", "env" or "default"
    #: The option as the command line spelled it ("--nproc_per_node"), or the env value as written.
    written: str = ""

    def where(self, f: _Flag) -> str:
        return f"{f.env_var}={self.value!r} ({_flag_name(f)})" if self.source == "env" else f"{self.value!r}"

    def given(self, f: _Flag) -> str:
        """Where the value came from, as the user wrote it: ``--nnodes=3:1``, ``PET_NNODES='3:1' (--nnodes)``,
        or ``--rdzv-backend (default static)``."""
        if self.source == "env":
            return f"{f.env_var}={self.written!r} ({_flag_name(f)})"
        if self.source == "default":
            return f"{_flag_name(f)} (default {self.value})"
        if f.kind == "bool":
            return self.written
        text = ",".join(map(str, self.value)) if isinstance(self.value, list) else str(self.value)
        return f"{self.written}={shlex.quote(text)}"


class _Reading(NamedTuple):
    """What a flag's reader writes to: the elastic config being built, and the resolved backend."""

    config: ElasticConfig
    backend: str


class _Writing(NamedTuple):
    """What a flag's writer reads: the task's elastic settings, the entrypoint, the effective backend."""

    elastic: Any
    entrypoint: TorchrunEntrypoint
    backend: str


def _flag_name(f: _Flag) -> str:
    return next(o for o in f.options if o.startswith("--"))


# ---------------------------------------------------------------- readers (from_torchrun)


def _raise_first(problems: Problems) -> None:
    if problems.found:
        first = problems.found[0]
        flag, _, key = first.field.partition(".")  # "--rdzv-conf.join_timeout": the flag, then the key
        raise TorchrunError(flag, f"{key}: {first.message}" if key else first.message)


def _read_nproc(f: _Flag, v: _Value, r: _Reading) -> None:
    try:
        nproc, policy = parse_nproc(v.value, _flag_name(f))
    except ValueError:
        raise UnsupportedFlagError(
            _flag_name(f), f"{v.where(f)}: the schema holds an integer, auto, cpu or gpu"
        ) from None
    r.config.nproc_per_node = _int32(nproc, f.dest)
    r.config.nproc_policy = cast(Any, policy)


def _read_rdzv_conf(f: _Flag, v: _Value, r: _Reading) -> None:
    flag = _flag_name(f)
    conf = _rdzv_conf(v.value, flag)
    if r.backend == STATIC and "rank" in conf:
        raise UnsupportedFlagError(flag, "torchrun overwrites 'rank' with --node-rank for the static backend; drop it")
    for key in RDZV_TIMEOUTS:
        if key in conf:
            try:  # torch reads these with int(): "1.5" or "10s" fail at rendezvous time
                int(conf[key])
            except ValueError:
                raise TorchrunError(flag, f"{key}={conf[key]!r} is not a whole number of seconds") from None
    if CAS_BACKOFF_MAX in conf:
        try:  # torch 2.15 reads it with float() and refuses what is not finite
            ok = math.isfinite(float(conf[CAS_BACKOFF_MAX]))
        except ValueError:
            ok = False
        if not ok:
            raise TorchrunError(flag, f"{CAS_BACKOFF_MAX}={conf[CAS_BACKOFF_MAX]!r} is not a finite number of seconds")
    problems = Problems()
    split_rdzv(conf.items(), r.config, flag, problems)
    _raise_first(problems)


def _read_max_restarts(f: _Flag, v: _Value, r: _Reading) -> None:
    r.config.max_restarts = _int32(v.value, f.dest)


def _read_duration(f: _Flag, v: _Value, r: _Reading) -> None:
    if v.source == "default":
        return
    problems = Problems()
    d = duration_of(v.value, _flag_name(f), problems)
    _raise_first(problems)
    getattr(r.config, f.dest).CopyFrom(d)


def _read_start_method(f: _Flag, v: _Value, r: _Reading) -> None:
    if v.source == "default":
        return
    if v.value not in START_METHOD.number:  # an env value: argparse checks choices on the command line only
        raise TorchrunError(_flag_name(f), f"{v.where(f)} is not one of spawn, fork, forkserver")
    r.config.start_method = cast(Any, START_METHOD.number[v.value])


def _read_role(f: _Flag, v: _Value, r: _Reading) -> None:
    if v.source != "default":
        r.config.role = v.value


def _read_std(f: _Flag, v: _Value, r: _Reading) -> None:
    flag, text = _flag_name(f), v.value
    if _STD_VALUE_RE.match(text):
        setattr(r.config, f.dest, int(text))
    elif _STD_MAPPING_RE.match(text):
        raise UnsupportedFlagError(
            flag,
            f"{v.where(f)}: per-rank maps are not held by the schema; give one value "
            f"for every rank ({flag} 3) and pick the ranks whose output shows on the console "
            "with --local-ranks-filter (e.g. --local-ranks-filter 0)",
        )
    else:
        raise TorchrunError(flag, f"{v.where(f)} is not 0-3 or a map like 0:1,1:2")


def _read_ranks(f: _Flag, v: _Value, r: _Reading) -> None:
    if not v.value:
        return
    try:  # torch: set(map(int, text.split(","))); duplicates collapse, order does not matter
        r.config.local_ranks_filter.extend(dict.fromkeys(int(x) for x in v.value.split(",")))
    except ValueError:
        raise TorchrunError(_flag_name(f), f"{v.value!r} is not a comma-separated list of integers") from None


def _read_numa(f: _Flag, v: _Value, r: _Reading) -> None:
    if v.value is not None:
        r.config.numa_binding = cast(Any, NUMA_BINDING.number[v.value])


def _read_signals(f: _Flag, v: _Value, r: _Reading) -> None:
    if v.source == "default":
        return
    names = [x.strip() for x in v.value.split(",")]
    if not all(names):
        raise TorchrunError(_flag_name(f), f"{v.value!r} has an empty signal name")
    r.config.signals_to_handle.extend(names)


def _read_switch(f: _Flag, v: _Value, r: _Reading) -> None:
    setattr(r.config, f.dest, v.value)


def _read_text(f: _Flag, v: _Value, r: _Reading) -> None:
    if v.value:
        setattr(r.config, f.dest, v.value)


# ---------------------------------------------------------------- writers (to_torchrun)


def _set_duration(e: Any, name: str) -> Any:
    """The duration ``name`` of the elastic settings, or None when it is unset."""
    return getattr(e, name) if e.HasField(name) else None


def _options(e: Any) -> list[tuple[str, str]]:
    """The rdzv options of the elastic settings as (key, value) pairs, in order."""
    return [(o.key, o.value) for o in e.rdzv_options]


def _write_nnodes(f: _Flag, w: _Writing) -> str:
    lo, hi = w.elastic.min_replicas, w.elastic.max_replicas
    return f"{lo}" if lo == hi else f"{lo}:{hi}"


def _write_nproc(f: _Flag, w: _Writing) -> str:
    return f"{NPROC_POLICY.text.get(w.elastic.nproc_policy) or w.elastic.nproc_per_node}"


def _write_backend(f: _Flag, w: _Writing) -> str:
    return w.backend


def _write_endpoint(f: _Flag, w: _Writing) -> str | None:
    host, port = w.elastic.rdzv_host, w.elastic.rdzv_port
    if host:
        if not _HOST_RE.match(host):
            raise TorchrunError(_flag_name(f), f"torch cannot parse the host {host!r} of elastic_config.rdzv_host")
        return f"{f'[{host}]' if ':' in host else host}:{port}"
    if port:
        raise TorchrunError(_flag_name(f), f"elastic_config.rdzv_port is {port} but rdzv_host is empty")
    if w.backend == STATIC:
        raise TorchrunError(
            _flag_name(f), "the static backend needs rdzv_host on a torchrun command line (torchrun would pick its own)"
        )
    return None


def _write_rdzv_conf(f: _Flag, w: _Writing) -> str | None:
    flag, e = _flag_name(f), w.elastic
    # Whole seconds: to_torchrun runs on a valid task (rule elastic.duration.whole_seconds).
    conf = [(key, str(d.seconds)) for key in RDZV_TIMEOUTS if (d := _set_duration(e, key)) is not None]
    cas = _set_duration(e, CAS_BACKOFF_MAX)
    if cas is not None:
        conf.append((CAS_BACKOFF_MAX, duration_text(cas)))  # torch reads a float: exact decimal text
    for key, value in _options(e):
        if key.strip() != key or not value.strip() or value.strip() != value:
            raise TorchrunError(flag, f"torch strips keys and values and needs a value: {key!r}={value!r}")
        if w.backend == STATIC and key == "rank":
            raise TorchrunError(flag, "torchrun overwrites 'rank' for the static backend")
        conf.append((key, value))
    return format_rdzv_conf(conf) if conf else None


def _write_always(f: _Flag, w: _Writing) -> str:
    return str(getattr(w.elastic, f.dest))


def _write_if_set(f: _Flag, w: _Writing) -> str | None:
    value = getattr(w.elastic, f.dest)
    return str(value) if value else None


def _write_monitor_interval(f: _Flag, w: _Writing) -> str | None:
    d = _set_duration(w.elastic, f.dest)
    return duration_text(d) if d is not None else None


def _write_shutdown_timeout(f: _Flag, w: _Writing) -> str | None:
    d = _set_duration(w.elastic, f.dest)
    return str(d.seconds) if d is not None else None  # whole seconds: the task is valid


def _write_start_method(f: _Flag, w: _Writing) -> str | None:
    return START_METHOD.text[w.elastic.start_method] if w.elastic.start_method else None


def _write_numa(f: _Flag, w: _Writing) -> str | None:
    return NUMA_BINDING.text[w.elastic.numa_binding] if w.elastic.numa_binding else None


def _write_joined(f: _Flag, w: _Writing) -> str | None:
    return ",".join(map(str, getattr(w.elastic, f.dest))) or None


def _write_switch(f: _Flag, w: _Writing) -> bool | None:
    return True if getattr(w.elastic, f.dest) else None


def _write_entrypoint_switch(f: _Flag, w: _Writing) -> bool | None:
    return True if getattr(w.entrypoint, f.dest) else None


#: Every torchrun 2.13 flag, in torchrun's order: spellings, env fallback, default, and what we do with it.
#: The flag table of docs/reference/torchrun.md is this table; tests check it against torch's own parser.
FLAGS: tuple[_Flag, ...] = (
    _f(("--nnodes",), "env", "1:1", "covered", "min_replicas / max_replicas", write=_write_nnodes),
    _f(
        ("--nproc-per-node", "--nproc_per_node"),
        "env",
        "1",
        "covered",
        "nproc_per_node, or nproc_policy auto/cpu/gpu",
        read=_read_nproc,
        write=_write_nproc,
    ),
    _f(("--rdzv-backend", "--rdzv_backend"), "env", STATIC, "covered", "rdzv_backend", write=_write_backend),
    _f(("--rdzv-endpoint", "--rdzv_endpoint"), "env", "", "covered", "rdzv_host / rdzv_port", write=_write_endpoint),
    _f(("--rdzv-id", "--rdzv_id"), "env", "none", "covered", "rdzv_id", write=_write_if_set),
    _f(
        ("--rdzv-conf", "--rdzv_conf"),
        "env",
        "",
        "covered",
        "join/last_call/close/read_timeout, cas_backoff_max_seconds, rdzv_options",
        read=_read_rdzv_conf,
        write=_write_rdzv_conf,
    ),
    _f(("--standalone",), "bool", False, "covered", "rdzv_backend c10d, endpoint and id left to the runtime"),
    _f(
        ("--max-restarts", "--max_restarts"),
        "env",
        0,
        "covered",
        "max_restarts",
        type=int,
        read=_read_max_restarts,
        write=_write_always,
    ),
    _f(
        ("--monitor-interval", "--monitor_interval"),
        "env",
        "0.1",
        "covered",
        "monitor_interval",
        type=_float_text,
        read=_read_duration,
        write=_write_monitor_interval,
    ),
    _f(
        ("--start-method", "--start_method"),
        "env",
        "spawn",
        "covered",
        "start_method",
        choices=START_METHOD.names,
        read=_read_start_method,
        write=_write_start_method,
    ),
    _f(
        ("--event-log-handler", "--event_log_handler"),
        "env",
        "null",
        "refused",
        "a Python plugin registered on one machine, not job semantics",
    ),
    _f(("--role",), "env", "default", "covered", "role", read=_read_role, write=_write_if_set),
    _f(("-m", "--module"), "bool", False, "entrypoint", "TorchrunEntrypoint.module", write=_write_entrypoint_switch),
    _f(
        ("--no-python", "--no_python"),
        "bool",
        False,
        "entrypoint",
        "TorchrunEntrypoint.no_python",
        write=_write_entrypoint_switch,
    ),
    _f(
        ("--run-path", "--run_path"),
        "bool",
        False,
        "entrypoint",
        "TorchrunEntrypoint.run_path",
        write=_write_entrypoint_switch,
    ),
    _f(("--log-dir", "--log_dir"), "env", None, "launch", "a node-local path: launch(log_dir=)"),
    _f(
        ("-r", "--redirects"),
        "env",
        "0",
        "covered",
        "redirects (one value for all ranks; per-rank maps refused)",
        read=_read_std,
        write=_write_if_set,
    ),
    _f(
        ("-t", "--tee"),
        "env",
        "0",
        "covered",
        "tee (one value for all ranks; per-rank maps refused)",
        read=_read_std,
        write=_write_if_set,
    ),
    _f(
        ("--local-ranks-filter", "--local_ranks_filter"),
        "env",
        "",
        "covered",
        "local_ranks_filter",
        read=_read_ranks,
        write=_write_joined,
    ),
    _f(
        ("--duplicate-stdout-filters", "--duplicate_stdout_filters"),
        "env",
        [],
        "refused",
        "console formatting of one node",
        type=_comma_separated_list,
    ),
    _f(
        ("--duplicate-stderr-filters", "--duplicate_stderr_filters"),
        "env",
        [],
        "refused",
        "console formatting of one node",
        type=_comma_separated_list,
    ),
    _f(
        ("--node-rank", "--node_rank"),
        "env",
        0,
        "launch",
        "this node's rank, static backend only: launch(node_rank=); c10d assigns node ranks itself",
        type=int,
    ),
    _f(
        ("--master-addr", "--master_addr"),
        "env",
        LOOPBACK_HOST,
        "covered",
        "static backend without --rdzv-endpoint: rdzv_host; refused elsewhere (torchrun ignores it)",
    ),
    _f(
        ("--master-port", "--master_port"),
        "env",
        None,
        "covered",
        "static backend without --rdzv-endpoint: rdzv_port; refused elsewhere (torchrun ignores it)",
        type=int,
    ),
    _f(("--local-addr", "--local_addr"), "env", None, "launch", "this node's address: launch(local_addr=)"),
    _f(("--logs-specs", "--logs_specs"), "plain", None, "refused", "a Python plugin registered on one machine"),
    _f(
        ("--numa-binding", "--numa_binding"),
        "plain",
        None,
        "covered",
        "numa_binding",
        choices=NUMA_BINDING.names,
        read=_read_numa,
        write=_write_numa,
    ),
    _f(
        ("--signals-to-handle", "--signals_to_handle"),
        "env",
        DEFAULT_SIGNALS,
        "covered",
        "signals_to_handle",
        read=_read_signals,
        write=_write_joined,
    ),
    _f(
        ("--shutdown-timeout", "--shutdown_timeout"),
        "env",
        None,
        "covered",
        "shutdown_timeout (whole seconds)",
        type=int,
        read=_read_duration,
        write=_write_shutdown_timeout,
    ),
    _f(
        ("--virtual-local-rank", "--virtual_local_rank"),
        "bool",
        False,
        "covered",
        "virtual_local_rank",
        read=_read_switch,
        write=_write_switch,
    ),
)
#: Flags of later torchruns (not in 2.13's), accepted only where the installed torchrun has them.
NEWER_FLAGS: tuple[_Flag, ...] = (
    # torch 2.14: PET_LOG_LINE_PREFIX_TEMPLATE, then TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE (which torchrun 2.13
    # reads too, flag or not: `_convert` applies it).
    _f(
        ("--log-line-prefix-template", "--log_line_prefix_template"),
        "env",
        "",
        "covered",
        "log_line_prefix_template",
        read=_read_text,
        write=_write_if_set,
    ),
    # torch 2.14: prints a shell completion script and exits; nothing to launch.
    _f(
        ("--print-completion", "--print_completion"),
        "plain",
        None,
        "refused",
        "prints torchrun's shell completion script: run torchrun itself",
    ),
)
_KNOWN = (*FLAGS, *NEWER_FLAGS)
_BY_DEST = {f.dest: f for f in _KNOWN}
_BY_OPTION = {o: f for f in _KNOWN for o in f.options}


@dataclass(frozen=True)
class TorchrunSurface:
    """The flags one torch's torchrun accepts: what the drop-in accepts on that torch.

    ``elastic-idl torchrun`` reads it from the installed torch at run time (torch's own
    ``get_args_parser()``, in `elastic_idl._launch.agent`); the pure functions default to
    `TORCH_2_13`. A known flag the surface lacks is refused naming the version; a flag of
    the surface elastic-idl does not know is refused too, never dropped.

    Attributes:
        torch_version: The torch version the flags are of (``torch.__version__``).
        options: Every option string, both spellings (``--nproc-per-node``, ``--nproc_per_node``).
        switches: The option strings that take no value.
    """

    torch_version: str
    options: frozenset[str]
    switches: frozenset[str] = frozenset()

    def has(self, f: _Flag) -> bool:
        return any(o in self.options for o in f.options)

    def flags(self) -> tuple[_Flag, ...]:
        """The flags in effect: the known ones it has, then the ones elastic-idl does not know, refused."""
        unknown: dict[str, list[str]] = {}
        for o in sorted(self.options - set(_BY_OPTION) - {"-h", "--help"}):
            unknown.setdefault(o.lstrip("-").replace("_", "-"), []).append(o)
        extra = tuple(
            _f(
                tuple(sorted(spellings, key=lambda o: ("_" in o, o))),
                "plain",
                None,
                "refused",
                f"a flag of torch {self.torch_version}'s torchrun that this elastic-idl does not know",
            )
            for spellings in unknown.values()
        )
        return (*(f for f in _KNOWN if self.has(f)), *extra)


#: torchrun 2.13's surface (`FLAGS`): what the pure functions accept when given no other.
TORCH_2_13 = TorchrunSurface(
    "2.13",
    frozenset(o for f in FLAGS for o in f.options) | {"-h", "--help"},
    frozenset(o for f in FLAGS if f.kind == "bool" for o in f.options),
)


@dataclass(frozen=True)
class TorchrunEntrypoint:
    """What torchrun runs on each worker: the part of the command line that is not the task.

    Attributes:
        target: The training script's path, or the module name when ``module`` is set.
        args: The arguments after the script, passed to it unchanged.
        module: ``-m``: run ``target`` as ``python -m target``.
        no_python: ``--no-python``: execute ``target`` directly, not through python.
        run_path: ``--run-path``: run ``target`` with runpy in the worker's interpreter.
    """

    target: str
    args: tuple[str, ...] = ()
    module: bool = False
    no_python: bool = False
    run_path: bool = False


@dataclass(frozen=True)
class NodeSettings:
    """What a torchrun command line says about this node or this run only: not part of the task.

    ``elastic-idl torchrun`` passes them to the launcher (``launch(node_rank=, local_addr=,
    log_dir=)``), as ``--rdzv-endpoint`` is a launch-time override for ``elastic-idl run``.
    `from_torchrun` cannot put them in a task and refuses them.

    Attributes:
        node_rank: ``--node-rank`` of a ``static`` rendezvous (None: not given, 0).
        local_addr: ``--local-addr``, this node's address.
        log_dir: ``--log-dir``, where torch keeps this node's per-attempt logs.
    """

    node_rank: int | None = None
    local_addr: str | None = None
    log_dir: str | None = None

    def given(self) -> list[str]:
        """The flags set, in their dash spelling."""
        names = (
            ("node_rank", "--node-rank"),
            ("local_addr", "--local-addr"),
            ("log_dir", "--log-dir"),
        )
        return [flag for attr, flag in names if getattr(self, attr) is not None]


class _Parser(argparse.ArgumentParser):
    #: The torch version whose torchrun this parser is (set by `_parser`).
    torch_version = TORCH_2_13.torch_version

    def error(self, message: str) -> NoReturn:
        m = re.match(r"argument (\S+?)(?:/\S+)?: (.*)", message, re.S)
        if m:
            option = m.group(1)
            flag = _flag_name(_BY_OPTION[option]) if option in _BY_OPTION else option
            raise TorchrunUsageError(flag, m.group(2))
        m = re.match(r"unrecognized arguments: (\S+)", message)
        if m:
            raise TorchrunUsageError(
                m.group(1), f"{m.group(1)} is not a flag of torch {self.torch_version}'s torchrun ({message})"
            )
        m = re.match(r"ambiguous option: (\S+?)[ =]", message)
        if m:
            raise TorchrunUsageError(m.group(1), message)
        raise TorchrunUsageError("training_script" if "training_script" in message else "", message)


class _Help(argparse.Action):
    # torchrun prints its help and exits as soon as it meets -h; there is no task to build.
    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TorchrunUsageError("--help", "help was asked for; there is nothing to convert")


class _Written(argparse.Action):
    """argparse's store (or store_const, with ``const``) that also keeps the option's spelling as written."""

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option: str | None = None) -> None:
        setattr(namespace, self.dest, values if self.const is None else self.const)
        vars(namespace).setdefault(_SPELLINGS, {})[self.dest] = option or self.option_strings[0]


#: The namespace attribute that holds, per flag given, the option as written ("--nproc_per_node").
_SPELLINGS = "_spellings"


def _parser(surface: TorchrunSurface) -> _Parser:
    # torch's get_args_parser(), with every default replaced by _UNSET so we know what the
    # command line set; env fallbacks and defaults are applied afterwards, like torch's `env` action.
    p = _Parser(prog="torchrun", add_help=False, description="Torch Distributed Elastic Training Launcher")
    p.torch_version = surface.torch_version
    p.add_argument("-h", "--help", action=_Help, nargs=0)
    for f in surface.flags():
        if f.kind == "bool" or (f.kind == "plain" and set(f.options) <= surface.switches):
            p.add_argument(*f.options, action=_Written, nargs=0, const=True, default=_UNSET)
        else:
            p.add_argument(*f.options, action=_Written, type=f.type, default=_UNSET, choices=f.choices)
    p.add_argument("training_script", type=str)
    p.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return p


def _resolve(ns: argparse.Namespace, env: Mapping[str, str], surface: TorchrunSurface) -> dict[str, _Value]:
    """Each flag's value and where it came from: command line > PET_ env > torchrun's default.

    A known flag the surface lacks has its default, whatever the env says (that torch reads no
    PET_ variable for it).
    """
    out: dict[str, _Value] = {}
    for f in (*_KNOWN, *(f for f in surface.flags() if f.dest not in _BY_DEST)):
        if not surface.has(f):
            out[f.dest] = _Value(f.default, "default")
            continue
        given = getattr(ns, f.dest)
        var = f.env_var
        spelling = getattr(ns, _SPELLINGS, {}).get(f.dest, _flag_name(f))
        if f.kind == "bool":
            # torchrun reads these env vars with bool(int(...)) when it builds its parser: a bad
            # value crashes it at start-up even when the flag is on the command line.
            raw = env.get(var) if var else None
            env_value = False
            if raw is not None:
                try:
                    env_value = bool(int(raw))
                except ValueError:
                    raise TorchrunError(
                        _flag_name(f), f"{var}={raw!r} is not a boolean: torchrun reads it as an integer, 1 or 0"
                    ) from None
            if given is not _UNSET:
                out[f.dest] = _Value(True, "argv", spelling)
            elif raw is not None:
                out[f.dest] = _Value(env_value, "env", raw)
            else:
                out[f.dest] = _Value(False, "default")
        elif given is not _UNSET:
            out[f.dest] = _Value(given, "argv", spelling)
        elif var is not None and var in env:
            try:
                out[f.dest] = _Value(f.type(env[var]), "env", env[var])
            except ValueError:
                # torchrun's parser converts the env default with the flag's type: a usage error there.
                raise TorchrunUsageError(
                    _flag_name(f), f"{var}={env[var]!r} is not a valid {f.type.__name__} value"
                ) from None
        else:
            out[f.dest] = _Value(f.default, "default")
    return out


def _endpoint(text: str, backend: str, flag: str) -> tuple[str, int]:
    """torch's parse_rendezvous_endpoint: host[:port], [ipv6]:port; a missing port is the backend's default."""
    endpoint = text.strip()
    if endpoint[0] == "[" and endpoint[-1] == "]":
        host, rest = endpoint, []
    else:
        host, *rest = endpoint.rsplit(":", 1)
    if len(host) > 1 and host[0] == "[" and host[-1] == "]":
        host = host[1:-1]
    if rest:
        port_text = rest[0]
        if not re.match(r"^[0-9]{1,5}$", port_text) or int(port_text) >= 2**16:
            raise TorchrunError(flag, f"the port of {text!r} must be an integer between 0 and 65535")
        port = int(port_text)
    elif backend in DEFAULT_PORTS:
        port = DEFAULT_PORTS[backend]
    else:
        raise TorchrunError(flag, f"{text!r} has no port, and the {backend} backend has no default port")
    if not _HOST_RE.match(host):
        raise TorchrunError(flag, f"the host of {text!r} must be a hostname, an IPv4 or an IPv6 address")
    return host, port


def _rdzv_conf(text: str, flag: str) -> dict[str, str]:
    """torch's _parse_rendezvous_config (parse_rdzv_conf, strict), with errors naming the flag."""
    try:
        return parse_rdzv_conf(text, strict=True)
    except ValueError as exc:
        raise TorchrunError(flag, str(exc)) from None


def _refuse(f: _Flag, v: _Value, why: str) -> NoReturn:
    raise UnsupportedFlagError(_flag_name(f), f"{v.where(f)}: {why}")


def _check_argv(argv: Any, name: str) -> list[str]:
    """A list of strings, or a TypeError that says what to pass."""
    if isinstance(argv, (str, bytes)):
        raise TypeError(
            f"{name} must be a list of arguments, not a {type(argv).__name__}: "
            f"pass {name}={shlex_split_hint(argv)!r} (shlex.split() splits a command line as a shell would)"
        )
    if not isinstance(argv, Sequence):
        raise TypeError(f"{name} must be a list of strings, got {type(argv).__name__}")
    bad = [a for a in argv if not isinstance(a, str)]
    if bad:
        raise TypeError(f"{name} must hold strings only, got {bad[0]!r} ({type(bad[0]).__name__})")
    return list(argv)


def shlex_split_hint(text: str | bytes) -> list[str]:
    """How a command line given as one string should have been passed: split like a shell."""
    try:
        return shlex.split(text.decode() if isinstance(text, bytes) else text)
    except ValueError:
        return [text.decode() if isinstance(text, bytes) else text]


def from_torchrun(
    argv: Sequence[str], env: Mapping[str, str] | None = None, surface: TorchrunSurface = TORCH_2_13
) -> tuple[Task, TorchrunEntrypoint]:
    """Parse a torchrun command line into a task (kubeflow shape) and the entrypoint it runs.

    Args:
        argv: The arguments after ``torchrun`` (``sys.argv[1:]`` of torchrun), script and its
            args included, as a list of strings (``shlex.split`` a command line first).
        env: The environment torchrun would see, for the ``PET_<FLAG>`` fallbacks; None means
            empty (pure). Pass ``os.environ`` for drop-in behaviour.
        surface: The torchrun whose flags are accepted (default torch 2.13's).

    Returns:
        The task, validated, with worker replicas = max nodes as flytekit writes it, and the
        `TorchrunEntrypoint`.

    Raises:
        TypeError: ``argv`` is not a list of strings (a command line as one string, say),
            or ``env`` is not a mapping.
        UnsupportedFlagError: A flag (or PET_ variable, or value) the schema cannot hold:
            --logs-specs, --event-log-handler, --duplicate-std*-filters,
            --master-addr/--master-port or a non-zero --node-rank where torchrun ignores them,
            a per-rank -r/-t map, --nproc-per-node xpu or a custom device, an explicit
            --rdzv-backend/--rdzv-endpoint/--rdzv-id that --standalone would ignore; and the
            launch-time settings --log-dir, --local-addr, a static --node-rank (a task cannot
            hold them: ``elastic-idl torchrun`` and ``launch()`` take them, see `parse_torchrun`).
        TorchrunUsageError: The command line is one torchrun's own parser rejects (-h included).
        TorchrunError: The command line is not one torchrun accepts; names the flag.
        ValidationError: The task it describes breaks a rule (e.g. --nnodes 3:1).
    """
    task, entry, node, values = _convert(argv, env, surface)
    for flag in node.given():
        f = _BY_OPTION[flag]
        _refuse(
            f,
            values[f.dest],
            f"a launch-time setting of this node, which a task cannot hold ({f.note}); "
            "`elastic-idl torchrun` takes it, or pass it to elastic_idl.launch()",
        )
    return task, entry


def parse_torchrun(
    argv: Sequence[str], env: Mapping[str, str] | None = None, surface: TorchrunSurface = TORCH_2_13
) -> tuple[Task, TorchrunEntrypoint, NodeSettings]:
    """`from_torchrun`, plus the launch-time settings of this node instead of refusing them.

    What ``elastic-idl torchrun`` uses: ``--node-rank`` (static backend), ``--local-addr`` and
    ``--log-dir`` (and their ``PET_*`` variables) come back as `NodeSettings` for the
    launcher (and, where the torchrun of ``surface`` has it, ``--log-line-prefix-template``).
    Raises what `from_torchrun` raises, except for those.
    """
    task, entry, node, _ = _convert(argv, env, surface)
    return task, entry, node


def _convert(
    argv: Sequence[str], env: Mapping[str, str] | None, surface: TorchrunSurface
) -> tuple[Task, TorchrunEntrypoint, NodeSettings, dict[str, _Value]]:
    argv = _check_argv(argv, "argv")
    if env is not None and not isinstance(env, Mapping):
        raise TypeError(f"env must be a mapping of strings (os.environ, a dict) or None, got {type(env).__name__}")
    ns = _parser(surface).parse_args(list(argv))
    v = _resolve(ns, env or {}, surface)
    try:
        _refuse_unsupported(v, surface)
        config, backend, hi = _nodes_and_rendezvous(v)
        node = NodeSettings(
            node_rank=_node_rank(v["node_rank"], backend, hi),
            local_addr=v["local_addr"].value or None,  # "" means unset, as in torchrun
            log_dir=v["log_dir"].value or None,
        )
        reading = _Reading(config, backend)
        for f in _KNOWN:  # a flag the surface lacks has its default here, which no reader writes
            if f.read is not None:
                f.read(f, v[f.dest], reading)
        if not config.log_line_prefix_template:
            # torchrun (2.13 on): the flag or its PET_ variable (2.14 on), else this variable.
            config.log_line_prefix_template = (env or {}).get(LOG_LINE_PREFIX_TEMPLATE_ENV, "")
    except TorchrunError as exc:
        raise _naming_the_env(exc, v) from None
    task = task_of(config, None, None)
    found = violations(task)
    if found:
        raise TorchrunValidationError(found, [_flag_of(x.field, v, backend) for x in found])
    entry = TorchrunEntrypoint(
        target=ns.training_script,
        args=tuple(ns.training_script_args),
        module=v["module"].value,
        no_python=v["no_python"].value,
        run_path=v["run_path"].value,
    )
    return task, entry, node, v


def _naming_the_env(exc: TorchrunError, v: dict[str, _Value]) -> TorchrunError:
    """``exc``, saying which PET_ variable the flag's value came from when it came from one."""
    f = _BY_OPTION.get(exc.flag)
    if f is None or v[f.dest].source != "env" or f"{f.env_var}=" in exc.reason:
        return exc
    return type(exc)(exc.flag, f"{f.env_var}={v[f.dest].written!r}: {exc.reason}")


#: Task fields set by a flag of another name (every other ElasticConfig field is set by the flag of its name).
_FLAG_OF_FIELD = {
    "min_replicas": "nnodes",
    "max_replicas": "nnodes",
    "nproc_policy": "nproc_per_node",
    "rdzv_host": "rdzv_endpoint",
    "rdzv_port": "rdzv_endpoint",
    "rdzv_options": "rdzv_conf",
    **dict.fromkeys(RDZV_TYPED, "rdzv_conf"),
}


def _flag_of(field: str, v: dict[str, _Value], backend: str) -> str:
    """The flag (and value, as written) a violation's task field comes from: what the user can change."""
    top, _, rest = field.partition(".")
    name = re.split(r"[.\[]", rest, maxsplit=1)[0] if top == "elastic_config" else ""
    dest = "nnodes" if top == "worker_replicas" else _FLAG_OF_FIELD.get(name, name)
    if dest == "rdzv_endpoint" and backend == STATIC and not v[dest].value:
        dest = "master_addr" if name == "rdzv_host" else "master_port"  # torchrun's static endpoint
    if dest not in _BY_DEST:
        return "the command line"
    return v[dest].given(_BY_DEST[dest])


def _refuse_unsupported(v: dict[str, _Value], surface: TorchrunSurface) -> None:
    """Refuse every flag of status "refused" given a value, and --module with --no-python."""
    for f in (*_KNOWN, *surface.flags()):
        if f.status == "refused" and v[f.dest].value != f.default:
            _refuse(f, v[f.dest], f"not held by the schema ({f.note})")
    if v["module"].value and v["no_python"].value:
        raise TorchrunError(
            _flag_name(_BY_DEST["module"]), "--module and --no-python cannot be used together (torchrun refuses too)"
        )


def _nodes_and_rendezvous(v: dict[str, _Value]) -> tuple[ElasticConfig, str, int]:
    """The config with node counts and the rendezvous torchrun resolves; the backend and max nodes."""
    f = _BY_DEST["nnodes"]
    try:
        lo, hi, _ = parse_nnodes(v["nnodes"].value, _flag_name(f))
    except ValueError as exc:
        raise TorchrunError(_flag_name(f), str(exc).split(": ", 1)[1]) from None
    config = ElasticConfig(min_replicas=_int32(lo, "nnodes"), max_replicas=_int32(hi, "nnodes"))
    backend, host, port, rdzv_id = _rendezvous(v, hi)
    config.rdzv_backend, config.rdzv_host, config.rdzv_port, config.rdzv_id = backend, host, port, rdzv_id
    return config, backend, hi


def _node_rank(v: _Value, backend: str, nodes: int) -> int | None:
    """The node rank a static rendezvous needs; None for other backends (they assign it)."""
    f = _BY_DEST["node_rank"]
    if backend == STATIC:
        if not 0 <= v.value < nodes:
            raise TorchrunError(_flag_name(f), f"{v.where(f)} is not in 0..{nodes - 1} (--nnodes is {nodes})")
        return None if v.source == "default" else int(v.value)
    if v.value != 0:
        if v.source == "argv":
            _refuse(
                f,
                v,
                f"only the static backend uses a node rank; the {backend} rendezvous assigns node ranks itself "
                "(torchrun ignores it): drop it",
            )
        # An ambient PET_NODE_RANK (a non-elastic job's pod sets one): ignored, as torchrun does.
        _log.info("elastic-idl: %s ignored: the %s rendezvous assigns node ranks itself", v.where(f), backend)
    return None


def _int32(value: int, argument: str) -> int:
    if not INT32[0] <= value <= INT32[1]:
        raise TorchrunError(_flag_name(_BY_DEST[argument]), f"{value} does not fit the message (int32)")
    return value


def _rendezvous(v: dict[str, _Value], max_nodes: int) -> tuple[str, str, int, str]:
    """(backend, host, port, rdzv_id) as torchrun 2.13's run() resolves them."""
    names = ("rdzv_backend", "rdzv_endpoint", "rdzv_id")
    backend, endpoint, rdzv_id = (v[n].value for n in names)
    master_addr, master_port = v["master_addr"], v["master_port"]
    implicit = backend == STATIC and not endpoint and master_port.value is None and max_nodes == 1
    if v["standalone"].value or implicit:
        # torchrun: c10d on localhost:0 with a random id, ignoring any other rendezvous setting.
        # In the task: c10d, endpoint and id left to the runtime (a local launch: 127.0.0.1, a free port).
        why = "--standalone" if v["standalone"].value else "a one-node static rendezvous without --master-port"
        for n in names:
            harmless = (implicit and n != "rdzv_id") or (n == "rdzv_backend" and v[n].value == C10D)
            if v[n].source == "argv" and not harmless:
                _refuse(_BY_DEST[n], v[n], f"torchrun ignores it with {why} (a local c10d rendezvous); drop one")
        if master_addr.source == "argv" and master_addr.value != _BY_DEST["master_addr"].default:
            _refuse(_BY_DEST["master_addr"], master_addr, f"torchrun ignores it with {why}")
        return C10D, "", 0, ""
    if backend == STATIC and not endpoint:
        endpoint = f"{master_addr.value}:{DEFAULT_MASTER_PORT if master_port.value is None else master_port.value}"
        flag = "--master-addr"
    else:
        for n, default in (("master_addr", LOOPBACK_HOST), ("master_port", None)):
            if v[n].value != default:
                why = "an explicit --rdzv-endpoint" if backend == STATIC else f"the {backend} backend"
                _refuse(
                    _BY_DEST[n],
                    v[n],
                    f"only the static backend without --rdzv-endpoint uses it; torchrun ignores it with {why}",
                )
        flag = "--rdzv-endpoint"
    host, port = _endpoint(endpoint, backend, flag) if endpoint.strip() else ("", 0)
    return backend, host, port, "" if v["rdzv_id"].source == "default" else rdzv_id


def to_torchrun(
    task: Any,
    entrypoint: TorchrunEntrypoint | str,
    args: Sequence[str] = (),
    *,
    torch_version: str | None = None,
) -> list[str]:
    """Render the torchrun arguments (without ``torchrun`` itself) that launch ``task``'s elastic config.

    ``from_torchrun(to_torchrun(task, ep))`` gives back the same elastic config (an empty
    rdzv_backend comes back as "c10d", the same thing), and the same entrypoint, read with the
    surface of a torchrun that has every flag written: a log_line_prefix_template is written as
    ``--log-line-prefix-template``, torchrun 2.14's flag (torchrun 2.13 takes the template only
    from ``TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE``). Flags come in `FLAGS` order, then
    `NEWER_FLAGS` (torchrun's; each row's writer renders it), every one as ``--flag=value``
    or a bare switch; the launch settings are always explicit (nnodes, nproc, backend,
    max restarts), others only when set. A host left empty renders no ``--rdzv-endpoint``, so
    torchrun takes it from ``PET_RDZV_ENDPOINT`` in a pod. Only the elastic config is
    rendered: replica settings and the run policy are the job's, not torchrun's.

    Args:
        task: A valid task of either shape with an elastic config.
        entrypoint: A `TorchrunEntrypoint`, or the script path.
        args: The script's arguments, when ``entrypoint`` is a path.
        torch_version: The torch whose torchrun the command line is for (``"2.13.0"``): a field whose
            flag that torchrun lacks (2.14's ``--log-line-prefix-template`` before 2.14) is a
            TorchrunError naming the flag and the version, where that torchrun would refuse the
            command line. None (the default): every flag elastic-idl knows.

    Raises:
        ValidationError: The task breaks a rule, or has no elastic config.
        TorchrunError: The task holds something no torchrun command line can say (names the
            flag): a fractional rendezvous or shutdown timeout, a static backend without a
            host, a port without a host, a host torch would not parse, an rdzv option torch
            would parse differently; a failure-detection budget field (collective_timeout,
            nccl_*), which no torchrun flag says.
        TypeError: ``args`` is not a list of strings, or ``entrypoint`` is of another type.
    """
    task = view(task)  # converted once; the rules run once on the value
    found = violations(task)
    e = view(task).elastic
    if e is None:
        found.append(
            Violation(
                "elastic_config",
                "launch.elastic_required",
                "torchrun needs an elastic config: a limit of torchrun, not a validity rule",
            )
        )
    if found:
        raise ValidationError(found)
    assert e is not None  # checked above
    args = _check_argv(args, "args")
    if not isinstance(entrypoint, (TorchrunEntrypoint, str)):
        raise TypeError(f"entrypoint must be a TorchrunEntrypoint or a script path, got {type(entrypoint).__name__}")
    ep = entrypoint if isinstance(entrypoint, TorchrunEntrypoint) else TorchrunEntrypoint(entrypoint, tuple(args))
    if isinstance(entrypoint, TorchrunEntrypoint) and args:
        raise TypeError("pass the script's arguments in the TorchrunEntrypoint, not as args")

    unset = (None, 0)  # an unset Duration, an unspecified Toggle
    budget = elastic_values(e)
    for name in _NO_FLAG:
        if getattr(budget, name) not in unset:
            raise TorchrunError(
                name,
                "torchrun has no flag for the failure-detection budget; launch the task itself "
                "(elastic-idl run, the pod entrypoint) or leave it unset",
            )
    surface = None if torch_version is None else _surface_of(torch_version)
    writing = _Writing(e, ep, e.rdzv_backend or DEFAULT_RDZV_BACKEND)
    out: list[str] = []
    for f in _KNOWN:
        text = f.write(f, writing) if f.write is not None else None
        if text and surface is not None and not surface.has(f):
            hint = _OLDER_TORCH_HINTS.get(f.dest, f"leave {f.dest} unset")
            raise TorchrunError(
                _flag_name(f), f"not a flag of torch {surface.torch_version}'s torchrun, which would refuse it: {hint}"
            )
        if text is True:
            out.append(_flag_name(f))
        elif text:
            out.append(f"{_flag_name(f)}={text}")
    if not ep.target or ep.target.startswith("-"):
        raise TorchrunError("training_script", f"{ep.target!r}: torchrun would read it as a flag or miss it")
    # argparse (so torchrun) drops one "--" right after the script: double it to pass one through.
    escape = ["--"] if ep.args[:1] == ("--",) else []
    return [*out, ep.target, *escape, *ep.args]


#: The torch that added `NEWER_FLAGS` to torchrun (2.15 added none).
_NEWER_FLAGS_SINCE = (2, 14)


def _surface_of(torch_version: str) -> TorchrunSurface | None:
    """The torchrun flags of a torch version `to_torchrun` writes for: `TORCH_2_13` before 2.14, else None
    (every flag); TorchrunError for a version that is not one."""
    from elastic_idl._launch.spec import torch_version_tuple

    try:
        version = torch_version_tuple(torch_version)
    except (TypeError, ValueError):
        raise TorchrunError("torch_version", f"{torch_version!r} is not a torch version such as '2.13.0'") from None
    if version < _NEWER_FLAGS_SINCE:
        return dataclasses.replace(TORCH_2_13, torch_version=torch_version)
    return None


#: What to do instead when a torchrun lacks the flag of a field `to_torchrun` would write (``torch_version=``).
_OLDER_TORCH_HINTS = {
    "log_line_prefix_template": (
        "torchrun 2.13 takes the template from TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE in its environment; "
        "leave log_line_prefix_template unset and set that, or use torch 2.14+"
    ),
}


#: ElasticConfig fields no torchrun flag says (the failure-detection budget): `to_torchrun` refuses a task
#: that sets one, and a command line leaves them unset (the launcher's defaults apply).
_NO_FLAG = (*FAILURE_TIMEOUTS, *(name for name, _ in NCCL_ENV_FIELDS if name not in FAILURE_TIMEOUTS))


_HELP_SECTIONS = (
    ("covered", "Task settings (the task holds them; `from_torchrun` converts them)"),
    ("launch", "Launch-time settings of this node (not part of the task; passed to the launcher)"),
    ("entrypoint", "What runs"),
    ("refused", "Refused (the schema cannot hold them)"),
)


#: What the names of the drop-in's own options start with (no torchrun flag does).
DROP_IN_PREFIX = "--elastic-idl-"
#: The drop-in's option that writes the FailureReport JSON when the job fails.
DROP_IN_FAILURE_FILE = DROP_IN_PREFIX + "failure-file"
#: The drop-in's option that sets the task's collective_timeout (seconds; torchrun has no flag for it).
DROP_IN_COLLECTIVE_TIMEOUT = DROP_IN_PREFIX + "collective-timeout"


def torchrun_help(prog: str = "elastic-idl torchrun") -> str:
    """The help of the torchrun drop-in: every torchrun flag, and what becomes of it (from `FLAGS` and `NEWER_FLAGS`)."""
    lines = [
        f"usage: {prog} [{DROP_IN_FAILURE_FILE} PATH] [{DROP_IN_COLLECTIVE_TIMEOUT} SECONDS] [torchrun flags] SCRIPT "
        "[ARGS...]",
        f"       {prog} [{DROP_IN_FAILURE_FILE} PATH] [{DROP_IN_COLLECTIVE_TIMEOUT} SECONDS] [torchrun flags] -m MODULE "
        "[ARGS...]",
        "",
        "A drop-in for torchrun (torch 2.13 to 2.15): the same flags, spellings and PET_<FLAG> env",
        "fallbacks (the command line wins) as the installed torch's torchrun; a flag newer than it is",
        "refused naming its version. The command line becomes a task, which is validated and launched",
        "through elastic-idl's launcher. Everything after the script is the script's.",
        "",
        f"The drop-in's own options (named {DROP_IN_PREFIX}*, which no torchrun flag is; right after",
        "`torchrun`, before the torchrun flags):",
        f"  {DROP_IN_FAILURE_FILE + ' PATH':<34} when the job fails, write the FailureReport JSON here",
        f"  {DROP_IN_COLLECTIVE_TIMEOUT + ' SECONDS':<34} the task's collective_timeout (default 600): every process",
        f"  {'':<34} group without a timeout of its own gets it, and a worker stopped this",
        f"  {'':<34} long is ended",
    ]
    for status, title in _HELP_SECTIONS:
        lines += ["", f"{title}:"]
        for f in (*FLAGS, *NEWER_FLAGS):
            if f.status != status:
                continue
            names = ", ".join(o for o in f.options if not (o.startswith("--") and "_" in o))
            note = f.note if f in FLAGS else f"{f.note} (torchrun 2.14 on)"
            if f.options[0] == "--no-python":
                note += "; the drop-in runs Python only (use torchrun itself for other programs)"
            lines.append(f"  {names:<34} {note}")
        if status == "entrypoint":
            lines.append(f"  {'-h, --help':<34} this help")
    lines += [
        "",
        EXIT_CODES_TEXT,
        "Invalid input is a line torchrun accepts but the task cannot hold, or one that breaks a rule;",
        "usage is a line torchrun's own parser rejects.",
    ]
    return "\n".join(lines) + "\n"
