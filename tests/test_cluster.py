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
import shutil
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

#: A node selector no Node matches: the pods the operator makes for the dry-run jobs are never
#: scheduled, so the node agent never runs them (removed again before each pod's own dry run).
NEVER_SCHEDULED = {"elastic-idl.dev/dry-run-only": "true"}


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


def _as_rendered(pod_spec: dict[str, Any]) -> dict[str, Any]:
    """A pod spec the operator made, without the scheduler's binding and our never-scheduled selector."""
    spec = {k: v for k, v in pod_spec.items() if k not in ("nodeName", "nodeSelector")}
    selector = {k: v for k, v in pod_spec.get("nodeSelector", {}).items() if k not in NEVER_SCHEDULED}
    return spec | ({"nodeSelector": selector} if selector else {})


def _until(ready: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > deadline:
            pytest.fail(f"not ready in {seconds}s")
        time.sleep(0.5)


#: Jobs only dry-run, never applied: the operator (v1.9.4) sizes its work by the replica count
#: and ran out of memory on these 2^31 - 1 replicas (README, "A cluster on one machine").
MAX_APPLIED_PODS = 16


def _pod_count(job: dict[str, Any]) -> int:
    return sum(spec.get("replicas", 1) for spec in job["spec"]["pytorchReplicaSpecs"].values())


APPLIED = {case: job for case, job in JOBS.items() if _pod_count(job) <= MAX_APPLIED_PODS}


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
    for case, job in APPLIED.items():
        job = copy.deepcopy(job)
        job["metadata"] |= {"name": _job_name(case), "namespace": JOBS_NS}
        for replica in job["spec"]["pytorchReplicaSpecs"].values():
            pod_spec = replica["template"]["spec"]
            pod_spec["nodeSelector"] = {**pod_spec.get("nodeSelector", {}), **NEVER_SCHEDULED}
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
        out: dict[str, dict[str, Any]] = {c: {"pods": {}, "refused": []} for c in APPLIED}
        by_job = {_job_name(c): c for c in APPLIED}
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
            r["refused"] or sorted(r["pods"]) == _expected_pods({**APPLIED[c], "metadata": {"name": _job_name(c)}})
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


@pytest.mark.parametrize("case", sorted(APPLIED))
def test_operator_makes_every_pod_and_each_passes_strict_dry_run(
    cluster: Kube, operator_pods: dict[str, dict[str, Any]], case: str
) -> None:
    result = operator_pods[case]
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
                "spec": _as_rendered(pod["spec"]),
            }
        )
    r = cluster.dry_run({"apiVersion": "v1", "kind": "List", "items": again})
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("serverside-applied (server dry run)") == len(again), r.stdout


# ---------------------------------------------------------------- end to end: jobs that train

#: Where the jobs' pods and this test meet: a host folder (pods share the host's /var/tmp, not /tmp).
SHARED = Path("/var/tmp/elastic-idl-cluster-test")
TRAIN = REPO / "tests" / "workers" / "cluster_train.py"
TRAIN_NS = "e2e-train"
#: The elastic task of the 2-node jobs: c10d on worker-0's Service, one worker process per pod.
TWO_NODES = {
    "worker_replicas": {"replicas": 2},
    "elastic_config": {
        "rdzv_backend": "c10d",
        "min_replicas": 2,
        "max_replicas": 2,
        "nproc_per_node": 1,
        "max_restarts": 2,
        "join_timeout": "120s",
    },
}
TIMES: dict[str, float] = {}


