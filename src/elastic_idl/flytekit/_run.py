"""Running an Elastic task, locally or in a pod, through elastic-idl's launcher.

Where it runs is read from the env, once:

- in a pod of a PyTorchJob (the operator's ``PET_RDZV_ENDPOINT`` / ``PET_NNODES``
  are set): the operator's env is merged with the task by the launch spec's
  precedence rules (:func:`elastic_idl.to_launch_spec`); the rendezvous id is
  ``PET_RDZV_ID`` > the task's ``rdzv_id`` > the Flyte execution id (what every
  pod of the job shares); ``ELASTIC_IDL_RDZV_ENDPOINT_OVERRIDE`` replaces the
  endpoint, as for the pod entrypoint;
- anywhere else (a local run, or a ``python-task`` pod for ``nnodes=1``): one
  node on loopback. A task with more than one node runs as one node here, and
  one log line says so, instead of waiting ``join_timeout`` for nodes that will
  never come.

Outcome, as flytekit expects it from ``execute``:

- the pod holding global rank 0 returns rank 0's value, and moves the decks and
  output metadata the function made in its worker into the task's context;
- a pod without rank 0 raises ``IgnoreOutputs``: it writes neither outputs nor an error;
- a failure for good raises, with the FailureReport's root-cause summary in the
  message and the root cause's time as the error time (propeller's "earliest
  error" strategy picks the real root cause across pods): ``FlyteRecoverableException``
  when the root cause raised a ``FlyteRecoverableException`` (or the nodes never
  all joined: new pods may), else, in a pod, ``FlyteUserRuntimeException`` around the
  ``LaunchFailedError``, the two kinds flytekitplugins-kfpytorch uses; in a local run
  (flytekit's local execution modes) the ``LaunchFailedError`` itself, a ``RuntimeError``,
  which is what kfpytorch's own tests expect (``pytest.raises(RuntimeError)``) and what a
  caller's ``except RuntimeError`` catches;
- SIGTERM (the kubelet stopping the pod) or another handled signal: the launcher
  stops every worker, then the task re-raises the signal's own outcome
  (``SystemExit(128 + N)``; ``KeyboardInterrupt`` for SIGINT) so that the pod ends
  like a process killed by that signal and writes nothing to the output prefix: the
  operator may replace the pod, and a stale error or output file from a pod that
  was stopped must not decide the task.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import tempfile
from typing import Any

import flytekit
from flytekit.core.context_manager import FlyteContextManager
from flytekit.exceptions.user import FlyteRecoverableException, FlyteUserRuntimeException
from flytekit.extend import IgnoreOutputs

import elastic_idl as ei
from elastic_idl.flytekit import _fastpath, _runtime
from elastic_idl.flytekit._worker import TaskEntry, WorkerResult, recoverable_marker

__all__ = ["run_task"]

_log = logging.getLogger("elastic_idl")
#: Reasons for a cold start already logged by this process (each is said once).
_said: set[str] = set()


def _say_once(reason: str) -> None:
    if reason not in _said:
        _said.add(reason)
        _log.info("elastic-idl flytekit: workers start from a cold fork server: %s", reason)


def _one_node(config: Any) -> tuple[Any, str]:
    """The config run as one node here, and the line that says so ("" when it already is one node)."""
    if config.to_task().elastic_config.max_replicas <= 1:
        return config, ""
    local = dataclasses.replace(config, nnodes="1:1")
    line = (
        f"elastic-idl: local run of a task with nnodes={config.nnodes!r} (no PET_* env of a PyTorchJob): "
        f"running 1 node with nproc_per_node={config.nproc_per_node!r} here"
    )
    return local, line


def _failure_error(err: Any, marker_dir: str, local: bool) -> Exception:
    """The exception flytekit turns into its error document for a launch that failed for good
    (``local``: a local run, where the caller gets it as it is)."""
    root = err.failures[0] if err.failures else None
    when = root.time.ToNanoseconds() / 1e9 if root is not None and root.HasField("time") else None
    recoverable = isinstance(err, ei.RendezvousIncompleteError) or (
        root is not None and recoverable_marker(marker_dir, root.attempt, root.rank).exists()
    )
    error: Exception
    if recoverable:
        error = FlyteRecoverableException(str(err), timestamp=when)
    elif local:
        error = err  # a RuntimeError with the FailureReport (.report, .failures), as kfpytorch's tests expect
    else:
        error = FlyteUserRuntimeException(err, timestamp=when)
    return error


def _interrupted(err: Any) -> BaseException:
    signum = int(getattr(err, "signal", signal.SIGTERM))
    _log.warning("elastic-idl: %s; no outputs are written", err)
    if signum == signal.SIGINT:
        return KeyboardInterrupt()
    return SystemExit(128 + signum)


def run_task(task: Any, kwargs: dict[str, Any]) -> Any:
    """``execute`` of :class:`~elastic_idl.flytekit.ElasticFunctionTask` (see the module docs)."""
    config = task.task_config
    environ = dict(os.environ)
    endpoint = environ.get(_runtime.RDZV_ENDPOINT_OVERRIDE_ENV) or None
    params = flytekit.current_context()
    env: dict[str, str] | None = None
    run_id: str | None = None
    if _runtime.in_pytorchjob(environ):
        env = environ
        if not environ.get(_runtime.ENV.RDZV_ID) and not config.rdzv_id:
            # What every pod of the job shares (the launch spec's own default is "none").
            run_id = params.execution_id.name or environ.get(_runtime.FLYTE_EXECUTION_ID_ENV) or None
    else:
        config, line = _one_node(config)
        if line:
            _log.warning(line)

    ctx = FlyteContextManager.current_context()
    raw_prefix = str(ctx.file_access.raw_output_prefix or params.raw_output_prefix or "")
    checkpoint_dest, checkpoint_src = _fastpath.checkpoint_paths(params)
    with tempfile.TemporaryDirectory(prefix="elastic-idl-flytekit-") as marker_dir:
        entry = TaskEntry(
            task.task_function,
            kwargs,
            marker_dir,
            {
                "raw_output_data_prefix": raw_prefix,
                "checkpoint_path": checkpoint_dest,
                "prev_checkpoint": checkpoint_src,
            },
        )
        if (config.start_method or _runtime.DEFAULT_START_METHOD) == _runtime.DEFAULT_START_METHOD:
            why_cold = _fastpath.stop_idle_loop_runners(raw_prefix)
            if why_cold is not None:
                _say_once(why_cold)
        try:
            with _runtime.quiet_cold_start_warning():
                values = ei.launch(
                    config.to_task(), entry, return_all=True, env=env, run_id=run_id, rdzv_endpoint=endpoint
                )
        except ei.LaunchInterruptedError as err:
            raise _interrupted(err) from None
        except ei.LaunchFailedError as err:
            state = ctx.execution_state
            local = state is None or state.is_local_execution()
            raise _failure_error(err, marker_dir, local) from None
        except ImportError as err:
            if err.name == "torch" or "torch" in str(err):
                raise ImportError(
                    "running an elastic_idl.Elastic task needs torch: pip install 'elastic-idl[torch]'"
                ) from err
            raise
    if 0 not in values:
        _log.info("elastic-idl: this pod ran global ranks %s, not 0: no outputs (IgnoreOutputs)", sorted(values))
        raise IgnoreOutputs()
    result = values[0]
    if not isinstance(result, WorkerResult):
        raise TypeError(f"rank 0 returned {type(result).__name__}, expected the plugin's WorkerResult")
    for deck in result.decks:
        params.decks.append(deck)
    if result.output_metadata is not None and ctx.output_metadata_tracker is not None:
        ctx.output_metadata_tracker.add(result.value, result.output_metadata)
    return result.value
