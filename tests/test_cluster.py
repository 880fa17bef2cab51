"""The rendered PyTorchJobs against a real control plane (cluster/, docs/guide/cluster.md).

One cluster per module (``cluster/cluster.py up`` in ``build/cluster-test``, ``down`` at the end):
etcd, kube-apiserver, kube-controller-manager, kube-scheduler, the Kubeflow training operator with
its validating webhook, CoreDNS, real Nodes (a kubelet, containerd and runc each); all Kubernetes 1.36.3.

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

import contextlib
import copy
import datetime as dt
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
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
#: scheduled, so no kubelet runs them (removed again before each pod's own dry run).
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
    state = ct.default_state_dir("cluster-test")
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
        _nothing_left(state)


def _nothing_left(state: Path) -> None:
    """After `down`: no process of this cluster (components, Nodes, pods), no bridge, no pod veth."""
    left = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and proc.name != str(os.getpid()):
            try:
                cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if str(state) in cmdline:
                left.append(cmdline.replace("\0", " ")[:200])
    links = [p.name for p in Path("/sys/class/net").iterdir() if p.name == ct.POD_BRIDGE or p.name.startswith("ev")]
    assert (left, links) == ([], []), "cluster down left these running or configured"


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
#: and ran out of memory on these 2^31 - 1 replicas (docs/guide/cluster.md).
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


def test_a_bridge_left_by_a_killed_cluster_is_removed_and_a_running_ones_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cluster whose processes were killed (the session ended; no `down`) leaves its pod bridge:
    the next `up` removes it and its ports, saying so; while any cluster process runs it refuses.
    Runs before this module's cluster is up (file order)."""
    if ct.cluster_processes() or Path(f"/sys/class/net/{ct.POD_BRIDGE}").exists():
        pytest.skip("a cluster is up on this machine")
    bridge, veth = "eidlt0", "evstale0"
    subprocess.run(["ip", "link", "add", bridge, "type", "bridge"], check=True)
    try:
        subprocess.run(["ip", "link", "set", "dev", bridge, "alias", "/var/tmp/gone-cluster"], check=True)
        subprocess.run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "evstale1"], check=True)
        subprocess.run(["ip", "link", "set", veth, "master", bridge], check=True)
        # A binary of another cache's cluster still runs (ELASTIC_IDL_CACHE): that cluster is up.
        binary = tmp_path / "cache" / "cluster" / "k8s-other" / "bin" / "sleep"
        binary.parent.mkdir(parents=True)
        shutil.copy(shutil.which("sleep") or "/bin/sleep", binary)
        monkeypatch.setenv("ELASTIC_IDL_CACHE", str(tmp_path / "cache"))
        proc = subprocess.Popen([str(binary), "60"])
        try:
            _until(lambda: any(f"{binary} 60" in p for p in ct.cluster_processes()), 10)
            with pytest.raises(
                ct.ClusterError, match=r"eidlt0 exists and a cluster is up \(from CLUSTER_DIR=/var/tmp/gone"
            ):
                ct.clear_stale_bridge(bridge)
            assert Path(f"/sys/class/net/{bridge}/brif/{veth}").exists()
        finally:
            proc.kill()
            proc.wait()
        assert ct.clear_stale_bridge(bridge) == [
            f"removed the stale pod veth {veth}",
            f"removed the stale pod bridge {bridge} (from CLUSTER_DIR=/var/tmp/gone-cluster): no process of any cluster runs",
        ]
        left = {p.name for p in Path("/sys/class/net").iterdir()}
        assert not left & {bridge, veth, "evstale1"}
        assert ct.clear_stale_bridge(bridge) == []
    finally:
        for dev in (veth, bridge):
            subprocess.run(["ip", "link", "del", dev], capture_output=True, check=False)


def test_the_ports_up_picks_are_free_distinct_and_never_ephemeral() -> None:
    """A port the kernel hands out (bind to 0) is ephemeral: any outgoing connection may take it
    before its component binds it. `up` picks below that range, each port checked free."""
    names = [f"c{i}" for i in range(40)]
    ports = ct.free_ports(names)
    assert list(ports) == names
    assert len(set(ports.values())) == len(names)
    eph = ct.ephemeral_ports()
    assert all(1024 <= p < 65536 and p not in eph for p in ports.values()), (ports, eph)
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports["c0"]))  # free: nothing else holds it


