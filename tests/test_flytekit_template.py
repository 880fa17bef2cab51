"""``render_pytorchjob_from_template``: every field of the TaskTemplate is carried, refused or the engine's.

- the audit: every field of the messages the renderer reads is classified in ``FIELDS`` (a
  newer flyteidl's field fails here first), docs/guide/flytekit.md names each one, and a set field the
  renderer does not know (an unknown field number) is refused;
- from flytekit's real serialization (``@task(...)`` through ``get_serializable``): the
  accelerator, ``interruptible``, ``secret_requests``, ``shared_memory``, ``container_image``
  are carried as propeller carries them; ``pod_template_name`` is refused; the engine's
  fields (timeout, retries, cache, ...) change nothing in the job;
- hand-made templates for the fields flytekit does not write (sql, run_as, tokens, ports, ...);
- every rendered job passes the operator's CRD schema made strict and its webhook's rules;
- against the Go plugin: the same templates through ``go/flyteplugin``'s BuildResource in
  flyteplugins v1.16.8's real pod machinery (``TestTemplateJobsForPython``), under the plugin's
  strict and default sections, give the same whole jobs, every pod field included, once the values
  propeller fills per execution are normalised (``NORMALISED``); ``DELIBERATE`` lists where the
  renderer differs on purpose. docs/guide/flytekit.md quotes both.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import warnings
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import text_format

import elastic_idl as ei

pytest.importorskip("flytekit")

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import flytekit
    from flyteidl.core import security_pb2, tasks_pb2
    from flytekit import PodTemplate, Secret, task
    from flytekit.configuration import Image, ImageConfig, SerializationSettings
    from flytekit.extras.accelerators import A100, T4
    from flytekit.tools.translator import get_serializable
    from kubernetes.client import (
        V1Affinity,
        V1Container,
        V1EmptyDirVolumeSource,
        V1EnvVar,
        V1NodeAffinity,
        V1NodeSelector,
        V1NodeSelectorRequirement,
        V1NodeSelectorTerm,
        V1PodSpec,
        V1ResourceRequirements,
        V1Toleration,
        V1Volume,
        V1VolumeMount,
    )

from elastic_idl._task.resources import parse_quantity
from elastic_idl.flytekit import render_pytorchjob_from_template
from elastic_idl.flytekit._template import CARRIED, ENGINE, FIELDS, REFUSED
from test_go import GO_ENV, go_bin
from test_kubeflow_valid import crd_errors, crd_validator, webhook_errors

__all__ = ["crd_validator", "go_bin"]  # fixtures, imported for this module

REPO = Path(__file__).resolve().parent.parent
SETTINGS = SerializationSettings(
    image_config=ImageConfig(default_image=Image(name="default", fqn="ghcr.io/acme/train", tag="1"))
)
GPU = {"requests": flytekit.Resources(gpu="1"), "limits": flytekit.Resources(gpu="1")}
#: flyteplugins v1.16.8's defaults of the two GPU node labels (plugins.k8s).
DEVICE_LABEL = "k8s.amazonaws.com/accelerator"
PARTITION_LABEL = "k8s.amazonaws.com/gpu-partition-size"
#: The renderer's keyword options and the keys of propeller's k8s plugin configuration they state.
PROPELLER_KEYS = {
    "gpu_device_node_label": "gpu-device-node-label",
    "gpu_partition_size_node_label": "gpu-partition-size-node-label",
    "gpu_unpartitioned_node_selector_requirement": "gpu-unpartitioned-node-selector-requirement",
    "gpu_unpartitioned_toleration": "gpu-unpartitioned-toleration",
    "interruptible_tolerations": "interruptible-tolerations",
    "interruptible_node_selector": "interruptible-node-selector",
    "interruptible_node_selector_requirement": "interruptible-node-selector-requirement",
    "non_interruptible_node_selector_requirement": "non-interruptible-node-selector-requirement",
}
SPOT = {"key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
SPOT_REQ = {"key": "lifecycle", "operator": "In", "values": ["spot"]}
ON_DEMAND_REQ = {"key": "lifecycle", "operator": "NotIn", "values": ["spot"]}
INTERRUPTIBLE = {
    "interruptible_tolerations": [SPOT],
    "interruptible_node_selector": {"pool": "spot"},
    "interruptible_node_selector_requirement": SPOT_REQ,
    "non_interruptible_node_selector_requirement": ON_DEMAND_REQ,
}


def add_one(x: int) -> int:
    return x + 1


def _template(config: Any = None, fn: Callable[..., Any] = add_one, **task_kwargs: Any) -> Any:
    """The flyteidl TaskTemplate flytekit's translator writes for ``@task(task_config=config, ...)(fn)``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # kfpytorch-style increase_shared_mem deprecation warning
        t = task(task_config=config or ei.Elastic(nnodes=2), **task_kwargs)(fn)
        return get_serializable(OrderedDict(), SETTINGS, t).template.to_flyte_idl()


def _render(template: Any, **kw: Any) -> dict[str, Any]:
    return render_pytorchjob_from_template(template, name="train", **kw)


