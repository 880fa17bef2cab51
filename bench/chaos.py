"""Chaos: kill pods of an elastic job, the store host included, and check that the job finishes with nothing lost.

Each run renders a PyTorchJob (2 Worker pods, 1 process each) for the training
in ``chaos_train.py``, runs its pods under the simulated operator and kubelet of
``chaos_sim.py``, injects one fault class at a random moment (drawn from the
seed), and checks the result against the fault-free one:

- the job's outcome is the one the class expects (``exceed``: Failed, within
  ``join_timeout + shutdown_timeout + 30 s`` of the last fault, with a
  FailureReport for each of our pod incarnations that could write one, naming each
  attempt's root cause; every other class: Succeeded);
- the committed checkpoint equals the fault-free run's for the seed (step
  counter = N, each step folded exactly once, in order, into the accumulator);
- the last steps ran in the world size the class expects;
- no pod is left running once the job succeeded, and no run outlives its limit.

The shared folder (``<run>/shared``) stands for a volume or an object store that
every pod mounts; each pod's own folder is its local disk, gone with the pod.

Usage::

    .venv/bin/python bench/chaos.py                          # the full matrix (make chaos)
    .venv/bin/python bench/chaos.py --runs 2 --torchrun-runs 1   # a small sample
    .venv/bin/python bench/chaos.py --one kill-host --seed 7 --keep   # rerun one run, keep its folder
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import chaos_sim  # bench/ is on sys.path when this runs as a script; tests add it
import chaos_train
import elastic_idl as ei

BENCH = Path(__file__).resolve().parent
TRAIN_SCRIPT = BENCH / "chaos_train.py"
JOB_NAME = "chaos"
STEPS = 100
BATCH = 64
CHECKPOINT_EVERY = 5
STEP_TIME_S = 0.05
#: torch's c10d and launch defaults the bounds below are computed from, when the task leaves them unset.
TORCH_JOIN_TIMEOUT_S = 600
TORCH_SHUTDOWN_TIMEOUT_S = 30
#: A pod still running this long after the job succeeded counts as left behind.
SETTLE_S = 60.0
#: Wall-clock limit of a run that should succeed: over it, the run hangs. A fault-free run takes
#: 10-15 s here, a recovered one up to ~110 s (stock torchrun, whose survivors wait 60 s for a store).
LIMIT_S = 180.0
POLICIES = (chaos_sim.NEVER, chaos_sim.ON_FAILURE, chaos_sim.ALWAYS, chaos_sim.EXIT_CODE)


@dataclass(frozen=True)
class Knobs:
    """Every setting of a run that is not the rendered default; printed beside the numbers.

    Attributes:
        restart_policy: The Worker's ``restartPolicy``; None: what the renderer writes for an
            unset policy. ``ExitCode`` is set on the rendered job (the task schema has no value for it).
        max_restarts: ``elastic_config.max_restarts`` (flytekit's default is 0).
        backoff_limit: ``runPolicy.backoffLimit``; None leaves it unset.
        rdzv: ``rdzv_configs`` entries on top of flytekit's default ``{"timeout": 900, "join_timeout": 900}``.
        schedule_delay: Seconds from the operator creating a pod to its container starting.
        grace_period: terminationGracePeriodSeconds (Kubernetes' default: 30).
    """

    restart_policy: str | None = None
    max_restarts: int = 3
    backoff_limit: int | None = None
    rdzv: tuple[tuple[str, int], ...] = ()
    schedule_delay: float = 2.0
    grace_period: float = chaos_sim.DEFAULT_GRACE_PERIOD_S

    def describe(self) -> str:
        policy = self.restart_policy or f"as rendered ({rendered_policy()})"
        parts = [f"restartPolicy {policy}", f"max_restarts {self.max_restarts}"]
        if self.backoff_limit is not None:
            parts.append(f"backoffLimit {self.backoff_limit}")
        parts += [f"{k} {v} s" for k, v in self.rdzv]
        parts.append(f"pod (re)creation {self.schedule_delay:g} s")
        if self.grace_period != chaos_sim.DEFAULT_GRACE_PERIOD_S:
            parts.append(f"grace period {self.grace_period:g} s")
        return ", ".join(parts)


@dataclass(frozen=True)
class FaultClass:
    """One fault class of the matrix."""

    name: str
    number: int
    title: str
    kind: str  # container death, pod deletion, process death, late start, none
    nnodes: str = "2"
    world: int = 2
    expect: str = "Succeeded"
    knobs: dict[str, Any] = field(default_factory=dict)  # class-specific changes to Knobs
    steps: int = STEPS
    fault_steps: tuple[int, int] = (8, STEPS - 30)  # the (first) fault fires after a step drawn from here


CLASSES: dict[str, FaultClass] = {
    c.name: c
    for c in (
        FaultClass("none", 0, "no fault (the reference run)", "none"),
        FaultClass("kill-nonhost", 1, "SIGKILL of worker-1 (not the store host)", "container death"),
        FaultClass("kill-host", 2, "SIGKILL of worker-0, the rendezvous store host", "container death"),
        FaultClass("kill-process", 3, "SIGKILL of one worker process in a pod (its agent lives)", "process death"),
        FaultClass("double", 4, "two pod SIGKILLs, the second during the recovery from the first", "container death"),
        FaultClass(
            "late-join",
            5,
            "worker-1 starts late, after training began (nnodes 1:2)",
            "late start",
            nnodes="1:2",
            knobs={"rdzv": (("last_call_timeout", 5),)},
            # Long enough that the world of 1 cannot finish before a late pod has started and joined.
            steps=3 * STEPS,
            fault_steps=(2, 10),
        ),
        FaultClass("drain", 6, "graceful deletion of a pod (drain, spot reclaim)", "pod deletion"),
        FaultClass(
            "exceed",
            7,
            "worker-1's worker process killed at every resume until the job gives up",
            "process death",
            expect="Failed",
            # join_timeout 60 s: the bound (join_timeout + shutdown_timeout + 30 s) is 120 s instead
            # of 960 s, so that a hung run costs the matrix 2 minutes, not 16.
            knobs={"backoff_limit": 2, "rdzv": (("join_timeout", 60),)},
        ),
    )
}


@dataclass
class RunResult:
    fault: str
    seed: int
    launcher: str
    knobs: Knobs
    ok: bool = False
    why: str = ""
    outcome: str | None = None
    wall_s: float = 0.0
    faults: list[tuple[float, str]] = field(default_factory=list)
    recovery_s: float | None = None  # first fault (or late pod start) to training resumed
    world: int | None = None
    kept: str = ""

    def rerun(self) -> str:
        k, d = self.knobs, Knobs()
        knobs = f" --policy {k.restart_policy}" if k.restart_policy != d.restart_policy else ""
        knobs += f" --max-restarts {k.max_restarts}" if k.max_restarts != d.max_restarts else ""
        knobs += f" --schedule-delay {k.schedule_delay:g}" if k.schedule_delay != d.schedule_delay else ""
        return f".venv/bin/python bench/chaos.py --one {self.fault} --seed {self.seed} --launcher {self.launcher}{knobs} --keep"


def failure_bound(knobs: Knobs) -> float:
    """How soon a job must fail once it has more faults than it may: join_timeout + shutdown_timeout + 30 s."""
    join = dict(knobs.rdzv).get("join_timeout", 900)  # flytekit's default rdzv_configs
    return float(join + TORCH_SHUTDOWN_TIMEOUT_S + 30)


def rendered_policy() -> str:
    """The restartPolicy the renderer writes for an elastic Worker whose task leaves it unset."""
    custom, _, version = ei.Elastic(nnodes=2).to_template()
    job = ei.render_pytorchjob(
        custom, ei.JobOptions(name=JOB_NAME, image="x", entrypoint=["x"]), task_type_version=version
    )
    return str(job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def knobs_for(fault: FaultClass, base: Knobs) -> Knobs:
    import dataclasses

    changes = dict(fault.knobs)
    if "rdzv" in changes:
        changes["rdzv"] = tuple(base.rdzv) + tuple(changes["rdzv"])
    if "backoff_limit" in changes and base.backoff_limit is not None:
        del changes["backoff_limit"]
    return dataclasses.replace(base, **changes)


def build_job(fault: FaultClass, launcher: str, knobs: Knobs, seed: int, shared: Path) -> dict[str, Any]:
    """The PyTorchJob of a run, rendered by elastic-idl from an ``Elastic`` config."""
    rdzv: dict[str, Any] = {"timeout": 900, "join_timeout": 900}  # flytekit's default
    rdzv |= dict(knobs.rdzv)
    rdzv["timeout"] = rdzv["join_timeout"]  # flytekit's legacy key must agree with join_timeout
    policy = knobs.restart_policy if knobs.restart_policy != chaos_sim.EXIT_CODE else None
    cfg = ei.Elastic(
        nnodes=fault.nnodes,
        max_restarts=knobs.max_restarts,
        restart_policy=policy,
        rdzv_configs=rdzv,
        run_policy={"backoff_limit": knobs.backoff_limit} if knobs.backoff_limit else None,
    )
    custom, _, version = cfg.to_template()
    train = [
        str(TRAIN_SCRIPT),
        f"--shared={shared}",
        f"--seed={seed}",
        f"--steps={fault.steps}",
        f"--batch={BATCH}",
        f"--every={CHECKPOINT_EVERY}",
        f"--step-time={STEP_TIME_S}",
    ]
    common: dict[str, Any] = {"name": JOB_NAME, "image": "chaos:local"}
    if launcher == "ours":
        options = ei.JobOptions(
            **common,
            entrypoint=train,
            pod_args=["--termination-log", "termination-log"],
            env={"ELASTIC_IDL_FAILURE_PATH": f"{shared}/failures/"},
        )
    else:
        options = ei.JobOptions(**common, command=["torchrun"], args=train)
    job = ei.render_pytorchjob(custom, options, task_type_version=version)
    if knobs.restart_policy == chaos_sim.EXIT_CODE:
        job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = chaos_sim.EXIT_CODE
    if knobs.backoff_limit == 0:
        job["spec"]["runPolicy"]["backoffLimit"] = 0  # the task schema cannot say 0 (proto3 zero = unset)
    return job


class _Tail:
    """Reads the lines appended to the training's event log since the last call."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.events = path, 0, []
        self._partial = b""

    def poll(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            data = fh.read()
        self.offset += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()
        new = []
        for line in lines:
            with contextlib.suppress(ValueError):
                new.append(json.loads(line))
        self.events += new
        return new


class Injector:
    """Fires one fault class at the moments its seed picks; records what it did and when."""

    def __init__(self, fault: FaultClass, rng: random.Random, cluster: chaos_sim.Cluster, shared: Path) -> None:
        self.fault, self.rng, self.cluster, self.shared = fault, rng, cluster, shared
        self.at_step = rng.randint(*fault.fault_steps)  # the step after which the (first) fault fires
        self.jitter = rng.uniform(0.0, STEP_TIME_S)
        self.victims = [rng.randrange(2), rng.randrange(2)]
        self.second_delay = rng.uniform(0.0, 1.0)
        self.done: list[tuple[float, str]] = []
        self.armed_at: float | None = None
        self.second_at: float | None = None
        self.kills = 0
        self.late_started: float | None = None
        self.problem = ""
        if fault.name == "late-join":
            cluster.held.add(1)

    def _fire(self, what: str, action: Callable[[], bool]) -> None:
        t = time.time()
        if action():
            self.done.append((t, what))
        else:
            self.problem = f"could not inject {what}"

    def _kill_worker_process(self, index: int) -> bool:
        pod = self.cluster.pods.get(index)
        if pod is None or pod.container is None:
            return False
        pid_file = self.shared / "pids" / f"{pod.name}.0"
        try:
            pid = int(pid_file.read_text())
        except (OSError, ValueError):
            return False
        if pid not in chaos_sim.processes_with(pod.container.token):
            return False  # a worker of an older container: not this pod's current worker
        self.cluster.log(f"fault: SIGKILL worker process {pid} of {pod.name} (process death, the agent lives)")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        return True

    def on_container_start(self, pod: chaos_sim.Pod) -> None:
        if self.fault.name == "double" and len(self.done) == 1 and self.second_at is None:
            self.second_at = time.time() + self.second_delay
        if self.fault.name == "late-join" and pod.index == 1 and self.late_started is None:
            self.late_started = time.time()

    def step(self, events: list[dict[str, Any]]) -> None:
        steps = [e for e in events if e["event"] == "step"]
        name = self.fault.name
        if name == "exceed":
            self._exceed(events)
            return
        if self.done or name == "none" or not steps or steps[-1]["step"] < self.at_step:
            if name == "double" and len(self.done) == 1 and self.second_at is not None:
                if time.time() >= self.second_at:
                    # The drawn victim, or the other pod when the drawn one has no container right now.
                    order = [self.victims[1], 1 - self.victims[1]]
                    live = [i for i in order if (p := self.cluster.pods.get(i)) is not None and p.container]
                    if live:
                        v = live[0]
                        self._fire(f"SIGKILL worker-{v} (container death)", lambda: self.cluster.kill_container(v))
                        self.second_at = None
            return
        if self.armed_at is None:
            self.armed_at = time.time() + self.jitter
        if time.time() < self.armed_at:
            return
        v = self.victims[0]
        if name == "kill-nonhost":
            self._fire("SIGKILL worker-1 (container death)", lambda: self.cluster.kill_container(1))
        elif name == "kill-host":
            self._fire("SIGKILL worker-0 (container death)", lambda: self.cluster.kill_container(0))
        elif name == "kill-process":
            self._fire(
                f"SIGKILL the worker process of worker-{v} (process death)", lambda: self._kill_worker_process(v)
            )
        elif name == "double":
            self._fire(f"SIGKILL worker-{v} (container death)", lambda: self.cluster.kill_container(v))
        elif name == "late-join":
            self.cluster.log("fault: worker-1 is scheduled (late start)")
            self.cluster.release(1)
            self.done.append((time.time(), "worker-1 created late (late start)"))
        elif name == "drain":
            self._fire(f"delete worker-{v} (pod deletion)", lambda: self.cluster.delete_pod(v, "drain"))

    def _exceed(self, events: list[dict[str, Any]]) -> None:
        """Kill worker-1's worker process each time training has resumed (a start, then a step)."""
        if self.cluster.outcome is not None or self.kills >= 40:
            return
        last = self.done[-1][0] if self.done else 0.0
        starts = [e for e in events if e["event"] == "start" and e["t"] > last]
        if not starts:
            return
        after = [e for e in events if e["event"] == "step" and e["t"] > starts[0]["t"]]
        if len(after) < (self.at_step % 5) + 1:
            return
        t = time.time()
        if self._kill_worker_process(1):
            self.kills += 1
            self.done.append((t, f"SIGKILL the worker process of worker-1 (kill {self.kills})"))


def _recovery(fault: FaultClass, injector: Injector, events: list[dict[str, Any]]) -> float | None:
    """Seconds from the first fault (the late pod's start) to the first step of an attempt begun after it."""
    if fault.name == "late-join":
        t0 = injector.late_started
        if t0 is None:
            return None
        starts = [e for e in events if e["event"] == "start" and e["t"] > t0 and e["world"] == 2]
    else:
        if not injector.done:
            return None
        t0 = injector.done[0][0]
        starts = [e for e in events if e["event"] == "start" and e["t"] > t0]
    if not starts:
        return None
    steps = [e for e in events if e["event"] == "step" and e["t"] > starts[0]["t"]]
    return steps[0]["t"] - t0 if steps else None


def _check_reports(cluster: chaos_sim.Cluster, shared: Path) -> str:
    """Every pod incarnation that ended on its own left a FailureReport naming each attempt's root cause."""
    from google.protobuf import json_format

    reports = []
    for path in sorted((shared / "failures").glob("*.json")):
        rep = ei.FailureReport()
        json_format.Parse(path.read_text(), rep)
        reports.append((path, rep))
    self_ended = [t for t in cluster.terminations if t.exit_code not in (0, 128 + signal.SIGKILL)]
    if len(reports) < len(self_ended):
        return f"{len(self_ended)} container(s) ended on their own but {len(reports)} FailureReport(s) were kept"
    victim = f"{JOB_NAME}-worker-1"
    for path, rep in reports:
        if not rep.summary:
            return f"{path.name}: no summary"
        by_attempt: dict[int, list[Any]] = {}
        for rec in rep.failures:
            by_attempt.setdefault(rec.attempt, []).append(rec)
        for attempt, recs in by_attempt.items():
            if not recs[0].message:
                return f"{path.name}: attempt {attempt} has no root cause message"
        if path.name.startswith(victim) and "interrupted" not in rep.summary:
            # The pod whose workers were killed: each attempt's root cause is that kill.
            for attempt, recs in by_attempt.items():
                if recs[0].signal != signal.SIGKILL:
                    return f"{path.name}: attempt {attempt}'s root cause is {recs[0].message!r}, not the SIGKILL"
    return ""


def run_once(
    fault_name: str,
    seed: int,
    *,
    launcher: str = "ours",
    knobs: Knobs | None = None,
    limit_s: float | None = None,
    keep: bool = False,
    log: Callable[[str], None] | None = None,
) -> RunResult:
    """One run of one fault class; the run's folder is removed unless it failed or ``keep``.

    ``limit_s``: the wall-clock limit (a run over it is a hang); default :data:`LIMIT_S`. A class
    that must fail also hangs when it has not failed within its bound (plus 10 s) of the last fault.
    """
    fault = CLASSES[fault_name]
    knobs = knobs_for(fault, knobs or Knobs())
    must_fail = fault.expect == "Failed"
    if limit_s is None:
        limit_s = LIMIT_S + (failure_bound(knobs) if must_fail else 0)
    result = RunResult(fault_name, seed, launcher, knobs)
    root = Path(tempfile.mkdtemp(prefix=f"chaos-{fault_name}-{seed}-"))
    shared = root / "shared"
    shared.mkdir()
    job = build_job(fault, launcher, knobs, seed, shared)
    (root / "pytorchjob.json").write_text(json.dumps(job, indent=1))
    cluster = chaos_sim.Cluster(
        job, root / "pods", _free_port(), schedule_delay=knobs.schedule_delay, grace_period=knobs.grace_period
    )
    rng = random.Random(seed)
    injector = Injector(fault, rng, cluster, shared)
    cluster.on_container_start = injector.on_container_start
    tail = _Tail(shared / "events.jsonl")
    t0 = time.time()
    settle_until: float | None = None
    hang = False
    with cluster.running():
        while True:
            cluster.tick()
            tail.poll()
            injector.step(tail.events)
            now = time.time()
            if cluster.outcome is not None:
                if cluster.outcome == "Failed" or not cluster.alive():
                    break
                settle_until = settle_until or now + SETTLE_S
                if now > settle_until:
                    break
            since_fault = now - (injector.done[-1][0] if injector.done else t0)
            if now - t0 > limit_s or (must_fail and since_fault > failure_bound(knobs) + 10):
                hang = True
                break
            time.sleep(0.03)
        left = [p.name for p in cluster.alive()]
    result.wall_s = time.time() - t0
    result.outcome = cluster.outcome
    result.faults = [(t - t0, what) for t, what in injector.done]
    events = tail.events
    steps = [e for e in events if e["event"] == "step"]
    result.world = steps[-1]["world"] if steps else None
    result.recovery_s = _recovery(fault, injector, events)

    problems = []
    if hang:
        bound = f"{failure_bound(knobs):.0f} s of the last fault" if must_fail else f"{limit_s:.0f} s"
        problems.append(f"hang: no verdict within {bound}")
    elif cluster.outcome != fault.expect:
        problems.append(f"job {cluster.outcome}, expected {fault.expect}: {cluster.outcome_reason}")
    if injector.problem:
        problems.append(injector.problem)
    if fault.name != "none" and not injector.done:
        problems.append("the fault never fired")
    if fault.name == "double" and cluster.outcome == "Succeeded":
        if len(injector.done) < 2:
            problems.append("the second fault never fired")
        else:
            resumed = [
                e for e in events if e["event"] == "start" and injector.done[0][0] < e["t"] < injector.done[1][0]
            ]
            if resumed:
                problems.append("the second fault came after training had resumed")
    if fault.expect == "Succeeded" and cluster.outcome == "Succeeded":
        ckpt = shared / "checkpoint.json"
        state = json.loads(ckpt.read_text()) if ckpt.exists() else None
        if state != chaos_train.reference(seed, fault.steps, BATCH):
            got = {k: state[k] for k in ("step", "acc")} if state else None
            problems.append(f"committed state differs from the fault-free run: {got}")
        if result.world != fault.world:
            problems.append(f"finished in a world of {result.world}, expected {fault.world}")
        if left:
            problems.append(f"pods left running {SETTLE_S:.0f} s after the job succeeded: {', '.join(left)}")
    if fault.expect == "Failed" and cluster.outcome == "Failed" and not hang:
        bound = failure_bound(knobs)
        assert cluster.finished_at is not None
        late = cluster.finished_at - (injector.done[-1][0] if injector.done else t0)
        if late > bound:
            problems.append(f"failed {late:.0f} s after the last fault, over the {bound} s bound")
        if launcher == "ours":
            why = _check_reports(cluster, shared)
            if why:
                problems.append(why)
    result.ok = not problems
    result.why = "; ".join(problems) or "ok"
    (root / "cluster.log").write_text(
        "\n".join(f"{e.t - t0:8.2f} {e.what}" for e in cluster.events)
        + "\n\nterminations:\n"
        + "\n".join(
            f"{t.pod} uid {t.uid} container {t.restart}: exit {t.exit_code}"
            f"{' (deleted)' if t.deleted else ''} {t.message.splitlines()[0] if t.message else ''}"
            for t in cluster.terminations
        )
        + f"\n\nverdict: {result.why}\n"
    )
    if result.ok and not keep:
        shutil.rmtree(root, ignore_errors=True)
    else:
        result.kept = str(root)
    return result


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def table(results: list[RunResult]) -> str:
    """The table: fault class x launcher: passed / runs, median and worst time from fault to resumed."""
    lines = [
        "| # | fault class | kind | class knobs | launcher | passed / runs | median fault -> resumed (s) | worst (s) | failures |",
        "| ---: | --- | --- | --- | --- | ---: | ---: | ---: | --- |",
    ]
    keys: list[tuple[str, str]] = []
    for r in results:
        if (r.fault, r.launcher) not in keys:
            keys.append((r.fault, r.launcher))
    keys.sort(key=lambda k: (CLASSES[k[0]].number, k[1] != "ours"))  # by class, ours first, whatever ran first
    for name, launcher in keys:
        rs = [r for r in results if (r.fault, r.launcher) == (name, launcher)]
        c = CLASSES[name]
        good = sum(r.ok for r in rs)
        rec = [r.recovery_s for r in rs if r.ok and r.recovery_s is not None]
        if c.expect == "Failed":
            rec = [r.wall_s - r.faults[-1][0] for r in rs if r.ok and r.faults]  # last fault -> job failed
        why: dict[str, int] = {}
        for r in rs:
            if not r.ok:
                key = r.why.split(":")[0][:60]
                why[key] = why.get(key, 0) + 1
        detail = (
            "; ".join(
                f"{k} ({n}, seeds {', '.join(str(r.seed) for r in rs if not r.ok and r.why.startswith(k))})"
                for k, n in why.items()
            )
            or "-"
        )
        med = statistics.median(rec) if rec else None
        worst = max(rec) if rec else None
        label = "must fail; the time is last fault -> job failed" if c.expect == "Failed" else ""
        own = ", ".join(
            [f"{k} {v} s" for k, v in c.knobs.get("rdzv", ())] + [f"{k} {v}" for k, v in c.knobs.items() if k != "rdzv"]
        )
        lines.append(
            f"| {c.number} | {c.title}{' (' + label + ')' if label else ''} | {c.kind} | {own or '-'} | {launcher} | "
            f"{good} / {len(rs)} | {_fmt(med)} | {_fmt(worst)} | {detail} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    faults = [c for c in CLASSES if c != "none"]
    ap.add_argument(
        "--classes", default=",".join(faults), help=f"comma-separated, of: {', '.join(CLASSES)} (default: all but none)"
    )
    ap.add_argument("--runs", type=int, default=20, help="runs per class with our pod entrypoint")
    ap.add_argument(
        "--torchrun-runs", type=int, default=10, help="runs per class with stock torchrun as the pod command"
    )
    ap.add_argument("--policy", choices=POLICIES, help="the Worker's restartPolicy (default: as rendered)")
    ap.add_argument("--max-restarts", type=int, default=Knobs.max_restarts, help="elastic_config.max_restarts")
    ap.add_argument("--backoff-limit", type=int, help="runPolicy.backoffLimit (default: unset; exceed: 2)")
    ap.add_argument("--schedule-delay", type=float, default=Knobs.schedule_delay)
    ap.add_argument("--seed0", type=int, default=1000, help="seeds are seed0, seed0+1, ...")
    ap.add_argument(
        "--limit", type=float, help=f"wall-clock limit per run (s), over it is a hang (default {LIMIT_S:g})"
    )
    ap.add_argument("--jobs", type=int, default=1, help="runs at the same time (each is 2 pods)")
    ap.add_argument("--one", help="run one class once (with --seed, --launcher)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--launcher", choices=("ours", "torchrun"), default="ours")
    ap.add_argument("--keep", action="store_true", help="keep every run's folder (logs, checkpoint, events)")
    ap.add_argument("--json", help="also write every run's result here")
    args = ap.parse_args(argv)
    knobs = Knobs(
        restart_policy=args.policy,
        max_restarts=args.max_restarts,
        backoff_limit=args.backoff_limit,
        schedule_delay=args.schedule_delay,
    )

    def say(r: RunResult) -> None:
        print(
            f"{r.fault:13s} {r.launcher:8s} seed {r.seed:5d} {'ok  ' if r.ok else 'FAIL'} {r.wall_s:6.1f}s "
            f"resumed {_fmt(r.recovery_s):>5s}s world {r.world} {r.why}" + (f" [kept {r.kept}]" if r.kept else ""),
            file=sys.stderr,
            flush=True,
        )
        if not r.ok:
            print(f"    rerun: {r.rerun()}", file=sys.stderr, flush=True)

    if args.one:
        r = run_once(args.one, args.seed, launcher=args.launcher, knobs=knobs, limit_s=args.limit, keep=args.keep)
        say(r)
        return 0 if r.ok else 1
    t0 = time.time()
    # Stock torchrun's runs first: they are the long ones (its survivors wait out a timeout), and
    # starting the longest runs first keeps the last minutes of the matrix from running one job alone.
    plan = [
        (name, launcher, args.seed0 + i)
        for launcher, n in (("torchrun", args.torchrun_runs), ("ours", args.runs))
        for name in args.classes.split(",")
        for i in range(n)
    ]

    def one(item: tuple[str, str, int]) -> RunResult:
        name, launcher, seed = item
        r = run_once(name, seed, launcher=launcher, knobs=knobs, limit_s=args.limit, keep=args.keep)
        say(r)
        return r

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(one, plan))
    wall = time.time() - t0
    print(
        f"\nknobs: {knobs.describe()}; per class: "
        + "; ".join(f"{c.name}: {knobs_for(c, knobs).describe()}" for c in CLASSES.values() if c.knobs)
    )
    print(f"wall time of the matrix: {wall / 60:.1f} min ({len(plan)} runs, {args.jobs} at a time)\n")
    print(table(results))
    if args.json:
        Path(args.json).write_text(
            json.dumps([{**r.__dict__, "knobs": r.knobs.describe()} for r in results], indent=1, default=str)
        )
    # Stock torchrun's runs are the baseline the table compares with: their failures are findings.
    # The matrix fails when a run with our pod entrypoint fails.
    ours_failed = [r for r in results if r.launcher == "ours" and not r.ok]
    print(f"ours: {len(ours_failed)} failed of {sum(r.launcher == 'ours' for r in results)} runs")
    return 1 if ours_failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
