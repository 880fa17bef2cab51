"""The contract runner: every case under contract/cases/ against both bindings and both sides.

One test function per direction, parametrized by case (contract/README.md says
what each output means):

- ``test_reference``: the reference implementation reproduces every expectation file.
- ``test_pb2_binding`` / ``test_betterproto_binding``: the same case through the
  ``_pb2`` and the betterproto classes gives identical bytes and identical results.
- ``test_betterproto_json``: betterproto's own JSON against the custom dict.
- ``test_sdk_direction``: config -> custom -> bytes (flytekit cases run the
  installed flytekitplugins-kfpytorch), and the upstream-only form.
- ``test_backend_reads_custom_struct`` / ``test_backend_direction``: custom
  (through a protobuf Struct, as the backend gets it) -> task -> PyTorchJob, and
  bytes -> task -> PyTorchJob -> pod env -> LaunchSpec.
- ``test_conformance_entry_point``: the entry point as a subprocess, or any other
  implementation: ``CONFORMANCE_CMD="..." pytest tests/test_contract.py``.

Plus the suite's own checks: files, kinds, every rule and every field covered,
and contract/known_failures.yaml names only real cases and checks.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import warnings
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.struct_pb2 import Struct

import elastic_idl as ei
import elastic_idl.betterproto.plugins.kubeflow.v1 as bp_kubeflow
import elastic_idl.betterproto.plugins.v1 as bp_legacy
from elastic_idl import _conformance as conf
from elastic_idl._backend.pytorchjob import UPSTREAM, UPSTREAM_TOLERATED_RULES
from elastic_idl._errors import CaseError

REPO = Path(__file__).resolve().parent.parent
CONTRACT = REPO / "contract"
CASES_DIR = CONTRACT / "cases"
KNOWN_FAILURES_FILE = CONTRACT / "known_failures.yaml"

CASES: dict[str, conf.Case] = {c.name: c for c in conf.load_cases(CASES_DIR)}
EXPECTED: dict[str, dict[str, Any]] = {name: conf.read_expected(c.path) for name, c in CASES.items()}

BP_CLASSES: dict[int, Any] = {
    0: bp_legacy.DistributedPyTorchTrainingTask,
    1: bp_kubeflow.DistributedPyTorchTrainingTask,
}

#: Checks of this library, in-process (the keys of known_failures.yaml's ``python`` section).
PYTHON_CHECKS = (
    "reference",
    "pb2",
    "betterproto",
    "betterproto_json",
    "sdk",
    "sdk_parity",
    "backend",
    "backend_struct",
)
#: Name of the reference entry point in known_failures.yaml (run as a subprocess).
REFERENCE_IMPL = "python-entry-point"


def _has_task(name: str) -> bool:
    """A case that yields a task: not an error case, and not an SDK's plain python-task (no custom)."""
    case = CASES[name]
    if case.kind == "error":
        return False
    return case.kind not in conf.SDK_KINDS or (EXPECTED[name].get("sdk") or {}).get("custom") is not None


TASK_CASES = sorted(n for n in CASES if _has_task(n))
JSON_CASES = sorted(n for n in TASK_CASES if "error" not in EXPECTED[n].get("custom", {}))
FLYTEKIT_CASES = sorted(n for n, c in CASES.items() if c.kind == "flytekit")
ERROR_CASES = sorted(n for n, c in CASES.items() if c.kind == "error")


def _load_known_failures() -> dict[str, dict[str, dict[str, str]]]:
    if not KNOWN_FAILURES_FILE.is_file():
        return {}
    data = yaml.safe_load(KNOWN_FAILURES_FILE.read_text(encoding="utf-8")) or {}
    data.pop("_reasons", None)  # YAML anchors for shared reasons
    return {
        impl: {case: dict(checks or {}) for case, checks in (entries or {}).items()} for impl, entries in data.items()
    }


KNOWN_FAILURES = _load_known_failures()


def known_failure(request: pytest.FixtureRequest, impl: str, name: str, check: str) -> None:
    """Mark this test as an expected failure when known_failures.yaml lists it (strict: a pass fails)."""
    reason = KNOWN_FAILURES.get(impl, {}).get(name, {}).get(check)
    if reason:
        request.applymarker(pytest.mark.xfail(reason=reason, strict=True))


def expected_outputs(name: str) -> dict[str, Any]:
    return {k: v for k, v in EXPECTED[name].items() if k in conf.OUTPUT_FILES}


