"""Shared fixtures: repository paths, the pinned buf binary, and a Hypothesis
strategy that builds any generated ``_pb2`` message from its descriptor."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from hypothesis import settings
from hypothesis import strategies as st

# Under CI=true a skip fails unless it is a hardware skip (tests/skip_policy.py).
from skip_policy import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401

REPO_ROOT = Path(__file__).resolve().parent.parent

# A 2-core machine shared with builds: wall-clock deadlines only make tests flaky.
# On top of the profile Hypothesis picked (its own "ci" one when CI is set).
settings.register_profile(
    "elastic-idl", parent=settings.get_profile(settings.get_current_profile_name()), deadline=None
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "elastic-idl"))

#: ElasticConfig fields numbered from here on are elastic-idl extensions (see elastic.proto).
EXTENSION_MIN = 100

INT32 = st.integers(-(2**31), 2**31 - 1)
# google.protobuf.Duration / Timestamp: only values their JSON mapping accepts.
MAX_DURATION_S = 315_576_000_000
MIN_TIMESTAMP_S, MAX_TIMESTAMP_S = -62_135_596_800, 253_402_300_799


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The documentation site, built once per run with ``mkdocs build --strict`` (tests/docs_site.py)."""
    from docs_site import build_site

    return build_site(tmp_path_factory.mktemp("site"))


@pytest.fixture(scope="session")
def buf_bin() -> str:
    """The pinned buf from .venv-gen (requirements/gen.txt), else one on PATH (a skip without: a failure under CI)."""
    pinned = REPO_ROOT / ".venv-gen" / "bin" / "buf"
    found = str(pinned) if pinned.exists() else shutil.which("buf")
    if found is None:
        pytest.skip("buf is not installed (make venv-gen)")
    return found


def _is_repeated(f: FieldDescriptor) -> bool:
    rep = getattr(f, "is_repeated", None)  # protobuf >= 6.31; .label is deprecated there
    return bool(rep) if rep is not None else f.label == FieldDescriptor.LABEL_REPEATED


def _scalar(f: FieldDescriptor) -> st.SearchStrategy[Any]:
    if f.enum_type is not None:
        return st.sampled_from([v.number for v in f.enum_type.values])
    if f.type == FieldDescriptor.TYPE_STRING:
        return st.text(max_size=6)
    if f.type == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if f.type == FieldDescriptor.TYPE_INT32:
        return INT32
    raise NotImplementedError(f"no strategy for {f.full_name} (type {f.type})")


def _time(draw: st.DrawFn, msg: Message, name: str, bp_safe: bool) -> None:
    if name == "google.protobuf.Duration":
        if bp_safe:
            # betterproto holds a Duration as a timedelta: exact only for a positive
            # whole number of microseconds of moderate size (test_bindings pins the rest).
            seconds = draw(st.integers(0, 10**6))
            nanos = draw(st.integers(0 if seconds else 1, 999_999)) * 1000
        else:
            seconds = draw(st.integers(-MAX_DURATION_S, MAX_DURATION_S))
            nanos = draw(st.integers(0, 999_999_999)) * (-1 if seconds < 0 else 1)
    else:  # google.protobuf.Timestamp
        lo = 1 if bp_safe else MIN_TIMESTAMP_S  # betterproto drops the epoch itself
        seconds = draw(st.integers(lo, MAX_TIMESTAMP_S))
        nanos = draw(st.integers(0, 999_999)) * 1000 if bp_safe else draw(st.integers(0, 999_999_999))
    msg.seconds, msg.nanos = seconds, nanos  # type: ignore[attr-defined]


