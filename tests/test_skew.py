"""docs/skew.md against real behaviour: both tables are parsed and every cell is checked.

"Old" is the real upstream ``flyteidl`` package (fields 1-5 of ElasticConfig); "new" is
elastic-idl. A row whose cell stops being true, or an extension field with no row, fails here.
"""

from __future__ import annotations

import importlib
import json
import re
import warnings
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format, text_format
from google.protobuf.message import Message
from google.protobuf.unknown_fields import UnknownFieldSet
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import elastic_idl as ei
from elastic_idl import _conformance as conf
from strategies import arbitrary_tasks

REPO = Path(__file__).resolve().parent.parent
SKEW_DOC = REPO / "docs" / "skew.md"
CASES_DIR = REPO / "contract" / "cases"

EXTENSION_MIN = 100
UPSTREAM = {
    0: importlib.import_module("flyteidl.plugins.pytorch_pb2"),
    1: importlib.import_module("flyteidl.plugins.kubeflow.pytorch_pb2"),
}
OURS: dict[int, type[Message]] = {0: ei.LegacyTask, 1: ei.KubeflowTask}
RENDER = conf.DEFAULT_RENDER

#: One valid value per extension field, as textproto inside elastic_config (the field set alone).
SAMPLES: dict[str, str] = {
    "nproc_policy": "nproc_per_node: 0 nproc_policy: NPROC_POLICY_AUTO",
    "start_method": "start_method: START_METHOD_FORK",
    "monitor_interval": "monitor_interval { seconds: 2 }",
    "join_timeout": "join_timeout { seconds: 900 }",
    "last_call_timeout": "last_call_timeout { seconds: 30 }",
    "close_timeout": "close_timeout { seconds: 30 }",
    "read_timeout": "read_timeout { seconds: 60 }",
    "rdzv_options": 'rdzv_options { key: "is_host" value: "1" }',
    "rdzv_id": 'rdzv_id: "run-1"',
    "rdzv_host": 'rdzv_host: "trainer-0"',
    "rdzv_port": "rdzv_port: 29500",
    "role": 'role: "trainer"',
    "redirects": "redirects: STD_STREAMS_ALL",
    "tee": "tee: STD_STREAMS_OUT",
    "local_ranks_filter": "local_ranks_filter: 0",
    "numa_binding": "numa_binding: NUMA_BINDING_NODE",
    "signals_to_handle": 'signals_to_handle: "SIGTERM"',
    "shutdown_timeout": "shutdown_timeout { seconds: 5 }",
    "virtual_local_rank": "virtual_local_rank: true",
    "collective_timeout": "collective_timeout { seconds: 90 }",
    "nccl_heartbeat_timeout": "nccl_heartbeat_timeout { seconds: 300 }",
    "nccl_async_error_handling": "nccl_async_error_handling: TOGGLE_OFF",
    "nccl_enable_monitoring": "nccl_enable_monitoring: TOGGLE_ON",
    "log_line_prefix_template": 'log_line_prefix_template: "${rank}|"',
    "cas_backoff_max_seconds": "cas_backoff_max_seconds { seconds: 1 }",
}
BASE_ELASTIC = 'rdzv_backend: "c10d" min_replicas: 1 max_replicas: 2 nproc_per_node: 4'
TOKEN = re.compile(r"`([^`]+)`")


# ----------------------------------------------------------------- the document


def _tables(text: str) -> dict[str, list[dict[str, str]]]:
    """Every markdown table of the document, by the heading above it, as a list of rows (column -> cell)."""
    tables: dict[str, list[dict[str, str]]] = {}
    heading = ""
    header: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("#"):
            heading, header = line.lstrip("#").strip(), None
            continue
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            tables[heading] = []
        elif set("".join(cells)) <= {"-", " ", ":"}:
            continue
        else:
            assert len(cells) == len(header), f"{heading}: row {cells[0]!r} has {len(cells)} cells"
            tables[heading].append(dict(zip(header, cells, strict=True)))
    return tables


TABLES = _tables(SKEW_DOC.read_text(encoding="utf-8"))
FIELD_ROWS = {row["Field"]: row for row in TABLES["Extension fields"]}
SCENARIO_ROWS = {TOKEN.findall(row["Scenario"])[0]: row for row in TABLES["Task shape and version skew"]}
EXTENSIONS = {f.name: f for f in ei.ElasticConfig.DESCRIPTOR.fields if f.number >= EXTENSION_MIN}


def tokens(cell: str) -> list[str]:
    return TOKEN.findall(cell)


def test_every_extension_field_has_exactly_one_row() -> None:
    assert sorted(FIELD_ROWS) == sorted(EXTENSIONS), "docs/skew.md rows vs ElasticConfig fields numbered >= 100"
    for name, row in FIELD_ROWS.items():
        assert int(row["#"]) == EXTENSIONS[name].number, name
    assert sorted(SAMPLES) == sorted(EXTENSIONS), "tests/test_skew.py needs a sample value per extension field"


