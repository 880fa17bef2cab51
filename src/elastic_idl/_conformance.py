"""Contract vectors: the case format and the reference conformance implementation.

A *case* is a folder under ``contract/cases/<name>/`` holding an input task and
the outputs every implementation must produce for it (``contract/README.md``
documents the format). This module is the Python reference implementation of
the conformance entry point (``python -m elastic_idl.conformance``): it reads a
*request* (JSON on stdin: one entry per case, the input task and its options)
and writes a *response* (JSON on stdout: this implementation's outputs per
case). An implementation in another language (the Go backend) plugs in by
reading the same request and writing the same response.

Everything here is pure except `main` (stdin/stdout) and the file
helpers that load cases and write expectations.
"""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from elastic_idl._errors import (
    CaseError,
    DecodeError,
    ElasticIdlError,
    EncodeError,
    RenderError,
    SkewWarning,
    ValidationError,
    Violation,
)
from elastic_idl._launch.spec import to_launch_spec
from elastic_idl._task.codec import MAX_TASK_BYTES, decode, read_task_bytes
from elastic_idl._task.encoding import encode, to_custom
from elastic_idl._task.validate import violations

__all__ = [
    "CASE_FILE",
    "CONTRACT_VERSION",
    "DEFAULT_RENDER",
    "FORWARD_EXPECTED",
    "FORWARD_INPUT",
    "INPUT_FILE",
    "KINDS",
    "MAX_REQUEST_BYTES",
    "OUTPUTS",
    "OUTPUT_FILES",
    "SDK_KINDS",
    "Case",
    "ForwardVector",
    "error_of",
    "evaluate",
    "flyte2_sdk_output",
    "flytekit_sdk_output",
    "forward_outputs",
    "load_case",
    "load_cases",
    "load_forward_vectors",
    "main",
    "outputs_of_task",
    "read_expected",
    "request_for",
    "respond",
    "sdk_output",
    "skew_fields",
    "violation_list",
    "write_expected",
]

#: Version of the request/response and case format. Bump on an incompatible change.
CONTRACT_VERSION = 1

#: Case kinds. ``valid``/``invalid``: a textproto input that passes / breaks
#: validation. ``flytekit``: the input is produced at test time by the installed
#: flytekitplugins-kfpytorch from the case's ``flytekit`` settings. ``flyte2``: the
#: same, by Flyte 2's flyteplugins-pytorch from the case's ``flyte2`` settings. ``error``:
#: the input cannot be read as a task at all (e.g. an unknown task_type_version).
KINDS = ("valid", "invalid", "flytekit", "flyte2", "error")
#: The kinds whose input an installed SDK produces at test time (the case key of the same name holds its settings).
SDK_KINDS = ("flytekit", "flyte2")

#: File names inside a case folder.
CASE_FILE = "case.yaml"
INPUT_FILE = "input.textproto"

#: Output name (as in a response) -> expectation file name in the case folder.
OUTPUT_FILES: dict[str, str] = {
    "binary_hex": "binary.hex",
    "custom": "custom.json",
    "violations": "violations.json",
    "launch_spec": "launch_spec.json",
    "pytorchjob": "pytorchjob.yaml",
    "pod_env": "pod_env.json",
    "skew": "skew.json",
    "targets": "targets.json",
    "error": "error.json",
}
#: Outputs a conformance implementation may produce, in a stable order.
OUTPUTS: tuple[str, ...] = tuple(OUTPUT_FILES)
#: Expectation written by the runner, not by an implementation: what the SDK (flytekit, Flyte 2) emits.
SDK_FILE = "sdk.json"

#: The largest request the entry point reads (32 MiB, as the Go command): room for every contract
#: vector at once, each case's input at most MAX_TASK_BYTES. Read up to one byte more, then refused.
MAX_REQUEST_BYTES = 32 * MAX_TASK_BYTES

#: Render options used when a case gives none (merged under the case's ``render``).
DEFAULT_RENDER: dict[str, Any] = {
    "name": "job",
    "image": "example.com/train:1",
    "entrypoint": ["train.py"],
}

