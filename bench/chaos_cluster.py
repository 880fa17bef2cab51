"""Chaos on the one-machine cluster: 21 fault classes against a rendered elastic job, in real pods.

Each run renders a PyTorchJob (2 Worker pods, 1 worker process each, the renderer's default restart
policy ``ExitCode``) for the training of ``chaos_train.py``, applies it to the cluster of
``cluster/`` (docs/guide/cluster.md) in a namespace of its own, injects one fault class
at a moment drawn from the seed, and checks the outcome. The real training operator, scheduler,
endpoint and node lifecycle controllers, taint eviction, pod garbage collector and CoreDNS decide
what follows a fault, on real Nodes (a kubelet, containerd and runc each); cluster/faults.py only
injects it, with the kernel's mechanisms, and this harness
only does what a cluster's operator (a person) would: delete a pod, cordon Nodes, taint a lost Node
``node.kubernetes.io/out-of-service``. Every figure it reports comes from these runs.

Pass conditions (issue 21), each run:

- the job's outcome is the class's (Succeeded; classes 7, 14, 15 and 17: Failed), within the
  5-minute cap (class 21: 10 minutes; a capped run is a hang);
- the committed state (the last commit) equals the fault-free run's for the seed;
- every step is committed exactly once and in order: the commits form one chain (each names its
  parent and the steps since it), each carries its world size, the mask of the ranks whose shares
  every step of it summed (all of the world's) and the ids of the worker processes that made it;
  two worlds committing a step, a step committed twice, or a commit on top of anything but the
  last one breaks the chain; every commit's world is within nnodes (not below min_replicas);
- one world trains at a time: every step event belongs to the attempt that started last before
  it (each event names its attempt), in that attempt's world, one step after the other from its
  resume step (a second world that trains without ever committing shows here);
- the job's terminal condition comes after the last commit (the first pod to exit 0, which is
  what makes an elastic job Succeeded, exited after it; the condition's time is not before it);
- every resume starts from the last commit; the progress lost (steps done past the last commit
  before the fault) is counted and less than the checkpoint interval (a commit is written before
  its step's event: losing a whole interval means a commit is missing);
- class 7 fails only after exactly the allowed restarts (max_restarts + 1 worker failures);
- one FailureReport per pod incarnation of our entrypoint that ended by itself (none for one that
  succeeded, at most one for one the cluster killed);
- the task's output (rank 0's pod's result file) is present, holds the final state and was
  written before the job could turn Succeeded (before the first pod exited 0), or absent when
  the job must fail (stock torchrun writes none: not checked);
- class 12: the victim's Node is cordoned and the survivor's is not (the replacement cannot join
  the survivor's Node: the job's pods have a pod anti-affinity on the hostname);
- class 14: the pod the seed picks fails for good (even seeds worker-0, the rendezvous store
  host) and exits by itself below 128 (not retried); with ours its FailureReport's root cause is
  its own error;
- class 15 (issue 30 item 6): the task states backoff_limit 2, so its Worker is rendered
  OnFailure; worker-1's container is SIGKILLed at every start and the job fails by its backoff
  limit with worker-1 started at most backoff_limit + 1 times (under ExitCode nothing counts the
  re-creations);
- classes 16 to 21 (issue 35): the kernel OOM-killed in worker-1's container (containerd's
  /tasks/oom event); with ours a FailureReport names the full volume (No space left on device);
  the API server or the operator answered again after its restart; no replacement of worker-1
  started while the operator was down; the API server refused a PyTorchJob for want of the
  webhook while it was down; the lost Node's pods were evicted (Terminating) before the late taint;
- a job that must fail has every pod stopped within STOP_BOUND_S of its failure; a job that
  succeeded, within SETTLE_S.

Several runs go at once, each in its own namespace on Nodes of its own (a lane of
NODES_PER_LANE Nodes, labelled LANE_LABEL; the job's pods get that node selector), so that a lost
or cordoned Node touches one run only. The classes whose fault is the whole cluster's (18, 19
and 20: the API server, the operator, its webhook) run one at a time, after the others.

Records: every run appends one to the results file, never in the place of an earlier run of the
same seed (a rerun counts beside it); each names the commit it ran (`source_state`: a run that
records refuses a tree that differs from a commit of main's history); a run that did not pass
keeps its folder as ``bench/results/chaos-logs/<class>-<name>-<side>-<seed>-<date>.tar.xz``,
which ``--rejudge`` judges again once unpacked.

Usage::

    .venv/bin/python bench/chaos_cluster.py                      # the matrix (make chaos; starts its cluster)
    .venv/bin/python bench/chaos_cluster.py --classes 2,8 --runs 3 --torchrun-runs 1
    .venv/bin/python bench/chaos_cluster.py --one 8 --seed 7     # rerun one run (its seed reproduces it)
    .venv/bin/python bench/chaos_cluster.py --summary            # the table from the results file
    .venv/bin/python bench/chaos_cluster.py --rejudge FOLDER     # judge a kept run again
    CLUSTER_DIR=... bench/chaos_cluster.py --reuse ...           # on a cluster that is up (enough Nodes)

Start it under ``flock /var/lock/elastic-idl-cluster.lock``: one cluster per machine.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import http.client
import importlib.util
import json
import os
import queue
import random
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tarfile
import threading
import time
import traceback
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import chaos_train  # bench/ is on sys.path when this runs as a script; tests add it
import elastic_idl as ei

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
#: The interpreter's prefix, which real Nodes' pods mount at its host path.
PY_PREFIX = Path(os.path.realpath(sys.executable)).parent.parent
TRAIN_SCRIPT = BENCH / "chaos_train.py"

_spec = importlib.util.spec_from_file_location("cluster_tool", REPO / "cluster" / "cluster.py")
assert _spec and _spec.loader
ct = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("cluster_tool", ct)
_spec.loader.exec_module(ct)

JOB = "chaos"
STEPS = 100
BATCH = 64
CHECKPOINT_EVERY = 5
STEP_TIME_S = 0.05
MAX_RESTARTS = 3
#: flytekit's default rendezvous timeouts (what an Elastic task without rdzv_configs gets).
RDZV = {"timeout": 900, "join_timeout": 900}
#: A run longer than this is a hang.
CAP_S = 300.0
#: Pods still running this long after the job succeeded are left behind.
SETTLE_S = 60.0
#: A job that must fail: every pod stopped within this long of its Failed condition (class 14's
#: bound: the survivors of a peer that failed for good must not wait out the 30-minute timeout).
STOP_BOUND_S = 90.0
#: Class 13: the recreated pod's container starts within this long of the dead one's exit.
RECREATE_S = 5.0
NODES_PER_LANE = 3
LANE_LABEL = "chaos.elastic-idl.dev/lane"
#: The label the training operator puts on every pod of a job (its value: the job's name).
JOB_LABEL = "training.kubeflow.org/job-name"
HOSTNAME_LABEL = "kubernetes.io/hostname"
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
RESULTS = BENCH / "results" / "chaos-cluster.json"
SUMMARY = BENCH / "results" / "chaos-cluster.md"
#: The run's own outputs (the repository-relative folder the clean-tree rule leaves out).
RESULTS_DIR = "bench/results"
MAIN = "refs/heads/main"
SIDES = ("ours", "torchrun")
#: How often a run asks the API server for its job and pods (its files: every 0.25 s).
API_POLL_S = 0.75


#: Class 16: the Worker container's memory limit (the worker process allocates past it).
OOM_LIMIT = "1536Mi"
#: Class 17: the size of each pod's checkpoint volume (an emptyDir of medium Memory: the kubelet
#: mounts a tmpfs of that size), and where the Worker container mounts it.
DISK_FULL_SIZE = "256Ki"
SAVE_DIR = "/ckpt"
#: Classes 18 and 19: how long the API server and the operator stay down.
APISERVER_DOWN_S = 10.0
OPERATOR_DOWN_S = 20.0
#: Class 20: the operator's validating webhook for PyTorchJobs, its configuration, and the port of
#: its Service it is pointed at while down (one the Service does not have).
WEBHOOK = "validator.pytorchjob.training-operator.kubeflow.org"
WEBHOOK_CONFIG = "validator.training-operator.kubeflow.org"
WEBHOOK_DEAD_PORT = 444
#: Class 21: how long a lost Node goes without the out-of-service taint.
UNTAINTED_S = 300.0


@dataclass(frozen=True)
class FaultClass:
    number: int
    name: str
    title: str
    expect: str = "Succeeded"
    nnodes: str = "2"
    world: int = 2
    steps: int = STEPS
    rdzv: tuple[tuple[str, int], ...] = ()
    backoff_limit: int | None = None
    fault_steps: tuple[int, int] = (8, STEPS - 30)  # the (first) fault comes after a step drawn from here
    #: The job's pods on Nodes of their own (a required pod anti-affinity on the hostname), as
    #: GPU pods that fill a Node are: a replacement cannot join its survivor's Node.
    one_per_node: bool = False
    #: The fault is the whole cluster's (the API server, the operator): no other run at the same time.
    exclusive: bool = False
    #: How long a run may take before it is a hang.
    cap_s: float = CAP_S

    @property
    def min_world(self) -> int:
        """The smallest world torch may form: min_replicas (nnodes' lower bound) x 1 process per pod."""
        return int(self.nnodes.split(":")[0])


CLASSES: dict[int, FaultClass] = {
    c.number: c
    for c in (
        FaultClass(0, "none", "no fault (the reference run)"),
        FaultClass(1, "kill-nonhost", "SIGKILL of worker-1's container"),
        FaultClass(2, "kill-host", "SIGKILL of worker-0's container (the rendezvous store host)"),
        FaultClass(3, "kill-process", "SIGKILL of one worker process (its pod's launcher lives)"),
        FaultClass(4, "double", "two container SIGKILLs, the second during the recovery from the first"),
        FaultClass(
            5,
            "late-join",
            "worker-1 starts late (its containers held, as behind a slow image pull), nnodes 1:2",
            nnodes="1:2",
            steps=3 * STEPS,
            rdzv=(("last_call_timeout", 5),),
            fault_steps=(2, 10),
        ),
        FaultClass(6, "drain", "graceful deletion of a pod (drain, spot reclaim)"),
        FaultClass(
            7,
            "exceed",
            "worker-1's worker process killed at every resume, past max_restarts: must fail",
            expect="Failed",
            rdzv=(("join_timeout", 60),),
        ),
        FaultClass(8, "partition", "one pod's network drops every packet for 20 s, then heals"),
        FaultClass(9, "node-lost", "a Node lost (no Lease, processes stopped, packets dropped)"),
        FaultClass(10, "degraded", "5% packet loss and 50 ms added latency on every pod, the whole run"),
        FaultClass(11, "dns-gap", "worker-0 recreated while its Service has no ready address for 10 s"),
        FaultClass(
            12,
            "unschedulable",
            "a replacement pod unschedulable (its Nodes cordoned) for longer than join_timeout",
            rdzv=(("join_timeout", 60),),
            one_per_node=True,
        ),
        FaultClass(13, "fast-recreate", "worker-1 force-deleted: recreated within 5 s into the running round"),
        FaultClass(
            14,
            "fail-for-good",
            "a pod fails for good (non-retryable) while the other is in init_process_group or a collective",
            expect="Failed",
        ),
        FaultClass(
            15,
            "crash-at-start",
            "worker-1's container SIGKILLed at every start, the task states backoff_limit 2: must fail",
            expect="Failed",
            backoff_limit=2,
        ),
        FaultClass(
            16,
            "oom",
            f"worker-1's worker process allocates past its container's memory limit ({OOM_LIMIT}): the kernel "
            "OOM-kills it",
        ),
        FaultClass(
            17,
            "disk-full",
            f"each pod's checkpoint volume (a {DISK_FULL_SIZE} memory-backed emptyDir) fills up: every save fails "
            "with ENOSPC; must fail, naming it",
            expect="Failed",
        ),
        FaultClass(
            18,
            "apiserver-restart",
            f"the API server stopped (SIGTERM) mid-job and started again {APISERVER_DOWN_S:g} s later",
            exclusive=True,
        ),
        FaultClass(
            19,
            "operator-restart",
            f"the training operator crashes (SIGKILL) mid-job; worker-1's container is SIGKILLed while it is down; "
            f"it starts again {OPERATOR_DOWN_S:g} s later",
            exclusive=True,
        ),
        FaultClass(
            20,
            "webhook-down",
            "the operator's webhook unreachable while worker-1 is killed and recreated",
            exclusive=True,
        ),
        FaultClass(
            21,
            "node-lost-untainted",
            f"a Node lost, and nobody applies the out-of-service taint for {UNTAINTED_S / 60:g} minutes",
            cap_s=UNTAINTED_S + CAP_S,
        ),
    )
}
BY_NAME = {c.name: c for c in CLASSES.values()}
PARTITION_S = 20.0
DNS_GAP_S = 10.0
DEGRADE = {"loss": 0.05, "delay_ms": 50}


@dataclass(frozen=True)
class Defaults:
    """A configuration users get when they state nothing but the node count (issue 30 item 8): who
    launches the workers in the pod, the restarts torch allows, and the Worker's restartPolicy.
    The defaults table runs every fault class under each and records what a user gets (recovered,
    failed and how fast, hung) instead of a pass against the matrix's expectation."""

    name: str
    label: str  # its column in the defaults table
    title: str
    side: str  # the pod command: "ours" (our pod entrypoint) or "torchrun" (torch's own agent)
    max_restarts: int
    monitor_interval: float | None  # None: the launcher's default
    restart_policy: str  # the Worker's restartPolicy (JobOptions.elastic_worker_restart_policy)


DEFAULTS: dict[str, Defaults] = {
    d.name: d
    for d in (
        Defaults(
            "flytekit",
            "flytekit defaults",
            "flytekit 1.x `Elastic(nnodes=2)` on upstream propeller: torch's agent, max_restarts 0, "
            "monitor_interval 5, Worker `Never`",
            "torchrun",
            0,
            5.0,
            "Never",
        ),
        Defaults(
            "flyte2",
            "Flyte 2 defaults",
            "Flyte 2 `flyteplugins.pytorch.Elastic(nnodes=2)`: torch's agent, max_restarts 3, "
            "monitor_interval 3, Worker `Never`",
            "torchrun",
            3,
            3.0,
            "Never",
        ),
        Defaults(
            "ours",
            "elastic-idl defaults",
            "elastic-idl `Elastic(nnodes=2)` with our renderer: our pod entrypoint, max_restarts 0, Worker `ExitCode`",
            "ours",
            0,
            None,
            "ExitCode",
        ),
    )
}
DEFAULTS_RESULTS = BENCH / "results" / "chaos-defaults.json"
DEFAULTS_RUNS = 5


def find_defaults(text: str) -> list[Defaults]:
    names = [n for n in text.split(",") if n]
    unknown = [n for n in names if n not in DEFAULTS]
    if unknown or not names:
        raise SystemExit(f"unknown defaults {', '.join(unknown) or repr(text)}: some of {', '.join(DEFAULTS)}")
    return [DEFAULTS[n] for n in names]


def find_class(text: str) -> FaultClass:
    if text.isdigit() and int(text) in CLASSES:
        return CLASSES[int(text)]
    if text in BY_NAME:
        return BY_NAME[text]
    raise SystemExit(f"unknown fault class {text!r}: one of {', '.join(f'{n} {c.name}' for n, c in CLASSES.items())}")


def fail_for_good_plan(seed: int) -> tuple[int, bool]:
    """Class 14's fault for a seed: which pod fails for good (even seeds worker-0, the rendezvous
    store host; odd seeds worker-1) and whether also before init_process_group at every restart
    (seeds 2, 3 mod 4), so that any 4 consecutive seeds run every combination."""
    return seed % 2, seed // 2 % 2 == 1


def rendered_policy() -> str:
    """The restartPolicy the renderer writes for an elastic Worker whose task leaves it unset."""
    custom, _, version = ei.Elastic(nnodes=2).to_template()
    job = ei.render_pytorchjob(custom, ei.JobOptions(name=JOB, image="x", entrypoint=["x"]), task_type_version=version)
    return str(job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"])


# ---------------------------------------------------------------- the API server


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


class Kube:
    """A client of the cluster's API server with the admin's certificate (a kept-alive connection per thread)."""

    def __init__(self, folder: Path) -> None:
        self.dir = folder
        state = json.loads((folder / "cluster.json").read_text())
        # Where `up` put the API server (the bridge's address with real Nodes, else 127.0.0.1).
        api = urllib.parse.urlsplit(state.get("api") or f"https://127.0.0.1:{state['ports']['apiserver']}")
        self.host, self.port = str(api.hostname), int(api.port or 443)
        self.nodes: list[str] = list(state.get("nodes", ct.NODES))
        self.images: dict[str, str] = dict(state.get("images", {}))
        pki = folder / "pki"
        self.ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        self.ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        self.local = threading.local()
        self.conns: list[http.client.HTTPSConnection] = []
        self.conns_lock = threading.Lock()

    def close(self) -> None:
        """Close every kept-alive connection (of every thread)."""
        with self.conns_lock:
            for conn in self.conns:
                conn.close()
            self.conns = []

    def patch_node(self, node: str, patch: dict[str, Any]) -> Any:
        """A JSON merge patch of a Node (cordon, taints, labels)."""
        return self.call("PATCH", f"/api/v1/nodes/{node}", patch, "application/merge-patch+json")

    def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        for attempt in (0, 1):  # a kept-alive connection the server closed meanwhile: once more, anew
            conn = getattr(self.local, "conn", None)
            if conn is None:
                conn = self.local.conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=30)
                with self.conns_lock:
                    self.conns.append(conn)
            try:
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
                break
            except (OSError, http.client.HTTPException):
                conn.close()
                self.local.conn = None
                if attempt:
                    raise
        out = json.loads(raw) if raw else {}
        if resp.status >= 300:
            raise ApiError(resp.status, str(out.get("message", raw[:300])))
        return out

    def faults(self, **request: Any) -> dict[str, Any]:
        return dict(ct.fault_request(self.dir, request))


# ---------------------------------------------------------------- one run


#: How the notes the verdict writes itself begin (the other notes are the scenario's problems).
VERDICT_NOTES = ("training took ", "recreated ", "worker-1 started ", "worker-1's container ")


class RunEnded(Exception):
    """The run is over (verdict or cap): the scenario stops injecting."""


@dataclass
class Result:
    number: int
    name: str
    side: str
    seed: int
    passed: bool = False
    reason: str = ""
    outcome: str | None = None
    fault_to_resumed_s: float | None = None
    wall_s: float = 0.0
    lost_steps: int = 0
    faults: list[tuple[float, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    lane: int = 0
    date: str = ""
    folder: str = ""
    #: What the verdict reads besides the logs (so that a kept record can be judged again):
    #: when the job was applied (the faults' times count from it), whether the run hit the cap,
    #: the Node it lost (class 9), and the scenario's own facts (class 12: victim, cordoned
    #: Nodes and when; class 14: victim and variant).
    t0: float = 0.0
    capped: bool = False
    lost_node: str | None = None
    scenario: dict[str, Any] = field(default_factory=dict)
    #: The defaults run with (`DEFAULTS`), "" for the matrix's settings; with defaults, the time
    #: from the (first) fault to the job's Failed condition when it failed.
    defaults: str = ""
    fault_to_failed_s: float | None = None

    def rerun(self) -> str:
        base = f".venv/bin/python bench/chaos_cluster.py --one {self.number} --seed {self.seed}"
        if self.defaults:
            return f"{base} --defaults {self.defaults} --results {RESULTS_DIR}/{DEFAULTS_RESULTS.name}"
        return f"{base} --side {self.side}"


def _tail(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The whole JSON lines appended to `path` since `offset`; the new offset."""
    if not path.exists():
        return [], offset
    with path.open("rb") as fh:
        fh.seek(offset)
        data = fh.read()
    end = data.rfind(b"\n") + 1
    out = []
    for line in data[:end].split(b"\n"):
        if line.strip():
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
    return out, offset + end


def _rfc3339(text: str) -> float:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc).timestamp()


class Run:
    """One job of one fault class on one lane: apply, inject, watch, judge."""

    def __init__(
        self, kube: Kube | None, cls: FaultClass, side: str, seed: int, lane: int, root: Path,
        defaults: Defaults | None = None,
    ) -> None:  # fmt: skip
        if defaults is not None:
            side = defaults.side
        self._kube, self.cls, self.side, self.seed, self.lane = kube, cls, side, seed, lane
        self.defaults = defaults
        self.rng = random.Random(f"{cls.number}:{side}:{seed}")
        self.ns = f"chaos-{cls.number:02d}-{defaults.name if defaults else side}-{seed}"
        self.dir = root / self.ns
        self.shared = self.dir / "shared"
        self.result = Result(
            cls.number,
            cls.name,
            side,
            seed,
            lane=lane,
            folder=str(self.dir),
            defaults=defaults.name if defaults else "",
        )
        self.lock = threading.Lock()
        self.events: list[dict[str, Any]] = []
        self.lifecycle: list[dict[str, Any]] = []
        self.faultlog: list[dict[str, Any]] = []
        self.pods: dict[str, dict[str, Any]] = {}
        self.job: dict[str, Any] = {}
        self.ended = threading.Event()
        self.t0 = 0.0
        self.lost_node: str | None = None
        self.cordoned: list[str] = []
        self.dns_seen: list[tuple[float, list[str]]] = []
        self.webhook_down = False  # class 20
        self.webhook_port = 443
        self._offsets = {"events": 0, "lifecycle": 0, "faults": 0}
        self._api_polled = 0.0
        self.lane_nodes = [n for i, n in enumerate(kube.nodes if kube else []) if i // NODES_PER_LANE == lane]

    @property
    def expect(self) -> str | None:
        """The outcome the run must have: the class's, or None with defaults (what it gets is the figure)."""
        return None if self.defaults is not None else self.cls.expect

    @property
    def cut_short(self) -> bool:
        """With defaults, a job that Failed may end before the scenario's later moments (a second
        fault, a replacement Pending, an eviction): what the scenario did not reach is no defect."""
        return self.defaults is not None and self.result.outcome == "Failed"

    @property
    def max_restarts(self) -> int:
        return self.defaults.max_restarts if self.defaults is not None else MAX_RESTARTS

    @property
    def kube(self) -> Kube:
        if self._kube is None:
            raise RuntimeError(f"{self.ns} was read from its record: it has no cluster")
        return self._kube

    @classmethod
    def from_record(cls, folder: Path) -> Run:
        """A finished run read back from its folder (what `write_record` and the training left
        there), without a cluster: `judge` gives the verdict again."""
        rec = folder / "record"
        saved = json.loads((rec / "result.json").read_text())
        known = {f.name for f in fields(Result)}
        result = Result(**{k: v for k, v in saved.items() if k in known})
        defaults = DEFAULTS[result.defaults] if result.defaults else None
        run = cls(None, CLASSES[result.number], result.side, result.seed, result.lane, folder.parent, defaults)
        run.dir, run.shared, run.result = folder, folder / "shared", result
        run.t0, run.lost_node = result.t0, result.lost_node
        run.events, _ = _tail(run.shared / "events.jsonl", 0)
        run.lifecycle, _ = _tail(rec / "lifecycle.jsonl", 0)
        run.faultlog, _ = _tail(rec / "faults.jsonl", 0)
        run.job = json.loads((rec / "job.json").read_text())
        run.pods = json.loads((rec / "pods.json").read_text())
        if (rec / "dns.json").exists():
            run.dns_seen = [(t, list(a)) for t, a in json.loads((rec / "dns.json").read_text())]
        return run

    # -- what the scenario uses

    def fault(self, what: str) -> float:
        t = time.time()
        self.result.faults.append((round(t - self.t0, 2), what))
        return t

    def sleep(self, seconds: float) -> None:
        if self.ended.wait(seconds):
            raise RunEnded

    def wait(self, what: Callable[[], Any], seconds: float = CAP_S) -> Any:
        deadline = time.monotonic() + seconds
        while True:
            with self.lock:
                value = what()
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError
            self.sleep(0.1)

    def steps(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] == "step"]

    def wait_step(self, n: int, after: float = 0.0) -> dict[str, Any]:
        """The first step event numbered n or more (after time `after`)."""
        return dict(self.wait(lambda: next((e for e in self.steps() if e["step"] >= n and e["t"] > after), None)))

    def pod(self, index: int) -> str:
        return f"{JOB}-worker-{index}"

    def faults(self, **request: Any) -> dict[str, Any]:
        return self.kube.faults(**request)

    def kill_container(self, index: int) -> None:
        self.faults(op="kill", namespace=self.ns, pod=self.pod(index), signal="SIGKILL")
        self.fault(f"SIGKILL worker-{index}'s container")

    def kill_worker_process(self, index: int) -> bool:
        path = self.shared / "pids" / f"{self.pod(index)}.0"
        try:
            pid = int(path.read_text())
            self.faults(op="kill", namespace=self.ns, pod=self.pod(index), signal="SIGKILL", pid=pid)
        except (OSError, ValueError, ct.ClusterError):
            return False
        self.fault(f"SIGKILL worker-{index}'s worker process (pid {pid} in the pod)")
        return True

    def at_step(self) -> dict[str, Any]:
        """Wait for the seed's step and jitter: the moment of the (first) fault."""
        at = self.rng.randint(*self.cls.fault_steps)
        jitter = self.rng.uniform(0.0, STEP_TIME_S)
        event = self.wait_step(at)
        self.sleep(jitter)
        return event

    def node_of(self, index: int) -> str:
        """The Node the scheduler bound the pod to (once it did)."""
        return str(self.wait(lambda: self.pods.get(self.pod(index), {}).get("spec", {}).get("nodeName"), 60))

    # -- the job

    def render(self) -> dict[str, Any]:
        cls = self.cls
        rdzv: dict[str, Any] = dict(RDZV) | dict(cls.rdzv)
        rdzv["timeout"] = rdzv["join_timeout"]  # flytekit's legacy key must agree with join_timeout
        budget = cls.backoff_limit if self.defaults is None else None  # the defaults state no budget
        cfg = ei.Elastic(
            nnodes=cls.nnodes,
            max_restarts=self.max_restarts,
            monitor_interval=self.defaults.monitor_interval if self.defaults is not None else None,
            rdzv_configs=rdzv,
            run_policy={"backoff_limit": budget} if budget else None,
        )
        custom, _, version = cfg.to_template()
        train = [
            f"--shared={self.shared}",
            f"--seed={self.seed}",
            f"--steps={cls.steps}",
            f"--batch={BATCH}",
            f"--every={CHECKPOINT_EVERY}",
            f"--step-time={STEP_TIME_S}",
            f"--poison={self.shared / 'poison.json'}",
        ]
        if cls.name == "disk-full":
            train.append(f"--save-dir={SAVE_DIR}")
        common: dict[str, Any] = {"name": JOB, "image": "chaos:local", "namespace": self.ns}
        if self.defaults is not None:
            common["elastic_worker_restart_policy"] = self.defaults.restart_policy
        if self.side == "ours":
            options = ei.JobOptions(
                **common,
                entrypoint=["chaos_train:run", *train],
                pod_args=["--call"],
                env={
                    "PYTHONPATH": str(BENCH),
                    "ELASTIC_IDL_FAILURE_PATH": f"{self.shared}/failures/",
                    "ELASTIC_IDL_OUTPUT": f"{self.shared}/result.json",
                },
            )
        else:
            options = ei.JobOptions(**common, command=["torchrun"], args=[str(TRAIN_SCRIPT), *train])
        job = ei.render_pytorchjob(custom, options, task_type_version=version)
        spec = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
        if self._kube is not None:  # (a record's run renders without one)
            self.on_real_nodes(job, spec)
        spec["nodeSelector"] = {**spec.get("nodeSelector", {}), LANE_LABEL: str(self.lane)}
        if cls.name == "oom":
            resources = spec["containers"][0].setdefault("resources", {})
            resources["limits"] = {**resources.get("limits", {}), "memory": OOM_LIMIT}
        if cls.name == "disk-full":
            volume = {"name": "ckpt", "emptyDir": {"medium": "Memory", "sizeLimit": DISK_FULL_SIZE}}
            spec["volumes"] = [*spec.get("volumes", []), volume]
            spec["containers"][0].setdefault("volumeMounts", []).append({"name": "ckpt", "mountPath": SAVE_DIR})
        if cls.one_per_node:
            spec["affinity"] = {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {JOB_LABEL: JOB}}, "topologyKey": HOSTNAME_LABEL}
                    ]
                }
            }
        return dict(job)

    def setup(self) -> None:
        if self.dir.exists():
            shutil.rmtree(self.dir)
        self.shared.mkdir(parents=True)
        (self.shared / "failures").mkdir()
        for path in (self.kube.dir / ct.LIFECYCLE_LOG, self.kube.dir / ct.FAULT_LOG):
            key = "lifecycle" if path.name == ct.LIFECYCLE_LOG else "faults"
            self._offsets[key] = path.stat().st_size if path.exists() else 0
        with contextlib.suppress(ApiError):
            self.kube.call("DELETE", f"/api/v1/namespaces/{self.ns}")
        deadline = time.monotonic() + 120
        while True:  # a namespace of a previous run of this seed goes first
            try:
                self.kube.call("GET", f"/api/v1/namespaces/{self.ns}")
            except ApiError as e:
                if e.status == 404:
                    break
                raise
            if time.monotonic() > deadline:
                raise RuntimeError(f"namespace {self.ns} from an earlier run is not gone after 120 s")
            time.sleep(1)
        self.kube.call(
            "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.ns}}
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                self.kube.call("GET", f"/api/v1/namespaces/{self.ns}/serviceaccounts/default")
                break
            except ApiError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)

    def on_real_nodes(self, job: dict[str, Any], spec: dict[str, Any]) -> None:
        """What a real Node's pod needs here (as the cluster tests' pods get it): the base image with
        the interpreter's prefix and the checkout read-only, the runs' folder read-write; the
        readiness gate the dns-gap class withholds, the init container the late-join class holds."""
        root = self.dir.parent
        files = ct.realnode.host_files(
            {"python": (PY_PREFIX, True), "checkout": (REPO, True), "runs": (root, False)}, Path(sys.executable).parent
        )
        ct.realnode.for_real_nodes([job], self.kube.images["base"], files)
        if self.cls.name == "dns-gap":
            ct.faults.with_ready_gate(spec)
        if self.cls.name == "late-join":
            ct.faults.with_hold(spec, self.kube.dir, self.kube.images["base"])

    def apply(self, job: dict[str, Any]) -> None:
        (self.dir / "pytorchjob.json").write_text(json.dumps(job, indent=1))
        self.kube.call("POST", f"/apis/kubeflow.org/v1/namespaces/{self.ns}/pytorchjobs", job)

    def poll(self) -> None:
        """Refresh what the scenario and the verdict read: the training's events, the faults'
        lifecycle and fault logs (this namespace's lines), the job and its pods."""
        events, self._offsets["events"] = _tail(self.shared / "events.jsonl", self._offsets["events"])
        life, self._offsets["lifecycle"] = _tail(self.kube.dir / ct.LIFECYCLE_LOG, self._offsets["lifecycle"])
        faults, self._offsets["faults"] = _tail(self.kube.dir / ct.FAULT_LOG, self._offsets["faults"])
        job, pods = None, None
        if time.monotonic() - self._api_polled >= API_POLL_S:  # the API server less often than the files
            self._api_polled = time.monotonic()
            try:
                job = self.kube.call("GET", f"/apis/kubeflow.org/v1/namespaces/{self.ns}/pytorchjobs/{JOB}")
                pods = self.kube.call("GET", f"/api/v1/namespaces/{self.ns}/pods")["items"]
            except (ApiError, OSError, http.client.HTTPException):
                job, pods = None, None
        with self.lock:
            self.events += events
            # (the late-join class's hold is the harness's own init container, not the job's)
            self.lifecycle += [r for r in life if r.get("ns") == self.ns and r.get("container") != ct.faults.HOLD_INIT]
            self.faultlog += [r for r in faults if r.get("ns") == self.ns or r.get("node") == self.lost_node]
            if job is not None:
                self.job = job
                self.pods = {p["metadata"]["name"]: p for p in pods or []}

    def condition(self) -> tuple[str, float] | None:
        for cond in self.job.get("status", {}).get("conditions", []):
            if cond["type"] in ("Succeeded", "Failed") and cond["status"] == "True":
                return str(cond["type"]), _rfc3339(cond["lastTransitionTime"])
        return None

    def running_pods(self) -> list[str]:
        """Pods whose containers still run (the lifecycle log: a start without an exit). Not
        counted: the frozen processes of a pod on the lost Node once the pod object is gone (the
        pod GC deleted it; on a real cluster that machine is down)."""
        last: dict[str, dict[str, Any]] = {}
        for r in self.lifecycle:
            if r["event"] in ("start", "exit"):  # (an `oom` event ends no container by itself)
                last[r["uid"]] = r
        known = {p["metadata"]["uid"] for p in self.pods.values()}
        return sorted(
            {
                r["pod"]
                for r in last.values()
                if r["event"] == "start" and not (r["node"] == self.lost_node and r["uid"] not in known)
            }
        )

    # -- the run

    def go(self) -> Result:
        r = self.result
        r.date = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.setup()
        job = self.render()
        before = getattr(self, f"before_{self.cls.name.replace('-', '_')}", None)
        if before is not None:
            before()
        self.t0 = time.time()
        self.apply(job)
        scenario = threading.Thread(target=self._scenario, name=f"scenario-{self.ns}", daemon=True)
        scenario.start()
        verdict_at: float | None = None
        capped = False
        try:
            while True:
                self.poll()
                now = time.time()
                cond = self.condition()
                if cond is not None and verdict_at is None:
                    verdict_at = now
                if cond is not None:
                    settle = SETTLE_S if cond[0] == "Succeeded" else STOP_BOUND_S
                    if not self.running_pods():
                        break
                    if now - verdict_at > settle:  # type: ignore[operator]
                        break
                if now - self.t0 > self.cls.cap_s:
                    capped = True
                    break
                time.sleep(0.25)
        finally:
            self.ended.set()
            scenario.join(10)
        self._api_polled = 0.0
        self.poll()
        r.wall_s = round(time.time() - self.t0, 1)
        r.t0, r.capped, r.lost_node = self.t0, capped, self.lost_node
        try:
            self.judge(capped)
        except Exception as e:  # a defect of the judge: the run fails, with the reason
            r.passed, r.reason = False, f"harness: {type(e).__name__}: {e}"
            traceback.print_exc()
        self.write_record()
        return r

    def _scenario(self) -> None:
        fn = getattr(self, f"scenario_{self.cls.name.replace('-', '_')}", None)
        if fn is None:
            return
        try:
            fn()
        except RunEnded:
            pass
        except TimeoutError:
            self.result.notes.append("the scenario timed out waiting for its moment")
        except Exception as e:
            self.result.notes.append(f"scenario: {type(e).__name__}: {e}")

    def cleanup(self) -> None:
        """Undo what the run did to the cluster (a lost Node back, cordons and taints off) and
        delete its namespace (its pods go with it)."""
        if self.lost_node is not None:
            self._restore_node()
        for node in self.cordoned:
            with contextlib.suppress(ApiError):
                self.kube.patch_node(node, {"spec": {"unschedulable": False}})
        self.cordoned = []
        with contextlib.suppress(ct.ClusterError):
            self.faults(op="degrade", namespace=self.ns, off=True)
        with contextlib.suppress(ct.ClusterError):
            self.faults(op="release", namespace=self.ns, pod=self.pod(1))
        if self.webhook_down:
            self._webhook(down=False)
        with contextlib.suppress(ApiError):
            self.kube.call("DELETE", f"/api/v1/namespaces/{self.ns}")

    def _restore_node(self) -> None:
        node = self.lost_node
        assert node is not None
        deadline = time.monotonic() + 60
        # As a person would: the Node comes back once its pods are gone (the pod GC force-deletes
        # them after the out-of-service taint); then the taint goes.
        while time.monotonic() < deadline:
            pods = self.kube.call("GET", f"/api/v1/pods?fieldSelector=spec.nodeName%3D{node}")["items"]
            if not pods:
                break
            time.sleep(1)
        with contextlib.suppress(ct.ClusterError):
            self.faults(op="restore-node", node=node)
        n = self.kube.call("GET", f"/api/v1/nodes/{node}")
        taints = [t for t in n["spec"].get("taints", []) if t["key"] != OUT_OF_SERVICE]
        self.kube.patch_node(node, {"spec": {"taints": taints or None}})
        self.lost_node = None

    # -- the classes: what happens before the job is applied, and the fault

    def scenario_kill_nonhost(self) -> None:
        self.at_step()
        self.kill_container(1)

    def scenario_kill_host(self) -> None:
        self.at_step()
        self.kill_container(0)

    def scenario_kill_process(self) -> None:
        victim = self.rng.randrange(2)
        self.at_step()
        if not self.kill_worker_process(victim):
            self.result.notes.append("could not read the worker's pid")

    def scenario_double(self) -> None:
        first, second = self.rng.randrange(2), self.rng.randrange(2)
        delay = self.rng.uniform(0.0, 1.0)
        self.at_step()
        t = time.time()
        self.kill_container(first)
        # The second fault: during the recovery, `delay` after a container of the job (re)starts.
        self.wait(lambda: any(r["event"] == "start" and r["t"] > t for r in self.lifecycle), 120)
        self.sleep(delay)
        order = [second, 1 - second]
        for index in order:
            try:
                self.kill_container(index)
                return
            except ct.ClusterError:
                continue
        self.result.notes.append("no container to kill for the second fault")

    def before_late_join(self) -> None:
        self.faults(op="hold-start", namespace=self.ns, pod=self.pod(1))

    def scenario_late_join(self) -> None:
        self.at_step()
        self.faults(op="release", namespace=self.ns, pod=self.pod(1))
        self.fault("worker-1's containers start (released)")

    def scenario_drain(self) -> None:
        victim = self.rng.randrange(2)
        self.at_step()
        self.kube.call("DELETE", f"/api/v1/namespaces/{self.ns}/pods/{self.pod(victim)}")
        self.fault(f"delete worker-{victim} (graceful: SIGTERM, 30 s grace)")

    def scenario_exceed(self) -> None:
        """Kill worker-1's worker process each time training has resumed (a start, then steps)."""
        at = self.rng.randint(*self.cls.fault_steps)
        kills = 0
        last = 0.0
        while kills < 10:
            start = self.wait(
                lambda last=last: next((e for e in self.events if e["event"] == "start" and e["t"] > last), None)
            )
            self.wait(lambda start=start: len([e for e in self.steps() if e["t"] > start["t"]]) >= (at % 5) + 1)
            if self.kill_worker_process(1):
                kills += 1
                last = time.time()
            else:
                self.sleep(0.2)

    def scenario_crash_at_start(self) -> None:
        """SIGKILL worker-1's container (its PID 1) each time it starts, whatever restarts it: a pod
        that dies by a signal at every start (OOM-killed, segfaulting). Only a budget that counts
        every restart ends the job (issue 30 item 6)."""
        killed: set[tuple[str, float]] = set()
        # With defaults (no budget stated), for as long as the run lasts: what a pod that crashes at
        # every start gets is the figure; the matrix stops after 10 kills.
        most = 10 if self.defaults is None else 10**6
        while len(killed) < most and self.condition() is None:
            start = self.wait(
                lambda: next(
                    (
                        r
                        for r in list(self.lifecycle)
                        if r["event"] == "start" and r["pod"] == self.pod(1) and (r["uid"], r["t"]) not in killed
                    ),
                    None,
                )
            )
            self.sleep(1.0)  # its launcher has started (and may have joined the rendezvous)
            if self.condition() is not None:
                return  # the budget ended the job: what follows is the operator's clean-up
            try:
                self.kill_container(1)
            except ct.ClusterError:
                pass  # it ended by itself meanwhile: the next start is the next victim
            killed.add((start["uid"], start["t"]))

    def scenario_partition(self) -> None:
        victim = self.rng.randrange(2)
        self.at_step()
        self.faults(op="partition", namespace=self.ns, pod=self.pod(victim), seconds=PARTITION_S)
        self.fault(f"partition worker-{victim} for {PARTITION_S:g} s")

    def scenario_node_lost(self, untainted_s: float = 0.0) -> None:
        victim = self.rng.randrange(2)
        node = self.node_of(victim)
        self.at_step()
        self.lost_node = node
        lost = self.fault(f"lose {node} (worker-{victim}'s Node)")
        self.faults(op="lose-node", node=node)
        if untainted_s:  # class 21: nobody looks for that long
            self.sleep(max(0.0, lost + untainted_s - time.time()))
        # The node lifecycle controller marks it Unknown and taints it, the taint eviction controller
        # deletes its pods; they stay Terminating (no kubelet confirms). Then, as an operator of a
        # real cluster would, the out-of-service taint.
        self.wait(
            lambda: (
                [p for p in self.pods.values() if p["spec"].get("nodeName") == node]
                and all(
                    p["metadata"].get("deletionTimestamp")
                    for p in self.pods.values()
                    if p["spec"].get("nodeName") == node
                )
            ),
            240,
        )
        self.fault(f"the pods on {node} are Terminating: taint {OUT_OF_SERVICE}")
        n = self.kube.call("GET", f"/api/v1/nodes/{node}")
        taints = [*n["spec"].get("taints", []), {"key": OUT_OF_SERVICE, "value": "nodeshutdown", "effect": "NoExecute"}]
        self.kube.patch_node(node, {"spec": {"taints": taints}})

    def scenario_node_lost_untainted(self) -> None:
        """Class 9 with nobody applying the out-of-service taint for UNTAINTED_S: what the job does
        meanwhile (its lost pods Terminating, no replacement made) is the figure."""
        self.scenario_node_lost(untainted_s=UNTAINTED_S)

    def before_degraded(self) -> None:
        self.faults(op="degrade", namespace=self.ns, seed=self.seed, **DEGRADE)
        self.result.faults.append((0.0, f"degrade every pod: {DEGRADE['loss']:.0%} loss, {DEGRADE['delay_ms']} ms"))

    def scenario_dns_gap(self) -> None:
        self.at_step()
        self.faults(op="withhold-ready", namespace=self.ns, pod=self.pod(0), seconds=DNS_GAP_S, next=True)
        t = time.time()
        self.kill_container(0)
        name = f"{self.pod(0)}.{self.ns}.svc.{ct.CLUSTER_DOMAIN}"
        while time.time() - t < 40:  # what cluster DNS answers meanwhile
            with contextlib.suppress(OSError):
                self.dns_seen.append((time.time(), ct.dns_query_a(str(ct.BRIDGE_IP), name)))
            self.sleep(0.5)

    def scenario_unschedulable(self) -> None:
        """Cordon every Node of the lane but the survivor's, then kill the victim's container: its
        replacement has no Node (the anti-affinity keeps it off the survivor's), and the survivor
        stays where it is and could be recreated there."""
        victim = self.rng.randrange(2)
        survivor_node = self.node_of(1 - victim)
        self.at_step()
        cordon = [n for n in self.lane_nodes if n != survivor_node]
        for node in cordon:
            self.kube.patch_node(node, {"spec": {"unschedulable": True}})
            self.cordoned.append(node)
        at = self.fault(f"cordon {', '.join(cordon)} (not {survivor_node}, worker-{1 - victim}'s)")
        self.result.scenario = {"victim": victim, "cordoned": cordon, "cordoned_at": at}
        self.kill_container(victim)
        old = self.pods.get(self.pod(victim), {}).get("metadata", {}).get("uid")
        # The replacement is made and stays Pending: the scheduler finds no Node.
        self.wait(
            lambda: (
                (p := self.pods.get(self.pod(victim))) is not None
                and p["metadata"]["uid"] != old
                and not p["spec"].get("nodeName")
            ),
            120,
        )
        pending = time.time()
        self.fault(f"worker-{victim}'s replacement is Pending (unschedulable)")
        join = dict(self.cls.rdzv)["join_timeout"]
        self.sleep(join + 15)
        for node in self.cordoned:
            self.kube.patch_node(node, {"spec": {"unschedulable": False}})
        self.cordoned = []
        self.fault(f"uncordon after {time.time() - pending:.0f} s Pending")

    def scenario_fast_recreate(self) -> None:
        self.at_step()
        self.kube.call(
            "DELETE",
            f"/api/v1/namespaces/{self.ns}/pods/{self.pod(1)}",
            {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
        )
        self.fault("force-delete worker-1 (grace 0)")

    def scenario_fail_for_good(self) -> None:
        victim, at_init = fail_for_good_plan(self.seed)
        event = self.at_step()
        poison = {"pod": self.pod(victim), "at_step": event["step"], "at_init": at_init}
        self.result.scenario = {"victim": victim, "at_init": at_init}
        self._poison(poison)
        where = "in a collective, then before init_process_group at every restart" if at_init else "in a collective"
        host = " (the rendezvous store host)" if victim == 0 else ""
        self.fault(f"worker-{victim}{host} fails for good ({where})")

    def scenario_oom(self) -> None:
        """Worker-1's workers, once, at a step: allocate until the kernel's OOM killer ends them."""
        event = self.at_step()
        self._poison({"pod": self.pod(1), "at_step": event["step"], "kind": "oom"})
        self.fault(f"worker-1's workers allocate past the container's {OOM_LIMIT} limit")

    def _poison(self, poison: dict[str, Any]) -> None:
        """The poison file the training reads (chaos_train.py --poison), replaced at once."""
        path = self.shared / "poison.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(poison))
        os.replace(tmp, path)

    def scenario_disk_full(self) -> None:
        """Fill each pod's checkpoint volume, through its container's root as the host sees it
        (/proc/<its PID 1>/root), page by page until the tmpfs has none left."""
        self.at_step()
        filled = []
        for index in (0, 1):
            start = [r for r in self.lifecycle if r["event"] == "start" and r["pod"] == self.pod(index)][-1]
            folder = Path(f"/proc/{start['host_pid']}/root") / SAVE_DIR.lstrip("/")
            size = os.statvfs(folder)
            if size.f_blocks * size.f_frsize > 1 << 20:  # never fill a tmpfs the kubelet did not size
                raise RuntimeError(f"{self.pod(index)}'s {SAVE_DIR} is {size.f_blocks * size.f_frsize} bytes, "
                                   f"not {DISK_FULL_SIZE}: the kubelet did not size it")  # fmt: skip
            written = 0
            with contextlib.suppress(OSError), (folder / "filler").open("wb") as fh:
                while True:
                    fh.write(b"\0" * 4096)
                    fh.flush()
                    written += 4096
            filled.append(f"worker-{index}'s {written // 1024} KiB")
        self.fault(f"fill the checkpoint volumes ({', '.join(filled)})")

    def _restart(
        self, name: str, down_s: float, *, kill: bool = False, during: Callable[[], None] | None = None
    ) -> None:
        times = ct.restart(ct.Cluster(self.kube.dir), name, down_s, kill=kill, during=during)
        self.result.scenario |= {f"{name}_{k}": round(v - self.t0, 2) for k, v in times.items()}
        self.result.faults.append((round(times["started"] - self.t0, 2), f"start {name} again"))
        self.result.faults.append((round(times["ready"] - self.t0, 2), f"{name} answers again"))

    def scenario_apiserver_restart(self) -> None:
        self.at_step()
        self.fault("stop the API server (SIGTERM)")
        self._restart("kube-apiserver", APISERVER_DOWN_S)

    def scenario_operator_restart(self) -> None:
        self.at_step()

        def during() -> None:
            self.fault("the training operator crashed (SIGKILL)")
            self.kill_container(1)

        self._restart("training-operator", OPERATOR_DOWN_S, kill=True, during=during)

    def _webhook(self, *, down: bool) -> None:
        """The operator's validating webhook for PyTorchJobs unreachable (its configuration names a
        port its Service does not have: the API server's call fails at once) or back as it was.
        (Marking its endpoint not ready is not enough here: the API server resolves a webhook's
        Service when it makes its client for that configuration and keeps the client.)"""
        path = f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{WEBHOOK_CONFIG}"
        hooks = self.kube.call("GET", path)["webhooks"]
        index = next(i for i, w in enumerate(hooks) if w["name"] == WEBHOOK)
        if down:
            self.webhook_port = int(hooks[index]["clientConfig"]["service"].get("port", 443))
        port = WEBHOOK_DEAD_PORT if down else self.webhook_port
        patch = [
            {"op": "test", "path": f"/webhooks/{index}/name", "value": WEBHOOK},
            {"op": "replace", "path": f"/webhooks/{index}/clientConfig/service/port", "value": port},
        ]
        self.kube.call("PATCH", path, patch, "application/json-patch+json")
        self.webhook_down = down

    def _webhook_refuses(self) -> str | None:
        """A server-side dry run of a valid PyTorchJob: the error, when the API server could not call the webhook."""
        probe = dict(self.render())
        probe["metadata"] = {"name": "webhook-probe", "namespace": self.ns}
        try:
            self.kube.call("POST", f"/apis/kubeflow.org/v1/namespaces/{self.ns}/pytorchjobs?dryRun=All", probe)
        except ApiError as e:
            return str(e) if "failed calling webhook" in str(e) else None
        return None

    def scenario_webhook_down(self) -> None:
        self.at_step()
        self._webhook(down=True)
        self.fault("the operator's webhook unreachable")
        self.result.scenario["refused"] = str(self.wait(self._webhook_refuses, 10))[:300]
        old = self.pods.get(self.pod(1), {}).get("metadata", {}).get("uid")
        killed = time.time()
        self.kill_container(1)
        self.wait(
            lambda: any(
                r["event"] == "start" and r["pod"] == self.pod(1) and r["uid"] != old and r["t"] > killed
                for r in self.lifecycle
            ),
            120,
        )
        self.fault("worker-1's replacement runs")
        self._webhook(down=False)
        self.fault("the webhook reachable again")

    # -- the verdict

    def incarnations(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for r in self.lifecycle:
            inc = out.setdefault(
                r["uid"], {"pod": r["pod"], "uid": r["uid"], "node": r["node"], "starts": [], "exits": [], "ooms": []}
            )
            inc[{"start": "starts", "exit": "exits"}.get(r["event"], "ooms")].append(r)
        return out

    def judge(self, capped: bool) -> None:
        r, cls = self.result, self.cls
        problems: list[str] = []
        cond = self.condition()
        r.outcome = cond[0] if cond else None
        r.notes = [n for n in r.notes if not n.startswith(VERDICT_NOTES)]  # judged again: the scenario's only
        commits = chaos_train.read_commits(self.shared / "commits.jsonl")
        steps = self.steps()
        starts = [e for e in self.events if e["event"] == "start"]
        faults_t = [self.t0 + t for t, _ in r.faults]
        incs = self.incarnations()
        (self.dir / "record").mkdir(exist_ok=True)

        if capped:
            problems.append(f"hang: no verdict within {cls.cap_s:.0f} s (job {r.outcome or 'running'}, pods running: "
                            f"{', '.join(self.running_pods()) or 'none'})")  # fmt: skip
        elif self.expect is not None and r.outcome != self.expect:
            problems.append(f"job {r.outcome}, expected {self.expect}{self._why_failed(incs)}")
        if cls.number not in (0, 10) and not r.faults:
            problems.append("the fault never fired")
        if not self.cut_short:
            problems += [f"scenario: {n}" for n in r.notes]

        # The commit chain.
        parent, prev = chaos_train.ROOT, 0
        for c in commits:
            if c.get("parent") != parent or c.get("prev") != prev:
                problems.append(f"commit of step {c.get('step')} on {c.get('parent')} (prev {c.get('prev')}), "
                                f"not on the last commit (step {prev}): two worlds, or a resume from an older commit")  # fmt: skip
                break
            if chaos_train.commit_id(c) != c.get("id"):
                problems.append(f"commit of step {c.get('step')}: its id does not match its record")
                break
            world = int(c["world"])
            if c["ranks"] != (1 << world) - 1 or len(set(c["members"])) != world:
                problems.append(f"commit of step {c['step']}: world {world} but ranks mask {c['ranks']} and "
                                f"{len(set(c['members']))} member(s)")  # fmt: skip
                break
            if not cls.min_world <= world <= cls.world:
                problems.append(f"commit of step {c['step']} by a world of {world}, outside nnodes {cls.nnodes} "
                                f"(min_replicas {cls.min_world}): torch formed a world it must not")  # fmt: skip
                break
            parent, prev = c["id"], c["step"]
        if self.expect in ("Succeeded", None) and r.outcome == "Succeeded":
            ref = chaos_train.reference(self.seed, cls.steps, BATCH)
            last = commits[-1] if commits else {}
            if {k: last.get(k) for k in ("step", "acc", "applied")} != ref:
                problems.append(f"committed state differs from the fault-free run's: step {last.get('step')}")
            if last and last.get("world") != cls.world:
                problems.append(f"the last commit's world is {last.get('world')}, expected {cls.world}")
            # The terminal condition after the last commit.
            if last and cond is not None:
                first_ok = min((x["t"] for i in incs.values() for x in i["exits"] if x.get("code") == 0), default=None)
                if first_ok is not None and first_ok < last["t"]:
                    problems.append(f"a pod exited 0 {last['t'] - first_ok:.2f} s before the last commit "
                                    "(the job could be Succeeded before it)")  # fmt: skip
                if cond[1] < int(last["t"]):
                    problems.append("the job's Succeeded condition is older than the last commit")

        # Resumes from the last commit; lost progress.
        lost_total = 0
        for s in starts[1:]:
            before = [c for c in commits if c["t"] < s["t"]]
            last_step = before[-1]["step"] if before else 0
            if s["from"] != last_step:
                problems.append(f"an attempt resumed from step {s['from']}, the last commit was step {last_step}")
                break
            done = max((e["step"] for e in steps if e["t"] < s["t"]), default=0)
            lost = max(0, done - s["from"])
            lost_total += lost
            # A commit is written before its step's event: a resume can lose at most every - 1
            # steps; losing a whole interval means a commit that should be there is not.
            if lost >= CHECKPOINT_EVERY:
                problems.append(f"lost {lost} steps at a resume, not fewer than the checkpoint interval "
                                f"{CHECKPOINT_EVERY}: a commit is missing")  # fmt: skip
        r.lost_steps = lost_total
        problems += self._attempts(starts, steps)

        # Time from the fault to training resumed (class 5: from the late pod's start to a step in
        # the world of 2; must-fail classes: from the last fault to the Failed condition).
        if self.defaults is not None and r.outcome == "Failed" and cond is not None and faults_t:
            # From the first fault, as a user sees it (+- 0.5 s: the condition's time is whole seconds).
            r.fault_to_failed_s = max(0.0, round(cond[1] + 0.5 - faults_t[0], 1))
        if self.expect == "Failed":
            if cond is not None and r.outcome == "Failed" and faults_t:
                r.fault_to_resumed_s = round(cond[1] + 0.5 - faults_t[-1], 1)  # the condition's time is whole seconds
        elif cls.number == 10:
            if steps:
                r.fault_to_resumed_s = None
                r.notes.append(f"training took {steps[-1]['t'] - steps[0]['t']:.1f} s")
        elif faults_t:
            t0 = faults_t[0]
            later = [s for s in starts if s["t"] > t0 and (cls.number != 5 or s["world"] == 2)]
            if later:
                after = [e for e in steps if e["t"] > later[0]["t"]]
                if after:
                    r.fault_to_resumed_s = round(after[0]["t"] - t0, 1)

        problems += self._class_checks(incs, starts, commits)
        if self.side == "ours":
            problems += self._reports(incs)
            problems += self._output(incs, cond)
        if cond is not None and not capped:
            left = self.running_pods()
            if left:
                bound = SETTLE_S if cond[0] == "Succeeded" else STOP_BOUND_S
                problems.append(f"{LEFT_RUNNING}{bound:.0f} s after the job {cond[0]}: {', '.join(left)}")
        r.passed = not problems
        r.reason = "; ".join(problems) or "ok"

    def _attempts(self, starts: list[dict[str, Any]], steps: list[dict[str, Any]]) -> list[str]:
        """One world trains at a time: every step event belongs to the attempt started last before
        it, in its world, one step after the other from where that attempt started. A second world
        that trains, with or without committing, breaks this; so does one below min_replicas."""
        cls = self.cls
        began = {s.get("attempt"): s for s in starts}
        for s in starts:
            if not cls.min_world <= s["world"] <= cls.world:
                return [f"an attempt of {s.get('pod')} started with a world of {s['world']}, outside nnodes "
                        f"{cls.nnodes} (min_replicas {cls.min_world})"]  # fmt: skip
        ordered = sorted(starts, key=lambda s: s["t"])
        expect: dict[Any, int] = {}
        for e in sorted(steps, key=lambda e: e["t"]):
            attempt = e.get("attempt")
            start = began.get(attempt)
            if start is None or start["t"] > e["t"]:
                return [f"step {e['step']} by {e.get('pod')} in an attempt that never started (attempt {attempt})"]
            current = [s for s in ordered if s["t"] <= e["t"]][-1]
            if current.get("attempt") != attempt:
                return [f"two worlds trained at once: step {e['step']} of the world of {start.get('pod')} "
                        f"(started {start['t'] - self.t0:.1f} s) came {e['t'] - current['t']:.2f} s after the world "
                        f"of {current.get('pod')} started"]  # fmt: skip
            want = expect.get(attempt, start["from"] + 1)
            if e["step"] != want or e.get("world") != start["world"]:
                return [f"the attempt of {start.get('pod')} (world {start['world']}, from step {start['from']}) "
                        f"made step {e['step']} in a world of {e.get('world')} where step {want} was next"]  # fmt: skip
            expect[attempt] = want + 1
        return []

    def _why_failed(self, incs: dict[str, dict[str, Any]]) -> str:
        exits = [x for i in incs.values() for x in i["exits"] if x.get("code") not in (0, None)]
        own = [x for x in exits if not x.get("killed_by")]
        if not own:
            return ""
        x = own[0]
        return f": {x['pod']} exited {x['code']}"

    def _class_checks(
        self, incs: dict[str, dict[str, Any]], starts: list[dict[str, Any]], commits: list[dict[str, Any]]
    ) -> list[str]:
        cls, r = self.cls, self.result
        problems = []
        if cls.number == 4 and len(r.faults) >= 2:
            t1, t2 = (self.t0 + r.faults[0][0], self.t0 + r.faults[1][0])
            if any(t1 < s["t"] < t2 for s in starts):
                problems.append("the second fault came after training had resumed")
        if cls.number == 4 and len(r.faults) < 2 and not self.cut_short:
            problems.append("the second fault never fired")
        if cls.number == 7:
            kills = [f for f in r.faults if "worker process" in f[1]]
            allowed = self.max_restarts + 1
            if r.outcome == "Failed" and len(kills) != allowed:
                problems.append(f"failed after {len(kills)} worker failures, not max_restarts + 1 = {allowed}")
            attempts = {s["restart"] for s in starts}
            if r.outcome == "Failed" and attempts != set(range(allowed)):
                problems.append(f"attempts {sorted(attempts)}, expected 0..{self.max_restarts}")
        if cls.number == 15 and self.defaults is not None:
            victim = [x for i in incs.values() if i["pod"] == self.pod(1) for x in i["starts"]]
            r.notes.append(f"worker-1 started {len(victim)} times (no budget stated)")
        if cls.number == 15 and self.defaults is None:
            policy = self.job.get("spec", {}).get("pytorchReplicaSpecs", {}).get("Worker", {}).get("restartPolicy")
            if policy != "OnFailure":
                problems.append(
                    f"the Worker's restartPolicy is {policy}, not OnFailure (the task states a backoff_limit)"
                )
            until = (self.condition() or ("", float("inf")))[1] + 1.0  # the condition's time is whole seconds
            victim = [x for i in incs.values() if i["pod"] == self.pod(1) for x in i["starts"] if x["t"] < until]
            budget = int(cls.backoff_limit or 0)
            r.notes.append(f"worker-1 started {len(victim)} times before the job failed (backoff_limit {budget})")
            if r.outcome == "Failed" and len(victim) > budget + 1:
                problems.append(f"worker-1 started {len(victim)} times, past the budget of {budget} restarts")
            reason = " ".join(
                c.get("message", "") for c in self.job.get("status", {}).get("conditions", []) if c["type"] == "Failed"
            )
            if r.outcome == "Failed" and "backoff limit" not in reason:
                problems.append(f"the job failed, but not by its backoff limit: {reason!r}")
        if cls.number == 9 and not self.cut_short:
            said = " ".join(w for _, w in r.faults)
            if OUT_OF_SERVICE not in said:
                problems.append("the lost Node's pods never became Terminating (no eviction)")
        if cls.number == 11 and not self.cut_short:
            started = [f for f in self.faultlog if f.get("fault") == "withhold-ready started"]
            if not started:
                problems.append("the recreated worker-0 never had its Ready condition withheld")
            elif not any(not a for _, a in self.dns_seen):
                problems.append("cluster DNS never answered NXDOMAIN for worker-0")
        if cls.number == 12:
            said = [w for _, w in r.faults if w.startswith("uncordon")]
            if not said and not self.cut_short:
                problems.append("the replacement was never Pending (unschedulable) past join_timeout")
            problems += self._cordons(incs)
        if cls.number == 14 and r.faults:
            problems += self._failed_for_good(incs)
        problems += self._new_class_checks(incs)
        if cls.number == 13:
            old = [i for i in incs.values() if i["pod"] == self.pod(1) and i["exits"]]
            fault_t = self.t0 + r.faults[0][0] if r.faults else None
            if fault_t is not None:
                dead = [i for i in old if i["exits"][-1]["t"] >= fault_t]
                new = [i for i in incs.values() if i["pod"] == self.pod(1) and i["starts"][0]["t"] > fault_t]
                if dead and new:
                    gap = new[0]["starts"][0]["t"] - dead[0]["exits"][-1]["t"]
                    r.notes.append(f"recreated {gap:.1f} s after its death")
                    if gap > RECREATE_S:
                        problems.append(f"worker-1 recreated {gap:.1f} s after its death, not within {RECREATE_S:g} s")
        return problems

    def _new_class_checks(self, incs: dict[str, dict[str, Any]]) -> list[str]:
        """Classes 16 to 21: that the fault was what the class says (the kernel's OOM kill, the
        ENOSPC named, the component down and back, the webhook refusing, the taint late)."""
        cls, r, sc = self.cls, self.result, self.result.scenario
        if not r.faults or self.cut_short:
            return []
        problems = []
        fault_t = self.t0 + r.faults[0][0]
        if cls.number == 16:
            ooms = [x for i in incs.values() if i["pod"] == self.pod(1) for x in i["ooms"] if x["t"] >= fault_t - 1]
            if not ooms:
                problems.append("the kernel never OOM-killed in worker-1's container (no /tasks/oom event)")
            status = next(
                (s for p in self.pods.values() if p["metadata"]["name"] == self.pod(1)
                 for s in p.get("status", {}).get("containerStatuses") or []),
                {},
            )  # fmt: skip
            state = status.get("state", {}).get("terminated") or status.get("lastState", {}).get("terminated") or {}
            if state:
                r.notes.append(f"worker-1's container ended {state.get('reason')} (exit {state.get('exitCode')})")
        if cls.number == 17 and self.side == "ours" and r.outcome == "Failed":
            messages = [path.read_text() for found in self._failure_files().values() for _, path in found]
            if not any("No space left on device" in m for m in messages):
                problems.append("no FailureReport names the full volume (No space left on device)")
        if cls.number in (18, 19):
            name = "kube-apiserver" if cls.number == 18 else "training-operator"
            if f"{name}_ready" not in sc:
                problems.append(f"{name} did not answer again after its restart")
        if cls.number == 19 and {"training-operator_down", "training-operator_started"} <= sc.keys():
            down, up = self.t0 + sc["training-operator_down"], self.t0 + sc["training-operator_started"]
            early = [i for i in incs.values() if i["pod"] == self.pod(1) and i["starts"]
                     and down < i["starts"][0]["t"] < up]  # fmt: skip
            if early:
                problems.append("worker-1 was recreated while the operator was down: it was not down")
        if cls.number == 20 and "refused" not in sc:
            problems.append("the API server never refused a PyTorchJob for want of the webhook: it was not down")
        if cls.number == 21:
            said = " ".join(w for _, w in r.faults)
            if OUT_OF_SERVICE not in said:
                problems.append("the lost Node's pods never became Terminating (no eviction)")
        return problems

    def _cordons(self, incs: dict[str, dict[str, Any]]) -> list[str]:
        """Class 12: the victim's Node cordoned, the survivor's not (the Nodes its pods ran on when
        the cordons went on, from the lifecycle log)."""
        sc = self.result.scenario
        if not {"victim", "cordoned", "cordoned_at"} <= sc.keys():
            return ["the scenario did not record which Nodes it cordoned"] if self.result.faults else []
        at, cordoned = float(sc["cordoned_at"]), set(sc["cordoned"])

        def nodes(index: int) -> set[str]:
            return {
                str(i["node"])
                for i in incs.values()
                if i["pod"] == self.pod(index)
                and i["starts"]
                and i["starts"][0]["t"] <= at
                and not (i["exits"] and i["exits"][-1]["t"] <= at)
            }

        victim = int(sc["victim"])
        problems = []
        if nodes(1 - victim) & cordoned:
            problems.append(f"the survivor's Node was cordoned too ({', '.join(sorted(nodes(1 - victim) & cordoned))}"
                            f", worker-{1 - victim}'s): only the replacement may be unschedulable")  # fmt: skip
        if not nodes(victim) <= cordoned:
            problems.append(f"the victim's Node ({', '.join(sorted(nodes(victim) - cordoned))}) was not cordoned")
        return problems

    def _failed_for_good(self, incs: dict[str, dict[str, Any]]) -> list[str]:
        """Class 14: the pod the seed picks (the store host for even seeds) is the one poisoned,
        it ends by itself below 128 (a failure the operator does not retry: what fails the job),
        and with ours its FailureReport's root cause is its own error. Which pod exits first is
        not judged: the other pod's launcher may give up on its own restarts at the same time."""
        victim, at_init = fail_for_good_plan(self.seed)
        path = self.shared / "poison.json"
        if not path.exists():
            return ["no pod was made to fail for good (no poison file)"]
        poison = json.loads(path.read_text())
        if (poison.get("pod"), bool(poison.get("at_init"))) != (self.pod(victim), at_init):
            return [f"{poison.get('pod')} failed for good (at_init {bool(poison.get('at_init'))}); the seed picks "
                    f"{self.pod(victim)}{' (the store host)' if victim == 0 else ''} (at_init {at_init})"]  # fmt: skip
        mine = [(i, x) for i in incs.values() if i["pod"] == self.pod(victim) for x in i["exits"]]
        final = [(i, x) for i, x in mine if 0 < (x.get("code") or 0) < 128 and not x.get("killed_by")]
        if not final:
            codes = ", ".join(str(x.get("code")) for _, x in mine) or "none"
            return [f"{self.pod(victim)} failed for good but never exited non-retryably (below 128; its exits: "
                    f"{codes})"]  # fmt: skip
        if self.side != "ours":
            return []
        inc, last = final[0]
        begin, end = inc["starts"][0]["t"] - 1 if inc["starts"] else 0.0, last["t"] + 1
        roots = []
        for t, report in self._failure_files().get(self.pod(victim), []):
            if begin <= t <= end:
                failures = json.loads(report.read_text()).get("failures") or [{}]
                roots.append(str(failures[0].get("message", "")))
        if not any("poison:" in m for m in roots):
            return [f"{self.pod(victim)}'s FailureReport does not name its own error as the root cause: "
                    f"{roots[0][:120] if roots else 'no report'}"]  # fmt: skip
        return []

    def _failure_files(self) -> dict[str, list[tuple[float, Path]]]:
        """The FailureReports of the shared folder by pod, with their incarnation's start time (from the name)."""
        out: dict[str, list[tuple[float, Path]]] = {}
        for path in sorted((self.shared / "failures").glob("*.json")):
            pod, stamp = path.name.split(".")[:2]
            t = dt.datetime.strptime(stamp + "." + path.name.split(".")[2][:6], "%Y%m%dT%H%M%S.%f")
            out.setdefault(pod, []).append((t.replace(tzinfo=dt.timezone.utc).timestamp(), path))
        return out

    def _reports(self, incs: dict[str, dict[str, Any]]) -> list[str]:
        """One FailureReport per incarnation of our entrypoint that ended by itself."""
        from google.protobuf import json_format

        reports = self._failure_files()
        for path in (p for found in reports.values() for _, p in found):
            rep = ei.FailureReport()
            try:
                json_format.Parse(path.read_text(), rep)
            except (ValueError, json_format.ParseError) as e:
                return [f"{path.name}: not a FailureReport: {e}"]
            if not rep.summary:
                return [f"{path.name}: no summary"]
        problems = []
        # A report is its incarnation's: the one of its pod started last before the report's name
        # stamp (the entrypoint's start; a replacement can start within a second of the old one's end).
        theirs: dict[str, list[Path]] = {}
        for pod, found in reports.items():
            started = sorted(
                ((i["starts"][0]["t"], i["uid"]) for i in incs.values() if i["pod"] == pod and i["starts"]),
                reverse=True,
            )
            for t, path in found:
                owner = next((uid for begin, uid in started if begin <= t + 0.5), None)
                theirs.setdefault(str(owner), []).append(path)
        for inc in sorted(incs.values(), key=lambda i: i["starts"][0]["t"] if i["starts"] else 0):
            if not inc["starts"]:
                continue
            mine = theirs.get(inc["uid"], [])
            if not inc["exits"]:
                continue
            x = inc["exits"][-1]
            by_itself = not x.get("killed_by")
            if x["code"] == 0 and mine:
                problems.append(f"{inc['pod']} ({inc['uid'][:8]}) succeeded but left {len(mine)} FailureReport(s)")
            elif x["code"] != 0 and by_itself and len(mine) != 1:
                problems.append(f"{inc['pod']} ({inc['uid'][:8]}) ended by itself (exit {x['code']}) with "
                                f"{len(mine)} FailureReport(s), not 1")  # fmt: skip
            elif not by_itself and len(mine) > 1:
                problems.append(f"{inc['pod']} ({inc['uid'][:8]}) has {len(mine)} FailureReports")
        return problems

    def _output(self, incs: dict[str, dict[str, Any]], cond: tuple[str, float] | None) -> list[str]:
        """The task's output: absent when the job must fail; else the final state, written before
        the job could turn Succeeded (Flyte reads it then): before the first pod exited 0, which
        is what makes an elastic job Succeeded (else, before the condition's whole second)."""
        path = self.shared / "result.json"
        if self.expect == "Failed" or (self.expect is None and self.result.outcome == "Failed"):
            return [f"the task's output exists though the job must fail: {path.name}"] if path.exists() else []
        if self.result.outcome != "Succeeded":
            return []
        if not path.exists():
            return ["the task's output (rank 0's result) is missing"]
        got = json.loads(path.read_text())
        ref = chaos_train.reference(self.seed, self.cls.steps, BATCH)
        want = {"step": ref["step"], "acc": ref["acc"]}
        if got.get("rank") != 0 or got.get("return_value") != want:
            return [f"the task's output is {got.get('return_value')}, not {want}"]
        first_ok = min((x["t"] for i in incs.values() for x in i["exits"] if x.get("code") == 0), default=None)
        turned = first_ok if first_ok is not None else (cond[1] if cond is not None else None)
        written = path.stat().st_mtime
        if turned is not None and written > turned:
            return [f"the task's output was written {written - turned:.2f} s after the job could turn Succeeded "
                    "(a pod exited 0 before it): Flyte would find no output"]  # fmt: skip
        return []

    def write_record(self) -> None:
        rec = self.dir / "record"
        rec.mkdir(exist_ok=True)
        (rec / "lifecycle.jsonl").write_text("".join(json.dumps(x) + "\n" for x in self.lifecycle))
        (rec / "faults.jsonl").write_text("".join(json.dumps(x) + "\n" for x in self.faultlog))
        (rec / "job.json").write_text(json.dumps(self.job, indent=1))
        (rec / "pods.json").write_text(json.dumps(self.pods, indent=1))
        (rec / "result.json").write_text(json.dumps(asdict(self.result), indent=1))
        if self.dns_seen:
            (rec / "dns.json").write_text(json.dumps(self.dns_seen))
        for log in (self.kube.dir / ct.KEPT_LOGS).glob(f"{self.ns}_*/*/*.log"):  # the kubelets' (kept)
            shutil.copy(log, rec / f"{log.parts[-3]}-{log.parts[-2]}-{log.stem}.log")


# ---------------------------------------------------------------- the matrix


class Results:
    """The results file: one record per run, appended as each run ends (resumable). A run of a
    seed that the file has already (--one, --redo) is appended beside the earlier ones, never in
    their place: every run counts. A run that did not pass keeps its folder, compressed, in
    LOGS beside the file (its record names it)."""

    def __init__(self, path: Path | None, about: dict[str, Any] | None = None) -> None:
        self.path = path
        self.about = about or SETTINGS
        self.lock = threading.Lock()
        self.records: list[dict[str, Any]] = []
        if path is not None and path.exists():
            self.records = json.loads(path.read_text())["runs"]

    def done(self, number: int, side: str, seed: int, defaults: str = "") -> bool:
        return any(
            (r["class"], r["side"], r["seed"], r.get("defaults", "")) == (number, side, seed, defaults)
            for r in self.records
        )

    def keep_logs(self, r: Result, folder: Path) -> str | None:
        """The run's folder (its record, the training's shared files, the job) as a .tar.xz in
        LOGS beside the results file; its path relative to the results file's folder."""
        if self.path is None or not folder.is_dir():
            return None
        stamp = r.date.replace("-", "").replace(":", "") or "undated"
        who = r.defaults or r.side
        name = f"{r.number:02d}-{r.name}-{who}-{r.seed}-{stamp}.tar.xz"
        archive = self.path.parent / LOGS / name
        archive.parent.mkdir(parents=True, exist_ok=True)
        n = 1
        while archive.exists():  # two runs of a seed within one second: neither replaces the other
            n += 1
            name = f"{r.number:02d}-{r.name}-{who}-{r.seed}-{stamp}-{n}.tar.xz"
            archive = archive.with_name(name)
        tmp = archive.with_name(f".{name}.tmp")
        with tarfile.open(tmp, "w:xz") as tar:
            tar.add(folder, arcname=f"{folder.name}-{stamp}")
        os.replace(tmp, archive)
        return f"{LOGS}/{name}"

    def add(self, r: Result, folder: Path | None = None) -> None:
        """Append the run's record (with its logs kept when it did not pass and `folder` is given)."""
        logs = self.keep_logs(r, folder) if folder is not None and not r.passed else None
        record = {
            "class": r.number,
            "name": r.name,
            "side": r.side,
            "seed": r.seed,
            "passed": r.passed,
            "reason": r.reason,
            "outcome": r.outcome,
            "fault_to_resumed_s": r.fault_to_resumed_s,
            "wall_s": r.wall_s,
            "lost_steps": r.lost_steps,
            "faults": r.faults,
            "notes": r.notes,
            "date": r.date,
            "source": SOURCE,
        }
        if r.defaults:
            record["defaults"] = r.defaults
            record["fault_to_failed_s"] = r.fault_to_failed_s
        if logs is not None:
            record["logs"] = logs
        with self.lock:
            self.records.append(record)
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                tmp = self.path.with_suffix(".tmp")
                body = {"about": self.about, "runs": sorted(self.records, key=_record_order)}
                tmp.write_text(json.dumps(body, indent=1) + "\n")
                os.replace(tmp, self.path)


def _record_order(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r["class"], r.get("defaults", ""), r["side"], r["seed"], r.get("date", ""))


SOURCE = ""  # source_state(), set by main()
#: Where a failed run's folder is kept, compressed: beside the results file.
LOGS = "chaos-logs"
SETTINGS = {
    "cluster": f"Kubernetes {ct.K8S_VERSION}, training operator v1.9.4, real Nodes: a kubelet {ct.K8S_VERSION}, "
    "containerd and runc each (docs/guide/cluster.md, 'Real Nodes')",
    "job": f"2 Worker pods x 1 process, {STEPS} steps of {STEP_TIME_S} s, commit every {CHECKPOINT_EVERY}, "
    f"max_restarts {MAX_RESTARTS}, rdzv {RDZV}, restartPolicy as rendered",
    "cap_s": CAP_S,
    "must_fail": [c.name for c in CLASSES.values() if c.expect == "Failed"],
    "node_monitor_grace_s": ct.NODE_MONITOR_GRACE_S,
    "toleration_s": ct.TOLERATION_S,
}
DEFAULTS_SETTINGS = {
    **SETTINGS,
    "job": f"2 Worker pods x 1 process, {STEPS} steps of {STEP_TIME_S} s, commit every {CHECKPOINT_EVERY}, "
    f"rdzv {RDZV}; max_restarts, monitor_interval and restartPolicy from the defaults, no backoff_limit",
    "defaults": {d.name: d.title for d in DEFAULTS.values()},
}


class UntraceableSource(Exception):
    """The checkout is not a commit of main's history as it stands: a record could not name what ran."""


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)


def in_main(repo: Path, commit: str) -> bool:
    """Whether `commit` names a commit of the history of `repo`'s branch main."""
    sha = _git(repo, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
    return sha.returncode == 0 and _git(repo, "merge-base", "--is-ancestor", sha.stdout.strip(), MAIN).returncode == 0


def source_state(repo: Path = REPO) -> str:
    """The commit every record of this run names: HEAD (its full id), which must be in main's
    history, with a tree that does not differ from it.

    The pods run the checkout as it is on disk (src/, bench/, cluster/), so a record can name
    only a commit that holds exactly what ran. A dirty tree is refused rather than recorded as a
    diff and committed: a commit made by the harness would put unreviewed work on main, and a
    diff kept beside a record names no commit anyone can check out. What the run itself writes,
    bench/results/, does not count; `--results ''` (nothing recorded) runs any tree.
    """
    head = _git(repo, "rev-parse", "--verify", "HEAD^{commit}")
    if head.returncode != 0:
        raise UntraceableSource(f"{repo}: no commit checked out ({head.stderr.strip()})")
    sha = head.stdout.strip()
    if not in_main(repo, sha):
        raise UntraceableSource(f"HEAD {sha[:12]} is not in the history of {MAIN}: merge it first")
    dirty = _git(repo, "status", "--porcelain", "--untracked-files=all", "--", ".", f":(exclude){RESULTS_DIR}")
    if dirty.returncode != 0:
        raise UntraceableSource(f"git status failed: {dirty.stderr.strip()}")
    paths = [line[3:] for line in dirty.stdout.splitlines()]
    if paths:
        shown = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
        raise UntraceableSource(f"the tree differs from HEAD {sha[:12]} in {len(paths)} path(s): {shown}; commit "
                                "them first (or run with --results '' to record nothing)")  # fmt: skip
    return sha


def untraceable(records: list[dict[str, Any]], repo: Path = REPO) -> list[dict[str, Any]]:
    """The records whose source is not a commit of main's history."""
    sources = {str(r.get("source", "")) for r in records}
    bad = {s for s in sources if not s or not in_main(repo, s)}
    return [r for r in records if str(r.get("source", "")) in bad]


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def table(records: list[dict[str, Any]]) -> str:
    records = sorted(records, key=lambda r: (r["class"], r["side"], r["seed"]))  # as the file keeps them
    lines = [
        "| # | fault | side | passed / runs | median / worst fault -> resumed (s) | reasons (seeds) |",
        "| ---: | --- | --- | ---: | ---: | --- |",
    ]
    keys = sorted({(r["class"], r["side"]) for r in records}, key=lambda k: (k[0], SIDES.index(k[1])))
    for number, side in keys:
        rs = [r for r in records if (r["class"], r["side"]) == (number, side)]
        cls = CLASSES[number]
        times = [r["fault_to_resumed_s"] for r in rs if r["passed"] and r["fault_to_resumed_s"] is not None]
        why: dict[str, list[int]] = {}
        for r in rs:
            if not r["passed"]:
                key = r["reason"].split(";")[0]
                key = key.split(" (")[0] if key.startswith("hang") else key
                why.setdefault(key[:110], []).append(r["seed"])
        reasons = "; ".join(f"{k} ({', '.join(map(str, v))})" for k, v in why.items()) or "-"
        med = f"{_fmt(statistics.median(times))} / {_fmt(max(times))}" if times else "-"
        title = cls.title + (" (to Failed)" if cls.expect == "Failed" else "")
        lines.append(
            f"| {number} | {title} | {side} | {sum(r['passed'] for r in rs)} / {len(rs)} | {med} | {reasons} |"
        )
    return "\n".join(lines)


def side_by_side(records: list[dict[str, Any]]) -> str:
    """The table of docs/guide/when-pods-die.md (--docs, or --readme): one row per class, ours beside stock torchrun; each side's
    passed / runs, median / worst fault -> resumed of its passed runs, and its most frequent reason
    for a run that did not pass."""
    lines = [
        "| # | fault | ours: passed | median / worst (s) | stock torchrun: passed | median / worst (s) |",
        "| ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for number in sorted({r["class"] for r in records}):
        cls = CLASSES[number]
        cells = []
        for side in SIDES:
            rs = [r for r in records if (r["class"], r["side"]) == (number, side)]
            if not rs:
                cells += ["not run", "-"]
                continue
            times = [r["fault_to_resumed_s"] for r in rs if r["passed"] and r["fault_to_resumed_s"] is not None]
            why: dict[str, int] = {}
            for r in rs:
                if not r["passed"]:
                    key = r["reason"].split(";")[0].split(" (")[0].split(": chaos-")[0]
                    why[key] = why.get(key, 0) + 1
            passed = f"{sum(r['passed'] for r in rs)} / {len(rs)}"
            if why:
                top = max(why, key=lambda k: why[k])
                passed += f" ({why[top]}: {top})"
            cells += [passed, f"{_fmt(statistics.median(times))} / {_fmt(max(times))}" if times else "-"]
        title = cls.title + (" (to Failed)" if cls.expect == "Failed" else "")
        lines.append(f"| {number} | {title} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


#: What a run with defaults got (`outcome_of`), in the order the table gives them.
OUTCOMES = ("recovered", "failed", "failed, a pod left running", "hang", "wrong")
LEFT_RUNNING = "pods still running "


def outcome_of(r: dict[str, Any]) -> str:
    """What a user got from a run with defaults: "recovered" (the job Succeeded with the right state),
    "failed" (the job Failed, every check of the run met), "failed, a pod left running" (Failed, and
    a pod still ran STOP_BOUND_S after it: nothing else broken), "hang" (no verdict within the cap)
    or "wrong" (a check broken: a wrong state, a missing report...; the reason says which)."""
    if r["passed"]:
        return "recovered" if r["outcome"] == "Succeeded" else "failed"
    reasons = str(r["reason"]).split("; ")
    if reasons[0].startswith("hang"):
        return "hang"
    if r["outcome"] == "Failed" and all(x.startswith(LEFT_RUNNING) for x in reasons):
        return OUTCOMES[2]
    return "wrong"


def _defaults_cell(rs: list[dict[str, Any]]) -> str:
    parts = []
    for kind in OUTCOMES:
        got = [r for r in rs if outcome_of(r) == kind]
        if not got:
            continue
        times = [
            t for r in got if (t := r["fault_to_resumed_s"] if kind == "recovered" else r.get("fault_to_failed_s"))
            is not None
        ]  # fmt: skip
        when = ""
        if times and kind != "hang":
            when = f" in {_fmt(statistics.median(times))} s" + (
                f" (worst {_fmt(max(times))})" if len(times) > 1 else ""
            )
        parts.append(f"{kind} {len(got)}/{len(rs)}{when}")
    return "; ".join(parts) or "not run"


def defaults_table(records: list[dict[str, Any]]) -> str:
    """The defaults table (docs/guide/when-pods-die.md): per class, per defaults, what the runs got,
    with the median (and worst) time from the fault to training again (recovered) or to the job's
    Failed condition (failed)."""
    names = [n for n in DEFAULTS if any(r.get("defaults") == n for r in records)]
    lines = [
        "| # | fault | " + " | ".join(DEFAULTS[n].label for n in names) + " |",
        "| ---: | --- |" + " --- |" * len(names),
    ]
    for number in sorted({r["class"] for r in records}):
        cells = [_defaults_cell([r for r in records if (r["class"], r.get("defaults")) == (number, n)]) for n in names]
        lines.append(f"| {number} | {CLASSES[number].title} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def defaults_reasons(records: list[dict[str, Any]]) -> str:
    """Every run of the defaults table that hung or broke a check, with its reason and seed."""
    out = []
    for r in sorted(records, key=_record_order):
        kind = outcome_of(r)
        if kind in ("hang", "wrong"):
            reason = str(r["reason"])
            said = reason if reason.startswith(kind) else f"{kind}: {reason}"
            out.append(f"- {r['class']} {r['name']}, {DEFAULTS[r['defaults']].label}, seed {r['seed']}: {said[:300]}")
    return "\n".join(out) or "- none"


def label_lanes(kube: Kube, lanes: int) -> None:
    need = lanes * NODES_PER_LANE
    if len(kube.nodes) < need:
        raise SystemExit(f"{lanes} lane(s) need {need} Nodes; the cluster has {len(kube.nodes)} (CLUSTER_NODES)")
    for i, node in enumerate(kube.nodes):
        lane = str(i // NODES_PER_LANE) if i < need else None
        kube.patch_node(node, {"metadata": {"labels": {LANE_LABEL: lane}}})


@contextlib.contextmanager
def cluster(reuse: bool, nodes: int) -> Iterator[Kube]:
    """The cluster of CLUSTER_DIR (default build/cluster-chaos): started (and stopped after) unless `reuse`."""
    folder = Path(os.environ.get("CLUSTER_DIR") or ct.default_state_dir("cluster-chaos")).resolve()
    env = {**os.environ, "CLUSTER_DIR": str(folder)}
    cmd = [sys.executable, str(REPO / "cluster" / "cluster.py")]
    if not reuse:
        up = subprocess.run([*cmd, "up", "--nodes", str(nodes)], env=env, check=False)
        if up.returncode != 0:
            raise SystemExit("cluster up failed (its output is above)")
    kube = None
    try:
        kube = Kube(folder)
        yield kube
    finally:
        if kube is not None:
            kube.close()
        if not reuse:
            subprocess.run([*cmd, "down"], env=env, check=False, stdout=subprocess.DEVNULL)


#: One run to make: the class, the side, the seed and the defaults (None: the matrix's settings).
Planned = tuple[FaultClass, str, int, Defaults | None]


def run_plan(
    kube: Kube, plan: list[Planned], lanes: int, results: Results, keep: bool,
    say: Callable[[Result], None],
) -> list[Result]:  # fmt: skip
    work: queue.Queue[Planned] = queue.Queue()
    for item in plan:
        work.put(item)
    out: list[Result] = []
    root = kube.dir / "chaos"

    def lane(index: int) -> None:
        while True:
            try:
                cls, side, seed, defaults = work.get_nowait()
            except queue.Empty:
                return
            run = Run(kube, cls, side, seed, index, root, defaults)
            try:
                r = run.go()
            except Exception as e:
                r = run.result
                r.passed, r.reason = False, f"harness: {type(e).__name__}: {e}"
                traceback.print_exc()
            finally:
                try:
                    run.cleanup()
                except Exception as e:
                    print(f"cleanup of {run.ns}: {type(e).__name__}: {e}", file=sys.stderr)
            results.add(r, run.dir)
            out.append(r)
            say(r)
            if r.passed and not keep:
                shutil.rmtree(run.dir, ignore_errors=True)
            # The lane's next run waits for this one's pods to go (its namespace is being deleted).
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                with contextlib.suppress(ApiError, OSError):
                    if not kube.call("GET", f"/api/v1/namespaces/{run.ns}/pods")["items"]:
                        break
                time.sleep(1)

    # Daemon lanes: when the harness is stopped (SIGTERM, Ctrl-C) the main thread tears the cluster
    # down and exits; a lane's run in progress goes unrecorded instead of keeping the process alive
    # against a cluster that is gone (a second `make chaos` runs what is missing).
    threads = [threading.Thread(target=lane, args=(i,), name=f"lane-{i}", daemon=True) for i in range(lanes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def say(r: Result) -> None:
    verdict = ("ok  " if r.passed else "FAIL") if not r.defaults else f"{r.outcome or 'none':9s}"
    failed = f" failed {_fmt(r.fault_to_failed_s)}s" if r.defaults else ""
    print(
        f"{r.number:2d} {r.name:14s} {r.defaults or r.side:8s} seed {r.seed:5d} {verdict} {r.wall_s:6.1f}s "
        f"resumed {_fmt(r.fault_to_resumed_s):>5s}s{failed} lost {r.lost_steps} {r.reason}",
        flush=True,
    )
    if not r.passed:
        print(f"    rerun: {r.rerun()}  (record: {r.folder}/record)", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--classes", default=",".join(str(n) for n in CLASSES if n), help="numbers or names, comma-separated"
    )
    ap.add_argument(
        "--runs", type=int, help="runs per class with our pod entrypoint (default 10), or per defaults (default 5)"
    )
    ap.add_argument(
        "--torchrun-runs", type=int, default=5, help="runs per class with stock torchrun as the pod command"
    )
    ap.add_argument("--jobs", type=int, default=4, help=f"runs at once (each on {NODES_PER_LANE} Nodes of its own)")
    ap.add_argument("--seed0", type=int, default=1000, help="seeds are seed0, seed0+1, ...")
    ap.add_argument("--one", help="one run of one class (with --seed, --side)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--side", choices=SIDES, default="ours")
    ap.add_argument(
        "--defaults",
        metavar="NAMES",
        help=f"the defaults table: run each class under these defaults ({','.join(DEFAULTS)}), recording what "
        f"each got (results in {RESULTS_DIR}/{DEFAULTS_RESULTS.name} unless --results); with --summary/--docs, "
        "print that file's table",
    )
    ap.add_argument("--reuse", action="store_true", help="use the cluster of CLUSTER_DIR, which is up")
    ap.add_argument(
        "--results", help=f"the results file ('' for none; default {RESULTS_DIR}/{RESULTS.name}); resumed from"
    )
    ap.add_argument("--redo", action="store_true", help="rerun runs the results file has already")
    ap.add_argument("--keep", action="store_true", help="keep every run's folder, passed or not")
    ap.add_argument("--summary", action="store_true", help="print the table of the results file and stop")
    ap.add_argument(
        "--rejudge", metavar="FOLDER", help="judge a kept run's folder again (an unpacked chaos-logs archive) and stop"
    )
    ap.add_argument(
        "--docs",
        "--readme",
        dest="docs",
        action="store_true",
        help="print the table of docs/guide/when-pods-die.md (ours beside torchrun) and stop",
    )
    args = ap.parse_args(argv)

    if args.rejudge:
        again = Run.from_record(Path(args.rejudge))
        again.judge(again.result.capped)
        say(again.result)
        return 0 if again.result.passed else 1
    profiles = find_defaults(args.defaults) if args.defaults is not None else []
    if args.results is None:
        args.results = str(DEFAULTS_RESULTS if profiles else RESULTS)
    results = Results(Path(args.results) if args.results else None, DEFAULTS_SETTINGS if profiles else SETTINGS)
    if args.summary or args.docs:
        lost = untraceable(results.records)
        if lost:
            print(f"{len(lost)} of {len(results.records)} records name no commit of main's history", file=sys.stderr)
        if profiles:
            print(defaults_table(results.records) + ("" if args.docs else "\n\n" + defaults_reasons(results.records)))
        else:
            print(side_by_side(results.records) if args.docs else table(results.records))
        return 0
    plan: list[Planned]
    if args.one:
        if len(profiles) > 1:
            raise SystemExit("--one runs under one defaults at most")
        plan = [(find_class(args.one), args.side, args.seed, profiles[0] if profiles else None)]
        lanes = 1
    else:
        classes = [find_class(c) for c in args.classes.split(",") if c]
        if profiles:
            n = DEFAULTS_RUNS if args.runs is None else args.runs
            plan = [(cls, d.side, args.seed0 + i, d) for d in profiles for cls in classes for i in range(n)]
            plan.sort(key=lambda p: -_expected_seconds(p[0], p[1]))
        else:
            # Stock torchrun's runs first (the long ones: its survivors hang until the cap), then ours.
            plan = [
                (cls, side, args.seed0 + i, None)
                for side, n in (("torchrun", args.torchrun_runs), ("ours", 10 if args.runs is None else args.runs))
                for cls in sorted(classes, key=lambda c: -_expected_seconds(c, side))
                for i in range(n)
            ]
        plan = [p for p in plan if args.redo or not results.done(p[0].number, p[1], p[2], p[3].name if p[3] else "")]
        lanes = max(1, min(args.jobs, len(plan)))
    most = ct.realnode.MAX_REAL_NODES // NODES_PER_LANE
    if lanes > most:
        raise SystemExit(
            f"--jobs: at most {most} ({NODES_PER_LANE} Nodes a run, {ct.realnode.MAX_REAL_NODES} "
            f"real Nodes at most), not {lanes}"
        )
    if not plan:
        print("nothing to run: the results file has every run (--redo reruns them)")
        print(defaults_table(results.records) if profiles else table(results.records))
        return 0
    global SOURCE
    if args.results:
        try:
            SOURCE = source_state(REPO)
        except UntraceableSource as e:
            raise SystemExit(f"chaos_cluster.py: not recording from this checkout: {e}") from None
    print(f"{len(plan)} run(s), {lanes} at a time; restartPolicy as rendered: {rendered_policy()}; source {SOURCE}",
          flush=True)  # fmt: skip
    t0 = time.time()
    with cluster(args.reuse, max(lanes * NODES_PER_LANE, ct.NODE_COUNT)) as kube:
        label_lanes(kube, lanes)
        keep = args.keep or bool(args.one)
        # The cluster-wide classes (the API server, the operator, its webhook) run alone, after the rest.
        done = run_plan(kube, [p for p in plan if not p[0].exclusive], lanes, results, keep, say)
        done += run_plan(kube, [p for p in plan if p[0].exclusive], 1, results, keep, say)
    wall = time.time() - t0
    print(f"\nwall time: {wall / 60:.1f} min ({len(done)} runs, {lanes} at a time)\n")
    if profiles:
        print(defaults_table(results.records) + "\n\n" + defaults_reasons(results.records))
        return 0
    text = table(results.records)
    print(text)
    if args.results and not args.one:
        Path(args.results).with_suffix(".md").write_text(
            "Chaos on the one-machine cluster (bench/chaos_cluster.py; regenerate with --summary)\n\n" + text + "\n"
        )
    failed = [r for r in done if r.side == "ours" and not r.passed]
    return 1 if failed else 0


def _expected_seconds(cls: FaultClass, side: str) -> float:
    """A rough run length, to start the long runs first."""
    long = {21: 420, 9: 150, 12: 150, 8: 90, 14: 90, 7: 60, 10: 60}
    return float(long.get(cls.number, 40)) + (100 if side == "torchrun" else 0)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    raise SystemExit(main())
