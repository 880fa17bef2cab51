"""Task (+ pod env) -> LaunchSpec, a typed, torch-free description of one node's launch.

Pure: the environment is an argument, never read here. The thin step that builds
torch's ``LaunchConfig`` lives in ``elastic_idl._launch.agent``, the one module that imports torch.
"""

from __future__ import annotations

import logging
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from elastic_idl._errors import TorchVersionError, ValidationError, Violation
from elastic_idl._task.enums import NPROC_POLICY, NUMA_BINDING, START_METHOD, STD_STREAMS
from elastic_idl._task.names import (
    CAS_BACKOFF_MAX,
    CAS_BACKOFF_MIN_TORCH,
    DEFAULT_COLLECTIVE_TIMEOUT_S,
    DEFAULT_LOCAL_HOST,
    DEFAULT_ROLE,
    DEFAULT_RUN_ID,
    DEFAULT_SIGNALS,
    DEFAULT_START_METHOD,
    ENV,
    LOG_LINE_PREFIX_MACROS,
    LOG_LINE_PREFIX_TEMPLATE,
    MAX_RDZV_NAME_LEN,
    is_rdzv_id_text,
    parse_rdzv_conf,
)
from elastic_idl._task.validate import RULES, check
from elastic_idl._task.view import ElasticValues, TaskView, of, rdzv_configs, values_of

__all__ = [
    "TORCH_VERSION_RULE",
    "EnvDecision",
    "LaunchSpec",
    "check_torch_support",
    "entrypoint_problem",
    "override_violations",
    "split_endpoint",
    "to_launch_spec",
    "torch_support_violations",
    "torch_version_tuple",
]

_log = logging.getLogger("elastic_idl")

#: The word that makes the next one a module name in what the workers run (``-m pkg.train``).
MODULE_FLAG = "-m"


def entrypoint_problem(words: Sequence[str]) -> str | None:
    """Why a command line of what the workers run can never start, or None: the one rule of
    ``elastic-idl run`` and ``render``, the pod entrypoint and `JobOptions`.

    ``words`` is a script and its arguments, or ``-m MODULE`` and its arguments (what
    ``python`` takes). The first word may not be empty, nor look like an option: python
    would read it as one of its own (a file of that name is ``./-name``).
    """
    if not words:
        return "nothing to run: give a script and its arguments, or -m MODULE"
    first = words[0]
    if first == MODULE_FLAG:
        if len(words) < 2:
            return "-m needs the module name after it"
        first = words[1]
        what = "the module name"
    else:
        what = "the script"
    if not first:
        return f"{what} is an empty string"
    if first.startswith("-"):
        return f"{what} {first!r} looks like an option: give the script first (a file of that name: ./{first})"
    return None


@dataclass(frozen=True)
class EnvDecision:
    """How one setting was resolved between the message and the pod env.

    Attributes:
        setting: LaunchSpec field name, e.g. "rdzv_endpoint".
        env_var: The env variable consulted, e.g. "PET_RDZV_ENDPOINT".
        message_value: What the message said ("" when it said nothing).
        env_value: What the env said.
        winner: "env" or "message".
    """

    setting: str
    env_var: str
    message_value: str
    env_value: str
    winner: str

    def __str__(self) -> str:
        if not self.message_value and self.winner == "env":  # nothing was overridden: say where it came from
            return f"{self.setting}: env wins ({self.env_var}={self.env_value!r}); the task sets none"
        used = self.env_value if self.winner == "env" else self.message_value
        lost = self.message_value if self.winner == "env" else self.env_value
        return (
            f"{self.setting}: {self.winner} wins ({self.env_var}={self.env_value!r}); using {used!r}, ignoring {lost!r}"
        )


