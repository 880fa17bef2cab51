"""A Flyte 2 PyTorchJob played on one machine, from the task Flyte 2 serialized: no mocks.

Flyte 2's own serializer (``translate_task_to_wire``) writes the ``TaskSpec`` of a task with
``elastic_idl.flyte2.Elastic``; the PyTorchJob is rendered by elastic-idl's renderer
(``render_pytorchjob``) from its ``TaskTemplate``: the task from the custom, the image and args from
the container. (Not ``render_pytorchjob_from_template``, flytekit's propeller path: it reads a
flyteidl ``TaskTemplate`` and rightly refuses the fields it does not know, and a Flyte 2 template
with a code bundle carries ``TaskMetadata.code_bundle_uri``, field 21 of flyteidl2's.) Every Worker
pod runs as a process with exactly the container args Flyte 2 wrote
(``a0 --inputs ... --resolver ...``, with ``--tgz``/``--pkl`` for a code bundle) and the env the
operator gives it (``pod_env``). Flyte 2's runtime then runs the task in each pod as in a cluster:
it loads the task, reads the inputs file, calls ``execute`` in mode "remote", and writes
``outputs.pb`` or ``error.pb`` under the output prefix every pod of the job shares.

The backend's part, played by hand: the ``{{.input}}``-style templates of the args become paths
(inputs, the output prefix, raw data and checkpoint prefixes), the run and action names and the
run start time; the inputs file is written (flyteidl2's ``Inputs``); the env a Flyte 2 backend sets
in a task pod: the org, project and domain (``_U_ORG_NAME``, ``FLYTE_INTERNAL_EXECUTION_*``) and the
run's base directory (``_U_RUN_BASE``). Flyte 2's runtime also builds its remote controller, which
only submits and watches sub-actions: these tasks submit none, so it is never contacted, and no
backend is played for it.

Differences from a cluster (tests/sdk_pods.py, shared with tests/test_flytekit_pods.py):
``<job>-worker-0`` does not resolve, so every pod gets ``ELASTIC_IDL_RDZV_ENDPOINT_OVERRIDE=127.0.0.1:<port>``
and ``is_host`` (worker-0 only) in ``PET_RDZV_CONF``.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import signal
import tarfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("flyte")
pytest.importorskip("torch")

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import cloudpickle
    import flyte
    from flyte._code_bundle.bundle import build_pkl_bundle
    from flyte._internal.runtime.task_serde import translate_task_to_wire
    from flyte.models import CodeBundle, SerializationContext
    from flyteidl2.core import execution_pb2
    from flyteidl2.task import common_pb2
    from google.protobuf.json_format import MessageToDict

import elastic_idl as ei
import sdk_pods
from sdk_pods import files

MODULE = "f2_pods_wf"
#: The user's module. Each rank writes what it saw into $F2_PODS_WORK (when set).
WORKFLOW = """
import os
from datetime import timedelta
from pathlib import Path

import flyte

from elastic_idl.flyte2 import Elastic

env = flyte.TaskEnvironment(
    name="f2pods",
    plugin_config=Elastic(
        nnodes=2,
        nproc_per_node=1,
        max_restarts=0,
        rdzv_configs={"join_timeout": 60, "last_call_timeout": 1, "close_timeout": 5,
                      "keep_alive_interval": 1, "keep_alive_max_attempt": 3},
    ),
)


@env.task
def train(x: int, fail: str) -> int:
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    if rank == 1 and fail == "always":
        raise ValueError(f"bad batch on rank {rank}")
    # A bounded wait: when the other node has failed for good, this one fails too instead of
    # waiting torch's 30 minutes for a peer that will never come.
    dist.init_process_group("gloo", timeout=timedelta(seconds=15))
    world = dist.get_world_size()
    value = torch.tensor([float(x + 1)])
    dist.all_reduce(value)
    dist.destroy_process_group()
    ctx = flyte.ctx()
    work = os.environ.get("F2_PODS_WORK")
    if work:
        seen = f"{world} {os.environ['TORCHELASTIC_RUN_ID']} {ctx.action.run_name} {ctx.action.name} {ctx.mode}"
        Path(work, f"rank{rank}").write_text(seen)
    if fail == "hang":
        import time

        time.sleep(120)
    return int(value.item()) // world
