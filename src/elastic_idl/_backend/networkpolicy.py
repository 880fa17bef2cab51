"""Backend side: the NetworkPolicy that goes beside a rendered ``PyTorchJob``. Pure.

torch's rendezvous store (TCPStore) and NCCL/gloo have no authentication: whoever reaches a
pod's ports can join or disturb the job. `render_network_policy` admits ingress to the
job's pods only from the job's own pods, on every port (NCCL picks its own), selected by the
labels the training operator puts on every pod of the job. Who applies it, and what it does not
cover: docs/guide/rendering.md, "A NetworkPolicy beside the job".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elastic_idl._backend.pytorchjob import JobOptions, K, render_pytorchjob
from elastic_idl._errors import RenderError

__all__ = [
    "NETWORK_POLICY_API_VERSION",
    "NETWORK_POLICY_KIND",
    "OPERATOR_NAME",
    "POD_LABEL_JOB_NAME",
    "POD_LABEL_OPERATOR_NAME",
    "render_network_policy",
    "render_objects",
]

#: apiVersion and kind of the policy.
NETWORK_POLICY_API_VERSION = "networking.k8s.io/v1"
NETWORK_POLICY_KIND = "NetworkPolicy"
#: Labels the training operator (v1.8, v1.9) sets on every pod of a PyTorchJob, and its name there.
POD_LABEL_JOB_NAME = "training.kubeflow.org/job-name"
POD_LABEL_OPERATOR_NAME = "training.kubeflow.org/operator-name"
OPERATOR_NAME = "pytorchjob-controller"


class NK:
    """NetworkPolicy keys, defined once."""

    POD_SELECTOR = "podSelector"
    MATCH_LABELS = "matchLabels"
    POLICY_TYPES = "policyTypes"
    INGRESS = "ingress"
    INGRESS_TYPE = "Ingress"  # the one policy type rendered
    FROM = "from"


def render_network_policy(job: Mapping[str, Any]) -> dict[str, Any]:
    """The NetworkPolicy for a rendered job: ingress to its pods only from its own pods.

    Pure. Named and namespaced as the job, with the job's labels. The pods are selected by
    ``training.kubeflow.org/job-name: <job>`` and ``training.kubeflow.org/operator-name:
    pytorchjob-controller``; the one ingress rule admits the same pods (same namespace) on every
    port and protocol. Egress is not restricted.

    Args:
        job: A PyTorchJob as `render_pytorchjob` returns it (only its
            ``metadata`` name, namespace and labels are read).

    Raises:
        RenderError: The job has no name or namespace (``metadata.name``, ``metadata.namespace``).
    """
    meta = job.get(K.METADATA) if isinstance(job, Mapping) else None
    if not isinstance(meta, Mapping):
        raise RenderError("metadata", "the job has no metadata")
    name, namespace = meta.get(K.NAME), meta.get(K.NAMESPACE)
    if not isinstance(name, str) or not name:
        raise RenderError("metadata.name", "the job has no name")
    if not isinstance(namespace, str) or not namespace:
        raise RenderError("metadata.namespace", "the job has no namespace")
    selector = {POD_LABEL_JOB_NAME: name, POD_LABEL_OPERATOR_NAME: OPERATOR_NAME}
    metadata: dict[str, Any] = {K.NAME: name, K.NAMESPACE: namespace}
    labels = meta.get(K.LABELS)
    if labels:
        metadata[K.LABELS] = dict(labels)
    return {
        K.API_VERSION: NETWORK_POLICY_API_VERSION,
        K.KIND: NETWORK_POLICY_KIND,
        K.METADATA: metadata,
        K.SPEC: {
            NK.POD_SELECTOR: {NK.MATCH_LABELS: dict(selector)},
            NK.POLICY_TYPES: [NK.INGRESS_TYPE],
            NK.INGRESS: [{NK.FROM: [{NK.POD_SELECTOR: {NK.MATCH_LABELS: dict(selector)}}]}],
        },
    }


def render_objects(task: Any, options: JobOptions, *, task_type_version: int | None = None) -> list[dict[str, Any]]:
    """The objects to apply for a task: the PyTorchJob, then its NetworkPolicy when ``options.network_policy``.

    Arguments and errors as `render_pytorchjob`.
    """
    job = render_pytorchjob(task, options, task_type_version=task_type_version)
    return [job, render_network_policy(job)] if options.network_policy else [job]
