"""The names and numbers every side shares, each written once: field and option names, backends,
ports, hosts, signals, limits, defaults, env variable names, task types.

Stdlib only (no protobuf): the worker bootstrap imports it in every spawned worker.
"""

from __future__ import annotations

import signal
from collections.abc import Iterable
from typing import Final

__all__ = [
    "AGENT_SIGNALS",
    "C10D",
    "CAS_BACKOFF_MAX",
    "CAS_BACKOFF_MIN_TORCH",
    "CLOSE_TIMEOUT",
    "COLLECTIVE_TIMEOUT",
    "COLLECTIVE_TIMEOUT_ENV",
    "DEFAULT_COLLECTIVE_TIMEOUT_S",
    "DEFAULT_JOIN_TIMEOUT_S",
    "DEFAULT_LOCAL_HOST",
    "DEFAULT_MASTER_PORT",
    "DEFAULT_MONITOR_INTERVAL_S",
    "DEFAULT_NCCL_HEARTBEAT_TIMEOUT_S",
    "DEFAULT_PORTS",
    "DEFAULT_RDZV_BACKEND",
    "DEFAULT_READ_TIMEOUT_S",
    "DEFAULT_ROLE",
    "DEFAULT_RUN_ID",
    "DEFAULT_SHUTDOWN_TIMEOUT_S",
    "DEFAULT_SIGNALS",
    "DEFAULT_START_METHOD",
    "DURATION_FIELDS",
    "DYNAMIC_BACKENDS",
    "ENV",
    "FAILURE_TIMEOUTS",
    "INT32",
    "INT32_MAX",
    "JOIN_TIMEOUT",
    "KNOWN_BACKENDS",
    "LAST_CALL_TIMEOUT",
    "LOG_LINE_PREFIX_MACROS",
    "LOG_LINE_PREFIX_TEMPLATE",
    "LOG_LINE_PREFIX_TEMPLATE_ENV",
    "LOOPBACK_HOST",
    "MAX_DURATION_S",
    "MAX_FAILURE_TIMEOUT_S",
    "MAX_MONITOR_INTERVAL_S",
    "MAX_RDZV_NAME_LEN",
    "NCCL_ENV",
    "NCCL_ENV_FIELDS",
    "NCCL_HEARTBEAT_TIMEOUT",
    "NON_NEGATIVE_DURATIONS",
    "OPERATOR_ENV",
    "PET_PREFIX",
    "RDZV_TIMEOUTS",
    "RDZV_TYPED",
    "READ_TIMEOUT",
    "SHUTDOWN_TIMEOUT",
    "SIGNAL_NAMES",
    "STANDALONE_TASK_TYPE",
    "STATIC",
    "TASK_ENV",
    "TASK_TYPE",
    "TASK_TYPE_VERSION",
    "TASK_TYPE_VERSION_ENV",
    "TOGGLE_ENV_VALUES",
    "TORCH_SIGNALS",
    "WHOLE_SECONDS",
    "bind_host",
    "format_rdzv_conf",
    "is_loopback",
    "is_rdzv_id_text",
    "parse_rdzv_conf",
]

# --------------------------------------------------------------------------- ElasticConfig duration fields