@dataclass(frozen=True)
class LaunchSpec:
    """Every field torch's LaunchConfig needs, resolved, with no torch import.

    ``nproc_per_node`` is None when ``nproc_policy`` ("auto", "cpu", "gpu") must be
    resolved on the node; `to_launch_config` does that.
    """

    min_nodes: int
    max_nodes: int
    nproc_per_node: int | None
    nproc_policy: str | None
    run_id: str
    role: str
    rdzv_endpoint: str
    rdzv_backend: str
    rdzv_configs: Mapping[str, Any]
    max_restarts: int
    monitor_interval: float
    start_method: str
    redirects: str = "0"
    tee: str = "0"
    local_ranks_filter: tuple[int, ...] = ()
    numa_binding: str | None = None
    signals_to_handle: str = DEFAULT_SIGNALS
    shutdown_timeout: int | None = None
    virtual_local_rank: bool = False
    local_addr: str | None = None
    #: The prefix template of tee'd console lines (the task's log_line_prefix_template; None: torch's default).
    log_line_prefix_template: str | None = None
    #: The process-group timeout the workers get when their code gives none (seconds; the task's
    #: collective_timeout, else DEFAULT_COLLECTIVE_TIMEOUT_S). Not a LaunchConfig field: the launcher
    #: passes it to the workers (COLLECTIVE_TIMEOUT_ENV).
    collective_timeout: float = DEFAULT_COLLECTIVE_TIMEOUT_S
    #: The NCCL env vars the task sets (TORCH_NCCL_*), which the launcher exports to its workers.
    nccl_env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    decisions: tuple[EnvDecision, ...] = field(default=(), compare=False)

    def as_dict(self) -> dict[str, Any]:
        """The LaunchConfig-relevant fields as plain JSON-able values (for the CLI and vectors), and what the
        launcher gives its workers besides: the collective timeout (seconds) and the NCCL env."""
        return {
            "min_nodes": self.min_nodes,
            "max_nodes": self.max_nodes,
            "nproc_per_node": self.nproc_per_node if self.nproc_per_node is not None else self.nproc_policy,
            "run_id": self.run_id,
            "role": self.role,
            "rdzv_endpoint": self.rdzv_endpoint,
            "rdzv_backend": self.rdzv_backend,
            "rdzv_configs": dict(self.rdzv_configs),
            "max_restarts": self.max_restarts,
            "monitor_interval": self.monitor_interval,
            "start_method": self.start_method,
            "redirects": self.redirects,
            "tee": self.tee,
            "local_ranks_filter": list(self.local_ranks_filter),
            "numa_binding": self.numa_binding,
            "signals_to_handle": self.signals_to_handle,
            "shutdown_timeout": self.shutdown_timeout,
            "virtual_local_rank": self.virtual_local_rank,
            "local_addr": self.local_addr,
            "log_line_prefix_template": self.log_line_prefix_template,
            "collective_timeout": self.collective_timeout,
            "nccl_env": dict(self.nccl_env),
        }


#: Every field of LaunchSpec, in order.
LAUNCH_SPEC_FIELDS = tuple(f.name for f in fields(LaunchSpec))


def _launch_spec(values: dict[str, Any]) -> LaunchSpec:
    """A LaunchSpec from a new dict of every one of its fields, which it takes over.

    A frozen dataclass's own ``__init__`` sets its 21 fields one ``object.__setattr__`` at a
    time, and a call with 21 keywords builds the dict twice; this takes a dict literal as is.
    """
    assert len(values) == len(LAUNCH_SPEC_FIELDS), sorted(set(LAUNCH_SPEC_FIELDS) ^ set(values))
    spec = object.__new__(LaunchSpec)
    object.__setattr__(spec, "__dict__", values)
    return spec


def split_endpoint(text: str) -> tuple[str, int | None]:
    """ "host:port", "host", "[v6]:port" or "[v6]" -> (host without brackets, port or None).

    Raises:
        ValueError: The port is not a number of at most 5 digits, or a bracket is unclosed.
    """
    text = text.strip()
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(f"{text!r}: an IPv6 host is written [address]:port")
        port_text = rest[1:] if rest else None
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    else:
        host, port_text = text, None  # no port, or a bare IPv6 address
    if port_text is None:
        return host, None
    if not port_text.isdigit() or len(port_text) > 5:
        raise ValueError(f"the port of {text!r} is not a number in 0..65535")
    return host, int(port_text)


def _host_problem(host: str) -> str:
    if not host:
        return "the host is empty"
    if len(host) > MAX_RDZV_NAME_LEN or any(c.isspace() or c in ",/" for c in host):
        return f"bad host {host!r}: {RULES['elastic.rdzv_host.format']}"
    return ""


