"""A Flyte 2 task as a Flyte 2 cluster runs it, on the one-machine cluster (cluster/, tests/test_cluster.py).

Flyte 2 serializes the task (``translate_task_to_wire``) with a ``--tgz`` code bundle in the
cluster's object store, as ``flyte run``/``flyte deploy`` upload one; elastic-idl renders the
PyTorchJob from the template's custom and container and applies it; the operator makes the pods,
which run exactly the ``a0 ...`` args Flyte 2 wrote: Flyte 2's runtime downloads the bundle from
the bucket, reads the inputs there and writes ``outputs.pb`` or ``error.pb`` back under the output
prefix. A Flyte 2 backend's part is played by hand, and only that: the inputs, the code bundle and
every prefix are ``s3://`` paths on the object store, the ``{{...}}`` templates of the args are
filled, and the env a backend sets in a task pod (org, project, domain, the run's base directory,
the store's address and credentials) is set. Flyte 2's runtime builds its remote controller too,
which only submits and watches sub-actions: the task submits none, so nothing contacts a backend.

Selected by ``-m cluster``; the long one (worker-0 lost, 26-38 s) by ``-m cluster_long``.
"""

from __future__ import annotations

import importlib
import io
import shutil
import sys
import tarfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import test_cluster as tc
from test_cluster_flytekit import Bucket, FlyteRun

pytestmark = pytest.mark.cluster

pytest.importorskip("flyte")

cluster = tc.cluster  # this module's own cluster (module scope), started and stopped as test_cluster's

MODULE = "f2_cluster_wf"
WORKFLOW = """
import os
from datetime import timedelta

import flyte

from elastic_idl.flyte2 import Elastic

env = flyte.TaskEnvironment(
    name="f2cluster",
    plugin_config=Elastic(nnodes=2, nproc_per_node=1, max_restarts=0,
                          rdzv_configs={"join_timeout": 120, "keep_alive_interval": 1, "keep_alive_max_attempt": 3}),
)


@env.task
def train(x: int, fail: str) -> int:
    import torch
    import torch.distributed as dist

    if os.environ["RANK"] == "1" and fail == "always":
        raise ValueError("bad batch on rank 1")
    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    value = torch.tensor([float(x + 1)])
    dist.all_reduce(value)
    world = dist.get_world_size()
    dist.destroy_process_group()
    return int(value.item()) // world * 10 + world


@env.task
def steps(n: int, step_seconds: float, log_dir: str) -> int:
    import time
    from pathlib import Path

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    rank, world = dist.get_rank(), dist.get_world_size()
    total = 0
    for step in range(n):
        value = torch.tensor([float(step + 1)])
        dist.all_reduce(value)
        total += int(value.item()) // world
        if rank == 0:
            with open(Path(log_dir, "steps"), "a") as f:
                f.write(f"{time.time()} {step} {world} 0\\n")
        time.sleep(step_seconds)
    dist.destroy_process_group()
    return total
"""
IMAGE = "example.com/train:1"
#: Where Flyte 2's runtime unpacks the bundle in each pod: the pod's own /tmp (pods do not share it).
DEST_DIR = "/tmp"
RUN_NAME = "f2clusterrun"


@dataclass
class Flyte2:
    """The cluster's namespace for these jobs, its object store, and the serialized tasks (what
    test_cluster_flytekit's FlyteRun reads of its ``flyte``: the bucket and its client)."""

    kube: tc.Kube
    store: dict[str, Any]
    s3: Bucket
    templates: dict[str, Any]  # task name -> its TaskTemplate, as Flyte 2 serialized it with the bundle

    @property
    def bucket(self) -> str:
        return str(self.store["bucket"])