def test_binaries_under_tmp_are_refused_naming_the_setting() -> None:
    """The operator and the target controllers run with a /tmp of their own, which hides a binary cached
    under /tmp (exit 127 from their start, found when ELASTIC_IDL_CACHE was set under /tmp): refused at
    once, naming ELASTIC_IDL_CACHE."""
    under = Path("/tmp") / "eic" / "cluster" / "bin"
    with pytest.raises(ct.ClusterError, match="ELASTIC_IDL_CACHE"):
        ct.check_not_in_tmp(under)
    with pytest.raises(ct.ClusterError):
        ct.check_not_in_tmp(Path("/tmp"))
    elsewhere = Path("/var/tmp/eic/bin")
    assert ct.check_not_in_tmp(elsewhere) == elsewhere
    assert ct.check_not_in_tmp(Path("/tmpfoo/bin")) == Path("/tmpfoo/bin")


def test_a_component_that_exits_is_reported_with_its_own_log_and_started_again(tmp_path: Path) -> None:
    """`up` reports a component's exit with the end of the component's own log (not the log of
    the wait's name), and starts a component that exits before it is up again, as its pod would
    restart, a bounded number of times."""
    c = ct.Cluster(tmp_path)
    marker = tmp_path / "started-once"
    # Exits 1 on its first start (saying why), stays up on the second.
    script = (
        "import pathlib, sys, time\n"
        f"m = pathlib.Path({str(marker)!r})\n"
        "if not m.exists():\n"
        "    m.touch(); print('listen tcp 127.0.0.1:1: bind: address already in use', flush=True); sys.exit(1)\n"
        "print('serving', flush=True); time.sleep(30)\n"
    )
    started: list[subprocess.Popen[bytes]] = []

    def start() -> subprocess.Popen[bytes]:
        started.append(c.spawn("comp", [sys.executable, "-c", script]))
        return started[-1]

    try:
        assert c.start_until_up(start, [("comp ready", lambda: marker.exists() and len(started) == 2, 10)], 3) == 2
    finally:
        for proc in started:
            proc.kill()
            proc.wait()
    # One start only: the exit is the error, naming the wait, the component and its log's end.
    marker.unlink()
    with pytest.raises(ct.ClusterError) as err:
        c.start_until_up(start, [("comp certificate", lambda: False, 10)], 1)
    text = str(err.value)
    assert text.startswith("comp certificate: comp exited with code 1; the end of its log:\n"), text
    assert "bind: address already in use" in text and str(tmp_path / "logs" / "comp.log") in text
    with pytest.raises(ValueError, match="starts must be at least 1"):
        c.start_until_up(start, [], 0)


