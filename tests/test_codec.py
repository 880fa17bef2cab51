"""Decoding and encoding: round trips, typed errors that name the field, fuzzing."""

from __future__ import annotations

import io
import json
import re
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import elastic_idl as ei
from elastic_idl._errors import MAX_ERROR_CHARS
from elastic_idl._task.codec import MAX_NESTING, MAX_TASK_BYTES, MAX_YAML_ALIAS_NODES, format_of_path, read_task_bytes
from elastic_idl._task.messages import KubeflowTask, LegacyTask

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
        ('{"elasticConfig": {"joinTimeout": "99999999999999999999s"}}', "elastic_config.join_timeout"),
        ('{"elasticConfig": {"rdzvId": "\\ud800"}}', "elastic_config.rdzv_id"),
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
    for strict in (True, False):  # the tolerant decode names what it leaves out in SkewWarnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ei.SkewWarning)
            try:
                ei.from_custom(obj, strict=strict)
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


# --------------------------------------------------------------------------- hostile and malformed input (issue #9)


def _alias_bomb(levels: int, width: int = 9) -> str:
    """A YAML 'billion laughs': each anchor is a list of `width` aliases of the previous one."""
    anchors = ["&a0 [" + ", ".join(["lol"] * width) + "]"]
    anchors += [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels + 1)]
    return "elastic_config:\n  rdzv_id: [" + ", ".join(anchors) + "]\n"


def _decode_error(data: Any, **kw: Any) -> ei.DecodeError:
    with pytest.raises(ei.DecodeError) as info:
        ei.decode(data, **kw)
    err = info.value
    text = str(err)
    assert "\n" not in text and len(text) <= MAX_ERROR_CHARS + 200, text[:300]
    return err


@pytest.mark.parametrize("levels", [3, 7])
def test_yaml_alias_bomb_is_refused_with_a_short_error(levels: int) -> None:
    data = _alias_bomb(levels)
    assert len(data) < 500
    for fmt in ("yaml", None):
        err = _decode_error(data, format=fmt)
        assert err.reason == f"aliases expand to more than {MAX_YAML_ALIAS_NODES} nodes"
        assert (err.format, err.line) == ("yaml", 2)


def test_yaml_aliases_within_the_bound_work() -> None:
    data = "elastic_config:\n  min_replicas: &n 2\n  max_replicas: *n\n  nproc_per_node: *n\nworker_replicas: {replicas: *n}\n"
    task = ei.decode(data)
    assert task.elastic_config.max_replicas == 2 and task.worker_replicas.replicas == 2
    # 1000 alias nodes exactly is allowed; one more is not.
    ok = "elastic_config:\n  signals_to_handle: &s [SIGTERM]\nx: [" + ", ".join(["*s"] * 500) + "]\n"
    assert _decode_error(ok, format="yaml").field == "x"  # past the alias check: an unknown field
    over = "elastic_config:\n  signals_to_handle: &s [SIGTERM]\nx: [" + ", ".join(["*s"] * 501) + "]\n"
    assert "aliases expand" in _decode_error(over, format="yaml").reason


def test_recursive_yaml_alias_is_refused() -> None:
    err = _decode_error("elastic_config: &a\n  rdzv_options: [*a]\n", format="yaml")
    assert "recursive" in err.reason and err.line == 2


@pytest.mark.parametrize(
    ("data", "fmt"),
    [
        ('{"elasticConfig": ' + "[" * 100_000 + "]" * 100_000 + "}", "json"),
        ("[" * 100_000, "json"),
        ("elastic_config: " + "[" * 5000 + "]" * 5000 + "\n", "yaml"),
        ("a:\n" + "".join(" " * i + "b:\n" for i in range(1, 1000)), "yaml"),
        ("{a: " * 3000 + "}" * 3000, "yaml"),
    ],
    ids=["json-100k", "json-unclosed", "yaml-flow-5k", "yaml-block-1k", "yaml-flow-map"],
)
def test_deep_nesting_is_one_decode_error(data: str, fmt: str) -> None:
    for hint in (fmt, None):
        err = _decode_error(data, format=hint)
        assert err.reason == f"nested deeper than {MAX_NESTING} levels" and err.format == fmt
        assert err.line is not None


