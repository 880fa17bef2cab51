"""The ``elastic-idl`` command line. With pod.py, the only code that prints, reads files or the env.

Exit codes: the table of `elastic_idl.exit_codes`, shared with the pod entrypoint:
0 ok; 1 invalid input (decode or validation error, bad option value, unusable
entrypoint or path); 2 usage error; 3 the launched job failed; 4 the rendezvous
never completed; 128+N stopped by signal N (130 SIGINT, 143 SIGTERM).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import shlex
import sys
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import yaml

from elastic_idl import __version__
from elastic_idl._errors import (
    MAX_VIOLATIONS_SHOWN,
    DecodeError,
    ElasticIdlError,
    LaunchInterruptedError,
    SkewError,
    SkewWarning,
    TorchrunUsageError,
    TorchrunValidationError,
    UnsupportedFlagError,
    ValidationError,
    Violation,
    did_you_mean,
    one_line,
    os_error_text,
    violation_lines,
)
from elastic_idl._launch.spec import MODULE_FLAG, entrypoint_problem, to_launch_spec
from elastic_idl._task.codec import (
    FORMATS,
    MAX_PIPE_WAIT_S,
    MAX_TASK_BYTES,
    UNKNOWN_FIELD_NUMBER,
    decode,
    format_of_path,
    read_task_file,
    unknown_fields,
)
from elastic_idl._task.encoding import encode, to_custom
from elastic_idl._task.messages import Task
from elastic_idl._task.names import PET_PREFIX

if TYPE_CHECKING:
    from elastic_idl._sdk.torchrun import TorchrunSurface
from elastic_idl.exit_codes import (
    EXIT_CODES_TEXT,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_USAGE,
    exit_code_of,
)
from elastic_idl.exit_codes import EXIT_INTERRUPTED as EXIT_INTERRUPTED  # the CLI's names for the table (re-exported)
from elastic_idl.exit_codes import EXIT_JOB_FAILED as EXIT_JOB_FAILED
from elastic_idl.exit_codes import EXIT_RENDEZVOUS as EXIT_RENDEZVOUS

#: Subcommands that take their own flags (torchrun's, the pod's): the rest of the line is theirs.
_PASS_THROUGH = ("pod", "torchrun")
#: Global options that may come before the subcommand.
_GLOBAL_FLAGS = ("-v", "--verbose")
#: Subcommands whose operands after FILE are what the workers run (a script and its args, or -m MODULE).
_TAKES_ENTRYPOINT = ("render", "run")

_EPILOG = (
    f"FILE is a task in textproto, JSON, YAML or binary, at most {MAX_TASK_BYTES:,} bytes ('-' reads "
    "stdin; the format is --format, else the file's extension, else detected; a pipe is read for at most "
    f"{MAX_PIPE_WAIT_S:g} s). After --, every word is an operand: FILE first, when not given before, "
    "then what the workers run (render, run). --task-type-version says "
    "which task shape FILE holds: 1 (default, the kubeflow shape flytekit 1.16 emits) or 0 (legacy). "
    f"{EXIT_CODES_TEXT}"
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse's own exit code is 2 as well; keep the message short
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")

    # FILE is optional to argparse only so that it may come after "--"; it is required (main() checks).
    def format_usage(self) -> str:
        return super().format_usage().replace("[FILE]", "FILE")

    def format_help(self) -> str:
        return super().format_help().replace("[FILE]", "FILE")


def _add_input(p: argparse.ArgumentParser) -> None:
    # Optional here: after "--" it is the first operand (main() checks that it is given once).
    p.add_argument("file", metavar="FILE", nargs="?", help="task file, or - for stdin")
    p.add_argument("--format", choices=FORMATS, help="input format (default: detected)")
    p.add_argument("--task-type-version", type=int, default=1, choices=(0, 1), help="task shape (default 1)")


def _read(args: argparse.Namespace) -> Task:
    """FILE as a task, read the one way every command reads it, so a file gets one verdict from all.

    --format, else the file's extension, else detected; at most MAX_TASK_BYTES are read. Strict: a
    key, enum name or binary field number this version does not know is a DecodeError (a user's
    file; the tolerant decode is for what a backend receives from a newer SDK).
    """
    data = read_task_file(args.file)
    fmt = args.format or (None if args.file == "-" else format_of_path(args.file))
    task = decode(data, format=fmt, task_type_version=args.task_type_version)
    unknown = unknown_fields(task)  # binary only: the strict decode keeps unknown field numbers (protobuf's rule)
    if unknown:
        raise DecodeError(unknown[0], UNKNOWN_FIELD_NUMBER, format="binary")
    return task


def _worst_case(args: argparse.Namespace, task: Any, restart_policy: str | None = None) -> Any:
    """The task's worst case from a fault to the job's end (`elastic_idl._backend.worst_case`) under the Worker's
    ``restart_policy`` (default: the one the renderer writes by default); refused (ValidationError, rule
    worst_case.max) when above --max-worst-case. A task whose worst case cannot be computed (a keep-alive
    option torch cannot read) gives that Violation, and is refused only under --max-worst-case."""
    from elastic_idl._backend.pytorchjob import worker_restart_policy
    from elastic_idl._backend.worst_case import check_ceiling, parse_ceiling, worst_case
    from elastic_idl._task.view import of

    ceiling = None
    if args.max_worst_case is not None:
        try:
            ceiling = parse_ceiling(args.max_worst_case)
        except ValueError as exc:
            raise ValueError(f"--max-worst-case: {exc}") from None
    t = of(task)
    try:
        w = worst_case(t, restart_policy or worker_restart_policy(t))
    except ValidationError as exc:
        if ceiling is not None:
            raise
        return exc.violations[0]
    if ceiling is not None:
        check_ceiling(w, ceiling, args.max_worst_case)
    return w


def _add_worst_case(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--max-worst-case",
        metavar="DURATION",
        help="refuse the task (exit 1, rule worst_case.max) when its worst case from a fault to the job's end "
        "exceeds DURATION (90m, 3600s, 1h; unbounded exceeds any)",
    )


def _cmd_validate(args: argparse.Namespace) -> int:
    from elastic_idl._backend.worst_case import WorstCase, worst_case_line
    from elastic_idl._task.validate import violations
    from elastic_idl._task.view import of

    task = of(_read(args))  # converted once: the rules and the worst case read the same view
    found = violations(task)
    for line in violation_lines(found):
        print(line, file=sys.stderr)
    if found:
        return EXIT_INVALID
    w = _worst_case(args, task)
    if args.json:
        doc: dict[str, Any] = {"valid": True, "worst_case": w.as_dict() if isinstance(w, WorstCase) else None}
        if isinstance(w, Violation):
            doc["worst_case_not_computed"] = str(w)
        _out(json.dumps(doc, indent=2) + "\n")
    else:
        _out(f"valid\n{worst_case_line(w)}\n")
    return EXIT_OK


def _cmd_convert(args: argparse.Namespace) -> int:
    if args.allow_loss and not args.upstream:
        raise _Usage("--allow-loss applies only with --upstream (without it no field is dropped)")
    task = _read(args)
    out: str | bytes
    try:
        with warnings.catch_warnings(record=True) as dropped:
            warnings.simplefilter("always", SkewWarning)
            if args.to == "custom":
                custom = to_custom(task, upstream=args.upstream, allow_loss=args.allow_loss)
                out = json.dumps(custom, indent=2, sort_keys=True) + "\n"
            else:
                out = encode(task, args.to, upstream=args.upstream, allow_loss=args.allow_loss)
    except SkewError as exc:
        raise SkewError(exc.fields, allow="add --allow-loss") from None
    for w in dropped:
        _warn(str(w.message))
    _out(out)
    return EXIT_OK


def _env_from_args(pairs: Sequence[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--env {pair!r}: expected KEY=VALUE")
        env[key] = value
    return env


def _cmd_launch_config(args: argparse.Namespace) -> int:
    env = dict(os.environ) if args.use_environ else {}
    env.update(_env_from_args(args.env))
    spec = to_launch_spec(_read(args), env=env, run_id=args.run_id, rdzv_endpoint=args.rdzv_endpoint)
    for d in spec.decisions:
        print(f"note: {d}", file=sys.stderr)
    _out(json.dumps(spec.as_dict(), indent=2, sort_keys=True) + "\n")
    return EXIT_OK


def _out(data: str | bytes) -> None:
    """Write the command's output to stdout now; a failure (a full disk, stdout closed) names stdout."""
    try:
        if sys.stdout is None:
            raise OSError(9, "closed: the output has nowhere to go")
        if isinstance(data, bytes):
            sys.stdout.buffer.write(data)
        else:
            sys.stdout.write(data)
        sys.stdout.flush()
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, "stdout") from None


