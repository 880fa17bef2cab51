"""Shared Hypothesis strategies for tasks, elastic configs, Elastic(...) arguments and torchrun command lines.

Import from any test module (``from strategies import valid_tasks``). Every strategy says
what it guarantees:

- ``elastic_configs()``: ElasticConfig messages that pass every rule.
- ``valid_tasks(shape)``: tasks of either shape (0 legacy, 1 kubeflow, None both) with
  ``ei.violations(task) == []``; replicas in the deprecated fields or in ``common``, masters,
  run policies, resources. ``elastic=False`` gives non-elastic tasks too.
- ``arbitrary_tasks(shape)``: any task the message types can hold (valid or not): random
  field values, plus valid tasks with one or more rule-breaking edits.
- ``elastic_kwargs()``: keyword arguments that ``Elastic(**kwargs)`` accepts.
- ``flyte2_kwargs()``: flyteplugins-pytorch's ``Elastic`` arguments that ``elastic_idl.flyte2.Elastic`` accepts too.
- ``torchrun_tasks()``: valid kubeflow tasks whose elastic config a torchrun command line
  can say (``to_torchrun`` does not raise), and ``torchrun_entrypoints()``.
- ``torchrun_command_lines()``: (argv, env, task, entrypoint): a torchrun invocation in any
  spelling (dash/underscore, ``--f=v`` or ``--f v``, short flags, shuffled, some settings
  moved into ``PET_*`` env, env noise the command line overrides) and what it means.

Sizes stay small by default (a 2-core machine); strategies never touch the network or torch.
"""

from __future__ import annotations

import signal
import string
from datetime import timedelta
from typing import Any

from google.protobuf.duration_pb2 import Duration
from hypothesis import strategies as st

from elastic_idl._sdk.torchrun import FLAGS, TorchrunEntrypoint, to_torchrun
from elastic_idl._task.messages import ElasticConfig, KubeflowTask, LegacyTask, Resources
from elastic_idl._task.names import RDZV_TIMEOUTS

INT32_MAX = 2**31 - 1
BACKENDS = ("", "c10d", "etcd", "etcd-v2", "static")
SIGNAL_NAMES = tuple(sorted(s.name for s in signal.Signals))
TIMEOUT_FIELDS = RDZV_TIMEOUTS
RESOURCE_NAMES = (Resources.CPU, Resources.GPU, Resources.MEMORY, Resources.STORAGE, Resources.EPHEMERAL_STORAGE)

# ---------------------------------------------------------------- small pieces

#: Node counts: mostly small, sometimes the int32 edge.
node_counts = st.one_of(st.integers(1, 8), st.integers(1, INT32_MAX))
#: Text for free-form strings (role, image): printable, sometimes unicode.
free_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_OPTION_KEY_CHARS = string.ascii_letters + string.digits + "_-."
_OPTION_VALUE_CHARS = string.ascii_letters + string.digits + "_-.:=/ "
_HOST_CHARS = string.ascii_lowercase + string.digits + ".-"


def durations(*, max_seconds: int = 3600, whole: bool = False) -> st.SearchStrategy[Duration]:
    """Positive Durations up to ``max_seconds`` (inclusive); ``whole`` gives whole seconds only."""
    if whole:
        return st.integers(1, max_seconds).map(lambda s: Duration(seconds=s))

    def build(pair: tuple[int, int]) -> Duration:
        seconds, nanos = pair
        if seconds == 0 and nanos == 0:
            nanos = 1
        if seconds == max_seconds:
            nanos = 0
        return Duration(seconds=seconds, nanos=nanos)

    nanos = st.one_of(
        st.just(0), st.sampled_from([1, 100_000_000, 500_000_000, 999_999_999]), st.integers(0, 999_999_999)
    )
    return st.tuples(st.integers(0, max_seconds), nanos).map(build)


