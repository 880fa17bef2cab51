"""Wire and JSON compatibility with the real upstream ``flyteidl`` and ``flyteidl2`` packages.

Both task shapes, both directions, binary and JSON (camelCase ``MessageToDict``,
what flytekit and Flyte 2's ``flyteplugins-pytorch`` put in ``TaskTemplate.custom``),
compared field by field, against Flyte 1's ``flyteidl`` and Flyte 2's ``flyteidl2``
(which declares the same messages under the package ``flyteidl2.plugins``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from typing import Any

import pytest
from flyteidl.plugins import pytorch_pb2 as up_legacy
from flyteidl.plugins.kubeflow import pytorch_pb2 as up_kubeflow
from flyteidl2.plugins import pytorch_pb2 as up2_legacy
from flyteidl2.plugins.kubeflow import pytorch_pb2 as up2_kubeflow
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.unknown_fields import UnknownFieldSet
from hypothesis import given
from hypothesis import strategies as st

import elastic_idl as ei
from elastic_idl.plugins.kubeflow.v1 import pytorch_pb2 as our_kubeflow
from elastic_idl.plugins.v1 import pytorch_pb2 as our_legacy

EXTENSION_MIN = 100

#: Our message per task_type_version: 0 the legacy shape, 1 the kubeflow shape.
OURS: dict[int, type[Message]] = {
    0: our_legacy.DistributedPyTorchTrainingTask,
    1: our_kubeflow.DistributedPyTorchTrainingTask,
}
#: The upstream peers' messages per task_type_version: Flyte 1's flyteidl and Flyte 2's flyteidl2.
UPSTREAMS: dict[str, dict[int, type[Message]]] = {
    "flyteidl": {0: up_legacy.DistributedPyTorchTrainingTask, 1: up_kubeflow.DistributedPyTorchTrainingTask},
    "flyteidl2": {0: up2_legacy.DistributedPyTorchTrainingTask, 1: up2_kubeflow.DistributedPyTorchTrainingTask},
}
SHAPE_NAMES = {0: "legacy", 1: "kubeflow"}
#: (name, task_type_version, ours, upstream): every shape against every upstream peer
SHAPES = [
    (f"{peer}-{SHAPE_NAMES[version]}", version, OURS[version], up)
    for peer, messages in UPSTREAMS.items()
    for version, up in messages.items()
]
SHAPE_IDS = [s[0] for s in SHAPES]


def _repeated(f: FieldDescriptor) -> bool:
    rep = getattr(f, "is_repeated", None)
    return bool(rep) if rep is not None else f.label == FieldDescriptor.LABEL_REPEATED


def _enum_name(f: FieldDescriptor, number: int) -> str:
    assert f.enum_type is not None
    v = f.enum_type.values_by_number.get(number)
    return v.name if v is not None else str(number)


def assert_same(ours: Message, theirs: Message, path: str = "") -> None:
    """Every field upstream knows holds the same value in both messages; ours may
    additionally hold extension fields (>= 100, which upstream keeps as unknown)."""
    d_ours, d_up = ours.DESCRIPTOR, theirs.DESCRIPTOR
    assert d_ours.name == d_up.name, path
    assert set(d_up.fields_by_name) <= set(d_ours.fields_by_name), path
    for f_up in d_up.fields:
        f = d_ours.fields_by_name[f_up.name]
        where = f"{path}.{f.name}".lstrip(".")
        a, b = getattr(ours, f.name), getattr(theirs, f_up.name)
        if _repeated(f):
            assert len(a) == len(b), where
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                if f.message_type is not None:
                    assert_same(x, y, f"{where}[{i}]")
                elif f.enum_type is not None:
                    assert _enum_name(f, x) == _enum_name(f_up, y), f"{where}[{i}]"
                else:
                    assert x == y, f"{where}[{i}]"
        elif f.message_type is not None:
            assert ours.HasField(f.name) == theirs.HasField(f_up.name), where
            if ours.HasField(f.name):
                assert_same(a, b, where)
        elif f.enum_type is not None:
            assert _enum_name(f, a) == _enum_name(f_up, b), where
        else:
            assert a == b, where


def _descriptor_pairs(ours: Descriptor, up: Descriptor) -> list[tuple[Descriptor, Descriptor]]:
    pairs, todo, seen = [], [(ours, up)], set()
    while todo:
        o, u = todo.pop()
        if u.full_name in seen:
            continue
        seen.add(u.full_name)
        pairs.append((o, u))
        for fu in u.fields:
            if fu.message_type is not None:
                todo.append((o.fields_by_name[fu.name].message_type, fu.message_type))
    return pairs


# ----------------------------------------------------------------- schema


@pytest.mark.parametrize(("name", "version", "ours", "up"), SHAPES, ids=SHAPE_IDS)
def test_every_upstream_field_exists_with_same_number_type_and_json_name(
    name: str, version: int, ours: type[Message], up: type[Message]
) -> None:
    pairs = _descriptor_pairs(ours.DESCRIPTOR, up.DESCRIPTOR)
    names = {u.full_name for _, u in pairs}
    expected = {"DistributedPyTorchTrainingTask", "ElasticConfig"}
    if version == 1:
        expected |= {"DistributedPyTorchTrainingReplicaSpec", "CommonReplicaSpec", "RunPolicy", "Resources"}
        expected |= {"ResourceEntry"}
    assert {n.rsplit(".", 1)[-1] for n in names} == expected
    for o, u in pairs:
        assert o.name == u.name
        for fu in u.fields:
            fo = o.fields_by_name[fu.name]
            assert (fo.number, fo.type, _repeated(fo), fo.json_name) == (
                fu.number,
                fu.type,
                _repeated(fu),
                fu.json_name,
            ), f"{o.full_name}.{fo.name}"
            assert fo.GetOptions().deprecated == fu.GetOptions().deprecated, f"{o.full_name}.{fo.name}"
            if fu.enum_type is not None:
                assert fo.enum_type is not None
                assert [(v.name, v.number) for v in fo.enum_type.values] == [
                    (v.name, v.number) for v in fu.enum_type.values
                ], fo.enum_type.full_name
        # Ours adds fields only to ElasticConfig, and only from number 100 on.
        extra = [f for f in o.fields if f.name not in u.fields_by_name]
        if o.name == "ElasticConfig":
            assert extra
            assert all(f.number >= EXTENSION_MIN for f in extra)
        else:
            assert extra == [], o.full_name


def test_no_upstream_file_path_or_package_is_reused() -> None:
    for cls in (our_legacy.DistributedPyTorchTrainingTask, our_kubeflow.DistributedPyTorchTrainingTask):
        fd = cls.DESCRIPTOR.file
        assert fd.name.startswith("elastic_idl/")
        assert fd.package.startswith("elastic_idl.")
        for dep in fd.dependencies:
            assert not dep.name.startswith("flyteidl"), dep.name


# ----------------------------------------------------------------- binary + JSON, both directions


def _json(msg: Message) -> dict[str, Any]:
    out: dict[str, Any] = json_format.MessageToDict(msg)
    return out


@pytest.mark.parametrize(("name", "version", "ours", "up"), SHAPES, ids=SHAPE_IDS)
@given(data=st.data())
def test_upstream_to_ours(
    proto_messages: Any, data: st.DataObject, name: str, version: int, ours: type[Message], up: type[Message]
) -> None:
    theirs = data.draw(proto_messages(up))
    wire = theirs.SerializeToString()
    mine = ours.FromString(wire)
    assert_same(mine, theirs)
    assert mine.SerializeToString() == wire
    assert len(UnknownFieldSet(mine)) == 0
    # JSON: the dict flytekit writes, read by ours with unknown fields rejected.
    custom = _json(theirs)
    parsed = json_format.ParseDict(custom, ours())
    assert_same(parsed, theirs)
    assert _json(parsed) == custom
    assert ei.from_custom(custom, task_type_version=version) == mine


@pytest.mark.parametrize(("name", "version", "ours", "up"), SHAPES, ids=SHAPE_IDS)
@given(data=st.data())
def test_ours_to_upstream(
    proto_messages: Any, data: st.DataObject, name: str, version: int, ours: type[Message], up: type[Message]
) -> None:
    mine = data.draw(proto_messages(ours, upstream_only=True))
    wire = mine.SerializeToString()
    theirs = up.FromString(wire)
    assert_same(mine, theirs)
    assert theirs.SerializeToString() == wire
    custom = ei.to_custom(mine, upstream=True)
    assert custom == _json(mine)
    strict = json_format.ParseDict(custom, up(), ignore_unknown_fields=False)
    assert_same(mine, strict)
    assert _json(strict) == custom


# Hand cases: what flytekit 1.16 emits, and every replica/run-policy corner.
FLYTEKIT_HEX = "0a020803220e0a04633130641001180320042802"  # Elastic(nnodes="1:3", nproc_per_node=4, max_restarts=2)


def _kubeflow_full(cls: type[Message]) -> Message:
    t: Any = cls()
    t.elastic_config.rdzv_backend = "c10d"
    t.elastic_config.min_replicas = 2
    t.elastic_config.max_replicas = 4
    t.elastic_config.nproc_per_node = 8
    t.elastic_config.max_restarts = 3
    t.worker_replicas.replicas = 4  # deprecated fields, as flytekit writes them
    t.worker_replicas.image = "ghcr.io/x/train:1"
    t.worker_replicas.restart_policy = 1
    t.worker_replicas.resources.requests.add(name=1, value="2")
    t.worker_replicas.resources.limits.add(name=3, value="4Gi")
    t.master_replicas.common.replicas = 1
    t.master_replicas.common.image = "ghcr.io/x/master:1"
    t.master_replicas.common.restart_policy = 2
    t.master_replicas.common.resources.limits.add(name=2, value="1")
    t.master_replicas.common.resources.limits.add(name=5, value="10Gi")
    t.run_policy.clean_pod_policy = 2
    t.run_policy.ttl_seconds_after_finished = 600
    t.run_policy.active_deadline_seconds = 3600
    t.run_policy.backoff_limit = 5
    return t


def _kubeflow_empty_subs(cls: type[Message]) -> Message:
    t: Any = cls()
    t.worker_replicas.common.resources.SetInParent()
    t.run_policy.SetInParent()
    t.elastic_config.SetInParent()
    return t


def _legacy(cls: type[Message]) -> Message:
    t: Any = cls(workers=3)
    t.elastic_config.min_replicas = 1
    t.elastic_config.max_replicas = 3
    t.elastic_config.rdzv_backend = "etcd-v2"
    return t


HAND_CASES = [
    ("flytekit", 1, lambda cls: cls.FromString(bytes.fromhex(FLYTEKIT_HEX))),
    ("kubeflow_full", 1, _kubeflow_full),
    ("kubeflow_empty_subs", 1, _kubeflow_empty_subs),
    ("kubeflow_negative", 1, lambda cls: cls(run_policy={"backoff_limit": -1}, elastic_config={"min_replicas": -3})),
    ("legacy", 0, _legacy),
    ("legacy_no_elastic", 0, lambda cls: cls(workers=2)),
]


@pytest.mark.parametrize("peer", list(UPSTREAMS))
@pytest.mark.parametrize(("case", "version", "build"), HAND_CASES, ids=[c[0] for c in HAND_CASES])
def test_hand_cases_both_directions(case: str, version: int, build: Any, peer: str) -> None:
    ours_cls = OURS[version]
    up_cls = UPSTREAMS[peer][version]
    mine, theirs = build(ours_cls), build(up_cls)
    assert mine.SerializeToString() == theirs.SerializeToString()
    assert up_cls.FromString(mine.SerializeToString()) == theirs
    assert ours_cls.FromString(theirs.SerializeToString()) == mine
    assert _json(mine) == _json(theirs)
    assert json_format.ParseDict(_json(mine), up_cls()) == theirs
    assert json_format.ParseDict(_json(theirs), ours_cls()) == mine
    assert_same(mine, theirs)


def test_flytekit_reference_bytes_and_custom() -> None:
    theirs = up_kubeflow.DistributedPyTorchTrainingTask.FromString(bytes.fromhex(FLYTEKIT_HEX))
    assert _json(theirs) == {
        "elasticConfig": {
            "maxReplicas": 3,
            "maxRestarts": 2,
            "minReplicas": 1,
            "nprocPerNode": 4,
            "rdzvBackend": "c10d",
        },
        "workerReplicas": {"replicas": 3},
    }
    mine = ei.from_custom(_json(theirs))
    assert ei.encode(mine, "binary") == bytes.fromhex(FLYTEKIT_HEX)


# The real SDK, in a subprocess: importing flytekitplugins.kfpytorch imports torch and warns.
_FLYTEKIT_SCRIPT = r"""
import json, warnings
warnings.simplefilter("ignore")
from flytekit import task
from flytekit.configuration import ImageConfig, SerializationSettings
from flytekitplugins.kfpytorch import CleanPodPolicy, Elastic, RunPolicy