def test_scenario_rows() -> None:
    assert sorted(SCENARIO_ROWS) == sorted(
        ["v1-json-as-v0", "v0-json-as-v1", "v1-binary-as-v0", "v0-binary-as-v1", "unknown-version"]
    )


# ----------------------------------------------------------------- helpers


def task_with(version: int, field: str | None) -> Any:
    """An upstream-only task of that shape, plus one extension field set (or none)."""
    extra = SAMPLES[field] if field else ""
    base = BASE_ELASTIC.replace(" nproc_per_node: 4", "") if "nproc_per_node" in extra else BASE_ELASTIC
    workers = "workers: 2" if version == 0 else "worker_replicas { replicas: 2 }"
    text = f"{workers}\nelastic_config {{ {base} {extra} }}\n"
    task = OURS[version]()
    text_format.Parse(text, task)
    assert not ei.violations(task), ei.violations(task)
    return task


def upstream_payload(version: int) -> Any:
    """flytekit 1.16's Elastic(nnodes="1:2", nproc_per_node=4), built with the real flyteidl classes."""
    up = UPSTREAM[version]
    elastic = up.ElasticConfig(rdzv_backend="c10d", min_replicas=1, max_replicas=2, nproc_per_node=4)
    if version == 0:
        return up.DistributedPyTorchTrainingTask(workers=2, elastic_config=elastic)
    return up.DistributedPyTorchTrainingTask(
        worker_replicas=up.DistributedPyTorchTrainingReplicaSpec(replicas=2), elastic_config=elastic
    )


def lookup(outputs: dict[str, Any], path: str) -> Any:
    """``launch_spec.rdzv_configs.join_timeout`` in the outputs; a missing key is the string "absent"."""
    root, *rest = path.split(".")
    cur: Any = outputs[root]
    if root == "launch_spec":
        cur = cur["none"]
    for key in rest:
        if not isinstance(cur, dict) or key not in cur:
            return "absent"
        cur = cur[key]
    return cur


def parse_assignment(token: str) -> tuple[str, Any]:
    path, _, value = token.partition("=")
    return path, "absent" if value == "absent" else json.loads(value)


# ----------------------------------------------------------------- extension fields, per row and column


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("field", sorted(EXTENSIONS))
def test_new_sdk_to_old_backend_binary(field: str, version: int) -> None:
    row = tokens(FIELD_ROWS[field]["New SDK → old backend, binary"])
    assert sorted(row) == ["ignored", "kept-unknown"]
    task = task_with(version, field)
    blob = ei.encode(task, "binary")
    assert isinstance(blob, bytes)
    old = UPSTREAM[version].DistributedPyTorchTrainingTask()
    old.ParseFromString(blob)
    # kept-unknown: the field is an unknown field of upstream's ElasticConfig, and a relay keeps the bytes.
    unknown = {f.field_number for f in UnknownFieldSet(old.elastic_config)}
    assert unknown == {EXTENSIONS[field].number}
    assert old.SerializeToString(deterministic=True) == blob
    # ignored: upstream's view is the task without the field.
    assert json_format.MessageToDict(old) == ei.to_custom(
        task_with(version, None) if field != "nproc_policy" else _no_nproc(version)
    )


