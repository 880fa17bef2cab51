"""The rendered PyTorchJobs against a real control plane (cluster/, README "A cluster on one machine").

One cluster per module (``cluster/cluster.py up`` in ``build/cluster-test``, ``down`` at the end):
etcd, kube-apiserver, kube-controller-manager, kube-scheduler, the Kubeflow training operator with
its validating webhook, CoreDNS; all Kubernetes 1.36.3. No node agent yet: pods stay Pending.

For every contract case with a rendered PyTorchJob (``contract/cases/*/pytorchjob.yaml``, the
Python reference renderer's output):

- the job passes ``kubectl apply --server-side --dry-run=server --validate=strict``: the CRD's
  schema, strict field validation and the operator's webhook;
- the job, applied for real in a scratch namespace, makes the operator create every pod of every
  replica (no model of the operator's pod making: the operator makes them, the API server admits
  or refuses them), and each pod it made passes the same strict server-side dry run in another
  scratch namespace.

Selected by ``-m cluster`` (``make cluster-test``); needs root and Go (the binaries are built
once per version into ~/.cache/elastic-idl).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parent.parent
CASES_DIR = REPO / "contract" / "cases"
CLUSTER_PY = REPO / "cluster" / "cluster.py"
JOBS_NS = "e2e-jobs"  # the jobs applied for real; the operator makes their pods here
PODS_NS = "e2e-pods"  # the pods the operator made, dry-run again as objects of their own

_spec = importlib.util.spec_from_file_location("cluster_tool", CLUSTER_PY)
assert _spec and _spec.loader
ct = importlib.util.module_from_spec(_spec)
sys.modules["cluster_tool"] = ct
_spec.loader.exec_module(ct)


def _rendered_cases() -> dict[str, dict[str, Any]]:
    jobs = {}
    for path in sorted(CASES_DIR.glob("*/pytorchjob.yaml")):
        doc = yaml.safe_load(path.read_text())
        if "error" not in doc:
            jobs[path.parent.name] = doc
    return jobs


JOBS = _rendered_cases()

#: Pods the API server refuses today, and a text its refusal names. `storage` is a task resource
#: the renderer copies into the container's resources, where it is no standard resource name;
#: "propeller adopts the contract" fixes the renderer, and then this list empties.
KNOWN_REFUSED_PODS = {
    "kf_replica_common": "storage",
    "kf_replica_deprecated_fields": "storage",
    "kf_resource_quantities": "storage",
}


@dataclass
class Kube:
    kubectl: str
    kubeconfig: str
    dir: Path

    def run(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        r = subprocess.run(
            [self.kubectl, "--kubeconfig", self.kubeconfig, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if check and r.returncode != 0:
            pytest.fail(f"kubectl {' '.join(args)}: {r.stderr.strip()}")
        return r

    def dry_run(self, obj: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        return self.run(
            "apply", "--server-side", "--dry-run=server", "--validate=strict", "-f", "-",
            stdin=json.dumps(obj), check=False,
        )  # fmt: skip


@pytest.fixture(scope="module")
def cluster() -> Iterator[Kube]:
    state = REPO / "build" / "cluster-test"
    env = {**os.environ, "CLUSTER_DIR": str(state)}
    cmd = [sys.executable, str(CLUSTER_PY)]
    try:
        up = subprocess.run([*cmd, "up"], env=env, capture_output=True, text=True, timeout=3600, check=False)
        if up.returncode != 0:
            pytest.fail(f"cluster up failed: {up.stderr.strip()}\n{up.stdout[-2000:]}")
        last = up.stdout.strip().splitlines()[-2:]
        assert last[0].startswith("export KUBECTL=/") and last[1].startswith("export KUBECONFIG=/"), up.stdout
        kube = Kube(last[0].split("=", 1)[1], last[1].split("=", 1)[1], state)
        for ns in (JOBS_NS, PODS_NS, *{j["metadata"]["namespace"] for j in JOBS.values()}):
            if kube.run("get", "namespace", ns, check=False).returncode != 0:
                kube.run("create", "namespace", ns)
        for ns in (JOBS_NS, PODS_NS):  # a namespace takes pods once its ServiceAccount exists
            _until(lambda ns=ns: kube.run("get", "sa", "default", "-n", ns, check=False).returncode == 0, 60)
        yield kube
    finally:
        subprocess.run([*cmd, "down"], env=env, capture_output=True, text=True, timeout=300, check=True)


def _until(ready: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > deadline:
            pytest.fail(f"not ready in {seconds}s")
        time.sleep(0.5)


def _job_name(case: str) -> str:
    return case.replace("_", "-")


def _expected_pods(job: dict[str, Any]) -> list[str]:
    """The pod names the operator makes: <job>-<replica type>-<index> for each replica."""
    name = job["metadata"]["name"]
    return sorted(
        f"{name}-{rtype.lower()}-{i}"
        for rtype, spec in job["spec"]["pytorchReplicaSpecs"].items()
        for i in range(spec.get("replicas", 1))
    )


@pytest.fixture(scope="module")
def operator_pods(cluster: Kube) -> dict[str, dict[str, Any]]:
    """Every rendered job applied for real (renamed after its case, in JOBS_NS); then, per case,
    the pods the operator made and the refusals it reported, once every pod is there or refused."""
    jobs = []
    for case, job in JOBS.items():
        job = copy.deepcopy(job)
        job["metadata"] |= {"name": _job_name(case), "namespace": JOBS_NS}
        jobs.append(job)
    cluster.run(
        "apply",
        "--server-side",
        "--validate=strict",
        "-f",
        "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": jobs}),
    )

    def collect() -> dict[str, dict[str, Any]]:
        pods = json.loads(cluster.run("get", "pods", "-n", JOBS_NS, "-o", "json").stdout)["items"]
        events = json.loads(cluster.run("get", "events", "-n", JOBS_NS, "-o", "json").stdout)["items"]
        out: dict[str, dict[str, Any]] = {c: {"pods": {}, "refused": []} for c in JOBS}
        by_job = {_job_name(c): c for c in JOBS}
        for pod in pods:
            case = by_job[pod["metadata"]["labels"]["training.kubeflow.org/job-name"]]
            out[case]["pods"][pod["metadata"]["name"]] = pod
        for ev in events:
            obj = ev["involvedObject"]
            if obj.get("kind") == "PyTorchJob" and ev.get("reason") == "FailedCreatePod":
                out[by_job[obj["name"]]]["refused"].append(ev["message"])
        return out

    def settled(result: dict[str, dict[str, Any]]) -> bool:
        return all(
            r["refused"] or sorted(r["pods"]) == _expected_pods({**JOBS[c], "metadata": {"name": _job_name(c)}})
            for c, r in result.items()
        )

    deadline = time.monotonic() + 180
    result = collect()
    while not settled(result) and time.monotonic() < deadline:
        time.sleep(2)
        result = collect()
    return result


def test_up_reports_versions_and_the_operator_crd(cluster: Kube) -> None:
    version = json.loads(cluster.run("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"] == "v1.36.3"
    assert version["clientVersion"]["gitVersion"] == "v1.36.3"
    served = json.loads(cluster.run("get", "crd", "pytorchjobs.kubeflow.org", "-o", "json").stdout)
    ours = yaml.safe_load((REPO / "tests" / "data" / "kubeflow.org_pytorchjobs.yaml").read_text())
    # The CRD the cluster runs (the operator module's manifests) is the one our tests/data copies.
    assert [v["schema"] for v in served["spec"]["versions"]] == [v["schema"] for v in ours["spec"]["versions"]]


def test_webhook_refuses_nproc_per_node_twice(cluster: Kube) -> None:
    r = cluster.dry_run(ct.WEBHOOK_PROBE)
    assert r.returncode != 0
    assert 'admission webhook "validator.pytorchjob.training-operator.kubeflow.org" denied the request' in r.stderr
    assert "spec.elasticPolicy.nProcPerNode: Forbidden: must not be used with spec.nprocPerNode" in r.stderr


def test_coredns_answers_cluster_local_only(cluster: Kube) -> None:
    dns = str(ct.BRIDGE_IP)
    assert ct.dns_query_a(dns, "kubernetes.default.svc.cluster.local") == [str(ct.API_SERVICE_IP)]
    # No forward plugin: a name outside the cluster's zones gets no answer from it.
    assert ct.dns_query_a(dns, "example.com") == []


@pytest.mark.parametrize("case", sorted(JOBS))
def test_rendered_job_passes_server_side_strict_dry_run(cluster: Kube, case: str) -> None:
    r = cluster.dry_run(JOBS[case])
    assert r.returncode == 0, r.stderr
    assert "serverside-applied (server dry run)" in r.stdout


@pytest.mark.parametrize("case", sorted(JOBS))
def test_operator_makes_every_pod_and_each_passes_strict_dry_run(
    cluster: Kube, operator_pods: dict[str, dict[str, Any]], case: str
) -> None:
    result = operator_pods[case]
    if case in KNOWN_REFUSED_PODS:
        assert result["refused"], f"{case}: the API server admitted pods it is known to refuse"
        assert all(KNOWN_REFUSED_PODS[case] in msg for msg in result["refused"]), result["refused"]
        return
    assert not result["refused"], result["refused"]
    expected = _expected_pods({**JOBS[case], "metadata": {"name": _job_name(case)}})
    assert sorted(result["pods"]) == expected
    again = []
    for name, pod in result["pods"].items():
        meta = pod["metadata"]
        again.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "namespace": PODS_NS,
                    "labels": meta.get("labels", {}),
                    "annotations": meta.get("annotations", {}),
                },
                "spec": {k: v for k, v in pod["spec"].items() if k != "nodeName"},
            }
        )
    r = cluster.dry_run({"apiVersion": "v1", "kind": "List", "items": again})
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("serverside-applied (server dry run)") == len(again), r.stdout