@cache
def _flyte2_outputs() -> dict[str, dict[str, Any]]:
    """What Flyte 2's flyteplugins-pytorch emits for every flyte2 case, asked in a subprocess.

    Importing ``flyte`` starts a thread this process would keep (tests/conftest.py, FLYTE2_MODULES),
    so the SDK runs in a process of its own, once for all the cases.
    """
    names = sorted(n for n, c in CASES.items() if c.kind == "flyte2")
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from elastic_idl import _conformance as conf\n"
        "print(json.dumps({n: conf.sdk_output(conf.load_case(Path(sys.argv[1]) / n)) for n in sys.argv[2:]}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(CASES_DIR), *names], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out: dict[str, dict[str, Any]] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


@cache
def sdk_output(name: str) -> dict[str, Any]:
    """What the installed SDK (flytekitplugins-kfpytorch, Flyte 2's flyteplugins-pytorch) emits for a
    flytekit or flyte2 case (at test time, never stored)."""
    if CASES[name].kind == "flyte2":
        return _flyte2_outputs()[name]
    return conf.sdk_output(CASES[name])


def case_input(name: str) -> tuple[str, str]:
    """(data, format) of a case's input: its textproto, or the SDK's custom as JSON."""
    case = CASES[name]
    if case.kind in conf.SDK_KINDS:
        return json.dumps(sdk_output(name)["custom"], sort_keys=True), "json"
    assert case.textproto is not None
    return case.textproto, "textproto"


@cache
def pb2_task(name: str) -> Any:
    data, fmt = case_input(name)
    return ei.decode(data, format=fmt, task_type_version=CASES[name].task_type_version)  # type: ignore[arg-type]


def binary_of(name: str) -> bytes:
    return bytes.fromhex(EXPECTED[name]["binary_hex"])


def via_struct(custom: dict[str, Any]) -> dict[str, Any]:
    """The custom dict as the backend gets it: stored in a protobuf Struct (numbers become doubles)."""
    struct = Struct()
    struct.update(custom)
    out: dict[str, Any] = json_format.MessageToDict(struct)
    return out


# ----------------------------------------------------------------- the suite's own checks


def test_suite_size_and_kinds() -> None:
    kinds = {k: sum(1 for c in CASES.values() if c.kind == k) for k in conf.KINDS}
    assert len(CASES) >= 40, kinds
    assert all(kinds.values()), f"every kind has a case: {kinds}"
    shapes = {c.task_type_version for c in CASES.values() if c.kind in ("valid", "invalid")}
    assert shapes == {0, 1}, "both task shapes have cases"


def test_contract_folder_has_no_strays() -> None:
    assert {p.name for p in CONTRACT.iterdir()} <= {
        "README.md",
        "known_failures.yaml",
        "cases",
        "forward",
        "spelling.json",
        "worst_case.json",
    }
    strays = [p.name for p in CASES_DIR.iterdir() if not p.is_dir()]
    assert not strays, f"files directly under contract/cases/: {strays}"


def folder_problems(case: conf.Case) -> list[str]:
    """What is wrong with a case folder: unknown files, missing or surplus expectations, inconsistent kind."""
    files = {p.name for p in case.path.iterdir()}
    unknown = files - conf.KNOWN_FILES
    if unknown:
        return [f"unknown files (no such input or output): {sorted(unknown)}"]
    exp = conf.read_expected(case.path)
    full = set(conf.OUTPUT_FILES) - {"error"}
    has_task = case.kind not in ("error", *conf.SDK_KINDS) or (
        case.kind in conf.SDK_KINDS and (exp.get("sdk") or {}).get("custom") is not None
    )
    if case.kind == "error":
        required = {"error"}
    elif case.kind in conf.SDK_KINDS:
        required = {"sdk"} | (full if has_task else set())
    else:
        required = full
    if set(exp) != required:
        return [f"expectations {sorted(exp)} but a {case.kind} case needs {sorted(required)}"]
    if not has_task:
        return []
    problems = []
    broken = exp["violations"]
    if case.kind == "valid" and broken:
        problems.append("a valid case breaks no rule")
    if case.kind == "invalid" and not broken:
        problems.append("an invalid case breaks at least one rule")
    rendered = "error" not in exp["pytorchjob"]
    if rendered and broken and case.render.get("mode") == UPSTREAM:
        # The upstream mode renders a task whose only violations are ones Flyte 1.x's plugin renders.
        if not all(v["rule"] in UPSTREAM_TOLERATED_RULES for v in broken):
            problems.append("the upstream mode rendered a task with a violation it does not tolerate")
    elif broken:
        # Never a PyTorchJob, a pod or a LaunchSpec for an invalid task: the same violations instead.
        if exp["pytorchjob"] != {"error": {"type": "ValidationError", "violations": broken}}:
            problems.append("an invalid task has a PyTorchJob")
        if exp["pod_env"] != {} or set(exp["launch_spec"]) != {"none", *case.envs}:
            problems.append("an invalid task has pods")
        for label, spec in exp["launch_spec"].items():
            error = spec.get("error") or {}
            if error.get("type") != "ValidationError" or error["violations"][: len(broken)] != broken:
                problems.append(f"an invalid task has a LaunchSpec ({label})")
    return problems