def _warn(message: str) -> None:
    print(f"elastic-idl: warning: {one_line(message)}", file=sys.stderr)


def _render(args: argparse.Namespace, entrypoint: list[str], task: Any = None) -> dict[str, Any]:
    from elastic_idl._backend.pytorchjob import JobOptions, render_pytorchjob

    options = JobOptions(
        name=args.name, image=args.image, namespace=args.namespace, entrypoint=entrypoint, mode=args.mode
    )
    task = _read(args) if task is None else task
    return render_pytorchjob(task, options, task_type_version=args.task_type_version)


def _cmd_render(args: argparse.Namespace) -> int:
    from elastic_idl._backend.pytorchjob import WORKER, JobOptions, K
    from elastic_idl._backend.targets import DEFAULT_TARGET, render_target
    from elastic_idl._backend.worst_case import worst_case_line
    from elastic_idl._errors import TargetLossError
    from elastic_idl._task.view import of

    if args.target != DEFAULT_TARGET and args.max_worst_case is not None:
        raise _Usage(f"--max-worst-case: the worst case is the PyTorchJob's; not computed for --target {args.target}")
    if args.trainjob_elastic_policy and args.target != "trainjob":
        raise _Usage(f"--trainjob-elastic-policy: with --target trainjob only, not {args.target}")
    task = of(_read(args))
    options = JobOptions(
        name=args.name,
        image=args.image,
        namespace=args.namespace,
        entrypoint=list(args.tail),
        mode=args.mode,
        network_policy=args.network_policy,
    )
    try:
        rendered = render_target(
            task,
            options,
            target=args.target,
            task_type_version=args.task_type_version,
            strict=args.strict,
            trainjob_elastic_policy=args.trainjob_elastic_policy,
        )
    except TargetLossError as exc:  # one line per field, then the refusal
        for loss in exc.losses:
            print(f"elastic-idl: error: {one_line(str(loss))}", file=sys.stderr)
        print(f"elastic-idl: error: --strict: a {exc.target} cannot carry what the task sets", file=sys.stderr)
        return EXIT_INVALID
    for loss in rendered.losses:
        _warn(str(loss))
    if rendered.target == DEFAULT_TARGET:
        # The policy the job was rendered with (an elastic task always has Workers; a Master-only job has none).
        worker = rendered.objects[0][K.SPEC][K.REPLICA_SPECS].get(WORKER, {})
        w = _worst_case(args, task, worker.get(K.RESTART_POLICY))
        print(worst_case_line(w), file=sys.stderr)  # stdout is the manifest
    if args.json:
        report = {
            "target": rendered.target,
            "objects": rendered.objects,
            "losses": [loss.as_dict() for loss in rendered.losses],
        }
        _out(json.dumps(report, indent=2) + "\n")
    else:
        _out(yaml.safe_dump_all(rendered.objects, sort_keys=False))
    return EXIT_OK