def test_nesting_up_to_the_limit_is_parsed() -> None:
    data = '{"elasticConfig": {"rdzvId": ' + "[" * (MAX_NESTING - 2) + "]" * (MAX_NESTING - 2) + "}}"
    err = _decode_error(data, format="json")  # parsed; then the field has the wrong type
    assert err.field == "elastic_config.rdzv_id" and "expected a string, got list" in err.reason
    brackets_in_strings = '{"elasticConfig": {"rdzvId": "' + "[" * 500 + '\\"{"}}'
    assert ei.decode(brackets_in_strings).elastic_config.rdzv_id == "[" * 500 + '"{'  # brackets in strings do not count


def test_inputs_over_the_size_cap_are_refused() -> None:
    big = b" " * MAX_TASK_BYTES + b"{}"
    for fmt in (None, "json", "yaml", "textproto", "binary"):
        assert "larger than 1,048,576 bytes" in _decode_error(big, format=fmt).reason
    assert "larger than" in _decode_error("é" * (MAX_TASK_BYTES // 2 + 1)).reason  # counted in UTF-8 bytes
    padded = b"{}" + b" " * (MAX_TASK_BYTES - 2)
    assert ei.decode(padded) == KubeflowTask()


class _Endless(io.RawIOBase):
    """/dev/zero as a stream, counting what was read."""

    def __init__(self) -> None:
        self.read_bytes = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = min(len(buffer), 65536)
        buffer[:n] = bytes(n)
        self.read_bytes += n
        return n


def test_read_task_bytes_stops_after_the_cap() -> None:
    raw = _Endless()
    with pytest.raises(ei.DecodeError, match="larger than"):
        read_task_bytes(io.BufferedReader(raw))
    assert raw.read_bytes <= MAX_TASK_BYTES + 65536 * 2
    assert read_task_bytes(io.BytesIO(b"x" * MAX_TASK_BYTES)) == b"x" * MAX_TASK_BYTES


# (input, format given, format of the error, start of the reason, line, column)
REAL_ERRORS: list[tuple[bytes | str, str | None, str, str, int | None, int | None]] = [
    ("elastic_config:\n  min_replicas: [1, 2\n", None, "yaml", "malformed YAML: while parsing a flow sequence", 3, 1),
    ("elastic_config:\n\tmin_replicas: 1\n", None, "yaml", "malformed YAML: while scanning for the next token", 2, 1),
    (
        "elastic_config:\n  min_replicas: 1\n---\nworker_replicas: {}\n",
        None,
        "yaml",
        "malformed YAML: expected a single document",
        3,
        1,
    ),
    ("{elastic_config: {min_replicas: [}}", None, "yaml", "malformed YAML:", 1, 34),
    ('{"elasticConfig": {"minReplicas": 1,}}', "json", "json", "malformed JSON: Expecting property name", 1, 37),
    ('{"elasticConfig": {"minReplicas": 1,,}}', None, "json", "malformed JSON: Expecting property name", 1, 37),
    ("[1,2,3]", "json", "json", "expected an object of task fields at the top level, got list", None, None),
    ("[1,2,3]", None, "json", "expected an object of task fields at the top level, got list", None, None),
    ("42", "json", "json", "expected an object of task fields at the top level, got int", None, None),
    ("42", None, "yaml", "expected an object of task fields at the top level, got int", None, None),
    ("null", "json", "json", "expected an object of task fields at the top level, got null", None, None),
    ("- a\n- b\n", None, "yaml", "expected an object of task fields at the top level, got list", None, None),
    ("", "json", "json", "malformed JSON: Expecting value", 1, 1),
    (
        "elastic_config { min_replicas: 1 max_replicas: }",
        None,
        "textproto",
        "bad textproto: Couldn't parse integer",
        1,
        48,
    ),
    ("elastic_config {\n  min_replicas: 1\n", None, "textproto", 'bad textproto: Expected "}"', 2, 17),
    ("elastic_config:\n  min_replicas: 1\n", "textproto", "textproto", "bad textproto: Expected", 2, 3),
    ('{"elasticConfig": {"minReplicas": 1}, "elasticConfig": {}}', None, "json", "the key appears twice", None, None),
    (
        "elastic_config: {}\nelastic_config: {}\n",
        "yaml",
        "yaml",
        "malformed YAML: the key 'elastic_config' appears twice",
        2,
        1,
    ),
    (
        '{"elasticConfig": {"minReplicas": 1, "min_replicas": 2}}',
        None,
        "json",
        "given twice, as 'minReplicas' and 'min_replicas'",
        None,
        None,
    ),
    (
        '{"elasticConfig": {"minReplicas": 1' + "0" * 5000 + "}}",
        None,
        "json",
        "malformed JSON: Exceeds the limit",
        None,
        None,
    ),
    (
        "elastic_config:\n  min_replicas: 1" + "0" * 5000 + "\n",
        None,
        "yaml",
        "an integer of 5,001 characters (at most 4,300 digits are read)",
        2,
        17,
    ),
    ("elastic_config:\n  rdzv_id: 2024-13-45\n", None, "yaml", "malformed YAML: month must be in 1..12", None, None),
    ("elastic_config:\n  rdzv_id: a\x07b\n", "yaml", "yaml", "malformed YAML: character #x0007 is not allowed", 2, 13),
    (
        b"elastic_config:\n  rdzv_id: \xff\xfe\n",
        "yaml",
        "yaml",
        "not valid UTF-8: byte 0xff (invalid start byte)",
        2,
        12,
    ),
    (b"elastic_config:\n  rdzv_id: caf\xe9\n", None, "", "not valid UTF-8: byte 0xe9", 2, 15),
    ("elastic_config:\n  min_replicas: 1\n".encode("utf-16"), "yaml", "yaml", "the input is UTF-16 text", None, None),
    ("elastic_config:\n  min_replicas: 1\n".encode("utf-16"), None, "", "the input is UTF-16 text", None, None),
    ("elastic_config:\n  min_replicas: 1\n".encode("utf-16-le"), None, "", "the input is UTF-16 text", None, None),
    ("elastic_config:\n  min_replicas: 1\n".encode("utf-32"), None, "", "the input is UTF-32 text", None, None),
]


@pytest.mark.parametrize(("data", "hint", "fmt", "reason", "line", "column"), REAL_ERRORS)
def test_errors_are_the_real_parsers_with_the_position(
    data: bytes | str, hint: Any, fmt: str, reason: str, line: int | None, column: int | None
) -> None:
    err = _decode_error(data, format=hint)
    assert err.reason.startswith(reason), err
    assert (err.format, err.line, err.column) == (fmt, line, column), err
    if line is not None:
        assert str(err).endswith(f"line {line}, column {column})") or f"line {line}, column {column}," in str(err)


def test_detected_formats() -> None:
    flow = "{elastic_config: {min_replicas: 1, max_replicas: 2, nproc_per_node: 1}}"
    assert ei.detect_format(flow) == "yaml" and ei.decode(flow).elastic_config.max_replicas == 2
    assert ei.detect_format("elastic_config { min_replicas: 1 }") == "textproto"
    assert ei.detect_format("elastic_config:\n  min_replicas: 1\n") == "yaml"
    assert ei.detect_format("elastic_config:\n\tmin_replicas: 1\n") == "yaml"  # its error is YAML's
    assert ei.detect_format(b"\xef\xbb\xbf{}") == "json"  # a UTF-8 BOM is dropped
    assert ei.decode(b"\xef\xbb\xbfelastic_config:\n  min_replicas: 3\n").elastic_config.min_replicas == 3
    assert ei.decode("# only a comment\n") == KubeflowTask()


@pytest.mark.parametrize(
    ("data", "offset", "reason"),
    [
        (bytes.fromhex(FLYTEKIT_HEX)[:-3], 4, "field 4: length 14 runs past the end (11 bytes left)"),
        (b"\xff\xff\xff\xff", 0, "a field key is cut off"),
        (bytes([0x22, 0x05, 0x0A, 0x01]), 0, "field 4: length 5 runs past the end (2 bytes left)"),
        (bytes([0x0F]), 0, "field 1: wire type 7 does not exist"),
        (
            bytes([0x22, 0x04, 0x0A, 0x02, 0xC3, 0x28]),
            4,
            "field 1 (ElasticConfig.rdzv_backend): the string is not UTF-8",
        ),
    ],
    ids=["truncated", "garbled", "bad-length", "bad-wire-type", "bad-utf8-string"],
)
def test_binary_errors_give_the_byte_offset(data: bytes, offset: int, reason: str) -> None:
    for hint in ("binary", None):
        err = _decode_error(data, format=hint)
        assert (err.format, err.offset) == ("binary", offset), err
        assert reason in err.reason, err


def test_echoed_input_is_cut() -> None:
    line = "elastic_config { " + "rdzv_options { key: 'k' } " * 20_000 + "bogus: 1 }"
    err = _decode_error(line, format="textproto")
    assert err.field == "bogus" and (err.line, err.format) == (1, "textproto")
    err = _decode_error("elastic_config { rdzv_id: " + "{" * 100_000, format="textproto")
    assert "'elastic_config" not in str(err)
    err = _decode_error('{"elasticConfig": {"rdzvId": ["' + "x" * 100_000 + '"]}}', format="json")
    assert err.field == "elastic_config.rdzv_id"
    err = _decode_error({"x" * 100_000: 1})
    assert len(err.field) <= 120


# --------------------------------------------------------------------------- Python API types (issue #9)


@pytest.mark.parametrize("value", [None, 42, 1.5, [], object()], ids=["None", "int", "float", "list", "object"])
def test_decode_of_a_wrong_type_is_a_type_error(value: Any) -> None:
    with pytest.raises(TypeError, match="takes a serialized task as bytes or str, or the custom dict"):
        ei.decode(value)
    with pytest.raises(TypeError, match="detect_format"):
        ei.detect_format(value)


def test_decode_takes_bytes_like_and_the_custom_dict() -> None:
    data = bytes.fromhex(FLYTEKIT_HEX)
    task = ei.decode(data)
    assert ei.decode(bytearray(data)) == task == ei.decode(memoryview(data))
    assert ei.decode(FLYTEKIT_CUSTOM) == task == ei.from_custom(FLYTEKIT_CUSTOM)
    assert ei.decode({"workers": 2}, task_type_version=0) == LegacyTask(workers=2)
    with pytest.raises(TypeError, match="leave out format"):
        ei.decode(FLYTEKIT_CUSTOM, format="json")
    with pytest.raises(ei.UnsupportedVersionError):
        ei.decode(b"", task_type_version=[1])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "hint"),
    [
        (None, "got None"),
        (3, "got int"),
        (ei.ElasticConfig(), "got the message elastic_idl.plugins.v1.ElasticConfig"),
    ],
    ids=["None", "int", "not-a-task"],
)
def test_a_task_argument_of_the_wrong_type_names_what_to_pass(value: Any, hint: str) -> None:
    for fn in (ei.validate, ei.violations, ei.to_custom, ei.extension_fields, ei.view, ei.to_launch_spec):
        with pytest.raises(TypeError) as info:
            fn(value)
        assert "expected a task message" in str(info.value) and hint in str(info.value), (fn, info.value)


