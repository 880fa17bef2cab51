"""Rendered PyTorchJobs are valid by construction, proven three ways, plus golden files.

1. The training operator's CRD schema (v1.9.4), made strict: every field we emit
   must be declared (the API server would silently prune an undeclared one) and
   int32/int64 formats are range-checked. The CRD is test data in tests/data/ (origin,
   licence and sha256 in tests/data/README.md); a missing CRD fails, never skips.
2. The operator's admission webhook rules (validatePyTorchJob), restated below.
3. A round trip through the kubeflow-training SDK models (they drop unknown fields).

Golden files: tests/golden/pytorchjob/*.yaml, each an input document and the whole
expected object. Regenerate the expected documents with
``.venv/bin/python tests/test_kubeflow_valid.py --update-goldens``.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import re
import subprocess
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import elastic_idl as ei
from elastic_idl._backend.operator import pod_env
from elastic_idl._backend.pytorchjob import JobOptions, render_pytorchjob
from elastic_idl._task.messages import KubeflowTask, LegacyTask

ROOT = Path(__file__).resolve().parents[1]
GOLDEN_DIR = Path(__file__).resolve().parent / "golden" / "pytorchjob"
#: The training operator's CRD (v1.9.4), test data of this repository; tests/data/README.md says
#: where it comes from. Override with ELASTIC_IDL_CRD=/path/to/kubeflow.org_pytorchjobs.yaml.
CRD_ENV = "ELASTIC_IDL_CRD"
DATA_DIR = Path(__file__).resolve().parent / "data"
CRD_DEFAULT = DATA_DIR / "kubeflow.org_pytorchjobs.yaml"
GOLDEN_HEADER = (
    "# Golden case for elastic_idl.render_pytorchjob. First document: the input (task_type_version,\n"
    "# the TaskTemplate custom dict, render options). Second document: the PyTorchJob it renders, whole.\n"
    "# Regenerate the second document: .venv/bin/python tests/test_kubeflow_valid.py --update-goldens\n"
)
GOLDEN_INPUT_KEYS = {"description", "task_type_version", "custom", "options"}
RENDER_OPTIONS = {f.name for f in fields(JobOptions)}


# --------------------------------------------------------------------------- the three checks


def crd_path() -> Path:
    return Path(os.environ.get(CRD_ENV) or CRD_DEFAULT)


def _strict(node: Any) -> Any:
    """Deny undeclared fields wherever the schema declares properties (the API server prunes them)."""
    if isinstance(node, dict):
        out = {k: _strict(v) for k, v in node.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_strict(v) for v in node]
    return node


@pytest.fixture(scope="module")
def crd_validator() -> Any:
    path = crd_path()
    if not path.is_file():
        pytest.fail(f"CRD schema not found at {path} ({CRD_ENV} overrides tests/data/)", pytrace=False)
    import jsonschema

    crd = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # 9k lines: C if present
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema = _strict(version["schema"]["openAPIV3Schema"])
    checker = jsonschema.FormatChecker()

    @checker.checks("int32")
    def _int32(value: object) -> bool:
        return not isinstance(value, int) or -(2**31) <= value < 2**31

    @checker.checks("int64")
    def _int64(value: object) -> bool:
        return not isinstance(value, int) or -(2**63) <= value < 2**63

    return jsonschema.Draft7Validator(schema, format_checker=checker)


def crd_errors(validator: Any, job: dict[str, Any]) -> list[str]:
    return sorted(f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(job))


_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def webhook_errors(job: dict[str, Any]) -> list[str]:
    """The training operator v1.9 webhook's validatePyTorchJob, restated (pkg/webhooks/pytorch)."""
    errs = []
    name = job["metadata"].get("name", "")
    if len(name) > 63 or not _DNS1035.match(name):
        errs.append("metadata.name: not a DNS-1035 label")
    spec = job["spec"]
    specs = spec.get("pytorchReplicaSpecs")
    if not specs:
        errs.append("spec.pytorchReplicaSpecs: required")
        return errs
    if "elasticPolicy" in spec:
        if "Worker" not in specs:
            errs.append("Worker: must be configured if elastic policy is used")
        if "nProcPerNode" in spec["elasticPolicy"] and "nprocPerNode" in spec:
            errs.append("elasticPolicy.nProcPerNode: must not be used with nprocPerNode")
    for rtype, rspec in specs.items():
        if rtype not in ("Master", "Worker"):
            errs.append(f"{rtype}: unsupported replica type")
        containers = rspec.get("template", {}).get("spec", {}).get("containers") or []
        if not containers:
            errs.append(f"{rtype}: containers must be specified")
        if any(not c.get("image") for c in containers):
            errs.append(f"{rtype}: image required")
        if not any(c.get("name") == "pytorch" for c in containers):
            errs.append(f"{rtype}: must have a container named pytorch")
        if rtype == "Master" and rspec.get("replicas") != 1:
            errs.append("Master.replicas: must be 1")
        if rtype == "Worker" and rspec.get("replicas") is not None and rspec["replicas"] < 1:
            errs.append("Worker.replicas: must be at least 1")
    # Pod and Service names are <job>-<type>-<index>; a Service name is a DNS-1035 label.
    for rtype, rspec in specs.items():
        last = f"{name}-{rtype.lower()}-{rspec.get('replicas', 1) - 1}"
        if len(last) > 63:
            errs.append(f"{rtype}: pod/service name {last!r} longer than 63")
    return errs