def option_keys(*, torchrun: bool = False) -> st.SearchStrategy[str]:
    """rdzv option keys that pass the rules (non-empty, no ',' or '=', not a typed timeout)."""
    keys = st.one_of(
        st.sampled_from(["is_host", "heartbeat_timeout", "keep_alive_interval", "store_type", "timeout"]),
        st.text(_OPTION_KEY_CHARS, min_size=1, max_size=8),
    )
    return keys.filter(lambda k: k not in RDZV_TIMEOUTS and (not torchrun or k != "rank"))


def option_values(*, torchrun: bool = False) -> st.SearchStrategy[str]:
    """rdzv option values without ','; with ``torchrun``, non-empty and without surrounding spaces."""
    values = st.text(_OPTION_VALUE_CHARS, max_size=8)
    if torchrun:
        return values.map(str.strip).filter(bool)
    return values


def hosts(*, torchrun: bool = False) -> st.SearchStrategy[str]:
    """rdzv hosts: names, IPv4, IPv6; with ``torchrun``, only what torch's endpoint parser accepts."""
    base = st.one_of(
        st.sampled_from(["localhost", "127.0.0.1", "job-worker-0", "::1", "fe80::1", "a.b.svc.cluster.local"]),
        st.text(_HOST_CHARS, min_size=1, max_size=12),
    )
    if torchrun:
        return base
    return st.one_of(
        base,
        st.text(
            st.characters(blacklist_characters=",/", blacklist_categories=("Zs", "Zl", "Zp", "Cc", "Cs")),
            min_size=1,
            max_size=8,
        ),
    )


# ---------------------------------------------------------------- ElasticConfig


@st.composite
def elastic_configs(draw: st.DrawFn, *, upstream_only: bool = False, torchrun: bool = False) -> ElasticConfig:
    """Valid ElasticConfig messages.

    Args:
        upstream_only: Only fields 1-5 (what flytekit can write); backend "c10d".
        torchrun: Only what a torchrun command line can say (whole-second timeouts, hosts torch
            parses, static with a host, no empty option values, no port without a host).
    """
    e = ElasticConfig()
    lo = draw(node_counts)
    hi = draw(st.one_of(st.just(lo), st.integers(lo, min(INT32_MAX, lo + 8)), st.integers(lo, INT32_MAX)))
    e.min_replicas, e.max_replicas = lo, hi
    if upstream_only:
        e.rdzv_backend = "c10d"
        e.nproc_per_node = draw(st.integers(1, 64))
        e.max_restarts = draw(st.integers(0, 10))
        return e
    backend = draw(st.sampled_from(BACKENDS[1:] if torchrun else BACKENDS))
    e.rdzv_backend = backend
    if backend == "static":
        e.max_replicas = e.min_replicas
    if draw(st.integers(0, 4)) == 0:
        e.nproc_policy = draw(st.sampled_from([1, 2, 3]))
    else:
        e.nproc_per_node = draw(st.one_of(st.integers(1, 8), st.integers(1, INT32_MAX)))
    e.max_restarts = draw(st.one_of(st.integers(0, 5), st.integers(0, INT32_MAX)))
    if draw(st.booleans()):
        e.start_method = draw(st.sampled_from([0, 1, 2, 3]))
    if draw(st.booleans()):
        e.monitor_interval.CopyFrom(draw(durations()))
    for name in TIMEOUT_FIELDS:
        if draw(st.integers(0, 3)) == 0:
            getattr(e, name).CopyFrom(draw(durations(max_seconds=86_400, whole=True)))
    keys = draw(st.lists(option_keys(torchrun=torchrun), max_size=3, unique=True))
    for key in keys:
        e.rdzv_options.add(key=key, value=draw(option_values(torchrun=torchrun)))
    if draw(st.booleans()):
        e.rdzv_id = draw(
            st.text(
                st.characters(min_codepoint=33, max_codepoint=126, blacklist_characters=","), min_size=1, max_size=20
            )
        )
    has_host = (backend == "static" and torchrun) or draw(st.booleans())
    if has_host:
        e.rdzv_host = draw(hosts(torchrun=torchrun))
    if has_host or not torchrun:
        e.rdzv_port = draw(st.one_of(st.just(0), st.sampled_from([23456, 29400, 29500, 65535]), st.integers(0, 65535)))
    if draw(st.booleans()):
        e.role = draw(free_text)
    e.redirects = draw(st.sampled_from([0, 0, 1, 2, 3]))
    e.tee = draw(st.sampled_from([0, 0, 1, 2, 3]))
    limit = e.nproc_per_node if e.nproc_per_node > 0 else 16
    e.local_ranks_filter.extend(draw(st.lists(st.integers(0, limit - 1), max_size=3, unique=True)))
    e.numa_binding = draw(st.sampled_from([0, 0, 1, 2, 3, 4]))
    e.signals_to_handle.extend(draw(st.lists(st.sampled_from(SIGNAL_NAMES), max_size=3, unique=True)))
    if draw(st.booleans()):
        e.shutdown_timeout.CopyFrom(draw(durations(max_seconds=600, whole=True)))
    e.virtual_local_rank = draw(st.booleans())
    if not torchrun and draw(st.integers(0, 3)) == 0:  # a torchrun line says it only where torchrun is 2.14+
        e.log_line_prefix_template = draw(
            st.one_of(st.sampled_from(["${hostname}:${rank}| ", "[${role_name}${local_rank}]:", "${x", "$"]), free_text)
        )
    if draw(st.integers(0, 3)) == 0:
        e.cas_backoff_max_seconds.CopyFrom(draw(durations(max_seconds=60)))
    return e


