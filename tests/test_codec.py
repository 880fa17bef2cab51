"""Decoding and encoding: round trips, typed errors that name the field, fuzzing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import elastic_idl as ei
from elastic_idl._messages import KubeflowTask, LegacyTask

FLYTEKIT_HEX = "0a020803220e0a04633130641001180320042802"
FLYTEKIT_CUSTOM = {
    "elasticConfig": {"maxReplicas": 3, "maxRestarts": 2, "minReplicas": 1, "nprocPerNode": 4, "rdzvBackend": "c10d"},
    "workerReplicas": {"replicas": 3},
}


def full_task() -> KubeflowTask:
    t = ei.from_custom(FLYTEKIT_CUSTOM)
    assert isinstance(t, KubeflowTask)
    e = t.elastic_config
    e.join_timeout.seconds = 900
    e.monitor_interval.nanos = 500_000_000
    e.rdzv_options.add(key="is_host", value="1")
    e.rdzv_options.add(key="note", value="ünï=cödé")
    e.start_method = 2
    e.signals_to_handle.append("SIGUSR1")
    t.run_policy.clean_pod_policy = 2
    t.worker_replicas.common.resources.limits.add(name=3, value="4Gi")
    return t


def test_flytekit_custom_gives_upstream_bytes() -> None:
    task = ei.from_custom(FLYTEKIT_CUSTOM)
    assert ei.encode(task, "binary").hex() == FLYTEKIT_HEX  # REFERENCE §2 wire hex
    assert ei.to_custom(task) == FLYTEKIT_CUSTOM


def test_struct_floats_are_accepted_as_integers() -> None:
    custom = json.loads(json.dumps(FLYTEKIT_CUSTOM))
    custom["elasticConfig"]["maxReplicas"] = 3.0
    assert ei.from_custom(custom) == ei.from_custom(FLYTEKIT_CUSTOM)


@pytest.mark.parametrize("fmt", ei.FORMATS)
def test_round_trip_and_detection(fmt: str) -> None:
    task = full_task()
    data = ei.encode(task, fmt)  # type: ignore[arg-type]
    assert ei.detect_format(data) == fmt
    assert ei.decode(data) == task
    if isinstance(data, str):
        assert ei.decode(data.encode()) == task


def test_legacy_shape_round_trip() -> None:
    t = LegacyTask(workers=2)
    t.elastic_config.min_replicas = 2
    data = ei.encode(t, "textproto")
    assert "elastic_idl.plugins.v1.DistributedPyTorchTrainingTask" in str(data)
    assert ei.decode(data, task_type_version=0) == t
    with pytest.raises(ei.DecodeError, match="task_type_version 0"):
        ei.decode(data, task_type_version=1)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ('{"elasticConfig": {"maxReplicas": "x"}}', "elastic_config.max_replicas"),
        ('{"elasticConfig": {"maxReplica": 1}}', "elastic_config.maxReplica"),
        ('{"elasticConfig": {"minReplicas": 3000000000}}', "elastic_config.min_replicas"),
        ('{"elasticConfig": {"joinTimeout": 5}}', "elastic_config.join_timeout"),
        ('{"elasticConfig": {"virtualLocalRank": "yes"}}', "elastic_config.virtual_local_rank"),
        ('{"elasticConfig": {"rdzvBackend": 5}}', "elastic_config.rdzv_backend"),
        ('{"elasticConfig": {"rdzvOptions": {"k": "v"}}}', "elastic_config.rdzv_options"),
        ('{"elasticConfig": {"rdzvOptions": [{"key": 1}]}}', "elastic_config.rdzv_options[0].key"),
        ('{"workerReplicas": {"common": {"restartPolicy": "BOGUS"}}}', "worker_replicas.common.restart_policy"),
        ('{"workerReplicas": 3}', "worker_replicas"),
        ('{"runPolicy": {"cleanPodPolicy": true}}', "run_policy.clean_pod_policy"),
        ("elastic_config:\n  nproc_per_node: four\n", "elastic_config.nproc_per_node"),
        ('elastic_config {\n  min_replicas: "a"\n}\n', "min_replicas"),
        ("elastic_config { bogus: 1 }", "bogus"),
    ],
)
def test_bad_text_input_names_the_field(data: str, field: str) -> None:
    with pytest.raises(ei.DecodeError) as info:
        ei.decode(data)
    assert info.value.field == field
    assert str(info.value).startswith(field)


@pytest.mark.parametrize("data", ["{", "[1, 2]", "elastic_config: [", '"just a string"'])
def test_malformed_text_is_a_decode_error(data: str) -> None:
    with pytest.raises(ei.DecodeError):
        ei.decode(data)


@pytest.mark.parametrize(
    "data",
    [bytes.fromhex(FLYTEKIT_HEX)[:-3], b"\xff\xff\xff\xff", bytes([0x22, 0x03, 0x0A, 0x01, 0xFF])],
    ids=["truncated", "garbled", "bad-utf8"],
)
def test_bad_binary_is_a_decode_error(data: bytes) -> None:
    with pytest.raises(ei.DecodeError) as info:
        ei.decode(data, format="binary")
    assert info.value.format == "binary"


def test_unknown_version_is_typed() -> None:
    with pytest.raises(ei.UnsupportedVersionError):
        ei.decode(b"", format="binary", task_type_version=2)
    with pytest.raises(ei.UnsupportedVersionError):
        ei.from_custom({}, task_type_version=True)  # type: ignore[arg-type]


def test_upstream_form_refuses_or_warns_on_extensions() -> None:
    task = full_task()
    assert ei.extension_fields(task) == [
        "elastic_config.start_method",
        "elastic_config.monitor_interval",
        "elastic_config.join_timeout",
        "elastic_config.rdzv_options",
        "elastic_config.signals_to_handle",
    ]
    with pytest.raises(ei.SkewError) as info:
        ei.to_custom(task, upstream=True)
    assert "elastic_config.start_method" in info.value.fields
    with pytest.warns(ei.SkewWarning, match="elastic_config.join_timeout"):
        custom = ei.to_custom(task, upstream=True, allow_loss=True)
    assert "joinTimeout" not in custom["elasticConfig"]
    assert custom["elasticConfig"]["maxReplicas"] == 3
    assert ei.extension_fields(task)  # the caller's message was not modified
    plain = ei.from_custom(FLYTEKIT_CUSTOM)
    assert ei.to_custom(plain, upstream=True) == FLYTEKIT_CUSTOM


ERRORS = (ei.DecodeError, ei.UnsupportedVersionError)
_json_leaf = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
_json = st.recursive(
    _json_leaf,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=12,
)
_keys = st.sampled_from(
    [
        "elasticConfig",
        "workerReplicas",
        "masterReplicas",
        "runPolicy",
        "minReplicas",
        "rdzvOptions",
        "common",
        "replicas",
        "joinTimeout",
        "restartPolicy",
        "limits",
        "nprocPolicy",
        "key",
        "value",
        "name",
    ]
)
_taskish = st.recursive(
    _json_leaf,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_keys, children, max_size=4),
    max_leaves=16,
)


def _decode_or_typed_error(data: Any, **kw: Any) -> None:
    try:
        task = ei.decode(data, **kw)
    except ERRORS:
        return
    ei.violations(task)  # a decoded task can always be validated


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=64), st.sampled_from([0, 1]))
def test_fuzz_binary(data: bytes, version: int) -> None:
    _decode_or_typed_error(data, format="binary", task_type_version=version)


@settings(max_examples=300, deadline=None)
@given(st.one_of(_json, _taskish))
def test_fuzz_json(obj: Any) -> None:
    _decode_or_typed_error(json.dumps(obj), format="json")
    try:
        ei.from_custom(obj)
    except ERRORS:
        pass


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=64), st.sampled_from(["textproto", "yaml", None]))
def test_fuzz_text(text: str, fmt: Any) -> None:
    _decode_or_typed_error(text, format=fmt)


def test_binary_of_the_other_shape_is_refused() -> None:
    legacy = LegacyTask(workers=2)
    legacy.elastic_config.min_replicas = 1
    with pytest.raises(ei.DecodeError) as info:
        ei.decode(ei.encode(legacy, "binary"), format="binary", task_type_version=1)
    assert info.value.field == "worker_replicas"
    # An unknown field number is kept (a newer schema may send it), and survives re-encoding.
    extra = ei.encode(legacy, "binary") + bytes([0xF8, 0x06, 0x01])  # field 111, varint 1
    decoded = ei.decode(extra, format="binary", task_type_version=0)
    assert ei.encode(decoded, "binary").endswith(bytes([0xF8, 0x06, 0x01]))


def test_struct_enum_numbers_are_kept_for_validation() -> None:
    task = ei.from_custom(
        {"elasticConfig": {"minReplicas": 1, "maxReplicas": 1, "nprocPerNode": 1, "startMethod": 9.0}}
    )
    assert [v.rule for v in ei.violations(task)] == ["enum.known"]
    assert ei.from_custom({"elasticConfig": {"startMethod": 2.0}}).elastic_config.start_method == 2


def test_duration_without_json_form_is_a_typed_error() -> None:
    task = KubeflowTask()
    task.elastic_config.join_timeout.seconds = 10**12
    with pytest.raises(ei.EncodeError) as info:
        ei.to_custom(task)
    assert info.value.field == "elastic_config.join_timeout"
    assert "elastic.duration.valid" in [v.rule for v in ei.violations(task)]
