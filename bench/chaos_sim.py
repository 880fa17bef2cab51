"""A simulated Kubernetes for the chaos harness: the training operator and the kubelet as one supervisor.

:class:`Cluster` runs the Worker pods of a rendered ``PyTorchJob`` as local
process trees and applies the rules of the Kubeflow training operator v1.9
(``kubeflow/training-operator`` tag ``v1.9.0``) and of the kubelet, exactly as
far as this harness depends on them. The rules, with where they come from:

- Container restart policy (kubelet): the replica's ``restartPolicy`` is the
  pod's, except ``ExitCode``, whose pods get ``Never`` (``pkg/core/pod.go:81-88``).
  ``OnFailure`` restarts a container that exits non-zero, ``Always`` any that exits,
  in place: same pod, same name and index, same pod folder. The first restart is
  immediate, then 10 s, doubling, capped at 300 s (kubelet CrashLoopBackOff); each
  restart adds one to the pod's ``restartCount``.
- A failed pod (phase Failed: its container ended non-zero and will not be
  restarted) under ``ExitCode`` with exit code >= 128 is deleted and created again,
  under ``OnFailure``/``Always`` too; under ``ExitCode`` with a code < 128 the job
  fails (``pkg/controller.v1/common/pod.go:350-373``, ``pkg/util/train/train_util.go:24-26``).
- A missing pod is created (``pod.go:316-321``), with the same name
  ``<job>-worker-<i>``; here after ``schedule_delay`` seconds (API, scheduler,
  sandbox, cached image). ``<job>-worker-0`` resolves to whichever pod is worker-0
  now: every pod gets the same rendezvous address, and only worker-0 listens on it.
- Job status (``pkg/controller.v1/pytorch/pytorchjob_controller.go:369-445``): an
  elastic job succeeds as soon as any Worker pod succeeded (line 409); when a
  pod failed and ``replicas > succeeded + running`` the job fails under ``Never``
  (lines 428-442) and is "restarting" otherwise. A Running pod that is being
  deleted counts as failed (``pkg/core/status.go:34-44``): under ``Never`` a
  drained or reclaimed pod fails the job before it could be recreated.
- ``runPolicy.backoffLimit`` (``pkg/controller.v1/common/job.go:175-214``,
  ``pkg/core/job.go:95-133``): the job fails when the ``restartCount`` of the
  Running pods of OnFailure/Always/ExitCode replicas reaches the limit (any restart
  when it is 0), or when a new pod failure arrives while the work queue's requeue
  count + 1 exceeds the limit. That count only grows on reconcile errors; here it
  is 0, so the second rule fires only for ``backoffLimit: 0``. A job failed this
  way has every pod deleted (``job.go:216-225``, before the job counts as finished,
  so whatever ``cleanPodPolicy`` says).
- A finished job stops its pods as ``cleanPodPolicy`` says (``job.go:43-69``,
  ``122-126``): ``None`` (the operator's default) leaves them running, ``Running``
  deletes the running and pending ones, ``All`` every one.
- Pod deletion (a drain, a spot reclaim, an eviction, the operator): SIGTERM to the
  container's main process, ``grace_period`` seconds (Kubernetes' default
  terminationGracePeriodSeconds is 30), then SIGKILL of everything left. The pod is
  gone when its container is; the operator then creates a new one. Under ``ExitCode``
  a container that exits 1-127 while its pod is deleted fails the job (the kubelet
  gives the pod a terminal phase first, which the operator may see).

A container is a process tree: every process of it carries an env token, so
stopping a container reaches workers that left the process group (torchrun puts
its workers in sessions of their own), as a cgroup would. When a container's
main process exits, the rest of the container is killed, as when PID 1 of a
container exits.

What a cluster does that this does not: pod scheduling and image pulls take
seconds to minutes (a reclaimed spot node may need a new node), where the
supervisor waits ``schedule_delay``; every pod here is 127.0.0.1, so the
rendezvous address is rewritten to ``127.0.0.1:<port>`` and the host check a
cluster makes by IP is given as ``is_host`` in ``PET_RDZV_CONF``; while worker-0
is recreated, ``<job>-worker-0`` does not resolve on a cluster (no ready pod
behind the headless service) where here the port is closed (connection refused);
a node loss also loses the node's network at once, where here closed sockets are
reported to the peers at once.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import elastic_idl as ei

#: The env var that marks every process of one container (the harness's cgroup).
TOKEN_ENV = "CHAOS_CONTAINER"
#: Kubernetes defaults the supervisor follows.
DEFAULT_GRACE_PERIOD_S = 30.0
CRASH_BACKOFF_INITIAL_S = 10.0
CRASH_BACKOFF_MAX_S = 300.0
CRASH_BACKOFF_RESET_S = 600.0
#: Restart policies of a replica spec (kubeflow.org/v1).
NEVER, ON_FAILURE, ALWAYS, EXIT_CODE = "Never", "OnFailure", "Always", "ExitCode"
#: Env of the machine that must not leak into a pod.
_HOST_ENV_PREFIXES = ("PET_", "ELASTIC_IDL_", "TORCHELASTIC_", "MASTER_", "CHAOS_", "GLOO_")
_HOST_ENV_NAMES = frozenset(
    {"RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "OMP_NUM_THREADS", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"}
)
_tokens = itertools.count()


def exit_code_of(returncode: int) -> int:
    """The container exit code Kubernetes reports: 128+N for a process killed by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def processes_with(token: str) -> list[int]:
    """Pids of the live processes whose environment carries ``TOKEN_ENV=token``."""
    needle = f"{TOKEN_ENV}={token}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            env = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            found.append(int(entry))
    return found


