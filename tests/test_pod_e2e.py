"""End to end without Kubernetes: render a PyTorchJob, play the operator, run the pods as processes.

The simulated operator gives each Worker pod exactly what a cluster would: the
rendered container's command, args and env, plus ``pod_env(job, "Worker", i)``.
Two things differ on one machine, both said here:

- DNS: ``<job>-worker-0`` does not resolve locally. Every pod gets
  ``ELASTIC_IDL_RDZV_ENDPOINT_OVERRIDE=127.0.0.1:<free port>`` (the pod
  entrypoint's documented override), and, since every pod now "is" 127.0.0.1,
  the host check a cluster does by IP is made explicit: ``is_host=1`` for
  worker-0 and ``is_host=0`` for the others, appended to ``PET_RDZV_CONF``.
  So worker-0 hosts the rendezvous store, as in a cluster, whatever the start order.
- The pod's "python" is this interpreter, and the training module is on PYTHONPATH.

Every process is started in its own session and its whole group is killed at teardown.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import elastic_idl as ei
from elastic_idl._backend.operator import pod_env
from elastic_idl._backend.pytorchjob import render_pytorchjob
from elastic_idl.pod import EXIT_JOB_FAILED, FAILURE_PATH_ENV, OUTPUT_ENV, RDZV_ENDPOINT_OVERRIDE_ENV

pytest.importorskip("torch")
pytest.importorskip("elastic_idl._launch.launcher")  # the runtime's launcher the pods run through

#: The training code the pods run (written to a temporary directory, imported by the workers).
#: gloo all_reduce every step; rank 0 checkpoints its step so a restarted attempt resumes.
TRAIN_MODULE = """
import json, os, time
from pathlib import Path


def train(steps: str, work_dir: str, fail_on_rank: str = "-1") -> dict:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    if rank == int(fail_on_rank):
        raise ValueError(f"bad batch on rank {rank}")
    ckpt = Path(work_dir, "checkpoint.json")
    state = json.loads(ckpt.read_text()) if ckpt.exists() else {"step": 0, "sum": 0.0}
    start = state["step"]
    for step in range(start, int(steps)):
        t = torch.tensor([float(rank + 1)])
        dist.all_reduce(t)
        state = {"step": step + 1, "sum": state["sum"] + float(t)}
        if rank == 0:
            tmp = ckpt.with_suffix(".tmp")
            tmp.write_text(json.dumps(state))
            os.replace(tmp, ckpt)
        Path(work_dir, f"progress-rank{rank}-world{world}-restart{restart}").write_text(str(step + 1))
        time.sleep(0.05)
    dist.destroy_process_group()
    return {"world": world, "restart": restart, "resumed_from": start, "steps": state["step"], "sum": state["sum"]}