# ---------------------------------------------------------------- replicas, run policy, tasks


#: Valid quantities ("resources.quantity"): every request value is <= every limit value.
REQUEST_QUANTITIES, LIMIT_QUANTITIES = ("1", "500m", "2"), ("2", "4Gi", "10G", "2.5e3")


@st.composite
def resources(draw: st.DrawFn, *, unique: bool = False) -> Resources:
    """Valid Resources: known names, valid quantities; ``unique`` names each resource once per list.

    A GPU is a whole number, the same in requests and limits (it cannot be overcommitted).
    """
    r = Resources()
    gpus = draw(st.sampled_from(["1", "2", "8"]))
    for kind, values in (("requests", REQUEST_QUANTITIES), ("limits", LIMIT_QUANTITIES)):
        names = draw(st.lists(st.sampled_from(RESOURCE_NAMES), max_size=3, unique=unique))
        for name in names:
            value = gpus if name == Resources.GPU else draw(st.sampled_from(values))
            getattr(r, kind).add(name=name, value=value)
    return r


def _replica_spec(draw: st.DrawFn, spec: Any, replicas: int, *, unique_resources: bool) -> None:
    """Fill a DistributedPyTorchTrainingReplicaSpec, in the deprecated fields or in `common` (valid)."""
    image = draw(st.one_of(st.just(""), st.sampled_from(["ghcr.io/x/train:1", "img"])))
    policy = draw(st.sampled_from([0, 1, 2]))
    res = draw(st.one_of(st.none(), resources(unique=unique_resources)))
    if draw(st.booleans()):
        c = spec.common
        c.SetInParent()
        c.replicas, c.image, c.restart_policy = replicas, image, policy
        if res is not None:
            c.resources.CopyFrom(res)
        # The deprecated copies may stay set when equal ("replicas.deprecated_conflict").
        if draw(st.booleans()):
            spec.replicas, spec.image, spec.restart_policy = replicas, image, policy
            if res is not None and draw(st.booleans()):
                spec.resources.CopyFrom(res)
    else:
        spec.replicas, spec.image, spec.restart_policy = replicas, image, policy
        if res is not None:
            spec.resources.CopyFrom(res)


