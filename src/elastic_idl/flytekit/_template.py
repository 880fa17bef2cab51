"""The PyTorchJob for a flyteidl ``TaskTemplate``: the input propeller really receives. Pure.

:func:`elastic_idl.render_pytorchjob` takes the task and the render options one
by one, as the Go backend does. This adapter reads them from a serialized task
template (what ``pyflyte package`` / ``register`` upload) and renders through it:

- the task from ``custom`` (a ``pytorch`` template, ``task_type_version`` 0 or 1);
- image, command, args, env and resources from ``TaskTemplate.container``; or,
  when the template carries ``k8s_pod`` (flytekit's form for any pod template,
  e.g. ``increase_shared_mem``), from its primary container
  (``config["primary_container_name"]``), whose other fields (volume mounts,
  probes, ...) are kept, as are the pod spec's volumes, other containers and
  every pod-level field a PyTorchJob replica template can hold, and the pod
  metadata's labels and annotations;
- ``extended_resources.shared_memory`` (``@task(shared_memory=...)``) as a
  memory-backed ``emptyDir`` mounted in the training container, as propeller does.

The training container is named ``pytorch`` with the ``pytorchjob-port`` (the
operator finds both by name). A field the operator's CRD (v1.9) does not declare
is an error naming it, never dropped silently (the API server would prune it).
Needs flyteidl (it comes with flytekit), never flytekit itself.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from google.protobuf import json_format

import elastic_idl as ei
from elastic_idl.flytekit._runtime import RESOURCE_NAMES, ResourceName

__all__ = ["CONTAINER_FIELDS", "POD_SPEC_FIELDS", "render_pytorchjob_from_template"]

#: flytekit's default name of the primary container, and the config key that names another.
PRIMARY_CONTAINER_DEFAULT = "primary"
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
#: What the renderer sets on the training container itself; the rest of the primary container is kept.
_RENDERED = frozenset({"name", "image", "command", "args", "env", "resources", "ports"})
#: flytekit writes a GPU request in a pod spec as "gpu" (ResourceName, lower-cased); Kubernetes' name.
_POD_RESOURCE_NAMES = {"gpu": RESOURCE_NAMES[ResourceName.GPU]}
_TEMPLATE_NAME = "flyteidl.core.TaskTemplate"
_PYTORCH = "pytorch"


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


def _from_pod(tmpl: Any) -> _Source:
    spec = json_format.MessageToDict(tmpl.k8s_pod.pod_spec)
    _check_fields(spec, POD_SPEC_FIELDS, "k8s_pod.pod_spec", "pod spec")
    primary_name = tmpl.config.get(PRIMARY_CONTAINER_KEY) or PRIMARY_CONTAINER_DEFAULT
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
    src.image = str(primary.get("image") or tmpl.container.image or "")
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


def _shared_memory(tmpl: Any, src: _Source) -> None:
    """``extended_resources.shared_memory``: an emptyDir(Memory) volume and its mount, as propeller adds them."""
    if not tmpl.HasField("extended_resources") or not tmpl.extended_resources.HasField("shared_memory"):
        return
    shm = tmpl.extended_resources.shared_memory
    name = shm.mount_name or "flyte-shared-memory"
    path = shm.mount_path or "/dev/shm"
    empty_dir: dict[str, Any] = {"medium": "Memory"}
    if shm.size_limit:
        empty_dir["sizeLimit"] = shm.size_limit
    src.pod_fields.setdefault("volumes", []).append({"name": name, "emptyDir": empty_dir})
    src.container_extra.setdefault("volumeMounts", []).append({"name": name, "mountPath": path})


def render_pytorchjob_from_template(
    template: Any,
    *,
    name: str,
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The Kubeflow ``PyTorchJob`` for a serialized Flyte task template (see the module docs). Pure.

    Args:
        template: A flyteidl ``TaskTemplate`` message, its serialized bytes, or flytekit's
            ``TaskTemplate`` model, of task type ``pytorch``.
        name: Job name (a DNS-1035 label; see :func:`elastic_idl.render_pytorchjob`).
        namespace: Kubernetes namespace.
        labels: Labels of the job and of every pod template (the template's pod labels are added).
        annotations: Annotations of the job and of every pod template (likewise).

    Returns:
        The PyTorchJob as a plain dict, valid against the operator's CRD.

    Raises:
        DecodeError: The bytes are not a TaskTemplate, or its custom is not a task.
        RenderError: Not a ``pytorch`` template, no primary container, a field the CRD
            cannot hold, or anything :func:`elastic_idl.render_pytorchjob` refuses.
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
    custom = json_format.MessageToDict(tmpl.custom)
    src = _from_pod(tmpl) if tmpl.HasField("k8s_pod") else _from_container(tmpl)
    _shared_memory(tmpl, src)
    options = ei.JobOptions(
        name=name,
        image=src.image,
        namespace=namespace,
        command=src.command,
        args=src.args,
        resources=src.resources or None,
        labels=labels,
        annotations=annotations,
        env=src.env,
    )
    job = ei.render_pytorchjob(custom, options, task_type_version=tmpl.task_type_version)
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        _merge_pod(replica["template"], src)
    return job


def _merge_pod(pod: dict[str, Any], src: _Source) -> None:
    spec = pod["spec"]
    (container,) = spec["containers"]
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