@pytest.mark.parametrize("name", sorted(CASES))
def test_case_folder(name: str) -> None:
    """Inputs plus exactly the expectation files its kind needs: none missing, none unknown."""
    assert folder_problems(CASES[name]) == []


def test_runner_rejects_broken_folders(tmp_path: Path) -> None:
    """The checks bite: a stray file, a missing expectation, a kind that lies, a folder without case.yaml."""
    import shutil

    def copy(name: str) -> Path:
        target = tmp_path / name
        shutil.copytree(CASES[name].path, target)
        return target

    stray = copy("kf_minimal_elastic")
    (stray / "pytorchjob.yml").write_text("{}")
    assert "unknown files" in folder_problems(conf.load_case(stray))[0]
    missing = copy("kf_unicode")
    (missing / "pod_env.json").unlink()
    assert "needs" in folder_problems(conf.load_case(missing))[0]
    lying = copy("bad_min_zero")
    (lying / "case.yaml").write_text((lying / "case.yaml").read_text().replace("kind: invalid", "kind: valid"))
    assert "a valid case breaks no rule" in folder_problems(conf.load_case(lying))
    (tmp_path / "no_case").mkdir()
    with pytest.raises(CaseError, match=r"no case\.yaml"):
        conf.load_case(tmp_path / "no_case")
    unknown_key = copy("v0_empty")
    (unknown_key / "case.yaml").write_text((unknown_key / "case.yaml").read_text() + "expected: {}\n")
    with pytest.raises(CaseError, match="unknown keys"):
        conf.load_case(unknown_key)


def test_regeneration_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """scripts/regen_contract.py --check finds a stale expectation; a run restores it and removes stray outputs."""
    import importlib.util
    import shutil

    spec = importlib.util.spec_from_file_location("regen_contract", REPO / "scripts" / "regen_contract.py")
    assert spec is not None
    assert spec.loader is not None
    regen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(regen)
    for name in ("kf_flytekit_example", "unsupported_version_2"):
        shutil.copytree(CASES[name].path, tmp_path / name)
    monkeypatch.setattr(regen, "CASES", tmp_path)
    assert regen.main([]) == 0  # whether the repo's copy is fresh is test_reference's business
    assert regen.main(["--check"]) == 0
    target = tmp_path / "kf_flytekit_example" / "binary.hex"
    fresh = target.read_text()
    target.write_text("00\n")
    (tmp_path / "unsupported_version_2" / "custom.json").write_text("{}\n")
    assert regen.main(["--check"]) == 1
    assert target.read_text() == "00\n", "--check writes nothing"
    assert regen.main([]) == 0
    assert target.read_text() == fresh
    assert not (tmp_path / "unsupported_version_2" / "custom.json").exists()
    assert regen.main(["--check"]) == 0


def test_known_failures_name_real_cases_and_checks() -> None:
    outputs = set(conf.OUTPUT_FILES)
    for impl, entries in KNOWN_FAILURES.items():
        allowed = set(PYTHON_CHECKS) if impl == "python" else outputs
        for name, checks in entries.items():
            assert name in CASES, f"known_failures.yaml: {impl}: no case named {name!r}"
            for check, reason in checks.items():
                assert check in allowed, f"known_failures.yaml: {impl}.{name}: unknown check {check!r}"
                assert isinstance(reason, str), f"{impl}.{name}.{check}: the reason is text"
                assert reason.strip(), f"{impl}.{name}.{check}: a reason is required"