def _cmd_env(args: argparse.Namespace) -> int:
    from elastic_idl._backend.operator import pod_env

    # The entrypoint does not change the env (env takes none); a placeholder keeps the render valid.
    env = pod_env(_render(args, ["train.py"]), args.replica_type, args.replica)
    _out("".join(f"{key}={env[key]}\n" for key in sorted(env)))
    return EXIT_OK


def _cmd_run(args: argparse.Namespace) -> int:
    from elastic_idl._launch.launcher import launch

    command = list(args.tail)  # checked by main(): a script and its args, or -m MODULE and its args
    module = command[0] == MODULE_FLAG
    target, rest = (command[1], command[2:]) if module else (command[0], command[1:])
    env = dict(os.environ)
    result = launch(
        _read(args),
        target,
        *rest,
        module=module,
        env=env,
        run_id=args.run_id,
        rdzv_endpoint=args.rdzv_endpoint,
        failure_path=args.failure_file,
        log_dir=args.log_dir,
        node_rank=args.node_rank,
        local_addr=args.local_addr,
    )
    if result is not None:
        _out(json.dumps(result, default=repr) + "\n")
    return EXIT_OK


def _drop_in_options(tail: list[str]) -> tuple[dict[str, str], list[str]]:
    """The drop-in's own options, which come right after ``torchrun``, and the torchrun line after them.

    Their names start with ``--elastic-idl-``, which no torchrun flag does: nothing a torchrun
    line says can be read as one, and no future torchrun flag can collide with them.
    """
    from elastic_idl._sdk.torchrun import DROP_IN_COLLECTIVE_TIMEOUT, DROP_IN_FAILURE_FILE, DROP_IN_PREFIX

    known = {DROP_IN_FAILURE_FILE: "a path", DROP_IN_COLLECTIVE_TIMEOUT: "a number of seconds"}
    options: dict[str, str] = {}
    rest = list(tail)
    while rest and rest[0].startswith(DROP_IN_PREFIX):
        name, eq, value = rest.pop(0).partition("=")
        if name not in known:
            own = ", ".join(f"{n} {k.split()[-1].upper()}" for n, k in known.items())
            raise TorchrunUsageError(name, f"not an option of the drop-in (its own options: {own})")
        if not eq:
            if not rest:
                raise TorchrunUsageError(name, f"expected {known[name]}")
            value = rest.pop(0)
        if not value:
            raise TorchrunUsageError(name, f"expected {known[name]}, got an empty string")
        if name in options:
            raise TorchrunUsageError(name, "given twice")
        options[name] = value
    return options, rest


