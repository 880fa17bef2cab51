"""A Flyte PyTorchJob played on one machine, from the serialized task template: no mocks.

flytekit's own translator serializes a workflow's ``Elastic`` task; the PyTorchJob is rendered
from that ``TaskTemplate`` (``render_pytorchjob_from_template``); every Worker pod runs as a
process with exactly the container args flytekit wrote (``pyflyte-execute ...``, or the
``pyflyte-fast-execute ...`` form with a code tarball) and the env the operator gives it
(``pod_env``), and propeller's part is played by hand: the ``{{.input}}``-style templates
become file-system paths, the inputs file is written, and ``FLYTE_INTERNAL_EXECUTION_ID`` is set.

Differences from a cluster, as in tests/test_pod_e2e.py: ``<job>-worker-0`` does not resolve,
so every pod gets ``ELASTIC_IDL_RDZV_ENDPOINT_OVERRIDE=127.0.0.1:<port>`` and ``is_host``
(worker-0 only) in ``PET_RDZV_CONF``; each pod has its own output prefix (in Flyte they share
one), so the test can see which pod wrote what.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import socket
import subprocess
import sys
import tarfile
import time
import warnings
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("flytekit")
pytest.importorskip("torch")

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from flyteidl.core import errors_pb2, execution_pb2, literals_pb2
    from flytekit.configuration import FastSerializationSettings, Image, ImageConfig, SerializationSettings
    from flytekit.tools.translator import get_serializable

from elastic_idl import pod_env
from elastic_idl.flytekit import render_pytorchjob_from_template
from elastic_idl.flytekit._runtime import RDZV_ENDPOINT_OVERRIDE_ENV
from elastic_idl.flytekit._template import TRAINING_CONTAINER

MODULE = "fk_pods_wf"
#: The user's workflow module. Each rank writes what it saw into $FK_PODS_WORK (when set).
WORKFLOW = """
import os
import time
from datetime import timedelta
from pathlib import Path

from flytekit import task, workflow

import elastic_idl as ei

CONFIG = ei.Elastic(
    nnodes=2,
    nproc_per_node=1,
    max_restarts=1,
    rdzv_configs={"join_timeout": 60, "last_call_timeout": 1, "close_timeout": 5,
                  "keep_alive_interval": 1, "keep_alive_max_attempt": 3},
)


@task(task_config=CONFIG)
def train(x: int, fail: str) -> int:
    import torch
    import torch.distributed as dist

    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    rank = int(os.environ["RANK"])
    if rank == 1 and (fail == "always" or (fail == "once" and restart == 0)):
        raise ValueError(f"bad batch on rank {rank} in attempt {restart}")
    # A bounded wait: when the other node has failed for good, this one fails too instead of
    # waiting torch's 30 minutes for a peer that will never come.
    dist.init_process_group("gloo", timeout=timedelta(seconds=15))
    world = dist.get_world_size()
    work = os.environ.get("FK_PODS_WORK")
    if fail == "hang":  # until the pod is stopped
        Path(work, f"started{rank}").write_text("")
        time.sleep(120)
    value = torch.tensor([float(x + 1)])
    dist.all_reduce(value)
    dist.destroy_process_group()
    if work:
        Path(work, f"rank{rank}").write_text(f"{world} {restart} {os.environ['TORCHELASTIC_RUN_ID']}")
    return int(value.item()) // world


@workflow
def wf(x: int, fail: str = "never") -> int:
    return train(x=x, fail=fail)
"""
EXECUTION_ID = "fk-pods-exec-1"
POD_TIMEOUT_S = 120
IMAGE = Image(name="default", fqn="ghcr.io/acme/train", tag="1")


@pytest.fixture(scope="module")
def code(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The workflow module on disk, importable in this process."""
    root = tmp_path_factory.mktemp("code")
    (root / f"{MODULE}.py").write_text(WORKFLOW)
    sys.path.insert(0, str(root))
    try:
        yield root
    finally:
        sys.path.remove(str(root))
        sys.modules.pop(MODULE, None)