def model_round_trip(job: dict[str, Any]) -> Any:
    """Deserialize into kubeflow-training's KubeflowOrgV1PyTorchJob and serialize back."""
    from kubeflow.training import KubeflowOrgV1PyTorchJob
    from kubeflow.training.api_client import ApiClient

    class Response:  # what ApiClient.deserialize reads: a body with .data
        data = json.dumps(job)

    client = ApiClient()
    obj = client.deserialize(Response(), "KubeflowOrgV1PyTorchJob")
    assert isinstance(obj, KubeflowOrgV1PyTorchJob)
    return client.sanitize_for_serialization(obj)


def check_env_contract(job: dict[str, Any]) -> None:
    """Every pod of the job gets an env that never asks torchrun for standalone mode."""
    for rtype, rspec in job["spec"]["pytorchReplicaSpecs"].items():
        for i in {0, rspec["replicas"] - 1}:
            env = pod_env(job, rtype, i)
            assert "PET_STANDALONE" not in env
            assert env["PYTHONUNBUFFERED"] == "1"


# --------------------------------------------------------------------------- corpus


@dataclass
class Case:
    id: str
    task: Any
    version: int
    options: dict[str, Any] = field(default_factory=dict)

    def render(self) -> dict[str, Any]:
        # A task resource STORAGE is dropped with a SkewWarning (the API server refuses it in a pod).
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ei.SkewWarning)
            job = render_pytorchjob(self.task, JobOptions(**self.options), task_type_version=self.version)
        assert all("STORAGE" in str(w.message) for w in caught)
        for rspec in job["spec"]["pytorchReplicaSpecs"].values():
            for c in rspec["template"]["spec"]["containers"]:
                for block in c.get("resources", {}).values():
                    assert "storage" not in block
        return job


def _elastic_variants() -> Iterator[tuple[str, ei.ElasticConfig | None]]:
    yield "none", None
    base = ei.ElasticConfig(rdzv_backend="c10d", min_replicas=1, max_replicas=3, nproc_per_node=4, max_restarts=2)
    yield "flytekit", base
    for policy, label in ((1, "auto"), (2, "cpu"), (3, "gpu")):
        e = copy.deepcopy(base)
        e.nproc_per_node, e.nproc_policy = 0, policy  # type: ignore[assignment]
        yield f"nproc-{label}", e
    e = copy.deepcopy(base)
    e.rdzv_backend = ""
    yield "backend-empty", e
    e = ei.ElasticConfig(rdzv_backend="static", min_replicas=2, max_replicas=2, nproc_per_node=1)
    yield "static", e
    e = copy.deepcopy(base)
    e.rdzv_backend, e.rdzv_host, e.rdzv_port, e.rdzv_id = "etcd-v2", "etcd.infra.svc", 2379, "run-1"
    e.join_timeout.seconds = 900
    e.last_call_timeout.seconds = 2  # whole seconds (elastic.duration.whole_seconds)
    e.close_timeout.seconds = 30
    e.read_timeout.seconds = 60
    e.rdzv_options.add(key="is_host", value="0")
    e.monitor_interval.seconds = 1
    e.shutdown_timeout.seconds = 10
    e.start_method, e.role, e.redirects, e.tee = 2, "trainer", 3, 1  # type: ignore[assignment]
    e.signals_to_handle.extend(["SIGTERM", "SIGUSR1"])
    e.virtual_local_rank = True
    yield "extensions", e
    e = ei.ElasticConfig(min_replicas=1, max_replicas=2**31 - 1, nproc_per_node=2**31 - 1, max_restarts=2**31 - 1)
    yield "int32-max", e