configs = {
    "range": Elastic(nnodes="1:3", nproc_per_node=4, max_restarts=2),
    "fixed": Elastic(nnodes=2, nproc_per_node=1),
    "policy": Elastic(nnodes="2:4", run_policy=RunPolicy(clean_pod_policy=CleanPodPolicy.ALL, backoff_limit=2,
                                                         ttl_seconds_after_finished=60, active_deadline_seconds=600)),
}
settings = SerializationSettings(image_config=ImageConfig.auto_default_image())
out = {}
for name, cfg in configs.items():
    t = task(task_config=cfg)(lambda: None)
    out[name] = [t.task_type, t.task_type_version, t.get_custom(settings)]
print(json.dumps(out))
"""


def _sdk_customs_decode_field_by_field(script: str, up: type[Message]) -> dict[str, Any]:
    """Run an SDK's serialization script; each custom it prints is read by ours as by ``up``, field by field."""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    emitted: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(emitted) == {"range", "fixed", "policy"}
    for name, (task_type, version, custom) in emitted.items():
        assert (task_type, version) == ("pytorch", 1), name
        theirs = json_format.ParseDict(custom, up())
        mine = ei.from_custom(custom, task_type_version=version)
        assert_same(mine, theirs, name)
        assert ei.to_custom(mine, upstream=True) == custom
        assert ei.encode(mine, "binary") == theirs.SerializeToString()
    return emitted


