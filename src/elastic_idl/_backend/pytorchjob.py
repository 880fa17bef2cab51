"""Backend side: task -> Kubeflow ``PyTorchJob`` (kubeflow.org/v1). Pure.

`render_pytorchjob` does what flytepropeller's pytorch plugin does
(``flyteplugins/go/tasks/plugins/k8s/kfoperators/pytorch``), plus the fields
that plugin leaves out (``spec.nprocPerNode``, rdzv host/port/id/conf).
The env the training operator injects into the job's pods is
`elastic_idl._backend.operator.pod_env`.

Every Kubernetes key is a constant below, defined once; env var names live in
`elastic_idl._task.names` (``ENV``, ``OPERATOR_ENV``, ``TASK_ENV``).
"""

from __future__ import annotations

import dataclasses
import json
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, overload

from google.protobuf.message import Message

from elastic_idl._errors import (
    RenderError,
    SkewWarning,
    ValidationError,
    Violation,
    brief,
    deprecated,
    reject_unknown_keywords,
)
from elastic_idl._launch.spec import entrypoint_problem
from elastic_idl._task.codec import from_custom, lone_surrogate
from elastic_idl._task.encoding import to_custom
from elastic_idl._task.enums import CLEAN_POD_POLICY, K8S_RESOURCE, NPROC_POLICY, RESTART_POLICY
from elastic_idl._task.messages import TASK_CLASSES, Resources, task_class
from elastic_idl._task.names import ENV, NCCL_ENV_FIELDS, OPERATOR_ENV, TASK_ENV, TASK_TYPE_VERSION_ENV
from elastic_idl._task.resources import quantity_problems
from elastic_idl._task.validate import check
from elastic_idl._task.view import ElasticValues, Replica, TaskView, message_of, of, rdzv_configs, values_of
from elastic_idl.plugins.kubeflow.v1 import common_pb2

__all__ = [
    "CONTAINER_NAME",
    "DEFAULT_NPROC",
    "DEFAULT_PORT",
    "ELASTIC_WORKER_RESTART_POLICIES",
    "MASTER",
    "POD_ENTRYPOINT",
    "PORT_NAME",
    "RENDER_MODES",
    "RESERVED_ENV",
    "STRICT",
    "UPSTREAM",
    "UPSTREAM_TOLERATED_RULES",
    "WORKER",
    "JobOptions",
    "K",
    "render_pytorchjob",
    "replica_name",
    "tolerated_in_upstream_mode",
    "worker_restart_policy",
]


class K:
    """Kubernetes / PyTorchJob keys, defined once."""

    API_VERSION = "apiVersion"
    KIND = "kind"
    METADATA = "metadata"
    NAME = "name"
    NAMESPACE = "namespace"
    LABELS = "labels"
    ANNOTATIONS = "annotations"
    SPEC = "spec"
    # spec
    ELASTIC_POLICY = "elasticPolicy"
    NPROC_PER_NODE = "nprocPerNode"
    REPLICA_SPECS = "pytorchReplicaSpecs"
    RUN_POLICY = "runPolicy"
    # spec.elasticPolicy
    MIN_REPLICAS = "minReplicas"
    MAX_REPLICAS = "maxReplicas"
    RDZV_BACKEND = "rdzvBackend"
    RDZV_HOST = "rdzvHost"
    RDZV_PORT = "rdzvPort"
    RDZV_ID = "rdzvId"
    MAX_RESTARTS = "maxRestarts"
    RDZV_CONF = "rdzvConf"
    KEY = "key"
    VALUE = "value"
    STANDALONE = "standalone"  # read only to refuse it: never rendered
    DEPRECATED_NPROC = "nProcPerNode"  # rendered in the upstream mode only (see _job_spec)
    # spec.runPolicy
    CLEAN_POD_POLICY = "cleanPodPolicy"
    TTL_SECONDS = "ttlSecondsAfterFinished"
    ACTIVE_DEADLINE_SECONDS = "activeDeadlineSeconds"
    BACKOFF_LIMIT = "backoffLimit"
    # replica spec
    REPLICAS = "replicas"
    RESTART_POLICY = "restartPolicy"
    TEMPLATE = "template"
    CONTAINERS = "containers"
    # container
    IMAGE = "image"
    COMMAND = "command"
    ARGS = "args"
    ENV = "env"
    PORTS = "ports"
    CONTAINER_PORT = "containerPort"
    RESOURCES = "resources"
    REQUESTS = "requests"
    LIMITS = "limits"


#: apiVersion and kind of the object.
API_VERSION = "kubeflow.org/v1"
KIND = "PyTorchJob"
#: Replica types (keys of spec.pytorchReplicaSpecs).
MASTER = "Master"
WORKER = "Worker"
#: The operator finds the training container by this name (PytorchJobDefaultContainerName).
CONTAINER_NAME = "pytorch"
#: The operator reads the port by this name (PytorchJobDefaultPortName) and its default number.
PORT_NAME = "pytorchjob-port"
DEFAULT_PORT = 23456
#: What the operator defaults an absent spec.nprocPerNode to.
DEFAULT_NPROC = "auto"