def override_violations(
    *,
    rdzv_endpoint: str | None = None,
    run_id: str | None = None,
    local_addr: str | None = None,
    start_method: str | None = None,
    names: Mapping[str, str] | None = None,
) -> list[Violation]:
    """Launch-time values (arguments, ``PET_*`` env) checked by the rules a task's own fields obey.

    An endpoint follows ``elastic.rdzv_host.format`` and ``elastic.rdzv_port.range`` (like
    ``rdzv_host``/``rdzv_port``), a run id ``elastic.rdzv_id.format`` (like ``rdzv_id``), a
    local address the host rule, a start method ``enum.known``. ``names`` maps an argument
    to the field name the violation carries (default: the argument's own name).
    """
    names = names or {}
    out: list[Violation] = []
    if rdzv_endpoint is not None:
        field_name = names.get("rdzv_endpoint", "rdzv_endpoint")
        try:
            host, port = split_endpoint(rdzv_endpoint)
        except ValueError as exc:
            out.append(Violation(field_name, "elastic.rdzv_port.range", str(exc)))
        else:
            problem = _host_problem(host)
            if problem:
                out.append(Violation(field_name, "elastic.rdzv_host.format", f"{rdzv_endpoint!r}: {problem}"))
            if port is not None and not 0 <= port <= 65535:
                out.append(
                    Violation(
                        field_name, "elastic.rdzv_port.range", f"{rdzv_endpoint!r}: port {port} is not in 0..65535"
                    )
                )
    if run_id is not None:
        if not run_id or len(run_id) > MAX_RDZV_NAME_LEN or not is_rdzv_id_text(run_id):
            out.append(
                Violation(
                    names.get("run_id", "run_id"),
                    "elastic.rdzv_id.format",
                    f"bad run id {run_id!r}: non-empty printable ASCII without spaces or ',', "
                    f"at most {MAX_RDZV_NAME_LEN} chars",
                )
            )
    if local_addr is not None:
        problem = _host_problem(local_addr)
        if problem:
            out.append(Violation(names.get("local_addr", "local_addr"), "elastic.rdzv_host.format", problem))
    if start_method is not None and start_method not in START_METHOD.number:
        out.append(
            Violation(
                names.get("start_method", "start_method"),
                "enum.known",
                f"{start_method!r} is not a start method: use {', '.join(sorted(START_METHOD.names))}",
            )
        )
    return out


_ELASTIC_REQUIRED = Violation(
    "elastic_config",
    "launch.elastic_required",
    "a launch (elastic-idl run, the pod entrypoint, ei.launch) needs an elastic config: a limit "
    "of launching, not a validity rule (validate accepts a task without one: a plain Master + Workers job)",
)


def _checked(
    t: TaskView, env: Mapping[str, str] | None, run_id: str | None, rdzv_endpoint: str | None, start_method: str | None
) -> ElasticValues:
    """The task's elastic config, once the task's rules and the launch-time values pass; else ValidationError."""
    rules = t.rule_violations(check)  # what violations(t) returns, without its conversion step
    values = values_of(t)
    found = list(rules)
    if values is None:
        found.append(_ELASTIC_REQUIRED)
    if env:
        found += override_violations(
            rdzv_endpoint=env.get(ENV.RDZV_ENDPOINT) or None,
            run_id=env.get(ENV.RDZV_ID) or None,
            names={"rdzv_endpoint": ENV.RDZV_ENDPOINT, "run_id": ENV.RDZV_ID},
        )
    if rdzv_endpoint is not None or run_id is not None or start_method is not None:
        found += override_violations(rdzv_endpoint=rdzv_endpoint, run_id=run_id, start_method=start_method)
    if found:
        raise ValidationError(found)
    assert values is not None  # for the type checker: checked above (no elastic config is a violation)
    return values


class _Decisions:
    """Settings resolved between the message and the pod env; each change is logged and recorded."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        self.made: list[EnvDecision] = []

    def add(self, d: EnvDecision) -> None:
        self.made.append(d)
        _log.info("elastic-idl: %s", d)

    def decide(self, setting: str, var: str, msg_value: str, env_wins: bool) -> str:
        env_value = self.env.get(var)
        if env_value is None or env_value == msg_value:
            return msg_value
        self.add(EnvDecision(setting, var, msg_value, env_value, "env" if env_wins else "message"))
        return env_value if env_wins else msg_value


def _message_wins(d: _Decisions, e: ElasticValues, backend: str, nproc_policy: str | None) -> None:
    """What to run: the message wins; a differing env value is recorded as ignored."""
    d.decide("rdzv_backend", ENV.RDZV_BACKEND, backend, env_wins=False)
    d.decide("nnodes", ENV.NNODES, f"{e.min_replicas}:{e.max_replicas}", env_wins=False)
    d.decide("nproc_per_node", ENV.NPROC_PER_NODE, nproc_policy or str(e.nproc_per_node), env_wins=False)
    d.decide("max_restarts", ENV.MAX_RESTARTS, str(e.max_restarts), env_wins=False)


def _env_configs(d: _Decisions, configs: dict[str, Any]) -> None:
    """Keys only in ``PET_RDZV_CONF`` are added; the message's own keys win."""
    try:
        env_conf = parse_rdzv_conf(d.env[ENV.RDZV_CONF])
    except ValueError as exc:
        raise ValidationError([Violation(ENV.RDZV_CONF, "env.rdzv_conf", str(exc))]) from exc
    for key, value in env_conf.items():
        if key in configs:
            if str(configs[key]) != value:
                d.add(EnvDecision(f"rdzv_configs.{key}", ENV.RDZV_CONF, str(configs[key]), value, "message"))
        else:
            configs[key] = value
            d.add(EnvDecision(f"rdzv_configs.{key}", ENV.RDZV_CONF, "", value, "env"))