def test_custom_from_real_flytekit_plugin_decodes_field_by_field() -> None:
    emitted = _sdk_customs_decode_field_by_field(_FLYTEKIT_SCRIPT, up_kubeflow.DistributedPyTorchTrainingTask)
    assert emitted["range"][2]["elasticConfig"] == {
        "rdzvBackend": "c10d",
        "minReplicas": 1,
        "maxReplicas": 3,
        "nprocPerNode": 4,
        "maxRestarts": 2,
    }
    assert emitted["policy"][2]["runPolicy"]["cleanPodPolicy"] == "CLEANPOD_POLICY_ALL"


# Flyte 2's SDK, in a subprocess too: flyteplugins.pytorch imports torch.
_FLYTE2_SCRIPT = r"""
import json, warnings
warnings.simplefilter("ignore")
import flyte
from flyte.models import SerializationContext
from flyteplugins.pytorch import Elastic
from flyteplugins.pytorch.task import RunPolicy

configs = {
    "range": Elastic(nnodes="1:3", nproc_per_node=4, max_restarts=2),
    "fixed": Elastic(nnodes=2, nproc_per_node=1),
    "policy": Elastic(nnodes="2:4", nproc_per_node=2, run_policy=RunPolicy(clean_pod_policy="all", backoff_limit=2,
                      ttl_seconds_after_finished=60, active_deadline_seconds=600)),
}
sctx = SerializationContext(version="v1")
out = {}
for name, cfg in configs.items():
    env = flyte.TaskEnvironment(name=f"env_{name}", plugin_config=cfg)
    t = env.task(lambda: None)
    out[name] = [t.task_type, t.task_type_version, t.custom_config(sctx)]
print(json.dumps(out))
"""


