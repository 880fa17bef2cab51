"""What every renderer (PyTorchJob, TrainJob, JobSet) shares: Kubernetes keys, the checks of the
options, the task as the renderers read it, and the one container every pod runs. Pure.

Moved here from ``pytorchjob.py`` when the TrainJob and JobSet renderers came (issue 34), so that each
check is written once.
"""

from __future__ import annotations

import dataclasses
import json
import re
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, NamedTuple, Protocol

from google.protobuf.message import Message

from elastic_idl._errors import RenderError, SkewWarning, brief
from elastic_idl._launch.spec import entrypoint_problem
from elastic_idl._task.codec import from_custom, lone_surrogate
from elastic_idl._task.enums import K8S_RESOURCE
from elastic_idl._task.messages import TASK_CLASSES, Resources, task_class
from elastic_idl._task.names import NCCL_ENV_FIELDS, TASK_ENV, TASK_TYPE_VERSION_ENV, is_loopback
from elastic_idl._task.resources import quantity_problems
from elastic_idl._task.view import TaskView, message_of, of, values_of

__all__ = [
    "DNS1035",
    "MAX_NAME_LEN",
    "POD_ENTRYPOINT",
    "STORAGE_DROPPED",
    "Container",
    "K",
    "RenderOptions",
    "check_image",
    "check_job_name",
    "check_namespace",
    "check_option_text",
    "checked_labels",
    "command_and_args",
    "compact_json",
    "container",
    "k8s_resources",
    "metadata_of",
    "replica_resources",
    "string_list",
    "task_for_render",
    "user_env",
]