def _rules_pinned(exp: dict[str, Any]) -> Iterator[str]:
    for v in exp.get("violations", []):
        yield v["rule"]
    outcomes = [exp.get("pytorchjob") or {}, *(exp.get("launch_spec") or {}).values()]
    for outcome in outcomes:
        for v in (outcome.get("error") or {}).get("violations", []):
            yield v["rule"]


def test_every_rule_has_a_case() -> None:
    pinned = {rule for exp in EXPECTED.values() for rule in _rules_pinned(exp)}
    missing = sorted(set(ei.RULES) - pinned)
    assert not missing, f"rules no case pins: {missing}"
    assert pinned <= set(ei.RULES), f"cases pin unknown rules: {sorted(pinned - set(ei.RULES))}"


def _reachable(desc: Descriptor, seen: frozenset[str] = frozenset()) -> Iterator[tuple[str, str]]:
    for f in desc.fields:
        yield desc.full_name, f.name
        if f.message_type is not None and f.message_type.full_name not in seen:
            yield from _reachable(f.message_type, seen | {desc.full_name})


def _set_fields(msg: Message) -> Iterator[tuple[str, str]]:
    for f, value in msg.ListFields():
        yield msg.DESCRIPTOR.full_name, f.name
        if f.message_type is not None:
            for item in value if _is_repeated(f) else [value]:
                yield from _set_fields(item)


def _is_repeated(f: FieldDescriptor) -> bool:
    flag = getattr(f, "is_repeated", None)
    return bool(flag) if flag is not None else f.label == FieldDescriptor.LABEL_REPEATED


@pytest.mark.parametrize("version", [0, 1])
def test_every_field_is_set_in_some_case(version: int) -> None:
    """Walk the task shape's descriptors: every field (nested ones too) is set by a textproto case of that shape."""
    cls = ei.LegacyTask if version == 0 else ei.KubeflowTask
    covered = {
        pair
        for name in TASK_CASES
        if CASES[name].task_type_version == version and CASES[name].kind not in conf.SDK_KINDS
        for pair in _set_fields(pb2_task(name))
    }
    missing = sorted(set(_reachable(cls.DESCRIPTOR)) - covered)
    assert not missing, f"fields no task_type_version {version} case sets: {missing}"


def test_edge_values_are_covered() -> None:
    """int32 max, zero and empty values, unicode, and ',' / '=' inside rendezvous options all have cases."""
    int32_max = non_ascii = eq_in_value = False
    bad_keys: set[str] = set()
    bad_values: set[str] = set()
    for name in TASK_CASES:
        task = pb2_task(name)
        text = str(task)
        int32_max |= "2147483647" in text
        non_ascii |= any(ord(c) > 127 for c in ei.encode(task, "textproto"))
        if task.HasField("elastic_config"):
            for opt in task.elastic_config.rdzv_options:
                eq_in_value |= "=" in opt.value
                bad_keys |= {c for c in ",=" if c in opt.key} | ({"empty"} if not opt.key else set())
                bad_values |= {c for c in "," if c in opt.value}
    tags = {t for c in CASES.values() for t in c.tags}
    assert int32_max, "a case sets an int32 field to 2147483647"
    assert non_ascii, "a case holds a non-ASCII string"
    assert eq_in_value, "a case has '=' inside an rdzv option value"
    assert bad_keys == {",", "=", "empty"}, "cases have rdzv option keys with ',', with '=' and empty"
    assert bad_values == {","}, "a case has ',' inside an rdzv option value"
    assert {"zero", "empty", "unicode", "int32-max", "upstream-only", "legacy", "flytekit", "flyte2"} <= tags


# ----------------------------------------------------------------- the reference implementation


@pytest.mark.parametrize("name", sorted(n for n in CASES if n in TASK_CASES or n in ERROR_CASES))
def test_reference(name: str, request: pytest.FixtureRequest) -> None:
    """The reference implementation reproduces every expectation file (regeneration is up to date)."""
    known_failure(request, "python", name, "reference")
    case = CASES[name]
    data, fmt = case_input(name)
    got = conf.evaluate(data, format=fmt, task_type_version=case.task_type_version, render=case.render, envs=case.envs)
    assert got == expected_outputs(name)


