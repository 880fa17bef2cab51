"""The PyTorchJob for a flyteidl ``TaskTemplate``: the input propeller really receives. Pure.

A dry-run tool: what propeller with the elastic-idl-pytorch plugin (go/flyteplugin) would create
for a task, without a cluster. The real path is propeller (docs/guide/flyte.md);
tests/test_flytekit_template.py holds this module equal to the plugin's BuildResource, whole
jobs, on every template it has (docs/guide/flytekit.md: the normalisation and the deliberate
differences).

`elastic_idl.render_pytorchjob` takes the task and the render options one
by one, as the Go backend does. This adapter reads them from a serialized task
template (what ``pyflyte package`` / ``register`` upload) and renders through it,
as propeller (flyteplugins v1.16.8's pod machinery, ``flytek8s.ToK8sPodSpec``)
would build the pods. Every field of the template is carried, refused with a
`RenderError` naming it, or not the pods' business (the
workflow engine's); `FIELDS` says which, field by field, and a field this
module does not know (a newer flyteidl) is refused, never dropped:

- the task from ``custom`` (a ``pytorch`` template, ``task_type_version`` 0 or 1);
- image, command, args, env and resources from ``TaskTemplate.container``; or,
  when the template carries ``k8s_pod`` (flytekit's form for any pod template,
  e.g. ``increase_shared_mem``), from its primary container
  (``config["primary_container_name"]``), whose other fields (volume mounts,
  probes, ...) are kept, as are the pod spec's volumes, other containers and
  every pod-level field a PyTorchJob replica template can hold, and the pod
  metadata's labels and annotations;
- ``extended_resources.shared_memory`` (``@task(shared_memory=...)``) as a
  memory-backed ``emptyDir`` mounted in the training container, as propeller does;
- ``security_context.secrets`` (``@task(secret_requests=...)``) as the pod label
  ``inject-flyte-secrets: "true"`` and one ``flyte.secrets/s<i>`` annotation per
  secret, which propeller's secrets webhook reads;
- the resources of the training container and the init containers completed as propeller
  completes them (a request from the limit, a limit from the request, CPU and memory from the
  ``default_cpus`` / ``default_memory`` options), the other containers' CPU and memory written
  ``0`` where unset; ``terminationMessagePolicy`` (a container target), the pod's
  ``restartPolicy: Never`` and a kubeflow-shape Worker's ``_F_WN``, as propeller sets them; no env
  of the renderer's own (``pyflyte-execute`` reads the task from its template);
- ``metadata.metadata`` (the task's Kubernetes labels and annotations) on the
  job object, under the caller's, as propeller's plugin manager sets them;
- ``extended_resources.gpu_accelerator`` (``@task(accelerator=...)``) and
  ``metadata.interruptible`` through the keys of propeller's deployment
  configuration that carry them (``plugins.k8s``: the GPU node labels, the
  interruptible tolerations and node selectors). Those are the deployment's, so
  the caller states them as keyword options; a template that needs one the
  caller did not state is refused, naming the field and the option.

The training container is named ``pytorch`` with the ``pytorchjob-port`` (the
operator finds both by name). A field the operator's CRD (v1.9) does not declare
is an error naming it, never dropped silently (the API server would prune it).
Needs flyteidl (it comes with flytekit), never flytekit itself.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Mapping, Sequence
from typing import Any

from google.protobuf import json_format

import elastic_idl as ei
from elastic_idl._backend.pytorchjob import ELASTIC_WORKER_RESTART_POLICY, STRICT
from elastic_idl._task.resources import parse_quantity
from elastic_idl.flytekit._runtime import RESOURCE_NAMES, ResourceName

__all__ = [
    "CARRIED",
    "CONTAINER_FIELDS",
    "ENGINE",
    "FIELDS",
    "POD_SPEC_FIELDS",
    "REFUSED",
    "render_pytorchjob_from_template",
]

#: The config key that names the primary container of a ``k8s_pod`` template.
PRIMARY_CONTAINER_KEY = "primary_container_name"
#: The renderer's training container, the operator's port name (see elastic_idl.render_pytorchjob).
TRAINING_CONTAINER = "pytorch"
PORT_NAME = "pytorchjob-port"
#: Pod spec fields a PyTorchJob replica template holds (training operator v1.9 CRD, PodSpec).
POD_SPEC_FIELDS = frozenset(
    {
        "activeDeadlineSeconds",
        "affinity",
        "automountServiceAccountToken",
        "containers",
        "dnsConfig",
        "dnsPolicy",
        "enableServiceLinks",
        "ephemeralContainers",
        "hostAliases",
        "hostIPC",
        "hostNetwork",
        "hostPID",
        "hostUsers",
        "hostname",
        "hostnameOverride",
        "imagePullSecrets",
        "initContainers",
        "nodeName",
        "nodeSelector",
        "os",
        "overhead",
        "preemptionPolicy",
        "priority",
        "priorityClassName",
        "readinessGates",
        "resourceClaims",
        "resources",
        "restartPolicy",
        "runtimeClassName",
        "schedulerName",
        "schedulingGates",
        "schedulingGroup",
        "securityContext",
        "serviceAccount",
        "serviceAccountName",
        "setHostnameAsFQDN",
        "shareProcessNamespace",
        "subdomain",
        "terminationGracePeriodSeconds",
        "tolerations",
        "topologySpreadConstraints",
        "volumes",
    }
)
#: Container fields a PyTorchJob replica template holds (training operator v1.9 CRD, Container).
CONTAINER_FIELDS = frozenset(
    {
        "args",
        "command",
        "env",
        "envFrom",
        "image",
        "imagePullPolicy",
        "lifecycle",
        "livenessProbe",
        "name",
        "ports",
        "readinessProbe",
        "resizePolicy",
        "resources",
        "restartPolicy",
        "restartPolicyRules",
        "securityContext",
        "startupProbe",
        "stdin",
        "stdinOnce",
        "terminationMessagePath",
        "terminationMessagePolicy",
        "tty",
        "volumeDevices",
        "volumeMounts",
        "workingDir",
    }
)

# --------------------------------------------------------------------------- every field of the template

#: What `FIELDS` says of a field: carried into the job as propeller carries it ...
CARRIED = "carried"
#: ... refused with a RenderError naming it (propeller drops it, or needs what a pure function has not) ...
REFUSED = "refused"
#: ... or the workflow engine's business, not the pods' (propeller itself keeps it out of the job).
ENGINE = "engine"

_POD_TEMPLATE_HINT = "@task(pod_template=PodTemplate(...))"

#: Every field of the messages the renderer reads, by its path in the TaskTemplate, with what
#: happens to it and why. A set field whose path is missing here (a flyteidl newer than the
#: 1.16 line) is refused. Sub-fields of an ENGINE or REFUSED message are not listed.
FIELDS: Mapping[str, tuple[str, str]] = {
    # TaskTemplate
    "id": (ENGINE, "the task's identity: propeller names and labels the job from the execution (pass name=, labels=)"),
    "type": (CARRIED, "must be 'pytorch'"),
    "metadata": (CARRIED, "read field by field (metadata.*)"),
    "interface": (
        ENGINE,
        "inputs and outputs: the task's own command reads and writes them (pyflyte-execute --inputs ...)",
    ),
    "custom": (CARRIED, "the task: elastic policy, replicas, run policy"),
    "container": (CARRIED, "read field by field (container.*)"),
    "k8s_pod": (CARRIED, "read field by field (k8s_pod.*)"),
    "sql": (REFUSED, "a SQL target is no pod: propeller builds pods from container or k8s_pod only"),
    "task_type_version": (CARRIED, "0 or 1: the shape of custom"),
    "security_context": (CARRIED, "read field by field (security_context.*)"),
    "extended_resources": (CARRIED, "read field by field (extended_resources.*)"),
    "config": (
        CARRIED,
        f"{PRIMARY_CONTAINER_KEY} names the k8s_pod's primary container; link_type and port are the "
        "console's links; any other key is refused (propeller's pytorch path reads none)",
    ),
    # TaskMetadata
    "metadata.discoverable": (ENGINE, "output caching: propeller asks the data catalog before it runs the task"),
    "metadata.runtime": (ENGINE, "which SDK wrote the template: flyteadmin and the console show it"),
    "metadata.timeout": (
        ENGINE,
        "propeller aborts the task (deletes the job) when it runs longer; a limit the job enforces by "
        "itself is the task's run_policy.active_deadline_seconds",
    ),
    "metadata.retries": (
        ENGINE,
        "propeller runs the whole task again (a new job); within one job, the task's max_restarts, "
        "restart_policy and run_policy.backoff_limit retry",
    ),
    "metadata.discovery_version": (ENGINE, "output caching: the cache key's version"),
    "metadata.deprecated_error_message": (ENGINE, "flyteadmin's message for a deprecated task"),
    "metadata.interruptible": (
        CARRIED,
        "the interruptible tolerations, node selector and node selector requirement of propeller's "
        "deployment (keyword options interruptible_*; non_interruptible_node_selector_requirement otherwise)",
    ),
    "metadata.cache_serializable": (ENGINE, "output caching: propeller serializes runs with the same cache key"),
    "metadata.tags": (ENGINE, "flyteadmin and the console's tags"),
    "metadata.pod_template_name": (
        REFUSED,
        "propeller reads the PodTemplate of that name from the cluster (the execution's namespace) and "
        "builds the pods on top of it; a pure function cannot read the cluster: put its settings into "
        f"the task's own pod template ({_POD_TEMPLATE_HINT}), which is carried, and drop pod_template_name",
    ),
    "metadata.cache_ignore_input_vars": (ENGINE, "output caching: inputs left out of the cache key"),
    "metadata.is_eager": (ENGINE, "flytekit's eager-workflow flag, read by the SDK, not by propeller's pod machinery"),
    "metadata.generates_deck": (ENGINE, "the console shows the task's deck"),
    "metadata.metadata": (
        CARRIED,
        "labels and annotations of the job object (under the caller's), as propeller's plugin manager sets them",
    ),
    # Container
    "container.image": (CARRIED, "the training container's image"),
    "container.command": (CARRIED, "the training container's command"),
    "container.args": (CARRIED, "the training container's args"),
    "container.resources": (CARRIED, "the training container's resources"),
    "container.env": (CARRIED, "the training container's env"),
    "container.config": (
        REFUSED,
        "propeller's pod machinery does not read the deprecated Container.config: it would be dropped; "
        "remove it (task settings belong in custom)",
    ),
    "container.ports": (
        REFUSED,
        "propeller builds the container without the template's ports (flyteplugins' BuildRawContainer); "
        f"declare them on the primary container of a pod template ({_POD_TEMPLATE_HINT}), which is carried",
    ),
    "container.data_config": (
        CARRIED,
        "disabled: nothing to carry (propeller adds nothing either); enabled: refused (Flyte CoPilot's "
        "init container and sidecar come from propeller's co-pilot configuration)",
    ),
    "container.architecture": (
        REFUSED,
        "propeller does not schedule by Container.architecture: it would be dropped; pin the nodes with "
        f"nodeSelector kubernetes.io/arch in a pod template ({_POD_TEMPLATE_HINT})",
    ),
    # K8sPod
    "k8s_pod.metadata": (CARRIED, "labels and annotations of every pod (under the caller's)"),
    "k8s_pod.pod_spec": (CARRIED, "the pod of every replica, its primary container the training container"),
    "k8s_pod.data_config": (CARRIED, "as container.data_config"),
    "k8s_pod.primary_container_name": (
        CARRIED,
        f"propeller reads the primary container's name from config['{PRIMARY_CONTAINER_KEY}'] only: "
        "this field must be empty or say the same",
    ),
    # ExtendedResources
    "extended_resources.gpu_accelerator": (
        CARRIED,
        "node affinity and tolerations on the GPU node labels of propeller's deployment (keyword options "
        "gpu_*), on every replica whose pods request a GPU",
    ),
    "extended_resources.gpu_accelerator.device": (CARRIED, "gpu_device_node_label In [device], and its toleration"),
    "extended_resources.gpu_accelerator.unpartitioned": (
        CARRIED,
        "gpu_unpartitioned_node_selector_requirement, else gpu_partition_size_node_label DoesNotExist; "
        "gpu_unpartitioned_toleration when given",
    ),
    "extended_resources.gpu_accelerator.partition_size": (
        CARRIED,
        "gpu_partition_size_node_label In [size], and its toleration",
    ),
    "extended_resources.shared_memory": (CARRIED, "a memory-backed emptyDir mounted in the training container"),
    "extended_resources.shared_memory.mount_path": (CARRIED, "where the training container mounts it"),
    "extended_resources.shared_memory.mount_name": (CARRIED, "the volume's name"),
    "extended_resources.shared_memory.size_limit": (CARRIED, "the emptyDir's sizeLimit"),
    # SecurityContext
    "security_context.run_as": (CARRIED, "read field by field (security_context.run_as.*): each is refused"),
    "security_context.run_as.iam_role": (
        REFUSED,
        "propeller takes the IAM role from the execution, never from the task template: it would be "
        "dropped; give it to the execution, or annotate the service account in a pod template",
    ),
    "security_context.run_as.k8s_service_account": (
        REFUSED,
        "propeller takes the pods' service account from the execution (pyflyte run --service-account, "
        "the launch plan), never from the task template: it would be dropped; to pin it, set "
        f"serviceAccountName in the task's pod template ({_POD_TEMPLATE_HINT})",
    ),
    "security_context.run_as.oauth2_client": (
        REFUSED,
        "propeller's pod machinery reads no identity from the task template: it would be dropped; "
        "request the client secret with secret_requests",
    ),
    "security_context.run_as.execution_identity": (
        REFUSED,
        "propeller labels the pods with the execution's identity, not the task template's: it would be dropped",
    ),
    "security_context.secrets": (
        CARRIED,
        "label inject-flyte-secrets and one flyte.secrets/s<i> annotation per secret on the job and every "
        "pod, for propeller's secrets webhook",
    ),
    "security_context.secrets.group": (CARRIED, "in the secret's annotation"),
    "security_context.secrets.group_version": (CARRIED, "in the secret's annotation"),
    "security_context.secrets.key": (CARRIED, "in the secret's annotation"),
    "security_context.secrets.mount_requirement": (CARRIED, "in the secret's annotation (a known MountType)"),
    "security_context.secrets.env_var": (CARRIED, "in the secret's annotation"),
    "security_context.tokens": (
        REFUSED,
        "propeller's pod machinery does not read OAuth2 token requests: they would be dropped; request "
        "the credentials as secrets (secret_requests)",
    ),
}
#: Messages whose set fields are looked up in FIELDS one by one.
_WALKED = frozenset(
    {
        "metadata",
        "container",
        "k8s_pod",
        "security_context",
        "security_context.run_as",
        "security_context.secrets",
        "extended_resources",
        "extended_resources.gpu_accelerator",
        "extended_resources.shared_memory",
    }
)
#: TaskTemplate.config keys and what they are (any other key is refused).
_CONFIG_KEYS: Mapping[str, str] = {
    PRIMARY_CONTAINER_KEY: CARRIED,
    "link_type": ENGINE,  # flytekit's ClassDecorator (e.g. @vscode): the console's link
    "port": ENGINE,  # the same decorator's port for that link
}

# --------------------------------------------------------------------------- propeller's own constants

#: What the renderer sets on the training container itself; the rest of the primary container is kept.
_RENDERED = frozenset({"name", "image", "command", "args", "env", "resources", "ports"})
#: The GPU resource: flyteidl's GPU as the renderer writes it (flyteplugins' default gpu-resource-name).
_GPU = RESOURCE_NAMES[ResourceName.GPU]
#: flytekit writes a GPU request in a pod spec as "gpu" (ResourceName, lower-cased); Kubernetes' name.
_POD_RESOURCE_NAMES = {"gpu": _GPU}
#: propeller's secrets webhook: the pod label it selects on, and the annotation prefix of each secret
#: (flyteplugins' pluginmachinery/utils/secrets), the secret as proto text in base32 with this
#: alphabet and no padding (pluginmachinery/encoding), at most 256 KiB each.
_SECRETS_LABEL = ("inject-flyte-secrets", "true")
_SECRET_ANNOTATION = "flyte.secrets/s"
_SECRET_MAX = 256 * 1024
_BASE32 = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", "abcdefghijklmnopqrstuvwxyz123456")
_TEMPLATE_NAME = "flyteidl.core.TaskTemplate"
_PYTORCH = "pytorch"

#: The keyword options that state propeller's deployment configuration, and its keys (plugins.k8s).
_PLATFORM_KEYS: Mapping[str, str] = {
    "gpu_device_node_label": "gpu-device-node-label",
    "gpu_partition_size_node_label": "gpu-partition-size-node-label",
    "gpu_unpartitioned_node_selector_requirement": "gpu-unpartitioned-node-selector-requirement",
    "gpu_unpartitioned_toleration": "gpu-unpartitioned-toleration",
    "interruptible_tolerations": "interruptible-tolerations",
    "interruptible_node_selector": "interruptible-node-selector",
    "interruptible_node_selector_requirement": "interruptible-node-selector-requirement",
    "non_interruptible_node_selector_requirement": "non-interruptible-node-selector-requirement",
}
#: flyteplugins v1.16.8's defaults of the two GPU node labels: named in errors, never assumed.
_DEFAULT_DEVICE_LABEL = "k8s.amazonaws.com/accelerator"
_DEFAULT_PARTITION_LABEL = "k8s.amazonaws.com/gpu-partition-size"
_REQUIREMENT_KEYS = frozenset({"key", "operator", "values"})
#: flytek8s.BuildRawContainer's termination message policy (a container target's container).
_TERMINATION_MESSAGE_POLICY = "FallbackToLogsOnError"
#: The env var flyteplugins' pytorch plugin gives a kubeflow-shape Worker: its pod's name (flytekit
#: names its error files after it when distributed error aggregation is on).
_WORKER_NAME_ENV = "_F_WN"
#: Resources propeller completes on a primary or init container (flytek8s.ApplyResourceOverrides):
#: CPU and memory always, from the platform defaults when neither request nor limit is set ...
_ALWAYS_COMPLETED = ("cpu", "memory")
#: ... ephemeral storage and the GPU only when one of the two is set.
_COMPLETED_WHEN_SET = ("ephemeral-storage", _GPU)
_TOLERATION_KEYS = frozenset({"key", "operator", "value", "effect", "tolerationSeconds"})


def _as_template(template: Any) -> Any:
    from flyteidl.core import tasks_pb2

    if isinstance(template, (bytes, bytearray, memoryview)):
        msg = tasks_pb2.TaskTemplate()
        try:
            msg.ParseFromString(bytes(template))
        except Exception as exc:  # protobuf's DecodeError
            raise ei.DecodeError("", f"not a serialized {_TEMPLATE_NAME}: {exc}", format="binary") from None
        return msg
    if hasattr(template, "to_flyte_idl") and not hasattr(template, "DESCRIPTOR"):
        template = template.to_flyte_idl()  # flytekit's TaskTemplate model
    descriptor = getattr(template, "DESCRIPTOR", None)
    if getattr(descriptor, "full_name", None) != _TEMPLATE_NAME:
        raise ei.RenderError(
            "template", f"expected a {_TEMPLATE_NAME} (message or bytes), got {type(template).__name__}"
        )
    return template


# --------------------------------------------------------------------------- the audit


def _unknown_field(msg: Any, path: str) -> None:
    from google.protobuf import unknown_fields

    found = unknown_fields.UnknownFieldSet(msg)
    if len(found):
        where = f"{path}.{found[0].field_number}" if path else str(found[0].field_number)
        raise ei.RenderError(
            where,
            f"field number {found[0].field_number} of {msg.DESCRIPTOR.full_name} is unknown to the installed "
            "flyteidl: whether propeller carries it cannot be told, so it is not dropped silently; "
            "install the flyteidl that wrote the template",
        )


def _audit(msg: Any, path: str = "", at: str = "") -> None:
    """Refuse every set field FIELDS does not carry or leave to the engine; walk the messages it reads."""
    _unknown_field(msg, at)
    for fd, _ in msg.ListFields():
        key = f"{path}.{fd.name}" if path else fd.name
        where = f"{at}.{fd.name}" if at else fd.name
        kind, why = FIELDS.get(key, ("", ""))
        if not kind:
            raise ei.RenderError(
                where,
                f"a field of {msg.DESCRIPTOR.full_name} this renderer does not know (flyteidl newer than the "
                "1.16 line?): whether propeller carries it cannot be told, so it is not dropped silently",
            )
        if kind == REFUSED:
            raise ei.RenderError(where, why)
        if key not in _WALKED:
            continue
        value = getattr(msg, fd.name)
        if fd.is_repeated:
            for i, item in enumerate(value):
                _audit(item, key, f"{where}[{i}]")
        else:
            _audit(value, key, where)


def _check_config(tmpl: Any) -> None:
    for key in sorted(tmpl.config):
        if key not in _CONFIG_KEYS:
            raise ei.RenderError(
                f"config.{key}",
                f"propeller's pytorch path reads only config['{PRIMARY_CONTAINER_KEY}'] (and the console "
                f"reads {', '.join(k for k, v in _CONFIG_KEYS.items() if v == ENGINE)}): the key would be "
                "ignored; remove it",
            )


def _check_data_config(tmpl: Any) -> None:
    for target in ("container", "k8s_pod"):
        if tmpl.HasField(target) and getattr(tmpl, target).data_config.enabled:
            raise ei.RenderError(
                f"{target}.data_config.enabled",
                "Flyte CoPilot (raw-container data loading) adds an init container and a sidecar built from "
                "propeller's co-pilot configuration, which a pure function does not have; a pytorch task "
                "reads its inputs itself (pyflyte-execute): disable data_config",
            )


# --------------------------------------------------------------------------- propeller's deployment keys


class _Platform:
    """The keyword options that state propeller's deployment configuration, checked."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.given = {k for k, v in options.items() if v is not None}
        self.device_label = _label_key("gpu_device_node_label", options["gpu_device_node_label"])
        self.partition_label = _label_key("gpu_partition_size_node_label", options["gpu_partition_size_node_label"])
        self.unpartitioned_requirement = _requirement(
            "gpu_unpartitioned_node_selector_requirement", options["gpu_unpartitioned_node_selector_requirement"]
        )
        self.unpartitioned_toleration = _toleration(
            "gpu_unpartitioned_toleration", options["gpu_unpartitioned_toleration"]
        )
        tolerations = options["interruptible_tolerations"]
        if tolerations is not None and (isinstance(tolerations, (str, bytes)) or not isinstance(tolerations, Sequence)):
            raise ei.RenderError("interruptible_tolerations", "expected a list of tolerations")
        self.interruptible_tolerations: list[dict[str, Any]] = []
        for i, item in enumerate(tolerations or []):
            toleration = _toleration(f"interruptible_tolerations[{i}]", item)
            if toleration is None:
                raise ei.RenderError(f"interruptible_tolerations[{i}]", "expected a toleration, got None")
            self.interruptible_tolerations.append(toleration)
        selector = options["interruptible_node_selector"]
        if selector is not None and not (
            isinstance(selector, Mapping)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in selector.items())
        ):
            raise ei.RenderError("interruptible_node_selector", "expected a mapping of label names to values")
        self.interruptible_node_selector = dict(selector or {})
        self.interruptible_requirement = _requirement(
            "interruptible_node_selector_requirement", options["interruptible_node_selector_requirement"]
        )
        self.non_interruptible_requirement = _requirement(
            "non_interruptible_node_selector_requirement", options["non_interruptible_node_selector_requirement"]
        )

    def interruptible_stated(self) -> bool:
        return bool(
            self.given
            & {"interruptible_tolerations", "interruptible_node_selector", "interruptible_node_selector_requirement"}
        )