def _pods(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {rt: r["template"] for rt, r in job["spec"]["pytorchReplicaSpecs"].items()}


def _worker(job: dict[str, Any]) -> dict[str, Any]:
    pod: dict[str, Any] = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    return pod


def _refused(template: Any, field: str, *words: str, **kw: Any) -> ei.RenderError:
    with pytest.raises(ei.RenderError) as info:
        _render(template, **kw)
    assert info.value.field == field, info.value
    for word in words:
        assert word in info.value.reason, info.value.reason
    return info.value


def _valid(job: dict[str, Any], validator: Any) -> dict[str, Any]:
    assert crd_errors(validator, job) == []
    assert webhook_errors(job) == []
    return job


def _required_terms(pod: dict[str, Any]) -> list[dict[str, Any]]:
    terms: list[dict[str, Any]] = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    return terms


def _container_template(custom: dict[str, Any] | None = None) -> Any:
    """A hand-made container TaskTemplate of type pytorch (task_type_version 1)."""
    from google.protobuf import json_format

    tmpl = tasks_pb2.TaskTemplate(type="pytorch", task_type_version=1)
    json_format.ParseDict(custom or {"workerReplicas": {"common": {"replicas": 2}}}, tmpl.custom)
    tmpl.container.image = "ghcr.io/acme/train:1"
    tmpl.container.args.extend(["pyflyte-execute", "--inputs", "{{.input}}"])
    return tmpl


# --------------------------------------------------------------------------- the audit


def _message_fields(descriptor: Any, prefix: str = "") -> set[str]:
    """Every field path of the messages the renderer reads field by field."""
    walked = {
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
    out = set()
    for fd in descriptor.fields:
        path = f"{prefix}.{fd.name}" if prefix else fd.name
        out.add(path)
        if path in walked:
            out |= _message_fields(fd.message_type, path)
    return out


def test_every_field_of_the_template_is_carried_refused_or_the_engines() -> None:
    """flyteidl 1.16's TaskTemplate, TaskMetadata, Container, K8sPod, SecurityContext, Identity, Secret,
    ExtendedResources, GPUAccelerator, SharedMemory: each field is in FIELDS, and FIELDS holds nothing else."""
    assert set(FIELDS) == _message_fields(tasks_pb2.TaskTemplate.DESCRIPTOR)
    assert {kind for kind, _ in FIELDS.values()} == {CARRIED, REFUSED, ENGINE}
    assert all(why for _, why in FIELDS.values())
    # The engine's, named: what the brief of this module calls "not a PyTorchJob concern".
    assert {p for p, (k, _) in FIELDS.items() if k == ENGINE} == {
        "id",
        "interface",
        "metadata.discoverable",
        "metadata.runtime",
        "metadata.timeout",
        "metadata.retries",
        "metadata.discovery_version",
        "metadata.deprecated_error_message",
        "metadata.cache_serializable",
        "metadata.tags",
        "metadata.cache_ignore_input_vars",
        "metadata.is_eager",
        "metadata.generates_deck",
    }


def test_the_docs_name_every_field() -> None:
    page = (REPO / "docs" / "guide" / "flytekit.md").read_text()
    start = page.index("## Rendering from the TaskTemplate")
    section = page[start : page.index("\n## ", start + 1)]
    missing = [path for path in FIELDS if f"`{path}`" not in section]
    assert missing == []
    for option in PROPELLER_KEYS:
        assert f"`{option}`" in section


@pytest.mark.parametrize(
    ("where", "field"),
    [("", "101"), ("metadata", "metadata.102"), ("secret", "security_context.secrets[0].103")],
)
def test_a_field_unknown_to_this_flyteidl_is_refused(where: str, field: str) -> None:
    tmpl = _container_template()
    tag = int(field.rsplit(".", 1)[-1]) << 3  # wire type 0: a varint
    unknown = bytes([tag & 0x7F | 0x80, tag >> 7, 0x01])  # the tag as a 2-byte varint, then the value 1
    if where == "metadata":
        tmpl.metadata.MergeFromString(unknown)
    elif where == "secret":
        secret = tmpl.security_context.secrets.add(group="g", key="k")
        secret.MergeFromString(unknown)
    else:
        tmpl.MergeFromString(unknown)
    _refused(tmpl.SerializeToString(), field, "unknown to the installed flyteidl")


# --------------------------------------------------------------------------- the accelerator


def test_an_accelerator_needs_the_gpu_node_label_of_the_deployment() -> None:
    pb = _template(accelerator=T4, **GPU)
    err = _refused(pb, "extended_resources.gpu_accelerator.device", "gpu_device_node_label=", "gpu-device-node-label")
    assert DEVICE_LABEL in err.reason  # flyteplugins' default, said, never assumed
    err = _refused(_template(accelerator=A100.partition_1g_5gb, **GPU), "extended_resources.gpu_accelerator.device")
    err = _refused(
        _template(accelerator=A100.partition_1g_5gb, **GPU),
        "extended_resources.gpu_accelerator.partition_size",
        "gpu_partition_size_node_label=",
        gpu_device_node_label=DEVICE_LABEL,
    )
    _refused(
        _template(accelerator=A100.unpartitioned, **GPU),
        "extended_resources.gpu_accelerator.unpartitioned",
        "gpu_partition_size_node_label=",
        "gpu_unpartitioned_node_selector_requirement=",
        gpu_device_node_label=DEVICE_LABEL,
    )


def test_a_gpu_device_becomes_node_affinity_and_a_toleration(crd_validator: Any) -> None:
    job = _valid(_render(_template(accelerator=T4, **GPU), gpu_device_node_label=DEVICE_LABEL), crd_validator)
    pod = _worker(job)
    assert _required_terms(pod) == [
        {"matchExpressions": [{"key": DEVICE_LABEL, "operator": "In", "values": ["nvidia-tesla-t4"]}]}
    ]
    assert pod["spec"]["tolerations"] == [
        {"key": DEVICE_LABEL, "value": "nvidia-tesla-t4", "operator": "Equal", "effect": "NoSchedule"}
    ]
    # The label is the deployment's: another one is used as given.
    gke = _render(_template(accelerator=T4, **GPU), gpu_device_node_label="cloud.google.com/gke-accelerator")
    assert _required_terms(_worker(gke))[0]["matchExpressions"][0]["key"] == "cloud.google.com/gke-accelerator"


def test_a_gpu_partition_and_an_unpartitioned_gpu(crd_validator: Any) -> None:
    labels = {"gpu_device_node_label": DEVICE_LABEL, "gpu_partition_size_node_label": PARTITION_LABEL}
    pod = _worker(_valid(_render(_template(accelerator=A100.partition_1g_5gb, **GPU), **labels), crd_validator))
    assert _required_terms(pod) == [
        {
            "matchExpressions": [
                {"key": DEVICE_LABEL, "operator": "In", "values": ["nvidia-tesla-a100"]},
                {"key": PARTITION_LABEL, "operator": "In", "values": ["1g.5gb"]},
            ]
        }
    ]
    assert [t["key"] for t in pod["spec"]["tolerations"]] == [DEVICE_LABEL, PARTITION_LABEL]
    assert pod["spec"]["tolerations"][1]["value"] == "1g.5gb"
    pod = _worker(_valid(_render(_template(accelerator=A100.unpartitioned, **GPU), **labels), crd_validator))
    assert _required_terms(pod)[0]["matchExpressions"][1] == {"key": PARTITION_LABEL, "operator": "DoesNotExist"}
    assert [t["key"] for t in pod["spec"]["tolerations"]] == [DEVICE_LABEL]  # no toleration unless configured
    whole = {"key": "gpu-whole", "operator": "Exists"}
    tol = {"key": "gpu-whole", "operator": "Exists", "effect": "NoSchedule"}
    pod = _worker(
        _render(
            _template(accelerator=A100.unpartitioned, **GPU),
            gpu_device_node_label=DEVICE_LABEL,
            gpu_unpartitioned_node_selector_requirement=whole,
            gpu_unpartitioned_toleration=tol,
        )
    )
    assert _required_terms(pod)[0]["matchExpressions"][1] == whole
    assert pod["spec"]["tolerations"][1] == tol
    # A plain A100 (no partition preference): the device only.
    pod = _worker(_render(_template(accelerator=A100, **GPU), gpu_device_node_label=DEVICE_LABEL))
    assert len(_required_terms(pod)[0]["matchExpressions"]) == 1


def test_an_accelerator_without_a_gpu_is_refused() -> None:
    _refused(
        _template(accelerator=T4),
        "extended_resources.gpu_accelerator",
        "no replica's pods request a GPU",
        gpu_device_node_label=DEVICE_LABEL,
    )


def test_the_accelerator_goes_to_the_replicas_that_request_a_gpu(crd_validator: Any) -> None:
    gpu = {"requests": [{"name": "GPU", "value": "1"}], "limits": [{"name": "GPU", "value": "1"}]}
    tmpl = _container_template(
        {"masterReplicas": {"common": {"replicas": 1}}, "workerReplicas": {"common": {"replicas": 2, "resources": gpu}}}
    )
    tmpl.extended_resources.gpu_accelerator.device = "nvidia-tesla-t4"
    pods = _pods(_valid(_render(tmpl, gpu_device_node_label=DEVICE_LABEL), crd_validator))
    assert "affinity" not in pods["Master"]["spec"] and "tolerations" not in pods["Master"]["spec"]
    assert _required_terms(pods["Worker"])[0]["matchExpressions"][0]["values"] == ["nvidia-tesla-t4"]


# --------------------------------------------------------------------------- interruptible


def test_interruptible_needs_the_interruptible_settings_of_the_deployment(crd_validator: Any) -> None:
    pb = _template(interruptible=True)
    assert pb.metadata.interruptible
    _refused(pb, "metadata.interruptible", "interruptible_tolerations=", "interruptible-tolerations")
    # Stating "none" is stating: the job is the one without the flag.
    stated = _render(pb, interruptible_tolerations=[])
    assert stated == _render(_template())


def test_interruptible_tolerations_node_selector_and_affinity(crd_validator: Any) -> None:
    user = PodTemplate(
        pod_spec=V1PodSpec(
            containers=[V1Container(name="main")],
            tolerations=[V1Toleration(key="own", operator="Exists")],
            node_selector={"pool": "mine", "disk": "ssd"},
            affinity=V1Affinity(
                node_affinity=V1NodeAffinity(
                    required_during_scheduling_ignored_during_execution=V1NodeSelector(
                        node_selector_terms=[
                            V1NodeSelectorTerm(
                                match_expressions=[V1NodeSelectorRequirement(key="zone", operator="In", values=["a"])]
                            ),
                            V1NodeSelectorTerm(
                                match_expressions=[V1NodeSelectorRequirement(key="zone", operator="In", values=["b"])]
                            ),
                        ]
                    )
                )
            ),
        ),
        primary_container_name="main",
    )
    pb = _template(interruptible=True, pod_template=user, accelerator=T4, **GPU)
    pod = _worker(_valid(_render(pb, gpu_device_node_label=DEVICE_LABEL, **INTERRUPTIBLE), crd_validator))
    spec = pod["spec"]
    # propeller's order: the interruptible tolerations before the pod's own, the accelerator's after.
    assert [t["key"] for t in spec["tolerations"]] == ["spot", "own", DEVICE_LABEL]
    assert spec["nodeSelector"] == {"pool": "spot", "disk": "ssd"}  # the deployment's value wins
    # Terms are OR'd: every one gets the requirements, interruptible first, then the device.
    for zone, term in zip("ab", _required_terms(pod), strict=True):
        assert [e["key"] for e in term["matchExpressions"]] == ["zone", "lifecycle", DEVICE_LABEL]
        assert term["matchExpressions"][0]["values"] == [zone]
        assert term["matchExpressions"][1] == SPOT_REQ
    # A task that is not interruptible gets the non-interruptible requirement and nothing else.
    plain = _worker(_valid(_render(_template(), **INTERRUPTIBLE), crd_validator))
    assert _required_terms(plain) == [{"matchExpressions": [ON_DEMAND_REQ]}]
    assert "tolerations" not in plain["spec"] and "nodeSelector" not in plain["spec"]


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"interruptible_tolerations": [{"key": "a", "tolerance": 1}]}, "interruptible_tolerations[0].tolerance"),
        ({"interruptible_tolerations": "spot"}, "interruptible_tolerations"),
        ({"interruptible_tolerations": [SPOT, None]}, "interruptible_tolerations[1]"),
        ({"interruptible_node_selector": {"pool": 1}}, "interruptible_node_selector"),
        ({"interruptible_node_selector_requirement": ["lifecycle"]}, "interruptible_node_selector_requirement"),
        ({"gpu_device_node_label": ""}, "gpu_device_node_label"),
        ({"gpu_unpartitioned_toleration": {"key": "a", "values": ["b"]}}, "gpu_unpartitioned_toleration.values"),
    ],
)
def test_a_bad_option_is_refused_by_name(options: dict[str, Any], field: str) -> None:
    _refused(_template(), field, **options)


