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
   (``--module MODULE [-- ARGS...]``, or ``--module -- MODULE ARGS...``) or a
   function (``--call pkg.module:function [-- ARGS...]``, likewise; called with
   ARGS as strings).

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

Exit codes (`elastic_idl.exit_codes`, the CLI's table): 0 ok (also for pods
without rank 0); 1 invalid input (the task does not decode or breaks a rule, bad
env, an unusable entrypoint, an output path that cannot be written); 2 usage (bad
flags, no task, no ENTRYPOINT); 3 the job failed (workers failed after all
restarts); 4 the rendezvous never completed (fewer than min nodes within the join
timeout, or the rendezvous host never resolved); 128+N stopped by signal N (130
SIGINT, 143 SIGTERM); 200 the rendezvous store is unreachable
because its host (worker-0) is gone, or the group lost a node while it ran and
fewer than min nodes re-formed within the join timeout (``PeerLostError``):
retryable (>= 128, which the operator's ExitCode policy retries) and never a
signal (128+N stops at 192).

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
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from elastic_idl._errors import DecodeError, ElasticIdlError, ValidationError, os_error_text, violation_lines
from elastic_idl._launch.failures import check_writable, report_json, write_atomic
from elastic_idl._launch.spec import entrypoint_problem, to_launch_spec
from elastic_idl._launch.worker import cwd_first_on_path
from elastic_idl._task.codec import decode, format_of_path, from_custom, load_document, read_task_file
from elastic_idl._task.messages import Task, task_class
from elastic_idl._task.names import DEFAULT_RUN_ID, ENV, TASK_ENV, TASK_TYPE_VERSION_ENV
from elastic_idl._task.view import TaskView, view
from elastic_idl.exit_codes import (
    EXIT_CODES_TEXT,
    EXIT_INTERRUPTED,
    EXIT_INVALID,
    EXIT_JOB_FAILED,
    EXIT_OK,
    EXIT_RENDEZVOUS,
    EXIT_STORE_LOST,
    EXIT_USAGE,
    ExitCode,
    exit_code_of,
)

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
    "ExitCode",
    "PodEnv",
    "main",
    "pod_env_here",
    "pod_main",
]

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
    "ENTRYPOINT: a script, --module MODULE or --call pkg.module:function (ARGS after --; or the flag "
    "alone and the name first after --). "
    "Rank 0's pod writes the result to --output; a failure writes the FailureReport JSON to --failure-path. "
    f"{EXIT_CODES_TEXT}"
)
_NO_ENTRYPOINT = "give what to run: -- SCRIPT [ARGS...], --module MODULE or --call pkg.module:function"


class PodEnv(NamedTuple):
    """What an SDK plugin's task reads of its process's env, once (`pod_env_here`).

    Attributes:
        env: The env, when it is a pod of an elastic PyTorchJob (the operator's ``PET_RDZV_ENDPOINT``
            or ``PET_NNODES`` is set); None anywhere else (a local run, a ``python-task`` pod).
        rdzv_endpoint: ``$ELASTIC_IDL_RDZV_ENDPOINT_OVERRIDE``, which replaces ``PET_RDZV_ENDPOINT``; None if unset.
        execution_id: ``$FLYTE_INTERNAL_EXECUTION_ID`` (what flytekit pods share); None if unset.
    """

    env: dict[str, str] | None
    rdzv_endpoint: str | None
    execution_id: str | None

    @property
    def in_pytorchjob(self) -> bool:
        """Whether this process is a pod of an elastic PyTorchJob."""
        return self.env is not None


