"""Running an Elastic task, locally or in a pod, through elastic-idl's launcher.

Where it runs is read from the env, once:

- in a pod of a PyTorchJob (the operator's ``PET_RDZV_ENDPOINT`` / ``PET_NNODES``
  are set): the operator's env is merged with the task by the launch spec's
  precedence rules (`elastic_idl.to_launch_spec`); the rendezvous id is
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
  all joined: new pods may), else ``FlyteUserRuntimeException`` around the
  ``LaunchFailedError`` (its ``.value``), locally as in a pod: the two kinds
  flytekitplugins-kfpytorch 1.16.31 raises, and what its released tests expect;
- in a pod, the rendezvous store lost (its host, worker-0's pod, is gone: a drain, a
  preemption, a node lost), or a node of the running group lost with too few left
  (``PeerLostError``): ``SystemExit(200)``, nothing written; the pod exits 200, which the
  operator's ``ExitCode`` policy (the renderer's default) retries, so the job re-forms around the
  recreated worker-0 (under ``Never``, upstream propeller's, the job fails and Flyte's ``retries``
  rerun it). An error document here would fail the task for good;
- in a pod, a rendezvous closed by another node (this pod came after the job ended there):
  ``IgnoreOutputs``, nothing written: the nodes that ran decided the outcome, and an error
  document from this pod would fail a task another pod completed;
- SIGTERM (the kubelet stopping the pod) or another handled signal: the launcher
  stops every worker, then the task re-raises the signal's own outcome
  (``SystemExit(128 + N)``; ``KeyboardInterrupt`` for SIGINT) so that the pod ends
  like a process killed by that signal and writes nothing to the output prefix: the
  operator may replace the pod, and a stale error or output file from a pod that
  was stopped must not decide the task.

A pod without rank 0 does not end before rank 0's outcome is written: it waits (at most
`RANK0_OUTCOME_WAIT_S`) until ``outputs.pb`` or an error document is under the task's
output prefix, since the operator marks an elastic job Succeeded as soon as any of its pods
succeeds, and propeller reads the outputs then.

Before the launch, the task function and its inputs must survive cloudpickle, which is how the
cold path (every pod with a remote raw-output prefix) sends them to workers: a local run fails
where the cluster would, with a hint, instead of passing locally and failing in every pod.
"""

from __future__ import annotations

import logging
import tempfile
from typing import Any

import flytekit
from flytekit.core.context_manager import FlyteContextManager
from flytekit.exceptions.user import FlyteRecoverableException, FlyteUserRuntimeException
from flytekit.extend import IgnoreOutputs

import elastic_idl as ei
from elastic_idl._sdk import in_pod
from elastic_idl._sdk.local import import_root, unpicklable
from elastic_idl._sdk.local import one_node as _one_node
from elastic_idl.flytekit import _fastpath, _runtime
from elastic_idl.flytekit._checkpoint import checkpoint_paths
from elastic_idl.flytekit._worker import TaskEntry, WorkerResult, recoverable_marker
from elastic_idl.pod import pod_env_here

__all__ = ["RANK0_OUTCOME_WAIT_S", "run_task"]

#: How long a pod without rank 0 waits for rank 0's outputs or error document (seconds).
RANK0_OUTCOME_WAIT_S = in_pod.OUTCOME_WAIT_S

_log = logging.getLogger("elastic_idl")
#: Reasons for a cold start already logged by this process (each is said once).
_said: set[str] = set()


def _say_once(reason: str) -> None:
    if reason not in _said:
        _said.add(reason)
        _log.info("elastic-idl flytekit: flytekit's loop runner keeps running (no warm fork server): %s", reason)


def _failure_error(err: Any, marker_dir: str) -> Exception:
    """The exception flytekit turns into its error document for a launch that failed for good,
    dated by the root cause (locally the caller gets it as it is, as from kfpytorch)."""
    root = err.failures[0] if err.failures else None
    when = root.time.ToNanoseconds() / 1e9 if root is not None and root.HasField("time") else None
    recoverable = isinstance(err, ei.RendezvousIncompleteError) or (
        root is not None and recoverable_marker(marker_dir, root.attempt, root.rank).exists()
    )
    error: Exception
    if recoverable:
        error = FlyteRecoverableException(str(err), timestamp=when)
    else:
        error = FlyteUserRuntimeException(err, timestamp=when)  # .value: the LaunchFailedError, its FailureReport
    return error