@pytest.mark.parametrize(
    "value",
    [FLYTEKIT_CUSTOM, bytes.fromhex(FLYTEKIT_HEX), ei.encode(ei.decode(bytes.fromhex(FLYTEKIT_HEX)), "textproto")],
    ids=["dict", "bytes", "str"],
)
def test_every_reader_takes_what_view_takes_and_decodes_it_strictly(value: Any) -> None:
    task = ei.decode(bytes.fromhex(FLYTEKIT_HEX))
    assert ei.view(value) == ei.view(task)
    assert ei.violations(value) == [] and ei.validate(value) is None
    assert ei.to_custom(value) == ei.to_custom(task)
    assert ei.extension_fields(value) == ei.extension_fields(task)
    assert ei.to_launch_spec(value) == ei.to_launch_spec(task)
    with pytest.raises(ei.DecodeError):  # strict: the same reader refuses what decode refuses
        ei.violations(b"\x08")


def _upstream_tasks() -> list[tuple[Any, Any, int]]:
    from flyteidl.plugins import pytorch_pb2 as up_legacy
    from flyteidl.plugins.kubeflow import pytorch_pb2 as up_kubeflow

    up = up_kubeflow.DistributedPyTorchTrainingTask()
    up.ParseFromString(bytes.fromhex(FLYTEKIT_HEX))
    legacy = up_legacy.DistributedPyTorchTrainingTask(workers=2)
    legacy.elastic_config.min_replicas = legacy.elastic_config.max_replicas = 2
    legacy.elastic_config.nproc_per_node = 1
    return [
        (up, ei.decode(bytes.fromhex(FLYTEKIT_HEX)), 1),
        (legacy, LegacyTask.FromString(legacy.SerializeToString()), 0),
    ]