def _drop_in_collective_timeout(task: Task, value: str | None) -> None:
    """Set the task's collective_timeout from the drop-in's option (a positive number of seconds)."""
    if value is None:
        return
    from elastic_idl._sdk.arguments import Problems, duration_of
    from elastic_idl._sdk.torchrun import DROP_IN_COLLECTIVE_TIMEOUT

    problems = Problems()
    d = duration_of(value, DROP_IN_COLLECTIVE_TIMEOUT, problems)
    if d is None or d.seconds < 0 or (d.seconds == 0 and d.nanos <= 0):
        raise TorchrunUsageError(DROP_IN_COLLECTIVE_TIMEOUT, f"expected a positive number of seconds, got {value!r}")
    task.elastic_config.collective_timeout.CopyFrom(d)


def _cmd_torchrun(args: argparse.Namespace) -> int:
    from elastic_idl._sdk.torchrun import (
        DROP_IN_COLLECTIVE_TIMEOUT,
        DROP_IN_FAILURE_FILE,
        DROP_IN_PREFIX,
        parse_torchrun,
        torchrun_help,
    )

    options, line = _drop_in_options(list(args.tail))
    failure_file = options.get(DROP_IN_FAILURE_FILE)
    try:
        # The flags of the installed torch's torchrun; its own env fallbacks (PET_*) are applied
        # here, the command line wins.
        task, entry, node = parse_torchrun(line, dict(os.environ), _installed_torchrun())
    except TorchrunUsageError as exc:
        if exc.flag == "--help":
            sys.stdout.write(torchrun_help())
            return EXIT_OK
        if exc.flag in _GLOBAL_FLAGS:  # before the script: not the script's, and not torchrun's
            rest = list(args.tail)
            rest.remove(exc.flag)
            raise TorchrunUsageError(
                exc.flag,
                f"{exc.reason}; {exc.flag} is an option of elastic-idl itself and goes before the subcommand: "
                f"{shlex.join(['elastic-idl', exc.flag, 'torchrun', *rest])}",
            ) from None
        if exc.flag.startswith(DROP_IN_PREFIX) or exc.flag.split("=", 1)[0] == "--failure-file":
            raise TorchrunUsageError(
                exc.flag,
                f"{exc.reason}; the drop-in writes a FailureReport with {DROP_IN_FAILURE_FILE} PATH, "
                "given right after `torchrun`, before the torchrun flags",
            ) from None
        raise
    if entry.no_python:
        raise UnsupportedFlagError(
            "--no-python", "the drop-in runs Python scripts and modules only; use torchrun itself for other programs"
        )
    _drop_in_collective_timeout(task, options.get(DROP_IN_COLLECTIVE_TIMEOUT))
    from elastic_idl._launch.launcher import launch_values

    launch_values(
        task,
        entry.target,
        *entry.args,
        module=entry.module,
        node_rank=node.node_rank,
        local_addr=node.local_addr,
        log_dir=node.log_dir,
        failure_path=failure_file,
    )
    return EXIT_OK