#: Render modes (``JobOptions.mode``). ``strict``: what this project renders by its own rules (the default).
#: ``upstream``: Flyte 1.x's pytorch plugin where its behaviour is defensible (docs/guide/rendering.md,
#: the table of differences): a Master without replicas is 1, a non-elastic task without
#: workers is a Master-only job, an elastic worker count other than 0 or max_replicas is kept, the
#: process count goes to ``elasticPolicy.nProcPerNode`` (and then never to ``spec.nprocPerNode``: the
#: operator's webhook refuses both), an empty ``rdzvBackend`` stays "". Extension fields render in both.
STRICT = "strict"
UPSTREAM = "upstream"
RENDER_MODES: tuple[str, ...] = (STRICT, UPSTREAM)

#: Rules whose violations the upstream mode renders anyway, because Flyte 1.x's plugin renders such a
#: task and the operator accepts the job: ``replicas.master_count`` only for a Master of 0 replicas (read
#: as 1) or of an elastic task (whose Master is not rendered); a count above 1 stays an error (the
#: webhook requires 1). Validation itself (``ei.validate``, ``elastic-idl validate``) still reports them.
UPSTREAM_TOLERATED_RULES: frozenset[str] = frozenset(
    {"replicas.workers_required", "replicas.worker_matches_max", "replicas.master_count"}
)

#: Container command that runs the pod entrypoint (``python -m elastic_idl.pod``).
POD_ENTRYPOINT: tuple[str, ...] = ("python", "-m", "elastic_idl.pod")

#: task message class -> its task_type_version.


#: What an elastic task's Worker gets when its restart policy is the enum's zero value (NEVER, which
#: the wire cannot tell from unset). The operator (v1.9) recreates a pod that exits >= 128 (killed by
#: a signal, OOM-killed, deleted, or the pod entrypoint's 200: its rendezvous store host is gone) and
#: fails the job on any other non-zero exit. Under Never any pod loss, even a drain, fails the job;
#: under OnFailure a deterministic error restarts forever unless backoffLimit is set. The figures:
#: bench/README.md, "Chaos".
ELASTIC_WORKER_RESTART_POLICY = "ExitCode"
#: What ``JobOptions.elastic_worker_restart_policy`` may be: ExitCode (the default, above) or Never
#: (upstream's zero value, for whoever wants a pod loss to end the job).
ELASTIC_WORKER_RESTART_POLICIES: tuple[str, ...] = (ELASTIC_WORKER_RESTART_POLICY, "Never")
#: What an elastic Worker that would get ExitCode gets instead when the task states a budget
#: (``run_policy.backoff_limit``): the operator counts no ExitCode re-creation against backoffLimit
#: (its pods run with the pod policy Never, so their restart count stays 0), and the budget would be
#: lost; under OnFailure the kubelet restarts the container in place and the operator fails the job
#: once the restarts reach backoffLimit, whatever ended the container (issue 30 item 6).
BUDGETED_ELASTIC_WORKER_RESTART_POLICY = "OnFailure"


@dataclass(frozen=True, kw_only=True)
class JobOptions:
    """What `render_pytorchjob` needs beyond the task: the job's name, image and what its pods run.

    A plain record: the values are checked when the job is rendered (a RenderError names
    the option), so ``JobOptions(**mapping)`` takes any mapping of these names.

    Attributes:
        name: Job name: a DNS-1035 label, short enough that ``<name>-worker-<N-1>``
            (the operator's pod and Service names) has at most 63 characters.
        image: The task's container image; a replica spec's image wins over it.
        namespace: Kubernetes namespace (a DNS-1123 label).
        entrypoint: What the pod entrypoint launches: a script path (or a module
            with ``pod_args=["--module"]``) and its arguments, e.g.
            ``["train.py", "--epochs", "3"]``. Required unless ``args`` is given.
        pod_args: Flags of the pod entrypoint itself, before ``--`` (see
            ``python -m elastic_idl.pod --help``), e.g. ``["--module"]``.
        command: Container command; default ``["python", "-m", "elastic_idl.pod"]``.
        args: Container args; default ``[*pod_args, "--", *entrypoint]``.
        resources: Task-level Kubernetes resources ``{"requests": {...}, "limits": {...}}``,
            used by every replica whose spec sets none.
        labels: Labels of the job and of every pod template.
        annotations: Annotations of the job and of every pod template.
        env: Extra container env (names the operator or renderer sets are refused).
        mode: ``"strict"`` (default) or ``"upstream"``: see `STRICT`, `UPSTREAM`.
        elastic_worker_restart_policy: What an elastic task's Worker gets when the task leaves its
            restart policy at the enum's zero value: ``"ExitCode"`` (default, in every mode) or
            ``"Never"`` (upstream's).
        network_policy: Also render a NetworkPolicy beside the job (`render_objects`,
            ``elastic-idl render --network-policy``); `render_pytorchjob` ignores it.
    """

    name: str
    image: str
    namespace: str = "default"
    entrypoint: Sequence[str] | None = None
    pod_args: Sequence[str] | None = None
    command: Sequence[str] | None = None
    args: Sequence[str] | None = None
    resources: Mapping[str, Any] | None = None
    labels: Mapping[str, str] | None = None
    annotations: Mapping[str, str] | None = None
    env: Mapping[str, str] | None = None
    mode: str = STRICT
    elastic_worker_restart_policy: str = ELASTIC_WORKER_RESTART_POLICY
    network_policy: bool = False


reject_unknown_keywords(JobOptions)