@st.composite
def valid_tasks(
    draw: st.DrawFn,
    shape: int | None = None,
    *,
    elastic: bool = True,
    upstream_only: bool = False,
    elastic_expressible: bool = False,
) -> Any:
    """Tasks that pass every rule.

    Args:
        shape: 0 legacy, 1 kubeflow, None either.
        elastic: Always set an elastic config; False also draws non-elastic tasks.
        upstream_only: Only fields upstream flyteidl knows.
        elastic_expressible: Only tasks ``Elastic.from_task`` accepts (one quantity per
            resource, no rdzv option "timeout" under c10d/etcd-v2).
    """
    version = draw(st.sampled_from([0, 1])) if shape is None else shape
    has_elastic = elastic or draw(st.booleans())
    e = draw(elastic_configs(upstream_only=upstream_only)) if has_elastic else None
    if e is not None and elastic_expressible and (e.rdzv_backend or "c10d") in ("c10d", "etcd-v2"):
        keep = [o for o in e.rdzv_options if o.key != "timeout"]
        del e.rdzv_options[:]
        e.rdzv_options.extend(keep)
    if version == 0:
        t = LegacyTask()
        if e is not None:
            t.elastic_config.CopyFrom(e)
            t.workers = draw(st.sampled_from([0, e.max_replicas]))
        else:
            t.workers = draw(st.integers(1, 16))  # a non-elastic task needs a worker (replicas.workers_required)
        return t
    k = KubeflowTask()
    if e is not None:
        k.elastic_config.CopyFrom(e)
    if draw(st.integers(0, 5)) or e is None:
        replicas = draw(st.sampled_from([0, e.max_replicas])) if e is not None else draw(st.integers(1, 16))
        _replica_spec(draw, k.worker_replicas, replicas, unique_resources=elastic_expressible)
        k.worker_replicas.SetInParent()
    if draw(st.integers(0, 4)) == 0:
        _replica_spec(draw, k.master_replicas, 1, unique_resources=elastic_expressible)
        k.master_replicas.SetInParent()
    if draw(st.booleans()):
        rp = k.run_policy
        rp.SetInParent()
        rp.clean_pod_policy = draw(st.sampled_from([0, 1, 2]))
        rp.ttl_seconds_after_finished = draw(st.integers(0, 86_400))
        rp.active_deadline_seconds = draw(st.integers(0, 86_400))
        rp.backoff_limit = draw(st.integers(0, 10))
    return k


_INT32 = st.integers(-(2**31), INT32_MAX)
_EDGE_INTS = st.sampled_from([-(2**31), -1, 0, 1, 2, INT32_MAX])


def _random_fill(draw: st.DrawFn, msg: Any, depth: int = 0) -> None:
    """Fill any message from its descriptor: every scalar, enum (known or not), list and sub-message."""
    desc = msg.DESCRIPTOR
    if desc.full_name == "google.protobuf.Duration":
        msg.seconds = draw(st.integers(-10, 4000))
        msg.nanos = draw(st.sampled_from([0, 1, -1, 500_000_000, 999_999_999, -999_999_999, 1_000_000_000]))
        return
    for f in desc.fields:
        repeated = getattr(f, "is_repeated", None)
        repeated = bool(repeated) if repeated is not None else f.label == f.LABEL_REPEATED
        if f.message_type is not None:
            if repeated:
                for _ in range(draw(st.integers(0, 2))):
                    _random_fill(draw, getattr(msg, f.name).add(), depth + 1)
            elif depth < 4 and draw(st.booleans()):
                getattr(msg, f.name).SetInParent()
                _random_fill(draw, getattr(msg, f.name), depth + 1)
            continue
        if f.enum_type is not None:
            value: st.SearchStrategy[Any] = st.one_of(
                st.sampled_from([v.number for v in f.enum_type.values]), st.integers(-1, 9)
            )
        elif f.type == f.TYPE_STRING:
            value = st.one_of(st.sampled_from(["", "c10d", "static", "bogus", "a,b", "k=v", " "]), st.text(max_size=6))
        elif f.type == f.TYPE_BOOL:
            value = st.booleans()
        else:
            value = st.one_of(_EDGE_INTS, _INT32)
        if repeated:
            getattr(msg, f.name).extend(draw(st.lists(value, max_size=3)))
        elif draw(st.booleans()):
            setattr(msg, f.name, draw(value))