"""
RUN_NAME = "f2podsrun1"
ACTION_NAME = "a0"


@pytest.fixture(scope="module")
def code(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The user's module on disk, importable in this process."""
    with sdk_pods.module_on_disk(tmp_path_factory.mktemp("code"), MODULE, WORKFLOW) as root:
        yield root


def _task() -> Any:
    return importlib.import_module(MODULE).train


def _template(code: Path, bundle: CodeBundle | None = None) -> Any:
    """The TaskTemplate Flyte 2 serializes for the task (its TaskSpec's template)."""
    sctx = SerializationContext(version="v1", root_dir=code, code_bundle=bundle)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return translate_task_to_wire(_task(), sctx).task_template


def _job(template: Any) -> dict[str, Any]:
    """The PyTorchJob of a Flyte 2 TaskTemplate: the task from its custom, the pods' args from its container."""
    task = ei.from_custom(MessageToDict(template.custom), template.type, template.task_type_version)
    options = ei.JobOptions(
        name="f2-pods", image=template.container.image, command=[], args=list(template.container.args)
    )
    return ei.render_pytorchjob(task, options)


def _inputs(path: Path, x: int, fail: str) -> None:
    inputs = common_pb2.Inputs()
    lit = inputs.literals.add()
    lit.name, lit.value.scalar.primitive.integer = "x", x
    lit = inputs.literals.add()
    lit.name, lit.value.scalar.primitive.string_value = "fail", fail
    path.write_bytes(inputs.SerializeToString())


class Pods(sdk_pods.Pods):
    """The simulated operator and Flyte 2 backend: starts the job's Worker pods, cleans them up."""

    def start(self, job: dict[str, Any], *, x: int, fail: str, pythonpath: list[str]) -> None:
        spec = job["spec"]["pytorchReplicaSpecs"]["Worker"]
        (container,) = spec["template"]["spec"]["containers"]
        assert not container.get("command") and container["args"][0] == "a0"  # Flyte 2's container: the args run
        inputs = self.root / "inputs.pb"
        _inputs(inputs, x, fail)
        (self.root / "work").mkdir()
        self.output.mkdir()  # a prefix in an object store; a folder here must exist before a file is put in it
        for i in range(spec["replicas"]):
            d = self.pod_dir(i)
            (d / "raw").mkdir(parents=True)
            fill = {
                "{{.input}}": str(inputs),
                "{{.outputPrefix}}": str(self.output),
                "{{.rawOutputDataPrefix}}": str(d / "raw"),
                "{{.checkpointOutputPrefix}}": str(self.root / "checkpoint"),
                "{{.prevCheckpointPrefix}}": "",
                "{{.runName}}": RUN_NAME,
                "{{.actionName}}": ACTION_NAME,
                "{{.runStartTime}}": "2026-12-05T08:00:00Z",
            }
            argv = [fill.get(a, a) for a in container["args"]]
            assert not [a for a in argv if "{{" in a], argv
            penv = self.env(job, container, i, pythonpath) | {
                # What a Flyte 2 backend sets in a task pod.
                "_U_ORG_NAME": "o",
                "FLYTE_INTERNAL_EXECUTION_PROJECT": "p",
                "FLYTE_INTERNAL_EXECUTION_DOMAIN": "d",
                "_U_RUN_BASE": str(self.root / "base"),
                "_F_WN": f"f2-pods-worker-{i}",  # the pod's name (downward API)
                "F2_PODS_WORK": str(self.root / "work"),
            }
            self.spawn(i, argv, penv)

    def outputs(self) -> dict[str, int]:
        """What Flyte 2 reads as the action's outputs: ``outputs.pb``, with no error document beside it."""
        assert files(self.output) == ["outputs.pb"], f"{files(self.output)}\n{self.logs()}"
        outputs = common_pb2.Outputs.FromString((self.output / "outputs.pb").read_bytes())
        return {lit.name: lit.value.scalar.primitive.integer for lit in outputs.literals}

    def error(self) -> Any:
        """The action's error document (Flyte 2 writes one, ``error.pb``), with no outputs beside it."""
        assert files(self.output) == ["error.pb"], f"{files(self.output)}\n{self.logs()}"
        return execution_pb2.ErrorDocument.FromString((self.output / "error.pb").read_bytes()).error

    def ranks(self) -> dict[str, list[str]]:
        return {p.name: p.read_text().split() for p in sorted((self.root / "work").iterdir())}


