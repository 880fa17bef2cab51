"""``Elastic`` for the ``flyte`` SDK: flyteplugins-pytorch's arguments and defaults, elastic-idl's rules.

A sibling of `elastic_idl.Elastic` (flytekit's arguments and defaults), not a second set of
rules: every ``Elastic(...)`` here builds that class from the arguments it was given
(`to_elastic`), so it is validated when it is written by the same code, and its errors are
the same typed `elastic_idl.ValidationError`, each naming the argument the user wrote
(``nccl_collective_timeout_sec``, not our ``collective_timeout``). The arguments are
flyteplugins-pytorch 2.12's, positional in its order and with its defaults, so changing the
import line changes nothing else; elastic-idl's other settings are keyword-only extras.

Nothing here imports flyte or torch. When ``flyte`` is installed, this module's last step
registers both config types with Flyte 2's task plugin table (`elastic_idl.flyte2._register`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Literal

import elastic_idl as ei
from elastic_idl._errors import reject_unknown_keywords
from elastic_idl._task.names import JOIN_TIMEOUT

__all__ = ["FLYTE2_RDZV_CONFIGS", "Elastic", "RunPolicy", "to_elastic"]

#: flyteplugins-pytorch's default ``rdzv_configs`` (the same as flytekit's: 15 minutes for each).
FLYTE2_RDZV_CONFIGS: Mapping[str, int] = {"timeout": 900, JOIN_TIMEOUT: 900}

#: flyteplugins-pytorch's argument -> the `elastic_idl.Elastic` argument it sets, where the names differ.
ARGUMENT_OF: Mapping[str, str] = {
    "nccl_heartbeat_timeout_sec": "nccl_heartbeat_timeout",
    "nccl_collective_timeout_sec": "collective_timeout",
}
_NAME_HERE = {ours: theirs for theirs, ours in ARGUMENT_OF.items()}


@dataclass(frozen=True)
class RunPolicy:
    """The PyTorchJob's run policy, shaped as flyteplugins-pytorch's ``RunPolicy``.

    Same fields, order and defaults. flyteplugins-pytorch's own ``RunPolicy``, elastic-idl's
    `elastic_idl.RunPolicy` and a mapping of these fields are accepted by `Elastic` as well.

    Attributes:
        clean_pod_policy: Which pods are deleted when the job finishes: ``"None"``, ``"all"``
            or ``"Running"`` (any case; an `elastic_idl.CleanPodPolicy` too); None leaves it to the operator.
        ttl_seconds_after_finished: Seconds before a finished job is deleted; None: never.
        active_deadline_seconds: Seconds the job may run; None: no limit.
        backoff_limit: Retries before the job is marked failed; None: the operator's default.
    """

    clean_pod_policy: Literal["None", "all", "Running"] | None = None
    ttl_seconds_after_finished: int | None = None
    active_deadline_seconds: int | None = None
    backoff_limit: int | None = None


@dataclass(frozen=True)
class Elastic:
    """Elastic PyTorch training in a Flyte 2 ``TaskEnvironment``: flyteplugins-pytorch's ``Elastic``, validated.

    ``flyte.TaskEnvironment(name=..., plugin_config=Elastic(nnodes=2, nproc_per_node=4))``;
    each ``@env.task`` then runs through elastic-idl's Flyte 2 plugin
    (`elastic_idl.flyte2.ElasticFunctionTask`). The arguments, their order and their defaults
    are flyteplugins-pytorch 2.12's; validated when it is built, with the rules and typed errors
    of `elastic_idl.Elastic` (a `elastic_idl.ValidationError` naming the argument; a misspelt
    keyword is an `elastic_idl.UnknownArgumentError`). Frozen: use ``dataclasses.replace``.

    flyteplugins-pytorch's settings:

    Attributes:
        nnodes: Nodes: an int, or ``"MIN:MAX"`` (also ``"N"``). The int 1 gives a single-pod
            ``python-task``; ``"1"`` and ``"1:1"`` a one-worker PyTorchJob (as flyteplugins-pytorch).
        nproc_per_node: Worker processes per node: an int, or ``"auto"``, ``"cpu"``, ``"gpu"``.
        rdzv_backend: ``"c10d"`` (default), ``"etcd"``, ``"etcd-v2"`` or ``"static"``.
        run_policy: A `RunPolicy` (this one, flyteplugins-pytorch's or elastic-idl's) or a mapping.
        monitor_interval: Seconds between worker health checks (> 0, <= 3600). Default 3.
        max_restarts: Worker-group restarts before the job fails (>= 0). Default 3.
        rdzv_configs: Rendezvous settings; default ``{"timeout": 900, "join_timeout": 900}``.
            ``timeout`` is read as `elastic_idl.Elastic` reads it (``join_timeout`` for c10d).
        nccl_heartbeat_timeout_sec: Whole seconds before NCCL's monitoring thread aborts a worker
            whose watchdog is stuck (``TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC``); None: torch's. Default 300.
        nccl_async_error_handling: True exports ``TORCH_NCCL_ASYNC_ERROR_HANDLING=1``; False
            (default) leaves torch's default, as flyteplugins-pytorch does.
        nccl_collective_timeout_sec: The timeout of every process group a worker creates
            without one of its own (> 0, <= 24 h); None (default): torch's 10 minutes.
        nccl_enable_monitoring: True (default) exports ``TORCH_NCCL_ENABLE_MONITORING=1``;
            False leaves torch's default, as flyteplugins-pytorch does.

    elastic-idl's extras (keyword-only; the `elastic_idl.Elastic` arguments of the same names; None, the
    default of each, leaves `elastic_idl.Elastic`'s default):

    Attributes:
        start_method: ``"spawn"``, ``"fork"`` or ``"forkserver"``; None: the launcher's.
        image: The Worker pods' image; None: the task's.
        requests: The Worker pods' resource requests (``{"cpu": "2", "mem": "4Gi"}``).
        limits: Their limits, same form.
        restart_policy: ``"Never"``, ``"OnFailure"``, ``"Always"`` or an `elastic_idl.RestartPolicy`.
        rdzv_id: Rendezvous id; "" lets the runtime choose.
        rdzv_host: Rendezvous host; "" lets the runtime choose.
        rdzv_port: Rendezvous port 0..65535; 0 lets the runtime choose.
        role: Worker group role; "" means "default".
        redirects: Worker streams redirected to files: 0-3 or "none", "out", "err", "all".
        tee: Worker streams copied to the console as well, same values.
        local_ranks_filter: Local ranks whose output is shown; empty: all.
        numa_binding: None, "node", "socket", "exclusive" or "core-complex".
        signals_to_handle: Signal names forwarded to workers; empty: torch's list.
        shutdown_timeout: Seconds to wait for workers to stop before killing them; None: 30 s.
        virtual_local_rank: Give every worker LOCAL_RANK=0 and its own device.

    Example:
        ```python
        from elastic_idl.flyte2 import Elastic

        cfg = Elastic(nnodes="1:2", nproc_per_node=2, nccl_collective_timeout_sec=120)
        assert cfg.config.collective_timeout == 120  # the elastic_idl.Elastic it stands for
        ```
    """

    nnodes: int | str
    nproc_per_node: int | str
    rdzv_backend: str = ei.DEFAULT_RDZV_BACKEND
    run_policy: Any = None
    monitor_interval: float | str = 3
    max_restarts: int | str = 3
    rdzv_configs: Mapping[str, Any] | None = field(default_factory=lambda: dict(FLYTE2_RDZV_CONFIGS))
    nccl_heartbeat_timeout_sec: int | None = 300
    nccl_async_error_handling: bool = False
    nccl_collective_timeout_sec: float | None = None
    nccl_enable_monitoring: bool = True
    _: KW_ONLY
    # elastic-idl's extras: None stands for elastic_idl.Elastic's own default (one home for each).
    start_method: str | None = None
    image: str | None = None
    requests: Any = None
    limits: Any = None
    restart_policy: Any = None
    rdzv_id: str | None = None
    rdzv_host: str | None = None
    rdzv_port: int | str | None = None
    role: str | None = None
    redirects: int | str | None = None
    tee: int | str | None = None
    local_ranks_filter: Sequence[int] | str | None = None
    numa_binding: str | None = None
    signals_to_handle: Sequence[str] | str | None = None
    shutdown_timeout: float | str | None = None
    virtual_local_rank: bool | None = None
    _config: ei.Elastic = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_config", to_elastic(self))

    def __hash__(self) -> int:
        return hash(self._config)

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt (and so revalidated) from its arguments, like elastic_idl.Elastic.
        return (_rebuild, ({f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init},))

    @property
    def config(self) -> ei.Elastic:
        """The `elastic_idl.Elastic` this config stands for: what is validated, serialized and launched."""
        return self._config

    @property
    def task_type(self) -> str:
        """``"python-task"`` when ``nnodes`` is the int 1 (flyteplugins-pytorch's test), else ``"pytorch"``."""
        return self._config.task_type

    def to_custom(self) -> dict[str, Any]:
        """``TaskTemplate.custom``: flyteplugins-pytorch's dict plus elastic-idl's extension fields.

        Written for every ``nnodes``, the ``python-task`` of ``nnodes=1`` included, as
        flyteplugins-pytorch writes it.
        """
        return ei.to_custom(self._config.to_task())


def _rebuild(kwargs: dict[str, Any]) -> Elastic:
    return Elastic(**kwargs)


def _switch(value: object) -> object:
    """flyteplugins-pytorch's NCCL switch: True exports 1, False leaves torch's default (our None)."""
    return None if value is False else value


def to_elastic(cfg: Elastic) -> ei.Elastic:
    """The `elastic_idl.Elastic` for ``cfg``: its arguments under elastic-idl's names and meanings.

    Raises:
        ValidationError: An argument breaks a rule; each violation names ``cfg``'s argument.
    """
    nnodes: object = cfg.nnodes
    if isinstance(nnodes, str) and nnodes.strip() == "1":
        nnodes = "1:1"  # flyteplugins-pytorch: only the int 1 is a python-task
    run_policy = cfg.run_policy
    if isinstance(run_policy, Mapping) and not run_policy:
        run_policy = None  # flyteplugins-pytorch writes no run policy for a falsy one
    kwargs = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.init}
    kwargs = {k: v for k, v in kwargs.items() if not (v is None and k in _EXTRAS)}
    kwargs.update(
        nnodes=nnodes,
        run_policy=run_policy,
        nccl_async_error_handling=_switch(cfg.nccl_async_error_handling),
        nccl_enable_monitoring=_switch(cfg.nccl_enable_monitoring),
        increase_shared_mem=False,  # a flytekit pod-template switch; Flyte 2's plugins write no pod template
    )
    for theirs, ours in ARGUMENT_OF.items():
        kwargs[ours] = kwargs.pop(theirs)
    try:
        return ei.Elastic(**kwargs)
    except ei.ValidationError as err:
        raise ei.ValidationError([_renamed(v) for v in err.violations]) from None


def _renamed(v: ei.Violation) -> ei.Violation:
    """A violation of `elastic_idl.Elastic` as the argument of this ``Elastic`` that set the field."""
    head, dot, rest = v.field.partition(".")
    if head not in _NAME_HERE:
        return v
    return ei.Violation(_NAME_HERE[head] + dot + rest, v.rule, v.message)


#: elastic-idl's extras: the keyword-only arguments, each passed on only when given.
_EXTRAS = frozenset(f.name for f in dataclasses.fields(Elastic) if f.init and f.kw_only)
reject_unknown_keywords(RunPolicy)
reject_unknown_keywords(Elastic)

# Flyte 2's task plugin table (elastic_idl.flyte2._register): Flyte 2 has no entry points for task
# plugins, so the config registers itself as it loads, with elastic_idl.Elastic beside it.
from elastic_idl.flyte2._register import register_all  # noqa: E402 - the module's last step, on purpose

register_all(Elastic)