@dataclass
class Run:
    """One job applied in TRAIN_NS, and the folder its pods write to."""

    kube: Kube
    name: str
    out: Path
    applied: float = 0.0

    def apply(self, objects: list[dict[str, Any]]) -> None:
        self.applied = time.time()
        self.kube.run("apply", "--server-side", "--validate=strict", "-f", "-",
                      stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))  # fmt: skip

    def job(self) -> dict[str, Any]:
        return dict(json.loads(self.kube.run("get", "pytorchjob", self.name, "-n", TRAIN_NS, "-o", "json").stdout))

    def pods(self) -> dict[str, dict[str, Any]]:
        out = self.kube.run("get", "pods", "-n", TRAIN_NS, "-l", f"training.kubeflow.org/job-name={self.name}",
                            "-o", "json")  # fmt: skip
        return {p["metadata"]["name"]: p for p in json.loads(out.stdout)["items"]}

    def logs(self) -> str:
        """The pods' container logs (files: the node agent has no `kubectl logs`)."""
        parts = []
        for log in sorted((self.kube.dir / "pods").glob(f"{TRAIN_NS}_{self.name}-*/containers/*/log")):
            parts.append(f"--- {log.parts[-4]}\n{log.read_text(errors='replace')[-2500:]}")
        return "\n".join(parts)

    def steps(self) -> list[tuple[float, int, int, int]]:
        path = self.out / "steps"
        lines = path.read_text().split("\n") if path.exists() else []
        return [(float(t), int(s), int(w), int(r)) for t, s, w, r in (ln.split() for ln in lines if ln)]

    def seen(self) -> list[dict[str, Any]]:
        return [json.loads(p.read_text()) for p in sorted((self.out / "seen").glob("*.json"))]

    def condition(self) -> str | None:
        for cond in self.job().get("status", {}).get("conditions", []):
            if cond["type"] in ("Succeeded", "Failed") and cond["status"] == "True":
                return str(cond["type"])
        return None

    def wait_done(self, seconds: float) -> str:
        deadline = time.monotonic() + seconds
        while (state := self.condition()) is None:
            if time.monotonic() > deadline:
                pytest.fail(f"{self.name} not finished in {seconds:.0f}s: {self.job().get('status')}\n{self.logs()}")
            time.sleep(1)
        return state

    def wait_steps(self, n: int, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while len(self.steps()) < n:
            if time.monotonic() > deadline or self.condition() is not None:
                pytest.fail(f"{self.name}: {len(self.steps())} steps after {seconds:.0f}s\n{self.logs()}")
            time.sleep(0.2)

    def first_step_seconds(self) -> float:
        return self.steps()[0][0] - self.applied


@pytest.fixture(scope="module")
def train_ns(cluster: Kube) -> Iterator[Kube]:
    if cluster.run("get", "namespace", TRAIN_NS, check=False).returncode != 0:
        cluster.run("create", "namespace", TRAIN_NS)
    _until(lambda: cluster.run("get", "sa", "default", "-n", TRAIN_NS, check=False).returncode == 0, 60)
    SHARED.mkdir(parents=True, exist_ok=True)
    yield cluster
    if TIMES:
        (cluster.dir / "e2e-times.json").write_text(json.dumps(TIMES, indent=2) + "\n")
        print("\ncluster end-to-end times (s):", json.dumps(TIMES))


def _new_run(kube: Kube, name: str) -> Run:
    out = SHARED / name
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    kube.run("delete", "pytorchjob", name, "-n", TRAIN_NS, "--ignore-not-found", "--wait=true")
    return Run(kube, name, out)


def _render_cli(task: dict[str, Any], name: str, argv: list[str], *flags: str) -> list[dict[str, Any]]:
    """`elastic-idl render` as a user runs it: the task on stdin, the objects it prints."""
    cli = Path(sys.executable).parent / "elastic-idl"
    r = subprocess.run(
        [str(cli), "render", "-", "--format", "yaml", "--name", name, "--image", "example.com/train:1",
         "--namespace", TRAIN_NS, *flags, "--", *argv],
        input=yaml.safe_dump(task), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def _container(job: dict[str, Any]) -> dict[str, Any]:
    (c,) = [c for c in job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
            if c["name"] == "pytorch"]  # fmt: skip
    return dict(c)


def _cli_job(kube: Kube, name: str, steps: int, step_seconds: float, task: dict[str, Any] = TWO_NODES) -> Run:
    run = _new_run(kube, name)
    (job,) = _render_cli(task, name, [str(TRAIN), str(run.out), str(steps), str(step_seconds)])
    # Where rank 0's pod writes the result: a folder the test can read (the default is the pod's /tmp).
    _container(job).setdefault("env", []).append({"name": "ELASTIC_IDL_OUTPUT", "value": str(run.out / "result.json")})
    run.apply([job])
    return run


def test_two_node_job_trains_over_pod_addresses_to_succeeded(train_ns: Kube) -> None:
    run = _cli_job(train_ns, "e2e-two", steps=5, step_seconds=0.1)
    assert run.wait_done(300) == "Succeeded", run.logs()
    TIMES["ours_apply_to_first_step"] = round(run.first_step_seconds(), 1)
    TIMES["ours_apply_to_succeeded"] = round(time.time() - run.applied, 1)
    assert [s for _, s, _, _ in run.steps()] == list(range(5))
    assert {w for _, _, w, _ in run.steps()} == {2}
    result = json.loads((run.out / "result.json").read_text())
    # The run id: the operator sets no PET_RDZV_ID and there is no Flyte execution id, so torch's default.
    assert result["rank"] == 0 and result["run_id"] == "none"
    pods = run.pods()
    names = {f"e2e-two-worker-{i}" for i in range(2)}
    assert set(pods) == names
    assert all(p["status"]["phase"] == "Succeeded" for p in pods.values())
    seen = {s["hostname"]: s for s in run.seen()}
    # Each pod: its own hostname (the pod name), its own address (the one the API server reports),
    # the container's command as PID 1; the store host is a pod name, resolved by cluster DNS.
    assert set(seen) == names
    for name, s in seen.items():
        assert s["pod"] == name and s["fqdn"] == name
        assert s["addresses"] == [pods[name]["status"]["podIP"]]
        assert s["pid1"][:3] == ["python", "-m", "elastic_idl.pod"]
        assert s["master_addr"] in names and s["world"] == 2
    assert len({s["addresses"][0] for s in seen.values()}) == 2


def test_worker_0_force_deleted_mid_run_is_recreated_and_the_job_finishes(train_ns: Kube) -> None:
    run = _cli_job(train_ns, "e2e-kill0", steps=30, step_seconds=0.3)
    run.wait_steps(3, 240)
    before = run.pods()["e2e-kill0-worker-0"]
    train_ns.run("delete", "pod", "e2e-kill0-worker-0", "-n", TRAIN_NS, "--grace-period=0", "--force")
    killed_at = time.time()
    assert run.wait_done(400) == "Succeeded", run.logs()
    after = run.pods()["e2e-kill0-worker-0"]
    # The operator made a new pod (new UID) and the network a new address; the same name.
    assert after["metadata"]["uid"] != before["metadata"]["uid"]
    assert after["status"]["podIP"] != before["status"]["podIP"]
    steps = run.steps()
    assert steps[-1][1] == 29
    resumed = [s for t, s, _, _ in steps if t > killed_at]
    # The re-formed job resumed from the checkpoint, not from step 0.
    assert resumed and resumed[0] > 0, steps
    TIMES["worker0_kill_to_next_step"] = round(min(t for t, *_ in steps if t > killed_at) - killed_at, 1)
