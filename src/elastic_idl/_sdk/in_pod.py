"""What an SDK plugin's task does in a pod of a PyTorchJob, for both SDK plugins.

The flytekit plugin (``elastic_idl.flytekit``) and the Flyte 2 plugin (``elastic_idl.flyte2``)
run a task in a pod the same way around the launch; each adds only how its SDK writes (or does
not write) outputs and errors:

- the rendezvous id (`run_id`): ``PET_RDZV_ID`` > the task's ``rdzv_id`` > the SDK's run (what
  every pod of the job shares: flytekit's execution id, Flyte 2's run name) >
  ``$FLYTE_INTERNAL_EXECUTION_ID``; the launch spec's own default is "none";
- a signal (`interrupted`): the pod ends as a process killed by that signal would
  (``SystemExit(128 + N)``, ``KeyboardInterrupt`` for SIGINT), writing nothing;
- the rendezvous store lost, or a node of the running group lost with too few left
  (`store_lost`): ``SystemExit(200)``, writing nothing, which the operator's ``ExitCode`` policy
  retries;
- a pod that ends without writing (no rank 0 here, or another pod decided the outcome) waits
  for the outcome to be written first (`await_outcome`): the operator marks an elastic job
  Succeeded as soon as one of its pods succeeds, and the backend then reads the output prefix.

No SDK and no torch is imported here.
"""

from __future__ import annotations

import logging
import signal
import time
from typing import TYPE_CHECKING, Any

from elastic_idl._task.names import ENV
from elastic_idl.exit_codes import EXIT_STORE_LOST

if TYPE_CHECKING:
    from elastic_idl._sdk.elastic import Elastic
    from elastic_idl.pod import PodEnv

__all__ = ["OUTCOME_POLL_S", "OUTCOME_WAIT_S", "await_outcome", "interrupted", "run_id", "store_lost"]

#: How long a pod that writes nothing waits for the outcome under the output prefix (seconds):
#: by then the workers of every node have passed torch's exit barrier together, so only rank 0's
#: own upload is left (its outputs' type conversion and upload, which may include files).
OUTCOME_WAIT_S = 600.0
#: How often it looks (seconds): one listing of the output prefix each time.
OUTCOME_POLL_S = 1.0
#: The file name of the outputs both SDKs write under the output prefix.
OUTPUTS_FILE = "outputs.pb"

_log = logging.getLogger("elastic_idl")


def run_id(config: Elastic, pod: PodEnv, sdk_run: str | None) -> str | None:
    """The rendezvous id to pass to `elastic_idl.launch` in a pod; None leaves it to the launch spec.

    None outside a PyTorchJob, and when ``PET_RDZV_ID`` or the task's ``rdzv_id`` names it.
    """
    if pod.env is None or pod.env.get(ENV.RDZV_ID) or config.rdzv_id:
        return None
    return sdk_run or pod.execution_id or None


def is_outcome(name: str) -> bool:
    """Whether a file name under the output prefix is an outcome: the outputs, or an error document
    (``error.pb``, or flytekit's ``error-<pod>.pb`` under an error aggregation strategy)."""
    return name == OUTPUTS_FILE or (name.startswith("error") and name.endswith(".pb"))


def await_outcome(fs: Any, prefix: str, timeout_s: float = OUTCOME_WAIT_S) -> bool:
    """Wait until an outcome (`is_outcome`) is under ``prefix`` on the fsspec filesystem ``fs``.

    A listing that fails is said once per distinct error and tried again. Returns False when
    ``timeout_s`` passed first (said in a warning).
    """
    root = prefix.rstrip("/")
    started = time.monotonic()
    failed: set[str] = set()
    _log.info("elastic-idl: waiting for rank 0's outcome under %s (at most %.0f s)", prefix, timeout_s)
    while True:
        names: set[str] = set()
        try:
            fs.invalidate_cache(root)  # s3fs and gcsfs cache listings
            names = {str(p).rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(root, detail=False)}
        except FileNotFoundError:
            pass
        except Exception as exc:  # the store answered with an error: look again until the deadline
            text = f"{type(exc).__name__}: {exc}"
            if text not in failed:
                failed.add(text)
                _log.warning("elastic-idl: listing %s failed (%s); looking again", prefix, text)
        if any(is_outcome(n) for n in names):
            _log.info("elastic-idl: rank 0's outcome is written (%.1f s)", time.monotonic() - started)
            return True
        if time.monotonic() - started >= timeout_s:
            _log.warning(
                "elastic-idl: rank 0's outcome is not under %s after %.0f s; this pod ends without it",
                prefix,
                timeout_s,
            )
            return False
        time.sleep(OUTCOME_POLL_S)


def store_lost(err: Exception) -> SystemExit:
    """The pod's end for a lost rendezvous store or a lost peer: exit 200 (retryable), nothing written."""
    _log.warning(
        "elastic-idl: %s; exiting %d (retryable) with nothing written: the job re-forms when the lost pod is recreated",
        str(err).splitlines()[0],
        int(EXIT_STORE_LOST),
    )
    return SystemExit(int(EXIT_STORE_LOST))


def interrupted(err: Exception) -> BaseException:
    """The pod's end for a launch a signal interrupted: that signal's own outcome, nothing written."""
    signum = int(getattr(err, "signal", signal.SIGTERM))
    _log.warning("elastic-idl: %s; no outputs are written", err)
    if signum == signal.SIGINT:
        return KeyboardInterrupt()
    return SystemExit(128 + signum)