#: The rendezvous timeouts with a typed ElasticConfig field; the same names are torch's
#: rendezvous option keys (``rdzv_configs``, ``--rdzv-conf``, ``PET_RDZV_CONF``), so they
#: may not be given as free-form options.
JOIN_TIMEOUT: Final = "join_timeout"
LAST_CALL_TIMEOUT: Final = "last_call_timeout"
CLOSE_TIMEOUT: Final = "close_timeout"
READ_TIMEOUT: Final = "read_timeout"
RDZV_TIMEOUTS = (JOIN_TIMEOUT, LAST_CALL_TIMEOUT, CLOSE_TIMEOUT, READ_TIMEOUT)
SHUTDOWN_TIMEOUT: Final = "shutdown_timeout"
#: The failure-detection budget's Durations (ElasticConfig fields 119, 120).
COLLECTIVE_TIMEOUT: Final = "collective_timeout"
NCCL_HEARTBEAT_TIMEOUT: Final = "nccl_heartbeat_timeout"
#: torch 2.15's rendezvous option (ElasticConfig field 124, a Duration of the same name): the upper bound
#: of the random delay after a failed compare-and-set of the rendezvous state; torch reads a float >= 0.
CAS_BACKOFF_MAX: Final = "cas_backoff_max_seconds"
#: Every typed ElasticConfig field whose name is a rendezvous option key: rendered into the rendezvous
#: options (``rdzv_configs``, ``--rdzv-conf``, ``PET_RDZV_CONF``) and refused as a free-form option.
RDZV_TYPED = (*RDZV_TIMEOUTS, CAS_BACKOFF_MAX)
#: The durations torch reads as whole seconds (``int()``).
WHOLE_SECONDS = (*RDZV_TIMEOUTS, SHUTDOWN_TIMEOUT, NCCL_HEARTBEAT_TIMEOUT)
#: The durations for which 0 is a value (torch's own default, "no delay"): rule elastic.duration.non_negative
#: instead of elastic.duration.positive.
NON_NEGATIVE_DURATIONS = (CAS_BACKOFF_MAX,)
#: Every Duration field of ElasticConfig, in field order.
DURATION_FIELDS = (
    "monitor_interval",
    *RDZV_TIMEOUTS,
    SHUTDOWN_TIMEOUT,
    COLLECTIVE_TIMEOUT,
    NCCL_HEARTBEAT_TIMEOUT,
    CAS_BACKOFF_MAX,
)
#: ElasticConfig field 123: the template of the prefix of each tee'd console line (torch's string.Template).
LOG_LINE_PREFIX_TEMPLATE: Final = "log_line_prefix_template"
#: The macros torch substitutes in the template, and the torch version that added each (2.13: the floor).
LOG_LINE_PREFIX_MACROS = {"role_name": (2, 13), "rank": (2, 13), "local_rank": (2, 13), "hostname": (2, 14)}
#: The env var torchrun (2.13 on) reads the template from when neither its flag nor PET_LOG_LINE_PREFIX_TEMPLATE
#: (torch 2.14 on) gives one.
LOG_LINE_PREFIX_TEMPLATE_ENV: Final = "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"
#: The first torch that reads cas_backoff_max_seconds (an older one ignores the option: the launcher refuses
#: a task that sets it above 0 there).
CAS_BACKOFF_MIN_TORCH = (2, 15)
#: The failure-detection timeouts with an upper bound (rule elastic.failure_timeout.max).
FAILURE_TIMEOUTS = (COLLECTIVE_TIMEOUT, NCCL_HEARTBEAT_TIMEOUT)

# --------------------------------------------------------------------------- rendezvous backends and ports

C10D = "c10d"
STATIC = "static"
#: What an empty ElasticConfig.rdzv_backend means. Upstream flytekit always writes
#: "c10d" and the Kubeflow operator assumes it when rdzvBackend is unset, so an
#: empty backend is c10d everywhere in elastic-idl (never torch's "etcd" default).
DEFAULT_RDZV_BACKEND = C10D
#: Rendezvous backends torch 2.13 ships ("" means c10d, see DEFAULT_RDZV_BACKEND).
KNOWN_BACKENDS = (C10D, "etcd", "etcd-v2", STATIC)
#: Backends built on torch's dynamic rendezvous: they read ``join_timeout`` and ignore ``timeout``.
DYNAMIC_BACKENDS = (C10D, "etcd-v2")
#: Port torch's rendezvous backends use when the endpoint has none (c10d; the etcd ones).
DEFAULT_PORTS = {C10D: 29400, "etcd": 2379, "etcd-v2": 2379}
#: torchrun's --master-port when neither the flag nor PET_MASTER_PORT gives one.
DEFAULT_MASTER_PORT = 29500

# --------------------------------------------------------------------------- hosts


#: The loopback address a local launch binds to and meets on.
LOOPBACK_HOST = "127.0.0.1"
#: Host of a local launch when neither the message nor the env names one: loopback only.
DEFAULT_LOCAL_HOST = LOOPBACK_HOST


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine's loopback interface."""
    import ipaddress  # not at import time: workers import this module and never call this

    host = host.strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    # An IPv4-mapped IPv6 address of 127.0.0.0/8 is loopback too (Python 3.11's is_loopback says no).
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


