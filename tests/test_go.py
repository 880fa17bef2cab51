"""The Go backend (go/): the contract suite through its conformance command, and its generated code.

The conformance command is built once per session (``go build`` into a temporary
directory) and run through the runner's own mechanism, ``CONFORMANCE_CMD`` with
``CONFORMANCE_NAME=go`` (``tests/test_contract.py``): every case, each input
format, every output the Go backend declares. Its section of
``contract/known_failures.yaml`` is empty, so any disagreement with the Python
reference fails. A copy of the module with one rule broken shows that the suite
notices.

Without a Go toolchain the Go tests skip (``make test`` installs one as root or
says once that the Go checks did not run); under ``CI=true`` they fail instead.
The checks of generated files need no Go toolchain and always run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.internal import api_implementation

import elastic_idl as ei
import test_contract as tc

REPO = Path(__file__).resolve().parent.parent
GO_DIR = REPO / "go"
GEN_GO = GO_DIR / "gen"
GO_ENV = {"GOFLAGS": "-p=1"}
#: Outputs the Go backend must declare (launch_spec is the Python runtime's).
GO_OUTPUTS = {"binary_hex", "custom", "violations", "pytorchjob", "pod_env", "skew", "targets"}
#: Its name in known_failures.yaml.
GO_IMPL = "go"
#: Names a propeller plugin already imports; the generated Go packages may not take them.
PROPELLER_IMPORT_NAMES = {"kubeflowv1", "plugins", "kfplugins", "core", "flyteIdlCore", "pluginsCore"}


def _pinned_protoc_gen_go() -> str:
    m = re.search(r"^PROTOC_GEN_GO_VERSION=(\S+)$", (REPO / "scripts" / "gen.sh").read_text(), re.M)
    assert m, "scripts/gen.sh pins PROTOC_GEN_GO_VERSION"
    return m.group(1)


def _go_env() -> dict[str, str]:
    return {**os.environ, **GO_ENV}


@pytest.fixture(scope="session")
def go_bin() -> str:
    """The go command, or a skip (a failure under CI=true, where the Go checks must run)."""
    go = shutil.which("go")
    ready = go is not None and os.environ.get("ELASTIC_IDL_GO") != "skip"
    if ready:
        probe = subprocess.run(
            [str(go), "list", "./..."], cwd=GO_DIR, env=_go_env(), capture_output=True, text=True, check=False
        )
        ready = probe.returncode == 0
    if not ready or go is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true: the Go checks must run, but the Go toolchain is missing (scripts/go_toolchain.sh)")
        pytest.skip("no Go toolchain (scripts/go_toolchain.sh ensure installs it)")
    return go


def _build(go: str, module: Path, out: Path) -> Path:
    binary = out / "elastic-conformance"
    proc = subprocess.run(
        [go, "build", "-o", str(binary), "./cmd/elastic-conformance"],
        cwd=module,
        env=_go_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return binary


@pytest.fixture(scope="session")
def go_conformance(go_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Go conformance command, built once per session."""
    return _build(go_bin, GO_DIR, tmp_path_factory.mktemp("go-conformance"))