def _replica_variants(count: int) -> Iterator[tuple[str, dict[str, Any]]]:
    yield "replicas", {"workerReplicas": {"replicas": count}}
    yield (
        "deprecated",
        {
            "workerReplicas": {
                "replicas": count,
                "image": "ghcr.io/acme/old:1",
                "restartPolicy": "RESTART_POLICY_ALWAYS",
                "resources": {"limits": [{"name": "CPU", "value": "2"}]},
            }
        },
    )
    yield (
        "common",
        {
            "workerReplicas": {
                "common": {
                    "replicas": count,
                    "image": "ghcr.io/acme/new:2",
                    "restartPolicy": "RESTART_POLICY_ON_FAILURE",
                    "resources": {
                        "requests": [{"name": n, "value": "1"} for n in ("CPU", "GPU", "STORAGE", "EPHEMERAL_STORAGE")],
                        "limits": [{"name": "MEMORY", "value": "4Gi"}],
                    },
                }
            }
        },
    )
    yield (
        "master",
        {
            "workerReplicas": {"common": {"replicas": count}},
            "masterReplicas": {"common": {"replicas": 1, "image": "ghcr.io/acme/master:1"}},
        },
    )


_RUN_POLICIES: list[tuple[str, dict[str, Any] | None]] = [
    ("no-run-policy", None),
    ("run-policy-empty", {}),
    (
        "run-policy-full",
        {
            "cleanPodPolicy": "CLEANPOD_POLICY_ALL",
            "ttlSecondsAfterFinished": 60,
            "activeDeadlineSeconds": 2**31 - 1,
            "backoffLimit": 3,
        },
    ),
]

_OPTIONS: list[tuple[str, dict[str, Any]]] = [
    ("plain", {"name": "job", "image": "ghcr.io/acme/train:1", "entrypoint": ["train.py"]}),
    (
        "meta",
        {
            "mode": "upstream",
            "name": "meta-job",
            "namespace": "ml",
            "image": "ghcr.io/acme/train:1",
            "pod_args": ["--module"],
            "entrypoint": ["acme.train", "--lr", "0.1"],
            "labels": {"team": "ml", "app.kubernetes.io/name": "x"},
            "annotations": {"example.com/a": "free text"},
            "env": {"HF_HOME": "/cache"},
        },
    ),
    (
        "resources",
        {
            "name": "res",
            "image": "ghcr.io/acme/train:1",
            "entrypoint": ["train.py"],
            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": 2 * 1024**3}},
        },
    ),
    (
        "command",
        {
            "mode": "upstream",
            "elastic_worker_restart_policy": "Never",
            "name": "cmd",
            "image": "ghcr.io/acme/train:1",
            "command": ["bash", "-c"],
            "args": ["exit 0"],
        },
    ),
]


def grid() -> list[Case]:
    cases: list[Case] = []
    for (eid, elastic), (oid, opts) in itertools.product(list(_elastic_variants()), _OPTIONS):
        # Legacy shape: workers is max_replicas (or 0 = max) when elastic, else 2.
        for workers in (0, 2) if elastic is None else (0,):
            if elastic is None and workers == 0:
                continue
            t = LegacyTask(workers=workers)
            if elastic is not None:
                t.elastic_config.CopyFrom(elastic)
            cases.append(Case(f"v0-{eid}-{oid}", t, 0, opts))
        count = 2 if elastic is None else elastic.max_replicas
        for (rid, replica), (pid, policy) in itertools.product(list(_replica_variants(count)), _RUN_POLICIES):
            custom = copy.deepcopy(replica)
            if policy is not None:
                custom["runPolicy"] = policy
            if elastic is not None:
                custom["elasticConfig"] = ei.to_custom(LegacyTask(elastic_config=elastic))["elasticConfig"]
            cases.append(Case(f"v1-{eid}-{rid}-{pid}-{oid}", custom, 1, opts))
    return cases


def golden_files() -> list[Path]:
    return sorted(GOLDEN_DIR.glob("*.yaml"))


def load_golden(path: Path) -> tuple[Case, dict[str, Any]]:
    docs = list(yaml.safe_load_all(path.read_text()))
    if len(docs) != 2:
        raise ValueError(f"{path.name}: expected 2 documents (input, expected), got {len(docs)}")
    spec, expected = docs
    unknown = set(spec) ^ GOLDEN_INPUT_KEYS
    if unknown:
        raise ValueError(f"{path.name}: input keys must be exactly {sorted(GOLDEN_INPUT_KEYS)}; differ by {unknown}")
    bad = set(spec["options"]) - RENDER_OPTIONS
    if bad:
        raise ValueError(f"{path.name}: unknown render options {sorted(bad)}")
    return Case(path.stem, spec["custom"], spec["task_type_version"], spec["options"]), expected


