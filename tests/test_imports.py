"""torch is an optional extra: decoding, validating, converting and rendering never import it.

Each check runs in a fresh interpreter, since this test process may have torch loaded.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

#: The one module that imports torch at import time (DESIGN: torch lives in exactly one module).
TORCH_MODULES = {"elastic_idl._launch.agent"}
#: Heavy upstream packages the runtime must not pull in either.
FORBIDDEN = ("torch", "flytekit", "flyteidl", "kubernetes", "kubeflow")


def _run(code: str) -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _loaded_after(imports: list[str]) -> list[str]:
    code = f"""
import importlib, json, sys
for name in {imports!r}:
    importlib.import_module(name)
print(json.dumps(sorted({{m.split(".")[0] for m in sys.modules}})))
"""
    return list(_run(code))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "module",
    [
        "elastic_idl",
        "elastic_idl._task.validate",
        "elastic_idl._launch.spec",
        "elastic_idl._task.view",
        "elastic_idl._task.codec",
        "elastic_idl._task.messages",
        "elastic_idl.plugins.kubeflow.v1.pytorch_pb2",
        "elastic_idl.plugins.v1.pytorch_pb2",
        "elastic_idl.betterproto.plugins.kubeflow.v1",
        "elastic_idl.betterproto.plugins.v1",
    ],
)
def test_module_does_not_import_torch(module: str) -> None:
    loaded = _loaded_after([module])
    assert "elastic_idl" in loaded
    assert [m for m in FORBIDDEN if m in loaded] == []


def test_no_module_but_the_torch_one_imports_torch() -> None:
    # Walk the files, not pkgutil: the generated _pb2 directories are namespace packages.
    code = """
import importlib, json, os, pathlib, sys
import elastic_idl
root = pathlib.Path(elastic_idl.__file__).parent
names = sorted(
    ".".join(("elastic_idl", *(pathlib.Path(d) / f).relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
    for d, _, files in os.walk(root, followlinks=True)  # the dev tree is made of symlinks
    for f in files
    if f.endswith(".py") and "__pycache__" not in d
)
out = {}
for name in names:
    if name == "elastic_idl._launch.agent":
        continue
    importlib.import_module(name)
    out[name] = "torch" in sys.modules
print(json.dumps(out))
"""
    found = _run(code)
    assert "elastic_idl._task.validate" in found
    assert "elastic_idl.plugins.kubeflow.v1.pytorch_pb2" in found
    assert len(found) >= 15
    assert [name for name, torch_loaded in found.items() if torch_loaded] == []


def test_the_torch_module_does_import_torch() -> None:
    # The checks above are only meaningful if detection works: importing the torch
    # module (or torch itself, while that module is not there yet) must show up.
    present = [m for m in sorted(TORCH_MODULES) if importlib.util.find_spec(m) is not None]
    loaded = _loaded_after(present or ["torch.distributed"])
    assert "torch" in loaded


def test_runtime_works_with_torch_unimportable() -> None:
    # torch blocked outright: any import attempt, even a lazy one, raises ImportError.
    code = """
import json, sys
sys.modules["torch"] = None
import elastic_idl as ei
custom = {"elasticConfig": {"rdzvBackend": "c10d", "minReplicas": 1, "maxReplicas": 3, "nprocPerNode": 4,
                            "maxRestarts": 2}, "workerReplicas": {"replicas": 3}}
task = ei.from_custom(custom)
ei.validate(task)
spec = ei.to_launch_spec(task, run_id="r1", rdzv_endpoint="localhost:29400")
wire = ei.encode(task, "binary")
assert ei.decode(wire, task_type_version=1) == task
print(json.dumps({"custom": ei.to_custom(task, upstream=True), "spec": type(spec).__name__}))
"""
    result = _run(code)
    assert result["spec"] == "LaunchSpec"
    assert result["custom"] == {
        "elasticConfig": {
            "rdzvBackend": "c10d",
            "minReplicas": 1,
            "maxReplicas": 3,
            "nprocPerNode": 4,
            "maxRestarts": 2,
        },
        "workerReplicas": {"replicas": 3},
    }


def test_public_api_is_lazy_and_complete() -> None:
    import elastic_idl

    assert set(elastic_idl.__all__) == {*elastic_idl._EXPORTS, "__version__"}
    for name in elastic_idl.__all__:
        assert getattr(elastic_idl, name) is not None
    code = (
        "import sys; import elastic_idl.plugins.kubeflow.v1.pytorch_pb2; "
        "print(sorted(m for m in sys.modules if m.startswith('elastic_idl._')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"  # the message modules do not load the runtime


def test_the_dev_venv_imports_torch_without_a_warning() -> None:
    """Issue 29 item 12: the dev venv had no numpy, so every ``import torch`` warned "Failed to
    initialize NumPy"; nearly every torch user has numpy, and the launcher is measured with it."""
    proc = subprocess.run(
        [
            sys.executable,
            "-W",
            "default",
            "-c",
            "import torch, numpy; print(torch.from_numpy(numpy.ones(2)).sum().item())",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert (proc.stdout.strip(), proc.stderr) == ("2.0", "")


def test_the_dev_lock_lists_everything_the_dev_venv_holds() -> None:
    """Issue 29 item 11: requirements/dev.txt said torch was a CPU wheel and left out the 18 CUDA
    packages and triton that installing it pulls from PyPI (4 GB nobody saw in the lock). Every
    distribution in .venv is in the lock, at the locked version (pip and the checkout aside)."""
    import importlib.metadata
    import re
    from pathlib import Path

    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    lock_file = Path(__file__).resolve().parent.parent / "requirements" / "dev.txt"
    lock = {}
    for line in lock_file.read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            lock[norm(name)] = version
    installed = {norm(d.metadata["Name"]): d.version for d in importlib.metadata.distributions()}
    installed = {k: v for k, v in installed.items() if k not in ("pip", "elastic-idl")}
    assert {k: v for k, v in installed.items() if lock.get(k) != v} == {}
    assert any(k.startswith("nvidia-") for k in lock) and "numpy" in lock
