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
- against the Go plugin: the same templates through flyteplugins v1.16.8's real pod machinery
  (``go/flyteplugin``'s ``TestTemplateJobsForPython``) give the same scheduling fields, secrets
  annotations and shared memory on every pod.
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
        V1NodeAffinity,
        V1NodeSelector,
        V1NodeSelectorRequirement,
        V1NodeSelectorTerm,
        V1PodSpec,
        V1Toleration,
        V1VolumeMount,
    )

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
    }


def _scheduling(pod: dict[str, Any]) -> dict[str, Any]:
    """What the two must agree on, normalised where two spellings mean the same to Kubernetes."""
    spec = pod["spec"]
    meta = pod.get("metadata", {})
    training = next(c for c in spec["containers"] if c["name"] == "pytorch")
    volumes = []
    for v in spec.get("volumes", []):
        v = json.loads(json.dumps(v))
        if (
            v.get("emptyDir", {}).get("sizeLimit") == "0"
        ):  # propeller writes 0 for "no limit"; the kubelet reads both so
            del v["emptyDir"]["sizeLimit"]
        volumes.append(v)
    return {
        "affinity": spec.get("affinity") or None,  # propeller writes an empty affinity
        "tolerations": spec.get("tolerations"),
        "nodeSelector": spec.get("nodeSelector") or None,
        "volumes": volumes,
        "volumeMounts": training.get("volumeMounts"),
        "secrets": {
            k: v
            for key in ("labels", "annotations")
            for k, v in (meta.get(key) or {}).items()
            if k.startswith("flyte.secrets/") or k == "inject-flyte-secrets"
        },
    }


def test_the_go_plugin_builds_the_same_pods(go_bin: str, tmp_path: Path) -> None:
    """The same templates through go/flyteplugin and flyteplugins v1.16.8's own pod machinery, with propeller's
    configuration set to what the options state: scheduling, secrets and shared memory agree pod by pod."""
    cases = _go_cases()
    for case, (tmpl, options) in cases.items():
        (tmp_path / f"{case}.pb").write_bytes(tmpl.SerializeToString())
        config = {PROPELLER_KEYS[k]: v for k, v in options.items()}
        (tmp_path / f"{case}.config.json").write_text(json.dumps(config))
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
        go_job = json.loads((tmp_path / f"{case}.job.json").read_text())
        ours = _render(tmpl, **options)
        go_pods, our_pods = _pods(go_job), _pods(ours)
        assert sorted(go_pods) == sorted(our_pods), case
        for rt, pod in our_pods.items():
            assert _scheduling(pod) == _scheduling(go_pods[rt]), (case, rt)