def pod_env_here(environ: Mapping[str, str] | None = None) -> PodEnv:
    """The pod env of this process for an SDK plugin's task (``environ`` defaults to ``os.environ``).

    With the CLI, this module is where the SDK plugins read the env: they pass ``env``,
    ``rdzv_endpoint`` on to `elastic_idl.launch` and take the run id from their SDK.
    """
    env = dict(os.environ if environ is None else environ)
    in_job = ENV.RDZV_ENDPOINT in env or ENV.NNODES in env
    return PodEnv(
        env if in_job else None,
        env.get(RDZV_ENDPOINT_OVERRIDE_ENV) or None,
        env.get(FLYTE_EXECUTION_ID_ENV) or None,
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
        usage=(
            "%(prog)s [options] -- SCRIPT [ARGS...]\n"
            "       %(prog)s [options] --module MODULE [-- ARGS...]\n"
            "       %(prog)s [options] --call pkg.module:function [-- ARGS...]"
        ),
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
    kind.add_argument(
        "--module",
        nargs="?",
        const=True,
        metavar="MODULE",
        help="run MODULE like python -m (alone: the first word after -- is the module)",
    )
    kind.add_argument(
        "--call",
        nargs="?",
        const=True,
        metavar="pkg.module:function",
        help="call the function with ARGS as strings (alone: the first word after -- names it)",
    )
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
    verbosity = p.add_mutually_exclusive_group()
    verbosity.add_argument("-q", "--quiet", action="store_true", help="log warnings only")
    verbosity.add_argument(
        "-v", "--verbose", action="store_true", help="also log torch's own tracebacks of failed workers"
    )
    from elastic_idl import __version__

    p.add_argument("--version", action="version", version=f"elastic-idl {__version__}")
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
        data = read_task_file(args.task_template)
        template_format = format_of_path(args.task_template)
        template = load_document(data, template_format if template_format in ("json", "yaml") else None)
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
        data = read_task_file(args.task_file)
        return decode(data, format=format_of_path(args.task_file), task_type_version=version), version
    if TASK_ENV in environ:
        return decode(environ[TASK_ENV], format="json", task_type_version=version), version
    raise _Usage(f"no task: give --task-file or --task-template, or set {TASK_ENV}")


def _callable(target: str) -> Callable[..., Any]:
    module, sep, name = target.partition(":")
    if not sep or not module or not name:
        raise _Usage(f"--call needs pkg.module:function, got {target!r}")
    try:
        with cwd_first_on_path():  # found as python -m finds modules: the working directory first
            obj: Any = importlib.import_module(module)
    except Exception as exc:  # a missing module, or one whose import raised
        raise DecodeError("ENTRYPOINT", f"cannot import {module!r}: {type(exc).__name__}: {exc}") from None
    for part in name.split("."):
        if not hasattr(obj, part):
            raise DecodeError("ENTRYPOINT", f"{module!r} has no attribute {name!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise DecodeError("ENTRYPOINT", f"{target!r} is not callable")
    return obj  # type: ignore[no-any-return]


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
        from elastic_idl._task.messages import FailureReport

        report = FailureReport(run_id=run_id, summary=str(exc) or type(exc).__name__)
        try:
            write_atomic(failure_path, report_json(report))
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


@contextlib.contextmanager
def _quiet(logger: logging.Logger) -> Iterator[None]:
    """Silence INFO for a dry run whose decisions the launcher logs again."""
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def _run_id(task: TaskView, environ: Mapping[str, str], flag: str | None, endpoint: str | None) -> str:
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


class _Exit(Exception):
    """Leave pod_main with this exit code (the step that raises it has said why)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class _Paths(NamedTuple):
    output: str
    failure_path: str
    endpoint: str | None


def pod_main(argv: Sequence[str] | None = None, *, environ: Mapping[str, str] | None = None) -> int:
    """Run the pod entrypoint with ``argv`` (without the program name); returns the exit code.

    ``environ`` defaults to ``os.environ`` (the pod's env, with the operator's ``PET_*``).
    """
    if argv is not None and (isinstance(argv, (str, bytes)) or not all(isinstance(a, str) for a in argv)):
        raise TypeError("argv must be a list of strings (shlex.split() splits a command line), not one string")
    environ = dict(os.environ if environ is None else environ)
    parser = build_parser()
    try:
        args, tail = _parse(parser, sys.argv[1:] if argv is None else argv)
        _configure_logging(args)
        paths = _paths(args, environ)
        task, run_id, target = _prepare(parser, args, environ, tail, paths)
        results = _run(args, environ, task, run_id, target, tail, paths)
    except _Exit as exc:
        return exc.code
    _publish(results, paths.output, run_id)
    return EXIT_OK


def _usage(parser: argparse.ArgumentParser, exc: _Usage) -> _Exit:
    """Print the usage and the error; exit code 2."""
    parser.print_usage(sys.stderr)
    _say(f"elastic-idl pod: error: {exc}")
    return _Exit(EXIT_USAGE)


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """The options, and the ENTRYPOINT words (target first)."""
    head, tail = _split(argv)
    try:
        try:
            args = parser.parse_args(head)
        except SystemExit as exc:  # --help
            raise _Exit(int(exc.code or 0)) from None
        # --module NAME / --call NAME name the target themselves; alone, the first word after -- does.
        named = next((x for x in (args.module, args.call) if isinstance(x, str)), None)
        if named is not None:
            tail = [named, *tail]
        if not tail:
            raise _Usage(_NO_ENTRYPOINT)
        problem = entrypoint_problem(tail)
        if problem is not None:
            raise _Usage(f"ENTRYPOINT: {problem}")
    except _Usage as exc:
        raise _usage(parser, exc) from None
    return args, tail


def _configure_logging(args: argparse.Namespace) -> None:
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.WARNING if args.quiet else logging.INFO,
            format="%(message)s",
            stream=sys.stderr,
        )
    if args.verbose:
        _log.setLevel(logging.DEBUG)  # the launcher then lets torch's worker tracebacks through


def _paths(args: argparse.Namespace, environ: Mapping[str, str]) -> _Paths:
    """Result file, failure report and endpoint override: the flag, else the env, else the default."""
    return _Paths(
        output=args.output or environ.get(OUTPUT_ENV) or DEFAULT_OUTPUT,
        failure_path=failure_file(args.failure_path or environ.get(FAILURE_PATH_ENV) or DEFAULT_FAILURE_PATH, environ),
        endpoint=args.rdzv_endpoint or environ.get(RDZV_ENDPOINT_OVERRIDE_ENV) or None,
    )


def _prepare(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    environ: Mapping[str, str],
    tail: list[str],
    paths: _Paths,
) -> tuple[TaskView, str, Any]:
    """The task, the run id and the target, checked (with the output paths) before torch is imported."""
    try:
        task = view(load_task(args, environ)[0])  # converted once: the run id and the launch share the view
        run_id = _run_id(task, environ, args.run_id, paths.endpoint)
        target: Any = _callable(tail[0]) if args.call else tail[0]
        # Fail now, not after the job ran: a result or failure report that cannot be written is lost.
        check_writable(paths.output, "result file")
        check_writable(paths.failure_path, "failure report")
    except _Usage as exc:
        raise _usage(parser, exc) from None
    except ValidationError as exc:
        for line in violation_lines(exc.violations):
            _say(f"elastic-idl pod: {line}")
        raise _Exit(EXIT_INVALID) from None
    except (ElasticIdlError, OSError) as exc:
        where = os_error_text(exc) if isinstance(exc, OSError) else str(exc)
        _say(f"elastic-idl pod: error: {where}")
        raise _Exit(EXIT_INVALID) from None
    if paths.endpoint:
        _log.info(
            "elastic-idl pod: rendezvous endpoint overridden by %s: %s", RDZV_ENDPOINT_OVERRIDE_ENV, paths.endpoint
        )
    return task, run_id, target


def _run(
    args: argparse.Namespace,
    environ: Mapping[str, str],
    task: TaskView,
    run_id: str,
    target: Any,
    tail: list[str],
    paths: _Paths,
) -> dict[int, Any]:
    """Launch this pod's node; its workers' values by global rank. A failure is recorded and becomes an exit code."""
    from elastic_idl._launch.launcher import launch_values  # imports torch: only now

    try:
        return launch_values(
            task,
            target,
            *tail[1:],
            env=environ,
            run_id=run_id,
            rdzv_endpoint=paths.endpoint,
            failure_path=paths.failure_path,
            module=args.module is not None,
        )
    except ValidationError as exc:
        for line in violation_lines(exc.violations):
            _say(f"elastic-idl pod: {line}")
        raise _Exit(EXIT_INVALID) from None
    except (TypeError, FileNotFoundError, ImportError) as exc:
        # The launcher checks the entrypoint before it starts anything.
        _say(f"elastic-idl pod: error: ENTRYPOINT: {exc}")
        raise _Exit(EXIT_INVALID) from None
    except KeyboardInterrupt as exc:
        _record_failure(exc, args, paths.failure_path, run_id)
        raise _Exit(exit_code_of(exc)) from None
    except ElasticIdlError as exc:
        code = exit_code_of(exc)
        if code == EXIT_INVALID:  # a launch-time value (node rank, local address) the launcher refused
            _say(f"elastic-idl pod: error: {exc}")
            raise _Exit(code) from None
        _say(f"elastic-idl pod: job failed: {exc}")
        _record_failure(exc, args, paths.failure_path, run_id)
        raise _Exit(code) from None
    except (OSError, ValueError) as exc:  # a path the launcher could not prepare, an unresolvable nproc policy
        _say(f"elastic-idl pod: error: {exc}")
        raise _Exit(EXIT_INVALID) from None


def _publish(results: Mapping[int, Any], output: str, run_id: str) -> None:
    """Rank 0's pod writes the result; the others write nothing (like flytekit's IgnoreOutputs)."""
    if 0 in results:
        write_atomic(output, _result_json(run_id, results[0]))
        _log.info("elastic-idl pod: this pod ran global rank 0; result written to %s", output)
    else:
        _log.info("elastic-idl pod: no global rank 0 here (ranks %s); no outputs, like IgnoreOutputs", sorted(results))


def main() -> None:
    """``python -m elastic_idl.pod``."""
    raise SystemExit(pod_main(sys.argv[1:]))


if __name__ == "__main__":
    main()