def test_upstream_flyteidl_messages_are_accepted_everywhere() -> None:
    opts: dict[str, Any] = {"name": "job", "image": "img:1", "entrypoint": ["train.py"]}
    for up, ours, version in _upstream_tasks():
        assert ei.as_pb2(up) == ours
        assert ei.violations(up) == ei.violations(ours) == []
        ei.validate(up)
        assert ei.to_launch_spec(up) == ei.to_launch_spec(ours)
        assert ei.to_custom(up) == ei.to_custom(ours)
        assert ei.encode(up, "binary") == ei.encode(ours, "binary")
        assert ei.view(up) == ei.view(ours)
        job = ei.render_pytorchjob(up, ei.JobOptions(**opts), task_type_version=version)
        assert job == ei.render_pytorchjob(ours, ei.JobOptions(**opts), task_type_version=version)
        assert ei.Elastic.from_task(up) == ei.Elastic.from_task(ours)
    up, _, _ = _upstream_tasks()[0]
    with pytest.raises(ei.RenderError, match="declared 0"):
        ei.render_pytorchjob(up, ei.JobOptions(**opts), task_type_version=0)  # the skew check still applies
    assert ei.as_pb2(up.elastic_config) == ei.decode(bytes.fromhex(FLYTEKIT_HEX)).elastic_config