def test_up_reports_versions_and_the_operator_crd(cluster: Kube) -> None:
    version = json.loads(cluster.run("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"] == "v1.36.3"
    assert version["clientVersion"]["gitVersion"] == "v1.36.3"
    served = json.loads(cluster.run("get", "crd", "pytorchjobs.kubeflow.org", "-o", "json").stdout)
    ours = yaml.safe_load((REPO / "tests" / "data" / "kubeflow.org_pytorchjobs.yaml").read_text())
    # The CRD the cluster runs (the operator module's manifests) is the one our tests/data copies.
    assert [v["schema"] for v in served["spec"]["versions"]] == [v["schema"] for v in ours["spec"]["versions"]]


def test_the_pod_bridge_keeps_its_own_mac(cluster: Kube) -> None:
    # Set by `up` (addr_assign_type 3, NET_ADDR_SET): the kernel then never replaces it with a
    # port's MAC, so a pod deleted does not take the gateway's MAC from the pods that cached it.
    dev = Path(f"/sys/class/net/{ct.POD_BRIDGE}")
    assert (dev / "address").read_text().strip() == ct.POD_BRIDGE_MAC
    assert (dev / "addr_assign_type").read_text().strip() == "3"


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


#: The interpreter's prefix (pyenv's), which the real Nodes' pods mount at its host path.
PY_PREFIX = Path(os.path.realpath(sys.executable)).parent.parent


def on_real_nodes(kube: Kube, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pod template only the tests add: realnode.for_real_nodes with the base image, the
    interpreter's prefix and the checkout read-only, the runs' folder (SHARED) read-write. Edits
    the objects in place; returns them."""
    image = json.loads((kube.dir / "cluster.json").read_text())["images"]["base"]
    files = ct.realnode.host_files(
        {"python": (PY_PREFIX, True), "checkout": (REPO, True), "shared": (SHARED, False)}, Path(sys.executable).parent
    )
    return ct.realnode.for_real_nodes(objects, image, files)  # type: ignore[no-any-return]


def container_logs(kube: Kube, pods: str, container: str = "*") -> list[tuple[str, Path]]:
    """(pod folder, log file) of each container log of the pods whose folder, <ns>_<pod>_<uid>,
    matches the glob `pods`: the kubelets', as cluster.py keeps them after their pods are gone (one
    file per run of the container)."""
    return sorted((f.parts[-3], f) for f in kube.dir.glob(f"{ct.KEPT_LOGS}/{pods}/{container}/*.log"))


@dataclass
class Run:
    """One job applied in TRAIN_NS, and the folder its pods write to."""

    kube: Kube
    name: str
    out: Path
    applied: float = 0.0

    def apply(self, objects: list[dict[str, Any]]) -> None:
        self.applied = time.time()
        items = on_real_nodes(self.kube, objects)
        self.kube.run("apply", "--server-side", "--validate=strict", "-f", "-",
                      stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))  # fmt: skip

    def job(self) -> dict[str, Any]:
        return dict(json.loads(self.kube.run("get", "pytorchjob", self.name, "-n", TRAIN_NS, "-o", "json").stdout))

    def pods(self) -> dict[str, dict[str, Any]]:
        out = self.kube.run("get", "pods", "-n", TRAIN_NS, "-l", f"training.kubeflow.org/job-name={self.name}",
                            "-o", "json")  # fmt: skip
        return {p["metadata"]["name"]: p for p in json.loads(out.stdout)["items"]}

    def logs(self) -> str:
        """The pods' container logs (the end of each)."""
        logs = container_logs(self.kube, f"{TRAIN_NS}_{self.name}-*")
        return "\n".join(f"--- {pod}\n{log.read_text(errors='replace')[-2500:]}" for pod, log in logs)

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


def ensure_train_ns(kube: Kube) -> None:
    """The training namespace, created when missing, once its default service account exists (pods need it)."""
    if kube.run("get", "namespace", TRAIN_NS, check=False).returncode != 0:
        kube.run("create", "namespace", TRAIN_NS)
    _until(lambda: kube.run("get", "sa", "default", "-n", TRAIN_NS, check=False).returncode == 0, 60)


@pytest.fixture(scope="module")
def train_ns(cluster: Kube) -> Iterator[Kube]:
    ensure_train_ns(cluster)
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
    assert isinstance(c, dict)
    return c  # the job's own container: edits to it are edits to the job


def _cli_job(
    kube: Kube,
    name: str,
    steps: int,
    step_seconds: float,
    *flags: str,
    torchrun: bool = False,
    start_method: str | None = None,
) -> tuple[Run, list[dict[str, Any]]]:
    """The 2-node task rendered by the CLI and applied; with `torchrun`, stock torchrun is the
    container's command (it reads the operator's PET_* env), as the baseline."""
    run = _new_run(kube, name)
    task = copy.deepcopy(TWO_NODES)
    if start_method:
        task["elastic_config"]["start_method"] = start_method
    objects = _render_cli(task, name, [str(TRAIN), str(run.out), str(steps), str(step_seconds)], *flags)
    container = _container(objects[0])
    # Where rank 0's pod writes the result: a folder the test can read (the default is the pod's /tmp).
    container.setdefault("env", []).append({"name": "ELASTIC_IDL_OUTPUT", "value": str(run.out / "result.json")})
    if torchrun:
        container["command"] = ["torchrun"]
        container["args"] = [a for a in container["args"] if a != "--"]
    run.apply(objects)
    return run, objects


def test_two_node_job_trains_over_pod_addresses_to_succeeded(train_ns: Kube) -> None:
    run, objects = _cli_job(train_ns, "e2e-two", 5, 0.1, "--network-policy")
    assert run.wait_done(300) == "Succeeded", run.logs()
    TIMES["ours_apply_to_first_step"] = round(run.first_step_seconds(), 1)
    TIMES["ours_apply_to_succeeded"] = round(time.time() - run.applied, 1)
    assert [s for _, s, _, _ in run.steps()] == list(range(5))
    assert {w for _, _, w, _ in run.steps()} == {2}
    result = json.loads((run.out / "result.json").read_text())
    # The run id: the operator sets no PET_RDZV_ID and there is no Flyte execution id, so torch's default.
    assert result["rank"] == 0 and result["run_id"] == "none"
    # An elastic job is Succeeded once its first pod exits 0 (the operator's rule): the other may
    # still be ending. Each must end Succeeded, within seconds.
    deadline = time.monotonic() + 30
    pods = run.pods()
    while not all(p["status"]["phase"] == "Succeeded" for p in pods.values()):
        if time.monotonic() > deadline or any(p["status"]["phase"] == "Failed" for p in pods.values()):
            break
        time.sleep(0.2)
        pods = run.pods()
    names = {f"e2e-two-worker-{i}" for i in range(2)}
    assert set(pods) == names
    assert all(p["status"]["phase"] == "Succeeded" for p in pods.values()), (
        {n: (p["status"]["phase"], p["status"].get("containerStatuses")) for n, p in pods.items()},
        run.logs(),
    )
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
    # The NetworkPolicy rendered beside the job: the API server took it, and its pod selector,
    # asked of the API server, matches exactly the job's pods.
    (policy,) = [o for o in objects if o["kind"] == "NetworkPolicy"]
    served = json.loads(
        train_ns.run("get", "networkpolicy", policy["metadata"]["name"], "-n", TRAIN_NS, "-o", "json").stdout
    )
    labels = served["spec"]["podSelector"]["matchLabels"]
    selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    matched = json.loads(train_ns.run("get", "pods", "-n", TRAIN_NS, "-l", selector, "-o", "json").stdout)["items"]
    assert {p["metadata"]["name"] for p in matched} == names


def test_worker_0_force_deleted_mid_run_is_recreated_and_the_job_finishes(train_ns: Kube) -> None:
    # Start method spawn (flytekit's): the launcher is the pod's PID 1 and the parent of its workers.
    run, _ = _cli_job(train_ns, "e2e-kill0", 30, 0.3, start_method="START_METHOD_SPAWN")
    run.wait_steps(3, 240)
    before = run.pods()["e2e-kill0-worker-0"]
    bridge_mac = Path(f"/sys/class/net/{ct.POD_BRIDGE}/address")
    mac = bridge_mac.read_text()
    train_ns.run("delete", "pod", "e2e-kill0-worker-0", "-n", TRAIN_NS, "--grace-period=0", "--force")
    killed_at = time.time()
    assert run.wait_done(400) == "Succeeded", run.logs()
    assert bridge_mac.read_text() == mac  # the deleted pod's veth is gone; the gateway's MAC stays
    steps = assert_recreated_and_resumed(run, before, killed_at, 30)
    TIMES["worker0_kill_to_next_step"] = round(min(t for t, *_ in steps if t > killed_at) - killed_at, 1)


def assert_recreated_and_resumed(
    run: Run, before: dict[str, Any], killed_at: float, steps_total: int
) -> list[tuple[float, int, int, int]]:
    """After a pod of the run was deleted at `killed_at`: the operator made a new pod of the same
    name (new UID), the network gave it a new address, and the re-formed job ran every step,
    resuming from the checkpoint (not from step 0). Returns the steps."""
    after = run.pods()[before["metadata"]["name"]]
    assert after["metadata"]["uid"] != before["metadata"]["uid"]
    assert after["status"]["podIP"] != before["status"]["podIP"]
    steps = run.steps()
    assert steps[-1][1] == steps_total - 1
    resumed = [s for t, s, _, _ in steps if t > killed_at]
    assert resumed and resumed[0] > 0, steps
    return steps


def test_the_nodes_write_only_what_a_node_may(train_ns: Kube) -> None:
    """The audit log: every write by a node (system:node:<name>) is to its own Node and Lease,
    to pods' status, Events, service account tokens of its pods, or the final delete of a pod
    bound to it; never a pod made, a Service or an EndpointSlice. A real kubelet writes also its
    CSINode, clears its ResourceSlices (DRA) at start and patches Events it repeats."""
    allowed = {
        ("create", "nodes", ""), ("patch", "nodes", "status"), ("create", "leases", ""),
        ("update", "leases", ""), ("patch", "pods", "status"), ("create", "events", ""),
        ("create", "serviceaccounts", "token"), ("delete", "pods", ""),
    }  # fmt: skip
    allowed |= {("create", "csinodes", ""), ("deletecollection", "resourceslices", ""), ("patch", "events", "")}
    writes: dict[tuple[str, str, str], int] = {}
    for line in (train_ns.dir / "audit.log").read_text().splitlines():
        ev = json.loads(line)
        user = ev["user"]["username"]
        if not user.startswith("system:node:") or ev["verb"] in ("get", "list", "watch"):
            continue
        assert "system:nodes" in ev["user"]["groups"]
        ref = ev.get("objectRef", {})
        key = (ev["verb"], ref.get("resource", ""), ref.get("subresource", ""))
        writes[key] = writes.get(key, 0) + 1
        if ref.get("resource") in ("nodes", "leases"):
            assert ref["name"] == user.removeprefix("system:node:"), ev
        # Refused writes only as a kubelet's are: to a pod gone (404), or whose name is a new pod's
        # (409, the UID precondition; 403 from NodeRestriction when that one is on another node).
        code = ev["responseStatus"]["code"]
        # A token asked for right after the binding, before the Node authorizer's graph has the pod:
        # 403, and the agent retries, as the kubelet retries a mount.
        refused_ok = key in (("patch", "pods", "status"), ("create", "serviceaccounts", "token"))
        # The UID precondition of a status patch, when the name is a new pod's on the same node: 422.
        uid_refused = code == 422 and "metadata.uid" in ev["responseStatus"].get("message", "")
        assert code < 300 or code in (404, 409) or (code == 403 and refused_ok) or uid_refused, ev
    assert set(writes) <= allowed, writes
    # It did write: Nodes, Leases, pod status and the pods' final deletes (the jobs above ran).
    assert {("create", "nodes", ""), ("patch", "pods", "status"), ("create", "leases", "")} <= set(writes)


@pytest.mark.cluster_long
def test_torchrun_as_the_pod_command_is_the_baseline(train_ns: Kube) -> None:
    run, _ = _cli_job(train_ns, "e2e-torchrun", 5, 0.1, torchrun=True)
    assert run.wait_done(300) == "Succeeded", run.logs()
    TIMES["torchrun_apply_to_first_step"] = round(run.first_step_seconds(), 1)
    TIMES["torchrun_apply_to_succeeded"] = round(time.time() - run.applied, 1)
    assert {w for _, _, w, _ in run.steps()} == {2}
    # PID 1 is torchrun (a script: the interpreter with torchrun's path after it).
    assert all(Path(s["pid1"][1]).name == "torchrun" for s in run.seen()), run.seen()


@pytest.mark.cluster_long
def test_a_worker_deleted_gracefully_is_recreated_and_the_job_finishes(train_ns: Kube) -> None:
    run, _ = _cli_job(train_ns, "e2e-grace", 30, 0.3)
    run.wait_steps(3, 240)
    before = run.pods()["e2e-grace-worker-1"]
    train_ns.run("delete", "pod", "e2e-grace-worker-1", "-n", TRAIN_NS, "--wait=false")
    assert run.wait_done(400) == "Succeeded", run.logs()
    assert run.pods()["e2e-grace-worker-1"]["metadata"]["uid"] != before["metadata"]["uid"]
    assert run.steps()[-1][1] == 29
    # The pod stopped on SIGTERM (its launcher's handler), not the grace period's SIGKILL.
    events = json.loads(train_ns.run("get", "events", "-n", TRAIN_NS, "-o", "json").stdout)["items"]
    assert any(e["reason"] == "Killing" and e["involvedObject"]["uid"] == before["metadata"]["uid"] for e in events)
    ((_, log),) = container_logs(train_ns, f"{TRAIN_NS}_e2e-grace-worker-1_{before['metadata']['uid']}", "pytorch")
    assert "SIGTERM" in log.read_text(errors="replace")


FLYTE_WORKFLOW = """
import os
from datetime import timedelta

from flytekit import task, workflow

import elastic_idl as ei


@task(task_config=ei.Elastic(nnodes="1:3", nproc_per_node=1, max_restarts=1, start_method="spawn",
                             rdzv_configs={"join_timeout": 120, "last_call_timeout": 5}))
def train(x: int) -> int:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    value = torch.tensor([float(x)])
    dist.all_reduce(value)
    world = dist.get_world_size()
    dist.destroy_process_group()
    return int(value.item()) * 10 + world


@workflow
def wf(x: int) -> int:
    return train(x=x)
"""


@pytest.mark.cluster_long
def test_a_1_to_3_flytekit_task_from_its_template_runs_pyflyte_execute_in_three_pods(train_ns: Kube) -> None:
    pytest.importorskip("flytekit")
    from collections import OrderedDict

    from flyteidl.core import literals_pb2
    from flytekit.configuration import Image, ImageConfig, SerializationSettings
    from flytekit.tools.translator import get_serializable

    from elastic_idl.flytekit import render_pytorchjob_from_template

    run = _new_run(train_ns, "e2e-flyte")
    code = run.out / "code"
    code.mkdir()
    (code / "e2e_flyte_wf.py").write_text(FLYTE_WORKFLOW)
    sys.path.insert(0, str(code))
    try:
        mod = importlib.import_module("e2e_flyte_wf")
        settings = SerializationSettings(
            image_config=ImageConfig(default_image=Image(name="default", fqn="x.io/t", tag="1"))
        )
        template = get_serializable(OrderedDict(), settings, mod.train).template.to_flyte_idl()
    finally:
        sys.path.remove(str(code))
        sys.modules.pop("e2e_flyte_wf", None)
    job = render_pytorchjob_from_template(template, name="e2e-flyte", namespace=TRAIN_NS)
    container = _container(job)
    assert container["args"][0] == "pyflyte-execute" and "command" not in container
    # Propeller's part: the {{.input}}-style templates become paths (a folder all pods share).
    inputs = run.out / "inputs.pb"
    lm = literals_pb2.LiteralMap()
    lm.literals["x"].scalar.primitive.integer = 4
    inputs.write_bytes(lm.SerializeToString())
    fill = {
        "{{.input}}": str(inputs),
        "{{.outputPrefix}}": str(run.out / "outputs"),
        "{{.rawOutputDataPrefix}}": str(run.out / "raw"),
        "{{.checkpointOutputPrefix}}": str(run.out / "checkpoint"),
        "{{.prevCheckpointPrefix}}": "",
    }
    container["args"] = [fill.get(a, a) for a in container["args"]]
    container.setdefault("env", []).extend(
        [
            {"name": "FLYTE_INTERNAL_EXECUTION_ID", "value": "e2e-flyte-exec"},
            {"name": "FLYTE_INTERNAL_EXECUTION_PROJECT", "value": "p"},
            {"name": "FLYTE_INTERNAL_EXECUTION_DOMAIN", "value": "d"},
            {"name": "PYTHONPATH", "value": str(code)},
        ]
    )
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3
    run.apply([job])
    assert run.wait_done(400) == "Succeeded", run.logs()
    TIMES["flytekit_1to3_apply_to_succeeded"] = round(time.time() - run.applied, 1)
    out = literals_pb2.LiteralMap.FromString((run.out / "outputs" / "outputs.pb").read_bytes())
    world = out.literals["o0"].scalar.primitive.integer % 10
    # 1:3 nodes, all three pods up at once: the rendezvous takes them all.
    assert out.literals["o0"].scalar.primitive.integer == 4 * world * 10 + world
    assert world == 3


def _pod(kube: Kube, name: str, command: list[str], restart: str, grace: int = 30) -> dict[str, Any]:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": TRAIN_NS},
        "spec": {
            "restartPolicy": restart,
            "terminationGracePeriodSeconds": grace,
            "containers": [{"name": "main", "image": "example.com/none:1", "command": command}],
        },
    }
    kube.run("delete", "pod", name, "-n", TRAIN_NS, "--ignore-not-found", "--wait=true")
    kube.run("apply", "--server-side", "-f", "-", stdin=json.dumps(on_real_nodes(kube, [pod])[0]))
    return pod


