"""Backend side: task -> ``JobSet`` v0.12 (jobset.x-k8s.io/v1alpha2). Pure.

The shape Flyte 2's clustered tasks use (one replicated job of identical node pods on an Indexed Job,
DNS host names under the JobSet's headless Service), plus what an elastic task needs:

- the rendezvous endpoint, node 0 (`elastic_idl._backend.nodes.rdzv_env`), and a rendezvous id per
  JobSet restart attempt, ``<rdzv_id or name>-<attempt>``, from the pod label JobSet sets on every
  pod (`RESTART_ATTEMPT_LABEL`) through the downward API and Kubernetes' ``$(VAR)`` expansion;
- no DNS wait: the pod entrypoint keeps looking node 0 up until ``join_timeout`` (in-a-pod.md);
- JobSet creates the headless Service itself (``network.enableDNSHostnames``), with
  ``publishNotReadyAddresses`` (stated here: its default), so no Service is rendered;
- the training operator's ExitCode rule as a Job pod failure policy: the pod entrypoint's final
  failures (exit 1-4) fail the Job, a disruption (drain, preemption) is not counted, any other exit
  (a signal, 200: the store host is gone) recreates the pod against ``backoffLimit``;
- the elastic success rule (a worker succeeded) as the Job's success policy (one index succeeded).
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
    "FINAL_EXIT_CODES",
    "KIND",
    "RESTART_ATTEMPT_ENV",
    "RESTART_ATTEMPT_LABEL",
    "TARGET",
    "jobset_losses",
    "render_jobset",
]

TARGET = "jobset"
API_VERSION = "jobset.x-k8s.io/v1alpha2"
KIND = "JobSet"
#: The rendezvous port when the task sets none (torch's c10d default, what Trainer uses too).
DEFAULT_PORT = 29500
#: The label (and annotation) JobSet v0.12 puts on every Job and pod: the JobSet's restart attempt.
RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"
#: Container env var holding it (the downward API), which ``PET_RDZV_ID`` expands.
RESTART_ATTEMPT_ENV = "ELASTIC_IDL_RESTART_ATTEMPT"
#: The pod entrypoint's exit codes that end a job for good (invalid, usage, job failed, rendezvous never
#: completed: `elastic_idl.exit_codes`); every other non-zero exit is retryable.
FINAL_EXIT_CODES = (1, 2, 3, 4)
#: Job pod restart policies by the task's RestartPolicy enum: a Job takes Never or OnFailure only.
_JOB_RESTART = {0: "Never", 1: "OnFailure", 2: "OnFailure"}


def jobset_losses(t: TaskView) -> list[TargetLoss]:
    """Every field ``t`` sets that a JobSet (v0.12) cannot carry, in task order.

    The pods run the pod entrypoint with the task in their env, so what the launcher reads of the task
    takes effect (min:max included: the rendezvous forms at min..max nodes, and the Job succeeds when one
    node pod does, as an elastic PyTorchJob does).
    """
    out: list[TargetLoss] = []
    out += static_backend_loss(t, TARGET)
    worker = t.worker if t.worker.spec_path else None
    if worker is not None and worker.restart_policy == 2:
        out.append(
            TargetLoss(
                f"{worker.spec_path}.restart_policy",
                TARGET,
                "a Job's pods cannot be Always: rendered as OnFailure (the kubelet restarts a failed container)",
            )
        )
    out += master_losses(t, TARGET)
    rp = t.run_policy
    if rp is not None and rp.clean_pod_policy:
        out.append(
            TargetLoss(
                "run_policy.clean_pod_policy",
                TARGET,
                "a JobSet has no clean-pod policy: a finished Job stops its running pods and keeps the others "
                "until the JobSet is deleted (ttl_seconds_after_finished)",
            )
        )
    return out


def _job_spec(t: TaskView, c: Container, nodes: int, never: bool) -> dict[str, Any]:
    """The Indexed Job of the ``node`` replicated job: its pods, their restarts and its success rule."""
    worker = t.worker if t.worker.spec_path else None
    resources = c.resources
    if worker is not None and worker.resources is not None:
        resources = replica_resources(worker.resources, f"{worker.spec_path}.resources")
    container: dict[str, Any] = {
        K.NAME: NODE,
        K.IMAGE: (worker.image if worker is not None else "") or c.image,
        K.COMMAND: c.command,
    }
    if c.args:
        container[K.ARGS] = c.args
    container[K.ENV] = c.env
    if resources:
        container[K.RESOURCES] = {kind: dict(block) for kind, block in resources.items()}
    restart = _JOB_RESTART[worker.restart_policy if worker is not None else 0]
    pod: dict[str, Any] = {}
    metadata = metadata_of(c)
    if metadata:
        pod[K.METADATA] = metadata
    pod[K.SPEC] = {K.RESTART_POLICY: restart, K.CONTAINERS: [container]}
    spec: dict[str, Any] = {"parallelism": nodes, "completions": nodes, "completionMode": "Indexed"}
    rp = t.run_policy
    if never:
        spec["backoffLimit"] = 0
    elif rp is not None and rp.backoff_limit:
        spec["backoffLimit"] = int(rp.backoff_limit)
    if rp is not None and rp.active_deadline_seconds:
        spec["activeDeadlineSeconds"] = int(rp.active_deadline_seconds)
    if restart == "Never":  # a pod failure policy needs the pods' restartPolicy Never
        spec["podFailurePolicy"] = {
            "rules": [
                {
                    "action": "FailJob",
                    "onExitCodes": {"containerName": NODE, "operator": "In", "values": list(FINAL_EXIT_CODES)},
                },
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            ]
        }
    if t.elastic is not None:
        spec["successPolicy"] = {"rules": [{"succeededCount": 1}]}
    spec[K.TEMPLATE] = pod
    return spec


def _attempt_env(t: TaskView, name: str) -> list[dict[str, Any]]:
    """The restart attempt (downward API) and ``PET_RDZV_ID`` from it, for an elastic task."""
    values = values_of(t)
    if values is None:
        return []
    field = {"fieldPath": f"metadata.labels['{RESTART_ATTEMPT_LABEL}']"}
    return [
        {K.NAME: RESTART_ATTEMPT_ENV, "valueFrom": {"fieldRef": field}},
        {K.NAME: ENV.RDZV_ID, K.VALUE: f"{values.rdzv_id or name}-$({RESTART_ATTEMPT_ENV})"},
    ]


def render_jobset(t: TaskView, name: str, namespace: str, c: Container, *, never: bool) -> dict[str, Any]:
    """The JobSet of a checked task ``t`` and container ``c`` (`elastic_idl._backend.targets` checks both)."""
    nodes = node_count(t)
    env = [*c.env, *rdzv_env(t, name, DEFAULT_PORT), *_attempt_env(t, name)]
    c = c._replace(env=env)
    job: dict[str, Any] = {K.NAME: NODE, K.REPLICAS: 1, K.TEMPLATE: {K.SPEC: _job_spec(t, c, nodes, never)}}
    spec: dict[str, Any] = {
        "replicatedJobs": [job],
        "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
        "successPolicy": {"operator": "All", "targetReplicatedJobs": [NODE]},
    }
    if t.run_policy is not None and t.run_policy.ttl_seconds_after_finished:
        spec["ttlSecondsAfterFinished"] = int(t.run_policy.ttl_seconds_after_finished)
    metadata: dict[str, Any] = {K.NAME: name, K.NAMESPACE: namespace, **metadata_of(c)}
    return {K.API_VERSION: API_VERSION, K.KIND: KIND, K.METADATA: metadata, K.SPEC: spec}