#: Keys case.yaml may hold; anything else is an error (no silently ignored settings).
_CASE_KEYS = {"kind", "description", "task_type_version", "render", "envs", "flytekit", "flyte2", "tags"}
#: Replica indices whose pod env (and launch spec under that env) a case pins.
_PINNED_INDICES = (0, 1)
#: Order of replica types in pod_env / launch_spec keys.
_REPLICA_ORDER = ("Master", "Worker")


@dataclass(frozen=True)
class Case:
    """One contract case, as loaded from its folder.

    Attributes:
        name: Folder name; the case id.
        path: The folder.
        kind: One of `KINDS`.
        description: What the case pins down, in words.
        task_type_version: The task template's task_type_version (0, 1, or an unsupported value).
        render: Render options (the fields of ``JobOptions``), defaults merged in.
        envs: Extra named pod envs to build the launch spec under, beyond the pinned ones.
        flytekit: For ``flytekit`` cases: ``{"config": "Elastic"|"PyTorch", "kwargs": {...}}``.
        flyte2: For ``flyte2`` cases: ``{"kwargs": {...}}`` of ``flyteplugins.pytorch.Elastic``.
        tags: Free-form labels (``edge``, ``unicode``, ``upstream-only``, ...).
        textproto: The input task as textproto (None for the SDK kinds, `SDK_KINDS`).
    """

    name: str
    path: Path
    kind: str
    description: str
    task_type_version: int
    render: Mapping[str, Any]
    envs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    flytekit: Mapping[str, Any] | None = None
    flyte2: Mapping[str, Any] | None = None
    tags: tuple[str, ...] = ()
    textproto: str | None = None