#: Env names a caller may not set on the container: the operator or the renderer owns them.
RESERVED_ENV = frozenset(
    {
        ENV.RDZV_ENDPOINT,
        ENV.RDZV_BACKEND,
        ENV.RDZV_ID,
        ENV.RDZV_CONF,
        ENV.NNODES,
        ENV.NPROC_PER_NODE,
        ENV.MAX_RESTARTS,
        ENV.STANDALONE,
        OPERATOR_ENV.MASTER_ADDR,
        OPERATOR_ENV.MASTER_PORT,
        OPERATOR_ENV.PET_MASTER_ADDR,
        OPERATOR_ENV.PET_MASTER_PORT,
        OPERATOR_ENV.WORLD_SIZE,
        OPERATOR_ENV.RANK,
        OPERATOR_ENV.PET_NODE_RANK,
        TASK_ENV,
        TASK_TYPE_VERSION_ENV,
    }
)


#: Kubernetes name limits. The operator names pods and their (headless) Services
#: ``<job>-<type>-<index>``; a Service name is a DNS-1035 label, so that must fit too.
MAX_NAME_LEN = 63
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")


# --------------------------------------------------------------------------- checks of options


def replica_name(job_name: str, replica_type: str, index: int) -> str:
    """The operator's name for pod ``index`` of a replica type (also its Service and host name)."""
    return f"{job_name}-{replica_type.lower()}-{index}"


def _check_name(name: Any, replica_counts: Mapping[str, int]) -> None:
    if not isinstance(name, str) or not name:
        raise RenderError("name", "the job name is required (a DNS-1035 label)")
    if len(name) > MAX_NAME_LEN or not _DNS1035.match(name):
        raise RenderError(
            "name",
            f"{name!r} is not a DNS-1035 label (the operator's webhook requires one): "
            f"at most {MAX_NAME_LEN} characters, lower-case letters, digits and '-', "
            "starting with a letter and ending with a letter or digit",
        )
    for rtype, count in replica_counts.items():
        longest = replica_name(name, rtype, max(count - 1, 0))
        if len(longest) > MAX_NAME_LEN:
            raise RenderError(
                "name",
                f"{name!r} is too long: the operator names pods and Services {longest!r}, "
                f"which exceeds {MAX_NAME_LEN} characters (use at most "
                f"{MAX_NAME_LEN - len(longest) + len(name)} characters)",
            )


def _check_namespace(namespace: Any) -> None:
    if not isinstance(namespace, str) or len(namespace) > MAX_NAME_LEN or not _DNS1123_LABEL.match(namespace):
        raise RenderError("namespace", f"{namespace!r} is not a DNS-1123 label (at most {MAX_NAME_LEN} characters)")


_WHITESPACE = re.compile(r"\s")


