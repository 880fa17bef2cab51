"""The flytekit task as production runs it, on the one-machine cluster (cluster/, tests/test_cluster.py).

A workflow module is packaged by ``pyflyte package`` (``--copy all``: the code tarball beside the
task specs, as ``pyflyte register`` uploads it), the ``TaskTemplate`` of its ``Elastic`` task is
read from the package, and its PyTorchJob is rendered from it (``render_pytorchjob_from_template``)
and applied. Propeller's part is played by hand and only that: the code tarball, the inputs and
every prefix are ``s3://`` paths on the cluster's object store (cluster/cluster.py, objectstore),
the ``{{...}}`` templates are filled, and the env propeller adds is set (the execution id, the
store's address and credentials as a Flyte deployment configures them, ``_F_WN`` / ``_F_DES``).
The pods run the container args flytekit wrote: ``pyflyte-fast-execute`` (downloads the tarball
from the bucket) then ``pyflyte-execute``, or ``pyflyte-execute`` alone with the code in the
"image" (a host folder on PYTHONPATH). With a remote prefix the workers start cold: the task
function and its inputs travel by cloudpickle.

Selected by ``-m cluster``; the long ones by ``-m cluster_long``.
"""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
import tarfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

import test_cluster as tc

pytestmark = pytest.mark.cluster

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    pytest.importorskip("flytekit")

cluster = tc.cluster  # this module's own cluster (module scope), started and stopped as test_cluster's

MODULE = "fk_cluster_wf"
WORKFLOW = """
import os
import time
from datetime import timedelta
from pathlib import Path

import flytekit
from flytekit import task, workflow
from flytekit.deck import Deck

import elastic_idl as ei

FAST_DEAD_PEER = {"join_timeout": 120, "keep_alive_interval": 1, "keep_alive_max_attempt": 3}


@task(task_config=ei.Elastic(nnodes=2, nproc_per_node=1, max_restarts=2, rdzv_configs=FAST_DEAD_PEER),
      enable_deck=True)
def train(steps: int, step_seconds: float, log_dir: str) -> int:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    rank, world = dist.get_rank(), dist.get_world_size()
    checkpoint = flytekit.current_context().checkpoint
    saved = checkpoint.read()
    start, total = (0, 0) if saved is None else (int(x) for x in saved.decode().split())
    for step in range(start, steps):
        value = torch.tensor([float(step + 1)])
        dist.all_reduce(value)
        total += int(value.item()) // world
        if rank == 0:
            checkpoint.write(f"{step + 1} {total}".encode())
            if log_dir:
                with open(Path(log_dir, "steps"), "a") as f:
                    f.write(f"{time.time()} {step} {world} {start}\\n")
        dist.barrier()
        time.sleep(step_seconds)
    if rank == 0:
        Deck("training", f"<p>{steps} steps in a world of {world}, resumed at {start}</p>")
    dist.destroy_process_group()
    return total


@task(task_config=ei.Elastic(nnodes="1:3", nproc_per_node=1, rdzv_configs={"join_timeout": 120,
                                                                             "last_call_timeout": 5}))
def world_13(x: int) -> int:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    value = torch.tensor([float(x)])
    dist.all_reduce(value)
    world = dist.get_world_size()
    dist.destroy_process_group()
    return int(value.item()) * 10 + world


@workflow
def wf(steps: int, step_seconds: float, log_dir: str) -> int:
    return train(steps=steps, step_seconds=step_seconds, log_dir=log_dir)


@workflow
def wf_13(x: int) -> int:
    return world_13(x=x)
"""
IMAGE = "example.com/train:1"
#: Where pyflyte-fast-execute unpacks the code in each pod: a folder that exists in the image, as
#: /root does in flytekit's default; here each pod's own /tmp (pods do not share it).
DEST_DIR = "/tmp"
TIMES: dict[str, float] = {}


class Bucket:
    """The store's bucket seen from the host, through botocore (s3fs would leave a thread behind)."""

    def __init__(self, client: Any, bucket: str) -> None:
        self.client, self.name = client, bucket

    def put(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.name, Key=key, Body=data)

    def get(self, key: str) -> bytes:
        return bytes(self.client.get_object(Bucket=self.name, Key=key)["Body"].read())

    def keys(self, prefix: str) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.name, Prefix=prefix)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []))

    def modified(self, key: str) -> float:
        return float(self.client.head_object(Bucket=self.name, Key=key)["LastModified"].timestamp())

    def delete(self, prefix: str) -> None:
        for key in self.keys(prefix):
            self.client.delete_object(Bucket=self.name, Key=key)