def load_case(path: Path) -> Case:
    """Load one case folder; raises `CaseError` when it is malformed."""
    meta_path = path / CASE_FILE
    if not meta_path.is_file():
        raise CaseError(f"{path.name}: no {CASE_FILE}")
    meta = yaml.safe_load(meta_path.read_text(encoding="utf-8"))
    if not isinstance(meta, dict):
        raise CaseError(f"{path.name}: {CASE_FILE} must hold a mapping")
    unknown = sorted(set(meta) - _CASE_KEYS)
    if unknown:
        raise CaseError(f"{path.name}: unknown keys in {CASE_FILE}: {', '.join(unknown)}")
    kind = meta.get("kind")
    if kind not in KINDS:
        raise CaseError(f"{path.name}: kind must be one of {', '.join(KINDS)}, got {kind!r}")
    version = meta.get("task_type_version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise CaseError(f"{path.name}: task_type_version must be an integer")
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise CaseError(f"{path.name}: a description is required")
    render = {**DEFAULT_RENDER, **(meta.get("render") or {})}
    envs = meta.get("envs") or {}
    if not isinstance(envs, dict) or not all(
        isinstance(k, str) and isinstance(v, dict) and all(isinstance(x, str) for x in [*v, *v.values()])
        for k, v in envs.items()
    ):
        raise CaseError(f"{path.name}: envs must map a name to a mapping of strings")
    clash = sorted(set(envs) & {"none"})
    if clash or any("-" in k for k in envs):
        raise CaseError(f"{path.name}: env names may not be 'none' or contain '-' (reserved for pods)")
    flytekit = meta.get("flytekit")
    flyte2 = meta.get("flyte2")
    input_path = path / INPUT_FILE
    textproto = input_path.read_text(encoding="utf-8") if input_path.is_file() else None
    if kind == "flytekit" and (not isinstance(flytekit, dict) or flytekit.get("config") not in ("Elastic", "PyTorch")):
        raise CaseError(f"{path.name}: a flytekit case needs flytekit: {{config: Elastic|PyTorch, kwargs: ...}}")
    if kind == "flyte2" and (not isinstance(flyte2, dict) or set(flyte2) != {"kwargs"}):
        raise CaseError(f"{path.name}: a flyte2 case needs flyte2: {{kwargs: ...}} (flyteplugins.pytorch.Elastic's)")
    for key, value in (("flytekit", flytekit), ("flyte2", flyte2)):
        if kind != key and value is not None:
            raise CaseError(f"{path.name}: only {key} cases may have a {key} key")
    if kind in SDK_KINDS:
        if textproto is not None:
            raise CaseError(f"{path.name}: a {kind} case has no {INPUT_FILE} (the SDK produces the input)")
    elif textproto is None:
        raise CaseError(f"{path.name}: no {INPUT_FILE}")
    tags = meta.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise CaseError(f"{path.name}: tags must be a list of strings")
    return Case(
        name=path.name,
        path=path,
        kind=kind,
        description=description.strip(),
        task_type_version=version,
        render=render,
        envs={k: dict(v) for k, v in envs.items()},
        flytekit=flytekit,
        flyte2=flyte2,
        tags=tuple(tags),
        textproto=textproto,
    )


def load_cases(cases_dir: Path) -> list[Case]:
    """Every case under ``cases_dir``, sorted by name."""
    return [load_case(p) for p in sorted(cases_dir.iterdir()) if p.is_dir()]


# --------------------------------------------------------------------------- outputs


def violation_list(found: Sequence[Violation]) -> list[dict[str, str]]:
    """Violations as the contract pins them: field path and rule id (messages are prose, not contract)."""
    return [{"field": v.field, "rule": v.rule} for v in found]


def error_of(exc: ElasticIdlError) -> dict[str, Any]:
    """The contract form of a typed error: its type name, plus violations or the field at fault."""
    out: dict[str, Any] = {"type": type(exc).__name__}
    if isinstance(exc, ValidationError):
        out["violations"] = violation_list(exc.violations)
    elif isinstance(exc, (RenderError, DecodeError)):
        out["field"] = exc.field
    return out


def _pods(job: Mapping[str, Any]) -> list[tuple[str, int]]:
    specs = job["spec"]["pytorchReplicaSpecs"]
    pods: list[tuple[str, int]] = []
    for rtype in _REPLICA_ORDER:
        if rtype in specs:
            count = int(specs[rtype]["replicas"])
            pods.extend((rtype, i) for i in _PINNED_INDICES if i < count)
    return pods


def evaluate(
    data: str | bytes,
    *,
    format: str,
    task_type_version: int,
    render: Mapping[str, Any],
    envs: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    """Every output of the reference implementation for one serialized input task.

    ``format`` is ``textproto``, ``json`` (the custom dict as JSON text) or
    ``binary_hex``. The backend half works from the custom dict, which is what
    the backend receives: custom -> task -> PyTorchJob -> pod env.

    Returns:
        ``{"error": ...}`` when the input is not a task of that version; else
        what `outputs_of_task` returns.
    """
    try:
        if format == "binary_hex":
            task = decode(bytes.fromhex(str(data)), format="binary", task_type_version=task_type_version)
        else:
            task = decode(data, format=format, task_type_version=task_type_version)  # type: ignore[arg-type]
    except ElasticIdlError as exc:
        return {"error": error_of(exc)}
    except ValueError as exc:  # bad hex in the request
        return {"error": {"type": "DecodeError", "field": "", "reason": str(exc)}}
    return outputs_of_task(task, task_type_version=task_type_version, render=render, envs=envs)


def outputs_of_task(
    task: Any,
    *,
    task_type_version: int,
    render: Mapping[str, Any],
    envs: Mapping[str, Mapping[str, str]] | None = None,
    render_from: str = "custom",
) -> dict[str, Any]:
    """Every output for a decoded task (either binding): the contract's definition of each.

    - ``binary_hex``: deterministic wire bytes, hex.
    - ``custom``: the ``TaskTemplate.custom`` dict (proto3 JSON, camelCase), or an
      EncodeError when the task has no JSON form.
    - ``violations``: every broken rule, as field path + rule id, in order.
    - ``pytorchjob``: the rendered job (with ``JobOptions(**render)``), rendered from the
      custom dict (``render_from="custom"``, the backend's input) or from the message itself.
    - ``pod_env``: the operator env of replica 0 and 1 of each replica type, keyed ``<Type>-<index>``.
    - ``targets``: the same input rendered as a TrainJob (also with the proposed elasticPolicy) and as a
      JobSet, with each target's losses (`targets_of`).
    - ``launch_spec``: ``LaunchSpec.as_dict()`` under no env (``none``), under each
      pod env of ``pod_env`` and under each named extra env; or the error.
    """
    from elastic_idl._backend.operator import pod_env
    from elastic_idl._backend.pytorchjob import JobOptions, render_pytorchjob

    options = JobOptions(**render)  # TypeError (a bad request) for a name that is no option
    out: dict[str, Any] = {}
    binary = encode(task, "binary")
    assert isinstance(binary, bytes)
    out["binary_hex"] = binary.hex()
    backend_input: Any = task
    try:
        out["custom"] = to_custom(task)
        if render_from == "custom":
            backend_input = out["custom"]
    except EncodeError as exc:
        # The task has no proto3 JSON form (a Duration outside JSON's range).
        out["custom"] = {"error": {"type": "EncodeError", "field": exc.field}}
    out["violations"] = violation_list(violations(task))

    job: dict[str, Any] | None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SkewWarning)
        try:
            job = render_pytorchjob(backend_input, options, task_type_version=task_type_version)
            out["pytorchjob"] = job
        except ElasticIdlError as exc:
            job = None
            out["pytorchjob"] = {"error": error_of(exc)}
    out["skew"] = skew_fields(caught) if job is not None else []
    out["targets"] = targets_of(backend_input, options, task_type_version)

    pod_envs: dict[str, dict[str, str]] = {}
    if job is not None:
        for rtype, index in _pods(job):
            pod_envs[f"{rtype}-{index}"] = pod_env(job, rtype, index)
    out["pod_env"] = pod_envs

    launch: dict[str, Any] = {}
    for label, env in [("none", {}), *pod_envs.items(), *(envs or {}).items()]:
        try:
            launch[label] = to_launch_spec(task, env=env).as_dict()
        except ElasticIdlError as exc:
            launch[label] = {"error": error_of(exc)}
    out["launch_spec"] = launch
    return out


#: The ``targets`` output's entries: name -> (render target, trainjob_elastic_policy).
TARGET_OUTPUTS: dict[str, tuple[str, bool]] = {
    "trainjob": ("trainjob", False),
    "trainjob_elastic_policy": ("trainjob", True),
    "jobset": ("jobset", False),
}


def targets_of(backend_input: Any, options: Any, task_type_version: int) -> dict[str, Any]:
    """The ``targets`` output: the task on the TrainJob and JobSet targets (`TARGET_OUTPUTS`), each
    ``{"objects", "losses"}`` (losses as ``TargetLoss.as_dict()``) or ``{"error"}``; the same input and
    options as ``pytorchjob``, never strict."""
    from elastic_idl._backend.targets import render_target

    out: dict[str, Any] = {}
    for name, (target, elastic_policy) in TARGET_OUTPUTS.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SkewWarning)  # the pytorchjob output's skew names them
            try:
                rendered = render_target(
                    backend_input,
                    options,
                    target=target,
                    task_type_version=task_type_version,
                    trainjob_elastic_policy=elastic_policy,
                )
            except ElasticIdlError as exc:
                out[name] = {"error": error_of(exc)}
                continue
        out[name] = {"objects": rendered.objects, "losses": [loss.as_dict() for loss in rendered.losses]}
    return out