def _no_text(value: Any) -> str | None:
    """The first str in an option value (a str, list items, mapping keys and values) that is no
    text: it holds a lone surrogate (JSON's ``"\\ud800"``, an undecodable byte of an env var), which
    has no UTF-8 form; None when there is none. Other types are left to the option's own check."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if lone_surrogate(item) is not None:
                return item
        elif isinstance(item, Mapping):
            stack.extend(reversed([x for pair in item.items() for x in pair]))
        elif isinstance(item, (list, tuple)):
            stack.extend(reversed(item))
    return None


def _check_option_text(options: JobOptions) -> None:
    """Refuse an option holding a str that is no text, naming the option (the str cannot be written)."""
    for f in dataclasses.fields(options):
        found = _no_text(getattr(options, f.name))
        if found is not None:
            at = lone_surrogate(found) or 0
            raise RenderError(
                f.name, f"holds a lone surrogate (U+{ord(found[at]):04X}), which is no text (not UTF-8): {brief(found)}"
            )


def _check_image(field: str, image: Any) -> None:
    if not isinstance(image, str) or not image:
        raise RenderError(field, "a container image is required")
    if _WHITESPACE.search(image):
        raise RenderError(field, f"{image!r} is not an image reference (no whitespace)")


def _qualified_key(field: str, key: Any) -> None:
    if not isinstance(key, str) or not key:
        raise RenderError(field, f"key {key!r} must be a non-empty string")
    prefix, sep, name = key.rpartition("/")
    if sep and (len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        raise RenderError(f"{field}.{key}", f"prefix {prefix!r} is not a DNS-1123 subdomain")
    if len(name) > 63 or not _QUALIFIED_NAME.match(name):
        raise RenderError(
            f"{field}.{key}",
            "name part must be at most 63 characters of letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit",
        )


def _sorted_keys(field: str, mapping: Mapping[Any, Any]) -> list[str]:
    """The keys in order; a key that is not a string is a RenderError (not sorted() raising TypeError)."""
    for key in mapping:
        if not isinstance(key, str):
            raise RenderError(field, f"keys must be strings, got {type(key).__name__} {key!r}")
    return sorted(mapping)


def _labels(field: str, labels: Mapping[str, str] | None, *, is_label: bool) -> dict[str, str]:
    if labels is None:
        return {}
    if not isinstance(labels, Mapping):
        raise RenderError(field, f"expected a mapping of strings, got {type(labels).__name__}")
    out: dict[str, str] = {}
    for key in _sorted_keys(field, labels):
        _qualified_key(field, key)
        value = labels[key]
        if not isinstance(value, str):
            raise RenderError(f"{field}.{key}", f"value must be a string, got {type(value).__name__}")
        if is_label and (len(value) > 63 or not _LABEL_VALUE.match(value)):
            raise RenderError(f"{field}.{key}", f"{value!r} is not a valid label value (at most 63 characters)")
        out[key] = value
    return out


def _strings(field: str, value: Sequence[str] | None) -> list[str] | None:
    if value is None:
        return None
    if type(value) not in (list, tuple) and (isinstance(value, (str, bytes)) or not isinstance(value, Sequence)):
        raise RenderError(field, "expected a list of strings")  # (the exact types first: the ABC check is slow)
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise RenderError(f"{field}[{i}]", f"expected a string, got {type(item).__name__}")
    return list(value)


def _user_env(env: Mapping[str, str] | None) -> list[dict[str, str]]:
    if env is None:
        return []
    if not isinstance(env, Mapping):
        raise RenderError("env", f"expected a mapping of strings, got {type(env).__name__}")
    out = []
    for key in _sorted_keys("env", env):
        if not _ENV_NAME.match(key):
            raise RenderError(f"env.{key}", "not a valid environment variable name")
        if key in RESERVED_ENV:
            raise RenderError(f"env.{key}", "is set by the operator or the renderer; it cannot be given")
        value = env[key]
        if not isinstance(value, str):
            raise RenderError(f"env.{key}", f"value must be a string, got {type(value).__name__}")
        out.append({K.NAME: key, K.VALUE: value})
    return out


def _k8s_resources(field: str, res: Mapping[str, Any] | None) -> dict[str, dict[str, str]]:
    """Normalise a Kubernetes ``resources`` mapping (the ``resources`` option)."""
    if res is None:
        return {}
    if not isinstance(res, Mapping):
        raise RenderError(field, f"expected {{'requests': {{...}}, 'limits': {{...}}}}, got {type(res).__name__}")
    out: dict[str, dict[str, str]] = {}
    for kind in (K.REQUESTS, K.LIMITS):
        entries = res.get(kind)
        if entries is None:
            continue
        if not isinstance(entries, Mapping):
            raise RenderError(f"{field}.{kind}", "expected a mapping of resource name to quantity")
        block: dict[str, str] = {}
        for name in _sorted_keys(f"{field}.{kind}", entries):
            _qualified_key(f"{field}.{kind}", name)  # a resource name is a qualified name
            qty = entries[name]
            # A number is written as str() writes it, as Elastic(requests=...) does; the parser then checks it.
            if isinstance(qty, bool) or not isinstance(qty, (str, int, float)) or str(qty) == "":
                raise RenderError(f"{field}.{kind}.{name}", f"expected a quantity such as '2' or '4Gi', got {qty!r}")
            block[str(name)] = str(qty)
        if block:
            out[kind] = block
    unknown = [key for key in _sorted_keys(field, res) if key not in (K.REQUESTS, K.LIMITS)]
    if unknown:
        raise RenderError(f"{field}.{unknown[0]}", "only 'requests' and 'limits' are allowed")
    requests, limits = (list(out.get(kind, {}).items()) for kind in (K.REQUESTS, K.LIMITS))
    problems = quantity_problems(requests, limits)
    if problems:
        kind, index, message = problems[0]
        name = (requests if kind == K.REQUESTS else limits)[index][0]
        raise RenderError(f"{field}.{kind}.{name}", message)
    return out


def _replica_resources(res: Resources, path: str) -> dict[str, dict[str, str]]:
    """A replica's task resources as Kubernetes resources; STORAGE is dropped with a SkewWarning.

    ``storage`` is no container resource: the API server refuses a pod that names it (the job is
    accepted and its pods are never created). Upstream's plugin drops it too.
    """
    out: dict[str, dict[str, str]] = {}
    for kind in (K.REQUESTS, K.LIMITS):
        entries: dict[str, str] = {}
        for i, e in enumerate(getattr(res, kind)):
            if e.name == Resources.STORAGE:
                _warn_skew(f"{path}.{kind}[{i}]", STORAGE_DROPPED)
                continue
            entries[K8S_RESOURCE.text[e.name]] = e.value
        if entries:
            out[kind] = dict(sorted(entries.items()))
    return out


#: Why a task resource STORAGE is not rendered (the SkewWarning's text after the field).
STORAGE_DROPPED = (
    "STORAGE is not a container resource (the API server refuses a pod that requests it); "
    "dropped, as upstream's plugin drops it"
)


def _warn_skew(field: str, reason: str) -> None:
    warnings.warn(SkewWarning(f"{field}: {reason}", fields=(field,)), stacklevel=4)


# --------------------------------------------------------------------------- render


def _task_for_render(task: Any, task_type_version: int | None) -> TaskView:
    """The task as one TaskView of the declared shape, converted once; or a typed error.

    A custom dict is decoded as ``task_type_version`` says (required then); a message or a view
    is converted once (`of`) and, when a version is declared, must
    be of that shape.
    """
    if task_type_version is not None:
        task_class(task_type_version)  # UnsupportedVersionError for anything but 0 / 1, before any other check
    if type(task) is TaskView and task_type_version in (None, task.task_type_version):
        return task  # the common case, before the slower checks below
    if isinstance(task, Mapping):
        if task_type_version is None:
            raise RenderError(
                "task_type_version",
                "a TaskTemplate.custom dict needs the template's task_type_version (0 legacy, 1 kubeflow)",
            )
        # The backend's input: TaskTemplate.custom; DecodeError names the field. Forward compatible:
        # a newer SDK's field is left out with a SkewWarning naming it (from_custom).
        return of(from_custom(task, task_type_version=task_type_version))
    if isinstance(task, (bytes, bytearray, memoryview, str)):
        raise RenderError(
            "task", "expected a task message, a TaskView or a custom dict; decode with ei.view(data) first"
        )
    try:
        t = of(task)
    except TypeError as exc:
        if task_type_version is None or not isinstance(task, Message):
            raise RenderError("task", str(exc)) from None
        got = f"a message ({task.DESCRIPTOR.full_name})"
    else:
        if task_type_version is None or t.task_type_version == task_type_version:
            return t
        got = f"a task_type_version {t.task_type_version} task ({message_of(t).DESCRIPTOR.full_name})"
    raise RenderError(
        "task_type_version",
        f"declared {task_type_version} ({TASK_CLASSES[task_type_version].DESCRIPTOR.full_name}) but got "
        f"{got}; the backend would read it as the declared shape and lose fields (flyteplugins#359)",
    )


def tolerated_in_upstream_mode(v: Violation, t: TaskView) -> bool:
    """Whether the upstream render mode renders task ``t`` despite violation ``v`` (`UPSTREAM_TOLERATED_RULES`)."""
    if v.rule not in UPSTREAM_TOLERATED_RULES:
        return False
    if v.rule == "replicas.master_count":
        return t.elastic is not None or (t.master is not None and t.master.replicas == 0)
    return True


def _check_rules(t: TaskView, mode: str) -> None:
    """ValidationError listing every violation, less those the upstream mode renders anyway."""
    found: Sequence[Violation] = t.rule_violations(check)
    if found and mode == UPSTREAM:
        found = [v for v in found if not tolerated_in_upstream_mode(v, t)]
    if found:
        raise ValidationError(list(found))


def _check_mode(options: JobOptions) -> tuple[str, str]:
    """The checked ``mode`` and ``elastic_worker_restart_policy`` options."""
    if options.mode not in RENDER_MODES:
        raise RenderError("mode", f"{options.mode!r} is not one of {', '.join(RENDER_MODES)}")
    policy = options.elastic_worker_restart_policy
    if policy not in ELASTIC_WORKER_RESTART_POLICIES:
        raise RenderError(
            "elastic_worker_restart_policy", f"{policy!r} is not one of {', '.join(ELASTIC_WORKER_RESTART_POLICIES)}"
        )
    if not isinstance(options.network_policy, bool):
        raise RenderError("network_policy", f"expected true or false, got {options.network_policy!r}")
    return options.mode, policy


def _replica_counts(t: TaskView, mode: str = STRICT) -> dict[str, int]:
    """Pods per replica type: Workers only for an elastic task, else one Master and the Workers.

    The upstream mode keeps an elastic task's worker count when it is set (strict: max_replicas),
    and renders a non-elastic task without workers as a Master-only job.
    """
    workers = t.worker_count()
    if mode == UPSTREAM:
        if t.elastic is not None and t.worker.replicas > 0:
            workers = t.worker.replicas
        elif t.elastic is None and workers == 0:
            return {MASTER: 1}
    if workers <= 0:
        # Upstream: "number of workers must be greater than 0"; the webhook agrees.
        raise RenderError(t.worker.replicas_path, f"a non-elastic job needs at least 1 worker, got {workers}")
    return {WORKER: workers} if t.elastic is not None else {MASTER: 1, WORKER: workers}


class _Container(NamedTuple):
    """The container every replica runs (a replica's own image and resources replace the task's)."""

    image: str
    command: list[str]
    args: list[str]
    env: list[dict[str, str]]
    port: int
    resources: dict[str, dict[str, str]]
    labels: dict[str, str]
    annotations: dict[str, str]


def _command_and_args(options: JobOptions) -> tuple[list[str], list[str]]:
    """Container command and args: the pod entrypoint with ``[*pod_args, "--", *entrypoint]`` unless given."""
    cmd = _strings("command", options.command)
    arg_list = _strings("args", options.args)
    entry = _strings("entrypoint", options.entrypoint)
    flags = _strings("pod_args", options.pod_args) or []
    if "--" in flags:
        raise RenderError("pod_args", "'--' separates the pod flags from the entrypoint; it cannot be a flag")
    if arg_list is None:
        if cmd is None and not entry:
            raise RenderError("entrypoint", "what the pod runs is required (a script or module and its args)")
        problem = entrypoint_problem(entry) if cmd is None and entry is not None else None
        if problem is not None:  # the pod entrypoint would refuse it: the job could never start
            raise RenderError("entrypoint", problem)
        arg_list = [*flags, "--", *entry] if entry else flags
    elif entry or flags:
        raise RenderError("entrypoint" if entry else "pod_args", "give either entrypoint/pod_args or args, not both")
    return (list(POD_ENTRYPOINT) if cmd is None else cmd), arg_list


#: The task's custom dict as the compact, key-sorted JSON of its env var (one encoder: ``json.dumps``
#: with options builds a new one per call; the dict is the renderer's own, new and acyclic).
_compact_json = json.JSONEncoder(sort_keys=True, separators=(",", ":"), check_circular=False).encode


def _container(t: TaskView, custom: dict[str, Any], options: JobOptions) -> _Container:
    """The checked options as one container, carrying the task (``custom``) in its env."""
    _check_image("image", options.image)
    command, args = _command_and_args(options)
    labels = _labels("labels", options.labels, is_label=True)
    annotations = _labels("annotations", options.annotations, is_label=False)
    resources = _k8s_resources("resources", options.resources)
    user_env = _user_env(options.env)
    values = values_of(t)
    nccl = {} if values is None else values.nccl_env()
    for item in user_env:
        if item[K.NAME] in nccl:
            field = next(f for f, name in NCCL_ENV_FIELDS if name == item[K.NAME])
            raise RenderError(
                f"env.{item[K.NAME]}", f"is set by the task's elastic_config.{field}; give it there, not in env"
            )
    env = [
        {K.NAME: TASK_ENV, K.VALUE: _compact_json(custom)},
        {K.NAME: TASK_TYPE_VERSION_ENV, K.VALUE: str(t.task_type_version)},
        *({K.NAME: name, K.VALUE: value} for name, value in nccl.items()),
        *user_env,
    ]
    port = int(values.rdzv_port) if values is not None and values.rdzv_port else DEFAULT_PORT
    return _Container(options.image, command, args, env, port, resources, labels, annotations)


def _nproc(e: ElasticValues) -> str:
    return NPROC_POLICY.text.get(e.nproc_policy) or str(e.nproc_per_node)


def _elastic_policy(e: ElasticValues, mode: str) -> dict[str, Any]:
    policy: dict[str, Any] = {
        K.MIN_REPLICAS: int(e.min_replicas),
        K.MAX_REPLICAS: int(e.max_replicas),
        # Upstream copies the backend as written: "" stays "" (the operator then injects PET_RDZV_BACKEND="").
        K.RDZV_BACKEND: e.rdzv_backend if mode == UPSTREAM else e.effective_backend(),
    }
    if mode == UPSTREAM and not e.nproc_policy:
        policy[K.DEPRECATED_NPROC] = int(e.nproc_per_node)
    if e.rdzv_host:
        policy[K.RDZV_HOST] = e.rdzv_host
    if e.rdzv_port:
        policy[K.RDZV_PORT] = int(e.rdzv_port)
    if e.rdzv_id:
        policy[K.RDZV_ID] = e.rdzv_id
    policy[K.MAX_RESTARTS] = int(e.max_restarts)
    conf = rdzv_configs(e)
    if conf:
        policy[K.RDZV_CONF] = [{K.KEY: key, K.VALUE: str(value)} for key, value in conf.items()]
    return policy


#: The cleanPodPolicy of a job whose Worker is OnFailure by its budget (`elastic_worker_default`) when
#: the task's is the enum's zero value (None, which the wire cannot tell from unset): under None the
#: operator leaves a failed job's pods running, and the kubelet would restart their containers
#: forever (OnFailure); Running deletes those still running when the job ends, and keeps the others.
BUDGETED_CLEAN_POD_POLICY = "Running"


def _run_policy(t: TaskView, budgeted: bool = False) -> dict[str, Any]:
    rp = t.run_policy
    if rp is None:
        # Upstream always sends a RunPolicy struct, empty when the task has none (the
        # operator then defaults cleanPodPolicy to None); the SDK models require the key.
        return {}
    clean = CLEAN_POD_POLICY.text[rp.clean_pod_policy]
    if budgeted and rp.clean_pod_policy == 0:
        clean = BUDGETED_CLEAN_POD_POLICY
    out: dict[str, Any] = {K.CLEAN_POD_POLICY: clean}
    # Zero means "unset" in the message (proto3), so it is left out like upstream's ParseRunPolicy.
    if rp.ttl_seconds_after_finished:
        out[K.TTL_SECONDS] = int(rp.ttl_seconds_after_finished)
    if rp.active_deadline_seconds:
        out[K.ACTIVE_DEADLINE_SECONDS] = int(rp.active_deadline_seconds)
    if rp.backoff_limit:
        out[K.BACKOFF_LIMIT] = int(rp.backoff_limit)
    return out


def _restart_policy(replica: Replica | None, elastic_worker: bool, elastic_restart: str) -> str:
    """A replica's ``restartPolicy``: its own, with the enum's zero value (NEVER) read as ``elastic_restart``
    for an elastic task's Worker (`ELASTIC_WORKER_RESTART_POLICY`)."""
    restart = replica.restart_policy if replica is not None else common_pb2.RESTART_POLICY_NEVER
    if elastic_worker and restart == common_pb2.RESTART_POLICY_NEVER:
        return elastic_restart
    return RESTART_POLICY.text[restart]