# --------------------------------------------------------------------------- secrets


def _secret_text(value: str) -> str:
    """The webhook's side: base32 (flyteplugins' alphabet, no padding) of the secret's proto text."""
    std = value.translate(str.maketrans("abcdefghijklmnopqrstuvwxyz123456", "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"))
    return base64.b32decode(std + "=" * (-len(std) % 8)).decode()


def _decode_secret(value: str) -> Any:
    return text_format.Parse(_secret_text(value), security_pb2.Secret())


def test_secret_requests_become_the_webhooks_label_and_annotations(crd_validator: Any) -> None:
    pb = _template(
        secret_requests=[
            Secret(group="db", key="password"),
            Secret(group="api", key="token", mount_requirement=Secret.MountType.FILE),
        ]
    )
    job = _valid(_render(pb, labels={"team": "ml"}), crd_validator)
    for meta in (job["metadata"], *(p["metadata"] for p in _pods(job).values())):
        assert meta["labels"] == {"team": "ml", "inject-flyte-secrets": "true"}
        assert sorted(meta["annotations"]) == ["flyte.secrets/s0", "flyte.secrets/s1"]
        for i, secret in enumerate(pb.security_context.secrets):
            assert _decode_secret(meta["annotations"][f"flyte.secrets/s{i}"]) == secret
    # The exact text propeller encodes (golang/protobuf's MarshalTextString), for one secret.
    assert _decode_secret(job["metadata"]["annotations"]["flyte.secrets/s1"]) == security_pb2.Secret(
        group="api", key="token", mount_requirement=security_pb2.Secret.FILE
    )
    text = _secret_text(job["metadata"]["annotations"]["flyte.secrets/s0"])
    assert text == 'group: "db"\nkey: "password"\n'


