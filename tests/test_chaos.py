"""Chaos: pods of an elastic job die, the store host included, and the job finishes with nothing lost.

Three parts:

- the simulated operator and kubelet of ``bench/chaos_sim.py`` (a fast model, no figure comes from
  it) against the rules of the training operator v1.9 and the kubelet, with stand-in containers (a
  few lines of Python that exit when told), and one run of the model's harness (``bench/chaos.py``);
- the checks of the cluster harness (``bench/chaos_cluster.py``): the commit chain refuses a forged
  or duplicate commit;
- on the one-machine cluster (marker ``cluster``: ``make test``), one run each of classes 2
  (worker-0 killed), 8 (a partition), 9 (a Node lost), 14 (a pod failing for good while the
  other is in a collective or init_process_group) and 15 (a container SIGKILLed at every start,
  the task's backoff_limit the budget) with our pod entrypoint and the restart policy
  the renderer writes, at once on Nodes of their own (the full matrix is ``make chaos``). A failing
  run names its seed and the command that reruns it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import elastic_idl as ei

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import chaos  # noqa: E402
import chaos_cluster  # noqa: E402
import chaos_sim  # noqa: E402
import chaos_train  # noqa: E402

#: A stand-in container: records each start, then exits with the code written to exit-<pod>.
#: With CHILD=1 it first starts a child in a session of its own (as torchrun does with workers);
#: with IGNORE_TERM=1 it ignores SIGTERM.
STAND_IN = """
import os, pathlib, signal, subprocess, sys, time
if os.environ.get("IGNORE_TERM") == "1":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
d = pathlib.Path(os.environ["STAND_IN_DIR"])
name = os.environ["HOSTNAME"]
with open(d / f"starts-{name}", "a") as f:
    f.write("x")
if os.environ.get("CHILD") == "1":
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    (d / f"child-{name}").write_text(str(child.pid))
while True:
    f = d / f"exit-{name}"
    if f.exists():
        code = int(f.read_text())
        f.unlink()
        sys.exit(code)
    time.sleep(0.02)
