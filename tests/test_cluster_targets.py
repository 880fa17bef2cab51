"""The TrainJob and JobSet targets on the one-machine cluster (docs/guide/targets.md, "On the cluster").

This module's own cluster (``cluster/cluster.py up``, as test_cluster.py's), then ``cluster.py
targets-up`` on it: the JobSet controller v0.12.0 and the Kubeflow Trainer controller manager
v2.3.0, built from their modules (cluster/targets/go.mod), with their CRDs, RBAC, webhooks and
Trainer's ``torch-distributed`` ClusterTrainingRuntime read from those modules.

- The 2-node elastic task, rendered by the CLI with ``--target jobset`` and ``--target trainjob``
  and applied: the controllers make the JobSet's Job (and the TrainJob's JobSet), the Job
  controller the pods, the kubelets run our entrypoint in them, they rendezvous at node 0 by
  its pod host name under the JobSet's headless Service, train with gloo and finish: the JobSet
  ``Completed``, the TrainJob ``Complete``.
- A handful of contract tasks on every target, and (long) every contract vector's target
  objects, pass ``kubectl apply --server-side --dry-run=server --validate=strict``: the CRD
  schemas with their CEL rules, strict field validation and the controllers' webhooks.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

import test_cluster as tc

# All of it in `make cluster-test`, none in `make test`: on a new machine the two controllers' first
# build (about 4 minutes from an empty Go build cache) would push `.ci/run` past its 60 minutes. The
# offline checks of the same objects (test_targets_schema.py) run in `make test`.
pytestmark = pytest.mark.cluster_long

cluster = tc.cluster  # this module's own cluster (module scope), started and stopped as test_cluster's

DRY_NS = "e2e-targets-dry"  # the dry runs' namespace (nothing is created there)
TARGETS = ("trainjob", "trainjob_elastic_policy", "jobset")
#: A handful of contract tasks for the short dry run: an elastic range, every extension, a
#: non-elastic Master and Workers, the run policy, the render options (labels, annotations, env,
#: resources), resource quantities, nproc auto, a Worker restart policy Never, flytekit's PyTorch.
HANDFUL = (
    "kf_minimal_elastic",
    "kf_all_extensions",
    "kf_non_elastic",
    "kf_run_policy_full",
    "kf_render_options",
    "kf_resource_quantities",
    "kf_nproc_auto",
    "kf_worker_restart_never",
    "fk_pytorch_full",
)
assert all((tc.CASES_DIR / case / "targets.json").is_file() for case in HANDFUL)
TIMES: dict[str, float] = {}


@pytest.fixture(scope="module")
def targets(cluster: tc.Kube) -> Iterator[tc.Kube]:
    """The two controllers started on this module's cluster (they stop with it)."""
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, str(tc.CLUSTER_PY), "targets-up"],
        env={**os.environ, "CLUSTER_DIR": str(cluster.dir)},
        capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    assert r.returncode == 0, f"targets-up failed: {r.stderr.strip()}\n{r.stdout[-3000:]}"
    TIMES["targets_up"] = round(time.monotonic() - t0, 1)
    tc.ensure_train_ns(cluster)
    if cluster.run("get", "namespace", DRY_NS, check=False).returncode != 0:
        cluster.run("create", "namespace", DRY_NS)
    tc.SHARED.mkdir(parents=True, exist_ok=True)
    yield cluster
    (cluster.dir / "e2e-targets-times.json").write_text(json.dumps(TIMES, indent=2) + "\n")
    print("\ncluster target times (s):", json.dumps(TIMES))