def test_a_caller_label_the_secrets_need_is_refused() -> None:
    pb = _template(secret_requests=[Secret(group="db", key="password")])
    _refused(pb, "labels.inject-flyte-secrets", "secrets webhook", labels={"inject-flyte-secrets": "false"})
    _render(pb, labels={"inject-flyte-secrets": "true"})  # the same value is no conflict


def test_a_secret_with_an_unknown_mount_type_is_refused() -> None:
    tmpl = _container_template()
    tmpl.security_context.secrets.add(group="g", key="k").mount_requirement = 7  # type: ignore[assignment]
    _refused(tmpl, "security_context.secrets[0].mount_requirement", "ANY, ENV_VAR, FILE")


# --------------------------------------------------------------------------- other flytekit settings


def test_pod_template_name_is_refused() -> None:
    _refused(_template(pod_template_name="gpu-base"), "metadata.pod_template_name", "pod_template=PodTemplate")


def test_container_image_and_the_engines_fields(crd_validator: Any) -> None:
    base = _template(container_image="ghcr.io/acme/other:2")
    job = _valid(_render(base), crd_validator)
    assert _worker(job)["spec"]["containers"][0]["image"] == "ghcr.io/acme/other:2"
    # Timeout, retries, cache, deck, docs: the engine's; the job is the same without them.
    engine = _template(
        container_image="ghcr.io/acme/other:2",
        timeout=600,
        retries=3,
        cache=True,
        cache_version="1",
        cache_serialize=True,
        cache_ignore_input_vars=("x",),
        deprecated="use v2",
        enable_deck=True,
        interruptible=False,
    )
    meta = engine.metadata
    assert meta.HasField("timeout") and meta.retries.retries == 3 and meta.generates_deck.value
    assert meta.discoverable and meta.cache_serializable and meta.deprecated_error_message
    assert list(meta.cache_ignore_input_vars) == ["x"] and meta.WhichOneof("interruptible_value")
    assert _render(engine) == job