def test_custom_from_real_flyte2_plugin_decodes_field_by_field() -> None:
    """What Flyte 2's flyteplugins-pytorch writes: flyteidl2's message as JSON, read by ours."""
    emitted = _sdk_customs_decode_field_by_field(_FLYTE2_SCRIPT, up2_kubeflow.DistributedPyTorchTrainingTask)
    for name, (_, _, custom) in emitted.items():
        # The same bytes are Flyte 1's message too: a backend of either line reads them.
        wire = json_format.ParseDict(custom, up2_kubeflow.DistributedPyTorchTrainingTask()).SerializeToString()
        assert up_kubeflow.DistributedPyTorchTrainingTask.FromString(wire) == (
            json_format.ParseDict(custom, up_kubeflow.DistributedPyTorchTrainingTask())
        ), name
    # Flyte 2's defaults on the wire: max_restarts 3 (flytekit's 0), worker replicas = max.
    assert emitted["fixed"][2] == {
        "workerReplicas": {"replicas": 2},
        "elasticConfig": {
            "rdzvBackend": "c10d",
            "minReplicas": 2,
            "maxReplicas": 2,
            "nprocPerNode": 1,
            "maxRestarts": 3,
        },
    }
    assert emitted["policy"][2]["runPolicy"] == {
        "cleanPodPolicy": "CLEANPOD_POLICY_ALL",
        "ttlSecondsAfterFinished": 60,
        "activeDeadlineSeconds": 600,
        "backoffLimit": 2,
    }