"""


def _job(policy: str, *, backoff_limit: int | None = None) -> dict[str, Any]:
    custom, _, version = ei.Elastic(nnodes=2).to_template()
    options = ei.JobOptions(name="sim", image="x", command=["python", "-c", STAND_IN])
    job = ei.render_pytorchjob(custom, options, task_type_version=version)
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = policy
    if backoff_limit is not None:
        job["spec"]["runPolicy"]["backoffLimit"] = backoff_limit
    return job


class Sim:
    def __init__(self, tmp: Path, job: dict[str, Any], **kwargs: Any) -> None:
        self.dir = tmp / "stand-in"
        self.dir.mkdir(parents=True)
        env = {"STAND_IN_DIR": str(self.dir)} | kwargs.pop("env", {})
        self.cluster = chaos_sim.Cluster(
            job, tmp / "pods", 1, schedule_delay=0.0, grace_period=kwargs.pop("grace_period", 5.0), extra_env=env
        )

    def until(self, what: Callable[[], bool], timeout: float = 20.0) -> None:
        deadline = time.time() + timeout
        while not what():
            assert time.time() < deadline, "\n".join(e.what for e in self.cluster.events)
            self.cluster.tick()
            time.sleep(0.02)

    def starts(self, index: int) -> int:
        f = self.dir / f"starts-sim-worker-{index}"
        return len(f.read_text()) if f.exists() else 0

    def exit(self, index: int, code: int) -> None:
        (self.dir / f"exit-sim-worker-{index}").write_text(str(code))

    def running(self) -> None:
        self.until(lambda: self.starts(0) >= 1 and self.starts(1) >= 1)


@pytest.fixture
def sim(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., Sim]]:
    made: list[Sim] = []

    def make(job: dict[str, Any], **kwargs: Any) -> Sim:
        s = Sim(tmp_path / str(len(made)), job, **kwargs)
        made.append(s)
        return s

    yield make
    for s in made:
        s.cluster.stop_everything()


def test_never_a_failed_pod_fails_the_job_and_cleanpod_none_leaves_the_other(sim: Callable[..., Sim]) -> None:
    s = sim(_job("Never"))
    s.running()
    s.exit(1, 1)
    s.until(lambda: s.cluster.outcome is not None)
    assert (s.cluster.outcome, s.starts(1)) == ("Failed", 1)
    assert [p.name for p in s.cluster.alive()] == ["sim-worker-0"]  # cleanPodPolicy None (the default)


def test_never_a_deleted_pod_fails_the_job_before_it_is_recreated(sim: Callable[..., Sim]) -> None:
    # pkg/core/status.go: a Running pod being deleted counts as failed; under Never that ends the job.
    s = sim(_job("Never"))
    s.running()
    s.cluster.delete_pod(0, "drain")
    s.cluster.tick()
    assert s.cluster.outcome == "Failed"
    s.until(lambda: 0 not in s.cluster.pods)
    s.cluster.tick()
    assert 0 not in s.cluster.pods and s.starts(0) == 1


def test_onfailure_restarts_in_place_with_the_crash_backoff(sim: Callable[..., Sim]) -> None:
    s = sim(_job("OnFailure"))
    s.running()
    uid = s.cluster.pods[1].uid
    s.exit(1, 3)
    s.until(lambda: s.starts(1) == 2)  # the first restart is immediate
    pod = s.cluster.pods[1]
    assert (pod.uid, pod.name, pod.restart_count, s.cluster.outcome) == (uid, "sim-worker-1", 1, None)
    s.exit(1, 137)
    s.until(lambda: s.cluster.pods[1].start_at is not None)
    start_at = s.cluster.pods[1].start_at
    assert start_at is not None and start_at - time.time() > chaos_sim.CRASH_BACKOFF_INITIAL_S - 1
    s.exit(0, 0)  # an elastic job succeeds with any worker
    s.until(lambda: s.cluster.outcome is not None)
    assert s.cluster.outcome == "Succeeded"


def test_exitcode_recreates_on_128_and_up_and_fails_below(sim: Callable[..., Sim]) -> None:
    s = sim(_job("ExitCode"))
    s.running()
    uid = s.cluster.pods[1].uid
    s.exit(1, 200)
    s.until(lambda: s.starts(1) == 2)
    assert s.cluster.pods[1].uid != uid and s.cluster.pods[1].restart_count == 0  # a new pod, same name
    assert s.cluster.outcome is None
    s.exit(1, 3)
    s.until(lambda: s.cluster.outcome is not None)
    assert s.cluster.outcome == "Failed" and "not retryable" in s.cluster.outcome_reason


def test_backoff_limit_counts_container_restarts_and_deletes_every_pod(sim: Callable[..., Sim]) -> None:
    s = sim(_job("OnFailure", backoff_limit=2))
    s.running()
    s.exit(0, 1)
    s.until(lambda: s.starts(0) == 2)
    assert s.cluster.outcome is None  # 1 restart < 2
    s.exit(1, 1)
    s.until(lambda: s.cluster.outcome is not None)
    assert s.cluster.outcome == "Failed" and "backoffLimit 2" in s.cluster.outcome_reason
    assert all(p.deleting for p in s.cluster.pods.values())  # whatever cleanPodPolicy says


@pytest.mark.parametrize(("ignore_term", "code"), [("0", 128 + signal.SIGTERM), ("1", 128 + signal.SIGKILL)])
def test_a_drained_pod_gets_sigterm_then_sigkill_and_is_recreated_under_onfailure(
    sim: Callable[..., Sim], ignore_term: str, code: int
) -> None:
    s = sim(_job("OnFailure"), grace_period=0.5, env={"IGNORE_TERM": ignore_term})
    s.running()
    uid = s.cluster.pods[0].uid
    t0 = time.time()
    s.cluster.delete_pod(0, "drain")
    s.until(lambda: s.starts(0) == 2)
    assert s.cluster.pods[0].uid != uid and s.cluster.outcome is None
    (term,) = [t for t in s.cluster.terminations if t.uid == uid]
    assert term.deleted and term.exit_code == code
    assert (term.finished - t0 >= 0.5) == (ignore_term == "1")  # SIGKILL only after the grace period


def test_a_container_death_kills_processes_outside_its_process_group(sim: Callable[..., Sim]) -> None:
    s = sim(_job("Never"), env={"CHILD": "1"})
    s.running()
    s.until(lambda: (s.dir / "child-sim-worker-1").exists())
    child = int((s.dir / "child-sim-worker-1").read_text())
    assert os.getpgid(child) != s.cluster.pods[1].container.proc.pid  # type: ignore[union-attr]
    s.cluster.kill_container(1)
    s.until(lambda: s.cluster.outcome is not None)
    s.until(lambda: not Path(f"/proc/{child}").exists(), timeout=5.0)


def test_the_reference_state_is_order_and_count_sensitive() -> None:
    ref = chaos_train.reference(7, 20, 16)
    assert (ref["step"], ref["applied"]) == (20, list(range(20)))
    total = [sum(chaos_train.sample(7, s, i) for i in range(16)) for s in range(20)]
    # The world size does not change a step's total; the shares add up to it.
    assert sum(chaos_train.share(7, 3, 16, r, 3) for r in range(3)) == total[3]
    acc = 0
    for s in [*range(10), 9, *range(10, 20)]:  # step 9 applied twice
        acc = chaos_train.fold(acc, s, total[s])
    assert acc != ref["acc"]
    acc = 0
    for s in [1, 0, *range(2, 20)]:  # two steps swapped
        acc = chaos_train.fold(acc, s, total[s])
    assert acc != ref["acc"]


# --------------------------------------------------------------------------- the model's harness, once


def test_the_models_harness_runs_the_store_hosts_loss() -> None:
    pytest.importorskip("torch")
    seed = int(os.environ.get("CHAOS_SEED", "13"))
    result = chaos.run_once("kill-host", seed, launcher="ours", limit_s=150.0)
    assert result.ok, f"kill-host failed with seed {seed}: {result.why}\nrerun: {result.rerun()}\nkept: {result.kept}"


# --------------------------------------------------------------------------- the cluster harness's checks


def _chain(n: int, world: int = 2, seed: int = 3) -> list[dict[str, Any]]:
    """Commit records as chaos_train writes them, for n commits of 5 steps."""
    out, parent, acc = [], chaos_train.ROOT, 0
    for i in range(n):
        for step in range(5 * i, 5 * i + 5):
            acc = chaos_train.fold(acc, step, sum(chaos_train.sample(seed, step, j) for j in range(8)))
        rec = {"t": float(i), "step": 5 * i + 5, "prev": 5 * i, "acc": acc, "applied": list(range(5 * i + 5)),
               "world": world, "ranks": (1 << world) - 1, "members": [f"{m:016x}" for m in range(world)],
               "restart": 0, "pod": "chaos-worker-0", "parent": parent}  # fmt: skip
        rec["id"] = chaos_train.commit_id(rec)
        parent = rec["id"]
        out.append(rec)
    return out


def _judge_chain(tmp_path: Path, commits: list[dict[str, Any]]) -> str:
    run = chaos_cluster.Run.__new__(chaos_cluster.Run)
    run.cls, run.seed, run.side = chaos_cluster.CLASSES[0], 3, "torchrun"
    run.defaults = None
    run.result = chaos_cluster.Result(0, "none", "torchrun", 3)
    run.shared, run.dir = tmp_path / "shared", tmp_path
    run.shared.mkdir(exist_ok=True)
    (run.shared / "commits.jsonl").write_text("".join(json.dumps(c) + "\n" for c in commits))
    run.events, run.lifecycle, run.faultlog, run.job, run.pods, run.dns_seen, run.t0 = [], [], [], {}, {}, [], 0.0
    run.judge(capped=False)
    return run.result.reason


CHAIN_EDITS = {
    "a step committed twice": (lambda c: c.insert(2, dict(c[1])), "not on the last commit"),
    "a commit's world changed": (
        lambda c: c.__setitem__(2, {**c[2], "world": 1, "members": c[2]["members"][:1]}),
        "does not match",
    ),
    "a commit's ranks changed": (lambda c: c.__setitem__(1, {**c[1], "ranks": 1}), "does not match"),
    "a resume from an older commit": (lambda c: c.pop(1), "not on the last commit"),
}


@pytest.mark.parametrize("case", CHAIN_EDITS)
def test_the_commit_chain_refuses_a_duplicate_a_forgery_and_a_resume_from_an_older_commit(
    tmp_path: Path, case: str
) -> None:
    edit, reason = CHAIN_EDITS[case]
    commits = _chain(4)
    assert "commit" not in _judge_chain(tmp_path, commits)
    edit(commits)
    assert reason in _judge_chain(tmp_path, commits)


def test_the_commit_chain_refuses_a_commit_its_ranks_did_not_all_make(tmp_path: Path) -> None:
    commits = _chain(3)
    commits[1]["ranks"] = 1  # one rank's shares only, yet a world of 2
    commits[1]["id"] = chaos_train.commit_id(commits[1])
    commits[2]["parent"] = commits[1]["id"]
    commits[2]["id"] = chaos_train.commit_id(commits[2])
    assert "world 2 but ranks mask 1" in _judge_chain(tmp_path, commits)


# --------------------------------------------------------------------------- on the cluster

CLUSTER_CLASSES = (2, 8, 9, 14, 15)
#: Known failures, with the reason (strict: a pass fails the test, so the mark goes once fixed).
CLUSTER_XFAIL: dict[int, str] = {}


def test_the_pages_show_the_committed_chaos_matrix() -> None:
    """Every chaos figure of docs/guide/when-pods-die.md and bench/README.md is the committed results file's (issue 21)."""
    records = json.loads(chaos_cluster.RESULTS.read_text())["runs"]
    sides = {side for r in records for side in [r["side"]]}
    assert sides == set(chaos_cluster.SIDES)
    faults = set(chaos_cluster.CLASSES) - {0}
    assert {r["class"] for r in records} == faults, "every fault class (issues 21, 30 and 35)"
    for side, least in (("ours", 10), ("torchrun", 5)):
        for number in sorted(faults):
            runs = [r for r in records if (r["class"], r["side"]) == (number, side)]
            assert len(runs) >= least, (number, side, len(runs))
    assert chaos_cluster.untraceable(records) == [], "every record names a commit of main's history (issue 30)"
    assert chaos_cluster.side_by_side(records) in (BENCH.parent / "docs" / "guide" / "when-pods-die.md").read_text()
    assert chaos_cluster.table(records) in (BENCH / "README.md").read_text()
    assert chaos_cluster.table(records) in chaos_cluster.SUMMARY.read_text()