def _installed_torchrun() -> TorchrunSurface:
    """The flags the installed torch's torchrun accepts (2.13's when torch is missing: the launch says so)."""
    from elastic_idl._sdk.torchrun import TORCH_2_13

    try:
        from elastic_idl._launch.agent import installed_torchrun_surface
    except ImportError:
        return TORCH_2_13
    return installed_torchrun_surface()


def _cmd_pod(args: argparse.Namespace) -> int:
    from elastic_idl.pod import pod_main

    return int(pod_main(list(args.tail)))


class _Usage(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="elastic-idl",
        description="Validate, convert, render and launch elastic PyTorch training tasks.",
        epilog=_EPILOG,
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="log what the runtime decides, and torch's own tracebacks of failed workers",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser(
        "validate",
        help="exit 0 when FILE is valid, and print the worst case from a fault to the job's end; else one line per "
        "violation on stderr (FILE is read as every command reads it)",
        epilog=_EPILOG,
    )
    _add_input(p)
    # Kept for scripts written when validate warned by default: every command refuses unknown fields now.
    p.add_argument("--strict", action="store_true", help=argparse.SUPPRESS)
    p.add_argument(
        "--json",
        action="store_true",
        help="print {valid, worst_case} as JSON (the worst case with its terms) instead of two lines",
    )
    _add_worst_case(p)
    p.set_defaults(func=_cmd_validate)

    p = sub.add_parser("convert", help="rewrite FILE in another format", epilog=_EPILOG)
    _add_input(p)
    p.add_argument("--to", required=True, choices=(*FORMATS, "custom"), help="output format")
    p.add_argument(
        "--upstream", action="store_true", help="emit only fields upstream flyteidl knows (refuses if that loses any)"
    )
    p.add_argument("--allow-loss", action="store_true", help="with --upstream: drop extension fields with a warning")
    p.set_defaults(func=_cmd_convert)

    p = sub.add_parser("launch-config", help="print the LaunchConfig fields as JSON", epilog=_EPILOG)
    _add_input(p)
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="pod env entry (repeatable)")
    p.add_argument("--use-environ", action="store_true", help="also read PET_* from this process's environment")
    p.add_argument("--run-id", help="run id (beats PET_RDZV_ID and the message)")
    p.add_argument("--rdzv-endpoint", help="HOST:PORT (beats PET_RDZV_ENDPOINT and the message)")
    p.set_defaults(func=_cmd_launch_config)

    for name, func, helptext in (
        (
            "render",
            _cmd_render,
            "print the PyTorchJob YAML the backend would create (dry run), and on stderr the worst case from a "
            "fault to the job's end; --target trainjob|jobset: a TrainJob or a JobSet, and on stderr what it "
            "cannot carry",
        ),
        ("env", _cmd_env, "print the env the operator injects into one pod, as KEY=VALUE lines"),
    ):
        p = sub.add_parser(name, help=helptext, epilog=_EPILOG)
        _add_input(p)
        p.add_argument("--name", required=True, help="job name (DNS-1035)")
        p.add_argument("--image", required=True, help="container image")
        p.add_argument("--namespace", default="default", help="namespace (default: default)")
        p.add_argument("--mode", choices=("strict", "upstream"), default="strict", help="render mode (default: strict)")
        if name == "render":
            p.add_argument(
                "--network-policy",
                action="store_true",
                help="also print a NetworkPolicy admitting only the job's own pods (a second YAML document)",
            )
            p.add_argument(
                "--target",
                choices=("pytorchjob", "trainjob", "jobset"),
                default="pytorchjob",
                help="what to render: a Kubeflow PyTorchJob (default), a Trainer v2.3 TrainJob or a JobSet v0.12; "
                "what the target cannot carry is a warning per task field",
            )
            p.add_argument(
                "--strict",
                action="store_true",
                help="refuse (exit 1) a render whose target cannot carry a field the task sets",
            )
            p.add_argument(
                "--json",
                action="store_true",
                help="print {target, objects, losses} as JSON instead of the YAML documents",
            )
            p.add_argument(
                "--trainjob-elastic-policy",
                action="store_true",
                help="with --target trainjob: add KEP-2903's proposed spec.trainer.elasticPolicy (a proposal: "
                "Trainer v2.3 does not have it)",
            )
            _add_worst_case(p)
        if name == "env":
            p.add_argument("--replica", type=int, default=0, help="replica index (default 0)")
            p.add_argument("--replica-type", default="Worker", choices=("Worker", "Master"), help="replica type")
            p.usage = "elastic-idl env FILE --name N --image I [--replica K] [options]"
        else:
            p.usage = (
                "elastic-idl render FILE --name N --image I [options] -- script.py args... | "
                "elastic-idl render FILE --name N --image I [options] -m MODULE args..."
            )
        p.set_defaults(func=func)

    p = sub.add_parser(
        "run",
        help="launch FILE's task locally: run FILE -- script.py args... | run FILE -m module args...",
        epilog=_EPILOG,
    )
    _add_input(p)
    p.add_argument("--run-id", help="run id (default: from the task, else random)")
    p.add_argument("--rdzv-endpoint", help="HOST:PORT of the rendezvous (default: 127.0.0.1 and a free port)")
    p.add_argument("--failure-file", help="write the FailureReport JSON here when the job fails")
    p.add_argument("--log-dir", help="keep torch's per-attempt logs of this node here (default: a temporary dir)")
    p.add_argument("--node-rank", type=int, help="this node's rank, static rendezvous backend only (default 0)")
    p.add_argument("--local-addr", help="this node's address as other nodes see it")
    p.usage = "elastic-idl run FILE [options] -- script.py args... | elastic-idl run FILE [options] -m MODULE args..."
    p.set_defaults(func=_cmd_run)
    for name, subparser in sub.choices.items():
        subparser.set_defaults(subparser=subparser, takes_entrypoint=name in _TAKES_ENTRYPOINT)

    p = sub.add_parser(
        "torchrun",
        help="drop-in for torchrun: parse, validate, launch through our launcher (see its --help)",
        add_help=False,
    )
    p.set_defaults(func=_cmd_torchrun)

    p = sub.add_parser("pod", help="the pod entrypoint (python -m elastic_idl.pod; see its --help)", add_help=False)
    p.set_defaults(func=_cmd_pod)
    return parser