def bind_host(host: str) -> str:
    """The address to bind a socket to for ``host``: "localhost" is the loopback address, brackets go."""
    return LOOPBACK_HOST if host == "localhost" else host.strip("[]")


# --------------------------------------------------------------------------- signals

#: The signals torch's agent forwards to workers by default (``--signals-to-handle``).
TORCH_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT")
#: `TORCH_SIGNALS` as torch writes the default: one comma-separated string.
DEFAULT_SIGNALS = ",".join(TORCH_SIGNALS)
#: Signals the agent may have installed a handler for (torch's list and the common extras).
AGENT_SIGNALS = (*TORCH_SIGNALS, "SIGUSR1", "SIGUSR2")
#: Every signal name this platform knows (what ``signals_to_handle`` may hold).
SIGNAL_NAMES = frozenset(s.name for s in signal.Signals)

# --------------------------------------------------------------------------- limits

#: The largest int32 (the message's integer fields).
INT32_MAX = 2**31 - 1
#: The int32 range, (min, max).
INT32 = (-INT32_MAX - 1, INT32_MAX)
#: The largest google.protobuf.Duration (10,000 years); larger ones have no JSON form.
MAX_DURATION_S = 315_576_000_000
#: The longest monitor_interval, in seconds.
MAX_MONITOR_INTERVAL_S = 3600
#: The longest collective_timeout and nccl_heartbeat_timeout, in seconds (24 h).
MAX_FAILURE_TIMEOUT_S = 86400
#: The longest rendezvous id or host (a DNS name's limit).
MAX_RDZV_NAME_LEN = 253


def is_rdzv_id_text(text: str) -> bool:
    """Printable ASCII without spaces or ',' (the characters of a rendezvous id; length not checked)."""
    return text.isascii() and text.isprintable() and " " not in text and "," not in text


# --------------------------------------------------------------------------- defaults of a launch

#: Agent health-check interval when the message leaves it unset (torch's own default).
DEFAULT_MONITOR_INTERVAL_S = 0.1
#: torch start method used when the message leaves it unset. See docs/guide/launching.md, "Start methods".
DEFAULT_START_METHOD = "forkserver"
#: Role when the message leaves it unset (torchrun's default; LaunchConfig's is "default_role").
DEFAULT_ROLE = "default"
#: run_id when nothing names one. torchrun uses "none"; a single local node may use anything.
DEFAULT_RUN_ID = "none"
#: torch's own default when neither the message nor TORCH_ELASTIC_SHUTDOWN_TIMEOUT says (seconds).
DEFAULT_SHUTDOWN_TIMEOUT_S = 30
#: torch's c10d defaults (seconds), used in messages when the config leaves them unset.
DEFAULT_JOIN_TIMEOUT_S = 600
DEFAULT_READ_TIMEOUT_S = 60
#: The process-group timeout when the message leaves collective_timeout unset (seconds): 10 min
#: (torch's own default is 30 min for gloo, 10 min for NCCL).
DEFAULT_COLLECTIVE_TIMEOUT_S = 600
#: torch 2.13's TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC when nothing sets it (seconds): what an unset
#: nccl_heartbeat_timeout means (the env var is then left out).
DEFAULT_NCCL_HEARTBEAT_TIMEOUT_S = 480

# --------------------------------------------------------------------------- rdzv conf text


def parse_rdzv_conf(text: str, *, strict: bool = False) -> dict[str, str]:
    """Parse "k=v,k=v" (torchrun --rdzv-conf / PET_RDZV_CONF) into a dict of strings; the last key wins.

    Keys and values are stripped. ``strict`` applies torchrun's own rules (torch's
    ``_parse_rendezvous_config``): no empty item and no empty value; otherwise empty
    items are skipped and an empty value is kept.

    Raises:
        ValueError: An item is not ``key=value``.
    """
    out: dict[str, str] = {}
    text = text.strip()
    if not text:
        return out
    for item in text.split(","):
        if not item.strip() and not strict:
            continue
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not key or not sep:
            raise ValueError(f"rdzv conf item {item!r} is not key=value")
        if strict and not value:
            raise ValueError(f"the rendezvous option {key!r} has no value")
        out[key] = value
    return out