def skew_fields(caught: Sequence[warnings.WarningMessage]) -> list[str]:
    """The field paths the recorded SkewWarnings name, in order (the ``skew`` output)."""
    return [field for w in caught if isinstance(w.message, SkewWarning) for field in w.message.fields]


def request_for(case: Case, *, input_format: str = "textproto", data: str | None = None) -> dict[str, Any]:
    """The request entry for one case (see contract/README.md, "Request").

    Args:
        case: The case.
        input_format: ``textproto`` (the case's input file), ``json`` or
            ``binary_hex`` (the case's expected custom / binary, for implementations
            that only read the backend's input form).
        data: The input in that format; defaults to what the case folder holds.
    """
    if data is None:
        if input_format == "textproto":
            data = case.textproto
        else:
            expected = read_expected(case.path)
            if input_format == "json":
                data = json.dumps(expected["custom"], sort_keys=True) if "custom" in expected else None
            elif input_format == "binary_hex":
                data = expected.get("binary_hex")
            else:
                raise ValueError(f"unknown input format {input_format!r}")
    if data is None:
        raise CaseError(f"{case.name}: no input in format {input_format}")
    return {
        "name": case.name,
        "task_type_version": case.task_type_version,
        "input": {"format": input_format, "data": data},
        "render": dict(case.render),
        "envs": {k: dict(v) for k, v in case.envs.items()},
    }