def _command_index(argv: Sequence[str]) -> int | None:
    """Where the subcommand is: the first token that is not a global option."""
    for i, token in enumerate(argv):
        if token not in _GLOBAL_FLAGS:
            return i
    return None


def _split_tail(argv: list[str], command: int | None) -> tuple[list[str], list[str], bool]:
    """The options and the operands after the first "--" (POSIX: every word after it is an operand),
    or, for render and run, the words from "-m MODULE" on; and whether "-m" split them."""
    takes_entrypoint = command is not None and argv[command] in _TAKES_ENTRYPOINT
    for i, token in enumerate(argv):
        if token == "--":
            return argv[:i], argv[i + 1 :], False
        if takes_entrypoint and command is not None and i > command and token in (MODULE_FLAG, "--module"):
            return argv[:i], [MODULE_FLAG, *argv[i + 1 :]], True
    return argv, [], False


def _operands(args: argparse.Namespace, tail: list[str], module: bool) -> list[str]:
    """FILE (the first operand, before or after "--") set on ``args``; the rest is what the workers run
    (render, run), checked by the one entrypoint rule; any other extra operand is a usage error."""
    sub: argparse.ArgumentParser = args.subparser
    if args.file is None:
        if not tail or module:
            sub.error("the following arguments are required: FILE")
        args.file = tail.pop(0)
    if not args.takes_entrypoint:
        if tail:
            sub.error(f"unrecognized arguments: {shlex.join(tail)} ({args.command} takes one FILE and no entrypoint)")
        return []
    problem = entrypoint_problem(tail)
    if problem is not None:
        sub.error(f"{problem} (what the workers run: -- script.py args..., or -m MODULE args...)")
    return tail