@pytest.mark.parametrize("name", ERROR_CASES)
def test_error_case(name: str) -> None:
    """An input that is no task of its version: every entry point refuses it with the same typed error."""
    case = CASES[name]
    error = EXPECTED[name]["error"]
    assert error["type"] == "UnsupportedVersionError"
    assert case.textproto is not None
    with pytest.raises(ei.UnsupportedVersionError):
        ei.decode(case.textproto, format="textproto", task_type_version=case.task_type_version)
    with pytest.raises(ei.UnsupportedVersionError):
        ei.from_custom({}, task_type_version=case.task_type_version)
    as_v1 = ei.decode(case.textproto.split("\n", 1)[1], format="textproto", task_type_version=1)
    with pytest.raises(ei.UnsupportedVersionError):
        ei.render_pytorchjob(
            ei.to_custom(as_v1), ei.JobOptions(**case.render), task_type_version=case.task_type_version
        )


# ----------------------------------------------------------------- both bindings


@pytest.mark.parametrize("name", TASK_CASES)
def test_pb2_binding(name: str, request: pytest.FixtureRequest) -> None:
    """_pb2 messages: the input and its binary round-trip, and every output rendered from the message itself."""
    known_failure(request, "python", name, "pb2")
    case = CASES[name]
    task = pb2_task(name)
    binary = binary_of(name)
    assert ei.encode(task, "binary") == binary
    again = ei.decode(binary, format="binary", task_type_version=case.task_type_version)
    assert again == task
    text = ei.encode(task, "textproto")
    assert isinstance(text, str)
    assert text.startswith(f"# proto-message: {task.DESCRIPTOR.full_name}\n")
    assert ei.decode(text, format="textproto", task_type_version=case.task_type_version) == task
    got = conf.outputs_of_task(
        again, task_type_version=case.task_type_version, render=case.render, envs=case.envs, render_from="message"
    )
    assert got == expected_outputs(name)


@pytest.mark.parametrize("name", TASK_CASES)
def test_betterproto_binding(name: str, request: pytest.FixtureRequest) -> None:
    """betterproto parses the expected bytes and writes them back identically; results through as_pb2 are identical."""
    known_failure(request, "python", name, "betterproto")
    case = CASES[name]
    binary = binary_of(name)
    bp = BP_CLASSES[case.task_type_version]().parse(binary)
    assert bytes(bp) == binary
    assert ei.as_pb2(bp) == pb2_task(name)
    got = conf.outputs_of_task(
        bp, task_type_version=case.task_type_version, render=case.render, envs=case.envs, render_from="message"
    )
    assert got == expected_outputs(name)


# betterproto warns on every to_dict() of a replica spec: it touches the deprecated fields 1-4 itself.
@pytest.mark.filterwarnings("ignore:DistributedPyTorchTrainingReplicaSpec.* is deprecated:DeprecationWarning")
@pytest.mark.parametrize("name", TASK_CASES)
def test_betterproto_json(name: str, request: pytest.FixtureRequest) -> None:
    """betterproto's to_dict()/from_dict() against the custom dict (proto3 JSON, what flytekit stores)."""
    known_failure(request, "python", name, "betterproto_json")
    case = CASES[name]
    cls = BP_CLASSES[case.task_type_version]
    bp = cls().parse(binary_of(name))
    custom = EXPECTED[name]["custom"]
    assert bp.to_dict() == custom
    assert bytes(cls().from_dict(custom)) == binary_of(name)


# ----------------------------------------------------------------- the two sides


UPSTREAM_CLASSES: dict[int, str] = {
    0: "flyteidl.plugins.pytorch_pb2",
    1: "flyteidl.plugins.kubeflow.pytorch_pb2",
}