def respond(request: Mapping[str, Any]) -> dict[str, Any]:
    """Answer a whole request (the reference implementation of the entry point)."""
    from elastic_idl import __version__

    version = request.get("version")
    if version != CONTRACT_VERSION:
        raise ValueError(f"request version {version!r} is not {CONTRACT_VERSION}")
    results: dict[str, Any] = {}
    for entry in request.get("cases", []):
        inp = entry["input"]
        envs = entry.get("envs") or {}
        if not isinstance(envs, Mapping) or not all(isinstance(e, Mapping) for e in envs.values()):
            raise ValueError(f"case {entry.get('name')!r}: envs must map a name to a mapping of strings")
        results[entry["name"]] = evaluate(
            inp["data"],
            format=inp["format"],
            task_type_version=entry["task_type_version"],
            render=entry.get("render") or DEFAULT_RENDER,
            envs=envs,
        )
    return {
        "version": CONTRACT_VERSION,
        "implementation": f"elastic-idl-python {__version__}",
        "outputs": list(OUTPUTS),
        "results": results,
    }


# --------------------------------------------------------------------------- forward-compatibility vectors

#: Files of a forward-compatibility vector folder (contract/forward/<name>/): input by hand, expectations by
#: scripts/regen_contract.py.
FORWARD_INPUT = "vector.yaml"
FORWARD_EXPECTED = "expected.json"
_FORWARD_KEYS = {"description", "task_type_version", "format", "input"}


@dataclass(frozen=True)
class ForwardVector:
    """A newer SDK's task (contract/README.md, "Forward compatibility"): its input and where it lives."""

    name: str
    path: Path
    description: str
    task_type_version: int
    format: str
    input: str


def load_forward_vectors(forward_dir: Path) -> list[ForwardVector]:
    """Every vector under ``forward_dir`` (contract/forward), sorted by name; CaseError when malformed."""
    out = []
    for path in sorted(p for p in forward_dir.iterdir() if p.is_dir()):
        meta = yaml.safe_load((path / FORWARD_INPUT).read_text(encoding="utf-8"))
        if not isinstance(meta, dict) or set(meta) != _FORWARD_KEYS or meta["format"] not in ("json", "binary_hex"):
            raise CaseError(
                f"{path.name}: {FORWARD_INPUT} needs exactly {sorted(_FORWARD_KEYS)}, format json|binary_hex"
            )
        out.append(
            ForwardVector(
                path.name, path, str(meta["description"]), int(meta["task_type_version"]), meta["format"], meta["input"]
            )
        )
    return out