@pytest.fixture(scope="module")
def flyte2(cluster: tc.Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flyte2]:
    from flyte._internal.runtime.task_serde import translate_task_to_wire
    from flyte.models import CodeBundle, SerializationContext

    kube = cluster
    tc.ensure_train_ns(kube)
    store = tc._objectstore_config(kube)
    code = tmp_path_factory.mktemp("f2code")
    (code / f"{MODULE}.py").write_text(WORKFLOW)
    tarball = io.BytesIO()
    with tarfile.open(fileobj=tarball, mode="w:gz") as tar:
        tar.add(code / f"{MODULE}.py", arcname=f"{MODULE}.py")
    sys.path.insert(0, str(code))
    try:
        mod = importlib.import_module(MODULE)
        bundle = CodeBundle(computed_version="v1", tgz=f"s3://{store['bucket']}/f2/code.tgz", destination=DEST_DIR)
        sctx = SerializationContext(version="v1", root_dir=code, code_bundle=bundle)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            templates = {t: translate_task_to_wire(getattr(mod, t), sctx).task_template for t in ("train", "steps")}
        with tc._objectstore(kube) as (_, client):
            s3 = Bucket(client, store["bucket"])
            s3.put("f2/code.tgz", tarball.getvalue())  # what `flyte run` uploads
            yield Flyte2(kube, store, s3, templates)
    finally:
        sys.path.remove(str(code))
        sys.modules.pop(MODULE, None)


def _inputs(values: dict[str, Any]) -> bytes:
    from flyteidl2.task import common_pb2

    inputs = common_pb2.Inputs()
    for name, value in values.items():
        lit = inputs.literals.add()
        lit.name = name
        primitive = lit.value.scalar.primitive
        if isinstance(value, int):
            primitive.integer = value
        elif isinstance(value, float):
            primitive.float_value = value
        else:
            primitive.string_value = value
    return inputs.SerializeToString()


def _start(f2: Flyte2, name: str, task_name: str, inputs: dict[str, Any]) -> FlyteRun:
    from google.protobuf.json_format import MessageToDict

    import elastic_idl as ei

    base = tc._new_run(f2.kube, name)
    run = FlyteRun(base.kube, base.name, base.out, flyte=f2, key=name)  # FlyteRun reads only the bucket of its flyte
    f2.s3.delete(f"{name}/")
    if "log_dir" in inputs:  # the run's host folder, which the pods see
        inputs = {**inputs, "log_dir": str(run.out)}
    f2.s3.put(f"{name}/inputs.pb", _inputs(inputs))
    t = f2.templates[task_name]
    task = ei.from_custom(MessageToDict(t.custom), t.type, t.task_type_version)
    fill = {  # a Flyte 2 backend's part: the templates become paths in the bucket, the run's names
        "{{.input}}": f"{run.prefix}/inputs.pb",
        "{{.outputPrefix}}": f"{run.prefix}/outputs",
        "{{.rawOutputDataPrefix}}": f"{run.prefix}/raw",
        "{{.checkpointOutputPrefix}}": f"{run.prefix}/checkpoint",
        "{{.prevCheckpointPrefix}}": "",
        "{{.runName}}": RUN_NAME,
        "{{.actionName}}": "a0",
        "{{.runStartTime}}": "2026-12-05T08:00:00Z",
    }
    args = [fill.get(a, a) for a in t.container.args]
    assert args[0] == "a0" and "--tgz" in args, args
    job = ei.render_pytorchjob(
        task, ei.JobOptions(name=name, image=IMAGE, namespace=tc.TRAIN_NS, command=[], args=args)
    )
    container = tc._container(job)
    container.pop("command")  # Flyte 2's container has none: its args run
    env = container.setdefault("env", [])
    env.extend({"name": k, "value": v} for k, v in sorted(f2.store["env"].items()))
    env.extend(  # what a Flyte 2 backend sets in a task pod
        {"name": k, "value": v}
        for k, v in {
            "_U_ORG_NAME": "o",
            "FLYTE_INTERNAL_EXECUTION_PROJECT": "p",
            "FLYTE_INTERNAL_EXECUTION_DOMAIN": "d",
            "_U_RUN_BASE": f"{run.prefix}/base",
        }.items()
    )
    run.apply([job])
    return run