def to_launch_spec(
    task: Any,
    *,
    env: Mapping[str, str] | None = None,
    run_id: str | None = None,
    rdzv_endpoint: str | None = None,
    start_method: str | None = None,
) -> LaunchSpec:
    """Map a valid elastic task (either shape, either binding) to a `LaunchSpec`.

    Args:
        task: The task: anything `elastic_idl.view` takes, converted once (a TaskView
            as is; its rules run once per value).
        env: The pod env (the operator's ``PET_*`` variables); None or {} outside a pod.
            Precedence, field by field (every time the env changes a value it is
            logged and recorded in ``LaunchSpec.decisions``):

            - rdzv_endpoint: ``rdzv_endpoint`` argument > ``PET_RDZV_ENDPOINT`` >
              message rdzv_host:rdzv_port > ``127.0.0.1:0`` (local). The env wins
              because the operator knows the service address.
            - run_id: ``run_id`` argument > ``PET_RDZV_ID`` > message rdzv_id > "none".
            - min/max nodes (``PET_NNODES``), nproc (``PET_NPROC_PER_NODE``),
              max_restarts (``PET_MAX_RESTARTS``), backend (``PET_RDZV_BACKEND``):
              the message wins; it is the contract the operator copied them from.
              A differing env value is logged as ignored.
            - rdzv_configs: the message's options win; keys only in ``PET_RDZV_CONF``
              are added (logged).
        run_id: Explicit run id (the Flyte execution id in a pod).
        rdzv_endpoint: Explicit endpoint "host:port", beats everything.
        start_method: Explicit torch start method, beats the message.

    Launch-time values obey the rules of the task fields they stand in for (see
    `override_violations`): the ``rdzv_endpoint`` and ``run_id`` arguments, and
    ``PET_RDZV_ENDPOINT`` / ``PET_RDZV_ID`` from ``env`` (violations name the variable).

    Raises:
        ValidationError: The task breaks a rule, or has no elastic config, or a launch-time
            value breaks the rule of its field.
    """
    t = of(task)
    e = _checked(t, env, run_id, rdzv_endpoint, start_method)
    d = _Decisions(env) if env else None

    # Where to meet: the env wins (then the arguments).
    endpoint = ""
    if e.rdzv_host or e.rdzv_port:
        endpoint = f"{e.rdzv_host or DEFAULT_LOCAL_HOST}:{e.rdzv_port}"
    rid = e.rdzv_id
    if d is not None:
        endpoint = d.decide("rdzv_endpoint", ENV.RDZV_ENDPOINT, endpoint, env_wins=True)
        rid = d.decide("run_id", ENV.RDZV_ID, rid, env_wins=True)
    if rdzv_endpoint is not None:
        endpoint = rdzv_endpoint
    endpoint = endpoint or f"{DEFAULT_LOCAL_HOST}:0"
    if run_id is not None:
        rid = run_id
    rid = rid or DEFAULT_RUN_ID

    backend = e.effective_backend()
    nproc_policy = NPROC_POLICY.text.get(e.nproc_policy)
    configs = rdzv_configs(e)
    if d is not None:
        _message_wins(d, e, backend, nproc_policy)
        if ENV.RDZV_CONF in d.env:
            _env_configs(d, configs)

    shutdown = e.shutdown_timeout
    return _launch_spec(
        {
            "min_nodes": e.min_replicas,
            "max_nodes": e.max_replicas,
            "nproc_per_node": None if nproc_policy else e.nproc_per_node,
            "nproc_policy": nproc_policy,
            "run_id": rid,
            "role": e.role or DEFAULT_ROLE,
            "rdzv_endpoint": endpoint,
            "rdzv_backend": backend,
            "rdzv_configs": MappingProxyType(configs),
            "max_restarts": e.max_restarts,
            "monitor_interval": e.monitor_interval_s(),
            "start_method": start_method or START_METHOD.text.get(e.start_method) or DEFAULT_START_METHOD,
            "redirects": STD_STREAMS.text[e.redirects],
            "tee": STD_STREAMS.text[e.tee],
            "local_ranks_filter": e.local_ranks_filter,
            "numa_binding": NUMA_BINDING.text.get(e.numa_binding),
            "signals_to_handle": ",".join(e.signals_to_handle) if e.signals_to_handle else DEFAULT_SIGNALS,
            "shutdown_timeout": None if shutdown is None else int(shutdown.seconds),
            "virtual_local_rank": e.virtual_local_rank,
            "local_addr": None,
            "log_line_prefix_template": e.log_line_prefix_template or None,
            "collective_timeout": e.collective_timeout_s(),
            "nccl_env": MappingProxyType(e.nccl_env()),
            "decisions": tuple(d.made) if d is not None else (),
        }
    )


