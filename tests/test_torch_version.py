"""A task field the installed torch cannot apply is refused at launch, naming the field and the version, and
accepted everywhere else (issue 33, item 2).

The two fields: ``log_line_prefix_template`` (torch 2.13's agent applies a template, but its ``${hostname}``
macro is 2.14's: 2.13 prints it as written) and ``cas_backoff_max_seconds`` (a rendezvous option torch 2.15
reads and older torches ignore). The pure rule runs on made-up versions; the launch tests run against the
installed torch: the refusal on 2.13 in ``.venv``, the accept path where `make test-torch` runs this file
(2.14.1, 2.15.0).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import elastic_idl as ei
from elastic_idl._errors import TorchVersionError, ValidationError
from elastic_idl._launch.spec import (
    TORCH_VERSION_RULE,
    check_torch_support,
    to_launch_spec,
    torch_support_violations,
    torch_version_tuple,
)
from elastic_idl._task.messages import KubeflowTask

TEMPLATE_FIELD = "elastic_config.log_line_prefix_template"
CAS_FIELD = "elastic_config.cas_backoff_max_seconds"


def _spec(template: str = "", cas: Any = None) -> Any:
    kwargs: dict[str, Any] = {"nnodes": "1:1", "log_line_prefix_template": template}
    if cas is not None:
        kwargs["cas_backoff_max_seconds"] = cas
    return to_launch_spec(ei.Elastic(**kwargs).to_task())


def _fields(spec: Any, version: str) -> list[tuple[str, str]]:
    return [(v.field, v.rule) for v in torch_support_violations(spec, version)]


# ---------------------------------------------------------------- the rule, on made-up versions


def test_valid_and_rendered_without_asking_torch() -> None:
    """Validation, rendering and the launch spec never look at torch: both fields are valid and rendered
    whatever torch is installed (here: with torch made unimportable)."""
    code = """
import sys
sys.modules["torch"] = None  # any import of torch now fails
import elastic_idl as ei
task = ei.Elastic(nnodes=2, log_line_prefix_template="${hostname}|", cas_backoff_max_seconds=1.5).to_task()
assert ei.violations(task) == []
job = ei.render_pytorchjob(task, ei.JobOptions(name="job", image="i:1", entrypoint=["t.py"]))
conf = {c["key"]: c["value"] for c in job["spec"]["elasticPolicy"]["rdzvConf"]}
spec = ei.to_launch_spec(task)
print(conf["cas_backoff_max_seconds"], spec.log_line_prefix_template, spec.rdzv_configs["cas_backoff_max_seconds"])
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == ["1.5", "${hostname}|", "1.5"]


@pytest.mark.parametrize(
    ("template", "macros_of_2_14"),
    [
        ("${hostname}:${rank}|", True),
        ("$hostname|", True),  # string.Template's unbraced form is the same macro
        ("[${role_name}${local_rank}]:${rank} ", False),  # 2.13's macros
        ("$$hostname ${node} ${ $", False),  # escaped, unknown, unterminated: kept as written everywhere
    ],
)
def test_the_hostname_macro_needs_torch_2_14(template: str, macros_of_2_14: bool) -> None:
    spec = _spec(template)
    expected = [(TEMPLATE_FIELD, TORCH_VERSION_RULE)] if macros_of_2_14 else []
    assert _fields(spec, "2.13.0") == expected
    assert _fields(spec, "2.14.1") == _fields(spec, "2.15.0") == []
    if macros_of_2_14:
        (v,) = torch_support_violations(spec, "2.13.0+cu130")
        assert "${hostname} needs torch 2.14 or newer" in v.message
        assert "the installed torch 2.13.0+cu130" in v.message


@pytest.mark.parametrize(("cas", "refused_before_2_15"), [(0.5, True), ("2", True), (0, False)])
def test_a_cas_backoff_needs_torch_2_15(cas: Any, refused_before_2_15: bool) -> None:
    spec = _spec(cas=cas)
    expected = [(CAS_FIELD, TORCH_VERSION_RULE)] if refused_before_2_15 else []  # 0: what older torches do
    assert _fields(spec, "2.13.0") == _fields(spec, "2.14.1") == expected
    assert _fields(spec, "2.15.0") == _fields(spec, "2.16.0") == []
    if refused_before_2_15:
        with pytest.raises(TorchVersionError) as err:
            check_torch_support(spec, "2.14.1")
        assert isinstance(err.value, ValidationError)  # the CLI's exit 1
        assert err.value.torch_version == "2.14.1"
        assert "needs torch 2.15 or newer; the installed torch 2.14.1 ignores" in str(err.value)


def test_a_cas_backoff_from_the_pod_env_is_checked_too() -> None:
    """A key only in PET_RDZV_CONF is added to the spec's rendezvous options, so the launcher checks it too."""
    task = ei.Elastic(nnodes="1:1").to_task()
    spec = to_launch_spec(task, env={"PET_RDZV_CONF": "cas_backoff_max_seconds=3"})
    assert _fields(spec, "2.14.1") == [(CAS_FIELD, TORCH_VERSION_RULE)]