@pytest.fixture
def pods(tmp_path: Path) -> Iterator[Pods]:
    p = Pods(tmp_path)
    try:
        yield p
    finally:
        p.cleanup()


def _local_value(x: int) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        run = flyte.with_runcontext(mode="local", name="f2-pods-local").run(_task(), x=x, fail="never")
    return int(run.outputs()[0])


def test_the_pods_run_the_args_flyte_2_wrote_and_rank_0s_pod_alone_writes_the_outputs(code: Path, pods: Pods) -> None:
    template = _template(code)
    args = list(template.container.args)
    assert args[0] == "a0" and args[-4:] == ["mod", MODULE, "instance", "train"]
    job = _job(template)
    pods.start(job, x=41, fail="never", pythonpath=[str(code)])
    assert pods.wait() == [0, 0], pods.logs()
    # Only the pod holding global rank 0 writes outputs.pb (the rendezvous, not the pod index,
    # decides which); the other writes nothing, where Flyte 2 would have it write its own return.
    assert pods.outputs() == {"o0": _local_value(41)} == {"o0": 42}
    # Both workers: one world of 2, the action's run name as the rendezvous id, and the task's
    # Flyte 2 context (flyte.ctx()) in the worker, in remote mode.
    assert pods.ranks() == {f"rank{r}": ["2", RUN_NAME, RUN_NAME, ACTION_NAME, "remote"] for r in (0, 1)}
    # The pod without rank 0 ended only once outputs.pb was written: the operator marks an elastic
    # job Succeeded when one pod succeeds, and the backend then reads the output prefix.
    (other,) = [i for i in range(2) if "this pod ran global ranks [1], not 0; this pod writes nothing" in pods.log(i)]
    assert pods.ended[other] >= (pods.output / "outputs.pb").stat().st_mtime
    assert pods.left() == {}  # nothing of either pod: runtime, fork server, workers


def test_a_user_error_in_rank_1_fails_both_pods_with_its_root_cause_in_flyte_2s_error_file(
    code: Path, pods: Pods, tmp_path: Path
) -> None:
    """From a code bundle (``--tgz``): the module is in the tarball only, not on PYTHONPATH."""
    tarball = tmp_path / "code.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(code / f"{MODULE}.py", arcname=f"{MODULE}.py")
    bundle = CodeBundle(computed_version="v1", tgz=f"file://{tarball}", destination=".")
    template = _template(code, bundle)
    assert "--tgz" in template.container.args
    job = _job(template)
    pods.start(job, x=1, fail="always", pythonpath=[])
    # Flyte 2's runtime exits 0 once it wrote the error document; the pod whose rendezvous the
    # failing pod closed writes nothing, and no pod exits 200 (a closed rendezvous is no lost store).
    assert pods.wait() == [0, 0], pods.logs()
    error = pods.error()
    # A user error, retryable by the task's retries: what Flyte 2 makes of any exception a task
    # raises (flyteplugins-pytorch's RuntimeError included).
    assert (error.origin, error.kind) == (execution_pb2.ExecutionError.USER, execution_pb2.ContainerError.RECOVERABLE)
    assert "workers failed in 1 attempt(s) (max_restarts=0)" in error.message, f"{error.message}\n{pods.logs()}"
    assert "root cause: rank 1 (local rank 0" in error.message, f"{error.message}\n{pods.logs()}"
    assert "ValueError: bad batch on rank 1" in error.message
    assert pods.left() == {}  # nothing of either pod: runtime, fork server, workers


