"""The pod entrypoint: ``python -m elastic_idl.pod [options] -- ENTRYPOINT [ARGS...]``.

What the ``pytorch`` container of a rendered PyTorchJob runs (``elastic-idl pod``
is the same). With the CLI, the only code that reads ``os.environ`` or files.

In a pod it:

1. decodes the task: ``--task-file PATH`` (binary, JSON, textproto or YAML), or
   ``--task-template PATH`` (a Flyte TaskTemplate as JSON or YAML: its ``custom``
   and ``taskTypeVersion``), else the env var ``ELASTIC_IDL_TASK`` (the custom
   dict as JSON, which the renderer sets) with ``ELASTIC_IDL_TASK_TYPE_VERSION``;
2. merges the operator's env (``PET_*``) by the launch spec's documented
   precedence: the endpoint and run id come from the env, everything else from
   the task (a differing env value is logged and ignored);
3. launches ENTRYPOINT through the runtime's launcher: a script path, a module
   (``--module``) or a function (``--call pkg.module:function``, called with ARGS
   as strings).

On exit:

- the pod whose workers include global rank 0 writes the result to ``--output``
  (default ``$ELASTIC_IDL_OUTPUT``, else ``/tmp/elastic-idl/result.json``):
  ``{"run_id": ..., "rank": 0, "return_value": ...}``, the value as JSON (a
  script or module returns null; a value JSON cannot hold is written as its
  ``repr``). Every other pod exits 0 and writes nothing, like flytekit's IgnoreOutputs;
- a failed launch writes a ``FailureReport`` (protobuf JSON, root cause first)
  to ``--failure-path`` (default ``$ELASTIC_IDL_FAILURE_PATH``, else
  ``/tmp/elastic-idl/failure.json``); a path ending in ``/`` is a folder (a volume
  that outlives the pod), where every pod incarnation writes its own
  ``<HOSTNAME>.<UTC start time>.<pid>.json``, so a restarted or recreated pod never
  overwrites the report of the one before it. Its summary and root cause (at most
  4096 bytes) to ``--termination-log`` (default ``/dev/termination-log`` when it
  exists), which Kubernetes shows as the container's termination message.

Exit codes: 0 ok (also for pods without rank 0); 1 invalid input (the task does
not decode or breaks a rule, bad env); 2 usage (bad flags, no task, no
ENTRYPOINT); 3 the job failed (workers failed after all restarts); 4 the
rendezvous never completed (fewer than min nodes within the join timeout);
128+N stopped by signal N (130 SIGINT, 143 SIGTERM); 200 the rendezvous store is
unreachable because its host (worker-0) is gone: retryable (>= 128, which the
operator's ExitCode policy retries) and never a signal (128+N stops at 192).

Endpoint override, for running pods outside Kubernetes: ``--rdzv-endpoint
HOST:PORT`` or ``$ELASTIC_IDL_RDZV_ENDPOINT_OVERRIDE`` replaces the endpoint
from ``PET_RDZV_ENDPOINT`` (whose ``<job>-worker-0`` only resolves in the cluster).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from elastic_idl._codec import decode, from_custom
from elastic_idl._errors import DecodeError, ElasticIdlError, ValidationError
from elastic_idl._kubeflow import TASK_ENV, TASK_TYPE_VERSION_ENV
from elastic_idl._messages import Task, task_class
from elastic_idl._spec import DEFAULT_RUN_ID, to_launch_spec

__all__ = [
    "DEFAULT_FAILURE_PATH",
    "DEFAULT_OUTPUT",
    "EXIT_INTERRUPTED",
    "EXIT_INVALID",
    "EXIT_JOB_FAILED",
    "EXIT_OK",
    "EXIT_RENDEZVOUS",
    "EXIT_STORE_LOST",
    "EXIT_USAGE",
    "FAILURE_PATH_ENV",
    "OUTPUT_ENV",
    "RDZV_ENDPOINT_OVERRIDE_ENV",
    "main",
    "pod_main",
]

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_USAGE = 2
EXIT_JOB_FAILED = 3
EXIT_RENDEZVOUS = 4
#: The rendezvous store's host (worker-0) is gone: retry the pod. >= 128, so the operator's
#: ExitCode policy recreates the pod; above 128 + 64 (SIGRTMAX), so never "killed by signal N".
EXIT_STORE_LOST = 200
EXIT_INTERRUPTED = 130
_EXIT_SIGNAL_BASE = 128

#: Env var: where the rank-0 pod writes the result (``--output`` wins).
OUTPUT_ENV = "ELASTIC_IDL_OUTPUT"
#: Env var: where a failed pod writes the FailureReport JSON (``--failure-path`` wins).
FAILURE_PATH_ENV = "ELASTIC_IDL_FAILURE_PATH"
#: Env var: HOST:PORT replacing the operator's PET_RDZV_ENDPOINT (``--rdzv-endpoint`` wins).
RDZV_ENDPOINT_OVERRIDE_ENV = "ELASTIC_IDL_RDZV_ENDPOINT_OVERRIDE"
#: Env var Flyte sets in task pods: the execution id, the default rendezvous id.
FLYTE_EXECUTION_ID_ENV = "FLYTE_INTERNAL_EXECUTION_ID"
DEFAULT_OUTPUT = "/tmp/elastic-idl/result.json"
DEFAULT_FAILURE_PATH = "/tmp/elastic-idl/failure.json"
#: Kubernetes' default terminationMessagePath, and the size it keeps.
TERMINATION_LOG = "/dev/termination-log"
TERMINATION_LOG_MAX_BYTES = 4096
#: Keys of a Flyte TaskTemplate (JSON form, and snake_case) the pod reads.
_TEMPLATE_CUSTOM = "custom"
_TEMPLATE_VERSION_KEYS = ("taskTypeVersion", "task_type_version")

_log = logging.getLogger("elastic_idl")

_EPILOG = (
    "Task source: --task-file, --task-template, else $ELASTIC_IDL_TASK (+ $ELASTIC_IDL_TASK_TYPE_VERSION). "
    "Rank 0's pod writes the result to --output; a failure writes the FailureReport JSON to --failure-path. "
    "Exit codes: 0 ok, 1 invalid input, 2 usage, 3 job failed, 4 rendezvous incomplete, 128+N signal N, "
    "200 rendezvous store host lost (retry the pod)."
)


class _Usage(Exception):
    """A usage error: exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        raise _Usage(message)