@pytest.mark.parametrize("name", TASK_CASES)
def test_sdk_direction(name: str, request: pytest.FixtureRequest) -> None:
    """config -> custom -> bytes; and the upstream-only custom, read by the real flyteidl, or a SkewError."""
    known_failure(request, "python", name, "sdk")
    import importlib

    case = CASES[name]
    exp = EXPECTED[name]
    if case.kind in conf.SDK_KINDS:
        assert sdk_output(name) == exp["sdk"], f"{case.kind}'s serialization drifted from sdk.json"
    task = pb2_task(name)
    if "error" in exp["custom"]:  # no JSON form: refused with a typed error naming the field
        with pytest.raises(ei.EncodeError) as refused:
            ei.to_custom(task)
        assert refused.value.field == exp["custom"]["error"]["field"]
        return
    custom = ei.to_custom(task)
    assert custom == exp["custom"]
    back = ei.from_custom(custom, task_type_version=case.task_type_version)
    assert ei.encode(back, "binary").hex() == exp["binary_hex"]
    json_text = ei.encode(task, "json")
    assert ei.decode(json_text, format="json", task_type_version=case.task_type_version) == task

    lost = ei.extension_fields(task)
    if lost:
        with pytest.raises(ei.SkewError) as info:
            ei.to_custom(task, upstream=True)
        assert set(info.value.fields) == set(lost)
        return
    assert ei.to_custom(task, upstream=True) == custom
    upstream = importlib.import_module(UPSTREAM_CLASSES[case.task_type_version]).DistributedPyTorchTrainingTask()
    json_format.ParseDict(custom, upstream)  # strict: unknown fields rejected
    assert upstream.SerializeToString(deterministic=True).hex() == exp["binary_hex"]
    assert json_format.MessageToDict(upstream) == custom


def render_case(task: Any, name: str) -> Any:
    """The case's job (or error), rendered as the backend does; its SkewWarnings must be the case's ``skew``."""
    case, exp = CASES[name], EXPECTED[name]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ei.SkewWarning)
        try:
            job = ei.render_pytorchjob(task, ei.JobOptions(**case.render), task_type_version=case.task_type_version)
        except ei.ElasticIdlError as exc:
            return {"error": conf.error_of(exc)}
    assert conf.skew_fields(caught) == exp["skew"]
    return job


@pytest.mark.parametrize("name", JSON_CASES)
def test_backend_reads_custom_struct(name: str, request: pytest.FixtureRequest) -> None:
    """The backend's real input: the custom dict stored in a protobuf Struct (numbers become doubles)."""
    known_failure(request, "python", name, "backend_struct")
    case = CASES[name]
    exp = EXPECTED[name]
    custom = via_struct(exp["custom"])
    assert render_case(custom, name) == exp["pytorchjob"]
    task = ei.from_custom(custom, task_type_version=case.task_type_version)
    assert ei.encode(task, "binary").hex() == exp["binary_hex"]


@pytest.mark.parametrize("name", TASK_CASES)
def test_backend_direction(name: str, request: pytest.FixtureRequest) -> None:
    """bytes -> task -> PyTorchJob -> pod env of replica 0 and 1 -> LaunchSpec under each env."""
    known_failure(request, "python", name, "backend")
    case = CASES[name]
    exp = EXPECTED[name]

    task = ei.decode(binary_of(name), format="binary", task_type_version=case.task_type_version)
    assert render_case(task, name) == exp["pytorchjob"]
    job = exp["pytorchjob"]
    for pod, env in exp["pod_env"].items():
        rtype, index = pod.split("-")
        assert ei.pod_env(job, rtype, int(index)) == env
    envs = {"none": {}, **exp["pod_env"], **case.envs}
    assert set(envs) == set(exp["launch_spec"])
    for label, env in envs.items():
        try:
            got = ei.to_launch_spec(task, env=env).as_dict()
        except ei.ValidationError as exc:
            got = {"error": conf.error_of(exc)}
        assert got == exp["launch_spec"][label], label


def _strip_extensions(custom: dict[str, Any]) -> dict[str, Any]:
    """The custom dict without elastic-idl's extension fields (ElasticConfig fields numbered >= 100)."""
    ext = {f.json_name for f in ei.ElasticConfig.DESCRIPTOR.fields if f.number >= 100}
    out = dict(custom)
    if "elasticConfig" in out:
        out["elasticConfig"] = {k: v for k, v in out["elasticConfig"].items() if k not in ext}
    return out