def test_format_of_path() -> None:
    assert format_of_path("a/task.JSON") == "json"
    assert format_of_path("task.yml") == format_of_path("t.yaml") == "yaml"
    assert format_of_path("t.textproto") == format_of_path("t.txtpb") == format_of_path("t.pbtxt") == "textproto"
    assert format_of_path("t.pb") == format_of_path("t.bin") == format_of_path("t.binpb") == "binary"
    assert format_of_path("task") is None and format_of_path("dir.json/task") is None
    assert format_of_path("t.txt") is None and format_of_path("-") is None


@pytest.mark.parametrize(
    ("raw", "version", "field"),
    [
        (bytes([0x08, 0x01]), 1, "worker_replicas"),  # legacy `workers = 1` read as the kubeflow shape
        (bytes([0x0A, 0x02, 0x10, 0x02]), 0, "workers"),  # kubeflow worker_replicas read as legacy
        (bytes([0x22, 0x04, 0x12, 0x02, 0x08, 0x01]), 1, "elastic_config.min_replicas"),  # nested: LEN for a varint
    ],
)
def test_fast_decode_stays_strict_about_wire_types(raw: bytes, version: int, field: str) -> None:
    with pytest.raises(ei.DecodeError) as info:
        ei.decode(raw, format="binary", task_type_version=version)
    assert info.value.field == field