def test_shared_memory_and_its_conflicts(crd_validator: Any) -> None:
    pod = _worker(_valid(_render(_template(shared_memory="2Gi")), crd_validator))
    assert {"name": "flyte-shared-memory", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}} in pod["spec"][
        "volumes"
    ]
    assert {"name": "flyte-shared-memory", "mountPath": "/dev/shm"} in pod["spec"]["containers"][0]["volumeMounts"]
    mounted = PodTemplate(
        pod_spec=V1PodSpec(
            containers=[V1Container(name="main", volume_mounts=[V1VolumeMount(name="mine", mount_path="/dev/shm")])]
        ),
        primary_container_name="main",
    )
    _refused(_template(pod_template=mounted, shared_memory=True), "extended_resources.shared_memory.mount_path")
    tmpl = _container_template()
    tmpl.extended_resources.shared_memory.mount_path = "/dev/shm"
    _refused(tmpl, "extended_resources.shared_memory.mount_name", "empty")
    tmpl.extended_resources.shared_memory.mount_name = "shm"
    tmpl.extended_resources.shared_memory.size_limit = "lots"
    _refused(tmpl, "extended_resources.shared_memory.size_limit")


def test_the_tasks_kubernetes_metadata_is_the_jobs(crd_validator: Any) -> None:
    tmpl = _container_template()
    tmpl.metadata.metadata.labels.update({"cost-center": "42", "team": "task"})
    tmpl.metadata.metadata.annotations["note"] = "from the task"
    job = _valid(_render(tmpl, labels={"team": "ml"}), crd_validator)
    assert job["metadata"]["labels"] == {"cost-center": "42", "team": "ml"}  # the caller's win
    assert job["metadata"]["annotations"] == {"note": "from the task"}
    assert _worker(job)["metadata"] == {"labels": {"team": "ml"}}  # the job object's only, as propeller's


# --------------------------------------------------------------------------- hand-made templates


def _edit(edit: Callable[[Any], None], tmpl: Any = None) -> Any:
    tmpl = tmpl if tmpl is not None else _container_template()
    edit(tmpl)
    return tmpl


@pytest.mark.parametrize(
    ("field", "edit", "word"),
    [
        ("sql", lambda t: t.sql.SetInParent() or setattr(t.sql, "statement", "select 1"), "SQL"),
        ("container.config", lambda t: t.container.config.add(key="k", value="v"), "deprecated"),
        ("container.ports", lambda t: t.container.ports.add(container_port=8080, name="http"), "pod template"),
        ("container.architecture", lambda t: setattr(t.container, "architecture", 2), "kubernetes.io/arch"),
        ("container.data_config.enabled", lambda t: setattr(t.container.data_config, "enabled", True), "CoPilot"),
        ("security_context.run_as.k8s_service_account", lambda t: setattr(t.security_context.run_as, "k8s_service_account", "sa"), "serviceAccountName"),
        ("security_context.run_as.iam_role", lambda t: setattr(t.security_context.run_as, "iam_role", "r"), "execution"),
        ("security_context.run_as.oauth2_client", lambda t: setattr(t.security_context.run_as.oauth2_client, "client_id", "c"), "secret_requests"),
        ("security_context.run_as.execution_identity", lambda t: setattr(t.security_context.run_as, "execution_identity", "me"), "identity"),
        ("security_context.tokens", lambda t: t.security_context.tokens.add(name="tok"), "secret_requests"),
        ("config.my_plugin", lambda t: t.config.update({"my_plugin": "x"}), "would be ignored"),
    ],
)  # fmt: skip
def test_a_field_propeller_drops_is_refused(field: str, edit: Callable[[Any], None], word: str) -> None:
    _refused(_edit(edit), field, word)


def test_a_template_without_target_and_the_k8s_pod_rules() -> None:
    tmpl = _container_template()
    tmpl.ClearField("container")
    _refused(tmpl, "container", "no target")
    pb = _template()
    assert pb.HasField("k8s_pod") and not pb.k8s_pod.primary_container_name  # flytekit writes the config only
    pb.k8s_pod.primary_container_name = "other"
    _refused(pb, "k8s_pod.primary_container_name", "reads only the config")
    pb.k8s_pod.primary_container_name = pb.config["primary_container_name"]
    _render(pb)  # the same name is no conflict
    del pb.config["primary_container_name"]
    _refused(pb, "config.primary_container_name", "propeller refuses")
    pod = _template()
    pod.k8s_pod.data_config.enabled = True
    _refused(pod, "k8s_pod.data_config.enabled", "CoPilot")