@st.composite
def _random_task(draw: st.DrawFn, shape: int | None) -> Any:
    version = draw(st.sampled_from([0, 1])) if shape is None else shape
    t = LegacyTask() if version == 0 else KubeflowTask()
    _random_fill(draw, t)
    return t


_BREAKERS = (
    ("min_replicas", lambda e, n: setattr(e, "min_replicas", n)),
    ("max_replicas", lambda e, n: setattr(e, "max_replicas", n)),
    ("nproc_per_node", lambda e, n: setattr(e, "nproc_per_node", n)),
    ("max_restarts", lambda e, n: setattr(e, "max_restarts", n)),
    ("rdzv_port", lambda e, n: setattr(e, "rdzv_port", n)),
    ("monitor_interval", lambda e, n: e.monitor_interval.CopyFrom(Duration(seconds=n % 10_000 - 5000))),
    ("join_timeout", lambda e, n: e.join_timeout.CopyFrom(Duration(seconds=min(n, 0)))),
    ("rdzv_backend", lambda e, n: setattr(e, "rdzv_backend", ["bogus", "static", "etcd-v3"][n % 3])),
    ("rdzv_options", lambda e, n: e.rdzv_options.add(key=["", "a,b", "join_timeout", "k"][n % 4], value="x,y")),
    ("local_ranks_filter", lambda e, n: e.local_ranks_filter.extend([n, n])),
    ("signals_to_handle", lambda e, n: e.signals_to_handle.append(["SIGNOPE", "SIGTERM"][n % 2])),
    ("rdzv_id", lambda e, n: setattr(e, "rdzv_id", ["has space", "a,b", "x" * 300][n % 3])),
)


@st.composite
def _broken_task(draw: st.DrawFn, shape: int | None) -> Any:
    t = draw(valid_tasks(shape))
    for _ in range(draw(st.integers(1, 3))):
        _, breaker = draw(st.sampled_from(_BREAKERS))
        breaker(t.elastic_config, draw(_EDGE_INTS))
    if isinstance(t, KubeflowTask) and draw(st.booleans()):
        t.worker_replicas.replicas = draw(_EDGE_INTS)
    return t


def arbitrary_tasks(shape: int | None = None) -> st.SearchStrategy[Any]:
    """Any task the message types hold, valid or not (random fields, or valid ones broken on purpose)."""
    return st.one_of(valid_tasks(shape, elastic=False), _broken_task(shape), _random_task(shape))


# ---------------------------------------------------------------- Elastic(...) arguments


