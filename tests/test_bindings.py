"""The two generated bindings agree: protobuf ``_pb2`` and betterproto dataclasses.

What must hold: for every message, betterproto re-encodes the ``_pb2`` bytes
byte for byte, and the runtime's JSON (always made through ``_pb2``:
``as_pb2`` converts betterproto through its bytes) is identical.

Where betterproto differs, the difference is pinned exactly, so that a change in
betterproto fails here:
- google.protobuf.Duration/Timestamp become timedelta/datetime: sub-microsecond
  nanos are lost, a zero value set explicitly is dropped, negative durations come
  back with a positive ``nanos`` (a different, invalid Duration), and the largest
  durations round up past Duration's range;
- a sub-message set to an empty message when built natively is not written
  (after a parse from the wire it is kept);
- its own JSON (``to_dict``/``to_json``) writes enum names without the enum's
  prefix (``FORK`` for ``START_METHOD_FORK``), durations as ``"1.000s"``/``"1e-06s"``
  (and 11 us as ``"1.1e-050s"``, a wrong value), cannot read protobuf's JSON enum
  names back (``from_dict`` raises), and raises on an enum number the schema
  does not define; building a message with deprecated fields set warns.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib
import json
import re
import warnings
from decimal import Decimal
from typing import Any

import betterproto
import pytest
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from hypothesis import given
from hypothesis import strategies as st

from elastic_idl._task.messages import as_pb2
from elastic_idl.core.v1 import resources_pb2
from elastic_idl.plugins.kubeflow.v1 import common_pb2
from elastic_idl.plugins.kubeflow.v1 import pytorch_pb2 as kubeflow_pb2
from elastic_idl.plugins.v1 import elastic_pb2, failure_pb2
from elastic_idl.plugins.v1 import pytorch_pb2 as legacy_pb2

PB2_MODULES = [resources_pb2, common_pb2, kubeflow_pb2, elastic_pb2, failure_pb2, legacy_pb2]
#: The messages the runtime reads and writes whole; every other message is inside one of them.
TOP = [
    legacy_pb2.DistributedPyTorchTrainingTask,
    kubeflow_pb2.DistributedPyTorchTrainingTask,
    elastic_pb2.ElasticConfig,
    failure_pb2.FailureReport,
]
TOP_IDS = ["legacy_task", "kubeflow_task", "elastic_config", "failure_report"]
TIME_TYPES = ("google.protobuf.Duration", "google.protobuf.Timestamp")


def _all_descriptors() -> list[Descriptor]:
    out: list[Descriptor] = []
    todo = [d for m in PB2_MODULES for d in m.DESCRIPTOR.message_types_by_name.values()]
    while todo:
        d = todo.pop()
        out.append(d)
        todo.extend(d.nested_types)
    return sorted(out, key=lambda d: d.full_name)


def bp_class(desc: Descriptor) -> type[betterproto.Message]:
    """The betterproto twin of a _pb2 descriptor: nested names are joined (Resources.ResourceEntry -> ResourcesResourceEntry)."""
    package = desc.file.package
    module = importlib.import_module(f"elastic_idl.betterproto.{package.removeprefix('elastic_idl.')}")
    cls: type[betterproto.Message] = getattr(module, desc.full_name[len(package) + 1 :].replace(".", ""))
    return cls


def bp_parse(pb: Message) -> Any:
    return bp_class(pb.DESCRIPTOR)().parse(pb.SerializeToString())


def _repeated(f: FieldDescriptor) -> bool:
    rep = getattr(f, "is_repeated", None)
    return bool(rep) if rep is not None else f.label == FieldDescriptor.LABEL_REPEATED


def _time_fields_cleared(msg: Message) -> Message:
    """A copy with every Duration and Timestamp field cleared, at any depth."""
    out = type(msg)()
    out.CopyFrom(msg)
    todo = [out]
    while todo:
        m = todo.pop()
        for f, value in m.ListFields():
            if f.message_type is None:
                continue
            if f.message_type.full_name in TIME_TYPES:
                m.ClearField(f.name)
            elif _repeated(f):
                todo.extend(value)
            else:
                todo.append(value)
    return out


# ----------------------------------------------------------------- same schema


@pytest.mark.parametrize("desc", _all_descriptors(), ids=lambda d: d.full_name)
def test_every_message_has_a_betterproto_twin_with_the_same_fields(desc: Descriptor) -> None:
    cls = bp_class(desc)
    bp_fields = {f.name: f.metadata["betterproto"] for f in dataclasses.fields(cls)}
    assert {name: meta.number for name, meta in bp_fields.items()} == {f.name: f.number for f in desc.fields}
    for f in desc.fields:
        group = bp_fields[f.name].group
        assert group == (f.containing_oneof.name if f.containing_oneof is not None else None), f.name


def test_descriptor_count_covers_both_shapes_and_failures() -> None:
    names = {d.full_name for d in _all_descriptors()}
    assert len(names) == 11
    assert "elastic_idl.core.v1.Resources.ResourceEntry" in names
    assert "elastic_idl.plugins.v1.FailureRecord" in names


# ----------------------------------------------------------------- bytes and runtime JSON


@pytest.mark.parametrize("cls", TOP, ids=TOP_IDS)
@given(data=st.data())
def test_identical_bytes_and_runtime_json(proto_messages: Any, data: st.DataObject, cls: type[Message]) -> None:
    pb = data.draw(proto_messages(cls, bp_safe=True))
    wire = pb.SerializeToString()
    bp = bp_class(cls.DESCRIPTOR)().parse(wire)
    assert bytes(bp) == wire
    back = as_pb2(bp)
    assert type(back) is cls
    assert back == pb
    assert json_format.MessageToDict(back) == json_format.MessageToDict(pb)


@pytest.mark.parametrize("cls", TOP, ids=TOP_IDS)
@given(data=st.data())
def test_only_time_fields_change_outside_betterproto_safe_values(
    proto_messages: Any, data: st.DataObject, cls: type[Message]
) -> None:
    pb = data.draw(proto_messages(cls))
    back = as_pb2(bp_parse(pb))
    assert _time_fields_cleared(back) == _time_fields_cleared(pb)
    if _time_fields_cleared(pb) == pb:
        assert back.SerializeToString() == pb.SerializeToString()


# ----------------------------------------------------------------- betterproto's own JSON


def _stripped(enum_name: str, value_name: str) -> str:
    """betterproto's name for an enum value: the enum's UPPER_SNAKE prefix removed when present."""
    prefix = re.sub(r"(?<!^)(?=[A-Z])", "_", enum_name).upper() + "_"
    return value_name[len(prefix) :] if value_name.startswith(prefix) else value_name


def _canonical(obj: Any, desc: Descriptor, *, from_bp: bool) -> Any:
    """A JSON dict with time values as numbers and enum names as protobuf's, so
    that the two JSON forms compare equal exactly when they differ only as documented."""
    out: dict[str, Any] = {}
    fields = {f.json_name: f for f in desc.fields}
    for key, value in obj.items():
        f = fields[key]
        items = value if _repeated(f) else [value]
        conv: list[Any] = []
        for v in items:
            if f.message_type is not None and f.message_type.full_name == "google.protobuf.Duration":
                assert isinstance(v, str)
                assert v.endswith("s")
                # Below 0.1 ms betterproto writes Python's exponent form, padded into a
                # wrong value ("1.1e-050s" for 11 us): compare only that it does so.
                tiny = ("e-" in v) if from_bp else Decimal(v[:-1]) < Decimal("0.0001")
                conv.append("exponent form" if tiny else Decimal(v[:-1]))
            elif f.message_type is not None and f.message_type.full_name == "google.protobuf.Timestamp":
                ts = Timestamp()
                ts.FromJsonString(v)
                conv.append((ts.seconds, ts.nanos))
            elif f.message_type is not None:
                conv.append(_canonical(v, f.message_type, from_bp=from_bp))
            elif f.enum_type is not None and from_bp:
                (name,) = [e.name for e in f.enum_type.values if _stripped(f.enum_type.name, e.name) == v]
                conv.append(name)
            else:
                conv.append(v)
        out[key] = conv if _repeated(f) else conv[0]
    return out


@pytest.mark.parametrize("cls", TOP, ids=TOP_IDS)
@given(data=st.data())
def test_betterproto_json_differs_only_in_enum_names_and_time_formats(
    proto_messages: Any, data: st.DataObject, cls: type[Message]
) -> None:
    pb = data.draw(proto_messages(cls, bp_safe=True))
    bp = bp_parse(pb)
    own = bp.to_dict()
    assert _canonical(own, cls.DESCRIPTOR, from_bp=True) == _canonical(
        json_format.MessageToDict(pb), cls.DESCRIPTOR, from_bp=False
    )
    # betterproto's own JSON round trip: exact but for the durations it wrote in exponent form.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # deprecated fields set (pinned below)
        again = as_pb2(bp_class(cls.DESCRIPTOR)().from_dict(own))
    if "e-" not in json.dumps(own):
        assert again == pb
    else:
        assert _time_fields_cleared(again) == _time_fields_cleared(pb)


def test_enum_names_betterproto_writes() -> None:
    pb = kubeflow_pb2.DistributedPyTorchTrainingTask()
    pb.elastic_config.start_method = elastic_pb2.START_METHOD_FORK
    pb.elastic_config.nproc_policy = elastic_pb2.NPROC_POLICY_AUTO
    pb.elastic_config.numa_binding = elastic_pb2.NUMA_BINDING_CORE_COMPLEX
    pb.worker_replicas.common.restart_policy = common_pb2.RESTART_POLICY_ON_FAILURE
    pb.run_policy.clean_pod_policy = common_pb2.CLEANPOD_POLICY_ALL
    pb.worker_replicas.resources.limits.add(name=resources_pb2.Resources.MEMORY, value="4Gi")
    assert bp_parse(pb).to_dict() == {
        "workerReplicas": {
            "resources": {"limits": [{"name": "MEMORY", "value": "4Gi"}]},
            "common": {"restartPolicy": "ON_FAILURE"},
        },
        "runPolicy": {"cleanPodPolicy": "CLEANPOD_POLICY_ALL"},  # prefix CLEAN_POD_POLICY_ does not match: kept
        "elasticConfig": {"nprocPolicy": "AUTO", "startMethod": "FORK", "numaBinding": "CORE_COMPLEX"},
    }
    assert json_format.MessageToDict(pb)["elasticConfig"] == {
        "nprocPolicy": "NPROC_POLICY_AUTO",
        "startMethod": "START_METHOD_FORK",
        "numaBinding": "NUMA_BINDING_CORE_COMPLEX",
    }
    # betterproto cannot read protobuf's JSON (the flytekit custom dict) when it names such an enum value.
    with pytest.raises(ValueError, match="RESTART_POLICY_ON_FAILURE"):
        bp_class(pb.DESCRIPTOR)().from_dict(json_format.MessageToDict(pb))


@pytest.mark.parametrize(
    ("seconds", "nanos", "protobuf_json", "betterproto_json"),
    [
        (1, 0, "1s", "1.000s"),
        (0, 1000, "0.000001s", "1e-06s"),
        (1, 500_000_000, "1.500s", "1.500s"),
        (900, 0, "900s", "900.000s"),
        (0, 100_000, "0.000100s", "0.000100s"),
        (0, 10_000, "0.000010s", "1e-05s"),
        (0, 11_000, "0.000011s", "1.1e-050s"),  # 1.1e-50 s: betterproto pads the exponent
        (3, 11_000, "3.000011s", "3.000011s"),
    ],
)
def test_duration_json_strings(seconds: int, nanos: int, protobuf_json: str, betterproto_json: str) -> None:
    pb = elastic_pb2.ElasticConfig()
    pb.join_timeout.seconds, pb.join_timeout.nanos = seconds, nanos
    assert json_format.MessageToDict(pb) == {"joinTimeout": protobuf_json}
    assert bp_parse(pb).to_dict() == {"joinTimeout": betterproto_json}
    # betterproto reads its own string back as the value that string means.
    back = as_pb2(bp_class(pb.DESCRIPTOR)().from_dict({"joinTimeout": betterproto_json}))
    if betterproto_json == "1.1e-050s":
        assert not back.HasField("join_timeout")  # 1.1e-50 s is 0: the duration is gone
    else:
        assert back == pb


# ----------------------------------------------------------------- pinned byte-level differences


@pytest.mark.parametrize(
    ("seconds", "nanos", "after"),
    [
        (1, 500, (1, 0)),  # sub-microsecond nanos lost
        (0, 1, None),  # ... down to zero, and then the field is dropped
        (0, 0, None),  # an explicitly set zero Duration is dropped
        (-1, -500_000_000, (-1, 500_000_000)),  # -1.5 s comes back as an invalid mixed-sign Duration
        (0, -1000, (0, 999_999_000)),  # -1 us comes back as +0.999999 s
        (315_576_000_000, 999_999_999, (315_576_000_001, 0)),  # rounds past the largest valid Duration
        (12, 345_678_000, (12, 345_678_000)),  # whole microseconds are exact
    ],
)
def test_duration_rewrites(seconds: int, nanos: int, after: tuple[int, int] | None) -> None:
    pb = elastic_pb2.ElasticConfig(min_replicas=1)
    pb.join_timeout.seconds, pb.join_timeout.nanos = seconds, nanos
    back = as_pb2(bp_parse(pb))
    if after is None:
        assert not back.HasField("join_timeout")
    else:
        assert back.HasField("join_timeout")
        assert (back.join_timeout.seconds, back.join_timeout.nanos) == after
    assert back.min_replicas == 1


def test_mixed_sign_duration_from_betterproto_is_not_valid_json() -> None:
    pb = elastic_pb2.ElasticConfig()
    pb.join_timeout.seconds, pb.join_timeout.nanos = -1, -500_000_000
    assert json_format.MessageToDict(pb) == {"joinTimeout": "-1.500s"}
    with pytest.raises(json_format.SerializeToJsonError, match="Sign mismatch"):
        json_format.MessageToDict(as_pb2(bp_parse(pb)))


@pytest.mark.parametrize(
    ("seconds", "nanos", "after"),
    [
        (1, 1500, (1, 1000)),  # sub-microsecond nanos lost
        (0, 0, None),  # the epoch, set explicitly, is dropped
        (253_402_300_799, 999_999_999, (253_402_300_799, 999_999_000)),
        (-62_135_596_800, 0, (-62_135_596_800, 0)),  # 0001-01-01 is exact
    ],
)
def test_timestamp_rewrites(seconds: int, nanos: int, after: tuple[int, int] | None) -> None:
    pb = failure_pb2.FailureRecord(rank=3)
    pb.time.seconds, pb.time.nanos = seconds, nanos
    back = as_pb2(bp_parse(pb))
    assert back.rank == 3
    if after is None:
        assert not back.HasField("time")
    else:
        assert (back.time.seconds, back.time.nanos) == after


def test_empty_sub_message_presence() -> None:
    from elastic_idl.betterproto.plugins import v1 as bp_v1
    from elastic_idl.betterproto.plugins.kubeflow import v1 as bp_kubeflow

    pb = kubeflow_pb2.DistributedPyTorchTrainingTask()
    pb.run_policy.SetInParent()
    pb.elastic_config.SetInParent()
    assert pb.SerializeToString().hex() == "1a002200"
    # From the wire, betterproto keeps set-but-empty sub-messages ...
    assert bytes(bp_parse(pb)).hex() == "1a002200"
    assert as_pb2(bp_parse(pb)).HasField("run_policy")
    # ... but built natively, an empty sub-message is not written: presence is lost.
    native = bp_kubeflow.DistributedPyTorchTrainingTask(
        run_policy=bp_kubeflow.RunPolicy(), elastic_config=bp_v1.ElasticConfig()
    )
    assert bytes(native) == b""
    assert not as_pb2(native).HasField("elastic_config")
    # A non-empty one is written, with its zero-valued Duration dropped.
    native = bp_kubeflow.DistributedPyTorchTrainingTask(
        elastic_config=bp_v1.ElasticConfig(join_timeout=dt.timedelta(0), rdzv_backend="c10d")
    )
    assert bytes(native).hex() == "22060a0463313064"
    # Oneof members keep presence at zero in both bindings.
    record = failure_pb2.FailureRecord(exit_code=0)
    assert bytes(bp_parse(record)) == record.SerializeToString() == bytes.fromhex("2800")
    assert bytes(bp_v1.FailureRecord(exit_code=0)) == bytes.fromhex("2800")


def test_deprecated_fields_warn_when_built_natively() -> None:
    from elastic_idl.betterproto.plugins.kubeflow import v1 as bp_kubeflow

    # What flytekit 1.16 writes: the worker count in the deprecated `replicas` field.
    custom = {"workerReplicas": {"replicas": 3}}
    pb = json_format.ParseDict(custom, kubeflow_pb2.DistributedPyTorchTrainingTask())
    with pytest.warns(DeprecationWarning, match=r"DistributedPyTorchTrainingReplicaSpec\.replicas is deprecated"):
        bp = bp_kubeflow.DistributedPyTorchTrainingTask().from_dict(custom)
    assert bytes(bp) == pb.SerializeToString()
    with pytest.warns(DeprecationWarning, match="image is deprecated"):
        bp_kubeflow.DistributedPyTorchTrainingReplicaSpec(image="x")
    # Parsing the same bytes does not warn (warnings are errors in this suite).
    assert bytes(bp_parse(pb)) == pb.SerializeToString()


def test_unknown_enum_number() -> None:
    pb = elastic_pb2.ElasticConfig(start_method=99)
    bp = bp_parse(pb)
    assert bytes(bp) == pb.SerializeToString()  # kept on the wire
    assert json_format.MessageToDict(as_pb2(bp)) == {"startMethod": 99}  # the runtime's JSON: the number
    with pytest.raises(ValueError, match="not a valid StartMethod"):
        bp.to_dict()  # betterproto's own JSON cannot write it


def test_unknown_fields_survive_both_bindings() -> None:
    wire = elastic_pb2.ElasticConfig(min_replicas=2).SerializeToString() + bytes.fromhex("a81f01")  # field 501
    assert elastic_pb2.ElasticConfig.FromString(wire).SerializeToString() == wire
    bp = bp_class(elastic_pb2.ElasticConfig.DESCRIPTOR)().parse(wire)
    assert bytes(bp) == wire
    assert as_pb2(bp).SerializeToString() == wire