def test_what_nothing_reads_for_the_pods_renders(crd_validator: Any) -> None:
    """A disabled data_config (propeller adds nothing either) and the console's config keys."""
    base = _render(_container_template())
    quiet = _edit(
        lambda t: (
            t.container.data_config.SetInParent(),
            setattr(t.container.data_config, "output_path", "/out"),
            t.config.update({"link_type": "vscode", "port": "8080"}),
        )
    )
    assert _valid(_render(quiet), crd_validator) == base


# --------------------------------------------------------------------------- against the Go plugin


def _go_cases() -> dict[str, tuple[Any, dict[str, Any]]]:
    """Templates (flytekit's where it can write them) and the options that state propeller's configuration."""
    user = PodTemplate(
        pod_spec=V1PodSpec(
            containers=[V1Container(name="main")],
            tolerations=[V1Toleration(key="own", operator="Exists")],
            node_selector={"pool": "mine"},
            affinity=V1Affinity(
                node_affinity=V1NodeAffinity(
                    required_during_scheduling_ignored_during_execution=V1NodeSelector(
                        node_selector_terms=[
                            V1NodeSelectorTerm(
                                match_expressions=[V1NodeSelectorRequirement(key="zone", operator="In", values=[z])]
                            )
                            for z in "ab"
                        ]
                    )
                )
            ),
        ),
        primary_container_name="main",
    )
    sidecars = PodTemplate(
        pod_spec=V1PodSpec(
            containers=[
                V1Container(
                    name="main",
                    env=[V1EnvVar(name="FROM_POD", value="1")],
                    volume_mounts=[V1VolumeMount(name="cache", mount_path="/cache")],
                ),
                V1Container(
                    name="sidecar",
                    image="busybox:1",
                    args=["--out", "{{.outputPrefix}}"],
                    resources=V1ResourceRequirements(requests={"cpu": "100m"}, limits={"cpu": "200m"}),
                ),
            ],
            init_containers=[V1Container(name="warm", image="busybox:1", command=["true"])],
            volumes=[V1Volume(name="cache", empty_dir=V1EmptyDirVolumeSource())],
            restart_policy="OnFailure",
        ),
        labels={"from-pod": "yes"},
        annotations={"from-pod": "yes"},
        primary_container_name="main",
    )
    secrets = [
        Secret(group="db", key="password"),
        Secret(group="api", key="token", mount_requirement=Secret.MountType.FILE),
    ]
    odd = _container_template()
    odd.security_context.secrets.add(group='a"b\\c\té\n', key="k", env_var="E", group_version="v1")
    gpu = {"requests": [{"name": "GPU", "value": "1"}], "limits": [{"name": "GPU", "value": "1"}]}
    replicas = _container_template(
        {"masterReplicas": {"common": {"replicas": 1}}, "workerReplicas": {"common": {"replicas": 2, "resources": gpu}}}
    )
    replicas.extended_resources.gpu_accelerator.device = "nvidia-tesla-t4"
    replicas.metadata.interruptible = True
    replicas.container.resources.requests.add(name=tasks_pb2.Resources.EPHEMERAL_STORAGE, value="1Gi")
    v0 = _container_template({"workers": 2})
    v0.task_type_version = 0
    v0.metadata.metadata.labels["team"] = "ml"
    v0.metadata.metadata.annotations["note"] = "from the task"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from flytekitplugins import kfpytorch
    kf = kfpytorch.PyTorch(
        master=kfpytorch.Master(image="ghcr.io/acme/master:1", restart_policy=kfpytorch.RestartPolicy.FAILURE),
        worker=kfpytorch.Worker(replicas=3, requests=flytekit.Resources(cpu="2"), limits=flytekit.Resources(mem="4Gi")),
        increase_shared_mem=False,
    )
    labels = {
        "gpu_device_node_label": "cloud.google.com/gke-accelerator",
        "gpu_partition_size_node_label": PARTITION_LABEL,
    }
    return {
        "everything": (
            _template(
                interruptible=True,
                pod_template=user,
                accelerator=T4,
                secret_requests=secrets,
                shared_memory="1Gi",
                **GPU,
            ),
            {**labels, **INTERRUPTIBLE},
        ),
        "partition": (_template(accelerator=A100.partition_1g_5gb, **GPU), {**labels, **INTERRUPTIBLE}),
        "unpartitioned": (_template(accelerator=A100.unpartitioned, shared_memory=True, **GPU), labels),
        "unpartitioned_configured": (
            _template(accelerator=A100.unpartitioned, **GPU),
            {
                **labels,
                "gpu_unpartitioned_node_selector_requirement": {"key": "gpu-whole", "operator": "Exists"},
                "gpu_unpartitioned_toleration": {"key": "gpu-whole", "operator": "Exists", "effect": "NoSchedule"},
            },
        ),
        "odd_secret": (odd, {}),
        "replicas": (replicas, {**labels, **INTERRUPTIBLE}),
        "sidecars": (_template(pod_template=sidecars, requests=flytekit.Resources(mem="2Gi")), {}),
        "requests_env": (
            _template(
                ei.Elastic(nnodes="1:3", nproc_per_node=2),
                requests=flytekit.Resources(cpu="500m", mem="1.5Gi"),
                limits=flytekit.Resources(cpu="2", ephemeral_storage="2Gi"),
                environment={"A": "1", "B": "two"},
            ),
            {},
        ),
        "v0": (v0, {}),
        "kfpytorch": (_template(kf), {}),
        "kfpytorch_elastic": (
            _template(kfpytorch.Elastic(nnodes=2, nproc_per_node=2, increase_shared_mem=False), timeout=600),
            {},
        ),
    }