def _unrecognized_hint(raw: list[str], args: argparse.Namespace, unknown: list[str]) -> str:
    """What to type instead of a line with unrecognized arguments: the line fixed, when a global option
    came after the subcommand (-v goes before it) or what the workers run came without "--"; else the
    option an unknown one looks like a typo of."""
    command = _command_index(raw)
    if command is None:  # pragma: no cover - argparse refused the line before
        return ""
    end = raw.index("--") if "--" in raw else len(raw)
    moved = [t for t in raw[command + 1 : end] if t in _GLOBAL_FLAGS and t in unknown]
    fixed = [*raw[:command], *moved, raw[command], *(t for t in raw[command + 1 : end] if t not in moved), *raw[end:]]
    why = [f"{moved[0]} is an option of elastic-idl itself and goes before the subcommand"] if moved else []
    operands = [t for t in unknown if not t.startswith("-")]
    if operands and args.takes_entrypoint and "--" not in raw:
        # The first operand argparse could not place (after FILE) starts what the workers run.
        start = fixed.index(args.file, len(moved) + command + 1) + 1 if args.file in fixed else len(fixed)
        at = fixed.index(operands[0], start) if operands[0] in fixed[start:] else len(fixed)
        fixed.insert(at, "--")
        why.append("what the workers run goes after --")
    elif operands and not args.takes_entrypoint:
        return f" ({args.command} takes one FILE)"
    if why and _parses(fixed):
        return f"; {' and '.join(why)}: {shlex.join(['elastic-idl', *fixed])}"
    shown = [o for a in args.subparser._actions if a.help != argparse.SUPPRESS for o in a.option_strings]
    typos = [did_you_mean(t.split("=", 1)[0], shown) for t in unknown if t.startswith("--") and t not in moved]
    return "".join([*(f"; {w}" for w in why), *typos])


def _parses(argv: list[str]) -> bool:
    """Whether a command line parses with nothing left over (what a fixed line is checked by before it is shown)."""
    parser = build_parser()
    command = _command_index(argv)
    head, tail, module = _split_tail(argv, command)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            args, unknown = parser.parse_known_args(head)
            if not unknown and args.command not in _PASS_THROUGH:
                _operands(args, tail, module)
    except SystemExit:
        return False
    return not unknown


def _argv(argv: Sequence[str] | None) -> list[str]:
    if argv is None:
        return sys.argv[1:]
    if isinstance(argv, (str, bytes)) or not all(isinstance(a, str) for a in argv):
        raise TypeError("argv must be a list of strings (shlex.split() splits a command line), not one string")
    return list(argv)


def _setup_logging(verbose: bool, command: str) -> None:
    # Launches report progress (rendezvous, attempts, restarts, failed ranks) by default;
    # -v adds torch's own tracebacks of failed workers (the elastic_idl logger at DEBUG).
    if command != "pod":  # the pod entrypoint sets up its own logging (its -q)
        level = logging.INFO if verbose or command in ("run", "torchrun") else logging.WARNING
        logging.basicConfig(level=level, format="%(message)s", stream=sys.stderr)
    if verbose:
        logging.getLogger("elastic_idl").setLevel(logging.DEBUG)


