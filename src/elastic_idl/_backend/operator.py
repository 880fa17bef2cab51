"""The Kubeflow training operator's side of a ``PyTorchJob``: the env it injects into each pod. Pure.

`pod_env` is the env the training operator (v1.9) injects into one pod of a
job `render_pytorchjob` renders, so tests can start pods locally
with exactly what a cluster gives them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elastic_idl._backend.pytorchjob import (
    CONTAINER_NAME,
    DEFAULT_NPROC,
    DEFAULT_PORT,
    MASTER,
    PORT_NAME,
    WORKER,
    K,
    replica_name,
)
from elastic_idl._errors import RenderError
from elastic_idl._task.names import DEFAULT_RDZV_BACKEND, ENV, OPERATOR_ENV, format_rdzv_conf

__all__ = ["pod_env"]


def _get(obj: Any, path: str, *keys: str) -> Any:
    cur = obj
    walked = path
    for key in keys:
        if not isinstance(cur, Mapping):
            raise RenderError(walked, f"expected an object, got {type(cur).__name__}")
        cur = cur.get(key)
        walked = f"{walked}.{key}" if walked else key
    return cur


def _port_of(job: Mapping[str, Any], rtype: str) -> int:
    """The ``pytorchjob-port`` of the ``pytorch`` container; the operator defaults it to 23456."""
    containers = _get(job, "", K.SPEC, K.REPLICA_SPECS, rtype, K.TEMPLATE, K.SPEC, K.CONTAINERS) or []
    for c in containers:
        if isinstance(c, Mapping) and c.get(K.NAME) == CONTAINER_NAME:
            for p in c.get(K.PORTS) or []:
                if isinstance(p, Mapping) and p.get(K.NAME) == PORT_NAME:
                    return int(p[K.CONTAINER_PORT])
    return DEFAULT_PORT


def _nproc_int(nproc: str) -> int:
    # The operator's getNprocPerNodeInt: 1 unless the string is a number.
    try:
        return int(nproc)
    except ValueError:
        return 1


def pod_env(job: Mapping[str, Any], replica_type: str, index: int) -> dict[str, str]:
    """The env the Kubeflow training operator (v1.9) injects into one pod of ``job``.

    Pure. The container's own env (``ELASTIC_IDL_TASK``, ...) is not included: it
    is in the job. Follows the operator's ``setPodEnv`` and its defaulting:

    - every pod: ``PYTHONUNBUFFERED=1``;
    - elastic job (``spec.elasticPolicy``): ``PET_RDZV_ENDPOINT`` =
      ``<rdzvHost or <job>-worker-0>:<rdzvPort or the Worker's pytorchjob-port (23456)>``,
      ``PET_RDZV_BACKEND`` (default c10d), ``PET_NNODES=<min>:<max>`` (the Worker
      replica count when neither is set; one alone stands for both),
      ``PET_NPROC_PER_NODE=<spec.nprocPerNode, default auto>``, and when set
      ``PET_MAX_RESTARTS``, ``PET_RDZV_ID``, ``PET_RDZV_CONF=k=v,k=v``;
    - job with a Master: ``MASTER_ADDR``/``PET_MASTER_ADDR`` = ``<job>-master-0``,
      ``MASTER_PORT``/``PET_MASTER_PORT`` = the Master's pytorchjob-port,
      ``WORLD_SIZE`` = total replicas x nprocPerNode (1 when not a number),
      ``RANK``/``PET_NODE_RANK`` = index (+1 for a Worker), ``PET_NPROC_PER_NODE``,
      and, when not elastic, ``PET_NNODES`` = total replicas.

    Raises:
        RenderError: Unknown replica type, index out of range, a malformed job, or
            ``elasticPolicy.standalone`` (the operator would inject ``PET_STANDALONE``,
            which crashes torchrun 2.13).
    """
    counts = _replica_counts(job, replica_type, index)
    job_name = _get(job, "", K.METADATA, K.NAME)
    if not isinstance(job_name, str) or not job_name:
        raise RenderError("metadata.name", "the job has no name")
    spec = job[K.SPEC]
    elastic = spec.get(K.ELASTIC_POLICY)
    nproc = _nproc_of(spec, elastic)
    env: dict[str, str] = {OPERATOR_ENV.PYTHONUNBUFFERED: "1"}
    if MASTER in counts:
        env.update(_master_env(job, job_name, replica_type, index, sum(counts.values()), nproc))
    if elastic is None:
        env[ENV.NNODES] = str(sum(counts.values()))
        return env
    env.update(_elastic_env(job, job_name, elastic, counts.get(WORKER, 0), nproc))
    return env


def _replica_counts(job: Mapping[str, Any], replica_type: str, index: int) -> dict[str, int]:
    """Pods per replica type of ``job``, once ``replica_type`` and ``index`` name one of its pods."""
    specs = _get(job, "", K.SPEC, K.REPLICA_SPECS)
    if not isinstance(specs, Mapping) or not specs:
        raise RenderError("spec.pytorchReplicaSpecs", "the job has no replica specs")
    if replica_type not in specs:
        raise RenderError(
            "replica_type", f"{replica_type!r} is not a replica type of this job (it has {', '.join(sorted(specs))})"
        )
    counts: dict[str, int] = {}
    for rtype, rspec in specs.items():
        count = _get(rspec, f"spec.pytorchReplicaSpecs.{rtype}", K.REPLICAS)
        counts[rtype] = 1 if count is None else int(count)  # the operator defaults replicas to 1
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < counts[replica_type]:
        raise RenderError("index", f"{index!r} is out of range for {replica_type} (0..{counts[replica_type] - 1})")
    return counts


def _nproc_of(spec: Mapping[str, Any], elastic: Any) -> str:
    """``spec.nprocPerNode`` after the operator's defaulting (the deprecated field, then "auto")."""
    nproc = spec.get(K.NPROC_PER_NODE)
    if nproc is None and isinstance(elastic, Mapping) and elastic.get(K.DEPRECATED_NPROC) is not None:
        nproc = str(elastic[K.DEPRECATED_NPROC])  # the operator's defaulting copies the deprecated field
    return str(nproc) if nproc is not None else DEFAULT_NPROC