def test_the_controllers_run_their_versions_and_the_runtime_is_installed(targets: tc.Kube) -> None:
    state = json.loads((targets.dir / "cluster.json").read_text())
    assert "/targets/jobset-v0.12.0-trainer-v2.3.0-" in state["targets_bin"]
    for name in ("jobset-controller", "trainer-controller-manager"):
        pid = int((targets.dir / "pids" / f"{name}.pid").read_text().split()[0])
        assert os.readlink(f"/proc/{pid}/exe") == str(Path(state["targets_bin"]) / name)
    log = (targets.dir / "logs" / "jobset-controller.log").read_text()
    assert '"gitVersion": "v0.12.0"' in log or "gitVersion=v0.12.0" in log or '"gitVersion":"v0.12.0"' in log, log[
        -2000:
    ]
    crds = json.loads(targets.run("get", "crd", "-o", "json").stdout)["items"]
    served = {c["metadata"]["name"]: [v["name"] for v in c["spec"]["versions"] if v["served"]] for c in crds}
    assert served["jobsets.jobset.x-k8s.io"] == ["v1alpha2"]
    assert served["trainjobs.trainer.kubeflow.org"] == ["v1alpha1"]
    runtime = json.loads(targets.run("get", "clustertrainingruntime", "torch-distributed", "-o", "json").stdout)
    assert runtime["spec"]["mlPolicy"]["torch"] == {}
    (rjob,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    assert rjob["name"] == "node"


# ---------------------------------------------------------------- trained on each target


def _container(obj: dict[str, Any]) -> dict[str, Any]:
    """The rendered container (a TrainJob's trainer, or the JobSet's node container)."""
    if obj["kind"] == "TrainJob":
        return dict(obj["spec"]["trainer"])
    (rjob,) = obj["spec"]["replicatedJobs"]
    (c,) = rjob["template"]["spec"]["template"]["spec"]["containers"]
    return dict(c)


def _train(kube: tc.Kube, target: str, name: str) -> tuple[tc.Run, dict[str, Any]]:
    """The 2-node task rendered by the CLI on `target`, ELASTIC_IDL_OUTPUT added, applied."""
    run = tc.Run(kube, name, tc.SHARED / name)
    if run.out.exists():
        shutil.rmtree(run.out)
    run.out.mkdir(parents=True)
    kind = "trainjob" if target == "trainjob" else "jobset"
    kube.run("delete", kind, name, "-n", tc.TRAIN_NS, "--ignore-not-found", "--wait=true")
    argv = [str(tc.TRAIN), str(run.out), "5", "0.1"]
    (obj,) = tc._render_cli(copy.deepcopy(tc.TWO_NODES), name, argv, "--target", target)
    env = {"name": "ELASTIC_IDL_OUTPUT", "value": str(run.out / "result.json")}
    if obj["kind"] == "TrainJob":
        obj["spec"]["trainer"]["env"].append(env)
    else:
        obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["env"].append(env)
    run.apply([obj])
    return run, obj


def _wait(kube: tc.Kube, run: tc.Run, kind: str, done: str, seconds: float) -> str:
    """Until the object has the condition `done` or Failed; which one."""
    deadline = time.monotonic() + seconds
    while True:
        got = json.loads(kube.run("get", kind, run.name, "-n", tc.TRAIN_NS, "-o", "json").stdout)
        conds = {c["type"]: c for c in got.get("status", {}).get("conditions", []) if c["status"] == "True"}
        for state in (done, "Failed"):
            if state in conds:
                return state
        if time.monotonic() > deadline:
            pods = kube.run("get", "pods", "-n", tc.TRAIN_NS, "-o", "wide").stdout
            pytest.fail(f"{kind} {run.name} not done in {seconds:.0f}s: {got.get('status')}\n{pods}\n{run.logs()}")
        time.sleep(0.5)


def _pods(kube: tc.Kube, jobset: str) -> dict[str, dict[str, Any]]:
    """The JobSet's pods by host name (a Job's pod is named <host name>-<random>)."""
    out = kube.run("get", "pods", "-n", tc.TRAIN_NS, "-l", f"jobset.sigs.k8s.io/jobset-name={jobset}", "-o", "json")
    pods = {p["spec"]["hostname"]: p for p in json.loads(out.stdout)["items"]}
    for host, pod in pods.items():
        assert pod["metadata"]["name"].startswith(f"{host}-") and pod["spec"]["subdomain"] == jobset
    return pods


def _trained(run: tc.Run, pods: dict[str, dict[str, Any]], run_id: str) -> None:
    """Both pods ran our entrypoint as PID 1 and trained 5 steps in a world of 2 over their own
    addresses, rendezvous at node 0's host name; rank 0 wrote the result with `run_id`."""
    names = {f"{run.name}-node-0-{i}" for i in range(2)}
    assert set(pods) == names, (sorted(pods), run.logs())
    assert [s for _, s, _, _ in run.steps()] == list(range(5)), run.logs()
    assert {w for _, _, w, _ in run.steps()} == {2}
    result = json.loads((run.out / "result.json").read_text())
    assert result["rank"] == 0 and result["run_id"] == run_id, result
    seen = {s["hostname"]: s for s in run.seen()}
    assert set(seen) == names, run.logs()
    for name, s in seen.items():
        assert s["pod"] == name
        # The pod's FQDN: its host name under the JobSet's headless Service (the subdomain).
        assert s["fqdn"] == f"{name}.{run.name}.{tc.TRAIN_NS}.svc.cluster.local", s
        assert s["addresses"] == [pods[name]["status"]["podIP"]]
        assert s["pid1"][:3] == ["python", "-m", "elastic_idl.pod"]
        assert s["world"] == 2
    assert len({s["addresses"][0] for s in seen.values()}) == 2
    # A Job's success policy (the elastic success rule) ends the Job once one pod succeeded; the
    # other either succeeded too or was stopped after it.
    assert any(p["status"]["phase"] == "Succeeded" for p in pods.values()), {
        n: p["status"].get("containerStatuses") for n, p in pods.items()
    }


def _env(pod: dict[str, Any]) -> dict[str, Any]:
    (c,) = [c for c in pod["spec"]["containers"] if c["name"] == "node"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}


def _train_until(targets: tc.Kube, target: str, name: str, done: str) -> tuple[tc.Run, dict[str, Any]]:
    """`_train`, then wait for the object's ``done`` condition (300 s), recording both times."""
    run, obj = _train(targets, target, name)
    state = _wait(targets, run, target, done, 300)
    TIMES[f"{target}_apply_to_{done.lower()}"] = round(time.time() - run.applied, 1)
    TIMES[f"{target}_apply_to_first_step"] = round(run.first_step_seconds(), 1)
    assert state == done, run.logs()
    return run, obj


def test_jobset_two_nodes_train_to_completed(targets: tc.Kube) -> None:
    run, _ = _train_until(targets, "jobset", "e2e-js", "Completed")
    pods = _pods(targets, run.name)
    # The run id per JobSet restart attempt: the pod label read through the downward API and
    # expanded by Kubernetes (attempt 0: no restart).
    _trained(run, pods, run_id=f"{run.name}-0")
    for pod in pods.values():
        assert pod["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == "0"
        assert pod["spec"]["restartPolicy"] == "Never"  # the renderer's, for its pod failure policy
        assert _env(pod)["PET_RDZV_ENDPOINT"] == f"{run.name}-node-0-0.{run.name}:29500"
    # JobSet made the headless Service the renderer did not render.
    svc = json.loads(targets.run("get", "service", run.name, "-n", tc.TRAIN_NS, "-o", "json").stdout)
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
    (job,) = json.loads(
        targets.run(
            "get", "jobs", "-n", tc.TRAIN_NS, "-l", f"jobset.sigs.k8s.io/jobset-name={run.name}", "-o", "json"
        ).stdout
    )["items"]
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["successPolicy"] == {
        "rules": [{"succeededCount": 1}]
    }
    assert {c["type"] for c in job["status"]["conditions"] if c["status"] == "True"} >= {
        "SuccessCriteriaMet",
        "Complete",
    }


def test_trainjob_two_nodes_train_to_complete(targets: tc.Kube) -> None:
    run, obj = _train_until(targets, "trainjob", "e2e-tj", "Complete")
    # Trainer made a JobSet of the TrainJob's name from the torch-distributed runtime.
    js = json.loads(targets.run("get", "jobset", run.name, "-n", tc.TRAIN_NS, "-o", "json").stdout)
    assert js["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    pods = _pods(targets, run.name)
    # No PET_RDZV_ID on a TrainJob: torch's default run id.
    _trained(run, pods, run_id="none")
    for pod in pods.values():
        env = _env(pod)
        # Trainer's five variables of a static torchrun, and the renderer's rendezvous endpoint.
        assert env["PET_NNODES"] == "2" and env["PET_NPROC_PER_NODE"] == "1", env
        assert env["PET_MASTER_ADDR"] == f"{run.name}-node-0-0.{run.name}" and env["PET_MASTER_PORT"] == "29500", env
        # The node rank: the Job's completion index, which the entrypoint does not pass (c10d ranks).
        index = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
        assert env["PET_NODE_RANK"] == {"fieldRef": {"apiVersion": "v1", "fieldPath": index}}, env
        assert env["PET_RDZV_ENDPOINT"] == f"{run.name}-node-0-0.{run.name}:29500"
        assert pod["spec"]["containers"][0]["command"] == ["python", "-m", "elastic_idl.pod"]
    assert obj["spec"]["trainer"]["numNodes"] == 2
    # The entrypoint logs Trainer's PET_NNODES as ignored where the task says more (2:2).
    for _, log in tc.container_logs(targets, f"{tc.TRAIN_NS}_{run.name}-*", "node"):
        assert "nnodes: message wins (PET_NNODES='2'); using '2:2', ignoring '2'" in log.read_text(), log


# ---------------------------------------------------------------- server-side dry runs


def _dry_run(kube: tc.Kube, obj: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    obj = copy.deepcopy(obj)
    obj["metadata"]["namespace"] = DRY_NS
    return kube.dry_run(obj)


def _case_objects(cases: list[str]) -> list[tuple[str, str, dict[str, Any]]]:
    """(case, target, object) of every object the cases render on the TrainJob and JobSet targets."""
    out = []
    for case in cases:
        rendered = json.loads((tc.CASES_DIR / case / "targets.json").read_text())
        for target in TARGETS:
            for obj in rendered[target].get("objects", []):
                out.append((case, target, obj))
    return out


ELASTIC_POLICY_REFUSED = ".spec.trainer.elasticPolicy: field not declared in schema"  # server-side apply's strict check


def _check_dry_runs(kube: tc.Kube, items: list[tuple[str, str, dict[str, Any]]]) -> dict[str, int]:
    """Each object's strict server-side dry run, four at a time. Every object is accepted but a
    TrainJob with the proposed elasticPolicy (KEP-2903; an elastic task's), which Trainer v2.3's
    CRD does not have: refused for that field alone (accepted without it). Returns the count per
    target."""
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda item: _dry_run(kube, item[2]), items))
    refused, patched = [], []
    for (case, target, obj), r in zip(items, results, strict=True):
        if target == "trainjob_elastic_policy" and "elasticPolicy" in obj["spec"]["trainer"]:
            assert r.returncode != 0 and ELASTIC_POLICY_REFUSED in r.stderr, (case, r.stdout, r.stderr)
            bare = copy.deepcopy(obj)
            del bare["spec"]["trainer"]["elasticPolicy"]
            r = _dry_run(kube, bare)
        if obj["kind"] == "TrainJob" and obj["spec"].get("runtimePatches"):
            patched.append(f"{case} {target}")  # Trainer's webhook checks each patch's manager
        if r.returncode != 0:
            refused.append(f"{case} {target}: {r.stderr.strip()}")
    assert refused == []
    # Only the render options' labels and annotations make runtimePatches.
    assert patched == [f"kf_render_options {t}" for t in ("trainjob", "trainjob_elastic_policy")]
    counts: dict[str, int] = {}
    for _, target, _ in items:
        counts[target] = counts.get(target, 0) + 1
    return counts


def test_a_handful_of_tasks_pass_strict_server_side_dry_run_on_every_target(targets: tc.Kube) -> None:
    items = _case_objects(list(HANDFUL))
    t0 = time.monotonic()
    counts = _check_dry_runs(targets, items)
    # kf_worker_restart_never is a RenderError on a TrainJob (the option only a PyTorchJob has).
    assert counts == {"trainjob": len(HANDFUL) - 1, "trainjob_elastic_policy": len(HANDFUL) - 1, "jobset": len(HANDFUL)}
    # The PyTorchJob of each, beside them.
    for case in HANDFUL:
        job = yaml.safe_load((tc.CASES_DIR / case / "pytorchjob.yaml").read_text())
        r = _dry_run(targets, job)
        assert r.returncode == 0, (case, r.stderr)
    TIMES["handful_dry_runs"] = round(time.monotonic() - t0, 1)


def test_the_schemas_and_webhooks_refuse_what_the_renderer_never_writes(targets: tc.Kube) -> None:
    """The dry runs check something: a TrainJob with PET_NNODES in its env (Trainer's webhook),
    a JobSet whose replicated job has no name (the CRD schema) and a TrainJob naming a runtime
    that does not exist (Trainer's webhook) are refused."""
    (tj,) = _case_objects(["kf_minimal_elastic"])[:1]
    bad = copy.deepcopy(tj[2])
    bad["spec"]["trainer"].setdefault("env", []).append({"name": "PET_NNODES", "value": "1:2"})
    r = _dry_run(targets, bad)
    assert r.returncode != 0 and "PET_NNODES" in r.stderr, r.stderr
    bad = copy.deepcopy(tj[2])
    bad["spec"]["runtimeRef"]["name"] = "no-such-runtime"
    r = _dry_run(targets, bad)
    assert r.returncode != 0 and "no-such-runtime" in r.stderr, r.stderr
    (js,) = [o for _, t, o in _case_objects(["kf_minimal_elastic"]) if t == "jobset"]
    bad = copy.deepcopy(js)
    del bad["spec"]["replicatedJobs"][0]["name"]
    r = _dry_run(targets, bad)
    assert r.returncode != 0 and "name" in r.stderr, r.stderr


def test_a_trainjob_with_pod_labels_passes_trainers_webhook(targets: tc.Kube) -> None:
    """The render options' labels on a TrainJob reach the pods through a runtime patch, whose manager Trainer's
    webhook requires to be a domain-prefixed path (validation.IsDomainPrefixedPath): found by these dry runs
    with the manager "elastic-idl", refused; fixed to the project's module path."""
    import elastic_idl as ei
    from elastic_idl._backend import trainjob

    options = ei.JobOptions(name="labelled", image="example.com/train:1", entrypoint=["train.py"], labels={"team": "a"})
    task = ei.Elastic(nnodes=2, nproc_per_node=1).to_task()
    (obj,) = ei.render_target(task, options, target="trainjob").objects
    assert obj["spec"]["runtimePatches"][0]["manager"] == trainjob.PATCH_MANAGER
    r = _dry_run(targets, obj)
    assert r.returncode == 0, r.stderr


def test_every_contract_vector_passes_strict_server_side_dry_run_on_every_target(targets: tc.Kube) -> None:
    cases = sorted(p.parent.name for p in tc.CASES_DIR.glob("*/targets.json"))
    items = _case_objects(cases)
    t0 = time.monotonic()
    counts = _check_dry_runs(targets, items)
    TIMES["contract_dry_runs"] = round(time.monotonic() - t0, 1)
    assert counts == {"trainjob": 54, "trainjob_elastic_policy": 54, "jobset": 55}