class RenderOptions(Protocol):
    """What the shared checks read of a renderer's options (`elastic_idl.JobOptions` is one)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def image(self) -> str: ...
    @property
    def entrypoint(self) -> Sequence[str] | None: ...
    @property
    def pod_args(self) -> Sequence[str] | None: ...
    @property
    def command(self) -> Sequence[str] | None: ...
    @property
    def args(self) -> Sequence[str] | None: ...
    @property
    def resources(self) -> Mapping[str, Any] | None: ...
    @property
    def labels(self) -> Mapping[str, str] | None: ...
    @property
    def annotations(self) -> Mapping[str, str] | None: ...
    @property
    def env(self) -> Mapping[str, str] | None: ...


#: Container command that runs the pod entrypoint (``python -m elastic_idl.pod``).
POD_ENTRYPOINT: tuple[str, ...] = ("python", "-m", "elastic_idl.pod")


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


#: Kubernetes name limits. The operator names pods and their (headless) Services
#: ``<job>-<type>-<index>``; a Service name is a DNS-1035 label, so that must fit too.
MAX_NAME_LEN = 63
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")


def check_job_name(name: Any, last_pods: Callable[[str], Iterable[str]], *, requirer: str, namer: str) -> None:
    """The job's name: a DNS-1035 label (``requirer`` says who requires one, e.g. " (the operator's webhook
    requires one)"), short enough that every name ``last_pods(name)`` gives fits in a label too (``namer``
    says whose names they are, e.g. "the operator names pods and Services")."""
    if not isinstance(name, str) or not name:
        raise RenderError("name", "the job name is required (a DNS-1035 label)")
    if len(name) > MAX_NAME_LEN or not DNS1035.match(name):
        raise RenderError(
            "name",
            f"{name!r} is not a DNS-1035 label{requirer}: "
            f"at most {MAX_NAME_LEN} characters, lower-case letters, digits and '-', "
            "starting with a letter and ending with a letter or digit",
        )
    for longest in last_pods(name):
        if len(longest) > MAX_NAME_LEN:
            raise RenderError(
                "name",
                f"{name!r} is too long: {namer} {longest!r}, "
                f"which exceeds {MAX_NAME_LEN} characters (use at most "
                f"{MAX_NAME_LEN - len(longest) + len(name)} characters)",
            )


def check_rdzv_host_reachable(t: TaskView, pods: int) -> None:
    """A loopback ``rdzv_host`` on a job of more than one pod is refused: each pod is its own machine, so
    each would rendezvous with itself only and wait for the others until the join timeout."""
    values = values_of(t)
    if values is None or pods <= 1 or not values.rdzv_host or not is_loopback(values.rdzv_host):
        return
    raise RenderError(
        "elastic_config.rdzv_host",
        f"{values.rdzv_host!r} is a loopback address on a job of {pods} pods: each pod would reach only itself "
        "and the rendezvous would never form; leave rdzv_host unset (node 0 hosts the rendezvous) or name a "
        "host every pod reaches",
    )


def check_namespace(namespace: Any) -> None:
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


def check_option_text(options: RenderOptions) -> None:
    """Refuse an option holding a str that is no text, naming the option (the str cannot be written)."""
    for f in dataclasses.fields(options):
        found = _no_text(getattr(options, f.name))
        if found is not None:
            at = lone_surrogate(found) or 0
            raise RenderError(
                f.name, f"holds a lone surrogate (U+{ord(found[at]):04X}), which is no text (not UTF-8): {brief(found)}"
            )


def check_image(field: str, image: Any) -> None:
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


def checked_labels(field: str, labels: Mapping[str, str] | None, *, is_label: bool) -> dict[str, str]:
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


def string_list(field: str, value: Sequence[str] | None) -> list[str] | None:
    if value is None:
        return None
    if type(value) not in (list, tuple) and (isinstance(value, (str, bytes)) or not isinstance(value, Sequence)):
        raise RenderError(field, "expected a list of strings")  # (the exact types first: the ABC check is slow)
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise RenderError(f"{field}[{i}]", f"expected a string, got {type(item).__name__}")
    return list(value)


def user_env(
    env: Mapping[str, str] | None, reserved: frozenset[str], why: Mapping[str, str] | None = None
) -> list[dict[str, str]]:
    """The ``env`` option as container env entries, in name order; a name in ``reserved`` is refused, with
    ``why[name]`` as the reason where the target has more to say than that it sets the name itself."""
    if env is None:
        return []
    if not isinstance(env, Mapping):
        raise RenderError("env", f"expected a mapping of strings, got {type(env).__name__}")
    out = []
    for key in _sorted_keys("env", env):
        if not _ENV_NAME.match(key):
            raise RenderError(f"env.{key}", "not a valid environment variable name")
        if key in reserved:
            raise RenderError(
                f"env.{key}", (why or {}).get(key, "is set by the operator or the renderer; it cannot be given")
            )
        value = env[key]
        if not isinstance(value, str):
            raise RenderError(f"env.{key}", f"value must be a string, got {type(value).__name__}")
        out.append({K.NAME: key, K.VALUE: value})
    return out


def k8s_resources(field: str, res: Mapping[str, Any] | None) -> dict[str, dict[str, str]]:
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


def replica_resources(res: Resources, path: str) -> dict[str, dict[str, str]]:
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


def task_for_render(task: Any, task_type_version: int | None) -> TaskView:
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


class Container(NamedTuple):
    """The container every replica runs (a replica's own image and resources replace the task's)."""

    image: str
    command: list[str]
    args: list[str]
    env: list[dict[str, str]]
    port: int
    resources: dict[str, dict[str, str]]
    labels: dict[str, str]
    annotations: dict[str, str]


def command_and_args(options: RenderOptions) -> tuple[list[str], list[str]]:
    """Container command and args: the pod entrypoint with ``[*pod_args, "--", *entrypoint]`` unless given."""
    cmd = string_list("command", options.command)
    arg_list = string_list("args", options.args)
    entry = string_list("entrypoint", options.entrypoint)
    flags = string_list("pod_args", options.pod_args) or []
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
compact_json = json.JSONEncoder(sort_keys=True, separators=(",", ":"), check_circular=False).encode


def container(
    t: TaskView,
    custom: dict[str, Any],
    options: RenderOptions,
    *,
    reserved: frozenset[str],
    default_port: int,
    reserved_why: Mapping[str, str] | None = None,
) -> Container:
    """The checked options as one container, carrying the task (``custom``) in its env: ``reserved``, the
    env names the target's controller or the renderer sets (``reserved_why``: the reason given for some of
    them); ``default_port``, the rendezvous port when the task sets none."""
    check_image("image", options.image)
    command, args = command_and_args(options)
    labels = checked_labels("labels", options.labels, is_label=True)
    annotations = checked_labels("annotations", options.annotations, is_label=False)
    resources = k8s_resources("resources", options.resources)
    given_env = user_env(options.env, reserved, reserved_why)
    values = values_of(t)
    nccl = {} if values is None else values.nccl_env()
    for item in given_env:
        if item[K.NAME] in nccl:
            field = next(f for f, name in NCCL_ENV_FIELDS if name == item[K.NAME])
            raise RenderError(
                f"env.{item[K.NAME]}", f"is set by the task's elastic_config.{field}; give it there, not in env"
            )
    env = [
        {K.NAME: TASK_ENV, K.VALUE: compact_json(custom)},
        {K.NAME: TASK_TYPE_VERSION_ENV, K.VALUE: str(t.task_type_version)},
        *({K.NAME: name, K.VALUE: value} for name, value in nccl.items()),
        *given_env,
    ]
    port = int(values.rdzv_port) if values is not None and values.rdzv_port else default_port
    return Container(options.image, command, args, env, port, resources, labels, annotations)


def metadata_of(c: Container) -> dict[str, Any]:
    """Labels and annotations (each when there are any), as the job and every pod template carry them."""
    out: dict[str, Any] = {}
    if c.labels:
        out[K.LABELS] = dict(c.labels)
    if c.annotations:
        out[K.ANNOTATIONS] = dict(c.annotations)
    return out
