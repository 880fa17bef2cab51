"""The Worker pods of a rendered PyTorchJob played as processes on one machine, for the SDK pod tests.

tests/test_flytekit_pods.py (flytekit's ``pyflyte-execute``) and tests/test_flyte2_pods.py (Flyte
2's ``a0``) run each Worker pod as a process with exactly the container args the SDK wrote and the
env the operator gives it (`pod_env`); each test adds only its SDK's part (the templates in the
args, the inputs file, what its backend sets in a pod, how it reads the outcome). What a cluster
gives that one machine does not: ``<job>-worker-0`` does not resolve, so every pod gets
``ELASTIC_IDL_RDZV_ENDPOINT_OVERRIDE=127.0.0.1:<port>``, and ``is_host`` (worker-0 only, which a
cluster decides by IP) in ``PET_RDZV_CONF``. Each pod runs in a session of its own, so that a test
can check that nothing it started is left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from elastic_idl import pod_env
from elastic_idl.pod import RDZV_ENDPOINT_OVERRIDE_ENV
from launcher_nodes import free_port, session_pids

POD_TIMEOUT_S = 120


@contextlib.contextmanager
def module_on_disk(root: Path, name: str, source: str) -> Iterator[Path]:
    """The user's module ``name`` written under ``root``, importable in this process while inside."""
    (root / f"{name}.py").write_text(source)
    sys.path.insert(0, str(root))
    try:
        yield root
    finally:
        sys.path.remove(str(root))
        sys.modules.pop(name, None)


def files(path: Path) -> list[str]:
    """The names of the files under ``path`` (none when it does not exist)."""
    return sorted(p.name for p in path.rglob("*") if p.is_file()) if path.exists() else []


class Pods:
    """The simulated operator: starts the job's Worker pods, notes when each ends, cleans them up.

    Every pod gets the folder `pod_dir` as its working directory and log; `output` is the output
    prefix every pod of the job shares, as in Flyte.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.procs: list[subprocess.Popen[bytes]] = []
        self.ended: dict[int, float] = {}  # pod index -> when it exited (time.time())
        self.port = free_port()

    def pod_dir(self, i: int) -> Path:
        return self.root / f"worker-{i}"

    @property
    def output(self) -> Path:
        """The output prefix every pod of the job writes to, as in Flyte."""
        return self.root / "outputs"

    def log(self, i: int) -> str:
        return (self.pod_dir(i) / "pod.log").read_text(errors="replace")

    def logs(self) -> str:
        return "\n".join(f"--- worker-{i}\n{self.log(i)[-3000:]}" for i in range(len(self.procs)))

    def env(
        self, job: Mapping[str, Any], container: Mapping[str, Any], i: int, pythonpath: list[str]
    ) -> dict[str, str]:
        """Worker ``i``'s env: this process's (no PET_*, ELASTIC_IDL_*, PYTHONPATH), the container's,
        the operator's (`pod_env`) with ``is_host`` and the endpoint override; this venv first on PATH."""
        penv = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "ELASTIC_IDL_", "PYTHONPATH"))}
        # env with valueFrom (the Worker's _F_WN, the pod's name) is the kubelet's: the caller sets it
        penv |= {e["name"]: e["value"] for e in container.get("env", []) if "valueFrom" not in e}
        penv |= pod_env(job, "Worker", i)
        penv["PET_RDZV_CONF"] = ",".join([*filter(None, [penv.get("PET_RDZV_CONF")]), f"is_host={int(i == 0)}"])
        penv |= {
            RDZV_ENDPOINT_OVERRIDE_ENV: f"127.0.0.1:{self.port}",
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), penv.get("PATH", "")]),
            "PYTHONPATH": os.pathsep.join(pythonpath),
        }
        return penv

    def spawn(self, i: int, argv: list[str], env: Mapping[str, str]) -> None:
        """Start worker ``i``: ``argv`` in its own session, in `pod_dir`, its output in its log."""
        d = self.pod_dir(i)
        d.mkdir(parents=True, exist_ok=True)
        with open(d / "pod.log", "wb") as log:
            self.procs.append(
                subprocess.Popen(
                    argv, env=dict(env), cwd=d, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                )
            )

    def wait(self, seconds: float = POD_TIMEOUT_S) -> list[int]:
        """Every pod's exit code, noting when each ended."""
        deadline = time.monotonic() + seconds
        while len(self.ended) < len(self.procs):
            for i, p in enumerate(self.procs):
                if i not in self.ended and p.poll() is not None:
                    self.ended[i] = time.time()
            if time.monotonic() > deadline:
                pytest.fail(f"pods did not finish within {seconds} s\n{self.logs()}")
            time.sleep(0.05)
        return [int(p.returncode) for p in self.procs]

    def cleanup(self) -> None:
        for p in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()

    def left(self, grace_s: float = 10) -> dict[int, list[int]]:
        """Processes of the pods' sessions still alive after ``grace_s`` (launcher, fork server,
        workers; CPython's resource tracker exits when it reads the end of its pipe): {} when none."""
        deadline = time.monotonic() + grace_s
        while any(session_pids(p.pid) for p in self.procs) and time.monotonic() < deadline:
            time.sleep(0.1)
        return {p.pid: session_pids(p.pid) for p in self.procs if session_pids(p.pid)}
