"""The FailureReport takes what torch 2.15's ``@record`` failure rendering (and 2.14.1's) adds for a worker a signal killed
(issue 33, item 4): its error handler's ``maybe_enrich_signal_failure_message``, which the stock handler
leaves a no-op and a torch build may override to add device-fault context.

The pure part runs on `FailureLog`; the launch part kills a worker with SIGKILL under the installed torch,
with a handler that enriches (as a build's would): on 2.14.1 and 2.15 the record carries the enriched message, as torch's
own ``ChildFailedError`` rendering does; on 2.13 (no hook) the record is what it always was. `make test-torch`
runs this file on 2.14.1 and 2.15.0.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

import elastic_idl as ei
from elastic_idl._errors import LaunchFailedError
from elastic_idl._launch.failures import FailureLog, WorkerExit


def _exit(exitcode: int, error_file: str = "") -> WorkerExit:
    return WorkerExit(rank=0, local_rank=0, pid=4242, exitcode=exitcode, error_file=error_file, detected_ns=1)


def test_a_signal_death_goes_through_the_hook_and_nothing_else_does() -> None:
    seen: list[tuple[str, str]] = []

    def enrich(message: str, error_file: str) -> str:
        seen.append((message, error_file))
        return f"{message} (GPU memory fault at 0x0)"

    log = FailureLog(run_id="r", role="default", node="n", enrich_signal=enrich)
    (killed,) = log.add(0, [_exit(-9, "/logs/0/error.json")])
    assert killed.message == "killed by SIGKILL (GPU memory fault at 0x0)"
    assert killed.signal == 9
    assert seen == [("killed by SIGKILL", "/logs/0/error.json")]
    (exited,) = log.add(1, [_exit(3)])
    assert exited.message == "exited with code 3 (no Python exception recorded)"
    assert len(seen) == 1  # an exit code is not a signal death
    plain = FailureLog(run_id="r", role="default", node="n")
    assert plain.add(0, [_exit(-11)])[0].message == "killed by SIGSEGV"


def test_a_hook_that_fails_leaves_the_message_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    def broken(message: str, error_file: str) -> str:
        raise RuntimeError("no device")

    log = FailureLog(run_id="r", role="default", node="n", enrich_signal=broken)
    with caplog.at_level(logging.WARNING, logger="elastic_idl"):
        (rec,) = log.add(0, [_exit(-9)])
    assert rec.message == "killed by SIGKILL"
    assert "failed to enrich a signal failure" in caplog.text
    empty = FailureLog(run_id="r", role="default", node="n", enrich_signal=lambda m, f: "")
    assert empty.add(0, [_exit(-9)])[0].message == "killed by SIGKILL"  # nothing to say is no message


# ---------------------------------------------------------------- the installed torch


@pytest.fixture
def enriching_handler(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """torch's error handler swapped for one that enriches signal failures, as a torch build may swap it;
    returns the (message, error_file) pairs it was asked about."""
    pytest.importorskip("torch")
    from torch.distributed.elastic.multiprocessing import errors

    calls: list[tuple[str, str]] = []

    class DeviceFaultHandler(errors.ErrorHandler):  # type: ignore[misc]
        def maybe_enrich_signal_failure_message(self, message: str, error_file: str) -> str:
            calls.append((message, error_file))
            return f"{message}\n[device] memory access fault on GPU 0"

    monkeypatch.setattr(errors, "get_error_handler", DeviceFaultHandler)
    return calls


def test_a_worker_killed_by_a_signal_carries_the_enriched_message(
    tmp_path: Path, enriching_handler: list[tuple[str, str]]
) -> None:
    from torch.distributed.elastic.multiprocessing import errors

    script = tmp_path / "die.py"
    script.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    task = ei.Elastic(nnodes="1:1", nproc_per_node=1).to_task()
    with pytest.raises(LaunchFailedError) as info:
        ei.launch(task, str(script), log_dir=tmp_path / "logs", failure_path=tmp_path / "report.json")
    root = info.value.failures[0]
    assert (root.rank, root.signal) == (0, 9)
    has_hook = hasattr(errors.ErrorHandler, "maybe_enrich_signal_failure_message")
    if not has_hook:  # torch 2.13: no hook, the record is as it always was
        assert root.message == "killed by SIGKILL"
        assert enriching_handler == []
        return
    assert root.message == "killed by SIGKILL\n[device] memory access fault on GPU 0"
    ((message, error_file),) = enriching_handler
    assert message == "killed by SIGKILL"
    assert Path(error_file).is_relative_to(tmp_path / "logs")  # the worker's error file, as torch passes it
    assert "memory access fault on GPU 0" in (tmp_path / "report.json").read_text()
    # torch's own rendering of a signal death goes through the same handler
    failure: Any = errors.ProcessFailure(local_rank=0, pid=1, exitcode=-9, error_file=str(tmp_path / "none.json"))
    assert "memory access fault on GPU 0" in errors.ChildFailedError("die.py", {0: failure}).format_msg()