def elastic_worker_default(task: TaskView, elastic_restart: str) -> str:
    """The policy an elastic Worker that leaves its own unset gets: ``elastic_restart`` (the
    `JobOptions.elastic_worker_restart_policy` in effect), or OnFailure when that is ExitCode and the
    task states ``run_policy.backoff_limit`` (`BUDGETED_ELASTIC_WORKER_RESTART_POLICY`)."""
    budget = task.run_policy.backoff_limit if task.run_policy is not None else 0
    if elastic_restart == ELASTIC_WORKER_RESTART_POLICY and budget > 0:
        return BUDGETED_ELASTIC_WORKER_RESTART_POLICY
    return elastic_restart


def _budgeted(task: TaskView, elastic_restart: str) -> bool:
    """Whether the Worker's OnFailure comes from the task's backoff_limit (`elastic_worker_default`)."""
    worker = task.worker if task.worker.spec_path else None
    unset = worker is None or worker.restart_policy == common_pb2.RESTART_POLICY_NEVER
    return (
        task.elastic is not None
        and unset
        and elastic_worker_default(task, elastic_restart) == BUDGETED_ELASTIC_WORKER_RESTART_POLICY
    )


def worker_restart_policy(task: TaskView, elastic_restart: str = ELASTIC_WORKER_RESTART_POLICY) -> str:
    """The ``restartPolicy`` the renderer writes for the task's Worker replicas (``elastic_restart``: the
    `JobOptions.elastic_worker_restart_policy` in effect; the legacy shape has no replica settings)."""
    worker = task.worker if task.worker.spec_path else None
    return _restart_policy(worker, task.elastic is not None, elastic_worker_default(task, elastic_restart))