@st.composite
def elastic_kwargs(draw: st.DrawFn, *, extensions: bool = True) -> dict[str, Any]:
    """Keyword arguments ``Elastic(**kwargs)`` accepts; ``extensions=False`` keeps to flytekit's arguments."""
    kw: dict[str, Any] = {}
    lo = draw(st.integers(1, 6))
    hi = draw(st.integers(lo, 8))
    kw["nnodes"] = draw(st.sampled_from([lo, str(lo), f"{lo}:{hi}", f"{hi}:{hi}"]))
    kw["nproc_per_node"] = draw(
        st.one_of(st.integers(1, 8), st.sampled_from(["auto", "cpu", "gpu", "2"]) if extensions else st.integers(1, 8))
    )
    kw["max_restarts"] = draw(st.integers(0, 5))
    kw["rdzv_configs"] = draw(
        st.sampled_from(
            [
                {"timeout": 900, "join_timeout": 900},
                {},
                {"join_timeout": 1800},
                {"timeout": 1200},
                {"join_timeout": 60, "read_timeout": 900, "is_host": True},
                {"last_call_timeout": 5, "heartbeat_timeout": 10},
            ]
        )
    )
    if draw(st.booleans()):
        kw["start_method"] = draw(st.sampled_from(["spawn", "fork", "forkserver"]))
    if draw(st.booleans()):
        kw["monitor_interval"] = draw(st.sampled_from([0.1, 1, 5, 2.5]))
    if draw(st.booleans()):
        kw["run_policy"] = draw(
            st.sampled_from(
                [
                    {},
                    {"clean_pod_policy": "All", "backoff_limit": 3},
                    {"ttl_seconds_after_finished": 600, "active_deadline_seconds": 3600},
                ]
            )
        )
    if not extensions:
        return kw
    if draw(st.booleans()):
        kw["image"] = "ghcr.io/x/train:1"
    if draw(st.booleans()):
        kw["requests"] = draw(st.sampled_from([{"cpu": "2", "mem": "4Gi"}, {"gpu": 1}, {}]))
    if draw(st.booleans()):
        kw["limits"] = {"cpu": 4, "memory": "8Gi", "ephemeral_storage": "10Gi"}
    if draw(st.booleans()):
        kw["restart_policy"] = draw(st.sampled_from(["Never", "OnFailure", "Always"]))
    if draw(st.booleans()):
        kw["rdzv_backend"] = draw(st.sampled_from(["c10d", "etcd", "etcd-v2"]))
    if draw(st.booleans()):
        kw["rdzv_host"], kw["rdzv_port"] = draw(st.sampled_from([("job-worker-0", 23456), ("::1", 0), ("h", 1)]))
    if draw(st.booleans()):
        kw["role"] = draw(st.sampled_from(["trainer", "default"]))
    if draw(st.booleans()):
        kw["redirects"], kw["tee"] = draw(st.sampled_from([(3, 0), ("all", "out"), ("2", 1)]))
    if draw(st.booleans()):
        kw["signals_to_handle"] = draw(st.sampled_from(["SIGTERM,SIGUSR1", ("SIGINT",)]))
    if draw(st.booleans()):
        kw["shutdown_timeout"] = draw(st.sampled_from([1, 30, 2.0]))
    kw["virtual_local_rank"] = draw(st.booleans())
    if draw(st.booleans()):
        kw["collective_timeout"] = draw(st.sampled_from([5, 90.5, "600", timedelta(minutes=2, microseconds=250)]))
    if draw(st.booleans()):
        kw["nccl_heartbeat_timeout"] = draw(st.sampled_from([60, 300.0, timedelta(seconds=480)]))
    for name in ("nccl_async_error_handling", "nccl_enable_monitoring"):
        kw[name] = draw(st.sampled_from([None, True, False]))
    if draw(st.booleans()):
        kw["log_line_prefix_template"] = draw(st.sampled_from(["${hostname}|", "${rank}: ", ""]))
    if draw(st.booleans()):
        kw["cas_backoff_max_seconds"] = draw(st.sampled_from([0, 0.5, "2", timedelta(milliseconds=250)]))
    return kw


@st.composite
def flyte2_kwargs(draw: st.DrawFn) -> dict[str, Any]:
    """flyteplugins-pytorch's ``Elastic`` arguments, in the values both it and ``elastic_idl.flyte2.Elastic``
    serialize (elastic-idl's rules hold); ``run_policy`` is a dict of its fields (each test makes its class)."""
    lo = draw(st.integers(1, 6))
    hi = draw(st.integers(lo, 8))
    kw: dict[str, Any] = {
        "nnodes": draw(st.sampled_from([lo, str(lo), f"{lo}:{hi}", hi])),
        "nproc_per_node": draw(st.integers(1, 16)),
    }
    backend = draw(st.sampled_from(["c10d", "etcd", "etcd-v2", None]))
    if backend is not None:
        kw["rdzv_backend"] = backend
    if draw(st.booleans()):
        kw["run_policy"] = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "clean_pod_policy": st.sampled_from(["None", "all", "Running"]),
                    "ttl_seconds_after_finished": st.integers(0, 86400),
                    "active_deadline_seconds": st.integers(0, 86400),
                    "backoff_limit": st.integers(0, 10),
                },
            )
        )
    if draw(st.booleans()):
        kw["monitor_interval"] = draw(st.integers(1, 3600))
    if draw(st.booleans()):
        kw["max_restarts"] = draw(st.integers(0, 10))
    if draw(st.booleans()):
        rdzv = draw(st.dictionaries(st.sampled_from(TIMEOUT_FIELDS), st.integers(1, 3600), max_size=4))
        if draw(st.booleans()):  # torch's legacy "timeout": equal to join_timeout where both are read as one
            rdzv["timeout"] = rdzv.get("join_timeout", draw(st.integers(1, 3600)))
        kw["rdzv_configs"] = rdzv
    if draw(st.booleans()):
        kw["nccl_heartbeat_timeout_sec"] = draw(st.none() | st.integers(1, 86400))
    if draw(st.booleans()):
        kw["nccl_collective_timeout_sec"] = draw(st.none() | st.integers(1, 86400))
    for name in ("nccl_async_error_handling", "nccl_enable_monitoring"):
        if draw(st.booleans()):
            kw[name] = draw(st.booleans())
    return kw