def forward_outputs(vector: ForwardVector) -> dict[str, Any]:
    """What the reference does with a newer SDK's task, as ``expected.json`` pins it.

    ``tolerant``: the forward-compatible decode (``decode(strict=False)``; for JSON the same as
    ``from_custom``): ``unknown``, the field paths its SkewWarnings name, in order; ``custom`` and
    ``binary_hex`` of the task it keeps; or ``error``. ``strict``: the strict decode's answer, the
    same shape (binary unknown fields are kept there too, so ``unknown`` lists them as found).
    """
    from elastic_idl._task.codec import unknown_fields

    data: Any = bytes.fromhex(vector.input) if vector.format == "binary_hex" else vector.input
    fmt: Any = "binary" if vector.format == "binary_hex" else vector.format
    out: dict[str, Any] = {}
    for label, strict in (("tolerant", False), ("strict", True)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", SkewWarning)
            try:
                task = decode(data, format=fmt, task_type_version=vector.task_type_version, strict=strict)
            except ElasticIdlError as exc:
                out[label] = {"error": error_of(exc)}
                continue
        unknown = skew_fields(caught) if not strict else unknown_fields(task)
        binary = encode(task, "binary")
        assert isinstance(binary, bytes)
        out[label] = {"unknown": unknown, "custom": to_custom(task), "binary_hex": binary.hex()}
    return out


# --------------------------------------------------------------------------- flytekit cases


def _flytekit_task_function(x: int) -> int:
    # flytekit reads a task function's source, so the function of a flytekit case lives in a file.
    return x


def flytekit_sdk_output(spec: Mapping[str, Any]) -> dict[str, Any]:
    """What the installed flytekitplugins-kfpytorch emits for a ``flytekit`` case's settings.

    ``spec`` is the case's ``flytekit`` mapping: ``config`` (``Elastic`` or
    ``PyTorch``) and ``kwargs``. Nested settings are given by name: ``run_policy``,
    ``worker``/``master`` as mappings, enum members (``clean_pod_policy``,
    ``restart_policy``) by member name, ``requests``/``limits`` as flytekit
    ``Resources`` keyword arguments. flytekit is a test-only dependency, imported here.

    Returns:
        ``{"task_type": ..., "task_type_version": ..., "custom": <dict or None>}``.
    """
    import importlib
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plugin = importlib.import_module("flytekitplugins.kfpytorch.task")
        flytekit = importlib.import_module("flytekit")
        configuration = importlib.import_module("flytekit.configuration")

        def resources(value: Mapping[str, Any] | None) -> Any:
            return None if value is None else flytekit.Resources(**value)

        def run_policy(value: Mapping[str, Any] | None) -> Any:
            if value is None:
                return None
            kw = dict(value)
            if "clean_pod_policy" in kw:
                kw["clean_pod_policy"] = plugin.CleanPodPolicy[kw["clean_pod_policy"]]
            return plugin.RunPolicy(**kw)

        def replica(cls: Any, value: Mapping[str, Any] | None) -> Any:
            kw = dict(value or {})
            for key in ("requests", "limits"):
                if key in kw:
                    kw[key] = resources(kw[key])
            if "restart_policy" in kw:
                kw["restart_policy"] = plugin.RestartPolicy[kw["restart_policy"]]
            return cls(**kw)

        kwargs = dict(spec.get("kwargs") or {})
        if "run_policy" in kwargs:
            kwargs["run_policy"] = run_policy(kwargs["run_policy"])
        if spec["config"] == "Elastic":
            config = plugin.Elastic(**kwargs)
            task_cls = plugin.PytorchElasticFunctionTask
        else:
            for key, cls in (("worker", plugin.Worker), ("master", plugin.Master)):
                if key in kwargs:
                    kwargs[key] = replica(cls, kwargs[key])
            config = plugin.PyTorch(**kwargs)
            task_cls = plugin.PyTorchFunctionTask
        task = task_cls(task_config=config, task_function=_flytekit_task_function)
        settings = configuration.SerializationSettings(image_config=configuration.ImageConfig.auto_default_image())
        custom = task.get_custom(settings)
    return {
        "task_type": str(task.task_type),
        "task_type_version": int(task.task_type_version),
        "custom": custom,
    }


def _flyte2_task_function(x: int) -> int:
    return x


def flyte2_sdk_output(spec: Mapping[str, Any]) -> dict[str, Any]:
    """What the installed Flyte 2 ``flyteplugins-pytorch`` emits for a ``flyte2`` case's settings.

    ``spec`` is the case's ``flyte2`` mapping: ``kwargs`` of ``flyteplugins.pytorch.Elastic``, with
    ``run_policy`` as a mapping of its ``RunPolicy``'s keyword arguments. The task is defined in a
    ``flyte.TaskEnvironment`` with the config as ``plugin_config``, as a Flyte 2 user does, and
    serialized with its ``custom_config``. flyte is a test-only dependency, imported here.

    Returns:
        ``{"task_type": ..., "task_type_version": ..., "custom": <dict or None>}``.
    """
    import importlib
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        flyte = importlib.import_module("flyte")
        models = importlib.import_module("flyte.models")
        plugin = importlib.import_module("flyteplugins.pytorch.task")
        kwargs = dict(spec.get("kwargs") or {})
        if kwargs.get("run_policy") is not None:
            kwargs["run_policy"] = plugin.RunPolicy(**kwargs["run_policy"])
        env = flyte.TaskEnvironment(name="contract", plugin_config=plugin.Elastic(**kwargs))
        task = env.task(_flyte2_task_function)
        custom = task.custom_config(models.SerializationContext(version="contract"))
    return {
        "task_type": str(task.task_type),
        "task_type_version": int(task.task_type_version),
        "custom": custom,
    }


def sdk_output(case: Case) -> dict[str, Any]:
    """What the installed SDK emits for a case of one of the `SDK_KINDS` (the sdk.json it pins)."""
    if case.kind == "flytekit" and case.flytekit is not None:
        return flytekit_sdk_output(case.flytekit)
    if case.kind == "flyte2" and case.flyte2 is not None:
        return flyte2_sdk_output(case.flyte2)
    raise CaseError(f"{case.name}: a {case.kind} case has no SDK output")


# --------------------------------------------------------------------------- expectation files


def _dump_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _dump_output(name: str, value: Any) -> str:
    if name == "binary_hex":
        return str(value) + "\n"
    if name == "pytorchjob":
        return yaml.safe_dump(value, sort_keys=False, allow_unicode=True, width=4096)
    return _dump_json(value)


def _load_output(name: str, text: str) -> Any:
    if name == "binary_hex":
        return text.strip()
    if name == "pytorchjob":
        return yaml.safe_load(text)
    return json.loads(text)


def write_expected(case_dir: Path, outputs: Mapping[str, Any], *, sdk: Mapping[str, Any] | None = None) -> list[str]:
    """Write the expectation files of a case (regeneration only) and remove stale ones.

    Returns the names of the files whose content changed.
    """
    changed: list[str] = []
    wanted: dict[str, str] = {OUTPUT_FILES[k]: _dump_output(k, v) for k, v in outputs.items()}
    if sdk is not None:
        wanted[SDK_FILE] = _dump_json(sdk)
    for fname, text in wanted.items():
        target = case_dir / fname
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            changed.append(fname)
    for fname in [*OUTPUT_FILES.values(), SDK_FILE]:
        if fname not in wanted and (case_dir / fname).exists():
            (case_dir / fname).unlink()
            changed.append(fname)
    return changed


def read_expected(case_dir: Path) -> dict[str, Any]:
    """The expectation files of a case folder, by output name (``sdk`` for sdk.json)."""
    out: dict[str, Any] = {}
    for name, fname in OUTPUT_FILES.items():
        p = case_dir / fname
        if p.is_file():
            out[name] = _load_output(name, p.read_text(encoding="utf-8"))
    sdk = case_dir / SDK_FILE
    if sdk.is_file():
        out["sdk"] = json.loads(sdk.read_text(encoding="utf-8"))
    return out


#: Every file name a case folder may hold.
KNOWN_FILES = frozenset({CASE_FILE, INPUT_FILE, SDK_FILE, *OUTPUT_FILES.values()})


# --------------------------------------------------------------------------- entry point

_USAGE = """usage: python -m elastic_idl.conformance [--case DIR ...]

Reads a conformance request (JSON) on stdin and writes the response (JSON) on
stdout; see contract/README.md. With --case DIR, builds the request from case
folders instead of reading stdin (textproto input; flytekit and flyte2 cases are skipped).
"""


def main(argv: Sequence[str] | None = None) -> int:
    """The conformance entry point: request on stdin (or --case DIRs), response on stdout.

    Exit codes: 0 answered (per-case errors are part of the answer), 2 usage or a
    malformed request.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        sys.stdout.write(_USAGE)
        return 0
    try:
        if args:
            if len(args) % 2 or any(a != "--case" for a in args[::2]):
                sys.stderr.write(_USAGE)
                return 2
            cases = [load_case(Path(d)) for d in args[1::2]]
            request: Any = {
                "version": CONTRACT_VERSION,
                "cases": [request_for(c) for c in cases if c.kind not in SDK_KINDS],
            }
        else:
            # The bytes, strictly UTF-8: a text stdin in the C locale would turn bad bytes into surrogates.
            # At most MAX_REQUEST_BYTES + 1 of them are read: a larger request is refused before any copy.
            raw = read_task_bytes(sys.stdin.buffer, MAX_REQUEST_BYTES)
            request = json.loads(raw.decode("utf-8"))
        if not isinstance(request, dict):
            raise ValueError("the request must be a JSON object")
        response = respond(request)
    except DecodeError as exc:  # larger than MAX_REQUEST_BYTES
        sys.stderr.write(f"conformance: bad request: {exc.reason}\n")
        return 2
    except (ValueError, KeyError, TypeError, OSError, RecursionError) as exc:  # RecursionError: JSON nested too deep
        sys.stderr.write(f"conformance: bad request: {type(exc).__name__}: {exc}\n")
        return 2
    # ASCII JSON (\uXXXX escapes): whatever the request echoes (a case name, an env value) is written,
    # a lone surrogate included, and stdout's encoding does not matter.
    sys.stdout.write(json.dumps(response, sort_keys=True) + "\n")
    return 0