"""

#: min 1 < max 2 nodes, one restart, short rendezvous timeouts (CI budget), fast dead-node detection.
E2E_CUSTOM: dict[str, Any] = {
    "elasticConfig": {
        "rdzvBackend": "c10d",
        "minReplicas": 1,
        "maxReplicas": 2,
        "nprocPerNode": 1,
        "maxRestarts": 1,
        "startMethod": "START_METHOD_FORKSERVER",
        "joinTimeout": "60s",
        "lastCallTimeout": "3s",
        "closeTimeout": "5s",
        "rdzvOptions": [
            {"key": "keep_alive_interval", "value": "1"},
            {"key": "keep_alive_max_attempt", "value": "3"},
        ],
    },
    "workerReplicas": {"replicas": 2},
}
POD_TIMEOUT_S = 120


@dataclass
class Pod:
    index: int
    proc: subprocess.Popen[bytes]
    dir: Path

    @property
    def result(self) -> Path:
        return self.dir / "result.json"

    @property
    def failure(self) -> Path:
        return self.dir / "failure.json"

    def log(self) -> str:
        return (self.dir / "pod.log").read_text(errors="replace")


class Cluster:
    """The simulated operator: starts a job's Worker pods as local processes, and cleans them up."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.pods: list[Pod] = []
        (root / "code").mkdir()
        (root / "code" / "e2e_train.py").write_text(TRAIN_MODULE)
        self.work = root / "work"
        self.work.mkdir()

    def start(self, job: dict[str, Any], replicas: int) -> list[Pod]:
        container = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
        command = [sys.executable if part == "python" else part for part in container["command"]]
        argv = [*command, *container["args"]]
        port = _free_port()
        for i in range(replicas):
            env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "ELASTIC_IDL_"))}
            env |= {e["name"]: e["value"] for e in container["env"]}
            env |= pod_env(job, "Worker", i)
            conf = [env["PET_RDZV_CONF"]] if "PET_RDZV_CONF" in env else []
            env["PET_RDZV_CONF"] = ",".join([*conf, f"is_host={int(i == 0)}"])
            d = self.root / f"worker-{i}"
            d.mkdir()
            env |= {
                RDZV_ENDPOINT_OVERRIDE_ENV: f"127.0.0.1:{port}",
                OUTPUT_ENV: str(d / "result.json"),
                FAILURE_PATH_ENV: str(d / "failure.json"),
                "PYTHONPATH": os.pathsep.join([str(self.root / "code"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
            }
            with open(d / "pod.log", "wb") as log:
                proc = subprocess.Popen(
                    argv, env=env, cwd=d, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                )
            self.pods.append(Pod(i, proc, d))
        return self.pods

    def wait(self, timeout: float = POD_TIMEOUT_S) -> list[int]:
        deadline = time.monotonic() + timeout
        codes = []
        for p in self.pods:
            try:
                codes.append(p.proc.wait(max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                logs = "\n".join(f"--- worker-{q.index}\n{q.log()}" for q in self.pods)
                pytest.fail(f"pods did not finish within {timeout} s\n{logs}")
        return codes

    def kill(self, pod: Pod) -> None:
        """SIGKILL the pod's whole process group: its agent and its workers, like a node loss."""
        os.killpg(pod.proc.pid, signal.SIGKILL)

    def cleanup(self) -> None:
        for p in self.pods:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.proc.pid, signal.SIGKILL)  # also reaches workers left behind by an exited agent
            p.proc.wait()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        c.cleanup()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _job(custom: dict[str, Any], *entry_args: str) -> dict[str, Any]:
    return render_pytorchjob(
        custom,
        task_type_version=1,
        name="e2e",
        image="ghcr.io/acme/train:1",
        pod_args=["--call"],
        entrypoint=["e2e_train:train", *entry_args],
    )


def _progress(work: Path) -> dict[str, int]:
    out = {}
    for p in work.glob("progress-*"):
        text = p.read_text()
        out[p.name] = int(text) if text else 0
    return out


def _logs(cluster: Cluster) -> str:
    return "\n".join(f"--- worker-{p.index}\n{p.log()}" for p in cluster.pods)


def test_two_pods_rendezvous_train_and_rank0_publishes(cluster: Cluster) -> None:
    job = _job(E2E_CUSTOM, "20", str(cluster.work))
    assert job["spec"]["elasticPolicy"]["minReplicas"] == 1
    assert job["spec"]["elasticPolicy"]["maxReplicas"] == 2
    t0 = time.monotonic()
    pods = cluster.start(job, replicas=job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"])
    codes = cluster.wait()
    wall = time.monotonic() - t0
    print(f"\nsimulated 2-pod run: {wall:.1f} s")
    assert codes == [0, 0], _logs(cluster)
    # One world of 2 trained; exactly one pod (the one holding global rank 0) published.
    assert set(_progress(cluster.work)) == {"progress-rank0-world2-restart0", "progress-rank1-world2-restart0"}
    published = [p for p in pods if p.result.exists()]
    assert len(published) == 1, _logs(cluster)
    data = json.loads(published[0].result.read_text())
    assert data["rank"] == 0
    assert data["return_value"] == {"world": 2, "restart": 0, "resumed_from": 0, "steps": 20, "sum": 60.0}
    assert not any(p.failure.exists() for p in pods)
    # Worker-0 hosted the rendezvous store, as <job>-worker-0 does in a cluster.
    assert "hosts the rendezvous store" in pods[0].log()
    assert "hosts the rendezvous store" not in pods[1].log()
    assert wall < 60


def test_losing_a_pod_mid_run_finishes_at_the_smaller_size(cluster: Cluster) -> None:
    job = _job(E2E_CUSTOM, "100", str(cluster.work))
    t0 = time.monotonic()
    pods = cluster.start(job, replicas=2)
    # Wait until both ranks have trained a few steps together, then lose worker-1 (not the store host).
    deadline = time.monotonic() + POD_TIMEOUT_S
    while True:
        progress = _progress(cluster.work)
        in_world2 = [v for k, v in progress.items() if "world2-restart0" in k]
        if len(in_world2) == 2 and min(in_world2) >= 5:
            break
        if time.monotonic() > deadline or any(p.proc.poll() is not None for p in pods):
            pytest.fail(f"the world of 2 never trained\n{_logs(cluster)}")
        time.sleep(0.05)
    killed_at = max(in_world2)
    cluster.kill(pods[1])
    codes = cluster.wait()
    wall = time.monotonic() - t0
    print(f"\nsimulated 2-pod run with worker-1 killed at step {killed_at}: {wall:.1f} s")
    assert codes == [0, -signal.SIGKILL], _logs(cluster)
    # The survivor restarted (one of max_restarts), re-formed a world of 1 and finished from the checkpoint.
    data = json.loads(pods[0].result.read_text())
    value = data["return_value"]
    assert (data["rank"], value["world"], value["restart"], value["steps"]) == (0, 1, 1, 100), _logs(cluster)
    assert value["resumed_from"] >= 5
    assert "progress-rank0-world1-restart1" in _progress(cluster.work)
    assert not pods[0].failure.exists()
    assert wall < 90


def test_a_failing_job_exits_3_with_the_failure_report(cluster: Cluster) -> None:
    custom = json.loads(json.dumps(E2E_CUSTOM))
    custom["elasticConfig"] |= {"minReplicas": 1, "maxReplicas": 1, "maxRestarts": 0}
    custom["workerReplicas"] = {"replicas": 1}
    job = _job(custom, "5", str(cluster.work), "0")
    (pod,) = cluster.start(job, replicas=1)
    assert cluster.wait() == [EXIT_JOB_FAILED], _logs(cluster)
    assert not pod.result.exists()
    report = ei.FailureReport()
    from google.protobuf import json_format

    json_format.Parse(pod.failure.read_text(), report)
    assert report.attempts == 1
    (record,) = report.failures
    assert (record.rank, record.attempt, record.exit_code) == (0, 0, 1)
    assert "ValueError: bad batch on rank 0" in record.message
    assert "e2e_train.py" in record.traceback