def test_fast_decode_walks_the_bytes_only_when_an_unknown_field_was_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    walked: list[bytes] = []
    from elastic_idl._task import codec as _codec

    walk = _codec._check_wire_types
    monkeypatch.setattr(_codec, "_check_wire_types", lambda raw, *a: walked.append(raw) or walk(raw, *a))
    clean = ei.encode(ei.from_custom({"elasticConfig": {"minReplicas": 1, "maxReplicas": 2}}), "binary")
    ei.decode(clean, format="binary")
    assert walked == []
    newer = bytes(clean) + bytes([0xF8, 0x3E, 0x01])  # field 999, a varint: a newer schema's field
    task = ei.decode(newer, format="binary")
    assert walked[0] == newer  # (then the walk recurses into the known messages)
    assert task.elastic_config.max_replicas == 2


def test_the_custom_dict_is_what_message_to_dict_writes_for_every_vector() -> None:
    from google.protobuf import json_format

    from elastic_idl._conformance import load_cases

    seen = 0
    for case in load_cases(Path(__file__).resolve().parent.parent / "contract" / "cases"):
        hex_file = case.path / "binary.hex"
        if not hex_file.is_file():
            continue
        task = ei.decode(bytes.fromhex(hex_file.read_text().strip()), task_type_version=case.task_type_version)
        try:
            expected = json_format.MessageToDict(task)
        except (json_format.SerializeToJsonError, ValueError):
            with pytest.raises(ei.EncodeError):
                ei.to_custom(task)
            continue
        assert ei.to_custom(task) == expected, case.name
        assert json.loads(ei.encode(task, "json")) == expected, case.name
        snake = json_format.MessageToDict(task, preserving_proto_field_name=True)
        assert yaml.safe_load(ei.encode(task, "yaml")) == snake, case.name
        seen += 1
    assert seen > 50


# ---------------------------------------------------------------- issue 18: errors that say what to write


@pytest.mark.parametrize(
    ("data", "fmt", "version", "field", "expected"),
    [
        (
            "elastic_config:\n  rdzv_options: {a: 1}\n",
            "yaml",
            1,
            "elastic_config.rdzv_options",
            "expected a list of RendezvousOption objects (key, value), got dict; write it as [{'key': 'a', 'value': '1'}]",
        ),
        (
            "elastic_config:\n  join_timeout: 900\n",
            "yaml",
            1,
            "elastic_config.join_timeout",
            'got 900 (a number of seconds is written with an s, as a string: "900s")',
        ),
        (
            '{"elasticConfig": {"joinTimeout": 1.5}}',
            "json",
            1,
            "elastic_config.join_timeout",
            'as a string: "1.5s"',
        ),
        (
            "workers: 2\n",
            "yaml",
            1,
            "workers",
            "read the input as task_type_version 0 (command line: --task-type-version 0)",
        ),
        ('{"workers": 2}', "json", 1, "workers", "'workers' is a field of the legacy task shape"),
        ("workers: 2\n", "textproto", 1, "workers", "legacy task shape: read the input as task_type_version 0"),
        (
            "worker_replicas:\n  replicas: 2\n",
            "yaml",
            0,
            "worker_replicas",
            "'worker_replicas' is a field of the kubeflow task shape: read the input as task_type_version 1",
        ),
        (
            "elastic_config:\n  min_replica: 1\n",
            "yaml",
            1,
            "elastic_config.min_replica",
            "did you mean 'min_replicas'?",
        ),
        ('{"elasticConfig": {"maxReplica": 1}}', "json", 1, "elastic_config.maxReplica", "did you mean 'maxReplicas'?"),
    ],
    ids=[
        "rdzv-options-mapping",
        "yaml-seconds",
        "json-seconds",
        "workers-yaml",
        "workers-json",
        "workers-textproto",
        "kubeflow-in-legacy",
        "typo-yaml",
        "typo-json",
    ],
)
def test_errors_say_what_to_write(data: str, fmt: str, version: int, field: str, expected: str) -> None:
    with pytest.raises(ei.DecodeError) as info:
        ei.decode(data, format=fmt, task_type_version=version)  # type: ignore[arg-type]
    assert info.value.field == field and expected in info.value.reason, info.value


