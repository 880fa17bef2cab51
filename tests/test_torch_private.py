"""The private torch names the launcher uses (elastic_idl._torch_private): all present in the installed torch,
and the check fails, naming the torch version and the name, on a torch where one moved."""

from __future__ import annotations

import importlib
import re
import signal
import sys
import types
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from elastic_idl import _torch_private as private  # noqa: E402
from elastic_idl._errors import TorchPrivateAPIError  # noqa: E402

SRC = Path(__file__).resolve().parent.parent / "src" / "elastic_idl"


def test_every_listed_name_exists_in_the_installed_torch() -> None:
    assert [str(entry) for entry in private.missing()] == []
    private.check()


def _without(module_name: str, attribute: str) -> types.ModuleType:
    """A copy of a torch module lacking one attribute (a torch release that renamed it)."""
    real = importlib.import_module(module_name)
    fake = types.ModuleType(module_name)
    fake.__dict__.update({k: v for k, v in vars(real).items() if k != attribute})
    return fake


def test_a_module_name_torch_dropped_is_reported_with_the_torch_version(monkeypatch: pytest.MonkeyPatch) -> None:
    entry = private.TERMINAL_STATE_SYNC_ID
    monkeypatch.setitem(sys.modules, entry.owner, _without(entry.owner, entry.name))
    assert private.missing() == [entry]
    with pytest.raises(TorchPrivateAPIError) as err:
        private.check()
    assert err.value.torch_version == torch.__version__
    assert err.value.missing == (f"{entry.owner}._TERMINAL_STATE_SYNC_ID",)
    assert f"torch {torch.__version__} lacks" in str(err.value)
    with pytest.raises(TorchPrivateAPIError, match="_TERMINAL_STATE_SYNC_ID"):
        private.get(entry)


def test_a_method_torch_dropped_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend

    monkeypatch.delattr(C10dRendezvousBackend, "_call_store")
    assert [e.name for e in private.missing()] == ["_call_store"]


def test_an_instance_attribute_torch_no_longer_sets_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    # A class whose source no longer assigns the attribute: a stand-in for the next torch's agent.
    module = types.ModuleType("torch_next_agent")
    exec("class LocalElasticAgent:\n    def __init__(self):\n        self._pcontext_v2 = None\n", module.__dict__)
    module.LocalElasticAgent.__module__ = "torch.next"
    monkeypatch.setattr(private.inspect, "getsource", lambda cls: "self._pcontext_v2 = None")
    monkeypatch.setitem(sys.modules, "torch_next_agent", module)
    entry = private.PrivateName("torch_next_agent:LocalElasticAgent", "_pcontext", "attribute", "test")
    assert private.missing((entry,)) == [entry]
    renamed = private.PrivateName("torch_next_agent:LocalElasticAgent", "_pcontext_v2", "attribute", "test")
    assert private.missing((renamed,)) == []


def test_a_comparison_is_not_an_assignment(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("torch_cmp")
    exec("class A:\n    pass\n", module.__dict__)
    module.A.__module__ = "torch.cmp"
    monkeypatch.setitem(sys.modules, "torch_cmp", module)
    monkeypatch.setattr(private.inspect, "getsource", lambda cls: "if self._pc == 1: pass")
    assert private.missing((private.PrivateName("torch_cmp:A", "_pc", "attribute", "test"),)) != []


def test_no_torch_private_name_is_imported_outside_the_list() -> None:
    # The agent imports no underscored torch name directly: those go through _torch_private.get.
    source = (SRC / "_launch" / "agent.py").read_text()
    imported = re.findall(r"from torch[\w.]* import \(?([^)]*?)\)?\n", source)
    names = [n.strip() for group in imported for n in group.split(",") if n.strip()]
    assert [n for n in names if n.startswith("_")] == []
    assert "rdzv_timeout" not in source
    assert "torch._utils" not in source


def test_the_signal_handler_raises_torchs_public_signal_exception() -> None:
    from torch.distributed.elastic.multiprocessing import SignalException

    from elastic_idl._launch import agent

    with pytest.raises(SignalException) as err:
        agent._raise_signal_exception(int(signal.SIGTERM), None)
    assert err.value.sigval == signal.SIGTERM


def test_the_documented_list_is_the_modules_list() -> None:
    doc = (SRC.parent.parent / "docs" / "guide" / "development.md").read_text()
    shown = [f"`{e.owner.split(':')[-1].rpartition('.')[2]}.{e.name}`" for e in private.PRIVATE]
    assert [name for name in shown if name not in doc] == []


def test_one_node_jobs_skip_only_the_start_jitter(monkeypatch: pytest.MonkeyPatch) -> None:
    # torch 2.15's compare-and-set backoff goes through the same _delay with its own range: it is kept.
    from torch.distributed.elastic.rendezvous import dynamic_rendezvous

    from elastic_idl._launch import agent

    calls: list[object] = []
    monkeypatch.setattr(dynamic_rendezvous, "_delay", lambda seconds: calls.append(seconds))
    with agent._no_start_jitter(True):
        # The jitter first (torch makes it once, before the first round), then a backoff whose bound is
        # 0.3 s too (cas_backoff_max_seconds=0.3): only the first is skipped.
        for seconds in ((0, 0.3), (0, 2.5), 1, (0, 0.3)):
            dynamic_rendezvous._delay(seconds=seconds)
    assert calls == [(0, 2.5), 1, (0, 0.3)]
    dynamic_rendezvous._delay(seconds=(0, 0.3))  # restored after the launch
    assert calls == [(0, 2.5), 1, (0, 0.3), (0, 0.3)]


def test_the_worker_bootstrap_replaces_the_listed_default_timeout_function() -> None:
    from elastic_idl._launch import collective

    assert (collective.C10D_MODULE, collective._DEFAULT_TIMEOUT_FN) == (
        private.DEFAULT_TIMEOUT.owner,
        private.DEFAULT_TIMEOUT.name,
    )