# ----------------------------------------------------------------- extensions under version skew


def _with_extensions(cls: type[Message]) -> Any:
    t: Any = cls()
    e = t.elastic_config
    e.min_replicas, e.max_replicas, e.nproc_per_node = 1, 2, 0
    e.nproc_policy = 1  # auto
    e.start_method = 2
    e.monitor_interval.nanos = 500_000_000
    e.join_timeout.seconds = 1800
    e.rdzv_options.add(key="is_host", value="1")
    e.rdzv_id = "run-42"
    e.rdzv_port = 29400
    e.signals_to_handle.extend(["SIGTERM", "SIGUSR1"])
    e.local_ranks_filter.extend([0, 1])
    e.virtual_local_rank = True
    return t


@pytest.mark.parametrize(("name", "version", "ours", "up"), SHAPES, ids=SHAPE_IDS)
def test_extensions_survive_upstream_binary_round_trip(
    name: str, version: int, ours: type[Message], up: type[Message]
) -> None:
    mine = _with_extensions(ours)
    assert len(ei.extension_fields(mine)) == 10
    theirs: Any = up.FromString(mine.SerializeToString())
    # Upstream sees fields 1-5 and keeps the rest as unknown fields of ElasticConfig ...
    assert_same(mine, theirs)
    assert theirs.elastic_config.nproc_per_node == 0
    # ... and writes them back, even after changing a field it knows (a backend rewrite).
    theirs.elastic_config.max_restarts = 7
    back: Any = ours.FromString(theirs.SerializeToString())
    expected: Any = ours()
    expected.CopyFrom(mine)
    expected.elastic_config.max_restarts = 7
    assert back == expected
    assert ei.extension_fields(back) == ei.extension_fields(mine)


@pytest.mark.parametrize(("name", "version", "ours", "up"), SHAPES, ids=SHAPE_IDS)
def test_upstream_json_drops_extensions_silently(
    name: str, version: int, ours: type[Message], up: type[Message]
) -> None:
    # Why the JSON path needs care: upstream's MessageToDict has no unknown fields to
    # write, so an upstream hop through JSON loses the extensions without a word.
    mine = _with_extensions(ours)
    theirs = up.FromString(mine.SerializeToString())
    through_json = ours.FromString(json_format.ParseDict(_json(theirs), up()).SerializeToString())
    assert ei.extension_fields(through_json) == []
    assert _json(theirs)["elasticConfig"] == {"minReplicas": 1, "maxReplicas": 2}


@pytest.mark.parametrize(("name", "version", "ours", "up"), SHAPES, ids=SHAPE_IDS)
def test_strict_upstream_json_parser_rejects_our_extensions(
    name: str, version: int, ours: type[Message], up: type[Message]
) -> None:
    full = ei.to_custom(_with_extensions(ours))
    assert "nprocPolicy" in full["elasticConfig"]
    with pytest.raises(json_format.ParseError, match=r"nprocPolicy|startMethod|monitorInterval|joinTimeout"):
        json_format.ParseDict(full, up())
    with pytest.raises(json_format.ParseError):
        json_format.Parse(json.dumps(full), up())
    # Upstream only accepts it when told to drop what it does not know: the silent drop.
    lenient: Any = json_format.ParseDict(full, up(), ignore_unknown_fields=True)
    assert lenient.elastic_config.max_replicas == 2