def _fill(draw: st.DrawFn, msg: Message, upstream_only: bool, bp_safe: bool) -> None:
    desc = msg.DESCRIPTOR
    if desc.full_name in ("google.protobuf.Duration", "google.protobuf.Timestamp"):
        _time(draw, msg, desc.full_name, bp_safe)
        return
    chosen_oneofs = {o.name: draw(st.sampled_from([None, *(f.name for f in o.fields)])) for o in desc.oneofs}
    for f in desc.fields:
        if upstream_only and desc.name == "ElasticConfig" and f.number >= EXTENSION_MIN:
            continue
        if f.containing_oneof is not None and chosen_oneofs[f.containing_oneof.name] != f.name:
            continue
        in_oneof = f.containing_oneof is not None
        if _is_repeated(f):
            for _ in range(draw(st.integers(0, 2))):
                items = getattr(msg, f.name)
                if f.message_type is not None:
                    _fill(draw, items.add(), upstream_only, bp_safe)
                else:
                    items.append(draw(_scalar(f)))
        elif f.message_type is not None:
            how = draw(st.sampled_from(["unset", "empty", "filled"]))
            if how == "empty" and not (bp_safe and f.message_type.name in ("Duration", "Timestamp")):
                getattr(msg, f.name).SetInParent()
            elif how == "filled":
                _fill(draw, getattr(msg, f.name), upstream_only, bp_safe)
        elif in_oneof or draw(st.booleans()):
            setattr(msg, f.name, draw(_scalar(f)))


MessageStrategy = Callable[..., st.SearchStrategy[Any]]


@pytest.fixture(scope="session")
def proto_messages() -> MessageStrategy:
    """``proto_messages(cls, upstream_only=False, bp_safe=False)``: a strategy of ``cls`` messages.

    Every field is drawn from its descriptor: scalars, enums (defined values),
    repeated fields, oneofs, and sub-messages that are unset, set but empty, or
    filled. ``upstream_only`` leaves out the ElasticConfig extensions (>= 100);
    ``bp_safe`` keeps Durations and Timestamps to values betterproto holds exactly.
    """

    def build(cls: type[Message], *, upstream_only: bool = False, bp_safe: bool = False) -> st.SearchStrategy[Any]:
        @st.composite
        def one(draw: st.DrawFn) -> Message:
            msg = cls()
            _fill(draw, msg, upstream_only, bp_safe)
            return msg

        return one()

    return build


#: The test modules that import Flyte 2 (the ``flyte`` SDK), which starts an event-loop thread on
#: import (its syncify loop) and more on a run (its local controller's task runners), and keeps them
#: for the life of the process. The launcher's warm fork server, and the tests of it, need a process
#: with one thread, and collection imports every module before any test runs: so these modules run
#: in a pytest process of their own. A plain ``pytest`` leaves them out (``collect_ignore``: named on
#: the command line they run), and ``make test`` runs them after the rest (``FLYTE2_TESTS`` in the
#: Makefile, which a test holds equal to this list). In a run without them, a module that leaves such
#: a thread fails (`_stop_flytekit_loop_runners`).
FLYTE2_MODULES = ("test_cluster_flyte2.py", "test_flyte2_parity.py", "test_flyte2_pods.py", "test_flyte2_run.py")
collect_ignore = list(FLYTE2_MODULES)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Say that the Flyte 2 modules were left out when this run left them out."""
    ran = {Path(str(a)).name for a in config.args}
    if not ran & set(FLYTE2_MODULES):
        terminalreporter.write_line(
            "Flyte 2's test modules run in a pytest process of their own (tests/conftest.py, FLYTE2_MODULES): "
            "make test runs them after this; or: pytest " + " ".join(f"tests/{m}" for m in FLYTE2_MODULES)
        )


def _flyte2_threads() -> list[str]:
    import threading

    return [t.name for t in threading.enumerate() if t.name.startswith("flyte_syncify")]


@pytest.fixture(autouse=True, scope="module")
def _stop_flytekit_loop_runners(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a module that ran flytekit in this process, stop its idle loop-runner thread.

    flytekit starts a background thread (its loop runner) on its first ``run_sync`` and keeps
    it for the life of the process. Later modules check that a launch leaves this process
    with one thread, and the launcher's warm fork server needs one thread: so the thread a
    flytekit test left is stopped, the way the plugin's fast path stops it before a launch.
    """
    yield
    if "flytekit.utils.asyn" in sys.modules:
        from elastic_idl.flytekit._fastpath import stop_idle_loop_runners

        why = stop_idle_loop_runners(tempfile.gettempdir())
        assert why is None, f"flytekit's loop runner was left running: {why}"
    name = request.path.name
    together = {item.path.name for item in request.session.items} & set(FLYTE2_MODULES)
    left = _flyte2_threads()
    assert together or not left, (
        f"{name} left Flyte 2's threads running ({', '.join(left)}): run Flyte 2 in a subprocess there, "
        "or add the module to FLYTE2_MODULES in tests/conftest.py"
    )