def test_a_cold_start_runs_the_function_cloudpickled_in_a_pkl_bundle(code: Path, pods: Pods, tmp_path: Path) -> None:
    """Flyte 2's ``--pkl`` bundle (what an interactive run ships): the task pickled by value, its module
    on no path of the pods, so each worker gets the function only through cloudpickle."""
    mod = importlib.import_module(MODULE)
    cloudpickle.register_pickle_by_value(mod)
    try:
        bundle = asyncio.run(build_pkl_bundle(mod.train, upload_to_controlplane=False, copy_bundle_to=tmp_path))
    finally:
        cloudpickle.unregister_pickle_by_value(mod)
    template = _template(code, bundle)
    assert "--pkl" in template.container.args
    job = _job(template)
    pods.start(job, x=4, fail="never", pythonpath=[])
    assert pods.wait() == [0, 0], pods.logs()
    assert pods.outputs() == {"o0": 5}
    assert sorted(pods.ranks()) == ["rank0", "rank1"]
    assert not any((pods.pod_dir(i) / f"{MODULE}.py").exists() for i in range(2))


def _until_both_ran(pods: Pods) -> None:
    """Until both workers wrote what they saw (with fail="hang" they then sleep)."""
    deadline = time.monotonic() + sdk_pods.POD_TIMEOUT_S
    while len(list((pods.root / "work").glob("rank*"))) < 2:
        assert time.monotonic() < deadline, pods.logs()
        assert all(p.poll() is None for p in pods.procs), pods.logs()
        time.sleep(0.2)


@pytest.mark.long  # make test's budget for issue 32 (2 minutes); the signal path is in_pod's, shared with flytekit's
def test_sigterm_stops_the_workers_and_the_pod_ends_as_the_signal_would_writing_nothing(code: Path, pods: Pods) -> None:
    pods.start(_job(_template(code)), x=1, fail="hang", pythonpath=[str(code)])
    _until_both_ran(pods)
    pods.procs[0].send_signal(signal.SIGTERM)  # what the kubelet sends first, to Flyte 2's runtime
    assert pods.procs[0].wait(60) == 128 + signal.SIGTERM, pods.log(0)[-3000:]
    assert files(pods.output) == []  # neither outputs nor an error document
    assert "launch interrupted by SIGTERM" in pods.log(0) and "no outputs are written" in pods.log(0)


def test_losing_worker_0s_pod_makes_the_other_exit_200_with_nothing_written(code: Path, pods: Pods) -> None:
    """worker-0's pod hosts the rendezvous store: the other pod exits 200 (the operator's ExitCode
    policy recreates it) and writes nothing, where an error.pb would fail the task for good."""
    pods.start(_job(_template(code)), x=1, fail="hang", pythonpath=[str(code)])
    _until_both_ran(pods)
    os.killpg(pods.procs[0].pid, signal.SIGKILL)  # the pod and every process in it, at once
    lost = time.monotonic()
    assert pods.procs[1].wait(sdk_pods.POD_TIMEOUT_S) == 200, pods.log(1)[-3000:]
    assert time.monotonic() - lost < 30  # the agent's next look at the store (keep-alive 1 s x 3 here)
    assert files(pods.output) == []
    assert "exiting 200 (retryable) with nothing written" in pods.log(1)


def test_a_listing_the_store_refuses_is_said_once_and_tried_again(caplog: pytest.LogCaptureFixture) -> None:
    """The wait of a pod without rank 0 (elastic_idl._sdk.in_pod.await_outcome) outlives a store's errors."""
    from fsspec.implementations.memory import MemoryFileSystem

    from elastic_idl._sdk import in_pod

    class Flaky(MemoryFileSystem):  # a store that refuses the first two listings
        refusals = 2

        def ls(self, path: str, detail: bool = True, **kwargs: Any) -> Any:
            if Flaky.refusals:
                Flaky.refusals -= 1
                raise OSError("503 Slow Down")
            return super().ls(path, detail=detail, **kwargs)

    fs = Flaky()
    fs.pipe("/flaky-prefix/outputs.pb", b"")
    with caplog.at_level("WARNING", logger="elastic_idl"):
        assert in_pod.await_outcome(fs, "/flaky-prefix", timeout_s=30) is True
    assert caplog.text.count("503 Slow Down") == 1 and Flaky.refusals == 0