GRID = grid()
GOLDEN = golden_files()
#: The number of rendered cases checked against the CRD here (hypothesis adds its examples on top).
EXPECTED_GRID_CASES = 9 * 4 * (1 + 4 * 3)  # elastic variants (incl. none) x options x (1 legacy + 12 kubeflow)
EXPECTED_GOLDEN_CASES = 8


def test_corpus_size() -> None:
    assert len(GRID) == EXPECTED_GRID_CASES == 468
    assert len({c.id for c in GRID}) == len(GRID)
    assert len(GOLDEN) == EXPECTED_GOLDEN_CASES


# --------------------------------------------------------------------------- tests


@pytest.mark.parametrize("case", GRID, ids=lambda c: c.id)
def test_grid_case_matches_the_crd(case: Case, crd_validator: Any) -> None:
    assert crd_errors(crd_validator, case.render()) == []


@pytest.mark.parametrize("case", GRID, ids=lambda c: c.id)
def test_grid_case_passes_webhook_and_models(case: Case) -> None:
    job = case.render()
    assert webhook_errors(job) == []
    assert model_round_trip(job) == job
    check_env_contract(job)


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden(path: Path) -> None:
    case, expected = load_golden(path)
    job = case.render()
    # Whole-object comparison, key order included (render_diff-friendly output).
    assert json.dumps(job, indent=1) == json.dumps(expected, indent=1)
    assert webhook_errors(job) == []
    assert model_round_trip(job) == job
    check_env_contract(job)


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden_matches_the_crd(path: Path, crd_validator: Any) -> None:
    case, _ = load_golden(path)
    assert crd_errors(crd_validator, case.render()) == []


@st.composite
def elastic_tasks(draw: st.DrawFn) -> tuple[Any, int]:
    lo = draw(st.integers(1, 64))
    hi = draw(st.integers(lo, 64))
    e = ei.ElasticConfig(min_replicas=lo, max_replicas=hi, max_restarts=draw(st.integers(0, 2**31 - 1)))
    e.rdzv_backend = draw(st.sampled_from(["", "c10d", "etcd", "etcd-v2"]))
    if draw(st.booleans()):
        e.nproc_per_node = draw(st.integers(1, 2**31 - 1))
    else:
        e.nproc_policy = draw(st.sampled_from([1, 2, 3]))  # type: ignore[assignment]
    e.rdzv_port = draw(st.integers(0, 65535))
    e.rdzv_id = draw(st.text(st.characters(min_codepoint=33, max_codepoint=126, exclude_characters=","), max_size=20))
    keys = draw(st.lists(st.from_regex(r"[a-z_]{1,12}", fullmatch=True), max_size=4, unique=True))
    for key in keys:
        if key not in ("join_timeout", "last_call_timeout", "close_timeout", "read_timeout"):
            e.rdzv_options.add(key=key, value=draw(st.from_regex(r"[A-Za-z0-9=._-]{0,8}", fullmatch=True)))
    if draw(st.booleans()):
        e.join_timeout.seconds = draw(st.integers(1, 10**6))
    version = draw(st.sampled_from([0, 1]))
    if version == 0:
        return LegacyTask(workers=draw(st.sampled_from([0, hi])), elastic_config=e), 0
    t = KubeflowTask(elastic_config=e)
    t.worker_replicas.common.replicas = draw(st.sampled_from([0, hi]))
    t.worker_replicas.common.restart_policy = draw(st.sampled_from([0, 1, 2]))
    return t, 1


HYPOTHESIS_EXAMPLES = 100


@settings(max_examples=HYPOTHESIS_EXAMPLES, derandomize=True, deadline=None)
@given(elastic_tasks())
def test_random_elastic_tasks_are_valid(crd_validator: Any, task_version: tuple[Any, int]) -> None:
    task, version = task_version
    job = render_pytorchjob(
        task, JobOptions(name="prop", image="img:1", entrypoint=["t.py"]), task_type_version=version
    )
    assert crd_errors(crd_validator, job) == []
    assert webhook_errors(job) == []
    assert model_round_trip(job) == job
    e = task.elastic_config
    env = pod_env(job, "Worker", 0)
    assert env["PET_NNODES"] == f"{e.min_replicas}:{e.max_replicas}"
    spec = ei.to_launch_spec(task, env=env)
    assert [d.setting for d in spec.decisions] == ["rdzv_endpoint"]  # nothing but the endpoint comes from the env