def _say(message: str) -> None:
    """One line to stderr: the entrypoint, like the CLI, talks to the pod log."""
    sys.stderr.write(message + "\n")


def build_parser() -> argparse.ArgumentParser:
    """The pod entrypoint's argument parser (everything after ``--`` is the ENTRYPOINT)."""
    p = _Parser(
        prog="python -m elastic_idl.pod",
        usage="%(prog)s [options] -- ENTRYPOINT [ARGS...]",
        description="Run one pod of an elastic PyTorchJob: decode the task, merge the operator's env, launch.",
        epilog=_EPILOG,
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--task-file", metavar="PATH", help="the task (binary, JSON, textproto or YAML)")
    src.add_argument(
        "--task-template", metavar="PATH", help="a Flyte TaskTemplate (JSON or YAML): custom + taskTypeVersion"
    )
    p.add_argument(
        "--task-type-version",
        type=int,
        choices=(0, 1),
        help=f"task shape of --task-file or ${TASK_ENV} (default ${TASK_TYPE_VERSION_ENV}, else 1)",
    )
    kind = p.add_mutually_exclusive_group()
    kind.add_argument("--module", action="store_true", help="ENTRYPOINT is a module (like python -m)")
    kind.add_argument("--call", action="store_true", help="ENTRYPOINT is pkg.module:function, called with ARGS")
    p.add_argument(
        "--output", metavar="PATH", help=f"result file of rank 0's pod (default ${OUTPUT_ENV}, else {DEFAULT_OUTPUT})"
    )
    p.add_argument(
        "--failure-path",
        metavar="PATH",
        help=(
            f"FailureReport JSON on failure (default ${FAILURE_PATH_ENV}, else {DEFAULT_FAILURE_PATH}); "
            "ending in /: a folder, one <HOSTNAME>.<time>.<pid>.json per pod incarnation"
        ),
    )
    p.add_argument(
        "--termination-log",
        metavar="PATH",
        help=f"short failure message for Kubernetes (default {TERMINATION_LOG} when it exists)",
    )
    p.add_argument(
        "--rdzv-endpoint",
        metavar="HOST:PORT",
        help=f"replace the operator's PET_RDZV_ENDPOINT (default ${RDZV_ENDPOINT_OVERRIDE_ENV})",
    )
    p.add_argument(
        "--run-id",
        help=f"rendezvous id (default: PET_RDZV_ID, the task's rdzv_id, ${FLYTE_EXECUTION_ID_ENV}, else 'none')",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="log warnings only")
    return p


def _split(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    argv = list(argv)
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, []


def _version(flag: int | None, environ: Mapping[str, str]) -> int:
    if flag is not None:
        return flag
    raw = environ.get(TASK_TYPE_VERSION_ENV, "1")
    try:
        value = int(raw)
        task_class(value)
    except (ValueError, ElasticIdlError):
        raise DecodeError(TASK_TYPE_VERSION_ENV, f"{raw!r} is not a task_type_version (0 or 1)") from None
    return value


def load_task(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[Task, int]:
    """The task and its task_type_version, from the first source that is given."""
    if args.task_template:
        text = Path(args.task_template).read_text()
        try:
            template = yaml.safe_load(text)  # YAML is a superset of JSON
        except yaml.YAMLError as exc:
            raise DecodeError("", f"task template is neither JSON nor YAML: {exc}") from None
        if not isinstance(template, Mapping) or not isinstance(template.get(_TEMPLATE_CUSTOM), Mapping):
            raise DecodeError(_TEMPLATE_CUSTOM, "a task template needs a `custom` object")
        found = [template[k] for k in _TEMPLATE_VERSION_KEYS if k in template]
        # proto3 JSON leaves out a zero taskTypeVersion: absent means 0.
        declared = found[0] if found else 0
        if isinstance(declared, bool) or not isinstance(declared, int):
            raise DecodeError("taskTypeVersion", f"expected 0 or 1, got {declared!r}")
        if args.task_type_version is not None and args.task_type_version != declared:
            raise DecodeError(
                "taskTypeVersion",
                f"the template declares {declared} but --task-type-version is {args.task_type_version}",
            )
        return from_custom(template[_TEMPLATE_CUSTOM], task_type_version=declared), declared
    version = _version(args.task_type_version, environ)
    if args.task_file:
        return decode(Path(args.task_file).read_bytes(), task_type_version=version), version
    if TASK_ENV in environ:
        return decode(environ[TASK_ENV], format="json", task_type_version=version), version
    raise _Usage(f"no task: give --task-file or --task-template, or set {TASK_ENV}")


def _callable(target: str) -> Callable[..., Any]:
    module, sep, name = target.partition(":")
    if not sep or not module or not name:
        raise _Usage(f"--call needs pkg.module:function, got {target!r}")
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as exc:
        raise DecodeError("ENTRYPOINT", f"cannot import {module!r}: {exc}") from None
    for part in name.split("."):
        if not hasattr(obj, part):
            raise DecodeError("ENTRYPOINT", f"{module!r} has no attribute {name!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise DecodeError("ENTRYPOINT", f"{target!r} is not callable")
    return obj  # type: ignore[no-any-return]


def _write_atomic(path: str, text: str) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{time.time_ns()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, target)


def failure_file(path: str, environ: Mapping[str, str]) -> str:
    """Where this pod incarnation writes its FailureReport.

    A path ending in ``/`` names a folder kept across restarts (a volume): the report
    goes to ``<folder>/<HOSTNAME>.<UTC now>.<pid>.json``, one file per incarnation
    (in Kubernetes HOSTNAME is the pod name; the time tells incarnations apart, as
    the pod entrypoint is PID 1 in every one of them). Any other path is used as is.
    """
    if not path.endswith(("/", os.sep)):
        return path
    host = environ.get("HOSTNAME") or socket.gethostname()
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    return os.path.join(path, f"{host}.{stamp}.{os.getpid()}.json")


def _result_json(run_id: str, value: Any) -> str:
    return json.dumps({"run_id": run_id, "rank": 0, "return_value": value}, default=repr, sort_keys=True) + "\n"


def _termination_message(failure_path: str, fallback: str) -> str:
    summary, root = fallback, ""
    try:
        report = json.loads(Path(failure_path).read_text())
        summary = str(report.get("summary") or fallback)
        failures = report.get("failures") or []
        if failures:
            first = failures[0]
            root = f"root cause: rank {first.get('rank', 0)} on {first.get('node', '?')}: {first.get('message', '')}"
    except (OSError, ValueError, AttributeError):
        pass
    text = "\n".join(x for x in (summary, root, f"failure report: {failure_path}") if x)
    data = text.encode("utf-8")[:TERMINATION_LOG_MAX_BYTES]
    return data.decode("utf-8", errors="ignore")


def _record_failure(exc: BaseException, args: argparse.Namespace, failure_path: str, run_id: str) -> None:
    """Make sure a FailureReport exists at failure_path, then write the termination message."""
    if not Path(failure_path).is_file():
        # The launcher writes the full report itself; this covers errors before it could.
        from google.protobuf import json_format

        from elastic_idl._messages import FailureReport

        report = FailureReport(run_id=run_id, summary=str(exc) or type(exc).__name__)
        try:
            _write_atomic(failure_path, json_format.MessageToJson(report) + "\n")
        except OSError as err:
            _log.warning("elastic-idl pod: cannot write the failure report to %s: %s", failure_path, err)
    log = args.termination_log
    if log is None and os.path.exists(TERMINATION_LOG):
        log = TERMINATION_LOG
    if log:
        try:
            with open(log, "w", encoding="utf-8") as fh:
                fh.write(_termination_message(failure_path, str(exc)))
        except OSError as err:
            _log.warning("elastic-idl pod: cannot write the termination log %s: %s", log, err)


def _exit_code_of_launch_failure(exc: BaseException) -> int:
    names = {cls.__name__ for cls in type(exc).__mro__}
    if "LaunchInterruptedError" in names:
        return _EXIT_SIGNAL_BASE + int(getattr(exc, "signal", EXIT_INTERRUPTED - _EXIT_SIGNAL_BASE))
    if "RendezvousIncompleteError" in names:
        return EXIT_RENDEZVOUS
    if "RendezvousStoreLostError" in names:
        return EXIT_STORE_LOST
    return EXIT_JOB_FAILED


@contextlib.contextmanager
def _quiet(logger: logging.Logger) -> Iterator[None]:
    """Silence INFO for a dry run whose decisions the launcher logs again."""
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def _run_id(task: Task, environ: Mapping[str, str], flag: str | None, endpoint: str | None) -> str:
    """The rendezvous id every pod of the job agrees on.

    ``--run-id`` > ``PET_RDZV_ID`` > the task's rdzv_id > ``$FLYTE_INTERNAL_EXECUTION_ID``
    (the Flyte execution id, what flytekit uses) > "none". Also rejects an invalid
    task or env (ValidationError) before torch is imported.
    """
    with _quiet(_log):
        spec = to_launch_spec(task, env=environ, run_id=flag, rdzv_endpoint=endpoint)
    if flag is None and spec.run_id == DEFAULT_RUN_ID and environ.get(FLYTE_EXECUTION_ID_ENV):
        return environ[FLYTE_EXECUTION_ID_ENV]
    return spec.run_id


def pod_main(argv: Sequence[str] | None = None, *, environ: Mapping[str, str] | None = None) -> int:
    """Run the pod entrypoint with ``argv`` (without the program name); returns the exit code.

    ``environ`` defaults to ``os.environ`` (the pod's env, with the operator's ``PET_*``).
    """
    environ = dict(os.environ if environ is None else environ)
    head, tail = _split(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        try:
            args = parser.parse_args(head)
        except SystemExit as exc:  # --help
            return int(exc.code or 0)
        if not tail:
            raise _Usage("give what to run after --: a script, --module MODULE or --call pkg.module:function")
    except _Usage as exc:
        parser.print_usage(sys.stderr)
        _say(f"elastic-idl pod: error: {exc}")
        return EXIT_USAGE
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.WARNING if args.quiet else logging.INFO,
            format="%(message)s",
            stream=sys.stderr,
        )
    output = args.output or environ.get(OUTPUT_ENV) or DEFAULT_OUTPUT
    failure_path = failure_file(args.failure_path or environ.get(FAILURE_PATH_ENV) or DEFAULT_FAILURE_PATH, environ)
    endpoint = args.rdzv_endpoint or environ.get(RDZV_ENDPOINT_OVERRIDE_ENV) or None

    try:
        task, _ = load_task(args, environ)
        run_id = _run_id(task, environ, args.run_id, endpoint)
        target: Any = _callable(tail[0]) if args.call else tail[0]
    except _Usage as exc:
        parser.print_usage(sys.stderr)
        _say(f"elastic-idl pod: error: {exc}")
        return EXIT_USAGE
    except ValidationError as exc:
        for v in exc.violations:
            _say(f"elastic-idl pod: {v}")
        return EXIT_INVALID
    except (ElasticIdlError, OSError) as exc:
        _say(f"elastic-idl pod: error: {exc}")
        return EXIT_INVALID
    if endpoint:
        _log.info("elastic-idl pod: rendezvous endpoint overridden by %s: %s", RDZV_ENDPOINT_OVERRIDE_ENV, endpoint)

    from elastic_idl._launcher import launch  # imports torch: only now

    try:
        results = launch(
            task,
            target,
            *tail[1:],
            return_all=True,
            env=environ,
            run_id=run_id,
            rdzv_endpoint=endpoint,
            failure_path=failure_path,
            module=bool(args.module),
        )
    except ValidationError as exc:
        for v in exc.violations:
            _say(f"elastic-idl pod: {v}")
        return EXIT_INVALID
    except (TypeError, FileNotFoundError, ModuleNotFoundError) as exc:
        # The launcher checks the entrypoint before it starts anything.
        _say(f"elastic-idl pod: error: ENTRYPOINT: {exc}")
        return EXIT_INVALID
    except KeyboardInterrupt as exc:
        _record_failure(exc, args, failure_path, run_id)
        return EXIT_INTERRUPTED
    except ElasticIdlError as exc:
        code = _exit_code_of_launch_failure(exc)
        _say(f"elastic-idl pod: job failed: {exc}")
        _record_failure(exc, args, failure_path, run_id)
        return code
    if not isinstance(results, Mapping):
        raise TypeError(f"launch(return_all=True) returned {type(results).__name__}, expected a mapping of rank")
    if 0 in results:
        _write_atomic(output, _result_json(run_id, results[0]))
        _log.info("elastic-idl pod: this pod ran global rank 0; result written to %s", output)
    else:
        _log.info("elastic-idl pod: no global rank 0 here (ranks %s); no outputs, like IgnoreOutputs", sorted(results))
    return EXIT_OK


def main() -> None:
    """``python -m elastic_idl.pod``."""
    raise SystemExit(pod_main(sys.argv[1:]))


if __name__ == "__main__":
    main()