def test_the_page_shows_the_committed_defaults_table() -> None:
    """Issue 30 item 8: every fault class under each defaults users have, on the cluster, 5 runs or
    more each, from a commit of main's history; docs/guide/when-pods-die.md shows that table."""
    records = json.loads(chaos_cluster.DEFAULTS_RESULTS.read_text())["runs"]
    for name, d in chaos_cluster.DEFAULTS.items():
        for number in range(1, 16):
            runs = [r for r in records if (r["class"], r.get("defaults")) == (number, name)]
            assert len(runs) >= 5, (number, name, len(runs))
            assert {r["side"] for r in runs} == {d.side}, (number, name)
    assert chaos_cluster.untraceable(records) == []
    page = (BENCH.parent / "docs" / "guide" / "when-pods-die.md").read_text()
    assert chaos_cluster.defaults_table(records) in page


@pytest.fixture(scope="module")
def cluster_runs() -> Iterator[dict[int, chaos_cluster.Result]]:
    """One run of each of CLUSTER_CLASSES with our entrypoint on a cluster of this module, as many
    at once as its real Nodes allow (a lane of 3 Nodes a run, 14 Nodes at most: 4 lanes)."""
    import subprocess

    state = chaos_cluster.ct.default_state_dir("cluster-test")
    env = {**os.environ, "CLUSTER_DIR": str(state)}
    cmd = [sys.executable, str(BENCH.parent / "cluster" / "cluster.py")]
    lanes = min(len(CLUSTER_CLASSES), chaos_cluster.ct.realnode.MAX_REAL_NODES // chaos_cluster.NODES_PER_LANE)
    nodes = str(lanes * chaos_cluster.NODES_PER_LANE)
    seed = int(os.environ.get("CHAOS_SEED", "13"))
    try:
        up = subprocess.run(
            [*cmd, "up", "--nodes", nodes],
            env=env,
            capture_output=True,
            text=True,
            timeout=3600,
        )
        if up.returncode != 0:
            pytest.fail(f"cluster up failed: {up.stderr.strip()}\n{up.stdout[-2000:]}")
        kube = chaos_cluster.Kube(state)
        chaos_cluster.label_lanes(kube, lanes)
        plan = [(chaos_cluster.CLASSES[n], "ours", seed, None) for n in CLUSTER_CLASSES]
        done = chaos_cluster.run_plan(kube, plan, lanes, chaos_cluster.Results(None), False, chaos_cluster.say)
        kube.close()
        yield {r.number: r for r in done}
    finally:
        subprocess.run([*cmd, "down"], env=env, capture_output=True, text=True, timeout=300, check=True)


@pytest.mark.cluster
@pytest.mark.parametrize(
    "number",
    [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=CLUSTER_XFAIL[n])) if n in CLUSTER_XFAIL else n
        for n in CLUSTER_CLASSES
    ],
)
def test_fault_class_on_the_cluster(cluster_runs: dict[int, chaos_cluster.Result], number: int) -> None:
    r = cluster_runs[number]
    resumed = "-" if r.fault_to_resumed_s is None else f"{r.fault_to_resumed_s:.1f}"
    print(f"\nclass {number} ({r.name}): {r.reason}, {r.wall_s:.1f} s, fault -> resumed {resumed} s, seed {r.seed}")
    assert r.passed, f"class {number} ({r.name}) failed with seed {r.seed}: {r.reason}\nrerun: {r.rerun()}"
