"""Backend side: task -> Kubeflow Trainer v2.3 ``TrainJob`` (trainer.kubeflow.org/v1alpha1). Pure.

The TrainJob runs against the ``torch-distributed`` ClusterTrainingRuntime, which Trainer turns into a
JobSet named after the TrainJob with one replicated job, ``node`` (`elastic_idl._backend.nodes`). What the
task states that a TrainJob cannot carry is reported (`trainjob_losses`), never dropped silently.
"""

from __future__ import annotations

from typing import Any

from elastic_idl._backend.common import Container, K, metadata_of, replica_resources
from elastic_idl._backend.nodes import NODE, master_losses, node_count, rdzv_env, static_backend_loss
from elastic_idl._errors import TargetLoss
from elastic_idl._task.names import ENV
from elastic_idl._task.view import TaskView, values_of

__all__ = [
    "API_VERSION",
    "DEFAULT_PORT",
    "KIND",
    "PATCH_MANAGER",
    "PROPOSAL_ANNOTATION",
    "RESERVED_ENV_WHY",
    "RUNTIME",
    "TARGET",
    "render_trainjob",
    "trainjob_losses",
]

TARGET = "trainjob"
API_VERSION = "trainer.kubeflow.org/v1alpha1"
KIND = "TrainJob"
#: The runtime the TrainJob references: Trainer's torch runtime (manifests/base/runtimes in v2.3.0).
RUNTIME = {"name": "torch-distributed", "apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime"}
#: Trainer's port for the nodes (constants.ContainerTrainerPort, PET_MASTER_PORT): the rendezvous port
#: when the task sets none.
DEFAULT_PORT = 29500
#: ``runtimePatches[].manager`` of the patch that puts the labels and annotations on the pods: Trainer's
#: webhook requires a domain-prefixed path (``validation.IsDomainPrefixedPath``): the project's module path.
PATCH_MANAGER = "github.com/elastic-idl/elastic-idl"
#: Annotation of a TrainJob rendered with the proposed ``spec.trainer.elasticPolicy`` (KEP-2903).
PROPOSAL_ANNOTATION = "elastic-idl/proposal"
#: Why a TrainJob refuses the user env names Trainer sets itself, where a plain "reserved" says too little.
RESERVED_ENV_WHY = {
    ENV.NNODES: (
        "Trainer sets PET_NNODES to numNodes; PET_NNODES=min:max (the workaround of kubeflow/trainer#3559) "
        "makes torchrun elastic while Trainer still creates numNodes pods and needs every one to succeed, and "
        "the pod entrypoint takes its node range from the task anyway: set elastic_config.min_replicas and "
        "max_replicas instead"
    ),
}
_PROPOSAL_TEXT = (
    "spec.trainer.elasticPolicy is KEP-2903 (kubeflow/trainer#3654), a proposal: Trainer v2.3 has no such field"
)


def trainjob_losses(t: TaskView, *, elastic_policy: bool = False) -> list[TargetLoss]:
    """Every field ``t`` sets that a TrainJob (v2.3) cannot carry, in task order.

    The pods run the pod entrypoint with the task in their env, so what the launcher reads of the task
    (max_restarts, monitor_interval, the rendezvous options and timeouts, nproc_per_node, the backend) takes
    effect; the losses are what the TrainJob's controller would have to do.
    """
    out: list[TargetLoss] = []
    values = values_of(t)
    if values is not None and values.min_replicas < values.max_replicas:
        why = (
            f"a TrainJob has a fixed numNodes: rendered at max_replicas ({values.max_replicas}), the pods a "
            "PyTorchJob creates; the launcher still forms a group of min..max, but the runtime's Job needs every "
            "node pod to succeed"
        )
        if elastic_policy:
            why += "; the proposed spec.trainer.elasticPolicy (KEP-2903) states min:max, Trainer v2.3 does not read it"
        out.append(TargetLoss("elastic_config.min_replicas", TARGET, why))
    out += static_backend_loss(t, TARGET)
    worker = t.worker if t.worker.spec_path else None
    if worker is not None and worker.restart_policy:
        out.append(
            TargetLoss(
                f"{worker.spec_path}.restart_policy",
                TARGET,
                "the runtime's Job template decides how node pods restart; a TrainJob (runtimePatches) cannot set it",
            )
        )
    out += master_losses(t, TARGET)
    rp = t.run_policy
    if rp is not None:
        if rp.clean_pod_policy:
            out.append(TargetLoss("run_policy.clean_pod_policy", TARGET, "a TrainJob has no clean-pod policy"))
        if rp.ttl_seconds_after_finished:
            out.append(
                TargetLoss(
                    "run_policy.ttl_seconds_after_finished",
                    TARGET,
                    "a TrainJob has no TTL (the runtime's JobSet template may set one)",
                )
            )
        if rp.backoff_limit:
            out.append(
                TargetLoss(
                    "run_policy.backoff_limit",
                    TARGET,
                    "the runtime's Job template and JobSet failure policy bound restarts; a TrainJob cannot set them",
                )
            )
    return out


def render_trainjob(t: TaskView, name: str, namespace: str, c: Container, *, elastic_policy: bool) -> dict[str, Any]:
    """The TrainJob of a checked task ``t`` and container ``c`` (`elastic_idl._backend.targets` checks both)."""
    worker = t.worker if t.worker.spec_path else None
    resources = c.resources
    if worker is not None and worker.resources is not None:
        resources = replica_resources(worker.resources, f"{worker.spec_path}.resources")
    trainer: dict[str, Any] = {K.IMAGE: (worker.image if worker is not None else "") or c.image, K.COMMAND: c.command}
    if c.args:
        trainer[K.ARGS] = c.args
    trainer[K.ENV] = [*c.env, *rdzv_env(t, name, DEFAULT_PORT)]
    trainer["numNodes"] = node_count(t)
    values = values_of(t)
    if values is not None and not values.nproc_policy and values.nproc_per_node:
        # auto/cpu/gpu (our extension) leave it out: Trainer's own default is auto; the launcher reads the task.
        trainer["numProcPerNode"] = int(values.nproc_per_node)
    if resources:
        trainer["resourcesPerNode"] = {kind: dict(block) for kind, block in resources.items()}
    metadata: dict[str, Any] = {K.NAME: name, K.NAMESPACE: namespace, **metadata_of(c)}
    if elastic_policy and values is not None:
        trainer["elasticPolicy"] = {"minNodes": int(values.min_replicas), "maxNodes": int(values.max_replicas)}
        metadata[K.ANNOTATIONS] = {**metadata.get(K.ANNOTATIONS, {}), PROPOSAL_ANNOTATION: _PROPOSAL_TEXT}
    spec: dict[str, Any] = {"runtimeRef": dict(RUNTIME), "trainer": trainer}
    if t.run_policy is not None and t.run_policy.active_deadline_seconds:
        spec["activeDeadlineSeconds"] = int(t.run_policy.active_deadline_seconds)
    pod_metadata = metadata_of(c)
    if pod_metadata:
        # Labels and annotations reach the pods only through a patch of the runtime's node pod template.
        pod = {K.TEMPLATE: {K.METADATA: pod_metadata}}
        job = {K.NAME: NODE, K.TEMPLATE: {K.SPEC: pod}}
        spec["runtimePatches"] = [
            {
                "manager": PATCH_MANAGER,
                "trainingRuntimeSpec": {K.TEMPLATE: {K.SPEC: {"replicatedJobs": [job]}}},
            }
        ]
    return {K.API_VERSION: API_VERSION, K.KIND: KIND, K.METADATA: metadata, K.SPEC: spec}