def test_a_two_node_flyte_2_task_from_its_bucket_bundle_writes_rank_0s_outputs_before_succeeded(
    flyte2: Flyte2,
) -> None:
    from flyteidl2.task import common_pb2

    run = _start(flyte2, "f2-s3", "train", {"x": 4, "fail": "never"})
    assert run.wait_done(300) == "Succeeded", run.logs()
    took = round(time.time() - run.applied, 1)
    # outputs.pb alone, from the pod holding rank 0: no error document from the other pod.
    assert run.outputs() == ["outputs.pb"], f"{run.outputs()}\n{run.logs()}"
    (lit,) = common_pb2.Outputs.FromString(flyte2.s3.get(f"{run.key}/outputs/outputs.pb")).literals
    assert (lit.name, lit.value.scalar.primitive.integer) == ("o0", 5 * 10 + 2)
    # The other pod waited for outputs.pb: the job is Succeeded only after it exists (whole seconds).
    assert run.succeeded_at() >= int(run.modified("outputs.pb"))
    print(f"\nflyte2 on the cluster: apply to Succeeded {took} s")


def test_a_user_error_in_rank_1_leaves_flyte_2s_error_pb_with_the_root_cause_and_no_outputs(flyte2: Flyte2) -> None:
    from flyteidl2.core import execution_pb2

    run = _start(flyte2, "f2-fail", "train", {"x": 1, "fail": "always"})
    state = run.wait_done(300)
    assert run.outputs() == ["error.pb"], f"{state} {run.outputs()}\n{run.logs()}"
    error = execution_pb2.ErrorDocument.FromString(flyte2.s3.get(f"{run.key}/outputs/error.pb")).error
    assert error.origin == execution_pb2.ExecutionError.USER
    assert "root cause: rank 1 (local rank 0" in error.message and "ValueError: bad batch on rank 1" in error.message
    # Flyte 2's runtime exits 0 once the error is written, and the other pod writes nothing:
    # the job is Succeeded for the operator, and the backend reads error.pb.
    assert state == "Succeeded", run.logs()
    shutil.rmtree(run.out, ignore_errors=True)


@pytest.mark.cluster_long
def test_worker_0_force_deleted_the_other_pod_exits_200_and_the_job_re_forms_to_rank_0s_outputs(
    flyte2: Flyte2,
) -> None:
    """worker-0's pod hosts the rendezvous store: losing it makes the other pod exit 200 with nothing
    written, the operator (ExitCode) recreates both, and the job runs again to outputs.pb alone."""
    from flyteidl2.task import common_pb2

    n = 20
    run = _start(flyte2, "f2-kill0", "steps", {"n": n, "step_seconds": 0.5, "log_dir": ""})
    run.wait_steps(3, 240)
    pod = "f2-kill0-worker-0"
    before = run.pods()[pod]
    flyte2.kube.run("delete", "pod", pod, "-n", tc.TRAIN_NS, "--grace-period=0", "--force")
    lost = time.time()
    assert run.wait_done(400) == "Succeeded", run.logs()
    assert run.pods()[pod]["metadata"]["uid"] != before["metadata"]["uid"]
    assert run.outputs() == ["outputs.pb"], f"{run.outputs()}\n{run.logs()}"
    (lit,) = common_pb2.Outputs.FromString(flyte2.s3.get(f"{run.key}/outputs/outputs.pb")).literals
    assert lit.value.scalar.primitive.integer == n * (n + 1) // 2
    assert [t for t, s, _, _ in run.steps() if t > lost and s == 0], run.steps()  # the re-formed job ran again
    assert "exiting 200 (retryable) with nothing written" in run.logs(), run.logs()
    print(f"\nflyte2 on the cluster: worker-0 lost, apply to Succeeded {round(time.time() - run.applied, 1)} s")