#: The rule of a task field the installed torch cannot apply: checked by the launcher only (validation and
#: rendering accept the field on every torch), so it is not one of `elastic_idl.RULES`.
TORCH_VERSION_RULE = "launch.torch_version"


def torch_version_tuple(version: str) -> tuple[int, int]:
    """(major, minor) of a torch version string: ``"2.15.0+cu130"`` -> (2, 15).

    Raises:
        ValueError: The text does not start with two dot-separated numbers.
    """
    m = re.match(r"(\d+)\.(\d+)", version)
    if m is None:
        raise ValueError(f"{version!r} is not a torch version")
    return int(m[1]), int(m[2])


def _template_macros(template: str) -> list[str]:
    """The macros a log-line prefix template names, as torch's string.Template reads it ($x and ${x}; not $$x)."""
    out: list[str] = []
    for m in string.Template.pattern.finditer(template):
        name = m.group("named") or m.group("braced")
        if name is not None:
            out.append(name)
    return out


def torch_support_violations(spec: LaunchSpec, torch_version: str) -> list[Violation]:
    """What of ``spec`` a torch of ``torch_version`` cannot apply (rule `TORCH_VERSION_RULE`); [] when nothing.

    - log_line_prefix_template: torch 2.13's agent applies the template (LaunchConfig has it) with
      ${role_name}, ${rank} and ${local_rank}; ${hostname} arrived in 2.14, and 2.13 would print it as
      written. A template naming a macro newer than the torch is refused; one without is applied anywhere.
    - cas_backoff_max_seconds: torch before 2.15 ignores the rendezvous option; a value above 0 is refused
      there (0 is what an older torch does anyway: no delay).
    """
    have = torch_version_tuple(torch_version)
    shown = ".".join(map(str, have))
    out: list[Violation] = []
    template = spec.log_line_prefix_template
    if template:
        newer = [
            m for m in _template_macros(template) if m in LOG_LINE_PREFIX_MACROS and LOG_LINE_PREFIX_MACROS[m] > have
        ]
        for macro in dict.fromkeys(newer):
            since = ".".join(map(str, LOG_LINE_PREFIX_MACROS[macro]))
            out.append(
                Violation(
                    f"elastic_config.{LOG_LINE_PREFIX_TEMPLATE}",
                    TORCH_VERSION_RULE,
                    f"the macro ${{{macro}}} needs torch {since} or newer; the installed torch {torch_version} "
                    f"({shown}) would print it as written: drop it, or launch on torch {since}+",
                )
            )
    cas = spec.rdzv_configs.get(CAS_BACKOFF_MAX)
    if cas is not None and have < CAS_BACKOFF_MIN_TORCH and _positive(cas):
        since = ".".join(map(str, CAS_BACKOFF_MIN_TORCH))
        out.append(
            Violation(
                f"elastic_config.{CAS_BACKOFF_MAX}",
                TORCH_VERSION_RULE,
                f"{cas} s needs torch {since} or newer; the installed torch {torch_version} ignores the rendezvous "
                f"option (no delay): leave it unset (or 0), or launch on torch {since}+",
            )
        )
    return out


def _positive(value: Any) -> bool:
    """Whether a rendezvous option value (a number, or text from PET_RDZV_CONF) is a number above 0."""
    try:
        return float(value) > 0
    except (TypeError, ValueError):
        return True  # not a number: torch 2.15 would refuse it, an older torch ignores it; refused here too


def check_torch_support(spec: LaunchSpec, torch_version: str) -> None:
    """Raise `TorchVersionError` when a torch of ``torch_version`` cannot apply a field of ``spec``."""
    found = torch_support_violations(spec, torch_version)
    if found:
        raise TorchVersionError(torch_version, found)
