"""Issue 19: render modes, the elastic Worker's restart option, STORAGE, forward compatibility, the NetworkPolicy."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml

import elastic_idl as ei
from elastic_idl import _conformance as conf
from elastic_idl._backend.pytorchjob import UPSTREAM_TOLERATED_RULES, tolerated_in_upstream_mode

ROOT = Path(__file__).resolve().parent.parent
FORWARD = ROOT / "contract" / "forward"
GOLDEN_NETPOL = Path(__file__).resolve().parent / "golden" / "networkpolicy"
OPTS: dict[str, Any] = {"name": "train", "image": "ghcr.io/acme/train:1", "entrypoint": ["train.py"]}


def render(custom: dict[str, Any], version: int = 1, **opts: Any) -> dict[str, Any]:
    return ei.render_pytorchjob(custom, ei.JobOptions(**{**OPTS, **opts}), task_type_version=version)


def skew_of(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ei.SkewWarning)
        out = fn(*args, **kwargs)
    return out, conf.skew_fields(caught)


ELASTIC = {"elasticConfig": {"minReplicas": 1, "maxReplicas": 3, "nprocPerNode": 4}}


# --------------------------------------------------------------------------- modes


def test_strict_is_the_default_and_upstream_differs_where_flyte_1x_does() -> None:
    strict = render(ELASTIC)
    assert render(ELASTIC, mode="strict") == strict
    assert strict["spec"]["nprocPerNode"] == "4"
    assert strict["spec"]["elasticPolicy"]["rdzvBackend"] == "c10d"
    assert "nProcPerNode" not in strict["spec"]["elasticPolicy"]
    up = render(ELASTIC, mode="upstream")
    assert "nprocPerNode" not in up["spec"]  # the operator's webhook refuses both fields
    assert up["spec"]["elasticPolicy"]["nProcPerNode"] == 4
    assert up["spec"]["elasticPolicy"]["rdzvBackend"] == ""
    assert ei.pod_env(up, "Worker", 0)["PET_NPROC_PER_NODE"] == "4"
    # Everything else is equal.
    for job in (strict, up):
        job["spec"].pop("nprocPerNode", None)
        job["spec"]["elasticPolicy"].pop("nProcPerNode", None)
        job["spec"]["elasticPolicy"].pop("rdzvBackend")
    assert up == strict


def test_upstream_keeps_extension_fields_and_puts_a_policy_in_spec_nproc() -> None:
    custom = {
        "elasticConfig": {
            "minReplicas": 1,
            "maxReplicas": 2,
            "nprocPolicy": "NPROC_POLICY_GPU",
            "rdzvId": "run-7",
            "rdzvPort": 29400,
            "joinTimeout": "600s",
        }
    }
    up = render(custom, mode="upstream")
    policy = up["spec"]["elasticPolicy"]
    assert up["spec"]["nprocPerNode"] == "gpu"
    assert "nProcPerNode" not in policy
    assert policy["rdzvId"] == "run-7" and policy["rdzvPort"] == 29400
    assert policy["rdzvConf"] == [{"key": "join_timeout", "value": "600"}]


def test_master_without_replicas_is_one_in_upstream_mode_and_refused_in_strict() -> None:
    custom = {"workerReplicas": {"common": {"replicas": 2}}, "masterReplicas": {"common": {"image": "m:1"}}}
    with pytest.raises(ei.ValidationError, match=r"replicas\.master_count"):
        render(custom)
    job = render(custom, mode="upstream")
    assert job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] == 1
    assert job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["image"] == "m:1"
    # Two masters stay refused: the webhook requires exactly one.
    custom["masterReplicas"]["common"]["replicas"] = 2
    with pytest.raises(ei.ValidationError, match=r"replicas\.master_count"):
        render(custom, mode="upstream")


def test_zero_workers_without_elastic_is_a_master_only_job_in_upstream_mode() -> None:
    custom = {"masterReplicas": {"replicas": 1}}
    with pytest.raises(ei.ValidationError, match=r"replicas\.workers_required"):
        render(custom)
    job = render(custom, mode="upstream")
    assert list(job["spec"]["pytorchReplicaSpecs"]) == ["Master"]
    assert ei.pod_env(job, "Master", 0)["WORLD_SIZE"] == "1"
    # The empty task stays refused (task.not_empty is no upstream behaviour).
    with pytest.raises(ei.ValidationError, match=r"task\.not_empty"):
        render({}, mode="upstream")


def test_elastic_worker_count_is_kept_in_upstream_mode() -> None:
    custom = {**ELASTIC, "workerReplicas": {"replicas": 2}}
    with pytest.raises(ei.ValidationError, match=r"replicas\.worker_matches_max"):
        render(custom)
    assert render(custom, mode="upstream")["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    # 0 still means max_replicas.
    assert render(ELASTIC, mode="upstream")["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3


def test_tolerated_rules_are_only_the_three_upstream_renders() -> None:
    assert {"replicas.workers_required", "replicas.worker_matches_max", "replicas.master_count"} == (
        UPSTREAM_TOLERATED_RULES
    )
    view = ei.view({"masterReplicas": {"replicas": 2}, "workerReplicas": {"replicas": 1}})
    (violation,) = ei.violations(view)
    assert not tolerated_in_upstream_mode(violation, view)


@pytest.mark.parametrize("mode", ["strict", "upstream"])
def test_elastic_worker_restart_policy_is_exitcode_unless_never_is_asked(mode: str) -> None:
    worker = render(ELASTIC, mode=mode)["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert worker["restartPolicy"] == "ExitCode"
    never = render(ELASTIC, mode=mode, elastic_worker_restart_policy="Never")
    assert never["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "Never"
    # A policy the task sets is kept.
    custom = {**ELASTIC, "workerReplicas": {"common": {"restartPolicy": "RESTART_POLICY_ON_FAILURE"}}}
    job = render(custom, mode=mode, elastic_worker_restart_policy="Never")
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "OnFailure"


@pytest.mark.parametrize(
    ("option", "value"),
    [("mode", "lenient"), ("mode", None), ("elastic_worker_restart_policy", "OnFailure"), ("network_policy", "yes")],
)
def test_bad_mode_options_are_render_errors_naming_the_option(option: str, value: Any) -> None:
    with pytest.raises(ei.RenderError) as info:
        render(ELASTIC, **{option: value})
    assert info.value.field == option


# --------------------------------------------------------------------------- STORAGE


@pytest.mark.parametrize("mode", ["strict", "upstream"])
def test_storage_is_dropped_with_a_skew_warning_naming_the_field(mode: str) -> None:
    res = {"requests": [{"name": "CPU", "value": "1"}, {"name": "STORAGE", "value": "10Gi"}]}
    custom = {**ELASTIC, "workerReplicas": {"common": {"resources": res}}}
    job, skew = skew_of(render, custom, mode=mode)
    assert skew == ["worker_replicas.common.resources.requests[1]"]
    resources = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]
    assert resources == {"requests": {"cpu": "1"}}
    with pytest.warns(ei.SkewWarning, match=r"requests\[1\]: STORAGE"):
        render(custom, mode=mode)


def test_storage_alone_leaves_no_resources() -> None:
    custom = {**ELASTIC, "workerReplicas": {"resources": {"limits": [{"name": "STORAGE", "value": "1Gi"}]}}}
    job, skew = skew_of(render, custom)
    assert skew == ["worker_replicas.resources.limits[0]"]
    assert "resources" not in job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]


# --------------------------------------------------------------------------- forward compatibility

VECTORS = {v.name: v for v in conf.load_forward_vectors(FORWARD)}


def test_forward_vectors_cover_both_shapes_and_formats() -> None:
    covered = {(v.task_type_version, v.format) for v in VECTORS.values()}
    assert covered == {(0, "json"), (1, "json"), (0, "binary_hex"), (1, "binary_hex")}
    assert {p.name for p in FORWARD.iterdir()} == set(VECTORS)
    for v in VECTORS.values():
        assert {p.name for p in v.path.iterdir()} == {conf.FORWARD_INPUT, conf.FORWARD_EXPECTED}


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_forward_vector(name: str) -> None:
    vector = VECTORS[name]
    expected = json.loads((vector.path / conf.FORWARD_EXPECTED).read_text(encoding="utf-8"))
    assert conf.forward_outputs(vector) == expected
    tolerant = expected["tolerant"]
    if vector.format != "json":
        assert tolerant["unknown"] and tolerant["binary_hex"] == vector.input  # kept byte for byte
        return
    custom = json.loads(vector.input)
    if "error" in tolerant:
        with pytest.raises(ei.DecodeError) as info:
            ei.from_custom(custom, task_type_version=vector.task_type_version)
        assert info.value.field == tolerant["error"]["field"]
        return
    # The backend's entry points: from_custom and the renderer read the custom dict, warn, and go on.
    task, skew = skew_of(ei.from_custom, custom, task_type_version=vector.task_type_version)
    assert skew == tolerant["unknown"]
    assert ei.to_custom(task) == tolerant["custom"]
    job, skew = skew_of(render, custom, vector.task_type_version)
    assert skew == tolerant["unknown"]
    assert job == render(tolerant["custom"], vector.task_type_version)
    with pytest.raises(ei.DecodeError) as info:
        ei.from_custom(custom, task_type_version=vector.task_type_version, strict=True)
    assert info.value.field == expected["strict"]["error"]["field"]


def test_validate_cli_refuses_unknown_fields_with_or_without_strict(tmp_path: Path) -> None:
    """A file is the user's: validate refuses what it does not know, as every command does (issue 29 item 8);
    --strict is kept, and changes nothing. The tolerant decode is the backend's (from_custom, decode(strict=False))."""
    task = tmp_path / "task.json"
    task.write_text(VECTORS["kf_unknown_keys"].input)
    binary = tmp_path / "task.pb"
    binary.write_bytes(bytes.fromhex(VECTORS["kf_unknown_field_numbers"].input))
    for extra in ([], ["--strict"]):
        cmd = [sys.executable, "-m", "elastic_idl.cli", "validate", *extra]
        keys = subprocess.run([*cmd, str(task)], capture_output=True, text=True, check=False)
        assert keys.returncode == 1
        assert keys.stderr.startswith("elastic-idl: error: worker_replicas.common.restart_policy: "), keys.stderr
        numbers = subprocess.run([*cmd, str(binary)], capture_output=True, text=True, check=False)
        assert numbers.returncode == 1
        assert numbers.stderr.startswith("elastic-idl: error: 20: a field number this version does not know")


