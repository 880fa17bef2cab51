"""The flytekit entry point for real: the wheel with ``[flytekit,torch]`` in a fresh venv.

A module that imports nothing of ours but ``elastic_idl.Elastic`` gets our task plugin under
``pyflyte run``, ``pyflyte --pkgs M package`` and a plain ``python wf.py``. Registration with a
real Flyte cluster is out of reach here (no cluster, no network but the package registries), so
the check stops at ``pyflyte package``: the task specs it writes are what ``register`` uploads.

One venv for the module (pip resolves against requirements/dev.txt as constraints, so the
versions are the tested ones; torch and its CUDA wheels are hard-linked from .venv).

Then the newest flytekit on the index: when it is not the lock's, the flytekit test files run
again against it in build/venv-flytekit-<version> (docs/guide/flytekit.md, "Install").
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomllib
from google.protobuf import json_format
from packaging.requirements import Requirement

from elastic_idl.flytekit._support import TESTED_FLYTEKIT_LINES, flytekit_line
from test_packaging import ROOT, _clean_env, _fresh_venv, _locked, _pip, wheel

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
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The wheel with both extras; torch and its CUDA wheels hard-linked from .venv (pip sees them
    installed at the lock's version, and the venv costs no 5 GB copy); removed after the module."""
    path = _fresh_venv(tmp_path_factory.mktemp("venv-flytekit") / "venv")
    assert _link_torch(path) > 0
    _pip(path, f"{wheel}[flytekit,torch]", "-c", str(ROOT / "requirements" / "dev.txt"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


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


# --------------------------------------------------------------------------- the newest flytekit

#: The flytekit test files, run again in a venv of their own against the newest flytekit when that
#: is not the lock's (requirements/dev.txt), which this run's .venv tests already.
LINE_TESTS = (
    "tests/test_flytekit_plugin.py",
    "tests/test_flytekit_parity.py",
    "tests/test_flytekit_pods.py",
    "tests/test_sdk.py",
)
#: A flytekit version to check instead of the newest (to try another line, e.g. 1.15.4).
CHECK_ENV = "ELASTIC_IDL_FLYTEKIT_CHECK"
#: The packages whose release follows flytekit's: the newest flytekit comes with its own.
FLYTEKIT_DISTS = ("flytekit", "flyteidl", "flytekitplugins-kfpytorch")
#: Linked from .venv rather than downloaded: torch with its CUDA libraries is about 3 GB.
LINKED = re.compile(r"^(torch|triton|nvidia[-_].+)$", re.IGNORECASE)
#: What the tests need besides the package's own requirements.
TEST_TOOLS = ("pytest", "hypothesis", "jsonschema")


def _newest_flytekit() -> str:
    """The newest flytekit release pip would install here (this machine's index, this Python)."""
    argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-deps"]
    proc = subprocess.run(
        [*argv, "--quiet", "--report", "-", "flytekit"], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (item,) = json.loads(proc.stdout)["install"]
    return str(item["metadata"]["version"])


def _flytekit_requirement() -> Requirement:
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["flytekit"]
    (found,) = [Requirement(r) for r in extra if Requirement(r).name == "flytekit"]
    return found


def _link_torch(venv: Path) -> int:
    """Hard-link torch, triton and the nvidia libraries of .venv into ``venv`` (pip then sees them installed)."""
    (site,) = (venv / "lib").glob("python3*/site-packages")
    linked = 0
    for dist in importlib.metadata.distributions():
        if not LINKED.match(dist.metadata["Name"]):
            continue
        root = Path(str(dist.locate_file(""))).resolve()
        for file in dist.files or ():
            src = Path(str(dist.locate_file(file))).resolve()
            if not src.is_file() or root not in src.parents:
                continue  # a console script outside site-packages: not needed
            dst = site / src.relative_to(root)
            dst.parent.mkdir(parents=True, exist_ok=True)
            if not dst.exists():
                try:
                    os.link(src, dst)
                except OSError:  # another file system
                    shutil.copy2(src, dst)
                linked += 1
    return linked


def _line_venv(version: str) -> tuple[Path, str]:
    """build/venv-flytekit-<version>: the dev tree with that flytekit (and its kfpytorch), made once.

    The other packages are held at the lock's versions where the new flytekit allows it (so that
    a failure is flytekit's), else resolved afresh. Returns the venv and how it was made.
    """
    lock = (ROOT / "requirements" / "dev.txt").read_text()
    key = hashlib.sha256(f"{version}\n{lock}\n{(ROOT / 'pyproject.toml').read_text()}".encode()).hexdigest()[:16]
    venv = ROOT / "build" / f"venv-flytekit-{version}"
    stamp = venv / f".stamp-{key}"
    if stamp.exists():
        return venv, stamp.read_text()
    shutil.rmtree(venv, ignore_errors=True)
    _fresh_venv(venv)
    started = time.monotonic()
    linked = _link_torch(venv)
    (site,) = (venv / "lib").glob("python3*/site-packages")
    (site / "elastic_idl_devtree.pth").write_text(f"{ROOT / 'build' / 'devtree'}\n")  # with its dist-info
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [
        *project["dependencies"],
        *(r for r in project["optional-dependencies"]["flytekit"] if Requirement(r).name != "flytekit"),
        f"flytekit=={version}",
        f"flytekitplugins-kfpytorch=={version}",
        f"torch=={_locked('torch')}",
        *TEST_TOOLS,
    ]
    held = [
        line
        for line in lock.splitlines()
        if "==" in line and not line.startswith("#") and line.split("==")[0].lower() not in FLYTEKIT_DISTS
    ]
    constraints = venv / "constraints.txt"
    constraints.write_text("\n".join(held) + "\n")
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", *wanted]
    proc = subprocess.run([*pip, "-c", str(constraints)], capture_output=True, text=True, timeout=1800, check=False)
    how = "the lock's other versions"
    if proc.returncode != 0 and "ResolutionImpossible" in proc.stdout + proc.stderr:
        how = "a fresh resolution (the lock's versions conflict with it)"
        proc = subprocess.run(pip, capture_output=True, text=True, timeout=1800, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    how += f"; {linked} files of torch linked from .venv; set up in {time.monotonic() - started:.0f} s"
    stamp.write_text(how)
    return venv, how


def test_the_newest_flytekit_is_tested_and_admitted(capsys: pytest.CaptureFixture[str]) -> None:
    """The newest flytekit on the index passes the flytekit tests, and the extra admits its line.

    When it is the lock's version, this run's .venv tests it and only the policy is checked (one
    query to the index). Otherwise (a new release) the flytekit test files run again in
    build/venv-flytekit-<version>; a failure says what to do.
    """
    started = time.monotonic()
    version = os.environ.get(CHECK_ENV) or _newest_flytekit()
    locked = _locked("flytekit")
    line = flytekit_line(version)
    ran = f"flytekit {version}: the lock's, tested by this run's .venv"
    if version != locked:
        venv, how = _line_venv(version)
        env = _clean_env()
        proc = subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pytest", *LINE_TESTS, "-q", "-p", "no:cacheprovider"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        summary = [ln for ln in proc.stdout.splitlines() if ln.startswith(("FAILED", "ERROR"))]
        assert proc.returncode == 0, (
            f"flytekit {version} is out and the plugin's tests fail on it (venv: {venv}, {how}); fix the plugin, "
            f"or record what differs in docs/guide/flytekit.md, 'Install'. {proc.stdout.splitlines()[-1:]}\n"
            + "\n".join(summary)
            + "\n"
            + proc.stdout[-3000:]
        )
        ran = f"flytekit {version}: {proc.stdout.splitlines()[-1].strip('= ')} in {venv.name} ({how})"
    with capsys.disabled():
        print(f"\n[flytekit newest] {ran}; {time.monotonic() - started:.1f} s")
    assert line in TESTED_FLYTEKIT_LINES, (
        f"flytekit {version} passes the tests: add {line} to TESTED_FLYTEKIT_LINES "
        "(src/elastic_idl/flytekit/_support.py), and to WARM_START_FLYTEKIT_LINES when the warm-path tests passed"
    )
    assert _flytekit_requirement().specifier.contains(version, prereleases=True), (
        f"flytekit {version} passes the tests: widen the flytekit extra's pin ({_flytekit_requirement()}) "
        "in pyproject.toml to admit it"
    )
