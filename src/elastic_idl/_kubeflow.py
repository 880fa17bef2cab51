"""Backend side: task -> Kubeflow ``PyTorchJob`` (kubeflow.org/v1) and the env its pods get. Pure.

:func:`render_pytorchjob` does what flytepropeller's pytorch plugin does
(``flyteplugins/go/tasks/plugins/k8s/kfoperators/pytorch``), plus the fields
that plugin leaves out (``spec.nprocPerNode``, rdzv host/port/id/conf).
:func:`pod_env` is the env the training operator (v1.9) injects into one pod
of that job, so tests can start pods locally with exactly what a cluster gives them.

Every Kubernetes key and env var name is a constant below, defined once
(``PET_*`` names that the launch spec also reads live in :class:`elastic_idl._spec.ENV`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from elastic_idl._codec import from_custom, to_custom
from elastic_idl._errors import RenderError, UnsupportedVersionError
from elastic_idl._messages import TASK_CLASSES, Resources, as_pb2, task_class
from elastic_idl._spec import ENV, rdzv_configs_of
from elastic_idl._validate import validate
from elastic_idl._view import Replica, TaskView, view
from elastic_idl.plugins.kubeflow.v1 import common_pb2
from elastic_idl.plugins.v1 import elastic_pb2

__all__ = [
    "CONTAINER_NAME",
    "DEFAULT_PORT",
    "OPERATOR_ENV",
    "POD_ENTRYPOINT",
    "PORT_NAME",
    "TASK_ENV",
    "K",
    "pod_env",
    "render_pytorchjob",
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
    DEPRECATED_NPROC = "nProcPerNode"  # read only (foreign jobs): never rendered
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
REPLICA_TYPES = (MASTER, WORKER)
#: The operator finds the training container by this name (PytorchJobDefaultContainerName).
CONTAINER_NAME = "pytorch"
#: The operator reads the port by this name (PytorchJobDefaultPortName) and its default number.
PORT_NAME = "pytorchjob-port"
DEFAULT_PORT = 23456
#: What the operator defaults an absent spec.nprocPerNode to.
DEFAULT_NPROC = "auto"

#: Container command that runs the pod entrypoint (``python -m elastic_idl.pod``).
POD_ENTRYPOINT: tuple[str, ...] = ("python", "-m", "elastic_idl.pod")

#: Env var of the rendered container that carries the task: its custom dict as compact JSON.
TASK_ENV = "ELASTIC_IDL_TASK"
#: Env var of the rendered container that carries the task_type_version (0 or 1).
TASK_TYPE_VERSION_ENV = "ELASTIC_IDL_TASK_TYPE_VERSION"


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

#: flyteidl ResourceName -> Kubernetes resource name.
RESOURCE_NAMES: dict[int, str] = {
    Resources.CPU: "cpu",
    Resources.GPU: "nvidia.com/gpu",
    Resources.MEMORY: "memory",
    Resources.STORAGE: "storage",
    Resources.EPHEMERAL_STORAGE: "ephemeral-storage",
}
RESTART_POLICIES: dict[int, str] = {
    common_pb2.RESTART_POLICY_NEVER: "Never",
    common_pb2.RESTART_POLICY_ON_FAILURE: "OnFailure",
    common_pb2.RESTART_POLICY_ALWAYS: "Always",
}
#: What an elastic task's Worker gets when its restart policy is the enum's zero value (NEVER, which
#: the wire cannot tell from unset). The operator (v1.9) recreates a pod that exits >= 128 (killed by
#: a signal, OOM-killed, deleted, or the pod entrypoint's 200: its rendezvous store host is gone) and
#: fails the job on any other non-zero exit. Under Never any pod loss, even a drain, fails the job;
#: under OnFailure a deterministic error restarts forever unless backoffLimit is set. The figures:
#: bench/README.md, "Chaos".
ELASTIC_WORKER_RESTART_POLICY = "ExitCode"
CLEAN_POD_POLICIES: dict[int, str] = {
    common_pb2.CLEANPOD_POLICY_NONE: "None",
    common_pb2.CLEANPOD_POLICY_RUNNING: "Running",
    common_pb2.CLEANPOD_POLICY_ALL: "All",
}
NPROC_POLICIES: dict[int, str] = {
    elastic_pb2.NPROC_POLICY_AUTO: "auto",
    elastic_pb2.NPROC_POLICY_CPU: "cpu",
    elastic_pb2.NPROC_POLICY_GPU: "gpu",
}

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


def _check_image(field: str, image: Any) -> None:
    if not isinstance(image, str) or not image:
        raise RenderError(field, "a container image is required")
    if image != image.strip() or any(c.isspace() for c in image):
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


def _labels(field: str, labels: Mapping[str, str] | None, *, is_label: bool) -> dict[str, str]:
    if labels is None:
        return {}
    if not isinstance(labels, Mapping):
        raise RenderError(field, f"expected a mapping of strings, got {type(labels).__name__}")
    out: dict[str, str] = {}
    for key in sorted(labels):
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
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise RenderError(field, "expected a list of strings")
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
    for key in sorted(env):
        if not isinstance(key, str) or not _ENV_NAME.match(key):
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
        for name in sorted(entries):
            qty = entries[name]
            if isinstance(qty, bool) or not isinstance(qty, (str, int)) or str(qty) == "":
                raise RenderError(f"{field}.{kind}.{name}", f"expected a quantity such as '2' or '4Gi', got {qty!r}")
            block[str(name)] = str(qty)
        if block:
            out[kind] = block
    unknown = sorted(set(res) - {K.REQUESTS, K.LIMITS})
    if unknown:
        raise RenderError(f"{field}.{unknown[0]}", "only 'requests' and 'limits' are allowed")
    return out


def _replica_resources(res: Resources) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for kind in (K.REQUESTS, K.LIMITS):
        entries = {RESOURCE_NAMES[e.name]: e.value for e in getattr(res, kind)}
        if entries:
            out[kind] = dict(sorted(entries.items()))
    return out


# --------------------------------------------------------------------------- render


def _coerce_task(task: Any, task_type_version: Any) -> Any:
    """The task as a ``_pb2`` message of the declared shape, or a typed error."""
    cls = task_class(task_type_version)  # UnsupportedVersionError for anything but 0 / 1
    if isinstance(task, Mapping):
        # The backend's input: TaskTemplate.custom; DecodeError names the field.
        return from_custom(task, task_type_version=task_type_version)
    try:
        pb = as_pb2(task)
    except TypeError as exc:
        raise RenderError("task", str(exc)) from None
    if not isinstance(pb, cls):
        shapes = {c: v for v, c in TASK_CLASSES.items()}
        actual = shapes.get(type(pb))
        what = f"a task_type_version {actual} task" if actual is not None else "a message"
        raise RenderError(
            "task_type_version",
            f"declared {task_type_version} ({cls.DESCRIPTOR.full_name}) but got {what} "
            f"({pb.DESCRIPTOR.full_name}); the backend would read it as the declared shape "
            "and lose fields (flyteplugins#359)",
        )
    return pb


def _nproc(e: elastic_pb2.ElasticConfig) -> str:
    return NPROC_POLICIES.get(e.nproc_policy) or str(e.nproc_per_node)


def _elastic_policy(t: TaskView) -> dict[str, Any]:
    e = t.elastic
    assert e is not None  # internal: only called for elastic tasks
    policy: dict[str, Any] = {
        K.MIN_REPLICAS: int(e.min_replicas),
        K.MAX_REPLICAS: int(e.max_replicas),
        K.RDZV_BACKEND: t.effective_backend(),
    }
    if e.rdzv_host:
        policy[K.RDZV_HOST] = e.rdzv_host
    if e.rdzv_port:
        policy[K.RDZV_PORT] = int(e.rdzv_port)
    if e.rdzv_id:
        policy[K.RDZV_ID] = e.rdzv_id
    policy[K.MAX_RESTARTS] = int(e.max_restarts)
    conf = rdzv_configs_of(e)
    if conf:
        policy[K.RDZV_CONF] = [{K.KEY: key, K.VALUE: str(value)} for key, value in conf.items()]
    return policy


def _run_policy(t: TaskView) -> dict[str, Any]:
    rp = t.run_policy
    if rp is None:
        # Upstream always sends a RunPolicy struct, empty when the task has none (the
        # operator then defaults cleanPodPolicy to None); the SDK models require the key.
        return {}
    out: dict[str, Any] = {K.CLEAN_POD_POLICY: CLEAN_POD_POLICIES[rp.clean_pod_policy]}
    # Zero means "unset" in the message (proto3), so it is left out like upstream's ParseRunPolicy.
    if rp.ttl_seconds_after_finished:
        out[K.TTL_SECONDS] = int(rp.ttl_seconds_after_finished)
    if rp.active_deadline_seconds:
        out[K.ACTIVE_DEADLINE_SECONDS] = int(rp.active_deadline_seconds)
    if rp.backoff_limit:
        out[K.BACKOFF_LIMIT] = int(rp.backoff_limit)
    return out


def _replica_spec(
    *,
    replicas: int,
    replica: Replica | None,
    elastic_worker: bool,
    image: str,
    command: list[str],
    args: list[str],
    env: list[dict[str, str]],
    port: int,
    resources: dict[str, dict[str, str]],
    pod_metadata: dict[str, Any],
) -> dict[str, Any]:
    own_image = replica.image if replica is not None else ""
    if own_image:
        _check_image(f"{replica.spec_path}.image" if replica is not None else "image", own_image)
    if replica is not None and replica.resources is not None:
        # Upstream: the replica's resources replace the task's for this replica.
        resources = _replica_resources(replica.resources)
    container: dict[str, Any] = {
        K.NAME: CONTAINER_NAME,
        K.IMAGE: own_image or image,
        K.COMMAND: list(command),
        K.ARGS: list(args),
        K.ENV: [dict(item) for item in env],
        K.PORTS: [{K.CONTAINER_PORT: port, K.NAME: PORT_NAME}],
    }
    if not container[K.ARGS]:
        del container[K.ARGS]
    if resources:
        container[K.RESOURCES] = {kind: dict(block) for kind, block in resources.items()}
    template: dict[str, Any] = {}
    if pod_metadata:
        template[K.METADATA] = {k: dict(v) for k, v in pod_metadata.items()}
    template[K.SPEC] = {K.CONTAINERS: [container]}
    restart = replica.restart_policy if replica is not None else common_pb2.RESTART_POLICY_NEVER
    policy = RESTART_POLICIES[restart]
    if elastic_worker and restart == common_pb2.RESTART_POLICY_NEVER:
        policy = ELASTIC_WORKER_RESTART_POLICY
    return {
        K.REPLICAS: replicas,
        K.RESTART_POLICY: policy,
        K.TEMPLATE: template,
    }


def render_pytorchjob(
    task: Any,
    *,
    task_type_version: int,
    name: str,
    image: str,
    namespace: str = "default",
    entrypoint: Sequence[str] | None = None,
    pod_args: Sequence[str] | None = None,
    command: Sequence[str] | None = None,
    args: Sequence[str] | None = None,
    resources: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
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
      elastic task (see :data:`ELASTIC_WORKER_RESTART_POLICY`; upstream: ``Never``) and
      ``Never`` otherwise, like upstream.
      A replica's image and resources replace the task-level ``image``/``resources``.
    - ``spec.runPolicy`` always, ``{}`` when the task has none (the legacy shape
      never has one); from a run policy: cleanPodPolicy always,
      ttlSecondsAfterFinished, activeDeadlineSeconds and backoffLimit only when
      non-zero (0 means unset in the message), like upstream's ParseRunPolicy.
    - One container named ``pytorch`` with port 23456 named ``pytorchjob-port``
      (the rendezvous port when ``rdzv_port`` is set), and the task itself in the
      env var ``ELASTIC_IDL_TASK`` (its custom dict as compact JSON) with
      ``ELASTIC_IDL_TASK_TYPE_VERSION``. Its command runs the pod entrypoint:
      ``python -m elastic_idl.pod [pod_args] -- <entrypoint...>``, unless ``command``/``args`` are given.

    Args:
        task: The task: a message of either binding, or the ``TaskTemplate.custom``
            dict (what the backend reads; decoded as ``task_type_version`` says).
        task_type_version: 0 (legacy shape) or 1 (kubeflow shape), as in the task template.
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

    Returns:
        The PyTorchJob as a plain dict (JSON/YAML-ready).

    Raises:
        UnsupportedVersionError: task_type_version is not 0 or 1.
        DecodeError: ``task`` is a custom dict that does not match the declared shape.
        RenderError: The task's class does not match task_type_version, or an
            option Kubernetes would reject (name, namespace, image, labels, ...);
            ``field`` names it.
        ValidationError: The task breaks a rule; lists every violation.
    """
    if isinstance(task_type_version, bool) or task_type_version not in TASK_CLASSES:
        raise UnsupportedVersionError(task_type_version)
    pb = _coerce_task(task, task_type_version)
    validate(pb)
    t = view(pb)

    workers = t.worker_count()
    if workers <= 0:
        # Upstream: "number of workers must be greater than 0"; the webhook agrees.
        raise RenderError(t.worker.replicas_path, f"a non-elastic job needs at least 1 worker, got {workers}")
    counts = {WORKER: workers} if t.elastic is not None else {MASTER: 1, WORKER: workers}
    _check_name(name, counts)
    _check_namespace(namespace)
    _check_image("image", image)

    cmd = _strings("command", command)
    arg_list = _strings("args", args)
    entry = _strings("entrypoint", entrypoint)
    flags = _strings("pod_args", pod_args) or []
    if "--" in flags:
        raise RenderError("pod_args", "'--' separates the pod flags from the entrypoint; it cannot be a flag")
    if arg_list is None:
        if cmd is None and not entry:
            raise RenderError("entrypoint", "what the pod runs is required (a script or module and its args)")
        arg_list = [*flags, "--", *entry] if entry else flags
    elif entry or flags:
        raise RenderError("entrypoint" if entry else "pod_args", "give either entrypoint/pod_args or args, not both")
    if cmd is None:
        cmd = list(POD_ENTRYPOINT)

    job_labels = _labels("labels", labels, is_label=True)
    job_annotations = _labels("annotations", annotations, is_label=False)
    task_resources = _k8s_resources("resources", resources)
    container_env = [
        {K.NAME: TASK_ENV, K.VALUE: json.dumps(to_custom(pb), sort_keys=True, separators=(",", ":"))},
        {K.NAME: TASK_TYPE_VERSION_ENV, K.VALUE: str(task_type_version)},
        *_user_env(env),
    ]
    pod_metadata: dict[str, Any] = {}
    if job_labels:
        pod_metadata[K.LABELS] = job_labels
    if job_annotations:
        pod_metadata[K.ANNOTATIONS] = job_annotations

    port = DEFAULT_PORT
    if t.elastic is not None and t.elastic.rdzv_port:
        port = int(t.elastic.rdzv_port)

    def replica(count: int, r: Replica | None, *, elastic_worker: bool = False) -> dict[str, Any]:
        return _replica_spec(
            replicas=count,
            replica=r,
            elastic_worker=elastic_worker,
            image=image,
            command=cmd,
            args=arg_list,
            env=container_env,
            port=port,
            resources=task_resources,
            pod_metadata=pod_metadata,
        )

    spec: dict[str, Any] = {}
    replica_specs: dict[str, Any] = {}
    # The legacy shape has no per-replica settings (Replica with spec_path "").
    worker_replica = t.worker if t.worker.spec_path else None
    if t.elastic is not None:
        spec[K.ELASTIC_POLICY] = _elastic_policy(t)
        spec[K.NPROC_PER_NODE] = _nproc(t.elastic)
    else:
        replica_specs[MASTER] = replica(1, t.master)
    replica_specs[WORKER] = replica(workers, worker_replica, elastic_worker=t.elastic is not None)
    spec[K.REPLICA_SPECS] = replica_specs
    spec[K.RUN_POLICY] = _run_policy(t)

    metadata: dict[str, Any] = {K.NAME: name, K.NAMESPACE: namespace}
    if job_labels:
        metadata[K.LABELS] = dict(job_labels)
    if job_annotations:
        metadata[K.ANNOTATIONS] = dict(job_annotations)
    return {K.API_VERSION: API_VERSION, K.KIND: KIND, K.METADATA: metadata, K.SPEC: spec}