def _replica_spec(
    c: _Container,
    replicas: int,
    replica: Replica | None,
    *,
    elastic_worker: bool = False,
    last: bool = False,
    elastic_restart: str = ELASTIC_WORKER_RESTART_POLICY,
) -> dict[str, Any]:
    """One entry of ``spec.pytorchReplicaSpecs``: the container, with the replica's own settings.

    Every replica gets lists of its own; the ``last`` one to be rendered takes the container's.
    """
    own_image = replica.image if replica is not None else ""
    if own_image:
        _check_image(f"{replica.spec_path}.image" if replica is not None else "image", own_image)
    resources = c.resources
    if replica is not None and replica.resources is not None:
        # Upstream: the replica's resources replace the task's for this replica.
        resources = _replica_resources(replica.resources, f"{replica.spec_path}.resources")
    container: dict[str, Any] = {
        K.NAME: CONTAINER_NAME,
        K.IMAGE: own_image or c.image,
        K.COMMAND: c.command if last else list(c.command),
        K.ARGS: c.args if last else list(c.args),
        K.ENV: c.env if last else [dict(item) for item in c.env],
        K.PORTS: [{K.CONTAINER_PORT: c.port, K.NAME: PORT_NAME}],
    }
    if not container[K.ARGS]:
        del container[K.ARGS]
    if resources:
        container[K.RESOURCES] = {kind: dict(block) for kind, block in resources.items()}
    template: dict[str, Any] = {}
    metadata = _metadata(c)
    if metadata:
        template[K.METADATA] = metadata
    template[K.SPEC] = {K.CONTAINERS: [container]}
    return {
        K.REPLICAS: replicas,
        K.RESTART_POLICY: _restart_policy(replica, elastic_worker, elastic_restart),
        K.TEMPLATE: template,
    }