# --------------------------------------------------------------------------- NetworkPolicy


@pytest.mark.parametrize("path", sorted(GOLDEN_NETPOL.glob("*.json")), ids=lambda p: p.stem)
def test_network_policy_golden(path: Path) -> None:
    golden = json.loads(path.read_text(encoding="utf-8"))
    assert ei.render_network_policy(golden["job"]) == golden["expected"]


def test_render_objects_adds_the_policy_of_the_rendered_job() -> None:
    options = ei.JobOptions(**OPTS, namespace="ml", labels={"team": "a"}, network_policy=True)
    job, policy = ei.render_objects(ELASTIC, options, task_type_version=1)
    assert job == render(ELASTIC, namespace="ml", labels={"team": "a"})
    assert policy == ei.render_network_policy(job)
    assert policy["metadata"] == {"name": "train", "namespace": "ml", "labels": {"team": "a"}}
    assert ei.render_objects(ELASTIC, ei.JobOptions(**OPTS), task_type_version=1) == [render(ELASTIC)]


@pytest.mark.parametrize(("job", "field"), [({}, "metadata"), ({"metadata": {"namespace": "x"}}, "metadata.name")])
def test_network_policy_of_a_job_without_a_name_is_a_render_error(job: dict[str, Any], field: str) -> None:
    with pytest.raises(ei.RenderError) as info:
        ei.render_network_policy(job)
    assert info.value.field == field


def test_cli_render_network_policy_prints_two_documents(tmp_path: Path) -> None:
    task = tmp_path / "task.json"
    task.write_text(json.dumps(ELASTIC))
    cmd = [sys.executable, "-m", "elastic_idl.cli", "render", str(task), "--name", "train", "--image", "i:1"]
    one = subprocess.run([*cmd, "--", "train.py"], capture_output=True, text=True, check=False)
    assert one.returncode == 0, one.stderr
    assert [d["kind"] for d in yaml.safe_load_all(one.stdout)] == ["PyTorchJob"]
    two = subprocess.run(
        [*cmd, "--network-policy", "--mode", "upstream", "--", "train.py"], capture_output=True, text=True, check=False
    )
    assert two.returncode == 0, two.stderr
    job, policy = yaml.safe_load_all(two.stdout)
    assert job["spec"]["elasticPolicy"]["nProcPerNode"] == 4
    assert policy == ei.render_network_policy(job)