#: What the mocked propeller context (go/flyteplugin's propellerContext and mockedContext) gives
#: the execution, passed to the Python renderer as its name and namespace.
GO_EXECUTION = {"name": "some-acceptable-name", "namespace": "test-namespace"}
#: The plugin's section (plugins.elastic-idl-pytorch) each case runs under, and the renderer's options
#: that state it: the strict mode (the renderer's defaults) and the plugin's default (upstream, Never).
PLUGIN_CONFIGS: dict[str, tuple[dict[str, str], dict[str, str]]] = {
    "strict": ({"mode": "strict"}, {}),
    "upstream": ({}, {"mode": "upstream", "elastic_worker_restart_policy": "Never"}),
}
#: flyteplugins v1.16.8's defaults of the k8s plugin configuration (plugins.k8s) the Go side runs
#: under, as the renderer's options: default-annotations (on the job and every pod, as the
#: renderer's annotations), default-cpus and default-memory.
PLATFORM_DEFAULTS: dict[str, Any] = {
    "annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
    "default_cpus": "1000m",
    "default_memory": "1024Mi",
}
#: The values propeller fills per execution, and how the comparison treats each (quoted by
#: docs/guide/flytekit.md). Everything else must be equal, or be in DELIBERATE.
NORMALISED: dict[str, str] = {
    "job metadata": "BuildResource returns the job without metadata; propeller's plugin manager "
    "(addObjectMetadata) sets its name and namespace (the execution's), owner reference, labels and "
    "annotations (default-labels/annotations, the task's metadata.metadata, the execution's): the Go "
    "job gets them so, the owner reference (the execution's node) left out",
    "status": "an empty status, which the Go job serializes and the API server ignores on create",
    "input and output templates": "{{.input}}, {{.outputPrefix}}, ... in every container's command and "
    "args are filled by propeller per execution (flyteplugins' template.Render): filled in the Python job "
    "with the mocked context's locations",
    "execution env": "FLYTE_INTERNAL_EXECUTION_ID/PROJECT/DOMAIN and FLYTE_ATTEMPT_NUMBER, which propeller "
    "adds to every container per execution (flytek8s.DecorateEnvVars): left out of the Go job",
    "empty affinity": "an empty affinity, which propeller writes on every pod and which is no affinity",
    "emptyDir sizeLimit 0": "propeller writes sizeLimit 0 for a shared memory without a size, which "
    "the kubelet reads as no limit, as it reads none",
    "quantities": "a resource quantity is compared by its value: Go writes the canonical form "
    "(1000m as 1, 1024Mi as 1Gi), the renderer writes it as the template or the option does",
}
#: Where the renderer deliberately differs from propeller + go/flyteplugin (quoted by the docs): never
#: in what both render from one template (the comparison allows no difference), only in what is
#: rendered at all and in the defaults of the plugin's section.
DELIBERATE: dict[str, str] = {
    "refused templates": "a template field that propeller drops (container.ports, run_as, ...) is "
    "refused naming it, as the plugin's strict mode refuses it, where the upstream mode renders without "
    "it and logs a warning; metadata.pod_template_name and an enabled data_config are refused because "
    "they need what a pure function has not (the cluster's PodTemplate, propeller's co-pilot "
    "configuration)",
    "defaults of the plugin's section": "the renderer's mode and elastic_worker_restart_policy default "
    "to strict and ExitCode, the plugin's section to upstream and Never: pass mode='upstream' and "
    "elastic_worker_restart_policy='Never' for what a propeller with the default section creates",
}
#: flyteplugins' template.Render, with the mocked context's locations.
_GO_LOCATIONS = {
    "{{.input}}": "/input",
    "{{.inputPrefix}}": "/input/prefix",
    "{{.outputPrefix}}": "/data/",
    "{{.rawOutputDataPrefix}}": "",
    "{{.checkpointOutputPrefix}}": "/checkpoint",
    "{{.prevCheckpointPrefix}}": "/prev",
}
_EXECUTION_ENV = frozenset(
    {
        "FLYTE_INTERNAL_EXECUTION_ID",
        "FLYTE_INTERNAL_EXECUTION_PROJECT",
        "FLYTE_INTERNAL_EXECUTION_DOMAIN",
        "FLYTE_ATTEMPT_NUMBER",
    }
)
_SECRET_KEYS = ("flyte.secrets/", "inject-flyte-secrets")


