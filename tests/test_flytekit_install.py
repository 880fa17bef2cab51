"""The flytekit entry point for real: the wheel with ``[flytekit,torch]`` in a fresh venv.

A module that imports nothing of ours but ``elastic_idl.Elastic`` gets our task plugin under
``pyflyte run``, ``pyflyte --pkgs M package`` and a plain ``python wf.py``. Registration with a
real Flyte cluster is out of reach here (no cluster, no network but the package registries), so
the check stops at ``pyflyte package``: the task specs it writes are what ``register`` uploads.

One venv for the module (pip resolves against requirements/dev.txt as constraints, so the
versions are the tested ones and torch is the local CPU wheel).
"""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

import pytest
from google.protobuf import json_format

from test_packaging import ROOT, _clean_env, _fresh_venv, _pip, wheel

__all__ = ["wheel"]  # the wheel fixture, built once for this module

pytestmark = pytest.mark.slow

#: The user's module: flytekit and our config, nothing else of ours.
MODULE = """
from flytekit import task, workflow

from elastic_idl import Elastic


@task(task_config=Elastic(nnodes=1, nproc_per_node=2))
def plus(x: int) -> int:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")  # fails outside a launched worker: proof of the plugin
    t = torch.tensor([1.0])
    dist.all_reduce(t)
    world = dist.get_world_size()
    dist.destroy_process_group()
    return x * 100 + int(t.item()) * 10 + world


@task(task_config=Elastic(nnodes="2:4", nproc_per_node=4))
def train(x: int) -> int:
    return x


@workflow
def wf(x: int = 1) -> int:
    return plus(x=x)


if __name__ == "__main__":
    print("RESULT", type(plus).__name__, type(train).__name__, wf(x=4))
"""
#: plus(4) on 2 workers: 4 * 100 + (1 + 1) * 10 + 2
EXPECTED = 422


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = _fresh_venv(tmp_path_factory.mktemp("venv-flytekit") / "venv")
    _pip(path, f"{wheel}[flytekit,torch]", "-c", str(ROOT / "requirements" / "dev.txt"))
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "wfmod.py").write_text(MODULE)
    return tmp_path


def _run(venv: Path, cwd: Path, *argv: str) -> str:
    env = _clean_env()
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '')}"
    proc = subprocess.run([*argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def test_pyflyte_run_uses_our_plugin(venv: Path, project: Path) -> None:
    out = _run(venv, project, str(venv / "bin" / "pyflyte"), "run", "wfmod.py", "wf", "--x", "4")
    assert str(EXPECTED) in out.split()


def test_a_plain_python_run_uses_our_plugin(venv: Path, project: Path) -> None:
    out = _run(venv, project, str(venv / "bin" / "python"), "wfmod.py")
    assert f"RESULT ElasticFunctionTask ElasticFunctionTask {EXPECTED}" in out


def test_pyflyte_package_writes_our_task_templates(venv: Path, project: Path) -> None:
    from flyteidl.admin import task_pb2

    _run(
        venv,
        project,
        str(venv / "bin" / "pyflyte"),
        "--pkgs",
        "wfmod",
        "package",
        "--image",
        "ghcr.io/acme/train:1",
        "--output",
        "out.tgz",
    )
    with tarfile.open(project / "out.tgz") as tar:
        specs = {
            m.name: task_pb2.TaskSpec.FromString(tar.extractfile(m).read())  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.name.endswith("_1.pb")
        }
    by_task = {spec.template.id.name: spec.template for spec in specs.values()}
    assert sorted(by_task) == ["wfmod.plus", "wfmod.train"]
    plus, train = by_task["wfmod.plus"], by_task["wfmod.train"]
    assert (plus.type, plus.task_type_version, plus.HasField("custom")) == ("python-task", 1, False)
    assert plus.k8s_pod.pod_spec.fields["volumes"]  # the shared-memory pod template
    assert (train.type, train.task_type_version) == ("pytorch", 1)
    # Our custom, with the extension field flytekitplugins-kfpytorch never writes.
    custom = json_format.MessageToDict(train.custom)
    assert custom["elasticConfig"]["joinTimeout"] == "900s"
    assert custom["elasticConfig"]["minReplicas"] == 2
    assert custom["workerReplicas"]["replicas"] == 4
