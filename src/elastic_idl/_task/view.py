"""One normalised view of both task shapes, so rules and mappings are written once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from elastic_idl._task.messages import (
    ElasticConfig,
    LegacyTask,
    ReplicaSpec,
    Resources,
    RunPolicy,
    as_task,
)
from elastic_idl._task.names import DEFAULT_RDZV_BACKEND, RDZV_TIMEOUTS

__all__ = ["Replica", "TaskView", "duration_seconds", "rdzv_configs", "seconds_number", "view"]


@dataclass(frozen=True)
class Replica:
    """The effective settings of one replica type, after upstream's `common` rule.

    Attributes:
        path: Field path of the replica spec in the task ("worker_replicas", "workers").
        spec_path: Field path the settings were read from ("worker_replicas.common"
            when `common` is set, else "worker_replicas"; "" for the legacy shape).
        replicas_path: Field path the replica count was read from.
        replicas: Replica count as written (0 may mean "take max_replicas").
        image: Container image; "" means the task's image.
        resources: Container resources, or None.
        restart_policy: RestartPolicy enum number (0 = Never).
        present: Whether the spec was set at all in the message.
    """

    path: str
    spec_path: str
    replicas_path: str
    replicas: int
    image: str
    resources: Resources | None
    restart_policy: int
    present: bool


@dataclass(frozen=True)
class TaskView:
    """Both task shapes as one: elastic config, replicas and run policy.

    Attributes:
        task_type_version: 0 (legacy) or 1 (kubeflow).
        elastic: The elastic config, or None for a non-elastic task.
        worker: Effective Worker replica settings.
        master: Effective Master replica settings (kubeflow shape only), or None.
        run_policy: The run policy (kubeflow shape only), or None.
    """

    task_type_version: int
    elastic: ElasticConfig | None
    worker: Replica
    master: Replica | None
    run_policy: RunPolicy | None

    def effective_backend(self) -> str:
        """The rendezvous backend, with "" read as :data:`DEFAULT_RDZV_BACKEND`."""
        if self.elastic is None or not self.elastic.rdzv_backend:
            return DEFAULT_RDZV_BACKEND
        return str(self.elastic.rdzv_backend)

    def worker_count(self) -> int:
        """Worker pods: max_replicas for an elastic task, else the replica count."""
        if self.elastic is not None:
            return int(self.elastic.max_replicas)
        return self.worker.replicas


def _replica(spec: ReplicaSpec, path: str, present: bool) -> Replica:
    # Upstream's backend rule: `common` wins when it is set, else the deprecated fields.
    if spec.HasField("common"):
        c = spec.common
        return Replica(
            path=path,
            spec_path=f"{path}.common",
            replicas_path=f"{path}.common.replicas",
            replicas=c.replicas,
            image=c.image,
            resources=c.resources if c.HasField("resources") else None,
            restart_policy=int(c.restart_policy),
            present=present,
        )
    return Replica(
        path=path,
        spec_path=path,
        replicas_path=f"{path}.replicas",
        replicas=spec.replicas,
        image=spec.image,
        resources=spec.resources if spec.HasField("resources") else None,
        restart_policy=int(spec.restart_policy),
        present=present,
    )


def view(task: Any) -> TaskView:
    """Normalise a task of either shape and either binding into a :class:`TaskView`."""
    task = as_task(task)
    if isinstance(task, LegacyTask):
        return TaskView(
            task_type_version=0,
            elastic=task.elastic_config if task.HasField("elastic_config") else None,
            worker=Replica("workers", "", "workers", task.workers, "", None, 0, True),
            master=None,
            run_policy=None,
        )
    return TaskView(
        task_type_version=1,
        elastic=task.elastic_config if task.HasField("elastic_config") else None,
        worker=_replica(task.worker_replicas, "worker_replicas", task.HasField("worker_replicas")),
        master=(_replica(task.master_replicas, "master_replicas", True) if task.HasField("master_replicas") else None),
        run_policy=task.run_policy if task.HasField("run_policy") else None,
    )


def duration_seconds(d: Any) -> float:
    """A Duration as a float number of seconds."""
    return float(d.seconds) + float(d.nanos) / 1e9


def seconds_number(x: float) -> int | float:
    """A number of seconds as an int when it is whole (``900``, not ``900.0``), else as is."""
    return int(x) if float(x).is_integer() else x


def rdzv_configs(e: ElasticConfig) -> dict[str, Any]:
    """The rendezvous options a message states: typed timeouts (seconds), then the extras in order."""
    out: dict[str, Any] = {}
    for name in RDZV_TIMEOUTS:
        if e.HasField(cast(Any, name)):
            out[name] = seconds_number(duration_seconds(getattr(e, name)))
    for opt in e.rdzv_options:
        out[opt.key] = opt.value
    return out