def test_the_strict_crd_check_has_teeth(crd_validator: Any) -> None:
    """Objects the API server would reject or silently prune are caught."""
    job = Case(
        "x",
        LegacyTask(workers=2, elastic_config=ei.ElasticConfig(min_replicas=1, max_replicas=2, nproc_per_node=1)),
        0,
        dict(_OPTIONS[0][1]),
    ).render()
    assert crd_errors(crd_validator, job) == []
    bad = copy.deepcopy(job)
    bad["spec"]["nprocPerNode"] = 4  # must be a string
    assert crd_errors(crd_validator, bad) == ["spec.nprocPerNode: 4 is not of type 'string'"]
    bad = copy.deepcopy(job)
    bad["spec"]["elasticPolicy"]["rdzvPorts"] = 1  # a typo the API server would prune
    assert any("rdzvPorts" in e for e in crd_errors(crd_validator, bad))
    bad = copy.deepcopy(job)
    bad["spec"]["elasticPolicy"]["maxReplicas"] = 2**31
    assert crd_errors(crd_validator, bad) == [f"spec.elasticPolicy.maxReplicas: {2**31} is not a 'int32'"]
    bad = copy.deepcopy(job)
    container = bad["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    container["resources"] = {"limits": {"memory": "4 GiB"}}
    assert crd_errors(crd_validator, bad) != []
    bad = copy.deepcopy(job)
    bad["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 0
    bad["metadata"]["name"] = "Job"
    assert webhook_errors(bad) == ["metadata.name: not a DNS-1035 label", "Worker.replicas: must be at least 1"]


def test_models_drop_what_they_do_not_know() -> None:
    """Why the round trip proves something: an unknown field does not survive it."""
    job = GRID[0].render()
    bad = copy.deepcopy(job)
    bad["spec"]["bogus"] = 1
    bad["spec"]["pytorchReplicaSpecs"]["Worker"]["bogus"] = 1
    assert model_round_trip(bad) == job


# --------------------------------------------------------------------------- regeneration


def update_goldens() -> list[Path]:
    written = []
    for path in golden_files():
        case, _ = load_golden(path)
        spec = next(iter(yaml.safe_load_all(path.read_text())))
        job = case.render()
        text = (
            GOLDEN_HEADER
            + yaml.safe_dump(spec, sort_keys=False, allow_unicode=True, width=120)
            + "---\n"
            + yaml.safe_dump(job, sort_keys=False, allow_unicode=True, width=120)
        )
        if path.read_text() != text:
            path.write_text(text)
            written.append(path)
    return written


if __name__ == "__main__":
    if sys.argv[1:] != ["--update-goldens"]:
        print("usage: python tests/test_kubeflow_valid.py --update-goldens", file=sys.stderr)
        raise SystemExit(2)
    for p in update_goldens():
        print(f"updated {p.relative_to(ROOT)}")


# --------------------------------------------------------------------------- issue #9: the CRD is ours


def test_the_crd_is_the_documented_copy() -> None:
    """tests/data/README.md gives the sha256 of the CRD copy; the file must match it byte for byte."""
    import hashlib

    readme = (DATA_DIR / "README.md").read_text()
    (documented,) = re.findall(r"\| sha256 \| `([0-9a-f]{64})` \|", readme)
    (size,) = re.findall(r"\| size \| ([0-9]+) bytes \|", readme)
    data = CRD_DEFAULT.read_bytes()
    assert hashlib.sha256(data).hexdigest() == documented
    assert len(data) == int(size)
    assert "kubeflow/training-operator) v1.9.4" in readme and "Apache-2.0" in readme


def test_a_missing_crd_fails_instead_of_skipping(tmp_path: Path) -> None:
    """ELASTIC_IDL_CRD pointing nowhere is a failure, not a skip (no test silently stops checking)."""
    test = tmp_path / "test_missing.py"
    test.write_text(
        "import test_kubeflow_valid as t\ncrd_validator = t.crd_validator\ndef test_uses_it(crd_validator):\n    pass\n"
    )
    env = {**os.environ, CRD_ENV: str(tmp_path / "absent.yaml"), "PYTHONPATH": str(Path(__file__).parent)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(test)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 error" in proc.stdout and "CRD schema not found" in proc.stdout, proc.stdout