def _no_nproc(version: int) -> Any:
    # The nproc_policy sample also sets nproc_per_node to 0, the only value allowed beside a policy.
    task = task_with(version, None)
    task.elastic_config.nproc_per_node = 0
    return task


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("field", sorted(EXTENSIONS))
def test_new_sdk_to_old_backend_json(field: str, version: int) -> None:
    row = tokens(FIELD_ROWS[field]["New SDK → old backend, JSON"])
    assert sorted(row) == ["dropped-lenient", "rejected-strict"]
    task = task_with(version, field)
    custom = ei.to_custom(task)
    json_name = EXTENSIONS[field].json_name
    assert json_name in custom["elasticConfig"]
    # rejected-strict: upstream's parser with its defaults names the field.
    with pytest.raises(json_format.ParseError, match=json_name):
        json_format.ParseDict(custom, UPSTREAM[version].DistributedPyTorchTrainingTask())
    # dropped-lenient: what flytepropeller does (unknown fields discarded): accepted, field gone, no error.
    old = UPSTREAM[version].DistributedPyTorchTrainingTask()
    json_format.ParseDict(custom, old, ignore_unknown_fields=True)
    without = dict(custom, elasticConfig={k: v for k, v in custom["elasticConfig"].items() if k != json_name})
    assert json_format.MessageToDict(old) == without


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("field", sorted(EXTENSIONS))
def test_sender_guard(field: str, version: int) -> None:
    row = tokens(FIELD_ROWS[field]["Sender guard"])
    assert sorted(row) == ["SkewError", "SkewWarning"]
    task = task_with(version, field)
    path = f"elastic_config.{field}"
    with pytest.raises(ei.SkewError) as info:
        ei.to_custom(task, upstream=True)
    assert info.value.fields == (path,)
    for fmt in ei.FORMATS:
        with pytest.raises(ei.SkewError):
            ei.encode(task, fmt, upstream=True)
    with pytest.warns(ei.SkewWarning, match=re.escape(path)):
        custom = ei.to_custom(task, upstream=True, allow_loss=True)
    assert EXTENSIONS[field].json_name not in custom["elasticConfig"]
    json_format.ParseDict(custom, UPSTREAM[version].DistributedPyTorchTrainingTask())  # strict: accepted
    with pytest.warns(ei.SkewWarning, match=re.escape(path)):
        blob = ei.encode(task, "binary", upstream=True, allow_loss=True)
    assert isinstance(blob, bytes)
    old = UPSTREAM[version].DistributedPyTorchTrainingTask()
    old.ParseFromString(blob)
    assert not list(UnknownFieldSet(old.elastic_config)), "nothing left for upstream to carry blind"


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("form", ["binary", "json"])
def test_old_sdk_to_new_backend(form: str, version: int) -> None:
    """The upstream payload in both forms: the same task, no extension set, and each row's effective values."""
    payload = upstream_payload(version)
    if form == "binary":
        task = ei.decode(payload.SerializeToString(), format="binary", task_type_version=version)
    else:
        task = ei.from_custom(json_format.MessageToDict(payload), task_type_version=version)
    assert ei.extension_fields(task) == []
    assert ei.encode(task, "binary") == payload.SerializeToString(deterministic=True)
    outputs = conf.outputs_of_task(task, task_type_version=version, render=RENDER)
    assert outputs["violations"] == []
    checked = 0
    for field, row in FIELD_ROWS.items():
        for token in tokens(row["Old SDK → new backend (binary and JSON)"]):
            path, value = parse_assignment(token)
            assert lookup(outputs, path) == value, f"{field}: {token}"
            checked += 1
    assert checked >= len(FIELD_ROWS)


# ----------------------------------------------------------------- shape and version skew

WRONG = {"v1-json-as-v0": (1, 0, "json"), "v0-json-as-v1": (0, 1, "json"),
         "v1-binary-as-v0": (1, 0, "binary"), "v0-binary-as-v1": (0, 1, "binary")}  # fmt: skip


def _contract_tasks(version: int) -> list[tuple[str, Any]]:
    out = []
    for case in conf.load_cases(CASES_DIR):
        exp = conf.read_expected(case.path)
        if case.task_type_version == version and "binary_hex" in exp:
            out.append(
                (case.name, ei.decode(bytes.fromhex(exp["binary_hex"]), format="binary", task_type_version=version))
            )
    return out


def _our_decoder(task: Any, to_version: int, form: str) -> str:
    try:
        if form == "json":
            ei.from_custom(_custom_of(task), task_type_version=to_version)
        else:
            ei.decode(ei.encode(task, "binary"), format="binary", task_type_version=to_version)
    except ei.DecodeError:
        return "DecodeError"
    return "accepted"


def _custom_of(task: Any) -> dict[str, Any]:
    try:
        return ei.to_custom(task)
    except ei.EncodeError:  # no JSON form (see contract/known_failures.yaml)
        pytest.skip("task has no JSON form")


def _elastic_outcome(task: Any, version: int) -> Any:
    """What a task makes the backend and the launcher do, or None when they refuse it."""
    try:
        job = ei.render_pytorchjob(task, ei.JobOptions(**RENDER), task_type_version=version)
        spec = ei.to_launch_spec(task).as_dict()
    except ei.ElasticIdlError:
        return None
    worker = job["spec"]["pytorchReplicaSpecs"]["Worker"]
    return (job["spec"].get("elasticPolicy"), job["spec"].get("nprocPerNode"), worker["replicas"], spec)


def _pipeline(task: Any, from_version: int, to_version: int, form: str) -> str:
    """Render and launch what the wrong-version reader makes of the task.

    ``refused``: both refuse (or decoding already did); ``same-elastic``: both run and do exactly
    what the task, read right, does; ``different``: a silent change, which no row may allow.
    """
    data: Any = _custom_of(task) if form == "json" else ei.encode(task, "binary")
    try:
        misread = (
            ei.from_custom(data, task_type_version=to_version)
            if form == "json"
            else ei.decode(data, format="binary", task_type_version=to_version)
        )
    except ei.ElasticIdlError:
        return "refused"
    got = _elastic_outcome(misread, to_version)
    if got is None:
        return "refused"
    return "same-elastic" if got == _elastic_outcome(task, from_version) else "different"


