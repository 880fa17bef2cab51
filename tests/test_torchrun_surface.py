"""The torchrun surface (issue 33, item 1): the drop-in accepts exactly the flags of the installed torch's
torchrun, says which torch refused a flag, and maps --log-line-prefix-template (where torch has it) and
--rdzv-conf cas_backoff_max_seconds to the task's typed fields.

The pure parts run on made-up surfaces; the rest against the installed torch (run by `make test-torch`
on each torch of the matrix, where the last test compares with that torch's own torchrun)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from elastic_idl._errors import TorchrunError, TorchrunUsageError, TorchrunValidationError, UnsupportedFlagError
from elastic_idl._sdk.torchrun import (
    FLAGS,
    NEWER_FLAGS,
    TORCH_2_13,
    TorchrunSurface,
    from_torchrun,
    parse_torchrun,
    to_torchrun,
)

TEMPLATE = "--log-line-prefix-template"
WITH_TEMPLATE = TorchrunSurface(
    "2.14.1",
    TORCH_2_13.options | set(NEWER_FLAGS[0].options) | set(NEWER_FLAGS[1].options),
    TORCH_2_13.switches,
)


def test_the_default_surface_is_torchrun_2_13s_and_refuses_the_template_naming_it() -> None:
    with pytest.raises(TorchrunUsageError) as err:
        parse_torchrun([TEMPLATE, "${rank}|", "train.py"])
    assert err.value.flag == TEMPLATE
    assert f"{TEMPLATE} is not a flag of torch 2.13's torchrun" in err.value.reason
    # torch 2.13's torchrun has no such env action: its PET_ variable is not read ...
    task, _ = from_torchrun(["train.py"], {"PET_LOG_LINE_PREFIX_TEMPLATE": "${rank}|"})
    assert task.elastic_config.log_line_prefix_template == ""
    # ... but TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE is, by every torchrun from 2.13 on.
    task, _ = from_torchrun(["train.py"], {"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": "${rank}>"})
    assert task.elastic_config.log_line_prefix_template == "${rank}>"


@pytest.mark.parametrize("spelling", [TEMPLATE, "--log_line_prefix_template"])
def test_a_surface_with_the_template_puts_it_in_the_task(spelling: str) -> None:
    task, entry = from_torchrun([spelling, "${hostname}:${rank}: ", "train.py", "x"], surface=WITH_TEMPLATE)
    assert task.elastic_config.log_line_prefix_template == "${hostname}:${rank}: "
    assert entry.target == "train.py" and entry.args == ("x",)
    # written back as the flag, and read back to the same task
    argv = to_torchrun(task, entry)
    assert f"{TEMPLATE}=${{hostname}}:${{rank}}: " in argv
    assert from_torchrun(argv, surface=WITH_TEMPLATE)[0] == task

    def template(argv: list[str], env: dict[str, str]) -> str:
        return from_torchrun([*argv, "t.py"], env, WITH_TEMPLATE)[0].elastic_config.log_line_prefix_template

    assert template([], {"PET_LOG_LINE_PREFIX_TEMPLATE": "${rank}>"}) == "${rank}>"
    assert template([TEMPLATE, "a"], {"PET_LOG_LINE_PREFIX_TEMPLATE": "b"}) == "a"  # the command line wins
    # torchrun: the flag (or PET_), else TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE
    assert template([], {"PET_LOG_LINE_PREFIX_TEMPLATE": "b", "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": "c"}) == "b"
    assert template([], {"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": "c"}) == "c"
    assert template([], {}) == ""


def test_cas_backoff_in_rdzv_conf_is_the_typed_field() -> None:
    task, _ = from_torchrun(["--rdzv-conf", "cas_backoff_max_seconds=0.25,is_host=1", "train.py"])
    e = task.elastic_config
    assert (e.cas_backoff_max_seconds.seconds, e.cas_backoff_max_seconds.nanos) == (0, 250_000_000)
    assert [(o.key, o.value) for o in e.rdzv_options] == [("is_host", "1")]
    argv = to_torchrun(task, "train.py")
    assert "--rdzv-conf=cas_backoff_max_seconds=0.25,is_host=1" in argv
    assert from_torchrun(argv)[0] == task
    with pytest.raises(TorchrunError, match=r"--rdzv-conf: cas_backoff_max_seconds='nan' is not a finite number"):
        from_torchrun(["--rdzv-conf", "cas_backoff_max_seconds=nan", "train.py"])
    with pytest.raises(TorchrunValidationError) as err:
        from_torchrun(["--rdzv-conf", "cas_backoff_max_seconds=-1", "train.py"])
    assert [(v.field, v.rule) for v in err.value.violations] == [
        ("elastic_config.cas_backoff_max_seconds", "elastic.duration.non_negative")
    ]
    assert err.value.flags == ("--rdzv-conf=cas_backoff_max_seconds=-1",)


def test_print_completion_is_refused_where_torch_has_it() -> None:
    with pytest.raises(UnsupportedFlagError, match=r"--print-completion: .*run torchrun itself"):
        parse_torchrun(["--print-completion", "bash", "train.py"], surface=WITH_TEMPLATE)


def test_a_known_flag_the_installed_torch_lacks_is_refused_naming_its_version() -> None:
    gone = FLAGS[-1]  # --virtual-local-rank, the newest of 2.13's
    older = TorchrunSurface("2.12.0", TORCH_2_13.options - set(gone.options), TORCH_2_13.switches)
    parse_torchrun([gone.options[0], "train.py"])  # 2.13 has it
    with pytest.raises(TorchrunUsageError, match=rf"{gone.options[0]} is not a flag of torch 2.12.0's torchrun"):
        parse_torchrun([gone.options[0], "train.py"], surface=older)
    # and its PET_ variable is not read where torch lacks the flag
    env = {f"PET_{gone.dest.upper()}": "1"}
    assert parse_torchrun(["train.py"], env, older)[0] == parse_torchrun(["train.py"], surface=older)[0]


@pytest.mark.parametrize(("argv", "switch"), [(["--new-knob", "3"], False), (["--fast_mode"], True)])
def test_a_flag_elastic_idl_does_not_know_is_refused_not_dropped(argv: list[str], switch: bool) -> None:
    name = argv[0]
    newer = TorchrunSurface("2.99.0", TORCH_2_13.options | {name}, TORCH_2_13.switches | ({name} if switch else set()))
    with pytest.raises(UnsupportedFlagError) as err:
        parse_torchrun([*argv, "train.py"], surface=newer)
    assert err.value.flag == name
    assert "a flag of torch 2.99.0's torchrun that this elastic-idl does not know" in err.value.reason
    _, entry, _ = parse_torchrun(["train.py", *argv], surface=newer)  # after the script: the script's
    assert entry.args == tuple(argv)


# ---------------------------------------------------------------- the installed torch


def _installed() -> TorchrunSurface:
    pytest.importorskip("torch")
    from elastic_idl._launch.agent import installed_torchrun_surface

    return installed_torchrun_surface()


def test_the_installed_surface_is_torchs_own_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch
    from torch.distributed import run

    monkeypatch.setenv("PET_STANDALONE", "")  # torch's parser raises on it when built: set aside
    surface = _installed()
    assert os.environ["PET_STANDALONE"] == ""  # and put back
    monkeypatch.delenv("PET_STANDALONE")
    parser = run.get_args_parser()
    theirs = {o for a in parser._actions for o in a.option_strings}
    assert surface.options == theirs
    assert surface.torch_version == torch.__version__.split("+")[0]
    assert {"--standalone", "--virtual-local-rank"} <= surface.switches
    assert "--nnodes" not in surface.switches
    # every 2.13 flag is either in this torch or refused by it, and nothing of it goes unhandled
    handled = {o for f in surface.flags() for o in f.options}
    assert theirs - {"-h", "--help"} <= handled


@pytest.mark.parametrize("template", ["", "[${rank}]"])
def test_to_torchrun_for_the_installed_torch_writes_what_its_torchrun_parses(template: str) -> None:
    """``to_torchrun(..., torch_version=<installed>)`` either writes a command line this torch's own parser
    takes, or refuses naming the flag it lacks where that parser would refuse the unrestricted line
    (torch 2.13 and the template; 2.14 and 2.15 take it: the torch matrix runs this on each)."""
    import torch
    from torch.distributed import run

    from elastic_idl import decode

    text = (
        f'elastic_config {{ min_replicas: 1 max_replicas: 2 nproc_per_node: 2 log_line_prefix_template: "{template}" }}'
    )
    task = decode(text, format="textproto", task_type_version=1)
    unrestricted = to_torchrun(task, "train.py", ["--epochs", "3"])
    parser = run.get_args_parser()
    try:
        parser.parse_args(unrestricted)
        takes_it = True
    except SystemExit:  # argparse's refusal: this torchrun lacks a flag written
        takes_it = False
    if not takes_it:
        assert template  # only the template's flag is newer than 2.13
        with pytest.raises(TorchrunError) as err:
            to_torchrun(task, "train.py", ["--epochs", "3"], torch_version=torch.__version__)
        assert err.value.flag == TEMPLATE and "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE" in err.value.reason
        return
    argv = to_torchrun(task, "train.py", ["--epochs", "3"], torch_version=torch.__version__)
    assert argv == unrestricted
    parsed = parser.parse_args(argv)
    assert (parsed.nnodes, parsed.nproc_per_node, parsed.training_script) == ("1:2", "2", "train.py")
    assert parsed.training_script_args == ["--epochs", "3"]
    if template:
        assert parsed.log_line_prefix_template == template


def test_to_torchrun_refuses_a_flag_the_named_torch_lacks_and_a_bad_version() -> None:
    from elastic_idl import decode

    task = decode(
        'elastic_config { min_replicas: 1 max_replicas: 1 nproc_per_node: 1 log_line_prefix_template: "${rank}|" }',
        format="textproto",
        task_type_version=1,
    )
    for old in ("2.13.0", "2.13.1+cpu", "2.12"):
        with pytest.raises(TorchrunError) as err:
            to_torchrun(task, "train.py", torch_version=old)
        assert err.value.flag == TEMPLATE and f"torch {old}'s torchrun" in err.value.reason
    for new in ("2.14.1", "2.15.0", "3.0"):
        assert f"{TEMPLATE}=${{rank}}|" in to_torchrun(task, "train.py", torch_version=new)
    with pytest.raises(TorchrunError) as err:
        to_torchrun(task, "train.py", torch_version="latest")
    assert err.value.flag == "torch_version"


def _run(cmd: list[str], script: Path, tmp: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*cmd, "--nproc-per-node", "2", "--tee", "3", str(script)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp,
        env={**os.environ, **env},
        check=False,
    )


@pytest.mark.parametrize("how", ["flag", "env"])
def test_the_drop_in_prints_what_this_torchs_torchrun_prints(tmp_path: Path, how: str) -> None:
    """``--log-line-prefix-template`` (or its PET_ variable) through the drop-in and through the installed
    torch's own torchrun: the same tee'd lines, or on a torch without the flag a usage error naming it."""
    surface = _installed()
    script = tmp_path / "hello.py"
    # one write per line: the tee'd streams of two workers interleave at write boundaries
    script.write_text("import os\nos.write(1, f\"hello from {os.environ['RANK']}\\n\".encode())\n")
    template = "${rank}|"
    flag, env = ([TEMPLATE, template], {}) if how == "flag" else ([], {"PET_LOG_LINE_PREFIX_TEMPLATE": template})
    ours = _run([sys.executable, "-m", "elastic_idl.cli", "torchrun", *flag], script, tmp_path, env)
    theirs = _run([sys.executable, "-m", "torch.distributed.run", *flag], script, tmp_path, env)
    if TEMPLATE not in surface.options:
        if how == "flag":
            assert ours.returncode == 2 and theirs.returncode == 2
            assert f"{TEMPLATE} is not a flag of torch {surface.torch_version}'s torchrun" in ours.stderr
        else:  # the variable means nothing to this torch: both print torch's default prefix
            assert ours.returncode == 0 == theirs.returncode, ours.stderr[-2000:]
            assert sorted(ours.stdout.splitlines()) == sorted(theirs.stdout.splitlines())
            assert "[default0]:hello from 0" in ours.stdout
        return
    assert ours.returncode == 0 == theirs.returncode, ours.stderr[-2000:]
    assert (
        sorted(ours.stdout.splitlines()) == sorted(theirs.stdout.splitlines()) == ["0|hello from 0", "1|hello from 1"]
    )