def _metadata(c: _Container) -> dict[str, Any]:
    """Labels and annotations (each when there are any), as the job and every pod template carry them."""
    out: dict[str, Any] = {}
    if c.labels:
        out[K.LABELS] = dict(c.labels)
    if c.annotations:
        out[K.ANNOTATIONS] = dict(c.annotations)
    return out


def _job_spec(
    t: TaskView,
    c: _Container,
    counts: Mapping[str, int],
    mode: str = STRICT,
    restart: str = ELASTIC_WORKER_RESTART_POLICY,
) -> dict[str, Any]:
    """``spec``: the elastic policy (elastic task) or a Master, the Workers, the run policy."""
    spec: dict[str, Any] = {}
    replica_specs: dict[str, Any] = {}
    values = values_of(t)
    if values is not None:
        spec[K.ELASTIC_POLICY] = _elastic_policy(values, mode)
        if mode == STRICT or values.nproc_policy:
            # The upstream mode writes a number into elasticPolicy.nProcPerNode instead; auto/cpu/gpu
            # (our extension) only fit here. Never both: the operator's webhook refuses that.
            spec[K.NPROC_PER_NODE] = _nproc(values)
    else:
        replica_specs[MASTER] = _replica_spec(c, counts[MASTER], t.master, last=WORKER not in counts)
    if WORKER in counts:
        # The legacy shape has no per-replica settings (Replica with spec_path "").
        worker = t.worker if t.worker.spec_path else None
        replica_specs[WORKER] = _replica_spec(
            c,
            counts[WORKER],
            worker,
            elastic_worker=t.elastic is not None,
            last=True,
            elastic_restart=elastic_worker_default(t, restart),
        )
    spec[K.REPLICA_SPECS] = replica_specs
    spec[K.RUN_POLICY] = _run_policy(t, budgeted=WORKER in counts and _budgeted(t, restart))
    return spec


def _job(options: JobOptions, c: _Container, spec: dict[str, Any]) -> dict[str, Any]:
    """The whole object: apiVersion, kind, metadata, spec."""
    metadata: dict[str, Any] = {K.NAME: options.name, K.NAMESPACE: options.namespace, **_metadata(c)}
    return {K.API_VERSION: API_VERSION, K.KIND: KIND, K.METADATA: metadata, K.SPEC: spec}


def _options_of(options: Any, legacy: Mapping[str, Any]) -> JobOptions:
    """The options, given as a JobOptions or (deprecated) as keywords; TypeError for anything else."""
    if options is None:
        if not legacy:
            raise TypeError(
                "render_pytorchjob() needs options: render_pytorchjob(task, JobOptions(name=..., image=...))"
            )
        return JobOptions(**legacy)
    if legacy:
        raise TypeError(f"render_pytorchjob(): give the options in JobOptions only, not also as {', '.join(legacy)}")
    if not isinstance(options, JobOptions):
        raise TypeError(
            f"render_pytorchjob(): options must be a JobOptions, got {type(options).__name__} "
            "(for a mapping: JobOptions(**mapping))"
        )
    return options