# ---------------------------------------------------------------- torchrun


@st.composite
def torchrun_tasks(draw: st.DrawFn) -> KubeflowTask:
    """Valid kubeflow tasks (elastic config, worker replicas = max) that ``to_torchrun`` can render."""
    e = draw(elastic_configs(torchrun=True))
    t = KubeflowTask()
    t.elastic_config.CopyFrom(e)
    t.worker_replicas.replicas = e.max_replicas
    return t


@st.composite
def torchrun_entrypoints(draw: st.DrawFn) -> TorchrunEntrypoint:
    """Scripts or modules with arguments (flags included: they belong to the script)."""
    target = draw(st.sampled_from(["train.py", "/abs/train.py", "pkg.train", "a b.py"]))
    args = draw(st.lists(st.sampled_from(["--lr", "0.1", "-m", "--nnodes=9", "x", "--", "-h"]), max_size=4))
    module = draw(st.booleans())
    no_python = not module and draw(st.booleans())
    return TorchrunEntrypoint(target, tuple(args), module=module, no_python=no_python, run_path=draw(st.booleans()))


_FLAG_BY_OPTION = {o: f for f in FLAGS for o in f.options}


@st.composite
def torchrun_command_lines(draw: st.DrawFn) -> tuple[list[str], dict[str, str], KubeflowTask, TorchrunEntrypoint]:
    """(argv, env, task, entrypoint): ``from_torchrun(argv, env)`` must give (task, entrypoint).

    Built from ``to_torchrun``'s canonical form, then respelled: dash or underscore
    spelling, ``--flag=value`` or ``--flag value``, ``-r3``/``-t 1``/``-m``, flags shuffled,
    some moved into ``PET_*`` env, and env values for flags the command line sets (which must lose).
    """
    task = draw(torchrun_tasks())
    entry = draw(torchrun_entrypoints())
    canonical = to_torchrun(task, entry)
    n_flags = next(i for i, token in enumerate(canonical) if not token.startswith("--"))  # flags, then the target
    flags, tail = canonical[:n_flags], canonical[n_flags:]
    argv_flags: list[list[str]] = []
    env: dict[str, str] = {}
    for token in flags:
        option, sep, value = token.partition("=")
        f = _FLAG_BY_OPTION[option]
        var = f.env_var
        if var is not None and draw(st.integers(0, 3)) == 0:
            env[var] = value if sep else "1"
            continue
        if var is not None and sep and f.kind == "env" and draw(st.integers(0, 3)) == 0:
            env[var] = draw(st.sampled_from(["9", "bogus", "1:2", ""]))  # the command line must win
        spelling = draw(st.sampled_from(f.options))
        if not sep:
            argv_flags.append([spelling])
        elif spelling.startswith("--"):
            argv_flags.append(
                [f"{spelling}={value}"] if draw(st.booleans()) or value.startswith("-") else [spelling, value]
            )
        elif value.startswith("-"):
            argv_flags.append([f"{spelling}{value}"])
        else:
            argv_flags.append(draw(st.sampled_from([[f"{spelling}{value}"], [spelling, value]])))
    argv_flags = draw(st.permutations(argv_flags))
    argv = [token for group in argv_flags for token in group] + tail
    return argv, env, task, entry


