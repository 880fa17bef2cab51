"""The built wheel works on its own: contents, metadata, and an install into fresh
venvs (no system site-packages, nothing from the checkout) at the declared
protobuf floor and at the newest protobuf the range admits."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow

# Wheel-relative paths that must be there whatever else is added.
REQUIRED = [
    "elastic_idl/__init__.py",
    "elastic_idl/py.typed",
    "elastic_idl/plugins/kubeflow/v1/pytorch_pb2.py",
    "elastic_idl/plugins/kubeflow/v1/pytorch_pb2.pyi",
    "elastic_idl/plugins/v1/elastic_pb2.py",
    "elastic_idl/plugins/v1/elastic_pb2.pyi",
    "elastic_idl/core/v1/resources_pb2.py",
    "elastic_idl/betterproto/__init__.py",
    "elastic_idl/betterproto/plugins/kubeflow/v1/__init__.py",
    "elastic_idl/betterproto/plugins/v1/__init__.py",
]
MAX_WHEEL_BYTES = 1_000_000


def _protobuf_floor() -> str:
    """The floor of the protobuf range declared in pyproject.toml."""
    (floor,) = re.findall(r'"protobuf>=([0-9.]+),<[0-9]+"', (ROOT / "pyproject.toml").read_text())
    return str(floor)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:3])


def _locked(name: str) -> str:
    lock = (ROOT / "requirements" / "dev.txt").read_text()
    match = re.search(rf"^{re.escape(name)}==([0-9.]+)$", lock, flags=re.MULTILINE | re.IGNORECASE)
    assert match, name
    return match.group(1)


def _expected_files() -> set[str]:
    """What the hatch `sources` mapping in pyproject.toml should put in the wheel."""
    mapping = {
        ROOT / "src" / "elastic_idl": "elastic_idl",
        ROOT / "gen" / "pb2" / "elastic_idl": "elastic_idl",
        ROOT / "gen" / "betterproto" / "elastic_idl": "elastic_idl/betterproto",
    }
    out = set()
    for src, dest in mapping.items():
        for path in src.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                out.add(f"{dest}/{path.relative_to(src).as_posix()}")
    return out


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (whl,) = out.glob("elastic_idl-*.whl")
    return whl


def test_wheel_contents(wheel: Path, capsys: pytest.CaptureFixture[str]) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    files = {n for n in names if ".dist-info/" not in n}
    assert [r for r in REQUIRED if r not in files] == []
    assert files == _expected_files()
    assert all(n.startswith("elastic_idl/") for n in files)
    assert not any(n.startswith(("tests/", "gen/", "src/", "protos/")) or "__pycache__" in n for n in names)
    assert not any(n.endswith(".pyc") for n in names)
    size = wheel.stat().st_size
    assert size < MAX_WHEEL_BYTES
    with capsys.disabled():
        print(f"\n[packaging] {wheel.name}: {size} bytes, {len(files)} files")


def test_the_docs_say_the_wheels_size_and_files(wheel: Path) -> None:
    """The figures docs/guide/development.md gives (issue 18: they were stale): the file count exactly, the sizes within 15 %."""
    m = re.search(
        r"one wheel \(`make wheel`; (\d+) KB, (\d+) files, (\d+) KB unpacked",
        (ROOT / "docs" / "guide" / "development.md").read_text(),
    )
    assert m, "docs/guide/development.md, Packaging: the wheel's size, file count and unpacked size"
    kb, count, unpacked_kb = (int(g) for g in m.groups())
    infos = [i for i in zipfile.ZipFile(wheel).infolist() if ".dist-info/" not in i.filename]
    assert count == len(infos)
    assert abs(kb * 1024 - wheel.stat().st_size) <= 0.15 * wheel.stat().st_size
    unpacked = sum(i.file_size for i in infos)
    assert abs(unpacked_kb * 1024 - unpacked) <= 0.15 * unpacked


def test_make_wheel_builds_the_wheel_with_the_pinned_backend() -> None:
    """`make wheel` (issue 18: the install in docs/guide/flytekit.md needs it): a .PHONY target writing dist/*.whl, no build isolation."""
    makefile = (ROOT / "Makefile").read_text()
    phony = " ".join(re.findall(r"^\.PHONY:((?:.*\\\n)*.*)$", makefile, re.M)).split()
    assert "wheel" in phony
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    dry = subprocess.run(["make", "-n", "wheel"], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert dry.returncode == 0, dry.stderr
    assert "-m build --wheel --no-isolation --outdir dist ." in dry.stdout


def test_wheel_metadata(wheel: Path) -> None:
    zf = zipfile.ZipFile(wheel)
    (meta_name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
    meta = zf.read(meta_name).decode()
    requires = sorted(line.split(": ", 1)[1] for line in meta.splitlines() if line.startswith("Requires-Dist: "))
    flytekit_only = "(python_version < '3.13') and extra == 'flytekit'"
    assert requires == [
        "betterproto==2.0.0b7",
        f"cloudpickle>=2; {flytekit_only}",
        "cloudpickle>=2; extra == 'flyte2'",
        "flyte<2.13,>=2.12.1; extra == 'flyte2'",
        f"flytekit<1.17,>=1.16.31; {flytekit_only}",
        f"kubernetes>=12; {flytekit_only}",
        f"protobuf<8,>={_protobuf_floor()}",
        "pyyaml>=6",
        "torch<3,>=2.13; extra == 'torch'",
    ]
    assert "Provides-Extra: torch" in meta
    assert "Provides-Extra: flytekit" in meta
    assert "Provides-Extra: flyte2" in meta
    (ep_name,) = [n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt")]
    entry_points = zf.read(ep_name).decode()
    assert "elastic-idl = elastic_idl.cli:main" in entry_points
    assert "[flytekit.plugins]\nelastic_idl = elastic_idl.flytekit._entry" in entry_points


# Runs inside each fresh venv, from a temporary directory outside the checkout.
_CHECK = r"""
import json, os, sys
import google.protobuf
from google.protobuf import json_format
from google.protobuf.internal import api_implementation

import elastic_idl
from elastic_idl.plugins.kubeflow.v1 import pytorch_pb2
from elastic_idl.plugins.v1 import elastic_pb2, failure_pb2
from elastic_idl.plugins.v1 import pytorch_pb2 as legacy_pb2
from elastic_idl.betterproto.plugins.kubeflow import v1 as bp_kubeflow
import elastic_idl._task.validate

checkout = sys.argv[1]
assert not elastic_idl.__file__.startswith(checkout), elastic_idl.__file__
assert not os.getcwd().startswith(checkout)

t = pytorch_pb2.DistributedPyTorchTrainingTask()
t.worker_replicas.replicas = 3
e = t.elastic_config
e.rdzv_backend, e.min_replicas, e.max_replicas, e.nproc_per_node, e.max_restarts = "c10d", 1, 3, 4, 2
e.join_timeout.seconds = 900
e.rdzv_options.add(key="is_host", value="1")
wire = t.SerializeToString()
assert pytorch_pb2.DistributedPyTorchTrainingTask.FromString(wire) == t
custom = json_format.MessageToDict(t)
assert json_format.ParseDict(custom, pytorch_pb2.DistributedPyTorchTrainingTask()) == t
assert custom["elasticConfig"]["joinTimeout"] == "900s", custom
bp = bp_kubeflow.DistributedPyTorchTrainingTask().parse(wire)
assert bytes(bp) == wire
assert legacy_pb2.DistributedPyTorchTrainingTask(workers=2).SerializeToString() == b"\x08\x02"
failure_pb2.FailureReport(failures=[failure_pb2.FailureRecord(rank=1, exit_code=3)]).SerializeToString()

# A FailureReport's JSON keeps zero values (rank 0, attempt 0): the option's name differs by protobuf version.
from elastic_idl._launch.failures import report_json
zero = json.loads(report_json(failure_pb2.FailureReport(failures=[failure_pb2.FailureRecord(exit_code=1)])))
assert {k: zero["failures"][0][k] for k in ("rank", "localRank", "attempt")} == dict.fromkeys(
    ("rank", "localRank", "attempt"), 0
), zero

validate = getattr(elastic_idl, "validate", elastic_idl._task.validate.validate)
validate(t)
try:
    bad = pytorch_pb2.DistributedPyTorchTrainingTask()
    bad.elastic_config.min_replicas = 3
    bad.elastic_config.max_replicas = 1
    validate(bad)
    raise SystemExit("validate accepted min > max")
except elastic_idl.ValidationError:
    pass
print(json.dumps({
    "protobuf": google.protobuf.__version__,
    "implementation": api_implementation.Type(),
    "file": elastic_idl.__file__,
}))
"""


def _fresh_venv(path: Path) -> Path:
    """A new venv outside the checkout that sees neither the dev venv nor the checkout."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=300)
    assert "include-system-site-packages = false" in (path / "pyvenv.cfg").read_text()
    return path


def _pip(venv: Path, *args: str) -> None:
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PYTHONNOUSERSITE"] = "1"
    return env


@pytest.fixture(scope="module", params=["newest", "floor"])
def installed(
    request: pytest.FixtureRequest, wheel: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, Path]:
    """One fresh venv per protobuf version, shared by the tests of this module."""
    venv = _fresh_venv(tmp_path_factory.mktemp(f"venv-{request.param}") / "venv")
    pins = [f"protobuf=={_protobuf_floor()}"] if request.param == "floor" else []
    _pip(venv, str(wheel), *pins)
    return request.param, venv


@pytest.mark.parametrize("impl", ["default", "python"])
def test_installed_wheel_imports_and_round_trips(
    installed: tuple[str, Path], impl: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    which, venv = installed
    env = _clean_env()
    if impl == "python":
        env["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] = "python"
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-c", _CHECK, str(ROOT)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["file"].startswith(str(venv))
    assert result["implementation"] == ("python" if impl == "python" else "upb")
    if which == "floor":
        assert result["protobuf"] == _protobuf_floor()
    else:
        # At least the release the dev environment is locked to (requirements/dev.txt).
        assert _version(result["protobuf"]) >= _version(_locked("protobuf"))
    with capsys.disabled():
        print(f"\n[packaging] {which} venv, {impl} implementation: protobuf {result['protobuf']} OK")


def test_installed_wheel_has_no_torch_and_a_console_script(installed: tuple[str, Path], tmp_path: Path) -> None:
    _, venv = installed
    env = _clean_env()
    probe = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import importlib.util; print(importlib.util.find_spec('torch'))"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert probe.stdout.strip() == "None"  # torch is an extra, not a dependency
    script = venv / "bin" / "elastic-idl"
    assert script.exists()
    proc = subprocess.run(
        [str(script), "--help"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "usage" in proc.stdout.lower()


def test_wheel_declares_its_license(wheel: Path) -> None:
    """Apache-2.0 (issue #9: the repository had no LICENSE), in the metadata and shipped in the wheel."""
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    zf = zipfile.ZipFile(wheel)
    (meta_name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
    meta = zf.read(meta_name).decode().splitlines()
    assert "License-Expression: Apache-2.0" in meta
    assert "License-File: LICENSE" in meta
    (shipped,) = [n for n in zf.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
    assert zf.read(shipped).decode() == text