@pytest.mark.parametrize("name", sorted(n for n in FLYTEKIT_CASES if CASES[n].flytekit["config"] == "Elastic"))  # type: ignore[index]
def test_sdk_config_parity(name: str, request: pytest.FixtureRequest) -> None:
    """Our SDK config given flytekit's Elastic(...) settings: flytekit's custom once our extensions are removed,
    or the violations the contract pins for flytekit's payload (flytekit accepts what we refuse)."""
    known_failure(request, "python", name, "sdk_parity")
    case = CASES[name]
    assert case.flytekit is not None
    exp = EXPECTED[name]
    kwargs = dict(case.flytekit.get("kwargs") or {})
    if exp.get("violations"):
        with pytest.raises(ei.ValidationError) as info:
            ei.Elastic(**kwargs)
        # The task's violations, each on the argument that set its field, the field named in the message.
        got = info.value.violations
        assert [v.rule for v in got] == [e["rule"] for e in exp["violations"]]
        assert all(v.message.endswith(f"({e['field']})") for v, e in zip(got, exp["violations"], strict=True))
        assert {v.field for v in got} <= set(kwargs)
        return
    ours = ei.Elastic(**kwargs).to_template()
    assert (ours.task_type, ours.task_type_version) == (exp["sdk"]["task_type"], exp["sdk"]["task_type_version"])
    if exp["sdk"]["custom"] is None:
        assert ours.custom is None
        return
    assert ours.custom is not None
    assert _strip_extensions(ours.custom) == exp["sdk"]["custom"]
    assert _strip_extensions(ours.custom) == exp["custom"]


LAUNCH_CASES = sorted(n for n in TASK_CASES if any("error" not in d for d in EXPECTED[n]["launch_spec"].values()))


@pytest.mark.parametrize("name", LAUNCH_CASES)
def test_launch_config(name: str) -> None:
    """Every pinned LaunchSpec becomes a torch LaunchConfig (ei.to_launch_config) with exactly those fields."""
    # elastic_idl._launch.agent first: it silences torch's import-time NumPy warning before torch loads.
    from elastic_idl._launch.agent import resolve_nproc
    from elastic_idl._task.names import DEFAULT_SHUTDOWN_TIMEOUT_S

    torch = sys.modules["torch"]
    Std = sys.modules["torch.distributed.elastic.multiprocessing.api"].Std

    case = CASES[name]
    exp = EXPECTED[name]
    task = ei.decode(binary_of(name), format="binary", task_type_version=case.task_type_version)
    envs = {"none": {}, **exp["pod_env"], **case.envs}
    specs = {label: d for label, d in exp["launch_spec"].items() if "error" not in d}
    for label, d in specs.items():
        if d["nproc_per_node"] == "gpu" and not torch.cuda.is_available():
            with pytest.raises(ValueError, match="CUDA"):
                ei.to_launch_config(task, env=envs[label])
            continue
        lc = ei.to_launch_config(task, env=envs[label])
        nproc = d["nproc_per_node"]
        if not isinstance(nproc, int):  # a policy, resolved on this machine as torchrun does
            nproc = resolve_nproc(ei.to_launch_spec(task, env=envs[label]))
        assert lc.nproc_per_node == nproc
        for key in ("min_nodes", "max_nodes", "run_id", "role", "rdzv_endpoint", "rdzv_backend", "max_restarts"):
            assert getattr(lc, key) == d[key], (label, key)
        for key in ("monitor_interval", "start_method", "local_addr", "signals_to_handle", "virtual_local_rank"):
            assert getattr(lc, key) == d[key], (label, key)
        assert lc.shutdown_timeout == (d["shutdown_timeout"] or DEFAULT_SHUTDOWN_TIMEOUT_S)
        # Whole seconds (torch int()s them; a fraction is invalid), plus torch's own "timeout" default.
        assert lc.rdzv_configs == {"timeout": 900, **d["rdzv_configs"]}, label
        logs = lc.logs_specs
        assert logs._redirects == Std.from_str(d["redirects"])  # type: ignore[attr-defined]
        assert logs._tee == Std.from_str(d["tee"])  # type: ignore[attr-defined]
        assert logs._local_ranks_filter == (set(d["local_ranks_filter"]) or None)  # type: ignore[attr-defined]
        numa = lc.numa_options.affinity_mode.value if lc.numa_options is not None else None
        assert numa == d["numa_binding"]


# ----------------------------------------------------------------- the entry point, or another implementation


def _conformance_command() -> tuple[list[str], str]:
    cmd = os.environ.get("CONFORMANCE_CMD")
    if cmd:
        return shlex.split(cmd), os.environ.get("CONFORMANCE_NAME", "external")
    return [sys.executable, "-m", "elastic_idl.conformance"], REFERENCE_IMPL