def _upstream_reader(task: Any, to_version: int, form: str) -> str:
    """Does upstream's reader of the wrong shape get the elastic config (fields 1-5) that was sent?"""
    sent = {k: v for k, v in json_format.MessageToDict(task.elastic_config).items() if k in _UPSTREAM_KEYS}
    old = UPSTREAM[to_version].DistributedPyTorchTrainingTask()
    if form == "json":
        json_format.ParseDict(_custom_of(task), old, ignore_unknown_fields=True)
    else:
        old.ParseFromString(ei.encode(task, "binary"))
    got = json_format.MessageToDict(old.elastic_config) if old.HasField("elastic_config") else None
    return "elastic-kept" if got == sent else "elastic-lost"


_UPSTREAM_KEYS = {"rdzvBackend", "minReplicas", "maxReplicas", "nprocPerNode", "maxRestarts"}


#: JSON keys both task shapes share: a custom dict with only these reads the same either way.
SHARED_KEYS = {"elasticConfig"}


@pytest.mark.parametrize("scenario", sorted(WRONG))
def test_shape_skew_on_every_contract_case(scenario: str) -> None:
    from_version, to_version, form = WRONG[scenario]
    row = SCENARIO_ROWS[scenario]
    decoder = set(tokens(row["Our decoder"]))
    pipeline = set(tokens(row["Our pipeline (render and launch)"]))
    [upstream] = tokens(row["Upstream reader"])
    assert "different" not in pipeline, "no row may allow a silent change"
    tasks = _contract_tasks(from_version)
    assert len(tasks) >= 5
    seen: set[str] = set()
    for name, task in tasks:
        if form == "json":
            try:
                custom = ei.to_custom(task)
            except ei.EncodeError:
                continue  # no JSON form: pinned by the contract itself
        got = _our_decoder(task, to_version, form)
        assert got in decoder, name
        if form == "json":
            # Accepted exactly when the dict uses only keys both shapes share.
            assert (got == "accepted") == (set(custom) <= SHARED_KEYS), name
        outcome = _pipeline(task, from_version, to_version, form)
        assert outcome in pipeline, name
        seen |= {got, outcome}
        if task.HasField("elastic_config") and not ei.violations(task):
            assert _upstream_reader(task, to_version, form) == upstream, name
    assert seen == decoder | pipeline, f"every outcome the row names happens on some case: {sorted(seen)}"


@pytest.mark.parametrize(
    ("scenario", "field"), [("v1-binary-as-v0", "workers"), ("v0-binary-as-v1", "worker_replicas")]
)
def test_binary_of_the_other_shape_is_a_decode_error(scenario: str, field: str) -> None:
    from_version, to_version, _ = WRONG[scenario]
    errors: list[ei.DecodeError] = []
    for _, task in _contract_tasks(from_version):
        try:
            ei.decode(ei.encode(task, "binary"), format="binary", task_type_version=to_version)
        except ei.DecodeError as exc:
            errors.append(exc)
    assert all(e.field and "other task shape" in e.reason for e in errors)
    assert sum(e.field == field for e in errors) >= 3  # one shape's replica field is never read as the other's


def test_unknown_version() -> None:
    row = SCENARIO_ROWS["unknown-version"]
    assert tokens(row["Our decoder"]) == ["UnsupportedVersionError"]
    assert tokens(row["Our pipeline (render and launch)"]) == ["refused"]
    assert tokens(row["Upstream reader"]) == ["n/a"]
    task = task_with(1, None)
    with pytest.raises(ei.UnsupportedVersionError):
        ei.decode(ei.encode(task, "binary"), format="binary", task_type_version=2)
    with pytest.raises(ei.UnsupportedVersionError):
        ei.from_custom(ei.to_custom(task), task_type_version=2)
    with pytest.raises(ei.UnsupportedVersionError):
        ei.render_pytorchjob(ei.to_custom(task), ei.JobOptions(**RENDER), task_type_version=2)


@settings(max_examples=150, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), version=st.sampled_from([0, 1]))
def test_shape_skew_on_random_tasks(data: st.DataObject, version: int) -> None:
    """Random tasks of one shape (valid, broken, arbitrary), read as the other: refused or the same, never changed."""
    task = data.draw(arbitrary_tasks(version))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert _pipeline(task, version, 1 - version, "binary") == "refused"
        try:
            ei.to_custom(task)
        except ei.EncodeError:
            return  # no JSON form (a Duration outside JSON's range)
        assert _pipeline(task, version, 1 - version, "json") in ("refused", "same-elastic")