@overload
def render_pytorchjob(task: Any, options: JobOptions, *, task_type_version: int | None = None) -> dict[str, Any]: ...


@overload
def render_pytorchjob(
    task: Any,
    options: None = None,
    *,
    task_type_version: int | None = None,
    name: str,
    image: str,
    namespace: str = ...,
    entrypoint: Sequence[str] | None = ...,
    pod_args: Sequence[str] | None = ...,
    command: Sequence[str] | None = ...,
    args: Sequence[str] | None = ...,
    resources: Mapping[str, Any] | None = ...,
    labels: Mapping[str, str] | None = ...,
    annotations: Mapping[str, str] | None = ...,
    env: Mapping[str, str] | None = ...,
) -> dict[str, Any]: ...


def render_pytorchjob(
    task: Any, options: JobOptions | None = None, *, task_type_version: int | None = None, **legacy: Any
) -> dict[str, Any]:
    """Render the Kubeflow ``PyTorchJob`` (kubeflow.org/v1) the backend creates for a task.

    Pure: returns a new dict and talks to nobody. The result is valid against the
    training operator's CRD schema (v1.9) and its admission webhook, and its keys
    come in a fixed order, so two renders of the same input are identical.

    What is rendered (upstream flyteplugins does the same unless noted):

    - An elastic task is a worker-only job: ``spec.elasticPolicy`` (minReplicas,
      maxReplicas, rdzvBackend with "" read as "c10d", rdzvHost/rdzvPort/rdzvId when
      set, maxRestarts, rdzvConf from the typed timeouts then the free-form options),
      ``spec.nprocPerNode`` as a string ("4", "auto", "cpu", "gpu"), and Worker
      replicas = max_replicas. Never ``elasticPolicy.nProcPerNode`` (deprecated) and
      never ``standalone`` (its ``PET_STANDALONE=""`` crashes torchrun 2.13).
      Upstream sets only min/max/backend/nProcPerNode/maxRestarts.
    - A non-elastic task renders Master (always 1 replica) + Workers.
    - Replica settings follow upstream's rule: ``common`` wins when set. An unset
      restart policy (the enum's zero value, NEVER) is ``ExitCode`` for the Worker of an
      elastic task (see `ELASTIC_WORKER_RESTART_POLICY`; upstream: ``Never``) and
      ``Never`` otherwise, like upstream.
      A replica's image and resources replace the task-level ``image``/``resources``.
    - ``spec.runPolicy`` always, ``{}`` when the task has none (the legacy shape
      never has one); from a run policy: cleanPodPolicy always,
      ttlSecondsAfterFinished, activeDeadlineSeconds and backoffLimit only when
      non-zero (0 means unset in the message), like upstream's ParseRunPolicy.
    - One container named ``pytorch`` with port 23456 named ``pytorchjob-port``
      (the rendezvous port when ``rdzv_port`` is set), and the task itself in the
      env var ``ELASTIC_IDL_TASK`` (its custom dict as compact JSON) with
      ``ELASTIC_IDL_TASK_TYPE_VERSION``, then the NCCL env vars the elastic config sets
      (``TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC``, ``TORCH_NCCL_ASYNC_ERROR_HANDLING``,
      ``TORCH_NCCL_ENABLE_MONITORING``: none when unset; ``env`` may not give one the task sets),
      then ``env``. Its command runs the pod entrypoint:
      ``python -m elastic_idl.pod [pod_args] -- <entrypoint...>``, unless ``command``/``args`` are given.

    Args:
        task: The task: a message of either binding, or the ``TaskTemplate.custom``
            dict (what the backend reads; decoded as ``task_type_version`` says).
        options: The job's name, image, entrypoint, ... (`JobOptions`). Giving
            them as keywords of this function instead is deprecated (DeprecationWarning).
        task_type_version: 0 (legacy shape) or 1 (kubeflow shape), as in the task template.
            Required for a custom dict; for a message, when given, the message must be of that shape.

    Returns:
        The PyTorchJob as a plain dict (JSON/YAML-ready).

    Raises:
        UnsupportedVersionError: task_type_version is not 0 or 1.
        DecodeError: ``task`` is a custom dict that does not match the declared shape.
        RenderError: The task's class does not match task_type_version (or a custom dict
            comes without one), or an option Kubernetes would reject (name, namespace,
            image, labels, ...); ``field`` names it.
        ValidationError: The task breaks a rule; lists every violation.
        TypeError: ``options`` is not a JobOptions.
    """
    if options is None and legacy:
        deprecated(
            "render_pytorchjob(task, name=..., image=..., ...)",
            "render_pytorchjob(task, JobOptions(name=..., image=..., ...), task_type_version=...)",
        )
    opts = _options_of(options, legacy)
    mode, restart = _check_mode(opts)
    t = _task_for_render(task, task_type_version)
    _check_rules(t, mode)
    _check_option_text(opts)
    counts = _replica_counts(t, mode)
    _check_name(opts.name, counts)
    _check_namespace(opts.namespace)
    c = _container(t, to_custom(t), opts)
    return _job(opts, c, _job_spec(t, c, counts, mode, restart))