#: Values per torchrun flag for raw command lines: legal ones, and ones torchrun or the schema refuses.
RAW_VALUES: dict[str, tuple[str, ...]] = {
    "nnodes": ("1", "2", "1:4", "x", "1:2:3", "0"),
    "nproc_per_node": ("1", "4", "auto", "cpu", "gpu", "xpu", "0", "-1"),
    "rdzv_backend": ("c10d", "static", "etcd", "etcd-v2", "zk"),
    "rdzv_endpoint": ("", "h:1", "localhost", "[::1]:29400", ":5", "h:99999"),
    "rdzv_id": ("none", "job-1", ""),
    "rdzv_conf": ("", "join_timeout=5", "a=1,b=2", "k=", "timeout=10,is_host=1", "rank=1", "join_timeout=1.5"),
    "max_restarts": ("0", "3", "-1", "x"),
    "monitor_interval": ("0.1", "5", "1e-3", "x", "inf", "0"),
    "start_method": ("spawn", "fork", "forkserver", "thread"),
    "event_log_handler": ("null", "console"),
    "role": ("default", "trainer", "-x"),
    "log_dir": ("/tmp/logs",),
    "redirects": ("0", "3", "0:1,1:2", "9"),
    "tee": ("0", "1", "0:3", "x"),
    "local_ranks_filter": ("", "0", "0,1", "x"),
    "duplicate_stdout_filters": ("", "a,b", "a,,b"),
    "duplicate_stderr_filters": ("a",),
    "node_rank": ("0", "1", "x"),
    "master_addr": ("127.0.0.1", "10.0.0.1"),
    "master_port": ("29500", "0", "x"),
    "local_addr": ("10.0.0.2",),
    "logs_specs": ("custom",),
    "numa_binding": ("node", "socket", "bogus"),
    "signals_to_handle": ("SIGTERM", "SIGTERM,SIGUSR1", ""),
    "shutdown_timeout": ("30", "0", "x"),
}
#: Env values of torchrun's boolean flags: "1"/"0" are legal; torchrun crashes on "" and "true".
RAW_BOOL_ENV = ("0", "1", "2", "", "true")


@st.composite
def raw_torchrun_command_lines(draw: st.DrawFn) -> tuple[list[str], dict[str, str]]:
    """(argv, env) from torchrun's flag alphabet, any spelling and value: often invalid, sometimes not torchrun at all."""
    argv: list[str] = []
    for f in draw(st.lists(st.sampled_from(FLAGS), max_size=6)):
        spelling = draw(st.sampled_from(f.options))
        if f.kind == "bool":
            argv.append(spelling)
            continue
        value = draw(st.sampled_from(RAW_VALUES[f.dest]))
        if spelling.startswith("--") and draw(st.booleans()):
            argv.append(f"{spelling}={value}")
        elif not spelling.startswith("--") and draw(st.booleans()):
            argv.append(f"{spelling}{value}")
        else:
            argv += [spelling, value]
    if draw(st.integers(0, 9)):
        argv.append(draw(st.sampled_from(["train.py", "pkg.mod", "-x.py", "--nnodes"])))
        argv += draw(st.lists(st.sampled_from(["--lr", "1", "--", "-m", "--nnodes=2"]), max_size=3))
    if draw(st.integers(0, 9)) == 0:
        argv.insert(
            draw(st.integers(0, len(argv))), draw(st.sampled_from(["--nproc", "--rdzv", "--bogus", "-h", "--"]))
        )
    env: dict[str, str] = {}
    for f in draw(st.lists(st.sampled_from([f for f in FLAGS if f.env_var]), max_size=4)):
        assert f.env_var is not None
        pool = RAW_BOOL_ENV if f.kind == "bool" else RAW_VALUES[f.dest]
        env[f.env_var] = draw(st.sampled_from(pool))
    return argv, env