def kill_all(token: str, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to every process of a container (until none is left, for SIGKILL)."""
    for _ in range(50):
        pids = processes_with(token)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        if sig != signal.SIGKILL:
            return
        time.sleep(0.02)


@dataclass
class Termination:
    """One ended container, as the kubelet records it (``status.containerStatuses[].state.terminated``)."""

    pod: str
    uid: int
    restart: int
    exit_code: int
    started: float
    finished: float
    deleted: bool
    message: str
    log: Path


@dataclass
class Container:
    proc: subprocess.Popen[bytes]
    token: str
    restart: int
    started: float
    dir: Path


@dataclass
class Pod:
    """One pod object: a name and an index, and an incarnation (``uid``) the operator created."""

    index: int
    name: str
    uid: int
    dir: Path
    phase: str = "Pending"  # Pending, Running, Succeeded, Failed
    start_at: float | None = None  # when the next container starts (scheduling, or the crash back-off)
    restart_count: int = 0
    container: Container | None = None
    deleting_since: float | None = None
    last_exit: int | None = None
    crashes: int = 0  # containers that ended and were restarted, for the back-off

    @property
    def deleting(self) -> bool:
        return self.deleting_since is not None


@dataclass
class Event:
    t: float
    what: str


@dataclass
class Cluster:
    """The operator and the kubelet for one PyTorchJob's Worker pods (no Master: an elastic job).

    Args:
        job: The rendered PyTorchJob.
        root: A folder for the pods' folders and logs.
        port: The rendezvous port on 127.0.0.1 that stands for ``<job>-worker-0:<port>``.
        schedule_delay: Seconds from the operator creating a pod to its container starting.
        grace_period: terminationGracePeriodSeconds of a deleted pod.
        held: Indexes of pods not created until :meth:`release` is called (a pod that
            starts late: no node for it yet).
        extra_env: Env added to every container (the harness's own, e.g. paths).
        on_container_start: Called with the pod each time one of its containers starts.
    """

    job: Mapping[str, Any]
    root: Path
    port: int
    schedule_delay: float = 2.0
    grace_period: float = DEFAULT_GRACE_PERIOD_S
    held: set[int] = field(default_factory=set)
    extra_env: Mapping[str, str] = field(default_factory=dict)
    on_container_start: Callable[[Pod], None] | None = None

    def __post_init__(self) -> None:
        spec = self.job["spec"]
        worker = spec["pytorchReplicaSpecs"]["Worker"]
        self.name: str = self.job["metadata"]["name"]
        self.replicas: int = int(worker["replicas"])
        self.policy: str = worker.get("restartPolicy", ON_FAILURE)  # the operator's own default
        run_policy = spec.get("runPolicy", {})
        self.backoff_limit: int | None = run_policy.get("backoffLimit")
        self.clean_pod_policy: str = run_policy.get("cleanPodPolicy", "None")
        self.pod_policy = NEVER if self.policy == EXIT_CODE else self.policy
        container = worker["template"]["spec"]["containers"][0]
        self.argv = [*self._command(container["command"]), *container.get("args", [])]
        self.container_env = {e["name"]: e["value"] for e in container.get("env", [])}
        self.pods: dict[int, Pod] = {}
        self.uids = itertools.count()
        self.terminations: list[Termination] = []
        self.events: list[Event] = []
        self.t0 = time.time()
        self.outcome: str | None = None  # "Succeeded" / "Failed" once the job is finished
        self.outcome_reason = ""
        self.finished_at: float | None = None
        self._prev_failed = 0
        self._restarting_logged = False

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _command(command: list[str]) -> list[str]:
        # The image's "python" and "torchrun" are this interpreter's.
        if command[:1] == ["python"]:
            return [sys.executable, *command[1:]]
        if command[:1] == ["torchrun"]:
            return [sys.executable, "-m", "torch.distributed.run", *command[1:]]
        return list(command)

    def log(self, what: str) -> None:
        self.events.append(Event(time.time(), what))

    def pod_name(self, index: int) -> str:
        return f"{self.name}-worker-{index}"

    def env_for(self, pod: Pod, token: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(_HOST_ENV_PREFIXES) and k not in _HOST_ENV_NAMES}
        env |= self.container_env
        env |= ei.pod_env(self.job, "Worker", pod.index)
        env["HOSTNAME"] = pod.name
        # DNS: <job>-worker-0 is worker-0's pod; on this machine that is 127.0.0.1, and
        # only worker-0 hosts the store there, as only worker-0 has that IP on a cluster.
        env["PET_RDZV_ENDPOINT"] = f"127.0.0.1:{self.port}"
        conf = [env["PET_RDZV_CONF"]] if env.get("PET_RDZV_CONF") else []
        env["PET_RDZV_CONF"] = ",".join([*conf, f"is_host={int(pod.index == 0)}"])
        env |= dict(self.extra_env)
        env["ELASTIC_IDL_OUTPUT"] = str(pod.dir / "result.json")  # the pod's own disk
        env[TOKEN_ENV] = token
        return env

    # ------------------------------------------------------------------ faults

    def kill_container(self, index: int, sig: int = signal.SIGKILL) -> bool:
        """A container death: SIGKILL (or ``sig``) to every process of the pod's container."""
        pod = self.pods.get(index)
        if pod is None or pod.container is None:
            return False
        self.log(f"fault: {signal.Signals(sig).name} to every process of {pod.name} (container death)")
        kill_all(pod.container.token, sig)
        return True

    def delete_pod(self, index: int, reason: str) -> bool:
        """Graceful deletion: SIGTERM to the main process, the grace period, then SIGKILL."""
        pod = self.pods.get(index)
        if pod is None or pod.deleting:
            return False
        pod.deleting_since = time.time()
        self.log(f"delete {pod.name} (uid {pod.uid}): {reason}")
        if pod.container is not None:
            with contextlib.suppress(ProcessLookupError):
                pod.container.proc.send_signal(signal.SIGTERM)
        return True

    # ------------------------------------------------------------------ lifecycle

    def _create(self, index: int, delay: float) -> None:
        uid = next(self.uids)
        name = self.pod_name(index)
        d = self.root / name / f"pod-{uid}"
        d.mkdir(parents=True)
        self.pods[index] = Pod(index, name, uid, d, start_at=time.time() + delay)
        self.log(f"create {name} (uid {uid}), starts in {delay:.1f} s")

    def release(self, index: int) -> None:
        """Let a held pod (one that starts late) be created now."""
        self.held.discard(index)

    def _start_container(self, pod: Pod) -> None:
        restart = pod.restart_count
        token = f"{os.getpid()}-{next(_tokens)}-{pod.name}-{pod.uid}-{restart}"
        d = pod.dir / f"container-{restart}"
        d.mkdir()
        with open(d / "log", "wb") as out:
            proc = subprocess.Popen(
                self.argv,
                env=self.env_for(pod, token),
                cwd=d,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        pod.container = Container(proc, token, restart, time.time(), d)
        pod.phase = "Running"
        pod.start_at = None
        self.log(f"start {pod.name} (uid {pod.uid}) container {restart}, pid {proc.pid}")
        if self.on_container_start is not None:
            self.on_container_start(pod)

    def _container_ended(self, pod: Pod) -> None:
        c = pod.container
        assert c is not None
        code = exit_code_of(c.proc.returncode if c.proc.returncode is not None else -signal.SIGKILL)
        kill_all(c.token)  # PID 1 is gone: the rest of the container goes with it
        msg_file = c.dir / "termination-log"
        message = msg_file.read_text(errors="replace") if msg_file.is_file() else ""
        now = time.time()
        self.terminations.append(
            Termination(pod.name, pod.uid, c.restart, code, c.started, now, pod.deleting, message, c.dir / "log")
        )
        self.log(f"{pod.name} (uid {pod.uid}) container {c.restart} exited {code}")
        pod.container = None
        pod.last_exit = code
        if pod.deleting:
            # Since Kubernetes 1.27 the kubelet gives a pod being deleted a terminal phase before it
            # goes; the operator may see it Failed with this code first. Strict: under ExitCode a
            # code below 128 then fails the job (a SIGTERMed launcher that exits 1 loses the job).
            if self.policy == EXIT_CODE and 0 < code < 128 and self.outcome is None:
                self._finish("Failed", f"{pod.name} exited {code} while being deleted (< 128: not retryable)")
            return
        if self.pod_policy == ALWAYS or (self.pod_policy == ON_FAILURE and code != 0):
            if now - c.started >= CRASH_BACKOFF_RESET_S:
                pod.crashes = 0
            delay = (
                0.0 if pod.crashes == 0 else min(CRASH_BACKOFF_MAX_S, CRASH_BACKOFF_INITIAL_S * 2 ** (pod.crashes - 1))
            )
            pod.crashes += 1
            pod.start_at = now + delay
            self.log(f"kubelet: restart {pod.name} in place in {delay:.0f} s")
        else:
            pod.phase = "Succeeded" if code == 0 else "Failed"

    def _kubelet(self) -> None:
        now = time.time()
        for index, pod in list(self.pods.items()):
            c = pod.container
            if c is not None and c.proc.poll() is not None:
                self._container_ended(pod)
            if pod.deleting:
                assert pod.deleting_since is not None
                if pod.container is not None and now - pod.deleting_since >= self.grace_period:
                    self.log(f"{pod.name}: grace period over, SIGKILL")
                    kill_all(pod.container.token)
                if pod.container is None:
                    del self.pods[index]
                    self.log(f"{pod.name} (uid {pod.uid}) is gone")
                continue
            if pod.container is None and pod.start_at is not None and now >= pod.start_at:
                if pod.phase == "Running":
                    pod.restart_count += 1
                self._start_container(pod)

    # ------------------------------------------------------------------ operator

    def _finish(self, outcome: str, reason: str, delete_all: bool = False) -> None:
        self.outcome, self.outcome_reason, self.finished_at = outcome, reason, time.time()
        self.log(f"job {outcome}: {reason}")
        for index, pod in list(self.pods.items()):
            if delete_all or self.clean_pod_policy == "All":
                self.delete_pod(index, f"job {outcome}: cleanup")
            elif self.clean_pod_policy == "Running" and pod.phase in ("Running", "Pending"):
                self.delete_pod(index, f"job {outcome}: cleanPodPolicy Running")

    def _operator(self) -> None:
        if self.outcome is not None:
            return
        pods = list(self.pods.values())
        failed_phase = sum(p.phase == "Failed" for p in pods)
        active = sum(p.phase in ("Pending", "Running") and not p.deleting for p in pods)
        if self.backoff_limit is not None:
            limit = self.backoff_limit
            new_failure = failed_phase > self._prev_failed
            exceeds = new_failure and active != self.replicas and 0 + 1 > limit  # requeues: 0
            restarts = sum(p.restart_count for p in pods if p.phase == "Running") if self.policy != NEVER else 0
            past = restarts > 0 if limit == 0 else restarts >= limit
            if exceeds or past:
                self._finish("Failed", f"backoffLimit {limit} reached ({restarts} container restarts)", True)
                return
        # ReconcilePods: create what is missing, replace what failed and may be retried.
        for index in range(self.replicas):
            pod = self.pods.get(index)
            if pod is None:
                if index not in self.held:
                    self._create(index, self.schedule_delay)
                continue
            if pod.phase == "Failed" and not pod.deleting:
                code = pod.last_exit if pod.last_exit is not None else 0
                if (self.policy == EXIT_CODE and code >= 128) or self.policy in (ON_FAILURE, ALWAYS):
                    self.log(f"operator: {pod.name} failed with {code}: delete and recreate")
                    self.delete_pod(index, "failed, retryable")
                elif self.policy == EXIT_CODE:
                    self._finish("Failed", f"{pod.name} exited {code} (< 128: not retryable under ExitCode)")
                    return
        # UpdateJobStatus
        succeeded = sum(p.phase == "Succeeded" for p in pods)
        running = sum(p.phase == "Running" and not p.deleting for p in pods)
        failed = failed_phase + sum(p.phase == "Running" and p.deleting for p in pods)
        self._prev_failed = failed
        if succeeded > 0:
            self._finish("Succeeded", f"{succeeded} Worker pod(s) succeeded (elastic: any worker)")
            return
        if failed > 0 and self.replicas > succeeded + running:
            if self.policy == NEVER:
                self._finish("Failed", f"{failed} Worker pod(s) failed under restartPolicy Never")
            elif not self._restarting_logged:
                self.log(f"operator: job restarting ({failed} Worker pod(s) failed)")
                self._restarting_logged = True
        else:
            self._restarting_logged = False

    # ------------------------------------------------------------------ driving

    def tick(self) -> None:
        """One round of kubelet and operator (call every few tens of ms)."""
        self._kubelet()
        self._operator()

    def alive(self) -> list[Pod]:
        return [p for p in self.pods.values() if p.container is not None]

    def stop_everything(self) -> None:
        for pod in self.pods.values():
            if pod.container is not None:
                kill_all(pod.container.token)
                with contextlib.suppress(Exception):
                    pod.container.proc.wait(5)

    @contextlib.contextmanager
    def running(self) -> Iterator[Cluster]:
        try:
            yield self
        finally:
            self.stop_everything()


def read_events(path: Path) -> list[dict[str, Any]]:
    """The training's event log (lines written whole; a torn last line is skipped)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out