def _pod_status(kube: Kube, name: str) -> dict[str, Any]:
    return dict(json.loads(kube.run("get", "pod", name, "-n", TRAIN_NS, "-o", "json").stdout)["status"])


@pytest.mark.cluster_long
def test_a_failing_container_restarts_in_place_with_the_kubelets_back_off(train_ns: Kube) -> None:
    _pod(train_ns, "e2e-crashloop", ["sh", "-c", "hostname; exit 3"], "OnFailure")
    # The first restart at once, the second after 10 s of back-off (initialCrashLoopBackOff): the
    # third run starts at least that long after the second ended, its exit in lastState.
    deadline = time.monotonic() + 60
    while True:
        status = _pod_status(train_ns, "e2e-crashloop")
        (cs,) = status.get("containerStatuses", [{}])
        if cs.get("restartCount", 0) >= 2 and "terminated" in cs.get("lastState", {}):
            break
        assert time.monotonic() < deadline, status
        time.sleep(0.3)
    last = cs["lastState"]["terminated"]
    assert last["exitCode"] == 3
    (now,) = cs["state"].values()  # the third run: running, or already ended
    gap = dt.datetime.fromisoformat(now["startedAt"]) - dt.datetime.fromisoformat(last["finishedAt"])
    assert gap.total_seconds() >= 9, cs  # timestamps in whole seconds
    # The kubelet says so in a Warning event. (In between, the kubelet 1.36 reports the last exit as
    # the state, not a waiting CrashLoopBackOff.)
    uid = json.loads(train_ns.run("get", "pod", "e2e-crashloop", "-n", TRAIN_NS, "-o", "json").stdout)["metadata"][
        "uid"
    ]
    events = json.loads(train_ns.run("get", "events", "-n", TRAIN_NS, "-o", "json").stdout)["items"]
    assert any(e["reason"] == "BackOff" and e["involvedObject"].get("uid") == uid for e in events)
    assert status["phase"] == "Running"
    first_ip = status["podIP"]
    time.sleep(1)
    assert _pod_status(train_ns, "e2e-crashloop")["podIP"] == first_ip  # an in-place restart keeps the address
    train_ns.run("delete", "pod", "e2e-crashloop", "-n", TRAIN_NS, "--wait=true")


