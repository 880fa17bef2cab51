"""cluster/faults.py's pure parts: containerd's event lines, what pods carry, the request rules.
(The faults themselves run on real Nodes: tests/test_cluster_real_faults.py.)"""

from __future__ import annotations

import base64
import calendar
import importlib.util
import json
import signal
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("faults_tool", REPO / "cluster" / "faults.py")
assert _spec and _spec.loader
faults = importlib.util.module_from_spec(_spec)
sys.modules["faults_tool"] = faults
_spec.loader.exec_module(faults)

CID = "57617fc8b9f2eb6f0d9d19937f24eb346ba2c887027839b2db37a2f1c867471b"


def test_a_task_start_line_of_ctr_events_gives_its_time_and_container() -> None:
    line = f'2026-12-05 17:16:31.416125029 +0000 UTC k8s.io /tasks/start {{"container_id":"{CID}","pid":15629}}\n'
    t, namespace, kind, body = faults.parse_event(line)
    assert (namespace, kind, body) == ("k8s.io", "start", {"container_id": CID, "pid": 15629})
    assert t == pytest.approx(calendar.timegm((2026, 12, 5, 17, 16, 31, 0, 0, 0)) + 0.416125029)


def test_a_task_exit_line_gives_the_exit_status_at_the_runtimes_exit_time() -> None:
    body = {"container_id": CID, "id": CID, "pid": 15629, "exit_status": 137,
            "exited_at": {"seconds": 1796490991, "nanos": 546304341}}  # fmt: skip
    t, _, kind, parsed = faults.parse_event(
        f"2026-12-05 17:16:31.54724718 +0000 UTC k8s.io /tasks/exit {json.dumps(body)}"
    )
    assert kind == "exit" and parsed["exit_status"] == 137
    assert t == pytest.approx(1796490991.546304341)


def test_a_task_oom_line_names_its_container() -> None:
    line = f'2026-12-05 17:16:31.5 +0000 UTC k8s.io /tasks/oom {{"container_id":"{CID}"}}'
    t, _, kind, body = faults.parse_event(line)
    assert (kind, body) == ("oom", {"container_id": CID})
    assert t == pytest.approx(calendar.timegm((2026, 12, 5, 17, 16, 31, 0, 0, 0)) + 0.5)


@pytest.mark.parametrize(
    "line",
    [
        f'2026-12-05 17:16:31.26952148 +0000 UTC k8s.io /snapshot/prepare {{"key":"{CID}"}}',
        f'2026-12-05 17:16:31.270632896 +0000 UTC k8s.io /containers/create {{"id":"{CID}"}}',
        'time="2026-12-05T17:15:38Z" level=warning msg="DEPRECATION: The support for cgroup v1 is deprecated"',
        "",
    ],
)
def test_other_lines_are_not_task_starts_or_exits(line: str) -> None:
    assert faults.parse_event(line) is None


def test_a_whole_second_has_no_fraction() -> None:
    assert faults.event_time("2026-12-05 17:16:31") == calendar.timegm((2026, 12, 5, 17, 16, 31, 0, 0, 0))


def test_the_readiness_gate_is_added_once() -> None:
    spec: dict[str, object] = {"readinessGates": [{"conditionType": "example.com/other"}]}
    faults.with_ready_gate(spec)
    faults.with_ready_gate(spec)
    assert spec["readinessGates"] == [{"conditionType": "example.com/other"}, {"conditionType": faults.READY_GATE}]


def test_the_hold_is_the_first_init_container_and_reads_its_file_from_the_cluster_folder(tmp_path: Path) -> None:
    spec: dict[str, object] = {"initContainers": [{"name": "theirs"}], "volumes": [{"name": "data"}]}
    faults.with_hold(spec, tmp_path, "localhost/elastic-idl/base:abc")
    first, theirs = spec["initContainers"]  # type: ignore[misc]
    assert theirs == {"name": "theirs"} and first["name"] == faults.HOLD_INIT
    assert first["image"] == "localhost/elastic-idl/base:abc" and first["command"][:2] == ["/bin/sh", "-c"]
    assert f"{faults.HOLD_MOUNT}/${{POD_NAMESPACE}}_${{POD_NAME}}" in first["command"][2]
    assert first["volumeMounts"] == [{"name": faults.HOLD_INIT, "mountPath": faults.HOLD_MOUNT, "readOnly": True}]
    assert spec["volumes"][-1]["hostPath"] == {"path": str(tmp_path / faults.HOLDS), "type": "DirectoryOrCreate"}  # type: ignore[index]


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ({}, "pod: a non-empty string is required, not None"),
        ({"pod": ""}, "pod: a non-empty string is required, not ''"),
        ({"pod": 3}, "pod: a non-empty string is required, not 3"),
    ],
)
def test_a_string_field_is_required_non_empty(request_: dict[str, object], message: str) -> None:
    with pytest.raises(faults.FaultError, match=f"^{message}$"):
        faults.require_str(request_, "pod")


@pytest.mark.parametrize("value", [0, 3601, True, "5", None])
def test_a_number_field_is_a_number_in_its_range(value: object) -> None:
    with pytest.raises(faults.FaultError, match=r"^seconds: a number in 0.1..3600 is required"):
        faults.require_number({"seconds": value}, "seconds", 0.1, 3600)


def test_a_signal_is_a_name_or_a_number_and_sigkill_by_default() -> None:
    assert faults.require_signal({}) is signal.SIGKILL
    assert faults.require_signal({"signal": "SIGTERM"}) is signal.SIGTERM
    assert faults.require_signal({"signal": 9}) is signal.SIGKILL
    for bad in ("SIGNOPE", 999, "kill"):
        with pytest.raises(faults.FaultError, match=r"^signal: .* is not a signal$"):
            faults.require_signal({"signal": bad})


def test_the_attempt_is_the_end_of_the_cri_name_in_containerds_metadata() -> None:
    meta = {
        "Version": "v1",
        "Metadata": {"ID": CID, "Name": "c_echo_real-faults_b81350fc-ec00-4161-8295-bd117de4dd35_3"},
    }
    value = base64.b64encode(json.dumps(meta).encode()).decode()
    info = {"Extensions": {"io.cri-containerd.container.metadata": {"type_url": "x", "value": value}}}
    assert faults.cri_attempt(info) == 3
    assert faults.cri_attempt({}) is None
    assert (
        faults.cri_attempt({"Extensions": {"io.cri-containerd.container.metadata": {"value": "bm90IGpzb24="}}}) is None
    )


def test_an_exit_0_has_no_exit_status_in_the_event() -> None:
    """protobuf's JSON leaves zero values out: a task that exited 0 has no exit_status (faults.py reads it as 0)."""
    line = f'2026-12-05 17:16:31.5 +0000 UTC k8s.io /tasks/exit {{"container_id":"{CID}","id":"{CID}","pid":1,"exited_at":{{"seconds":5}}}}'
    t, _, kind, body = faults.parse_event(line)
    assert (t, kind, "exit_status" in body) == (5.0, "exit", False)