#: Launch-time arguments that the launcher checks by the rules of the task fields they replace, by the
#: name its violations carry -> the flag of each command that gives them.
_LAUNCH_FLAGS = {
    "run": {"rdzv_endpoint": "--rdzv-endpoint", "run_id": "--run-id", "local_addr": "--local-addr"},
    "launch-config": {"rdzv_endpoint": "--rdzv-endpoint", "run_id": "--run-id"},
    "torchrun": {"local_addr": "--local-addr"},
}


def _violation_report(found: Sequence[Violation], command: str) -> list[str]:
    """The lines of a ValidationError: a task field's violation as ``validate`` prints it; one of a flag or
    of an env variable (PET_*) as an error that names the flag or the variable."""
    flags = _LAUNCH_FLAGS.get(command, {})
    shown = found[:MAX_VIOLATIONS_SHOWN]
    lines = [
        f"elastic-idl: error: {flags.get(v.field, v.field)}: {v.rule}: {v.message}"
        if v.field in flags or v.field.startswith(PET_PREFIX)
        else str(v)
        for v in shown
    ]
    return lines + violation_lines(found)[len(shown) :]  # then how many more there are


def _show_warning(message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> None:
    _warn(str(message))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (see `elastic_idl.exit_codes`)."""
    parser = build_parser()
    raw = _argv(argv)
    command = _command_index(raw)
    if command is not None and raw[command] in _PASS_THROUGH:
        # These take their own flags (torchrun's, the pod's): hand the rest over untouched.
        raw = [*raw[: command + 1], "--", *raw[command + 1 :]]
    head, tail, module = _split_tail(raw, command)
    args, unknown = parser.parse_known_args(head)
    if unknown:  # under the subcommand's own usage (argparse would print the top-level one)
        args.subparser.error(f"unrecognized arguments: {shlex.join(unknown)}{_unrecognized_hint(raw, args, unknown)}")
    args.tail = tail if args.command in _PASS_THROUGH else _operands(args, tail, module)
    _setup_logging(args.verbose, args.command)
    try:
        with warnings.catch_warnings():
            # A warning is one line, like an error: no source file, line number and code line.
            warnings.showwarning = _show_warning
            return int(args.func(args))
    except _Usage as exc:
        args.subparser.error(str(exc))
        return EXIT_USAGE  # pragma: no cover - error() exits
    except TorchrunValidationError as exc:  # a command line, not a file: name the flags, as errors
        for line in exc.lines():
            print(f"elastic-idl: error: {one_line(line)}", file=sys.stderr)
        return EXIT_INVALID
    except ValidationError as exc:
        for line in _violation_report(exc.violations, args.command):
            print(line, file=sys.stderr)
        return EXIT_INVALID
    except (ElasticIdlError, ValueError) as exc:
        if isinstance(exc, TorchrunUsageError):
            print(
                "usage: elastic-idl torchrun [--elastic-idl-failure-file PATH] [--elastic-idl-collective-timeout "
                "SECONDS] [torchrun flags] SCRIPT [ARGS...] (see --help)",
                file=sys.stderr,
            )
            print(f"elastic-idl torchrun: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        if isinstance(exc, LaunchInterruptedError):
            print(f"elastic-idl: {exc}", file=sys.stderr)
        else:
            print(f"elastic-idl: error: {exc}", file=sys.stderr)
        # A launched job's failure is an ElasticIdlError too: 3, 4 or 128+N by its kind.
        return exit_code_of(exc)
    except ImportError as exc:  # a module entrypoint that does not import
        print(f"elastic-idl: error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except OSError as exc:
        print(f"elastic-idl: error: {os_error_text(exc)}", file=sys.stderr)
        return EXIT_INVALID
    except KeyboardInterrupt as exc:
        print("elastic-idl: interrupted", file=sys.stderr)
        return exit_code_of(exc)


if __name__ == "__main__":
    sys.exit(main())
