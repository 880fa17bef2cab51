"""What the TrainJob and JobSet renderers share: one replicated job of identical node pods. Pure.

Kubeflow Trainer v2.3 runs a TrainJob as a JobSet (jobset.x-k8s.io/v1alpha2) named after the TrainJob,
whose torch runtime (``torch-distributed``) has one replicated job, ``node``; the JobSet renderer uses
the same shape. JobSet v0.12 names a pod ``<jobset>-<replicated job>-<job index>-<pod index>``, gives
it that host name under the subdomain ``<jobset>`` and creates the headless Service of that name
(``network.enableDNSHostnames``, default true; ``publishNotReadyAddresses``, default true), so node 0
is ``<name>-node-0-0.<name>`` from the first pod on. Neither target gives the pods ``PET_RDZV_ENDPOINT``
(Trainer sets ``PET_MASTER_ADDR``/``PET_MASTER_PORT`` for a static torchrun); the pod entrypoint takes
its rendezvous endpoint from that variable, so both renderers write it (`rdzv_env`).
"""

from __future__ import annotations

from elastic_idl._backend.common import K, check_job_name
from elastic_idl._errors import RenderError, TargetLoss
from elastic_idl._task.names import ENV, STATIC
from elastic_idl._task.view import Replica, TaskView, values_of

__all__ = [
    "NODE",
    "check_node_name",
    "master_losses",
    "node_count",
    "node_host",
    "rdzv_env",
    "static_backend_loss",
]

#: The replicated job of Trainer's torch runtime (and its container), and of the rendered JobSet.
NODE = "node"


def node_pod_name(name: str, index: int) -> str:
    """Pod ``index`` of the ``node`` replicated job of JobSet ``name`` (its host name too)."""
    return f"{name}-{NODE}-0-{index}"


def node_host(name: str) -> str:
    """Node 0's DNS name: its pod host name under the JobSet's headless Service."""
    return f"{node_pod_name(name, 0)}.{name}"


def node_count(t: TaskView) -> int:
    """Pods of the job: max_replicas for an elastic task (what a PyTorchJob creates); else the Master and
    the Workers, all as nodes; RenderError when a non-elastic task has no worker."""
    if t.elastic is not None:
        return int(t.worker_count())
    workers = t.worker_count()
    if workers <= 0:
        raise RenderError(t.worker.replicas_path, f"a non-elastic job needs at least 1 worker, got {workers}")
    return 1 + workers


def check_node_name(name: object, nodes: int) -> None:
    """The job's name: a DNS-1035 label short enough for the last pod's host name."""
    check_job_name(
        name,
        lambda n: [node_pod_name(n, max(nodes - 1, 0))],
        requirer="",
        namer="JobSet names the last pod (and its host)",
    )


def rdzv_env(t: TaskView, name: str, default_port: int) -> list[dict[str, str]]:
    """``PET_RDZV_ENDPOINT`` for an elastic task: the task's rdzv_host, else node 0; the task's rdzv_port,
    else ``default_port``. None for a task without an elastic config (the pod entrypoint refuses it)."""
    values = values_of(t)
    if values is None:
        return []
    host = values.rdzv_host or node_host(name)
    port = int(values.rdzv_port) if values.rdzv_port else default_port
    return [{K.NAME: ENV.RDZV_ENDPOINT, K.VALUE: f"{host}:{port}"}]


def static_backend_loss(t: TaskView, target: str) -> list[TargetLoss]:
    """The static backend needs each pod's node rank, which the pod entrypoint does not read."""
    values = values_of(t)
    if values is None or values.effective_backend() != STATIC:
        return []
    why = (
        "the static backend needs each pod's own node rank; the pod entrypoint passes none (it reads neither "
        "PET_NODE_RANK nor the Job's completion index), so every pod would claim rank 0: use c10d"
    )
    return [TargetLoss("elastic_config.rdzv_backend", target, why)]


def _setting(r: Replica | None, name: str) -> object:
    if r is None:
        return None
    value = getattr(r, name)
    return value if value else None


def master_losses(t: TaskView, target: str) -> list[TargetLoss]:
    """A non-elastic task's Master settings that differ from the Workers': every node runs one template."""
    if t.elastic is not None or t.master is None or not t.master.spec_path:
        return []
    worker = t.worker if t.worker.spec_path else None
    out = []
    for setting in ("image", "resources", "restart_policy"):
        own = _setting(t.master, setting)
        if own is not None and own != _setting(worker, setting):
            out.append(
                TargetLoss(
                    f"{t.master.spec_path}.{setting}",
                    target,
                    f"every node runs the Workers' pod template (the Master is node 0); the Master's own {setting} "
                    "is not rendered",
                )
            )
    return out