@pytest.mark.parametrize(("name", "version", "ours", "up"), SHAPES, ids=SHAPE_IDS)
def test_upstream_emitter_refuses_then_drops_with_warning(
    name: str, version: int, ours: type[Message], up: type[Message]
) -> None:
    mine = _with_extensions(ours)
    with pytest.raises(ei.SkewError) as info:
        ei.to_custom(mine, upstream=True)
    assert "elastic_config.nproc_policy" in str(info.value)
    with pytest.raises(ei.SkewError):
        ei.encode(mine, "json", upstream=True)
    with pytest.raises(ei.SkewError):
        ei.encode(mine, "binary", upstream=True)

    with pytest.warns(ei.SkewWarning, match="elastic_config.join_timeout"):
        custom = ei.to_custom(mine, upstream=True, allow_loss=True)
    strict: Any = json_format.ParseDict(custom, up())  # unknown fields rejected: accepted
    assert_same(mine, strict)
    assert custom == {"elasticConfig": {"minReplicas": 1, "maxReplicas": 2}}
    with pytest.warns(ei.SkewWarning):
        text = ei.encode(mine, "json", upstream=True, allow_loss=True)
    assert isinstance(text, str)
    json_format.Parse(text, up())
    with pytest.warns(ei.SkewWarning):
        wire = ei.encode(mine, "binary", upstream=True, allow_loss=True)
    assert isinstance(wire, bytes)
    parsed: Any = up.FromString(wire)
    assert len(UnknownFieldSet(parsed.elastic_config)) == 0
    assert ei.extension_fields(ours.FromString(wire)) == []
    # The input task is left as it was.
    assert len(ei.extension_fields(mine)) == 10


def test_upstream_emitter_is_exact_when_nothing_would_be_lost() -> None:
    task = ei.from_custom(json_format.MessageToDict(_kubeflow_full(up_kubeflow.DistributedPyTorchTrainingTask)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        custom = ei.to_custom(task, upstream=True)
    assert custom == ei.to_custom(task)
    assert json_format.ParseDict(custom, up_kubeflow.DistributedPyTorchTrainingTask()) == _kubeflow_full(
        up_kubeflow.DistributedPyTorchTrainingTask
    )


# ----------------------------------------------------------------- one process


@pytest.mark.parametrize(
    "order",
    [
        [
            "flyteidl.plugins.kubeflow.pytorch_pb2",
            "flyteidl.plugins.pytorch_pb2",
            "flyteidl2.plugins.kubeflow.pytorch_pb2",
            "flyteidl2.plugins.pytorch_pb2",
            "elastic_idl._task.messages",
            "elastic_idl.betterproto.plugins.kubeflow.v1",
        ],
        [
            "elastic_idl._task.messages",
            "elastic_idl.betterproto.plugins.kubeflow.v1",
            "flyteidl2.plugins.pytorch_pb2",
            "flyteidl.plugins.pytorch_pb2",
            "flyteidl.plugins.kubeflow.pytorch_pb2",
            "flyteidl2.plugins.kubeflow.pytorch_pb2",
        ],
    ],
    ids=["upstream_first", "ours_first"],
)
def test_upstream_and_ours_load_in_one_process(order: list[str]) -> None:
    script = f"""
import importlib, warnings
warnings.simplefilter("error")
for name in {order!r}:
    importlib.import_module(name)
from google.protobuf import descriptor_pool
pool = descriptor_pool.Default()
for f in ("flyteidl/plugins/pytorch.proto", "flyteidl/plugins/kubeflow/pytorch.proto",
          "flyteidl2/plugins/pytorch.proto", "flyteidl2/plugins/kubeflow/pytorch.proto",
          "elastic_idl/plugins/v1/pytorch.proto", "elastic_idl/plugins/kubeflow/v1/pytorch.proto"):
    pool.FindFileByName(f)
for m in ("flyteidl.plugins.kubeflow.DistributedPyTorchTrainingTask",
          "flyteidl2.plugins.kubeflow.DistributedPyTorchTrainingTask",
          "elastic_idl.plugins.kubeflow.v1.DistributedPyTorchTrainingTask",
          "flyteidl.plugins.ElasticConfig", "flyteidl.plugins.kubeflow.ElasticConfig",
          "flyteidl2.plugins.ElasticConfig", "flyteidl2.plugins.kubeflow.ElasticConfig",
          "elastic_idl.plugins.v1.ElasticConfig"):
    pool.FindMessageTypeByName(m)
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
    assert "duplicate" not in proc.stderr.lower()


def test_loading_a_clashing_file_name_is_what_fails() -> None:
    # The failure the distinct paths avoid: a second, different file under an upstream path.
    script = """
from google.protobuf import descriptor_pb2, descriptor_pool
import flyteidl.plugins.pytorch_pb2
fdp = descriptor_pb2.FileDescriptorProto(name="flyteidl/plugins/pytorch.proto", package="elsewhere")
fdp.message_type.add(name="Other")
descriptor_pool.Default().AddSerializedFile(fdp.SerializeToString())
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode != 0
    assert "duplicate file name" in proc.stderr