def test_both_fields_at_once_are_both_named() -> None:
    spec = _spec("${hostname}>", 0.25)
    assert _fields(spec, "2.13.0") == [(TEMPLATE_FIELD, TORCH_VERSION_RULE), (CAS_FIELD, TORCH_VERSION_RULE)]
    assert _fields(spec, "2.14.0") == [(CAS_FIELD, TORCH_VERSION_RULE)]


# ---------------------------------------------------------------- the installed torch


def _installed() -> tuple[int, int]:
    torch = pytest.importorskip("torch")
    return torch_version_tuple(torch.__version__)


def _run(cmd: list[str], script: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*cmd, "--nproc-per-node", "2", "--tee", "3", str(script)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=script.parent,
        env={**os.environ, **env},
        check=False,
    )


def _script(tmp_path: Path) -> Path:
    script = tmp_path / "hello.py"
    # one write per line: the tee'd streams of two workers interleave at write boundaries
    script.write_text("import os\nos.write(1, f\"hello from {os.environ['RANK']}\\n\".encode())\n")
    return script


DROP_IN = [sys.executable, "-m", "elastic_idl.cli", "torchrun"]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]


def test_a_hostname_template_is_refused_at_launch_on_2_13_and_printed_from_2_14(tmp_path: Path) -> None:
    """TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE (read by every torchrun from 2.13 on) with ${hostname}: torch 2.13's
    own torchrun prints the macro as written; the drop-in refuses the task naming the field and the version.
    From 2.14 on both print the host name."""
    have = _installed()
    import torch

    script = _script(tmp_path)
    env = {"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": "${hostname}|"}
    ours = _run(DROP_IN, script, env)
    theirs = _run(TORCHRUN, script, env)
    assert theirs.returncode == 0, theirs.stderr[-2000:]
    if have < (2, 14):
        assert sorted(theirs.stdout.splitlines()) == ["${hostname}|hello from 0", "${hostname}|hello from 1"]
        assert ours.returncode == 1, ours.stderr[-2000:]
        assert f"{TEMPLATE_FIELD}: {TORCH_VERSION_RULE}:" in ours.stderr
        assert f"the installed torch {torch.__version__.split('+')[0]}" in ours.stderr
        assert "hello from" not in ours.stdout  # refused before any worker started
        return
    host = socket.gethostname()
    assert ours.returncode == 0, ours.stderr[-2000:]
    assert sorted(ours.stdout.splitlines()) == sorted(theirs.stdout.splitlines())
    assert sorted(ours.stdout.splitlines()) == [f"{host}|hello from 0", f"{host}|hello from 1"]


def test_a_template_of_2_13s_macros_is_applied_on_every_torch(tmp_path: Path) -> None:
    """The field itself is not refused on 2.13: its LaunchConfig takes a template, and the launcher passes it."""
    _installed()
    script = _script(tmp_path)
    env = {"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": "<${rank}/${local_rank}>"}
    ours = _run(DROP_IN, script, env)
    assert ours.returncode == 0, ours.stderr[-2000:]
    assert sorted(ours.stdout.splitlines()) == ["<0/0>hello from 0", "<1/1>hello from 1"]
    assert sorted(_run(TORCHRUN, script, env).stdout.splitlines()) == sorted(ours.stdout.splitlines())


def test_a_cas_backoff_is_refused_at_launch_before_2_15_and_reaches_torchs_rendezvous_on_2_15(tmp_path: Path) -> None:
    have = _installed()
    import torch

    script = _script(tmp_path)
    ours = _run([*DROP_IN, "--rdzv-conf", "cas_backoff_max_seconds=0.5"], script, {})
    if have < (2, 15):
        assert ours.returncode == 1, ours.stderr[-2000:]
        assert f"{CAS_FIELD}: {TORCH_VERSION_RULE}:" in ours.stderr
        assert (
            f"needs torch 2.15 or newer; the installed torch {torch.__version__.split('+')[0]} ignores" in ours.stderr
        )
        assert "hello from" not in ours.stdout
        return
    assert ours.returncode == 0, ours.stderr[-2000:]
    assert sorted(ours.stdout.splitlines())[-2:] == ["[default0]:hello from 0", "[default1]:hello from 1"]
    # the launcher's rendezvous options reach torch's handler, which holds the value
    from torch.distributed.elastic.rendezvous import RendezvousParameters
    from torch.distributed.elastic.rendezvous import registry as rdzv_registry

    from elastic_idl._launch.agent import build_launch_config

    task = KubeflowTask()
    task.CopyFrom(ei.Elastic(nnodes="1:1", cas_backoff_max_seconds=0.5).to_task())
    config = build_launch_config(to_launch_spec(task, run_id="t"), nproc_per_node=1, log_dir=str(tmp_path))
    params = RendezvousParameters(
        backend=config.rdzv_backend,
        endpoint="127.0.0.1:0",
        run_id=config.run_id,
        min_nodes=1,
        max_nodes=1,
        local_addr="127.0.0.1",
        **config.rdzv_configs,
    )
    handler = rdzv_registry.get_rendezvous_handler(params)
    try:
        assert handler._settings.cas_backoff_max_seconds == 0.5
    finally:
        handler.shutdown()