def _check_picklable(task: Any, kwargs: dict[str, Any]) -> None:
    """Raise TypeError, with a hint for flytekit users, when the cold path could not send the task."""
    fn = task.task_function
    name = str(getattr(fn, "__qualname__", None) or getattr(task, "name", "task"))
    where = (
        "In a pod whose raw-output prefix is remote (s3://, gs://, abfs://: every cluster run) workers "
        "always start cold and get the task function, what it uses and its inputs through cloudpickle, "
        "so this task would fail in every pod."
    )
    error = unpicklable(fn, kwargs, name, where)
    if error is not None:
        raise error


def _await_rank_0(ctx: Any, prefix: str, timeout_s: float = RANK0_OUTCOME_WAIT_S) -> bool:
    """Wait until rank 0's pod wrote outputs.pb or an error document under ``prefix``; False on timeout."""
    return in_pod.await_outcome(ctx.file_access.get_filesystem_for_path(prefix), prefix, timeout_s)


def run_task(task: Any, kwargs: dict[str, Any]) -> Any:
    """``execute`` of `ElasticFunctionTask` (see the module docs)."""
    config = task.task_config
    pod = pod_env_here()
    endpoint, env, in_a_pod = pod.rdzv_endpoint, pod.env, pod.in_pytorchjob
    params = flytekit.current_context()
    run_id = in_pod.run_id(config, pod, params.execution_id.name)
    if not in_a_pod:
        config, line = _one_node(config)
        if line:
            _log.warning(line)

    ctx = FlyteContextManager.current_context()
    raw_prefix = str(ctx.file_access.raw_output_prefix or params.raw_output_prefix or "")
    checkpoint_dest, checkpoint_src = checkpoint_paths(params)
    start_method = config.start_method or _runtime.DEFAULT_START_METHOD
    if start_method != "fork":
        _check_picklable(task, kwargs)  # fork never pickles; the other start methods do in a pod
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
            sys_path=[root] if (root := import_root(task.task_function)) else [],
        )
        if start_method == _runtime.DEFAULT_START_METHOD:
            why_cold = _fastpath.stop_idle_loop_runners(raw_prefix)
            if why_cold is not None:
                _say_once(why_cold)
        try:
            values = ei.launch(config.to_task(), entry, return_all=True, env=env, run_id=run_id, rdzv_endpoint=endpoint)
        except ei.LaunchInterruptedError as err:
            raise in_pod.interrupted(err) from None
        except (ei.RendezvousStoreLostError, ei.PeerLostError, ei.RendezvousClosedError) as err:
            if not in_a_pod:
                raise _failure_error(err, marker_dir) from None
            if isinstance(err, ei.RendezvousClosedError):
                _log.warning("elastic-idl: %s; this pod writes nothing (IgnoreOutputs)", str(err).splitlines()[0])
                raise IgnoreOutputs() from None
            raise in_pod.store_lost(err) from None
        except ei.LaunchFailedError as err:
            raise _failure_error(err, marker_dir) from None
        except ImportError as err:
            if err.name == "torch" or "torch" in str(err):
                raise ImportError(
                    "running an elastic_idl.Elastic task needs torch: install the elastic-idl wheel with its torch "
                    "extra (docs/guide/flytekit.md, Install)"
                ) from err
            raise
    if 0 not in values:
        _log.info("elastic-idl: this pod ran global ranks %s, not 0: no outputs (IgnoreOutputs)", sorted(values))
        prefix = str(params.output_metadata_prefix or "")
        if in_a_pod and prefix:
            _await_rank_0(ctx, prefix)
        raise IgnoreOutputs()
    result = values[0]
    if not isinstance(result, WorkerResult):
        raise TypeError(f"rank 0 returned {type(result).__name__}, expected the plugin's WorkerResult")
    for deck in result.decks:
        params.decks.append(deck)
    if result.output_metadata is not None and ctx.output_metadata_tracker is not None:
        ctx.output_metadata_tracker.add(result.value, result.output_metadata)
    return result.value