def format_rdzv_conf(items: Iterable[tuple[str, object]]) -> str:
    """(key, value) pairs as "k=v,k=v", the text `parse_rdzv_conf` reads."""
    return ",".join(f"{key}={value}" for key, value in items)


# --------------------------------------------------------------------------- env variables

#: Prefix of torchrun's env fallbacks: ``PET_<DEST>`` (e.g. PET_NPROC_PER_NODE).
PET_PREFIX = "PET_"


class ENV:
    """Names of the environment variables the Kubeflow operator injects (REFERENCE §4)."""

    RDZV_ENDPOINT = "PET_RDZV_ENDPOINT"
    RDZV_BACKEND = "PET_RDZV_BACKEND"
    RDZV_ID = "PET_RDZV_ID"
    RDZV_CONF = "PET_RDZV_CONF"
    NNODES = "PET_NNODES"
    NPROC_PER_NODE = "PET_NPROC_PER_NODE"
    MAX_RESTARTS = "PET_MAX_RESTARTS"
    STANDALONE = "PET_STANDALONE"
    PYTHONUNBUFFERED = "PYTHONUNBUFFERED"


class OPERATOR_ENV:
    """Env names the operator injects that the launch spec does not read (see also ENV)."""

    PYTHONUNBUFFERED = ENV.PYTHONUNBUFFERED
    MASTER_ADDR = "MASTER_ADDR"
    MASTER_PORT = "MASTER_PORT"
    PET_MASTER_ADDR = "PET_MASTER_ADDR"
    PET_MASTER_PORT = "PET_MASTER_PORT"
    WORLD_SIZE = "WORLD_SIZE"
    RANK = "RANK"
    PET_NODE_RANK = "PET_NODE_RANK"


class NCCL_ENV:
    """The NCCL env vars of the failure-detection budget (ElasticConfig fields 120-122), read by torch."""

    HEARTBEAT_TIMEOUT = "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"
    ASYNC_ERROR_HANDLING = "TORCH_NCCL_ASYNC_ERROR_HANDLING"
    ENABLE_MONITORING = "TORCH_NCCL_ENABLE_MONITORING"


#: ElasticConfig field -> the NCCL env var it is exported as, in field order.
NCCL_ENV_FIELDS = (
    (NCCL_HEARTBEAT_TIMEOUT, NCCL_ENV.HEARTBEAT_TIMEOUT),
    ("nccl_async_error_handling", NCCL_ENV.ASYNC_ERROR_HANDLING),
    ("nccl_enable_monitoring", NCCL_ENV.ENABLE_MONITORING),
)
#: Toggle enum number -> the env value it exports (TOGGLE_ON, TOGGLE_OFF; unspecified exports nothing).
TOGGLE_ENV_VALUES = {1: "1", 2: "0"}
#: Env var the launcher sets in every worker: the task's collective_timeout in seconds (the worker
#: bootstrap gives it to every process group created without a timeout of its own).
COLLECTIVE_TIMEOUT_ENV = "ELASTIC_IDL_COLLECTIVE_TIMEOUT_S"

#: Env var of the rendered container that carries the task: its custom dict as compact JSON.
TASK_ENV = "ELASTIC_IDL_TASK"
#: Env var of the rendered container that carries the task_type_version (0 or 1).
TASK_TYPE_VERSION_ENV = "ELASTIC_IDL_TASK_TYPE_VERSION"

# --------------------------------------------------------------------------- task types

#: Task type of a multi-node elastic task: the backend turns it into a PyTorchJob.
TASK_TYPE = "pytorch"
#: Task type of a single-node elastic task: a plain pod, no Kubeflow operator (as flytekit does).
STANDALONE_TASK_TYPE = "python-task"
#: task_type_version flytekit 1.16 writes for both task types (the kubeflow task shape).
TASK_TYPE_VERSION = 1