@dataclass
class Flyte:
    """The cluster's namespace for these jobs, its object store, and the packaged workflow."""

    kube: tc.Kube
    store: dict[str, Any]
    s3: Bucket
    code: Path  # the workflow module (the "image" for plain pyflyte-execute)
    specs: dict[str, dict[str, Any]]  # "all" / "none" (pyflyte package --copy) -> task name -> TaskTemplate
    tarball_key: str  # where the fast-registration tarball is in the bucket

    @property
    def bucket(self) -> str:
        return str(self.store["bucket"])

    def template(self, task: str, *, fast: bool) -> Any:
        return self.specs["all" if fast else "none"][f"{MODULE}.{task}"]


@pytest.fixture(scope="module")
def flyte(cluster: tc.Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flyte]:
    from flyteidl.admin import task_pb2

    kube = cluster
    tc.ensure_train_ns(kube)
    store = tc._objectstore_config(kube)
    tc.SHARED.mkdir(parents=True, exist_ok=True)
    code = tc.SHARED / "fk-cluster-code"  # pods see the host's /var/tmp: the "image" of plain pyflyte-execute
    if code.exists():
        shutil.rmtree(code)
    code.mkdir()
    (code / f"{MODULE}.py").write_text(WORKFLOW)
    out = tmp_path_factory.mktemp("package")
    pyflyte = Path(sys.executable).parent / "pyflyte"
    specs: dict[str, dict[str, Any]] = {}
    tarball = None
    for copy in ("all", "none"):  # fast registration (the code tarball), and the code in the image
        started = time.monotonic()
        r = subprocess.run(
            [str(pyflyte), "--pkgs", MODULE, "package", "--image", IMAGE, "--copy", copy,
             "--in-container-source-path", DEST_DIR, "--output", str(out / f"{copy}.tgz"), "--force"],
            cwd=code, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        TIMES[f"pyflyte_package_copy_{copy}"] = round(time.monotonic() - started, 1)
        specs[copy] = {}
        with tarfile.open(out / f"{copy}.tgz") as tar:
            for member in tar.getmembers():
                data = tar.extractfile(member)
                assert data is not None
                if member.name.endswith(".tar.gz"):
                    tarball = (member.name, data.read())
                elif member.name.endswith("_1.pb"):  # <n>_<name>_<resource type>.pb; 1 is a task
                    spec = task_pb2.TaskSpec()
                    spec.ParseFromString(data.read())
                    specs[copy][spec.template.id.name] = spec.template
        assert f"{MODULE}.train" in specs[copy], sorted(specs[copy])
    assert tarball is not None
    with tc._objectstore(kube) as (_, client):
        s3 = Bucket(client, store["bucket"])
        # What `pyflyte register` does with the tarball: upload it where the tasks' args will say.
        tarball_key = f"fast/{tarball[0]}"
        s3.put(tarball_key, tarball[1])
        yield Flyte(kube, store, s3, code, specs, tarball_key)
    if TIMES:
        (kube.dir / "e2e-flytekit-times.json").write_text(json.dumps(TIMES, indent=2) + "\n")
        print("\nflytekit-on-the-cluster times (s):", json.dumps(TIMES))


@dataclass
class FlyteRun(tc.Run):
    """One task execution: its job and its prefixes in the bucket."""

    flyte: Flyte | None = None
    key: str = ""  # the run's folder in the bucket: inputs.pb, outputs/, raw/, checkpoint/

    @property
    def prefix(self) -> str:
        assert self.flyte is not None
        return f"s3://{self.flyte.bucket}/{self.key}"

    def outputs(self) -> list[str]:
        """What is in the output prefix (propeller's view: outputs.pb, error documents, the deck)."""
        assert self.flyte is not None
        return [k.rsplit("/", 1)[-1] for k in self.flyte.s3.keys(f"{self.key}/outputs/")]

    def output_value(self) -> int:
        from flyteidl.core import literals_pb2

        assert self.flyte is not None
        lm = literals_pb2.LiteralMap.FromString(self.flyte.s3.get(f"{self.key}/outputs/outputs.pb"))
        return int(lm.literals["o0"].scalar.primitive.integer)

    def modified(self, name: str) -> float:
        assert self.flyte is not None
        return self.flyte.s3.modified(f"{self.key}/outputs/{name}")

    def succeeded_at(self) -> float:
        for cond in self.job()["status"]["conditions"]:
            if cond["type"] == "Succeeded" and cond["status"] == "True":
                return datetime.fromisoformat(cond["lastTransitionTime"].replace("Z", "+00:00")).timestamp()
        raise AssertionError(self.job()["status"])


def _literals(values: dict[str, Any]) -> bytes:
    from flyteidl.core import literals_pb2

    lm = literals_pb2.LiteralMap()
    for key, value in values.items():
        primitive = lm.literals[key].scalar.primitive
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise TypeError(value)
        if isinstance(value, int):
            primitive.integer = value
        elif isinstance(value, float):
            primitive.float_value = value
        else:
            primitive.string_value = value
    return lm.SerializeToString()


def _start(flyte: Flyte, name: str, task: str, inputs: dict[str, Any], *, fast: bool, log: bool = False) -> FlyteRun:
    """Apply the task's job with these inputs (`log`: and `log_dir`, the run's host folder)."""
    from elastic_idl.flytekit import render_pytorchjob_from_template

    base = tc._new_run(flyte.kube, name)
    run = FlyteRun(base.kube, base.name, base.out, flyte=flyte, key=name)
    flyte.s3.delete(f"{name}/")
    if log:
        inputs = {**inputs, "log_dir": str(run.out)}
    flyte.s3.put(f"{name}/inputs.pb", _literals(inputs))
    template = flyte.template(task, fast=fast)
    job = render_pytorchjob_from_template(template, name=name, namespace=tc.TRAIN_NS)
    container = tc._container(job)
    args = container["args"]
    assert args[0] == ("pyflyte-fast-execute" if fast else "pyflyte-execute"), args
    # Propeller's part: the templates become paths in the bucket.
    fill = {
        "{{ .remote_package_path }}": f"s3://{flyte.bucket}/{flyte.tarball_key}",
        "{{.input}}": f"{run.prefix}/inputs.pb",
        "{{.outputPrefix}}": f"{run.prefix}/outputs",
        "{{.rawOutputDataPrefix}}": f"{run.prefix}/raw",
        "{{.checkpointOutputPrefix}}": f"{run.prefix}/checkpoint",
        "{{.prevCheckpointPrefix}}": "",
    }
    container["args"] = [fill.get(a, a) for a in args]
    env = container.setdefault("env", [])
    env.extend({"name": k, "value": v} for k, v in sorted(flyte.store["env"].items()))
    # The execution's env propeller adds (the Worker's _F_WN, its pod's name, is the renderer's).
    env.extend(
        [
            {"name": "FLYTE_INTERNAL_EXECUTION_ID", "value": f"{name}-exec"},
            {"name": "FLYTE_INTERNAL_EXECUTION_PROJECT", "value": "p"},
            {"name": "FLYTE_INTERNAL_EXECUTION_DOMAIN", "value": "d"},
            {"name": "_F_DES", "value": "Earliest"},
        ]
    )
    if not fast:
        env.append({"name": "PYTHONPATH", "value": str(flyte.code)})
    run.apply([job])
    return run


def _local_value(flyte: Flyte, workflow: str, **inputs: Any) -> int:
    sys.path.insert(0, str(flyte.code))
    try:
        return int(getattr(importlib.import_module(MODULE), workflow)(**inputs))
    finally:
        sys.path.remove(str(flyte.code))
        sys.modules.pop(MODULE, None)


STEPS = 20


def _expected_total(steps: int = STEPS) -> int:
    return steps * (steps + 1) // 2


def test_a_packaged_two_node_task_runs_cold_from_the_bucket_and_its_outputs_come_before_succeeded(
    flyte: Flyte,
) -> None:
    run = _start(flyte, "fk-s3", "train", {"steps": 5, "step_seconds": 0.0, "log_dir": ""}, fast=True)
    assert run.wait_done(300) == "Succeeded", run.logs()
    TIMES["fast_execute_2_nodes_apply_to_succeeded"] = round(time.time() - run.applied, 1)
    assert run.output_value() == _local_value(flyte, "wf", steps=5, step_seconds=0.0, log_dir="") == 15
    # outputs.pb and the deck rank 0's pod made, and nothing else (no error document from any pod).
    assert run.outputs() == ["deck.html", "outputs.pb"], run.outputs()
    deck = flyte.s3.get(f"{run.key}/outputs/deck.html").decode()
    assert "5 steps in a world of 2, resumed at 0" in deck
    # The other pod waited for rank 0's outputs: the job is Succeeded only after outputs.pb exists
    # (the API's times have whole seconds), and both pods ended after it was written.
    written = run.modified("outputs.pb")
    assert run.succeeded_at() >= int(written)
    for pod in run.pods().values():
        (state,) = pod["status"]["containerStatuses"]
        finished = state["state"]["terminated"]["finishedAt"]
        assert datetime.fromisoformat(finished.replace("Z", "+00:00")).timestamp() >= int(written), pod["metadata"]


def _kill_worker_0(flyte: Flyte, name: str, *, graceful: bool) -> None:
    # The steps log: the run's host folder, which the pods see (an input, so the local run needs none).
    run = _start(flyte, name, "train", {"steps": STEPS, "step_seconds": 0.5}, fast=True, log=True)
    run.wait_steps(3, 240)
    pod = f"{name}-worker-0"
    before = run.pods()[pod]
    if graceful:
        flyte.kube.run("delete", "pod", pod, "-n", tc.TRAIN_NS, "--wait=false")
    else:
        flyte.kube.run("delete", "pod", pod, "-n", tc.TRAIN_NS, "--grace-period=0", "--force")
    lost = time.time()
    assert run.wait_done(400) == "Succeeded", run.logs()
    after = run.pods()[pod]
    assert after["metadata"]["uid"] != before["metadata"]["uid"]
    # Never a permanent failure: outputs, no error document, the value of a run without the loss.
    assert run.outputs() == ["deck.html", "outputs.pb"], run.outputs()
    assert run.output_value() == _expected_total()
    steps = run.steps()
    resumed = [(t, s, start) for t, s, _, start in steps if t > lost]
    assert resumed and resumed[0][2] > 0, steps  # from flytekit's checkpoint, not step 0
    assert [s for _, s, _, _ in steps][-1] == STEPS - 1
    key = "graceful" if graceful else "force"
    TIMES[f"worker0_{key}_delete_to_next_step"] = round(resumed[0][0] - lost, 1)
    TIMES[f"worker0_{key}_run_apply_to_succeeded"] = round(time.time() - run.applied, 1)
    # The survivor exited 200 with nothing written and the operator recreated it (ExitCode).
    assert run.job()["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "ExitCode"
    assert "exiting 200 (retryable) with nothing written" in run.logs(), run.logs()


def test_worker_0_force_deleted_the_job_re_forms_and_the_task_succeeds_from_its_checkpoint(flyte: Flyte) -> None:
    assert _local_value(flyte, "wf", steps=STEPS, step_seconds=0.0, log_dir="") == _expected_total()
    _kill_worker_0(flyte, "fk-kill0", graceful=False)


@pytest.mark.cluster_long
def test_worker_0_drained_gracefully_the_job_re_forms_and_the_task_succeeds(flyte: Flyte) -> None:
    _kill_worker_0(flyte, "fk-drain0", graceful=True)


@pytest.mark.cluster_long
def test_a_1_to_3_task_runs_pyflyte_execute_in_three_pods_with_the_code_in_the_image(flyte: Flyte) -> None:
    run = _start(flyte, "fk-13", "world_13", {"x": 4}, fast=False)
    job = run.job()
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3
    assert run.wait_done(300) == "Succeeded", run.logs()
    TIMES["execute_1to3_apply_to_succeeded"] = round(time.time() - run.applied, 1)
    assert run.outputs() == ["outputs.pb"]
    assert run.output_value() == 4 * 3 * 10 + 3
    assert _local_value(flyte, "wf_13", x=4) == 4 * 1 * 10 + 1  # one node locally


def test_templates_with_accelerator_interruptible_and_secrets_render_jobs_the_api_server_takes(flyte: Flyte) -> None:
    """The shapes the template renderer builds from propeller's settings (tests/test_flytekit_template.py,
    the cases compared with flyteplugins' own pods): each job, and each replica's pod as the operator
    would make it, passes the strict server-side dry run (schema, unknown fields, the operator's webhook)."""
    import test_flytekit_template as ft
    from elastic_idl.flytekit import render_pytorchjob_from_template

    cases = ft._go_cases()
    assert len(cases) >= 6
    for case, (template, options) in cases.items():
        job = render_pytorchjob_from_template(template, name=case.replace("_", "-"), namespace=tc.TRAIN_NS, **options)
        r = flyte.kube.dry_run(job)
        assert r.returncode == 0, (case, r.stderr)
        for rtype, replica in job["spec"]["pytorchReplicaSpecs"].items():
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{job['metadata']['name']}-{rtype.lower()}-0", "namespace": tc.TRAIN_NS}
                | {k: v for k, v in replica["template"].get("metadata", {}).items() if k in ("labels", "annotations")},
                "spec": replica["template"]["spec"],
            }
            r = flyte.kube.dry_run(pod)
            assert r.returncode == 0, (case, rtype, r.stderr)