def _template(code: Path, *, fast: str | None = None) -> Any:
    mod = importlib.import_module(MODULE)
    settings = SerializationSettings(image_config=ImageConfig(default_image=IMAGE))
    if fast is not None:
        settings = SerializationSettings(
            image_config=ImageConfig(default_image=IMAGE),
            fast_serialization_settings=FastSerializationSettings(
                enabled=True, destination_dir=".", distribution_location=fast
            ),
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return get_serializable(OrderedDict(), settings, mod.train).template.to_flyte_idl()


def _inputs(path: Path, x: int, fail: str) -> None:
    lm = literals_pb2.LiteralMap()
    lm.literals["x"].scalar.primitive.integer = x
    lm.literals["fail"].scalar.primitive.string_value = fail
    path.write_bytes(lm.SerializeToString())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Pods:
    """The simulated operator and propeller: starts the job's Worker pods, cleans them up."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.procs: list[subprocess.Popen[bytes]] = []

    def pod_dir(self, i: int) -> Path:
        return self.root / f"worker-{i}"

    def output(self, i: int) -> Path:
        return self.pod_dir(i) / "outputs"

    def log(self, i: int) -> str:
        return (self.pod_dir(i) / "pod.log").read_text(errors="replace")

    def start(self, job: dict[str, Any], *, x: int, fail: str, pythonpath: list[str]) -> None:
        spec = job["spec"]["pytorchReplicaSpecs"]["Worker"]
        (container,) = [c for c in spec["template"]["spec"]["containers"] if c["name"] == TRAINING_CONTAINER]
        assert "command" not in container  # flytekit's container: the args are the command
        inputs = self.root / "inputs.pb"
        _inputs(inputs, x, fail)
        port = _free_port()
        bin_dir = str(Path(sys.executable).parent)
        (self.root / "work").mkdir()
        for i in range(spec["replicas"]):
            d = self.pod_dir(i)
            (d / "raw").mkdir(parents=True)
            fill = {
                "{{.input}}": str(inputs),
                "{{.outputPrefix}}": str(self.output(i)),
                "{{.rawOutputDataPrefix}}": str(d / "raw"),
                "{{.checkpointOutputPrefix}}": str(d / "checkpoint"),
                "{{.prevCheckpointPrefix}}": "",
            }
            argv = [fill.get(a, a) for a in container["args"]]
            env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "ELASTIC_IDL_", "PYTHONPATH"))}
            env |= {e["name"]: e["value"] for e in container["env"]}
            env |= pod_env(job, "Worker", i)
            env["PET_RDZV_CONF"] = ",".join([*filter(None, [env.get("PET_RDZV_CONF")]), f"is_host={int(i == 0)}"])
            env |= {
                RDZV_ENDPOINT_OVERRIDE_ENV: f"127.0.0.1:{port}",
                "FLYTE_INTERNAL_EXECUTION_ID": EXECUTION_ID,
                "FLYTE_INTERNAL_EXECUTION_PROJECT": "p",
                "FLYTE_INTERNAL_EXECUTION_DOMAIN": "d",
                "FK_PODS_WORK": str(self.root / "work"),
                "PATH": os.pathsep.join([bin_dir, env.get("PATH", "")]),
                "PYTHONPATH": os.pathsep.join(pythonpath),
            }
            with open(d / "pod.log", "wb") as log:
                self.procs.append(
                    subprocess.Popen(argv, env=env, cwd=d, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
                )

    def wait(self) -> list[int]:
        deadline = time.monotonic() + POD_TIMEOUT_S
        codes = []
        for p in self.procs:
            try:
                codes.append(p.wait(max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                logs = "\n".join(f"--- worker-{i}\n{self.log(i)[-3000:]}" for i in range(len(self.procs)))
                pytest.fail(f"pods did not finish within {POD_TIMEOUT_S} s\n{logs}")
        return codes

    def cleanup(self) -> None:
        for p in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()

    def outputs(self) -> dict[str, Any]:
        """The outputs of the one pod that wrote any (the one whose node held global rank 0)."""
        written = [i for i in range(len(self.procs)) if _files(self.output(i))]
        assert len(written) == 1, {i: _files(self.output(i)) for i in range(len(self.procs))}
        lm = literals_pb2.LiteralMap.FromString((self.output(written[0]) / "outputs.pb").read_bytes())
        return {k: v.scalar.primitive.integer for k, v in lm.literals.items()}

    def error(self, i: int) -> Any:
        return errors_pb2.ErrorDocument.FromString((self.output(i) / "error.pb").read_bytes())

    def ranks(self) -> dict[str, str]:
        return {p.name: p.read_text() for p in sorted((self.root / "work").iterdir())}


@pytest.fixture
def pods(tmp_path: Path) -> Iterator[Pods]:
    p = Pods(tmp_path)
    try:
        yield p
    finally:
        p.cleanup()


def _local_value(x: int) -> int:
    mod = importlib.import_module(MODULE)
    return int(mod.wf(x=x))


def _files(path: Path) -> list[str]:
    return sorted(p.name for p in path.rglob("*") if p.is_file()) if path.exists() else []


def test_the_pods_run_the_template_flytekit_wrote_and_rank_0_returns_the_local_value(code: Path, pods: Pods) -> None:
    job = render_pytorchjob_from_template(_template(code).SerializeToString(), name="fk-pods")
    pods.start(job, x=41, fail="never", pythonpath=[str(code)])
    assert pods.wait() == [0, 0], pods.log(0)[-3000:] + pods.log(1)[-3000:]
    # Only the pod holding global rank 0 writes outputs (the rendezvous, not the pod index, decides
    # which); the other writes nothing (IgnoreOutputs).
    assert pods.outputs() == {"o0": _local_value(41)} == {"o0": 42}
    assert pods.ranks() == {"rank0": f"2 0 {EXECUTION_ID}", "rank1": f"2 0 {EXECUTION_ID}"}


def test_fast_execute_pods_restart_a_failed_worker_and_succeed(code: Path, pods: Pods, tmp_path: Path) -> None:
    tarball = tmp_path / "code.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(code / f"{MODULE}.py", arcname=f"{MODULE}.py")
    template = _template(code, fast=f"file://{tarball}")
    job = render_pytorchjob_from_template(template, name="fk-pods")
    args = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["args"]
    assert args[:2] == ["pyflyte-fast-execute", "--additional-distribution"]
    pods.start(job, x=1, fail="once", pythonpath=[])  # the code comes from the tarball only
    assert pods.wait() == [0, 0], pods.log(0)[-3000:] + pods.log(1)[-3000:]
    assert pods.outputs() == {"o0": _local_value(1)}
    seen = {rank: text.split() for rank, text in pods.ranks().items()}
    assert sorted(seen) == ["rank0", "rank1"]
    assert all(world == "2" and run_id == EXECUTION_ID for world, _, run_id in seen.values())
    # The failed node used its one restart; the other re-joined the new round (a membership
    # change, which torch does not count as a restart).
    assert sorted(restart for _, restart, _ in seen.values()) in (["0", "1"], ["1", "1"])


def test_a_permanent_failure_writes_flytekits_error_document_with_the_root_cause(code: Path, pods: Pods) -> None:
    job = render_pytorchjob_from_template(_template(code), name="fk-pods")
    pods.start(job, x=1, fail="always", pythonpath=[str(code)])
    assert pods.wait() == [0, 0]  # pyflyte-execute exits 0 and leaves the error document
    assert [_files(pods.output(i)) for i in (0, 1)] == [["error.pb"], ["error.pb"]]
    errors = [pods.error(i).error for i in (0, 1)]
    # The pod whose worker raised names it as the root cause, with the time it raised: propeller's
    # earliest-error strategy picks that document over the other pod's.
    (root,) = [e for e in errors if "ValueError: bad batch on rank 1 in attempt 0" in e.message]
    assert "root cause: rank 1 (local rank 0" in root.message
    assert root.kind == errors_pb2.ContainerError.NON_RECOVERABLE
    assert root.origin == execution_pb2.ExecutionError.USER
    (other,) = [e for e in errors if e is not root]
    assert (root.timestamp.seconds, root.timestamp.nanos) <= (other.timestamp.seconds, other.timestamp.nanos)


def test_sigterm_stops_the_workers_and_the_pod_writes_nothing(code: Path, pods: Pods) -> None:
    job = render_pytorchjob_from_template(_template(code), name="fk-pods")
    pods.start(job, x=1, fail="hang", pythonpath=[str(code)])
    work = pods.root / "work"
    deadline = time.monotonic() + POD_TIMEOUT_S
    while len(list(work.glob("started*"))) < 2:
        assert time.monotonic() < deadline, pods.log(0)[-3000:] + pods.log(1)[-3000:]
        assert all(p.poll() is None for p in pods.procs), pods.log(0)[-3000:] + pods.log(1)[-3000:]
        time.sleep(0.2)
    pod = pods.procs[0]
    workers = _descendants(pod.pid)
    assert workers  # the launcher's workers (and its fork server) run under pyflyte-execute
    pod.send_signal(signal.SIGTERM)  # what the kubelet sends first
    assert pod.wait(60) == 128 + signal.SIGTERM, pods.log(0)[-3000:]
    assert _files(pods.output(0)) == []  # neither outputs nor an error document
    # Workers and the fork server die with the launcher (stopped, or by their parent-death signal);
    # CPython's resource tracker exits when it reads the end of its pipe: give them a moment.
    grace = time.monotonic() + 10
    while any(_alive(pid) for pid in workers) and time.monotonic() < grace:
        time.sleep(0.1)
    assert {pid: _cmdline(pid) for pid in workers if _alive(pid)} == {}
    assert "launch interrupted by SIGTERM" in pods.log(0)


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()[1])
                children.setdefault(ppid, []).append(int(entry))
    out, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def _cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    return ""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")