def _all_containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    spec = pod["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def _normalised_pod(pod: dict[str, Any], *, go: bool) -> dict[str, Any]:
    """One pod template with NORMALISED applied: on the Go side the execution's env goes, on the
    Python side the templates are filled; both sides alike for the rest."""
    pod = json.loads(json.dumps(pod))
    spec = pod["spec"]
    if not spec.get("affinity"):
        spec.pop("affinity", None)
    for v in spec.get("volumes", []):
        if v.get("emptyDir", {}).get("sizeLimit") == "0":
            del v["emptyDir"]["sizeLimit"]
    for c in _all_containers(pod):
        if go:
            c["env"] = [e for e in c.get("env", []) if e["name"] not in _EXECUTION_ENV]
        else:
            for key in ("command", "args"):
                if key in c:
                    c[key] = [_GO_LOCATIONS.get(a, a) for a in c[key]]
        if not c.get("env"):
            c.pop("env", None)
        if "resources" in c:
            c["resources"] = {
                kind: {k: parse_quantity(v) for k, v in block.items()}
                for kind, block in c["resources"].items()
                if block
            }
            if not c["resources"]:
                del c["resources"]
    return pod


def _normalised_job(job: dict[str, Any], tmpl: Any, *, go: bool) -> dict[str, Any]:
    job = json.loads(json.dumps(job))
    if go:
        assert job.pop("status") == {} and job["metadata"] == {}
        pod_meta = next(iter(_pods(job).values())).get("metadata", {})
        task_meta = tmpl.metadata.metadata
        job["metadata"] = {**GO_EXECUTION}
        for key, task_own, default in (
            ("labels", task_meta.labels, {}),
            ("annotations", task_meta.annotations, PLATFORM_DEFAULTS["annotations"]),
        ):
            execution = {k: v for k, v in pod_meta.get(key, {}).items() if k.startswith(_SECRET_KEYS)}
            union = {**default, **task_own, **execution}
            if union:
                job["metadata"][key] = union
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        replica["template"] = _normalised_pod(replica["template"], go=go)
    return job


def test_the_normalisation_is_what_the_docs_say() -> None:
    """docs/guide/flytekit.md quotes every normalisation and deliberate difference of the comparison."""
    text = " ".join((REPO / "docs" / "guide" / "flytekit.md").read_text().split())
    for what, why in {**NORMALISED, **DELIBERATE}.items():
        assert f"{what}: {why}" in text, what


def test_the_go_plugin_builds_the_same_jobs(go_bin: str, tmp_path: Path) -> None:
    """Every template through go/flyteplugin's BuildResource in flyteplugins v1.16.8's pod machinery
    (propeller's configuration set to what the options state, the plugin in both modes) and through the
    renderer: the whole jobs are equal, NORMALISED applied, DELIBERATE aside."""
    cases = _go_cases()
    for case, (tmpl, options) in cases.items():
        for config, (section, _) in PLUGIN_CONFIGS.items():
            (tmp_path / f"{case}.{config}.pb").write_bytes(tmpl.SerializeToString())
            k8s = {PROPELLER_KEYS[k]: v for k, v in options.items()}
            (tmp_path / f"{case}.{config}.config.json").write_text(json.dumps(k8s))
            (tmp_path / f"{case}.{config}.plugin.json").write_text(json.dumps(section))
    proc = subprocess.run(
        [go_bin, "test", "-count=1", "-run", "TestTemplateJobsForPython", "."],
        cwd=REPO / "go" / "flyteplugin",
        env={**os.environ, **GO_ENV, "ELASTIC_IDL_TEMPLATE_JOBS_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for case, (tmpl, options) in cases.items():
        for config, (_, ours_options) in PLUGIN_CONFIGS.items():
            go_job = json.loads((tmp_path / f"{case}.{config}.job.json").read_text())
            ours = render_pytorchjob_from_template(tmpl, **GO_EXECUTION, **PLATFORM_DEFAULTS, **options, **ours_options)
            want, got = _normalised_job(go_job, tmpl, go=True), _normalised_job(ours, tmpl, go=False)
            assert got == want, (case, config)


def test_the_normalisation_hides_no_difference_it_does_not_name() -> None:
    """The normalisation keeps what it does not name: a changed env value, an extra volume, an
    annotation, a resource or a restart policy still tell two jobs apart."""
    tmpl, options = _go_cases()["everything"]
    job = render_pytorchjob_from_template(tmpl, **GO_EXECUTION, **PLATFORM_DEFAULTS, **options)
    base = _normalised_job(job, tmpl, go=False)
    edits: list[Callable[[dict[str, Any]], None]] = [
        lambda p: p["spec"]["containers"][0]["env"].append({"name": "X", "value": "1"}),
        lambda p: p["spec"]["volumes"].append({"name": "v", "emptyDir": {}}),
        lambda p: p["metadata"]["annotations"].update({"a": "b"}),
        lambda p: p["spec"]["containers"][0]["resources"]["limits"].update({"cpu": "2"}),
        lambda p: p["spec"].update({"restartPolicy": "Always"}),
        lambda p: p["spec"].update({"affinity": {"podAffinity": {}}}),
        lambda p: p["spec"]["containers"][0]["args"].append("--more"),
    ]
    for edit in edits:
        changed = json.loads(json.dumps(job))
        edit(_worker(changed))
        assert _normalised_job(changed, tmpl, go=False) != base