# --------------------------------------------------------------------------- issue 29: spellings (items 9, 13)

SPELLING = json.loads((Path(__file__).resolve().parent.parent / "contract" / "spelling.json").read_text("utf-8"))
SUGGESTED = re.compile(r"did you mean '([^']*)'\?")


@pytest.mark.parametrize("vector", SPELLING["decode"], ids=lambda v: v["name"])
def test_spelling_vectors_decode(vector: dict[str, Any]) -> None:
    """contract/spelling.json, which the Go backend passes too: short enum names, and what a typo is told."""
    data, fmt, version = vector["input"], vector["format"], vector["task_type_version"]
    if "custom" in vector:
        task = ei.decode(data, format=fmt, task_type_version=version)
        assert ei.to_custom(task) == vector["custom"]
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the tolerant decode (the backend's) takes them too, naming nothing
            assert ei.decode(data, format=fmt, task_type_version=version, strict=False) == task
        if fmt == "json":
            assert ei.from_custom(json.loads(data), task_type_version=version) == task
            # and the YAML a user writes, with the same values
            assert ei.decode(yaml.safe_dump(json.loads(data)), format="yaml", task_type_version=version) == task
        return
    with pytest.raises(ei.DecodeError) as info:
        ei.decode(data, format=fmt, task_type_version=version)
    found = SUGGESTED.search(info.value.reason)
    assert {"field": info.value.field, "suggestion": found.group(1) if found else None} == vector["error"]


@pytest.mark.parametrize("vector", SPELLING["close_match"], ids=lambda v: v["description"][:40])
def test_spelling_vectors_close_match(vector: dict[str, Any]) -> None:
    from elastic_idl._errors import close_match

    assert close_match(vector["word"], vector["known"]) == vector["match"]


def test_every_enum_value_reads_by_its_short_name_in_every_case_and_is_written_by_its_name() -> None:
    """Issue 29 item 9: YAML needed START_METHOD_SPAWN where Elastic() and torchrun take spawn."""
    from elastic_idl._task.enums import ENUM_SHORT_NAMES, enum_value_name
    from elastic_idl._task.messages import schema_messages

    enum_fields = [(d, f) for d in schema_messages().values() for f in d.fields if f.enum_type is not None]
    assert {f.enum_type.full_name for _, f in enum_fields} == set(ENUM_SHORT_NAMES)  # every enum of the schema
    for _, f in enum_fields:
        table = ENUM_SHORT_NAMES[f.enum_type.full_name]
        assert list(table) == [v.name for v in f.enum_type.values]
        for name, short in table.items():
            camel = "".join(w.capitalize() for w in short.split("_"))  # OnFailure, CoreComplex
            for text in (name, short, short.upper(), camel, short.replace("_", "-")):
                assert enum_value_name(f.enum_type, text) == name, (f.full_name, text)
    # in a file: YAML writes them back by name
    task = ei.decode("elastic_config: {start_method: spawn}\nworker_replicas: {common: {restart_policy: OnFailure}}\n")
    assert ei.encode(task, "yaml") == ei.encode(
        ei.decode(
            "elastic_config: {start_method: START_METHOD_SPAWN}\n"
            "worker_replicas: {common: {restart_policy: RESTART_POLICY_ON_FAILURE}}\n"
        ),
        "yaml",
    )
    assert "START_METHOD_SPAWN" in ei.encode(task, "yaml") and "spawn" not in ei.encode(task, "yaml")


def test_short_names_need_the_whole_short_name() -> None:
    from elastic_idl._task.enums import enum_value_name
    from elastic_idl.plugins.v1 import elastic_pb2

    start = elastic_pb2.DESCRIPTOR.enum_types_by_name["StartMethod"]
    for text in ("", "_", "-", "spa", "start_method_spawn", "METHOD_SPAWN", " spawn", "spawn\n", "1"):
        assert enum_value_name(start, text) is None, text