# --------------------------------------------------------------------------- pod env


def _get(obj: Any, path: str, *keys: str) -> Any:
    cur = obj
    walked = path
    for key in keys:
        if not isinstance(cur, Mapping):
            raise RenderError(walked, f"expected an object, got {type(cur).__name__}")
        cur = cur.get(key)
        walked = f"{walked}.{key}" if walked else key
    return cur


def _port_of(job: Mapping[str, Any], rtype: str) -> int:
    """The ``pytorchjob-port`` of the ``pytorch`` container; the operator defaults it to 23456."""
    containers = _get(job, "", K.SPEC, K.REPLICA_SPECS, rtype, K.TEMPLATE, K.SPEC, K.CONTAINERS) or []
    for c in containers:
        if isinstance(c, Mapping) and c.get(K.NAME) == CONTAINER_NAME:
            for p in c.get(K.PORTS) or []:
                if isinstance(p, Mapping) and p.get(K.NAME) == PORT_NAME:
                    return int(p[K.CONTAINER_PORT])
    return DEFAULT_PORT


def _nproc_int(nproc: str) -> int:
    # The operator's getNprocPerNodeInt: 1 unless the string is a number.
    try:
        return int(nproc)
    except ValueError:
        return 1


def pod_env(job: Mapping[str, Any], replica_type: str, index: int) -> dict[str, str]:
    """The env the Kubeflow training operator (v1.9) injects into one pod of ``job``.

    Pure. The container's own env (``ELASTIC_IDL_TASK``, ...) is not included: it
    is in the job. Follows the operator's ``setPodEnv`` and its defaulting:

    - every pod: ``PYTHONUNBUFFERED=1``;
    - elastic job (``spec.elasticPolicy``): ``PET_RDZV_ENDPOINT`` =
      ``<rdzvHost or <job>-worker-0>:<rdzvPort or the Worker's pytorchjob-port (23456)>``,
      ``PET_RDZV_BACKEND`` (default c10d), ``PET_NNODES=<min>:<max>`` (the Worker
      replica count when neither is set; one alone stands for both),
      ``PET_NPROC_PER_NODE=<spec.nprocPerNode, default auto>``, and when set
      ``PET_MAX_RESTARTS``, ``PET_RDZV_ID``, ``PET_RDZV_CONF=k=v,k=v``;
    - job with a Master: ``MASTER_ADDR``/``PET_MASTER_ADDR`` = ``<job>-master-0``,
      ``MASTER_PORT``/``PET_MASTER_PORT`` = the Master's pytorchjob-port,
      ``WORLD_SIZE`` = total replicas x nprocPerNode (1 when not a number),
      ``RANK``/``PET_NODE_RANK`` = index (+1 for a Worker), ``PET_NPROC_PER_NODE``,
      and, when not elastic, ``PET_NNODES`` = total replicas.

    Raises:
        RenderError: Unknown replica type, index out of range, a malformed job, or
            ``elasticPolicy.standalone`` (the operator would inject ``PET_STANDALONE``,
            which crashes torchrun 2.13).
    """
    specs = _get(job, "", K.SPEC, K.REPLICA_SPECS)
    if not isinstance(specs, Mapping) or not specs:
        raise RenderError("spec.pytorchReplicaSpecs", "the job has no replica specs")
    if replica_type not in specs:
        raise RenderError(
            "replica_type", f"{replica_type!r} is not a replica type of this job (it has {', '.join(sorted(specs))})"
        )
    counts: dict[str, int] = {}
    for rtype, rspec in specs.items():
        count = _get(rspec, f"spec.pytorchReplicaSpecs.{rtype}", K.REPLICAS)
        counts[rtype] = 1 if count is None else int(count)  # the operator defaults replicas to 1
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < counts[replica_type]:
        raise RenderError("index", f"{index!r} is out of range for {replica_type} (0..{counts[replica_type] - 1})")
    job_name = _get(job, "", K.METADATA, K.NAME)
    if not isinstance(job_name, str) or not job_name:
        raise RenderError("metadata.name", "the job has no name")
    spec = job[K.SPEC]
    elastic = spec.get(K.ELASTIC_POLICY)
    nproc = spec.get(K.NPROC_PER_NODE)
    if nproc is None and isinstance(elastic, Mapping) and elastic.get(K.DEPRECATED_NPROC) is not None:
        nproc = str(elastic[K.DEPRECATED_NPROC])  # the operator's defaulting copies the deprecated field
    nproc = str(nproc) if nproc is not None else DEFAULT_NPROC
    total = sum(counts.values())

    env: dict[str, str] = {OPERATOR_ENV.PYTHONUNBUFFERED: "1"}
    if MASTER in specs:
        master_port = str(_port_of(job, MASTER))
        master_addr = replica_name(job_name, MASTER, 0)
        rank = index + 1 if replica_type == WORKER else index
        env[OPERATOR_ENV.MASTER_PORT] = master_port
        env[OPERATOR_ENV.PET_MASTER_PORT] = master_port
        env[OPERATOR_ENV.MASTER_ADDR] = master_addr
        env[OPERATOR_ENV.PET_MASTER_ADDR] = master_addr
        env[OPERATOR_ENV.WORLD_SIZE] = str(total * _nproc_int(nproc))
        env[OPERATOR_ENV.RANK] = str(rank)
        env[ENV.NPROC_PER_NODE] = nproc
        env[OPERATOR_ENV.PET_NODE_RANK] = str(rank)
    if elastic is None:
        env[ENV.NNODES] = str(total)
        return env
    if not isinstance(elastic, Mapping):
        raise RenderError("spec.elasticPolicy", f"expected an object, got {type(elastic).__name__}")
    if elastic.get(K.STANDALONE):
        raise RenderError(
            "spec.elasticPolicy.standalone",
            "the operator would inject PET_STANDALONE='', which crashes torchrun 2.13; remove it",
        )
    host = elastic.get(K.RDZV_HOST)
    host = str(host) if host is not None else replica_name(job_name, WORKER, 0)
    port = elastic.get(K.RDZV_PORT)
    port = int(port) if port is not None else _port_of(job, WORKER)
    env[ENV.RDZV_ENDPOINT] = f"{host}:{port}"
    backend = elastic.get(K.RDZV_BACKEND)
    env[ENV.RDZV_BACKEND] = str(backend) if backend is not None else "c10d"
    lo: Any = elastic.get(K.MIN_REPLICAS)
    hi: Any = elastic.get(K.MAX_REPLICAS)
    if lo is None and hi is None:
        env[ENV.NNODES] = str(counts.get(WORKER, 0))
    else:
        # The operator's defaulting: only min -> max = min; only max -> min = max.
        lo, hi = (hi if lo is None else lo), (lo if hi is None else hi)
        env[ENV.NNODES] = f"{int(lo)}:{int(hi)}"
    if elastic.get(K.MAX_RESTARTS) is not None:
        env[ENV.MAX_RESTARTS] = str(int(elastic[K.MAX_RESTARTS]))
    env[ENV.NPROC_PER_NODE] = nproc
    if elastic.get(K.RDZV_ID) is not None:
        env[ENV.RDZV_ID] = str(elastic[K.RDZV_ID])
    conf = elastic.get(K.RDZV_CONF)
    if conf:
        env[ENV.RDZV_CONF] = ",".join(f"{c[K.KEY]}={c[K.VALUE]}" for c in conf)
    return env
