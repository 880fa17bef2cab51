"""One task, three render targets: PyTorchJob, Kubeflow Trainer v2.3 TrainJob, JobSet v0.12. Pure.

`render_target` renders on any of them and reports, per target, every task field the target cannot
carry (`elastic_idl.TargetLoss`); ``strict=True`` refuses a lossy render (`elastic_idl.TargetLossError`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from elastic_idl._backend import jobset, trainjob
from elastic_idl._backend.common import (
    check_namespace,
    check_option_text,
    check_rdzv_host_reachable,
    container,
    task_for_render,
)
from elastic_idl._backend.networkpolicy import render_objects
from elastic_idl._backend.nodes import check_node_name, node_count
from elastic_idl._backend.pytorchjob import ELASTIC_WORKER_RESTART_POLICY, RESERVED_ENV, STRICT, JobOptions
from elastic_idl._errors import RenderError, TargetLoss, TargetLossError, ValidationError
from elastic_idl._task.encoding import to_custom
from elastic_idl._task.validate import check

__all__ = ["DEFAULT_TARGET", "TARGETS", "RenderedTarget", "render_target"]

PYTORCHJOB = "pytorchjob"
#: The render targets, the default first.
TARGETS: tuple[str, ...] = (PYTORCHJOB, trainjob.TARGET, jobset.TARGET)
DEFAULT_TARGET = PYTORCHJOB


class RenderedTarget(NamedTuple):
    """What `render_target` returns.

    Attributes:
        target: The target rendered.
        objects: The Kubernetes objects to create, as plain dicts (the job first).
        losses: Every task field the target cannot carry, in task order (empty for a PyTorchJob).
    """

    target: str
    objects: list[dict[str, Any]]
    losses: tuple[TargetLoss, ...]


def _check_node_options(options: JobOptions, target: str) -> None:
    """The PyTorchJob-only options, refused on the other targets when they are not their defaults."""
    if options.mode != STRICT:
        raise RenderError(
            "mode", f"{options.mode!r}: the upstream mode is Flyte 1.x's PyTorchJob; a {target} renders strict only"
        )
    if options.network_policy is not False:
        raise RenderError("network_policy", f"the NetworkPolicy is rendered for a PyTorchJob only, not a {target}")
    policy = options.elastic_worker_restart_policy
    if target == trainjob.TARGET and policy != ELASTIC_WORKER_RESTART_POLICY:
        raise RenderError(
            "elastic_worker_restart_policy",
            f"{policy!r}: a TrainJob's node pods restart as its runtime's Job template says; it cannot be set",
        )
    if target == jobset.TARGET and policy not in (ELASTIC_WORKER_RESTART_POLICY, "Never"):
        raise RenderError("elastic_worker_restart_policy", f"{policy!r} is not one of ExitCode, Never")


def render_target(
    task: Any,
    options: JobOptions,
    *,
    target: str = DEFAULT_TARGET,
    task_type_version: int | None = None,
    strict: bool = False,
    trainjob_elastic_policy: bool = False,
) -> RenderedTarget:
    """Render a task on one target, with the report of what that target cannot carry.

    Pure: returns new dicts and talks to nobody. Every target's pods run the pod entrypoint with the
    task in their env (``ELASTIC_IDL_TASK``), so what the launcher reads of the task takes effect on
    each; the losses are what the target's controller cannot do (docs/guide/targets.md has the tables).

    - ``pytorchjob``: `elastic_idl.render_objects` (the job, and with ``options.network_policy`` a
      NetworkPolicy); no losses.
    - ``trainjob``: a Kubeflow Trainer v2.3 TrainJob on the ``torch-distributed`` ClusterTrainingRuntime:
      ``spec.trainer`` (image, command, args, env, numNodes = max_replicas for an elastic task,
      numProcPerNode, resourcesPerNode), ``activeDeadlineSeconds``, and the labels and annotations on the
      pods through ``runtimePatches``. The env adds ``PET_RDZV_ENDPOINT`` (node 0, port 29500 unless the
      task sets rdzv_host/rdzv_port), which Trainer does not give.
      ``trainjob_elastic_policy=True`` adds KEP-2903's proposed ``spec.trainer.elasticPolicy {minNodes,
      maxNodes}`` and the annotation ``elastic-idl/proposal`` saying it is a proposal.
    - ``jobset``: a JobSet v0.12 with one replicated job ``node`` (an Indexed Job of numNodes pods), DNS
      host names, a rendezvous id per JobSet restart attempt, the ExitCode restart rule as a pod failure
      policy and the elastic success rule as the Job's success policy.

    Args:
        task: The task, as `elastic_idl.render_pytorchjob` takes it.
        options: The job's name, image, entrypoint, ... (`elastic_idl.JobOptions`). On trainjob and jobset,
            ``mode`` must be strict and ``network_policy`` false; a TrainJob takes no
            ``elastic_worker_restart_policy`` but the default.
        target: ``pytorchjob`` (default), ``trainjob`` or ``jobset``.
        task_type_version: As for `elastic_idl.render_pytorchjob`.
        strict: Refuse a render that loses a task field (TargetLossError) instead of reporting it.
        trainjob_elastic_policy: On trainjob: render the proposed elasticPolicy (KEP-2903).

    Returns:
        The target, the objects and the losses (`RenderedTarget`).

    Raises:
        RenderError: An unknown target, an option the target does not take, or what
            `elastic_idl.render_pytorchjob` refuses.
        TargetLossError: ``strict`` and the target cannot carry a field the task sets.
        ValidationError, DecodeError, UnsupportedVersionError: As `elastic_idl.render_pytorchjob`.
    """
    if target not in TARGETS:
        raise RenderError("target", f"{target!r} is not one of {', '.join(TARGETS)}")
    if not isinstance(options, JobOptions):
        raise TypeError(f"render_target(): options must be a JobOptions, got {type(options).__name__}")
    if trainjob_elastic_policy and target != trainjob.TARGET:
        raise RenderError("trainjob_elastic_policy", f"applies to the trainjob target only, not {target}")
    if target == PYTORCHJOB:
        return RenderedTarget(target, render_objects(task, options, task_type_version=task_type_version), ())
    _check_node_options(options, target)
    t = task_for_render(task, task_type_version)
    found = t.rule_violations(check)
    if found:
        raise ValidationError(list(found))
    check_option_text(options)
    check_rdzv_host_reachable(t, node_count(t))
    check_node_name(options.name, node_count(t))
    check_namespace(options.namespace)
    if target == trainjob.TARGET:
        losses = trainjob.trainjob_losses(t, elastic_policy=trainjob_elastic_policy)
    else:
        losses = jobset.jobset_losses(t)
    if strict and losses:
        raise TargetLossError(target, losses)
    if target == trainjob.TARGET:
        c = container(
            t,
            to_custom(t),
            options,
            reserved=RESERVED_ENV,
            default_port=trainjob.DEFAULT_PORT,
            reserved_why=trainjob.RESERVED_ENV_WHY,
        )
        obj = trainjob.render_trainjob(t, options.name, options.namespace, c, elastic_policy=trainjob_elastic_policy)
    else:
        reserved = RESERVED_ENV | {jobset.RESTART_ATTEMPT_ENV}
        c = container(t, to_custom(t), options, reserved=reserved, default_port=jobset.DEFAULT_PORT)
        never = options.elastic_worker_restart_policy == "Never"
        obj = jobset.render_jobset(t, options.name, options.namespace, c, never=never)
    return RenderedTarget(target, [obj], tuple(losses))