def _requests(input_format: str) -> list[dict[str, Any]]:
    out = []
    for name, case in sorted(CASES.items()):
        if name not in TASK_CASES and name not in ERROR_CASES:
            continue
        if case.kind in conf.SDK_KINDS:
            custom = json.dumps(sdk_output(name)["custom"], sort_keys=True)
            if input_format == "binary_hex":
                out.append(conf.request_for(case, input_format="binary_hex"))
            else:
                out.append(conf.request_for(case, input_format="json", data=custom))
        elif input_format == "textproto":
            out.append(conf.request_for(case))
        elif input_format == "json" and name in JSON_CASES:
            out.append(conf.request_for(case, input_format="json"))
        elif input_format == "binary_hex" and name in TASK_CASES:
            out.append(conf.request_for(case, input_format="binary_hex"))
    return out


def conformance_problems(cmd: list[str], impl: str, input_format: str) -> tuple[dict[str, Any], list[str]]:
    """Run an entry point on every case in one input format: its response, and every mismatch as text.

    ``impl`` picks the section of known_failures.yaml that applies.
    """
    entries = _requests(input_format)
    request = {"version": conf.CONTRACT_VERSION, "cases": entries}
    proc = subprocess.run(
        cmd, input=json.dumps(request), capture_output=True, text=True, timeout=300, cwd=REPO, check=False
    )
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}: {proc.stderr[-2000:]}"
    response: dict[str, Any] = json.loads(proc.stdout)
    assert response["version"] == conf.CONTRACT_VERSION
    produced = set(response["outputs"])
    assert produced, "the response lists the outputs it produces"
    assert produced <= set(conf.OUTPUT_FILES), f"unknown outputs {sorted(produced)}"
    results = response["results"]
    assert set(results) == {e["name"] for e in entries}, "one result per case"
    known = KNOWN_FAILURES.get(impl, {})
    problems = []
    for name in sorted(results):
        got, exp = results[name], expected_outputs(name)
        for output in sorted(produced & set(exp)):
            ok = got.get(output) == exp[output]
            if output in known.get(name, {}):
                if ok:
                    problems.append(f"{name}.{output}: listed in known_failures.yaml but now passes")
            elif not ok:
                problems.append(f"{name}.{output}: expected {exp[output]!r}, got {got.get(output)!r}"[:600])
    return response, problems


@pytest.mark.parametrize("input_format", ["textproto", "json", "binary_hex"])
def test_conformance_entry_point(input_format: str) -> None:
    """Run the entry point (or CONFORMANCE_CMD) as a subprocess on every case; compare each output it produces."""
    cmd, impl = _conformance_command()
    _, problems = conformance_problems(cmd, impl, input_format)
    assert not problems, f"{impl} ({input_format}): {len(problems)} mismatches:\n" + "\n".join(problems)


def test_entry_point_case_mode_and_usage() -> None:
    """--case DIR builds the request from folders; a bad request is exit 2 with a message, not a traceback."""
    name = "kf_flytekit_example"
    proc = subprocess.run(
        [sys.executable, "-m", "elastic_idl.conformance", "--case", str(CASES[name].path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["results"][name] == expected_outputs(name)
    bad = subprocess.run(
        [sys.executable, "-m", "elastic_idl.conformance"],
        input='{"version": 99}',
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2
    assert "bad request" in bad.stderr
    assert "Traceback" not in bad.stderr


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"[" * 100_000 + b"]" * 100_000,  # deeper than Python's recursion limit
        b'{"version": 1, "cases": [], "x": "\xff"}',  # not UTF-8 (the C locale's stdin would not notice)
        b'{"version": 1, "cases": [{"name": "c", "input": {"format": "json", "data": "{}"}, '
        b'"task_type_version": 1, "envs": [1]}]}',  # envs not a mapping: was an AttributeError traceback
        b'{"version": 1, "cases": [{"name": "c", "input": {"format": "json", "data": "{}"}, '
        b'"task_type_version": 1, "render": {"name": "j", "image": "i", "bogus": 1}}]}',  # no JobOptions field
    ],
    ids=["deep", "not-utf8", "envs-not-a-mapping", "render-option-unknown"],
)
def test_entry_point_refuses_deep_or_non_utf8_requests(request_bytes: bytes) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "elastic_idl.conformance"],
        input=request_bytes,
        capture_output=True,
        timeout=60,
        env={**os.environ, "LC_ALL": "C"},
        check=False,
    )
    assert proc.returncode == 2, proc.stdout[:200]
    assert proc.stderr.startswith(b"conformance: bad request: ")
    assert b"Traceback" not in proc.stderr
