"""The TrainJob and the JobSet against their CRDs, offline (issue 34, item 2).

The CRDs come from the Go modules the module proxy serves (fetched with ``go mod download``, read
in place, never copied): Kubeflow Trainer ``github.com/kubeflow/trainer/v2`` v2.3.0 (the TrainJob
CRD, trainer.kubeflow.org/v1alpha1, and its ``torch-distributed`` ClusterTrainingRuntime) and JobSet
``sigs.k8s.io/jobset`` v0.12.0 (jobset.x-k8s.io/v1alpha2). Every object of every contract vector's
``targets.json`` meets its CRD's structural schema, with unknown fields refused, and its creation-time
CEL rules (tests/k8s_schema.py); the TrainJob with the proposed ``elasticPolicy`` breaks exactly
that. The checker itself refuses what the API server refuses (a bad name, a wrong type, an unknown
field, a missing required field, a broken CEL rule), so a pass means something.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic_idl._backend import jobset, nodes, trainjob
from elastic_idl._conformance import TARGET_OUTPUTS, load_cases, read_expected
from k8s_schema import CrdVersion
from test_go import _go_env, go_bin

__all__ = ["go_bin"]  # the go command fixture (a skip without Go; a failure under CI=true)

ROOT = Path(__file__).resolve().parent.parent
#: module, version -> the CRD files (paths in the module) this test reads.
MODULES = {
    ("github.com/kubeflow/trainer/v2", "v2.3.0"): "manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml",
    ("sigs.k8s.io/jobset", "v0.12.0"): "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml",
}
RUNTIME_FILE = "manifests/base/runtimes/torch_distributed.yaml"


@pytest.fixture(scope="module")
def module_dirs(go_bin: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """module path -> its directory in the Go module cache (``go mod download``, outside any module)."""
    argv = [go_bin, "mod", "download", "-json", *(f"{m}@{v}" for m, v in MODULES)]
    proc = subprocess.run(
        argv, cwd=tmp_path_factory.mktemp("gomod"), env=_go_env(), capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    found, text, at = {}, proc.stdout, 0
    decoder = json.JSONDecoder()
    while text[at:].strip():  # one JSON object per module, one after the other
        doc, end = decoder.raw_decode(text, at + len(text[at:]) - len(text[at:].lstrip()))
        assert "Error" not in doc, doc
        found[doc["Path"]] = Path(doc["Dir"])
        at = end
    assert set(found) == {m for m, _ in MODULES}
    return found


@pytest.fixture(scope="module")
def crds(module_dirs: dict[str, Path]) -> dict[str, CrdVersion]:
    """target output name -> the CRD version its objects must meet."""
    read = {m: yaml.safe_load((module_dirs[m] / f).read_text()) for (m, _), f in MODULES.items()}
    train = CrdVersion(read["github.com/kubeflow/trainer/v2"], trainjob.API_VERSION.split("/")[1])
    jobs = CrdVersion(read["sigs.k8s.io/jobset"], jobset.API_VERSION.split("/")[1])
    return {name: train if target == trainjob.TARGET else jobs for name, (target, _) in TARGET_OUTPUTS.items()}


def _vector_objects() -> list[tuple[str, str, dict[str, Any]]]:
    out = []
    for case in load_cases(ROOT / "contract" / "cases"):
        for name, result in read_expected(case.path).get("targets", {}).items():
            out.extend((case.name, name, obj) for obj in result.get("objects", ()))
    return out


VECTOR_OBJECTS = _vector_objects()


def test_the_crds_are_the_ones_the_renderers_name(crds: dict[str, CrdVersion]) -> None:
    assert crds["trainjob"].api_version == trainjob.API_VERSION and crds["trainjob"].kind == trainjob.KIND
    assert crds["jobset"].api_version == jobset.API_VERSION and crds["jobset"].kind == jobset.KIND
    # The rules that run on a create: the TrainJob's name rules, managedBy, the initializers' URIs; JobSet's
    # startup-order and volume-claim rules. Zero would mean the checker reads no rule at all.
    assert crds["trainjob"].rule_count >= 4 and crds["jobset"].rule_count >= 2


def test_every_vector_object_meets_its_crd(crds: dict[str, CrdVersion]) -> None:
    """All of them: 116 cases render on 3 target outputs, a few hundred objects in all."""
    assert len(VECTOR_OBJECTS) > 100
    bad, proposals = {}, 0
    for case, name, obj in VECTOR_OBJECTS:
        problems = crds[name].problems(obj)
        if name == "trainjob_elastic_policy" and "elasticPolicy" in obj["spec"]["trainer"]:
            # KEP-2903's field is a proposal: Trainer v2.3's CRD does not have it, and says so.
            assert problems == ["spec.trainer: Additional properties are not allowed ('elasticPolicy' was unexpected)"]
            proposals += 1
        elif problems:
            bad[f"{case}/{name}"] = problems
    assert bad == {}
    assert proposals > 10  # every elastic task's proposal render


def test_the_runtime_the_trainjob_references_is_trainers(module_dirs: dict[str, Path]) -> None:
    """torch-distributed, one replicated job named ``node`` whose container is ``node``: the names the
    TrainJob's runtimePatches and the rendezvous endpoint (node 0's host) depend on."""
    runtime = yaml.safe_load((module_dirs["github.com/kubeflow/trainer/v2"] / RUNTIME_FILE).read_text())
    assert runtime["kind"] == trainjob.RUNTIME["kind"]
    assert runtime["apiVersion"].split("/")[0] == trainjob.RUNTIME["apiGroup"]
    assert runtime["metadata"]["name"] == trainjob.RUNTIME["name"]
    (job,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    assert job["name"] == nodes.NODE
    assert [c["name"] for c in job["template"]["spec"]["template"]["spec"]["containers"]] == [nodes.NODE]


def _one(name: str) -> dict[str, Any]:
    return copy.deepcopy(next(obj for _, n, obj in VECTOR_OBJECTS if n == name))


def test_the_checker_refuses_what_the_api_server_refuses(crds: dict[str, CrdVersion]) -> None:
    train, jobs = crds["trainjob"], crds["jobset"]
    bad_name = _one("trainjob")
    bad_name["metadata"]["name"] = "Bad_Name"
    assert any("CEL rule" in p and "matches" in p for p in train.problems(bad_name))
    bad_type = _one("trainjob")
    bad_type["spec"]["trainer"]["numNodes"] = "two"
    assert any(p.startswith("spec.trainer.numNodes:") for p in train.problems(bad_type))
    unknown = _one("trainjob")
    unknown["spec"]["trainer"]["nprocPerNode"] = 2  # the field is numProcPerNode
    assert train.problems(unknown) == [
        "spec.trainer: Additional properties are not allowed ('nprocPerNode' was unexpected)"
    ]
    managed = _one("trainjob")
    managed["spec"]["managedBy"] = "example.com/other"
    assert any("managedBy" in p and "CEL rule" in p for p in train.problems(managed))
    no_name = _one("jobset")
    del no_name["spec"]["replicatedJobs"][0]["name"]
    assert any("'name' is a required property" in p for p in jobs.problems(no_name))
    in_order = _one("jobset")
    in_order["spec"]["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
    in_order["spec"]["replicatedJobs"][0]["dependsOn"] = [{"name": "x", "status": "Ready"}]
    assert any(p.startswith("spec: CEL rule") for p in jobs.problems(in_order))
    assert "<root>: not a jobset.x-k8s.io/v1alpha2 JobSet" in jobs.problems(_one("trainjob"))


def test_the_runtime_patch_manager_is_what_trainers_webhook_takes() -> None:
    """Trainer's webhook (not its CRD) requires every runtimePatches[].manager to be a domain-prefixed path
    (apimachinery's IsDomainPrefixedPath: a DNS-1123 subdomain, "/", a non-empty HTTP path). The cluster's
    dry runs found "elastic-idl" refused (tests/test_cluster_targets.py); this holds the rule offline."""
    host, sep, path = trainjob.PATCH_MANAGER.partition("/")
    assert sep and path and re.fullmatch(r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+", path)
    label = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
    assert len(host) <= 253 and re.fullmatch(rf"{label}(\.{label})*", host)
    (obj,) = [o for c, n, o in VECTOR_OBJECTS if c == "kf_render_options" and n == "trainjob"]
    assert [p["manager"] for p in obj["spec"]["runtimePatches"]] == [trainjob.PATCH_MANAGER]