def _label_key(option: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ei.RenderError(option, f"expected a node label name such as {_DEFAULT_DEVICE_LABEL!r}")
    return value


def _fields_of(option: str, value: Any, allowed: frozenset[str], what: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ei.RenderError(option, f"expected a {what} as Kubernetes writes it, e.g. {{'key': ..., ...}}")
    unknown = sorted(str(k) for k in value if k not in allowed)
    if unknown:
        raise ei.RenderError(f"{option}.{unknown[0]}", f"not a field of a {what} ({', '.join(sorted(allowed))})")
    return copy.deepcopy(dict(value))


def _requirement(option: str, value: Any) -> dict[str, Any] | None:
    return _fields_of(option, value, _REQUIREMENT_KEYS, "node selector requirement")


def _toleration(option: str, value: Any) -> dict[str, Any] | None:
    return _fields_of(option, value, _TOLERATION_KEYS, "toleration")


def _option_hint(*options: str) -> str:
    return ", ".join(f"{o}=... (propeller's plugins.k8s {_PLATFORM_KEYS[o]})" for o in options)


def _check_platform_needed(tmpl: Any, platform: _Platform) -> None:
    """Refuse a field whose carrying depends on propeller's deployment configuration the caller did not state."""
    meta = tmpl.metadata
    if meta.WhichOneof("interruptible_value") and meta.interruptible and not platform.interruptible_stated():
        raise ei.RenderError(
            "metadata.interruptible",
            "propeller schedules an interruptible task by its deployment's interruptible settings, which the "
            "template does not hold: pass them, "
            + _option_hint(
                "interruptible_tolerations", "interruptible_node_selector", "interruptible_node_selector_requirement"
            )
            + " (interruptible_tolerations=[] when your propeller sets none)",
        )
    if not tmpl.HasField("extended_resources") or not tmpl.extended_resources.HasField("gpu_accelerator"):
        return
    acc = tmpl.extended_resources.gpu_accelerator
    field = "extended_resources.gpu_accelerator"
    if acc.device and platform.device_label is None:
        raise ei.RenderError(
            f"{field}.device",
            "propeller selects the GPU device by a node label of its deployment (flyteplugins' default "
            f"{_DEFAULT_DEVICE_LABEL}): pass " + _option_hint("gpu_device_node_label"),
        )
    which = acc.WhichOneof("partition_size_value")
    if which == "partition_size" and platform.partition_label is None:
        raise ei.RenderError(
            f"{field}.partition_size",
            "propeller selects the GPU partition by a node label of its deployment (flyteplugins' default "
            f"{_DEFAULT_PARTITION_LABEL}): pass " + _option_hint("gpu_partition_size_node_label"),
        )
    if (
        which == "unpartitioned"
        and acc.unpartitioned
        and platform.partition_label is None
        and platform.unpartitioned_requirement is None
    ):
        raise ei.RenderError(
            f"{field}.unpartitioned",
            "propeller keeps an unpartitioned GPU off the nodes with a partition-size label of its deployment: "
            "pass " + _option_hint("gpu_partition_size_node_label", "gpu_unpartitioned_node_selector_requirement"),
        )


def _add_required(spec: dict[str, Any], *requirements: Mapping[str, Any]) -> None:
    """Add node selector requirements to every required term of the pod's node affinity (flytek8s'
    AddRequiredNodeSelectorRequirements): terms are OR'd, so each one gets them; none: one new term."""
    affinity = spec.setdefault("affinity", {})
    node = affinity.setdefault("nodeAffinity", {})
    required = node.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or []
    if terms:
        for term in terms:
            term.setdefault("matchExpressions", []).extend(copy.deepcopy(list(requirements)))
    else:
        required["nodeSelectorTerms"] = [{"matchExpressions": copy.deepcopy(list(requirements))}]


def _interruptible(spec: dict[str, Any], interruptible: bool, platform: _Platform) -> None:
    """flytek8s' UpdatePod for the interruptible flag: tolerations first, node selector, required affinity."""
    if interruptible:
        if platform.interruptible_tolerations:
            spec["tolerations"] = [*copy.deepcopy(platform.interruptible_tolerations), *spec.get("tolerations", [])]
        if platform.interruptible_node_selector:
            spec["nodeSelector"] = {**spec.get("nodeSelector", {}), **platform.interruptible_node_selector}
    requirement = platform.interruptible_requirement if interruptible else platform.non_interruptible_requirement
    if requirement is not None:
        _add_required(spec, requirement)


def _requests_gpu(spec: Mapping[str, Any]) -> bool:
    return any(
        _GPU in (c.get("resources", {}).get(kind) or {})
        for c in spec.get("containers", [])
        for kind in ("limits", "requests")
    )


def _gpu_accelerator(spec: dict[str, Any], acc: Any, platform: _Platform) -> bool:
    """flytek8s' ApplyGPUNodeSelectors on one pod; False when no container requests a GPU (nothing applied)."""
    if not _requests_gpu(spec):
        return False
    tolerations: list[dict[str, Any]] = []
    if acc.device:
        label = platform.device_label
        _add_required(spec, {"key": label, "operator": "In", "values": [acc.device]})
        tolerations.append({"key": label, "value": acc.device, "operator": "Equal", "effect": "NoSchedule"})
    which = acc.WhichOneof("partition_size_value")
    requirement: dict[str, Any] | None = None
    toleration: dict[str, Any] | None = None
    if which == "unpartitioned" and acc.unpartitioned:
        requirement = platform.unpartitioned_requirement or {
            "key": platform.partition_label,
            "operator": "DoesNotExist",
        }
        toleration = platform.unpartitioned_toleration
    elif which == "partition_size":
        label = platform.partition_label
        requirement = {"key": label, "operator": "In", "values": [acc.partition_size]}
        toleration = {"key": label, "value": acc.partition_size, "operator": "Equal", "effect": "NoSchedule"}
    if requirement is not None:
        _add_required(spec, requirement)
    if toleration is not None:
        tolerations.append(copy.deepcopy(toleration))
    if tolerations:
        spec["tolerations"] = [*spec.get("tolerations", []), *tolerations]
    return True


# --------------------------------------------------------------------------- secrets


def _quoted(text: str) -> str:
    """A string as golang/protobuf's text marshaler quotes it (byte by byte; octal outside printable ASCII)."""
    out = []
    for byte in text.encode("utf-8"):
        char = chr(byte)
        if char in '\n\r\t"\\':
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t", '"': '\\"', "\\": "\\\\"}[char])
        elif 0x20 <= byte < 0x7F:
            out.append(char)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def _secret_text(secret: Any) -> str:
    """proto.MarshalTextString of a flyteidl Secret (the form propeller writes): set fields in order, one a line."""
    lines = []
    for fd in secret.DESCRIPTOR.fields:
        value = getattr(secret, fd.name)
        if not value:
            continue
        if fd.enum_type is not None:
            lines.append(f"{fd.name}: {fd.enum_type.values_by_number[value].name}\n")
        else:
            lines.append(f"{fd.name}: {_quoted(value)}\n")
    return "".join(lines)


def _secrets(tmpl: Any) -> dict[str, str]:
    """The annotations propeller writes for the template's secrets (flyteplugins' MarshalSecretsToMapStrings)."""
    out: dict[str, str] = {}
    for i, secret in enumerate(tmpl.security_context.secrets):
        field = f"security_context.secrets[{i}]"
        mount = secret.DESCRIPTOR.fields_by_name["mount_requirement"].enum_type
        if secret.mount_requirement not in mount.values_by_number:
            raise ei.RenderError(
                f"{field}.mount_requirement",
                f"{secret.mount_requirement} is no {mount.full_name} "
                f"({', '.join(v.name for v in mount.values)}); propeller refuses it",
            )
        encoded = base64.b32encode(_secret_text(secret).encode()).decode().rstrip("=").translate(_BASE32)
        if len(encoded) > _SECRET_MAX:
            raise ei.RenderError(
                field, f"the encoded secret has {len(encoded)} bytes; an annotation holds {_SECRET_MAX}"
            )
        out[f"{_SECRET_ANNOTATION}{i}"] = encoded
    return out


def _merged(
    field: str, under: Mapping[str, str], caller: Mapping[str, str] | None, over: Mapping[str, str]
) -> dict[str, str]:
    """``under``, then the caller's, then ``over`` (what the renderer writes); a caller's key ``over`` sets otherwise is refused."""
    caller = dict(caller or {})
    for key, value in over.items():
        if key in caller and caller[key] != value:
            raise ei.RenderError(
                f"{field}.{key}", f"the template's secrets need {value!r} here (propeller's secrets webhook)"
            )
    return {**under, **caller, **over}


# --------------------------------------------------------------------------- the pod


def _resources_of(resources: Any) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for kind in ("requests", "limits"):
        block: dict[str, str] = {}
        for i, entry in enumerate(getattr(resources, kind)):
            name = RESOURCE_NAMES.get(entry.name)
            if name is None:
                raise ei.RenderError(f"container.resources.{kind}[{i}].name", f"unknown resource name {entry.name}")
            block[name] = entry.value
        if block:
            out[kind] = block
    return out


def _pod_resources(value: Any, field: str) -> dict[str, dict[str, str]]:
    if not isinstance(value, Mapping):
        raise ei.RenderError(field, "expected {'requests': {...}, 'limits': {...}}")
    return {
        kind: {_POD_RESOURCE_NAMES.get(str(k), str(k)): str(v) for k, v in block.items()}
        for kind, block in value.items()
        if isinstance(block, Mapping) and block
    }


def _check_fields(obj: Mapping[str, Any], allowed: frozenset[str], field: str, what: str) -> None:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise ei.RenderError(
            f"{field}.{unknown[0]}",
            f"not a field of a {what} in a PyTorchJob replica template (training operator v1.9 CRD); "
            "the API server would drop it",
        )


class _Source:
    """Where the training container's settings come from, and what else the pod keeps."""

    def __init__(self) -> None:
        self.image = ""
        self.command: list[str] = []
        self.args: list[str] = []
        self.env: dict[str, str] = {}
        self.env_refs: list[dict[str, Any]] = []  # env entries with valueFrom: kept as they are
        self.resources: dict[str, dict[str, str]] = {}
        self.container_extra: dict[str, Any] = {}
        self.ports: list[dict[str, Any]] = []
        self.pod_fields: dict[str, Any] = {}
        self.other_containers: list[dict[str, Any]] = []
        self.labels: dict[str, str] = {}
        self.annotations: dict[str, str] = {}


def _from_container(tmpl: Any) -> _Source:
    c = tmpl.container
    src = _Source()
    src.image = c.image
    src.command = list(c.command)
    src.args = list(c.args)
    src.env = {kv.key: kv.value for kv in c.env}
    src.resources = _resources_of(c.resources)
    return src


def _primary_name(tmpl: Any) -> str:
    name = tmpl.config.get(PRIMARY_CONTAINER_KEY)
    if not name:
        raise ei.RenderError(
            f"config.{PRIMARY_CONTAINER_KEY}",
            "a k8s_pod template names its primary container in its config (flytekit writes it); "
            "propeller refuses a template without it",
        )
    field_name = tmpl.k8s_pod.primary_container_name
    if field_name and field_name != name:
        raise ei.RenderError(
            "k8s_pod.primary_container_name",
            f"{field_name!r}, but config['{PRIMARY_CONTAINER_KEY}'] says {name!r} and propeller reads only the "
            "config: make them the same, or leave this field empty (flytekit does)",
        )
    return str(name)


def _from_pod(tmpl: Any) -> _Source:
    spec = json_format.MessageToDict(tmpl.k8s_pod.pod_spec)
    _check_fields(spec, POD_SPEC_FIELDS, "k8s_pod.pod_spec", "pod spec")
    primary_name = _primary_name(tmpl)
    containers = spec.get("containers") or []
    primaries = [c for c in containers if isinstance(c, Mapping) and c.get("name") == primary_name]
    if len(primaries) != 1:
        raise ei.RenderError(
            "k8s_pod.pod_spec.containers",
            f"expected one primary container named {primary_name!r}, found {len(primaries)}",
        )
    primary = primaries[0]
    field = f"k8s_pod.pod_spec.containers[{primary_name}]"
    _check_fields(primary, CONTAINER_FIELDS, field, "container")
    src = _Source()
    src.image = str(primary.get("image") or "")
    src.command = [str(a) for a in primary.get("command") or []]
    src.args = [str(a) for a in primary.get("args") or []]
    for i, item in enumerate(primary.get("env") or []):
        if not isinstance(item, Mapping) or "name" not in item:
            raise ei.RenderError(f"{field}.env[{i}]", "expected {'name': ..., 'value': ...}")
        if "valueFrom" in item:
            src.env_refs.append(dict(item))
        else:
            src.env[str(item["name"])] = str(item.get("value", ""))
    if primary.get("resources"):
        src.resources = _pod_resources(primary["resources"], f"{field}.resources")
    src.ports = [dict(p) for p in primary.get("ports") or [] if isinstance(p, Mapping)]
    src.container_extra = {k: copy.deepcopy(v) for k, v in primary.items() if k not in _RENDERED}
    for other in containers:
        if other is primary:
            continue
        if isinstance(other, Mapping):
            _check_fields(other, CONTAINER_FIELDS, f"k8s_pod.pod_spec.containers[{other.get('name')}]", "container")
        src.other_containers.append(copy.deepcopy(dict(other)))
    src.pod_fields = {k: copy.deepcopy(v) for k, v in spec.items() if k != "containers"}
    metadata = tmpl.k8s_pod.metadata
    src.labels = dict(metadata.labels)
    src.annotations = dict(metadata.annotations)
    return src


def _shared_memory(spec: dict[str, Any], shm: Any) -> None:
    """flytek8s' ApplySharedMemory: an emptyDir(Memory) volume, mounted in the training container."""
    field = "extended_resources.shared_memory"
    if not shm.mount_name:
        raise ei.RenderError(f"{field}.mount_name", "is empty; propeller refuses a shared memory without a name")
    if not shm.mount_path:
        raise ei.RenderError(f"{field}.mount_path", "is empty; propeller refuses a shared memory without a path")
    if any(v.get("name") == shm.mount_name for v in spec.get("volumes", [])):
        raise ei.RenderError(f"{field}.mount_name", f"the pod already has a volume named {shm.mount_name!r}")
    container = spec["containers"][0]
    for mount in container.get("volumeMounts", []):
        if mount.get("name") == shm.mount_name:
            raise ei.RenderError(f"{field}.mount_name", f"the primary container already mounts {shm.mount_name!r}")
        if mount.get("mountPath") == shm.mount_path:
            raise ei.RenderError(f"{field}.mount_path", f"the primary container already mounts {shm.mount_path!r}")
    empty_dir: dict[str, Any] = {"medium": "Memory"}
    if shm.size_limit:
        try:
            parse_quantity(shm.size_limit)
        except ValueError as exc:
            raise ei.RenderError(f"{field}.size_limit", str(exc)) from None
        empty_dir["sizeLimit"] = shm.size_limit
    spec.setdefault("volumes", []).append({"name": shm.mount_name, "emptyDir": empty_dir})
    container.setdefault("volumeMounts", []).append({"name": shm.mount_name, "mountPath": shm.mount_path})


def render_pytorchjob_from_template(
    template: Any,
    *,
    name: str,
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    gpu_device_node_label: str | None = None,
    gpu_partition_size_node_label: str | None = None,
    gpu_unpartitioned_node_selector_requirement: Mapping[str, Any] | None = None,
    gpu_unpartitioned_toleration: Mapping[str, Any] | None = None,
    interruptible_tolerations: Sequence[Mapping[str, Any]] | None = None,
    interruptible_node_selector: Mapping[str, str] | None = None,
    interruptible_node_selector_requirement: Mapping[str, Any] | None = None,
    non_interruptible_node_selector_requirement: Mapping[str, Any] | None = None,
    default_cpus: str | None = None,
    default_memory: str | None = None,
    mode: str = STRICT,
    elastic_worker_restart_policy: str = ELASTIC_WORKER_RESTART_POLICY,
) -> dict[str, Any]:
    """The Kubeflow ``PyTorchJob`` for a serialized Flyte task template (see the module docs). Pure.

    The ``gpu_*`` and ``*interruptible*`` options are the keys of propeller's deployment
    configuration (``plugins.k8s``, named in brackets below) through which propeller carries
    ``extended_resources.gpu_accelerator`` and ``metadata.interruptible`` into the pods. A
    deployment may set any label there, so they have no default: a template whose accelerator
    or interruptible flag needs one that is not given is refused (a RenderError naming the field
    and the option), never rendered with a guessed label. flyteplugins v1.16.8's own defaults are
    ``gpu_device_node_label="k8s.amazonaws.com/accelerator"``,
    ``gpu_partition_size_node_label="k8s.amazonaws.com/gpu-partition-size"`` and no
    interruptible settings (``interruptible_tolerations=[]``).

    Args:
        template: A flyteidl ``TaskTemplate`` message, its serialized bytes, or flytekit's
            ``TaskTemplate`` model, of task type ``pytorch``.
        name: Job name (a DNS-1035 label; see `elastic_idl.render_pytorchjob`).
        namespace: Kubernetes namespace.
        labels: Labels of the job and of every pod template (the template's pod labels are added).
        annotations: Annotations of the job and of every pod template (likewise).
        gpu_device_node_label: The node label whose value is the GPU device
            (``gpu-device-node-label``): node affinity ``In [device]`` and a NoSchedule toleration.
        gpu_partition_size_node_label: The node label of the GPU partition size
            (``gpu-partition-size-node-label``): ``In [size]`` and a toleration for a partition,
            ``DoesNotExist`` for an unpartitioned GPU.
        gpu_unpartitioned_node_selector_requirement: Replaces that ``DoesNotExist``
            (``gpu-unpartitioned-node-selector-requirement``), as Kubernetes writes a
            NodeSelectorRequirement.
        gpu_unpartitioned_toleration: The toleration of an unpartitioned GPU
            (``gpu-unpartitioned-toleration``).
        interruptible_tolerations: Tolerations of an interruptible task's pods, before the pod's
            own (``interruptible-tolerations``).
        interruptible_node_selector: Node selector labels of an interruptible task's pods, over the
            pod's own (``interruptible-node-selector``).
        interruptible_node_selector_requirement: Required node affinity of an interruptible task's
            pods (``interruptible-node-selector-requirement``).
        non_interruptible_node_selector_requirement: Required node affinity of every other task's
            pods (``non-interruptible-node-selector-requirement``).
        default_cpus: The CPU request propeller gives a primary or init container that sets neither
            a CPU request nor a limit (``default-cpus``, flyteplugins' default ``1000m``; a
            flyteadmin's task resource defaults win over it). Not given: such a container is
            left without one.
        default_memory: Likewise for memory (``default-memory``, flyteplugins' default ``1024Mi``).
        mode: The ``mode`` of the elastic-idl-pytorch plugin's section
            (``plugins.elastic-idl-pytorch``): ``"strict"`` (the default here) or ``"upstream"``
            (the plugin's default), as `elastic_idl.JobOptions`.
        elastic_worker_restart_policy: That section's ``elastic-worker-restart-policy``:
            ``"ExitCode"`` (the default here, and the strict mode's) or ``"Never"`` (the upstream
            mode's).

    Returns:
        The PyTorchJob as a plain dict, valid against the operator's CRD.

    Raises:
        DecodeError: The bytes are not a TaskTemplate, or its custom is not a task.
        RenderError: Not a ``pytorch`` template, no primary container, a field the CRD
            cannot hold, a template field refused (`FIELDS`), one that needs an option
            not given, a bad option, or anything `elastic_idl.render_pytorchjob` refuses.
        ValidationError: The task breaks a rule.
        UnsupportedVersionError: task_type_version is not 0 or 1.
    """
    tmpl = _as_template(template)
    if tmpl.type != _PYTORCH:
        raise ei.RenderError(
            "type",
            f"a {tmpl.type!r} template is not a PyTorchJob (an Elastic task with nnodes=1 runs as one plain pod)",
        )
    if not tmpl.HasField("custom"):
        raise ei.RenderError("custom", "a pytorch template carries the task in its custom; it is empty")
    _audit(tmpl)
    _check_config(tmpl)
    _check_data_config(tmpl)
    target = tmpl.WhichOneof("target")
    if target is None:
        raise ei.RenderError("container", "the template has no target (container or k8s_pod): nothing to run")
    platform = _Platform(
        {
            "gpu_device_node_label": gpu_device_node_label,
            "gpu_partition_size_node_label": gpu_partition_size_node_label,
            "gpu_unpartitioned_node_selector_requirement": gpu_unpartitioned_node_selector_requirement,
            "gpu_unpartitioned_toleration": gpu_unpartitioned_toleration,
            "interruptible_tolerations": interruptible_tolerations,
            "interruptible_node_selector": interruptible_node_selector,
            "interruptible_node_selector_requirement": interruptible_node_selector_requirement,
            "non_interruptible_node_selector_requirement": non_interruptible_node_selector_requirement,
        }
    )
    _check_platform_needed(tmpl, platform)
    custom = json_format.MessageToDict(tmpl.custom)
    src = _from_pod(tmpl) if target == "k8s_pod" else _from_container(tmpl)
    secrets = _secrets(tmpl)
    secret_labels = dict([_SECRETS_LABEL]) if secrets else {}
    job_meta = tmpl.metadata.metadata
    options = ei.JobOptions(
        name=name,
        image=src.image,
        namespace=namespace,
        command=src.command,
        args=src.args,
        resources=src.resources or None,
        labels=_merged("labels", job_meta.labels, labels, secret_labels),
        annotations=_merged("annotations", job_meta.annotations, annotations, secrets),
        env=src.env,
        mode=mode,
        elastic_worker_restart_policy=elastic_worker_restart_policy,
    )
    job = ei.render_pytorchjob(custom, options, task_type_version=tmpl.task_type_version)
    defaults = {k: v for k, v in (("cpu", default_cpus), ("memory", default_memory)) if v is not None}
    for option, value in (("default_cpus", default_cpus), ("default_memory", default_memory)):
        if value is not None:
            _quantity(option, value)
    # metadata.metadata is the job object's only (propeller's plugin manager): off the pods again.
    job_only = {
        "labels": set(job_meta.labels) - set(labels or {}) - set(secret_labels),
        "annotations": set(job_meta.annotations) - set(annotations or {}) - set(secrets),
    }
    interruptible = bool(tmpl.metadata.interruptible)
    extended = tmpl.extended_resources
    accelerated = False
    for replica_type, replica in job["spec"]["pytorchReplicaSpecs"].items():
        pod = replica["template"]
        for key, drop in job_only.items():
            kept = {k: v for k, v in pod.get("metadata", {}).get(key, {}).items() if k not in drop}
            if kept:
                pod["metadata"][key] = kept
            elif key in pod.get("metadata", {}):
                del pod["metadata"][key]
        if "metadata" in pod and not pod["metadata"]:
            del pod["metadata"]
        _merge_pod(pod, src)
        # propeller's order (flytek8s.ApplyFlytePodConfiguration): the containers' resources, UpdatePod,
        # then the extended resources.
        spec = pod["spec"]
        container = spec["containers"][0]
        if target == "container":
            container["terminationMessagePolicy"] = _TERMINATION_MESSAGE_POLICY
        if tmpl.task_type_version != 0 and replica_type == "Worker":
            container["env"].append(
                {"name": _WORKER_NAME_ENV, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
            )
        _propeller_resources(spec, src.resources, defaults)
        spec.setdefault("restartPolicy", "Never")  # flytek8s.UpdatePod; the operator sets its own per replica
        _interruptible(spec, interruptible, platform)
        if extended.HasField("gpu_accelerator"):
            accelerated = _gpu_accelerator(spec, extended.gpu_accelerator, platform) or accelerated
        if extended.HasField("shared_memory"):
            _shared_memory(spec, extended.shared_memory)
    if extended.HasField("gpu_accelerator") and not accelerated:
        raise ei.RenderError(
            "extended_resources.gpu_accelerator",
            f"no replica's pods request a GPU ({_GPU}), and propeller applies the accelerator only to pods "
            "that do: it would be dropped; request a GPU (@task(limits=Resources(gpu=...))) or remove the accelerator",
        )
    return job


def _quantity(field: str, value: str) -> Any:
    try:
        return parse_quantity(value)
    except ValueError as exc:
        raise ei.RenderError(field, str(exc)) from None


def _completed(resources: Mapping[str, Any], defaults: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """flytek8s.ApplyResourceOverrides on a primary or init container: a request missing (or zero) is
    the limit, else the platform default (CPU and memory only); a limit missing is the request; a
    request above its limit is the limit."""
    requests = dict(resources.get("requests") or {})
    limits = dict(resources.get("limits") or {})
    for name in (*_ALWAYS_COMPLETED, *_COMPLETED_WHEN_SET):
        req, lim = (
            v if v is not None and _quantity(f"resources.{kind}.{name}", str(v)) != 0 else None
            for kind, v in (("requests", requests.get(name)), ("limits", limits.get(name)))
        )
        if name in _COMPLETED_WHEN_SET and req is None and lim is None:
            continue
        req = req or lim or defaults.get(name)
        if req is None:
            continue  # no platform default stated (default_cpus, default_memory)
        lim = lim or req
        if parse_quantity(str(req)) > parse_quantity(str(lim)):
            req = lim
        requests[name], limits[name] = str(req), str(lim)
    return {kind: block for kind, block in (("requests", requests), ("limits", limits)) if block}


def _propeller_resources(spec: dict[str, Any], task_level: Mapping[str, Any], defaults: Mapping[str, str]) -> None:
    """The resources propeller gives every container of a pod (flytek8s.ApplyFlytePodConfiguration).

    A replica's own resources (a kubeflow-shape replica spec) are completed first and then set over
    the task's key by key (kfoperators' ToReplicaSpecWithOverrides), so a key only the task sets is
    kept; the result is completed again. The other containers: `_in_range`.
    """
    container = spec["containers"][0]
    own = container.get("resources") or {}
    merged: Mapping[str, Any] = own
    if own != task_level:
        replica = _completed(own, defaults)
        merged = {
            kind: {**(task_level.get(kind) or {}), **(replica.get(kind) or {})}
            for kind in ("requests", "limits")
            if task_level.get(kind) or replica.get(kind)
        }
    resources = _completed(merged, defaults)
    if resources:
        container["resources"] = resources
    for init in spec.get("initContainers") or []:
        completed = _completed(init.get("resources") or {}, defaults)
        if completed:
            init["resources"] = completed
    for other in spec["containers"][1:]:
        other["resources"] = _in_range(other.get("resources") or {})


def _in_range(resources: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """flytek8s.ApplyResourceOverrides on any other container: nothing is completed, but CPU and
    memory are written as they are, 0 when not set (as propeller writes a zero quantity), and a
    request above its limit is the limit."""
    requests = dict(resources.get("requests") or {})
    limits = dict(resources.get("limits") or {})
    for name in (*_ALWAYS_COMPLETED, *(n for n in _COMPLETED_WHEN_SET if n in requests or n in limits)):
        req, lim = str(requests.get(name, "0")), str(limits.get(name, "0"))
        if _quantity(f"resources.limits.{name}", lim) != 0 and _quantity(
            f"resources.requests.{name}", req
        ) > parse_quantity(lim):
            req = lim
        requests[name], limits[name] = req, lim
    return {"requests": requests, "limits": limits}


def _merge_pod(pod: dict[str, Any], src: _Source) -> None:
    spec = pod["spec"]
    (container,) = spec["containers"]
    # The renderer's own env (the task for elastic_idl.pod, the NCCL settings the launcher sets
    # anyway) comes first; a flytekit pod runs pyflyte-execute, which reads the task from its
    # template, so only the template's env is kept, as propeller keeps it.
    env = container["env"]
    container["env"] = env[len(env) - len(src.env) :]
    if not container.get("command"):
        container.pop("command", None)  # the image's entrypoint runs the args, as flytekit's container
    container["env"].extend(copy.deepcopy(src.env_refs))
    ours = {(p.get("name"), p.get("containerPort")) for p in container["ports"]}
    for port in src.ports:
        if port.get("name") == PORT_NAME or (PORT_NAME, port.get("containerPort")) in ours:
            continue
        container["ports"].append(copy.deepcopy(port))
    container.update(copy.deepcopy(src.container_extra))
    spec["containers"] = [container, *copy.deepcopy(src.other_containers)]
    spec.update(copy.deepcopy(src.pod_fields))
    if src.labels or src.annotations:
        metadata = {key: dict(value) for key, value in pod.get("metadata", {}).items()}
        for key, extra in (("labels", src.labels), ("annotations", src.annotations)):
            if extra:
                metadata[key] = {**extra, **metadata.get(key, {})}  # the caller's labels win
        pod_spec = pod.pop("spec")
        pod.pop("metadata", None)
        pod["metadata"], pod["spec"] = metadata, pod_spec  # metadata first, as the renderer writes it