@pytest.mark.cluster_long
def test_graceful_deletion_kills_a_pid_1_without_a_sigterm_handler_after_the_grace_period(train_ns: Kube) -> None:
    # `sleep` installs no SIGTERM handler: as a container's PID 1 it ignores SIGTERM, so only the
    # SIGKILL at the end of the grace period stops it (exit 137), as in a container runtime.
    _pod(train_ns, "e2e-grace-kill", ["sleep", "600"], "Never", grace=3)
    _until(lambda: _pod_status(train_ns, "e2e-grace-kill").get("phase") == "Running", 60)
    t0 = time.monotonic()
    train_ns.run("delete", "pod", "e2e-grace-kill", "-n", TRAIN_NS, "--wait=true")
    took = time.monotonic() - t0
    assert 3 <= took < 20, took
    events = json.loads(train_ns.run("get", "events", "-n", TRAIN_NS, "-o", "json").stdout)["items"]
    assert any(e["reason"] == "Killing" and e["involvedObject"]["name"] == "e2e-grace-kill" for e in events)


@pytest.mark.cluster_long
def test_the_go_backends_typed_jobs_pass_server_side_strict_dry_run(cluster: Kube, tmp_path: Path) -> None:
    """The jobs go/kubeflow builds (the Kubernetes and Kubeflow Go types the flyteplugins plugin
    sends; its test writes them when ELASTIC_IDL_TYPED_JOBS_DIR is set), as those types serialize."""
    go = shutil.which("go") or "/usr/local/go/bin/go"
    r = subprocess.run(
        [go, "test", "-count=1", "-run", "^TestBuildEqualsPythonRenderer$", "."],
        cwd=REPO / "go" / "kubeflow", env={**os.environ, "ELASTIC_IDL_TYPED_JOBS_DIR": str(tmp_path)},
        capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    typed = {p.stem: json.loads(p.read_text()) for p in sorted(tmp_path.glob("*.json"))}
    assert sorted(typed) == sorted(JOBS)  # every rendered job of the contract, and no other
    refused = {}
    for case, job in typed.items():
        out = cluster.dry_run(job)
        if out.returncode != 0 or "serverside-applied (server dry run)" not in out.stdout:
            refused[case] = out.stderr.strip()
    assert refused == {}


# ---------------------------------------------------------------- the object store

#: What the pod writes with flytekit's S3 client (FileAccessProvider, then s3fs), from nothing but
#: its env: a directory tree (put recursive, as flytekit uploads a folder), a single file, and one
#: object in 5 MiB parts (a multipart upload); then what it lists under the tree.
OBJECTSTORE_TREE = {"a.txt": 11, "empty": 0, "sub/b.bin": 70_000, "sub/deeper/c.bin": 1_000_000}
OBJECTSTORE_BIG = 12 * 2**20
OBJECTSTORE_POD = """
import json, random, sys, tempfile
from pathlib import Path

from flytekit.core.data_persistence import FileAccessProvider

prefix, tree, big = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
blob = lambda name, size: random.Random(name).randbytes(size)
fap = FileAccessProvider(local_sandbox_dir=tempfile.mkdtemp(), raw_output_prefix=prefix + "/raw")
local = Path(tempfile.mkdtemp())
for name, size in tree.items():
    (local / "tree" / name).parent.mkdir(parents=True, exist_ok=True)
    (local / "tree" / name).write_bytes(blob(name, size))
(local / "one.txt").write_bytes(blob("one.txt", 4321))
fap.put_data(str(local / "tree"), prefix + "/tree", is_multipart=True)
fap.put_data(str(local / "one.txt"), prefix + "/one.txt")
fs = fap.get_filesystem("s3")
part, data = 5 * 2**20, blob("big.bin", big)
with fs.open(prefix + "/big.bin", "wb", block_size=part) as f:  # a part per block written
    for i in range(0, big, part):
        f.write(data[i : i + part])
fs.invalidate_cache()
seen = {
    "find": sorted(fs.find(prefix + "/tree")),
    "ls": sorted(fs.ls(prefix + "/tree", detail=False)),
    "big": fs.info(prefix + "/big.bin")["size"],
}
fs.pipe(prefix + "/pod-saw.json", json.dumps(seen).encode())
print("pod wrote", prefix)
"""


def _blob(name: str, size: int) -> bytes:
    """The bytes the pod writes for `name` (the same seeded generator)."""
    import random

    return random.Random(name).randbytes(size)


def _objectstore_config(kube: Kube) -> dict[str, Any]:
    """What `cluster up` wrote for the store's clients: endpoint, region, keys, bucket, pod env."""
    return dict(json.loads((kube.dir / "objectstore.json").read_text()))


@contextlib.contextmanager
def _objectstore(kube: Kube) -> Iterator[tuple[dict[str, Any], Any]]:
    """The store's client settings and a botocore S3 client from them, with path-style addressing
    as boto3 users set it; the client is closed afterwards."""
    import botocore.config
    import botocore.session

    config = _objectstore_config(kube)
    client = botocore.session.get_session().create_client(
        "s3",
        endpoint_url=config["endpoint"],
        region_name=config["region"],
        aws_access_key_id=config["access_key_id"],
        aws_secret_access_key=config["secret_access_key"],
        config=botocore.config.Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
    try:
        yield config, client
    finally:
        client.close()


def test_a_pod_writes_to_the_object_store_with_flytekits_client_and_the_host_reads_it_back(
    train_ns: Kube,
) -> None:
    with _objectstore(train_ns) as (config, s3):
        bucket = config["bucket"]
        # A new cluster's store: one bucket, empty (the data lives in CLUSTER_DIR, which `up` clears).
        assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == [bucket]
        assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0
        name, run = "e2e-objectstore", "pod-run"
        prefix = f"s3://{bucket}/{run}"
        args = [prefix, json.dumps(OBJECTSTORE_TREE), str(OBJECTSTORE_BIG)]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": TRAIN_NS},
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "image": "example.com/none:1",
                        "command": ["python", "-c", OBJECTSTORE_POD, *args],
                        # Only the store's address and credentials, as a Flyte deployment sets them.
                        "env": [{"name": k, "value": v} for k, v in sorted(config["env"].items())],
                    }
                ],
            },
        }
        train_ns.run("delete", "pod", name, "-n", TRAIN_NS, "--ignore-not-found", "--wait=true")
        applied = time.monotonic()
        train_ns.run("apply", "--server-side", "-f", "-", stdin=json.dumps(on_real_nodes(train_ns, [pod])[0]))

        def log() -> str:
            logs = container_logs(train_ns, f"{TRAIN_NS}_{name}_*", "main")
            return logs[-1][1].read_text(errors="replace")[-3000:] if logs else "(no log)"

        deadline = time.monotonic() + 60
        while (phase := _pod_status(train_ns, name).get("phase")) not in ("Succeeded", "Failed"):
            assert time.monotonic() < deadline, log()
            time.sleep(0.3)
        assert phase == "Succeeded", log()
        TIMES["objectstore_pod_apply_to_succeeded"] = round(time.monotonic() - applied, 1)

        def read(key: str) -> bytes:
            return bytes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())

        # Every byte, read back through the store on the host (a client of its own, path style).
        expected = {f"{run}/tree/{k}": _blob(k, n) for k, n in OBJECTSTORE_TREE.items()}
        expected |= {f"{run}/one.txt": _blob("one.txt", 4321), f"{run}/big.bin": _blob("big.bin", OBJECTSTORE_BIG)}
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=f"{run}/")["Contents"]]
        assert sorted(keys) == sorted([*expected, f"{run}/pod-saw.json"])  # nothing else, nothing lost
        for key, data in expected.items():
            assert read(key) == data, key
        # The 12 MiB object went up in parts: its ETag is a multipart upload's (<md5 of md5s>-<parts>).
        assert s3.head_object(Bucket=bucket, Key=f"{run}/big.bin")["ETag"].strip('"').endswith("-3")
        # The prefixes, as `ls` sees them: one level with a delimiter.
        level = s3.list_objects_v2(Bucket=bucket, Prefix=f"{run}/tree/", Delimiter="/")
        assert [p["Prefix"] for p in level["CommonPrefixes"]] == [f"{run}/tree/sub/"]
        assert sorted(o["Key"] for o in level["Contents"]) == [f"{run}/tree/a.txt", f"{run}/tree/empty"]
        # And what the pod's s3fs listed.
        seen = json.loads(read(f"{run}/pod-saw.json"))
        tree = f"{bucket}/{run}/tree"
        assert seen["find"] == sorted(f"{tree}/{k}" for k in OBJECTSTORE_TREE)
        assert seen["ls"] == [f"{tree}/a.txt", f"{tree}/empty", f"{tree}/sub"]
        assert seen["big"] == OBJECTSTORE_BIG


def test_the_object_store_listens_on_the_bridge_only_and_checks_signatures(cluster: Kube) -> None:
    config = _objectstore_config(cluster)
    assert config["endpoint"] == f"http://{ct.BRIDGE_IP}:{ct.OBJECTSTORE_PORT}"
    assert (cluster.dir / "objectstore.json").stat().st_mode & 0o077 == 0
    # Not on every address: loopback has nothing on its port.
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", ct.OBJECTSTORE_PORT), timeout=5).close()
    key, secret = config["access_key_id"], config["secret_access_key"]
    assert ct.s3_request(config["endpoint"], key, secret, "GET", "/")[0] == 200
    status, body = ct.s3_request(config["endpoint"], key, secret + "x", "GET", "/")
    assert status == 403 and b"SignatureDoesNotMatch" in body
    with pytest.raises(urllib.error.HTTPError) as refused:  # no signature at all
        urllib.request.urlopen(f"{config['endpoint']}/{config['bucket']}", timeout=5)
    assert refused.value.code == 403
    refused.value.close()