def _master_env(
    job: Mapping[str, Any], job_name: str, replica_type: str, index: int, total: int, nproc: str
) -> dict[str, str]:
    """What every pod of a job with a Master gets: the Master's address, world size and this pod's rank."""
    master_port = str(_port_of(job, MASTER))
    master_addr = replica_name(job_name, MASTER, 0)
    rank = str(index + 1 if replica_type == WORKER else index)
    return {
        OPERATOR_ENV.MASTER_PORT: master_port,
        OPERATOR_ENV.PET_MASTER_PORT: master_port,
        OPERATOR_ENV.MASTER_ADDR: master_addr,
        OPERATOR_ENV.PET_MASTER_ADDR: master_addr,
        OPERATOR_ENV.WORLD_SIZE: str(total * _nproc_int(nproc)),
        OPERATOR_ENV.RANK: rank,
        ENV.NPROC_PER_NODE: nproc,
        OPERATOR_ENV.PET_NODE_RANK: rank,
    }


def _elastic_env(job: Mapping[str, Any], job_name: str, elastic: Any, workers: int, nproc: str) -> dict[str, str]:
    """The ``PET_*`` env of ``spec.elasticPolicy``, with the operator's defaults."""
    if not isinstance(elastic, Mapping):
        raise RenderError("spec.elasticPolicy", f"expected an object, got {type(elastic).__name__}")
    if elastic.get(K.STANDALONE):
        raise RenderError(
            "spec.elasticPolicy.standalone",
            "the operator would inject PET_STANDALONE='', which crashes torchrun 2.13; remove it",
        )
    env: dict[str, str] = {}
    host = elastic.get(K.RDZV_HOST)
    host = str(host) if host is not None else replica_name(job_name, WORKER, 0)
    port = elastic.get(K.RDZV_PORT)
    port = int(port) if port is not None else _port_of(job, WORKER)
    env[ENV.RDZV_ENDPOINT] = f"{host}:{port}"
    backend = elastic.get(K.RDZV_BACKEND)
    env[ENV.RDZV_BACKEND] = str(backend) if backend is not None else DEFAULT_RDZV_BACKEND
    lo: Any = elastic.get(K.MIN_REPLICAS)
    hi: Any = elastic.get(K.MAX_REPLICAS)
    if lo is None and hi is None:
        env[ENV.NNODES] = str(workers)
    else:
        # The operator's defaulting: only min -> max = min; only max -> min = max.
        lo, hi = (hi if lo is None else lo), (lo if hi is None else hi)
        env[ENV.NNODES] = f"{int(lo)}:{int(hi)}"
    if elastic.get(K.MAX_RESTARTS) is not None:
        env[ENV.MAX_RESTARTS] = str(int(elastic[K.MAX_RESTARTS]))
    env[ENV.NPROC_PER_NODE] = nproc
    if elastic.get(K.RDZV_ID) is not None:
        env[ENV.RDZV_ID] = str(elastic[K.RDZV_ID])
    conf = elastic.get(K.RDZV_CONF)
    if conf:
        env[ENV.RDZV_CONF] = format_rdzv_conf((c[K.KEY], c[K.VALUE]) for c in conf)
    return env
