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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

from elastic_idl._backend.common import (
    POD_ENTRYPOINT,
    Container,
    K,
    check_image,
    check_job_name,
    check_namespace,
    check_option_text,
    check_rdzv_host_reachable,
    container,
    metadata_of,
    replica_resources,
    task_for_render,
)
from elastic_idl._errors import RenderError, ValidationError, Violation, deprecated, reject_unknown_keywords
from elastic_idl._task.encoding import to_custom
from elastic_idl._task.enums import CLEAN_POD_POLICY, NPROC_POLICY, RESTART_POLICY
from elastic_idl._task.names import ENV, OPERATOR_ENV, TASK_ENV, TASK_TYPE_VERSION_ENV
from elastic_idl._task.validate import check
from elastic_idl._task.view import ElasticValues, Replica, TaskView, rdzv_configs, values_of
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


# --------------------------------------------------------------------------- checks of options


def replica_name(job_name: str, replica_type: str, index: int) -> str:
    """The operator's name for pod ``index`` of a replica type (also its Service and host name)."""
    return f"{job_name}-{replica_type.lower()}-{index}"


def _check_name(name: Any, replica_counts: Mapping[str, int]) -> None:
    check_job_name(
        name,
        lambda n: [replica_name(n, rtype, max(count - 1, 0)) for rtype, count in replica_counts.items()],
        requirer=" (the operator's webhook requires one)",
        namer="the operator names pods and Services",
    )


# --------------------------------------------------------------------------- render


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
    c: Container,
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
        check_image(f"{replica.spec_path}.image" if replica is not None else "image", own_image)
    resources = c.resources
    if replica is not None and replica.resources is not None:
        # Upstream: the replica's resources replace the task's for this replica.
        resources = replica_resources(replica.resources, f"{replica.spec_path}.resources")
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
    metadata = metadata_of(c)
    if metadata:
        template[K.METADATA] = metadata
    template[K.SPEC] = {K.CONTAINERS: [container]}
    return {
        K.REPLICAS: replicas,
        K.RESTART_POLICY: _restart_policy(replica, elastic_worker, elastic_restart),
        K.TEMPLATE: template,
    }


def _job_spec(
    t: TaskView,
    c: Container,
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


def _job(options: JobOptions, c: Container, spec: dict[str, Any]) -> dict[str, Any]:
    """The whole object: apiVersion, kind, metadata, spec."""
    metadata: dict[str, Any] = {K.NAME: options.name, K.NAMESPACE: options.namespace, **metadata_of(c)}
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
    t = task_for_render(task, task_type_version)
    _check_rules(t, mode)
    check_option_text(opts)
    counts = _replica_counts(t, mode)
    if mode == STRICT:  # the upstream mode renders what Flyte 1.x's propeller does, which takes it
        check_rdzv_host_reachable(t, sum(counts.values()))
    _check_name(opts.name, counts)
    check_namespace(opts.namespace)
    c = container(t, to_custom(t), opts, reserved=RESERVED_ENV, default_port=DEFAULT_PORT)
    return _job(opts, c, _job_spec(t, c, counts, mode, restart))