def _run_as_conformance_cmd(
    binary: Path, input_format: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[dict[str, object], list[str]]:
    """The runner's own path: CONFORMANCE_CMD / CONFORMANCE_NAME, then its comparison."""
    monkeypatch.setenv("CONFORMANCE_CMD", str(binary))
    monkeypatch.setenv("CONFORMANCE_NAME", GO_IMPL)
    cmd, impl = tc._conformance_command()
    assert (cmd, impl) == ([str(binary)], GO_IMPL)
    return tc.conformance_problems(cmd, impl, input_format)


# ----------------------------------------------------------------- the contract, on the Go backend


@pytest.mark.parametrize("input_format", ["textproto", "json", "binary_hex"])
def test_go_backend_passes_the_contract(
    go_conformance: Path, input_format: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    response, problems = _run_as_conformance_cmd(go_conformance, input_format, monkeypatch)
    outputs = set(response["outputs"])  # type: ignore[arg-type]
    assert GO_OUTPUTS <= outputs, f"the Go backend declares too few outputs: {sorted(GO_OUTPUTS - outputs)} missing"
    assert not problems, f"go ({input_format}): {len(problems)} mismatches:\n" + "\n".join(problems)


def test_go_known_failures_stay_empty() -> None:
    """A disagreement between Go and Python is a failing test, never an entry."""
    assert GO_IMPL in tc.KNOWN_FAILURES, "known_failures.yaml has a go section"
    assert tc.KNOWN_FAILURES[GO_IMPL] == {}


def test_a_broken_go_rule_fails_the_suite(go_bin: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy of the module whose min <= max rule never fires: the suite names every case that pins it."""
    module = tmp_path / "go"
    shutil.copytree(GO_DIR, module)
    validate = module / "elasticidl" / "validate.go"
    rule = "if e.GetMinReplicas() > e.GetMaxReplicas() {"
    text = validate.read_text()
    assert text.count(rule) == 1, "the rule this test breaks moved: update the test"
    validate.write_text(text.replace(rule, "if false && e.GetMinReplicas() > e.GetMaxReplicas() {"))
    binary = _build(go_bin, module, tmp_path)
    _, problems = _run_as_conformance_cmd(binary, "textproto", monkeypatch)
    pinning = {
        name
        for name in tc.TASK_CASES
        if any(v["rule"] == "elastic.min_le_max" for v in tc.EXPECTED[name].get("violations", []))
    }
    assert len(pinning) >= 2
    broken = {p.split(":", 1)[0] for p in problems}
    assert {f"{name}.violations" for name in pinning} <= broken, problems
    assert {b.split(".", 1)[0] for b in broken} == pinning, problems


def test_go_conformance_usage_and_bad_request(go_conformance: Path) -> None:
    ok = subprocess.run([str(go_conformance), "--help"], capture_output=True, text=True, timeout=60, check=False)
    assert ok.returncode == 0 and "usage" in ok.stdout
    for request in ('{"version": 99}', "not json", "[]", '{"version": 1, "cases": [{"name": "x"}]}'):
        bad = subprocess.run(
            [str(go_conformance)], input=request, capture_output=True, text=True, timeout=60, check=False
        )
        assert bad.returncode == 2, request
        assert bad.stderr.startswith("conformance: bad request: "), bad.stderr
        assert "panic" not in bad.stderr
    # As the reference's entry point (test_contract.py): too deep for Python's parser, or not UTF-8.
    for raw in (b"[" * 100_000 + b"]" * 100_000, b'{"version": 1, "cases": [], "x": "\xff"}'):
        bad_bytes = subprocess.run([str(go_conformance)], input=raw, capture_output=True, timeout=60, check=False)
        assert bad_bytes.returncode == 2, raw[:50]
        assert bad_bytes.stderr.startswith(b"conformance: bad request: "), bad_bytes.stderr


# ----------------------------------------------------------------- generated Go (no toolchain needed)


def test_go_tables_are_fresh() -> None:
    """go/elasticidl/tables_gen.go is what scripts/gen_go_tables.py writes from the Python reference now."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_go_tables.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def test_go_tables_hold_every_rule() -> None:
    text = (GO_DIR / "elasticidl" / "tables_gen.go").read_text()
    go_rules = re.findall(r'^\t\{"([a-z_.]+)", ', text[text.index("var rules") :], re.M)
    assert go_rules[: len(ei.RULES)] == list(ei.RULES)


def test_generated_go_headers_and_packages() -> None:
    """Every generated file names the pinned protoc-gen-go; no package name clashes with a propeller import."""
    pin = _pinned_protoc_gen_go()
    files = sorted(GEN_GO.rglob("*.pb.go"))
    protos = sorted((REPO / "protos").rglob("*.proto"))
    assert len(files) == len(protos)
    module = re.search(r"^module (\S+)$", (GO_DIR / "go.mod").read_text(), re.M)
    assert module
    for f in files:
        text = f.read_text()
        assert text.startswith("// Code generated by protoc-gen-go. DO NOT EDIT.\n"), f
        assert f"// \tprotoc-gen-go {pin}\n" in text, f"{f}: not generated by protoc-gen-go {pin}"
        package = re.search(r"^package (\w+)$", text, re.M)
        assert package and package.group(1).startswith("eidl"), f
        assert package.group(1) not in PROPELLER_IMPORT_NAMES
        for imported in re.findall(r'"(github\.com/[^"]+)"', text):
            assert imported.startswith(module.group(1) + "/gen/"), imported


def test_protoc_gen_go_pin_is_one_version() -> None:
    """gen.sh's pin, the generator in go/tools/go.mod and the runtime floor in go/go.mod are one version.

    Code from protoc-gen-go vX needs google.golang.org/protobuf >= vX at run time, so the
    core module requires exactly the generator's version (a consumer's build may pick a newer one).
    """
    pin = _pinned_protoc_gen_go()
    for mod in (GO_DIR / "go.mod", GO_DIR / "tools" / "go.mod"):
        required = re.search(r"google\.golang\.org/protobuf (v\S+)", mod.read_text())
        assert required, mod
        assert required.group(1) == pin, f"{mod}: google.golang.org/protobuf {required.group(1)} != gen.sh's {pin}"
    assert "google.golang.org/protobuf/cmd/protoc-gen-go" in (GO_DIR / "tools" / "go.mod").read_text()


# ----------------------------------------------------------------- bad input: Go and Python agree

#: Mutations per input format in the differential test (fixed seed: the same inputs every run).
MUTATIONS = 400
#: Values a JSON leaf is replaced with: every wrong type, integer edges, numbers as text.
JSON_SUBSTITUTES: list[object] = [
    "x",
    "",
    "1",
    " 2_0 ",
    "1e3",
    "\ud800",
    1.5,
    2.0,
    1e300,
    True,
    None,
    [],
    [1],
    {},
    {"a": 1},
    2**31,
    -(2**31) - 1,
    -1,
    0,
    "NPROC_POLICY_AUTO",
    "auto",  # short enum names (issue 29 item 9), in other cases, and one that is not ASCII
    "On-Failure",
    "\u017fpawn",
    7,
    "5s",
    "5s\n",
    "-1.5s",
    "315576000001s",
]


def _json_leaves(value: object, path: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    out = [path] if path else []
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(_json_leaves(v, (*path, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_json_leaves(v, (*path, i)))
    return out


def _json_replace(value: Any, path: tuple[object, ...], new: object) -> Any:
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = _json_replace(copy[path[0]], path[1:], new)  # type: ignore[index,call-overload]
    return copy


#: Edges of the wire format where upb (the reference's parser) and protobuf-go differ, on the kubeflow shape:
#: tag and length sizes, the 10th byte of a varint, unknown fields with odd tags, groups and their depth.
WIRE_EDGES = {
    "tag_5_bytes": "a280808000" + "00",
    "tag_6_bytes": "a28080808000" + "00",
    "tag_over_32_bits": "a28080807f" + "00",
    "length_5_bytes": "22" + "8080808000",
    "length_6_bytes": "22" + "808080808000",
    "varint_10th_byte_junk_known": "220b10" + "ff" * 9 + "7f",
    "varint_10th_byte_junk_unknown": "28" + "ff" * 9 + "7f" + "220610011802200a",
    "varint_11_bytes": "28" + "ff" * 10 + "01",
    "packed_junk": "220e92070b" + "ff" * 9 + "7f01",
    "unknown_long_tag": "2206100118012001" + "ea0003616263",
    "unknown_in_nested": "220a100118012001" + "f8e80601" + "2a03612062",
    "unknown_group": "2b08012c" + "220610011801200a",
    "unknown_group_junk": "2b08" + "ff" * 9 + "7f2c",
    "groups_100": "2b" * 100 + "2c" * 100,
    "groups_101": "2b" * 101 + "2c" * 101,
    "groups_99_in_message": "22c601" + "2b" * 99 + "2c" * 99,
    "groups_100_in_message": "22c801" + "2b" * 100 + "2c" * 100,
    "end_group_alone": "2c",
    "group_mismatch": "2b34",
    "field_number_0": "0001",
    "wire_type_6": "0e",
    "duration_unknown": "2208b206050805f80101",
}


#: Textproto bodies (kubeflow shape) at the edges of the two text parsers: separators, number forms,
#: string escapes, duplicates, truncation, bad UTF-8, where each parser reports its errors.
TEXTPROTO_EDGES = [
    'elastic_config { rdzv_backend: "a\\xff" min_replicas: 1 }',
    'elastic_config { rdzv_backend: "a\\xff" "b" min_replicas: 1 }',
    'elastic_config { rdzv_backend: "a\\xff"\n\n   # c\n  max_replicas: 1 }',
    'elastic_config { rdzv_backend: "a\\xff" }',
    'elastic_config { rdzv_backend: "a\\xff"',
    "elastic_config { min_replicas: 1 min_replicas: 2 }",
    "elastic_config { min_replicas: 1 }\n# trailing: {",
    "elastic_config { min_replicas: 1 \n# trailing: {",
    "elastic_config { min_replicas: 1 \n\n",
    'elastic_config { rdzv_options { key: "a" }',
    'elastic_config { rdzv_options: [{ key: "a" }',
    "elastic_config { min_replicas: ",
    "elastic_config { min_replicas",
    "elastic_config { min_replicas: 1, max_replicas: 2; }",
    "elastic_config < min_replicas: 1 >",
    "elastic_config { min_replicas: 1 } worker_replicas: {}",
    "elastic_config { local_ranks_filter: [1, 2] }",
    "elastic_config { monitor_interval { seconds: 1 nanos: 1000000000 } }",
    "elastic_config { min_replicas: 0x10 max_replicas: 010 }",
    "elastic_config { virtual_local_rank: t }",
    "elastic_config { virtual_local_rank: True }",
    "elastic_config { nproc_policy: 2 }",
    "elastic_config { nproc_policy: 99 }",
    "elastic_config { nproc_policy: -1 }",
    'elastic_config { role: "é\\u00e9\\U0001F600" }',
    "elastic_config { role: 'a' \"b\" }",
    "elastic_config { min_replicas: -0 }",
    "elastic_config { min_replicas: 1.0 }",
    "elastic_config { min_replicas: 1e2 }",
    "elastic_config { min_replicas: - 5 }",
    "elastic_config { min_replicas: 5f }",
    'elastic_config { rdzv_id: "\\x00" }',
    'elastic_config { rdzv_id: "\\400" }',
    "[elastic_config] {}",
    'elastic_config { role: "a\\q" }',
    "elastic_config { min_replicas: 2147483648 }",
    "elastic_config { min_replicas: -2147483649 }",
    "elastic_config {} elastic_config {}",
    "worker_replicas { common { replicas: 1 } common { replicas: 2 } }",
    "elastic_config { min_replicas: 1 } foo: 1",
    "elastic_config { nproc_policy: NPROC_POLICY_X }",
    'elastic_config { min_replicas: "1" }',
    "elastic_config { rdzv_id: 5 }",
    'elastic_config { monitor_interval: "5s" }',
    "elastic_config { virtual_local_rank: 2 }",
    "elastic_config { min_replicas: 1 max_replicas: 2 } }",
    "elastic_config { min_replicas: 01 }",
    "elastic_config { min_replicas: 0x }",
    "elastic_config { min_replicas: -0x1 }",
    "elastic_config { min_replicas: 0xffffffff }",
    "elastic_config { min_replicas: 1 } elastic_config: { max_replicas: 1 }",
    'elastic_config { rdzv_options [ { key: "a" } ] }',
    'elastic_config { signals_to_handle: ["A", "B"] }',
    'elastic_config { role: "\\u00" }',
    'elastic_config { role: "\\ud800" }',
    'elastic_config { role: "\\U00110000" }',
    'elastic_config { role: "\\a\\b\\f\\n\\r\\t\\v\\\\\\\'\\"\\?" }',
    'elastic_config { role: "a\nb" }',
    "workers: 1",
    "elastic_config { min_replicas: 1 # comment\n max_replicas: 2 }",
    "elastic_config { min_replicas:1max_replicas:2 }",
    "elastic_config { min_replicas: inf }",
    "elastic_config { virtual_local_rank: FALSE }",
    "elastic_config { virtual_local_rank: f }",
    "elastic_config { nproc_policy: NPROC_POLICY_AUTO, }",
    "elastic_config { rdzv_options {} rdzv_options {} }",
    'elastic_config { role: "\\8\\e\\q\\?" }',
    'elastic_config { role: "\\ud83d\\ude00" }',
    'elastic_config { role: "a\\\\q" }',
    "elastic_config { role: '\\q\"' }",
    '# a "\\q comment\nelastic_config { role: "ok" }',
    'elastic_config { role: "\\xff\\q" }\n',
]
#: Edits of a case's textproto that break it (or not) in different ways.
TEXTPROTO_EDITS = [
    ("min_replicas: 1", "min_replicas: x"),
    ("min_replicas", "min_replica"),
    ("}", "}}"),
    ("}", ""),
    ("{", ""),
    (":", ""),
    ("max_replicas: ", "max_replicas: 1.5 #"),
    ("c10d", "c10d\\xff"),
    ("NPROC_POLICY_AUTO", "NPROC_POLICY_X"),
    ("replicas: ", "replicas: -"),
    ("\n", " "),
]


#: Render options that the renderer refuses (or takes), each as one edit of the case's options.
RENDER_EDGES: list[dict[str, object]] = [
    {"name": ""},
    {"name": "1job"},
    {"name": "j" * 55},
    {"name": 5},
    {"namespace": "Default"},
    {"namespace": None},
    {"namespace": ""},
    {"image": "a b"},
    {"image": "a\u3000b"},
    {"entrypoint": None},
    {"entrypoint": "t.py"},
    {"entrypoint": ["t.py", 1]},
    {"entrypoint": [""]},
    {"entrypoint": ["-m"]},
    {"entrypoint": ["-m", "pkg.train"]},
    {"entrypoint": ["--epochs", "3"]},
    {"entrypoint": ["-m"], "command": ["sh"]},
    {"args": ["x"]},
    {"args": []},
    {"command": []},
    {"entrypoint": None, "args": ["x"], "pod_args": ["--module"]},
    {"pod_args": ["--"]},
    {"labels": {"-a": "b"}},
    {"labels": {"A_B/c": "b"}},
    {"labels": {"": "b"}},
    {"labels": {"a": "b c"}},
    {"labels": {"a": 1}},
    {"labels": {"app\n": "x"}},
    {"annotations": {"a b": "x"}},
    {"labels": {"z": "-", "b": "-"}},
    {"resources": {"limits": {"cpu": ""}}},
    {"resources": {"requests": {"cpu": True}}},
    {"resources": {"requests": {"cpu": 2.0}}},
    {"resources": {"requests": {"cpu": -0}, "limits": {"memory": "1Gi"}}},
    {"resources": {"gpus": {}}},
    {"env": {"PET_NNODES": "1"}},
    {"env": {"1X": "1"}},
    {"env": []},
    {"env": {"A": "1", "B": 2}},
    {"resources": {"requests": {"cpu": "1e3"}, "limits": {"cpu": "1k"}}},
    {"resources": {"requests": {"cpu": 0.5, "memory": 1e-7}}},
    {"resources": {"requests": {"cpu": float("nan")}}},
    {"resources": {"requests": {"cpu": -0.0}}},
    {"resources": {"requests": {"cpu ": "1"}}},
    {"resources": {"limits": {"example.com/fpga": "500m"}}},
    {"resources": {"requests": {"hugepages-2Mi": "2Mi"}, "limits": {"hugepages-2Mi": "4Mi"}}},
    {"resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1000m"}}},
    {"resources": {"requests": {"memory": "1e2147483648", "cpu": "x"}}},
    {"resources": {"requests": {"memory": "8Ei"}, "limits": {"memory": "9Ei"}}},
]

#: Whole JSON inputs (kubeflow shape) at the edges of the reference's JSON reader: what is no task,
#: keys given twice (one name or both), nesting, integer digits, the size cap, encodings, long keys.
JSON_EDGES = [
    "null",
    "5",
    '"x"',
    "[]",
    "{}",
    "",
    '{"elasticConfig": {"minReplicas": 1, "minReplicas": 2}}',
    '{"a": 1, "a": 2, "b": {"x": 1, "x": 2}}',
    '{"elasticConfig": {"minReplicas": 1, "min_replicas": 2}}',
    '{"elastic_config": {}, "elasticConfig": {}}',
    '{"elasticConfig": {"monitorInterval": "1s", "monitor_interval": null}}',
    '{"x": ' + "[" * 100 + "]" * 100 + "}",
    '{"x": ' + "[" * 99 + "]" * 99 + "}",
    '{"a": {"x": 1, "x": 2}, "b": ' + "[" * 100 + "]" * 100 + "}",
    '{"elasticConfig": {"rdzvId": "' + "[{" * 200 + '"}}',
    '{"elasticConfig": {"minReplicas": ' + "1" * 4301 + "}}",
    '{"elasticConfig": {"minReplicas": ' + "1" * 4300 + "}}",
    '{"elasticConfig": {"rdzvId": "' + "a" * (1024 * 1024) + '"}}',
    '\ufeff{"elasticConfig": {"minReplicas": 1}}',
    '{"elasticConfig": {"rdzvId": "\ud800"}}',
    '{"elasticConfig": {"rdzvId": "\\ud800"}}',
    '{"' + "k" * 200 + '": 1}',
    '{"workerReplicas": {"common": {"image": "a\u3000b"}}, "elasticConfig": {"minReplicas": 1, "maxReplicas": 1}}',
    '{"workerReplicas": {"resources": {"requests": [{"name": "CPU", "value": "1"}, {"name": "CPU", "value": "3"}],'
    ' "limits": [{"name": "CPU", "value": "2"}]}}}',
    '{"workerReplicas": {"replicas": 1, "resources": {"requests": [{"name": "GPU", "value": "0.1n"}],'
    ' "limits": [{"name": "GPU", "value": "1"}, {"name": "MEMORY", "value": "-0"}]}}}',
]


def _mutated_requests(rng: Any) -> list[dict[str, Any]]:
    import json as _json

    out: list[dict[str, Any]] = []
    json_cases = [n for n in tc.JSON_CASES if tc.CASES[n].kind != "flytekit"]
    for i in range(MUTATIONS):
        name = rng.choice(json_cases)
        custom = tc.EXPECTED[name]["custom"]
        leaves = _json_leaves(custom)
        if leaves and rng.random() < 0.8:
            mutated = _json_replace(custom, rng.choice(leaves), rng.choice(JSON_SUBSTITUTES))
        else:  # an unknown key in some object
            objects = [p for p in [(), *leaves] if isinstance(_get(custom, p), dict)]
            where = rng.choice(objects)
            mutated = _json_replace(custom, where, {**_get(custom, where), rng.choice(["x", "Workers", "min"]): 1})
        data = _json.dumps(mutated, sort_keys=rng.random() < 0.5)
        out.append(_entry(f"json-{i}-{name}", name, "json", data))
    binary_cases = tc.TASK_CASES
    for i in range(MUTATIONS):
        name = rng.choice(binary_cases)
        raw = bytearray(tc.binary_of(name))
        if not raw:
            continue
        pos = rng.randrange(len(raw))
        kind = rng.random()
        if kind < 0.5:  # another wire type on some byte (a tag, when it is one)
            raw[pos] = (raw[pos] & ~7) | rng.choice([0, 1, 2, 5])
        elif kind < 0.8:
            raw[pos] ^= 1 << rng.randrange(8)
        else:
            del raw[pos:]
        version = tc.CASES[name].task_type_version
        if rng.random() < 0.2:
            version = 1 - version  # the other task shape's bytes
        out.append(_entry(f"binary-{i}-{name}", name, "binary_hex", bytes(raw).hex(), version))
    if api_implementation.Type() == "upb":  # the Go side follows upb, protobuf Python's default parser
        for label, data in WIRE_EDGES.items():
            out.append(_entry(f"wire-{label}", "kf_minimal_elastic", "binary_hex", data, 1))
    header = "# proto-message: elastic_idl.plugins.kubeflow.v1.DistributedPyTorchTrainingTask\n"
    for i, body in enumerate(TEXTPROTO_EDGES):
        out.append(_entry(f"text-edge-{i}", "kf_minimal_elastic", "textproto", header + body, 1))
    for i, text in enumerate(JSON_EDGES):
        out.append(_entry(f"json-edge-{i}", "kf_minimal_elastic", "json", text, 1))
    out.append(_entry("text-bom", "kf_minimal_elastic", "textproto", "\ufeff" + header + "elastic_config {}", 1))
    out.append(
        _entry("text-surrogate", "kf_minimal_elastic", "textproto", header + 'elastic_config { role: "\ud800" }', 1)
    )
    out.append(_entry("binary-too-large", "kf_minimal_elastic", "binary_hex", "00" * (1024 * 1024 + 1), 7))
    for i, edit in enumerate(RENDER_EDGES):
        for name in ("kf_minimal_elastic", "kf_replica_common"):
            entry = _entry(f"render-{i}-{name}", name, "textproto", tc.CASES[name].textproto or "")
            entry["render"] = {**entry["render"], **edit}
            out.append(entry)
    text_cases = [n for n in tc.TASK_CASES if tc.CASES[n].textproto]
    for i in range(MUTATIONS // 4):
        name = rng.choice(text_cases)
        old, new = rng.choice(TEXTPROTO_EDITS)
        text = tc.CASES[name].textproto or ""
        out.append(_entry(f"text-{i}-{name}", name, "textproto", text.replace(old, new, rng.choice([1, 2, -1]))))
    return out


def _get(value: Any, path: tuple[object, ...]) -> Any:
    for p in path:
        value = value[p]
    return value


def _entry(label: str, name: str, fmt: str, data: str, version: int | None = None) -> dict[str, Any]:
    entry = tc.conf.request_for(tc.CASES[name], input_format=fmt, data=data)
    entry["name"] = label
    if version is not None:
        entry["task_type_version"] = version
    return entry


def test_go_and_python_agree_on_bad_input(go_conformance: Path) -> None:
    """Mutated JSON, binary and textproto inputs: the Go backend gives every output the reference gives.

    Wrong JSON types, unknown keys, integer and Duration edges, lone surrogates,
    JSON that is no task, keys given twice, nesting and size limits, quantities,
    wire-type changes, bit flips, truncation, the other shape's bytes, the wire
    format's edges, text syntax errors and string escapes, and bad render options:
    the same DecodeError or RenderError field, or the same outputs when the input
    still decodes.
    """
    import random

    entries = _mutated_requests(random.Random(12))
    problems, decode_errors = _disagreements(go_conformance, entries)
    assert decode_errors > MUTATIONS // 4, "the mutations reach the decoders' errors"
    assert not problems, f"{len(problems)} disagreements:\n" + "\n".join(problems[:30])


def _disagreements(go_conformance: Path, entries: list[dict[str, Any]]) -> tuple[list[str], int]:
    """Every output where the Go backend and the reference differ on the cases, and how many are DecodeErrors."""
    import json as _json

    request = {"version": tc.conf.CONTRACT_VERSION, "cases": entries}
    proc = subprocess.run(
        [str(go_conformance)], input=_json.dumps(request), capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    go = _json.loads(proc.stdout)["results"]
    with warnings.catch_warnings():
        # protobuf Python warns about the escapes it keeps (\q); pytest makes warnings errors.
        warnings.simplefilter("ignore", DeprecationWarning)
        reference = tc.conf.respond(request)["results"]
    problems = []
    decode_errors = 0
    for entry in entries:
        name = entry["name"]
        want, got = reference[name], go[name]
        decode_errors += "error" in want
        for output in sorted(set(want) & (GO_OUTPUTS | {"error"})):
            if want[output] != got.get(output):
                problems.append(
                    f"{name} {entry['input']['data'][:300]!r}: {output}: {want[output]!r} != {got.get(output)!r}"[:900]
                )
    return problems, decode_errors


#: FuzzDecode's seed corpus (go/elasticidl/decode_test.go writes it); the format byte picks one of these.
FUZZ_CORPUS = GO_DIR / "elasticidl" / "testdata" / "fuzz" / "FuzzDecode"
FUZZ_FORMATS = ("binary_hex", "json", "textproto")
_GO_ESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92, '"': 34, "'": 39}


def _go_quoted_bytes(literal: str) -> bytes:
    """The bytes of a Go double-quoted string literal (how the fuzz corpus writes a []byte)."""
    assert literal[0] == literal[-1] == '"', literal[:50]
    s, out, i = literal[1:-1], bytearray(), 0
    while i < len(s):
        c = s[i]
        if c != "\\":
            out += c.encode()
            i += 1
            continue
        e = s[i + 1]
        if e in _GO_ESCAPES:
            out.append(_GO_ESCAPES[e])
            i += 2
        elif e in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[e]
            n = int(s[i + 2 : i + 2 + width], 16)
            out += bytes([n]) if e == "x" else chr(n).encode()
            i += 2 + width
        else:
            out.append(int(s[i + 1 : i + 4], 8))
            i += 4
    return bytes(out)


def _fuzz_seeds() -> list[tuple[str, bytes, str, int]]:
    """(file name, data, conformance format, task_type_version) of every file of the fuzz corpus."""
    out = []
    for path in sorted(FUZZ_CORPUS.iterdir()):
        lines = path.read_text(encoding="utf-8").splitlines()
        assert lines[0] == "go test fuzz v1", path
        data = re.fullmatch(r"\[\]byte\((.*)\)", lines[1])
        fmt = re.fullmatch(r"uint8\((\d+)\)", lines[2])
        version = re.fullmatch(r"int32\((-?\d+)\)", lines[3])
        assert data and fmt and version, path
        out.append(
            (path.name, _go_quoted_bytes(data.group(1)), FUZZ_FORMATS[int(fmt.group(1)) % 3], int(version.group(1)))
        )
    return out


def test_go_quoted_bytes() -> None:
    assert (
        _go_quoted_bytes(r'"a\x00\xff\n\"\\\u00e9\U0001f600\101é"')
        == b'a\x00\xff\n"\\' + "\u00e9\U0001f600".encode() + b"A" + "é".encode()
    )


def test_go_and_python_agree_on_the_fuzz_corpus(go_conformance: Path) -> None:
    """FuzzDecode's seeds through both languages: the same accept or reject, the same error field, the same outputs.

    Text that is not UTF-8 goes as the str Python's surrogateescape reads (its lone surrogates refused on both sides).
    """
    entries = []
    for name, data, fmt, version in _fuzz_seeds():
        text = data.hex() if fmt == "binary_hex" else data.decode("utf-8", "surrogateescape")
        entries.append(_entry(f"fuzz-{name}", "kf_minimal_elastic", fmt, text, version))
    assert len(entries) >= 400, "the corpus holds every contract vector in each form, and damaged copies"
    problems, decode_errors = _disagreements(go_conformance, entries)
    assert decode_errors > 0
    assert not problems, f"{len(problems)} disagreements:\n" + "\n".join(problems[:30])


# ----------------------------------------------------------------- the toolchain script


def _bare_path(tmp_path: Path) -> dict[str, str]:
    """A PATH with the shell tools the script needs and no go, and no Go in the fallback home."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "env", "cat", "dirname"):
        found = shutil.which(tool)
        assert found
        (bin_dir / tool).symlink_to(found)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "ELASTIC_IDL_GO")}
    return {**env, "PATH": str(bin_dir), "ELASTIC_IDL_GO_HOME": str(tmp_path / "no-go")}


def test_go_toolchain_missing_says_so_once(tmp_path: Path) -> None:
    """No Go: one line that the Go checks did not run (exit 3); under CI=true an error."""
    script = str(REPO / "scripts" / "go_toolchain.sh")
    env = _bare_path(tmp_path)
    skipped = subprocess.run([script, "ensure"], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert skipped.returncode == 3, skipped.stderr
    assert skipped.stdout.count("\n") == 1 and "the Go checks did not run" in skipped.stdout
    assert skipped.stderr == ""
    ci = subprocess.run(
        [script, "ensure"], env={**env, "CI": "true"}, capture_output=True, text=True, timeout=60, check=False
    )
    assert ci.returncode == 1
    assert ci.stderr.count("\n") == 1 and "CI=true" in ci.stderr
    absent = subprocess.run([script, "present"], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert absent.returncode == 1 and absent.stdout == absent.stderr == ""


# ----------------------------------------------------------------- the propeller page (issue 29 item 13)


def test_the_propeller_page_gives_an_outside_module_the_replaces_it_needs() -> None:
    """`go get .../flyteplugin@v0.1.0` was the page's instruction, and no such version is served: until a
    release, an outside module needs replaces of the three modules by a checkout, plus go/flyteplugin's own
    (Go reads only the main module's). The page's go.mod lines are these, word for word."""
    from markdown_blocks import blocks

    page = REPO / "docs" / "guide" / "propeller.md"
    block = next(b.text for b in blocks(page.read_text(), "propeller.md") if "replace (" in b.text)
    lines = {" ".join(line.split()) for line in block.splitlines() if line.strip()}
    gomod = (GO_DIR / "flyteplugin" / "go.mod").read_text()
    version = re.search(r"github\.com/elastic-idl/elastic-idl/go (v\S+)", gomod)
    own = re.search(r"^replace \((.*?)^\)", gomod, re.S | re.M)
    assert version and own, "go/flyteplugin/go.mod requires the core by version and has its replaces"
    module = "github.com/elastic-idl/elastic-idl/go"
    want = {
        f"require {module}/flyteplugin {version.group(1)}",
        *(f"{module}{sub} {version.group(1)} => /src/elastic-idl/go{sub}" for sub in ("", "/kubeflow", "/flyteplugin")),
        *(" ".join(line.split()) for line in own.group(1).splitlines() if line.strip()),
    }
    assert want <= lines, sorted(want - lines)
    assert lines - want == {"replace (", ")"}
    # no code block tells a reader to `go get` a version that is not served
    assert not any("go get" in b.text for b in blocks(page.read_text(), "propeller.md"))
