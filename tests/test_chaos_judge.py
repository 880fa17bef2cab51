"""The chaos matrix's judge and its records, without a cluster (issue 30, items 9 and 10).

Each hole the judge had gets a synthetic run folder, written here as a run on the cluster leaves it
(``record/`` from the harness and cluster/faults.py's logs, ``shared/`` from the training) and read back by
``Run.from_record``: a bad one that the judge must fail and a matching good one that it must pass.
The records: a run that records refuses a tree that is not a commit of main's history (a
temporary git repository), a rerun of a seed is appended beside the earlier run, and a failed
run's folder is kept compressed beside the results file (a fake run through ``main``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any, ClassVar

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import chaos_cluster as cc  # noqa: E402
import chaos_train  # noqa: E402

T0 = 1_800_000_000.0
TICK = 0.06  # between two events of the story


def _stamp(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")


class Story:
    """A run of one fault class told event by event, written as the run's folder."""

    def __init__(self, tmp: Path, number: int, *, seed: int = 3, side: str = "ours", defaults: str = "") -> None:
        self.cls = cc.CLASSES[number]
        self.seed, self.side = seed, side
        self.folder = tmp / f"chaos-{number:02d}-{defaults or side}-{seed}"
        self.t = T0 + 1.0
        self.events: list[dict[str, Any]] = []
        self.commits: list[dict[str, Any]] = []
        self.lifecycle: list[dict[str, Any]] = []
        self.reports: list[tuple[str, float, dict[str, Any]]] = []
        self.result = cc.Result(
            number, self.cls.name, side, seed, t0=T0, date="2027-01-15T08:00:00Z", defaults=defaults
        )
        self.uids: dict[str, str] = {}
        self.nodes = {cc.JOB + "-worker-0": "node-a", cc.JOB + "-worker-1": "node-b"}
        self.condition: tuple[str, float] | None = None
        self.output_t: float | None = None
        self.poison: dict[str, Any] | None = None
        self.attempts = 0
        for pod in self.nodes:
            self.start_pod(pod)

    def tick(self, dt_s: float = TICK) -> float:
        self.t += dt_s
        return self.t

    def pod(self, index: int) -> str:
        return f"{cc.JOB}-worker-{index}"

    # -- the lifecycle log (cluster/faults.py's, from containerd's events)

    def start_pod(self, pod: str, node: str | None = None) -> None:
        self.uids[pod] = f"{pod}-uid-{len(self.lifecycle)}"
        if node is not None:
            self.nodes[pod] = node
        self.lifecycle.append({"t": self.tick(), "event": "start", "ns": self.folder.name, "pod": pod,
                               "uid": self.uids[pod], "node": self.nodes[pod], "container": "pytorch", "restart": 0})  # fmt: skip

    def exit_pod(self, pod: str, code: int, killed_by: str | None = None, report: str | None = None) -> None:
        t = self.tick()
        if report is not None:
            start = next(r["t"] for r in self.lifecycle if r["uid"] == self.uids[pod] and r["event"] == "start")
            body = {"failures": [{"rank": 0, "node": pod, "message": report}], "runId": "chaos", "attempts": 4,
                    "summary": f"{pod}: {report}"}  # fmt: skip
            self.reports.append((pod, start + 0.2, body))
        self.lifecycle.append({"t": t, "event": "exit", "ns": self.folder.name, "pod": pod, "uid": self.uids[pod],
                               "node": self.nodes[pod], "container": "pytorch", "restart": 0, "code": code,
                               "killed_by": killed_by})  # fmt: skip

    def fault(self, what: str) -> float:
        t = self.tick()
        self.result.faults.append((round(t - T0, 2), what))
        return t

    # -- the training (chaos_train's records)

    def train(self, world: int, upto: int, *, rank0: int = 0, start: int | None = None, commit: bool = True,
              skip_commit: frozenset[int] = frozenset(), interleave: list[dict[str, Any]] | None = None) -> None:  # fmt: skip
        """One attempt: a world of `world` resumes from the last commit (or `start`, with no
        state) and runs its steps up to `upto`, committing every CHECKPOINT_EVERY (unless
        `commit` is false or the step is in `skip_commit`)."""
        last = self.commits[-1] if self.commits else None
        state = {"step": last["step"], "acc": last["acc"], "applied": list(last["applied"])} if last else {
            "step": 0, "acc": 0, "applied": []}  # fmt: skip
        parent = last["id"] if last else chaos_train.ROOT
        if start is not None:
            state = {"step": start, "acc": 0, "applied": []}
        self.attempts += 1
        attempt = f"{self.attempts:016x}"
        pod = self.pod(rank0)
        events = self.events if interleave is None else interleave
        events.append({"event": "start", "t": self.tick(), "world": world, "from": state["step"],
                       "restart": self.attempts - 1, "pod": pod, "attempt": attempt})  # fmt: skip
        since = state["step"]
        for step in range(state["step"], upto):
            total = sum(chaos_train.sample(self.seed, step, i) for i in range(cc.BATCH))
            state = {"step": step + 1, "acc": chaos_train.fold(state["acc"], step, total),
                     "applied": [*state["applied"], step]}  # fmt: skip
            done = state["step"] % cc.CHECKPOINT_EVERY == 0 or state["step"] == self.cls.steps
            if commit and done and state["step"] not in skip_commit:
                rec = {"t": self.tick(0.01), "step": state["step"], "prev": since, "acc": state["acc"],
                       "applied": state["applied"], "world": world, "ranks": (1 << world) - 1,
                       "members": [f"{self.attempts:08x}{m:08x}" for m in range(world)],
                       "restart": self.attempts - 1, "pod": pod, "parent": parent}  # fmt: skip
                rec["id"] = chaos_train.commit_id(rec)
                self.commits.append(rec)
                parent = rec["id"]
            if done:
                since = state["step"]
            events.append({"event": "step", "t": self.tick(), "step": step + 1, "world": world, "pod": pod,
                           "attempt": attempt})  # fmt: skip

    def merge(self, other: list[dict[str, Any]], shift: float) -> None:
        """Events of a second world, moved `shift` seconds later, among this story's."""
        self.events = sorted(self.events + [{**e, "t": e["t"] + shift} for e in other], key=lambda e: e["t"])

    # -- the end

    def succeed(self, *, output_late: float | None = None) -> None:
        """Rank 0's pod (worker-0) writes the output, worker-1's pod exits 0, then worker-0's; with
        `output_late`, the output is written that long after worker-1's exit instead."""
        if output_late is None:
            self.output_t = self.tick()
        self.exit_pod(self.pod(1), 0)
        if output_late is not None:
            self.output_t = self.t + output_late
            self.tick(output_late + 0.05)
        self.exit_pod(self.pod(0), 0)
        self.condition = ("Succeeded", self.t)

    def fail(self) -> None:
        self.condition = ("Failed", self.tick())

    def write(self) -> Path:
        rec, shared = self.folder / "record", self.folder / "shared"
        (shared / "failures").mkdir(parents=True)
        rec.mkdir()
        (shared / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in self.events))
        (shared / "commits.jsonl").write_text("".join(json.dumps(c) + "\n" for c in self.commits))
        for pod, t, body in self.reports:
            (shared / "failures" / f"{pod}.{_stamp(t)}.{40 + len(body)}.json").write_text(json.dumps(body))
        if self.poison is not None:
            (shared / "poison.json").write_text(json.dumps(self.poison))
        if self.output_t is not None:
            ref = chaos_train.reference(self.seed, self.cls.steps, cc.BATCH)
            out = shared / "result.json"
            out.write_text(json.dumps({"run_id": "chaos", "rank": 0, "return_value": {"step": ref["step"],
                                                                                      "acc": ref["acc"]}}))  # fmt: skip
            os.utime(out, (self.output_t, self.output_t))
        (rec / "lifecycle.jsonl").write_text("".join(json.dumps(x) + "\n" for x in self.lifecycle))
        (rec / "faults.jsonl").write_text("")
        conditions = []
        if self.condition is not None:
            when = dt.datetime.fromtimestamp(int(self.condition[1]), dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            conditions.append({"type": self.condition[0], "status": "True", "lastTransitionTime": when})
        (rec / "job.json").write_text(json.dumps({"status": {"conditions": conditions}}))
        (rec / "pods.json").write_text("{}")
        (rec / "result.json").write_text(json.dumps(asdict(self.result)))
        return self.folder


def verdict(folder: Path) -> cc.Result:
    run = cc.Run.from_record(folder)
    run.judge(run.result.capped)
    return run.result


def passes(story: Story) -> None:
    r = verdict(story.write())
    assert r.passed, r.reason


def fails(story: Story, reason: str) -> str:
    r = verdict(story.write())
    assert not r.passed and reason in r.reason, r.reason
    return r.reason


# --------------------------------------------------------------------------- the reference run


def test_a_fault_free_run_told_as_the_cluster_records_it_passes(tmp_path: Path) -> None:
    s = Story(tmp_path, 0)
    s.train(2, cc.STEPS)
    s.succeed()
    passes(s)


def test_a_run_judged_twice_gets_the_same_verdict(tmp_path: Path) -> None:
    """The verdict's own notes (class 10's training time) are not taken for the scenario's problems."""
    s = Story(tmp_path, 10)
    s.train(2, cc.STEPS)
    s.succeed()
    run = cc.Run.from_record(s.write())
    for _ in range(2):
        run.judge(False)
        assert run.result.passed and [n[:14] for n in run.result.notes] == ["training took "], run.result.reason


# --------------------------------------------------------------------------- hole 1: a world below min_replicas


def _shrinks(tmp_path: Path, number: int) -> Story:
    """A world of 2, then a world of 1 that commits steps 25-40, then a world of 2 to the end."""
    s = Story(tmp_path, number)
    s.train(2, 23)
    s.fault("SIGKILL worker-1's container")
    s.train(1, 43)
    s.train(2, s.cls.steps)
    s.succeed()
    return s


def test_a_world_below_min_replicas_that_commits_fails(tmp_path: Path) -> None:
    fails(_shrinks(tmp_path, 1), "commit of step 25 by a world of 1, outside nnodes 2 (min_replicas 2)")


def test_a_world_of_one_that_commits_passes_where_nnodes_allows_it(tmp_path: Path) -> None:
    passes(_shrinks(tmp_path, 5))  # class 5: nnodes 1:2


def test_a_world_below_min_replicas_that_trains_without_committing_fails(tmp_path: Path) -> None:
    s = Story(tmp_path, 1)
    s.train(2, 23)
    s.fault("SIGKILL worker-1's container")
    s.train(1, 24, commit=False)
    s.train(2, cc.STEPS)
    s.succeed()
    fails(s, "started with a world of 1, outside nnodes 2 (min_replicas 2)")


# --------------------------------------------------------------------------- hole 2: a second world that never commits


def test_a_second_world_that_trains_without_committing_fails(tmp_path: Path) -> None:
    s = Story(tmp_path, 0)
    s.train(2, cc.STEPS)
    second: list[dict[str, Any]] = []
    t = s.t
    s.t = T0 + 3.0  # while the first world is in its steps 30-60
    s.train(2, 40, rank0=1, start=10, commit=False, interleave=second)
    s.t = t
    s.merge(second, 0.0)
    s.succeed()
    fails(s, "two worlds trained at once")


def test_a_second_world_after_the_first_stopped_passes(tmp_path: Path) -> None:
    s = Story(tmp_path, 1)
    s.train(2, 23)
    s.fault("SIGKILL worker-1's container")
    s.exit_pod(s.pod(1), 137, killed_by="kill")
    s.start_pod(s.pod(1))
    s.train(2, cc.STEPS, rank0=1)
    s.succeed()
    passes(s)


# --------------------------------------------------------------------------- hole 3: a whole interval lost


def _loses(tmp_path: Path, upto: int, skip: frozenset[int]) -> Story:
    s = Story(tmp_path, 3)
    s.train(2, upto, skip_commit=skip)
    s.fault("SIGKILL worker-1's worker process (pid 7 in the pod)")
    s.train(2, cc.STEPS)
    s.succeed()
    return s


def test_losing_exactly_the_checkpoint_interval_fails(tmp_path: Path) -> None:
    # Step 25's commit is missing: the resume from step 20 loses 5 steps, the whole interval.
    s = _loses(tmp_path, 25, frozenset({25}))
    assert fails(s, f"lost 5 steps at a resume, not fewer than the checkpoint interval {cc.CHECKPOINT_EVERY}")


def test_losing_less_than_the_checkpoint_interval_passes(tmp_path: Path) -> None:
    passes(_loses(tmp_path, 24, frozenset()))


# --------------------------------------------------------------------------- hole 4: the output when the job turned Succeeded


def test_an_output_written_after_a_pod_exited_0_fails(tmp_path: Path) -> None:
    s = Story(tmp_path, 0)
    s.train(2, cc.STEPS)
    s.succeed(output_late=0.3)
    fails(s, "the task's output was written 0.30 s after the job could turn Succeeded")


# --------------------------------------------------------------------------- hole 5: class 12 cordons the survivor's Node


def _unschedulable(tmp_path: Path, cordoned: list[str]) -> Story:
    s = Story(tmp_path, 12, seed=4)
    s.train(2, 23)
    at = s.fault(f"cordon {', '.join(cordoned)}")
    s.result.scenario = {"victim": 1, "cordoned": cordoned, "cordoned_at": at}
    s.fault("SIGKILL worker-1's container")
    s.exit_pod(s.pod(1), 137, killed_by="kill")
    s.fault("worker-1's replacement is Pending (unschedulable)")
    s.tick(75.0)
    s.fault("uncordon after 75 s Pending")
    s.start_pod(s.pod(1), node="node-c")
    s.train(2, cc.STEPS)
    s.succeed()
    return s


def test_class_12_cordoning_the_survivors_node_fails(tmp_path: Path) -> None:
    # The old scenario: every Node of the lane, worker-0's (the survivor's) node-a included.
    fails(_unschedulable(tmp_path, ["node-a", "node-b", "node-c"]), "the survivor's Node was cordoned too (node-a")


def test_class_12_cordoning_all_but_the_survivors_node_passes(tmp_path: Path) -> None:
    passes(_unschedulable(tmp_path, ["node-b", "node-c"]))


def test_class_12_renders_one_pod_per_node() -> None:
    """The replacement cannot go to the survivor's uncordoned Node: a required anti-affinity."""
    run = cc.Run(None, cc.CLASSES[12], "ours", 4, 0, Path("/nonexistent"))
    spec = run.render()["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    (term,) = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term == {"labelSelector": {"matchLabels": {cc.JOB_LABEL: cc.JOB}}, "topologyKey": "kubernetes.io/hostname"}
    other = cc.Run(None, cc.CLASSES[1], "ours", 4, 0, Path("/nonexistent")).render()
    assert "affinity" not in other["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]


# --------------------------------------------------------------------------- hole 6: class 14 never fails the store host


def _fails_for_good(tmp_path: Path, seed: int, poisoned: int, code: int, root: str) -> Story:
    """`poisoned` fails for good at step 32 and its pod exits `code` (with `root` as its report's
    root cause); the job fails, and the other pod exits 3 after, blaming the peer."""
    s = Story(tmp_path, 14, seed=seed)
    s.train(2, 32)
    s.poison = {"pod": s.pod(poisoned), "at_step": 32, "at_init": cc.fail_for_good_plan(seed)[1]}
    s.fault(f"worker-{poisoned} fails for good (in a collective)")
    s.exit_pod(s.pod(poisoned), code, report=root)
    s.fail()
    s.exit_pod(s.pod(1 - poisoned), 3, report="RuntimeError: Connection closed by peer")
    return s


POISON_0 = "RuntimeError: poison: chaos-worker-0 fails for good at step 32"


def test_class_14_seeds_fail_the_store_host_and_the_other_pod_both_ways() -> None:
    for seeds in (range(1000, 1005), range(1000, 1010)):  # stock torchrun's seeds, ours
        assert {cc.fail_for_good_plan(seed) for seed in seeds} == {(0, False), (1, False), (0, True), (1, True)}


def test_class_14_that_poisons_worker_1_where_the_seed_picks_the_store_host_fails(tmp_path: Path) -> None:
    # The old scenario: always worker-1. Seed 4 picks worker-0, the store host.
    story = _fails_for_good(tmp_path, 4, 1, 3, "RuntimeError: poison: chaos-worker-1 fails for good at step 32")
    fails(story, "chaos-worker-1 failed for good (at_init False); the seed picks chaos-worker-0 (the store host)")


def test_class_14_where_the_store_host_exits_as_retryable_fails(tmp_path: Path) -> None:
    story = _fails_for_good(tmp_path, 4, 0, 200, "the rendezvous store is gone")
    fails(story, "chaos-worker-0 failed for good but never exited non-retryably (below 128; its exits: 200)")


def test_class_14_where_the_store_host_reports_another_root_cause_fails(tmp_path: Path) -> None:
    story = _fails_for_good(tmp_path, 4, 0, 3, "RuntimeError: Connection closed by peer")
    fails(story, "chaos-worker-0's FailureReport does not name its own error as the root cause")


def test_class_14_where_the_store_host_fails_for_good_and_ends_the_job_passes(tmp_path: Path) -> None:
    passes(_fails_for_good(tmp_path, 4, 0, 3, POISON_0))


# --------------------------------------------------------------------------- item 8: the defaults table


def _pod_lost_then_failed(tmp_path: Path, defaults: str) -> Story:
    """Class 1 under the defaults' max_restarts 0: worker-1's container killed, its replacement
    started 0.06 s later finds the job over (exit 3, a report), worker-0's round failed (exit 3, a
    report); the job Failed."""
    s = Story(tmp_path, 1, defaults=defaults, side=cc.DEFAULTS[defaults].side)
    s.train(2, 23)
    s.fault("SIGKILL worker-1's container")
    s.exit_pod(s.pod(1), 137, killed_by="fault")
    s.start_pod(s.pod(1))
    s.exit_pod(s.pod(1), 3, report="rendezvous is closed: the job already ended on another node")
    s.exit_pod(s.pod(0), 3, report="RuntimeError: Connection reset by peer")
    s.fail()
    return s


def test_with_defaults_a_failed_job_is_what_the_user_gets_and_is_timed_from_the_fault(tmp_path: Path) -> None:
    s = _pod_lost_then_failed(tmp_path, "ours")
    s.tick(2.0)
    s.fail()  # two seconds later: the condition's time is whole seconds, the figure is +- 0.5 s
    r = verdict(s.write())
    assert r.passed and r.outcome == "Failed", r.reason
    fault, failed = T0 + r.faults[0][0], s.condition[1] if s.condition else 0.0
    assert r.fault_to_failed_s is not None and abs(r.fault_to_failed_s - (int(failed) + 0.5 - fault)) < 0.051
    assert cc.outcome_of({"passed": r.passed, "outcome": r.outcome, "reason": r.reason}) == "failed"


def test_the_matrix_expects_the_class_outcome_where_defaults_do_not(tmp_path: Path) -> None:
    r = verdict(_pod_lost_then_failed(tmp_path, "ours").write())
    assert r.passed
    matrix = Story(tmp_path / "m", 1)
    matrix.train(2, 23)
    matrix.fault("SIGKILL worker-1's container")
    matrix.exit_pod(matrix.pod(1), 3, report="x")
    matrix.exit_pod(matrix.pod(0), 3, report="y")
    matrix.fail()
    fails(matrix, "job Failed, expected Succeeded")


def test_a_report_belongs_to_the_replacement_started_within_a_second_of_the_old_pods_end(tmp_path: Path) -> None:
    """The old judge gave the replacement's report to the killed pod (its window ran to its exit +
    1 s) and then found the replacement, which ended by itself, without one."""
    s = _pod_lost_then_failed(tmp_path, "ours")
    s.reports = [x for x in s.reports if x[0] != s.pod(1)]
    fails(s, "chaos-worker-1 (chaos-wo) ended by itself (exit 3) with 0 FailureReport(s), not 1")
    passes(_pod_lost_then_failed(tmp_path / "again", "ours"))


@pytest.mark.parametrize("defaults", ["", "flytekit"])
def test_a_job_that_failed_before_the_second_fault_is_cut_short_only_with_defaults(
    tmp_path: Path, defaults: str
) -> None:
    """Class 4 under Never: the first kill fails the job, so the second fault has no moment to come."""
    s = Story(tmp_path, 4, defaults=defaults, side="torchrun")
    s.train(2, 23)
    s.fault("SIGKILL worker-0's container")
    s.exit_pod(s.pod(0), 137, killed_by="fault")
    s.exit_pod(s.pod(1), 1)
    s.result.notes.append("the scenario timed out waiting for its moment")
    s.fail()
    if defaults:
        passes(s)
    else:
        fails(s, "the second fault never fired")


def test_class_15_with_defaults_states_no_budget_and_counts_the_starts(tmp_path: Path) -> None:
    s = Story(tmp_path, 15, defaults="ours")
    job = cc.Run(None, cc.CLASSES[15], "ours", 3, 0, tmp_path, cc.DEFAULTS["ours"]).render()
    assert "backoffLimit" not in job["spec"].get("runPolicy", {})
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "ExitCode"
    s.train(2, 10)
    for _ in range(3):
        s.fault("SIGKILL worker-1's container")
        s.exit_pod(s.pod(1), 137, killed_by="fault")
        s.start_pod(s.pod(1))
    s.train(2, s.cls.steps)
    s.succeed()
    r = verdict(s.write())
    assert r.passed, r.reason
    assert "worker-1 started 4 times (no budget stated)" in r.notes


def test_each_defaults_renders_its_max_restarts_and_restart_policy(tmp_path: Path) -> None:
    for d in cc.DEFAULTS.values():
        job = cc.Run(None, cc.CLASSES[1], "ours", 3, 0, tmp_path, d).render()
        worker = job["spec"]["pytorchReplicaSpecs"]["Worker"]
        assert job["spec"]["elasticPolicy"]["maxRestarts"] == d.max_restarts, d.name
        assert worker["restartPolicy"] == d.restart_policy, d.name
        command = worker["template"]["spec"]["containers"][0].get("command", [])
        assert (command == ["torchrun"]) == (d.side == "torchrun"), (d.name, command)


def test_the_defaults_table_sorts_runs_into_what_users_get() -> None:
    def rec(defaults: str, passed: bool, outcome: str | None, reason: str = "ok", **t: float) -> dict[str, Any]:
        return {"class": 1, "name": "kill-nonhost", "side": cc.DEFAULTS[defaults].side, "seed": 1000,
                "defaults": defaults, "passed": passed, "outcome": outcome, "reason": reason,
                "fault_to_resumed_s": t.get("resumed"), "fault_to_failed_s": t.get("failed")}  # fmt: skip

    records = [
        rec("ours", True, "Succeeded", resumed=10.0),
        rec("ours", True, "Succeeded", resumed=20.0),
        rec("ours", True, "Failed", failed=2.0),
        rec("flytekit", False, "Failed", "pods still running 90 s after the job Failed: chaos-worker-0", failed=0.5),
        rec("flytekit", False, None, "hang: no verdict within 300 s (job running, pods running: none)"),
        rec("flyte2", False, "Succeeded", "committed state differs from the fault-free run's: step 95"),
    ]
    assert [cc.outcome_of(r) for r in records] == [
        "recovered", "recovered", "failed", "failed, a pod left running", "hang", "wrong"
    ]  # fmt: skip
    table = cc.defaults_table(records).splitlines()
    assert table[0] == "| # | fault | flytekit defaults | Flyte 2 defaults | elastic-idl defaults |"
    assert table[2] == (
        "| 1 | SIGKILL of worker-1's container | failed, a pod left running 1/2 in 0.5 s; hang 1/2 | wrong 1/1 | "
        "recovered 2/3 in 15.0 s (worst 20.0); failed 1/3 in 2.0 s |"
    )
    reasons = cc.defaults_reasons(records)
    assert "seed 1000: hang: no verdict" in reasons and "wrong: committed state differs" in reasons
    assert "elastic-idl" not in reasons and "left running" not in reasons  # counted in the table only


# --------------------------------------------------------------------------- item 10: a commit of main's history


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_SYSTEM": os.devnull}  # fmt: skip
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    (r / "src").mkdir(parents=True)
    (r / "bench" / "results").mkdir(parents=True)
    (r / "src" / "a.py").write_text("a = 1\n")
    (r / "bench" / "results" / "chaos-cluster.json").write_text('{"runs": []}\n')
    _git(r, "init", "-q", "-b", "main")
    _git(r, "add", ".")
    _git(r, "commit", "-q", "-m", "one")
    return r


def test_a_clean_checkout_of_main_names_its_full_commit(repo: Path) -> None:
    head = _git(repo, "rev-parse", "HEAD").strip()
    assert cc.source_state(repo) == head and len(head) == 40
    # What the run writes itself does not make the tree dirty.
    (repo / "bench" / "results" / "chaos-cluster.json").write_text('{"runs": [1]}\n')
    (repo / "bench" / "results" / "chaos-logs").mkdir()
    (repo / "bench" / "results" / "chaos-logs" / "x.tar.xz").write_bytes(b"x")
    assert cc.source_state(repo) == head


@pytest.mark.parametrize("change", ["edited", "untracked", "staged"])
def test_a_dirty_tree_is_refused_naming_the_path(repo: Path, change: str) -> None:
    if change == "edited":
        (repo / "src" / "a.py").write_text("a = 2\n")
    elif change == "untracked":
        (repo / "src" / "b.py").write_text("b = 1\n")
    else:
        (repo / "src" / "a.py").write_text("a = 3\n")
        _git(repo, "add", "src/a.py")
    with pytest.raises(cc.UntraceableSource, match=r"differs from HEAD [0-9a-f]{12} in 1 path\(s\): src/[ab]\.py"):
        cc.source_state(repo)


def test_a_commit_off_mains_history_is_refused(repo: Path) -> None:
    _git(repo, "checkout", "-q", "-b", "side")
    (repo / "src" / "a.py").write_text("a = 4\n")
    _git(repo, "commit", "-q", "-am", "side")
    with pytest.raises(cc.UntraceableSource, match="is not in the history of refs/heads/main"):
        cc.source_state(repo)


def test_records_that_name_no_commit_of_main_are_found(repo: Path) -> None:
    head = _git(repo, "rev-parse", "HEAD").strip()
    records = [{"source": head}, {"source": head[:7]}, {"source": "91c7bea"},
               {"source": f"{head[:7]} with 2 uncommitted file(s) under src/"}, {}]  # fmt: skip
    assert cc.untraceable(records, repo) == records[2:]


# --------------------------------------------------------------------------- item 10: reruns append, failed runs keep their logs


class FakeKube:
    def __init__(self, folder: Path) -> None:
        self.dir = folder

    def call(self, method: str, path: str, body: Any = None) -> Any:
        return {"items": []}

    def close(self) -> None:
        pass


class FakeRun:
    """Stands in for a run on the cluster: the outcomes come from `plan`, in order."""

    plan: ClassVar[list[bool]] = []
    made: ClassVar[int] = 0

    def __init__(
        self, kube: FakeKube, cls: cc.FaultClass, side: str, seed: int, lane: int, root: Path,
        defaults: cc.Defaults | None = None,
    ) -> None:  # fmt: skip
        self.ns = f"chaos-{cls.number:02d}-{defaults.name if defaults else side}-{seed}"
        self.dir = root / self.ns
        passed = FakeRun.plan.pop(0)
        FakeRun.made += 1
        self.result = cc.Result(cls.number, cls.name, side, seed, passed=passed, reason="ok" if passed else "hang",
                                date=f"2027-01-15T08:00:{FakeRun.made:02d}Z", folder=str(self.dir),
                                defaults=defaults.name if defaults else "", outcome="Failed")  # fmt: skip

    def go(self) -> cc.Result:
        (self.dir / "record").mkdir(parents=True, exist_ok=True)
        (self.dir / "record" / "result.json").write_text(json.dumps(asdict(self.result)))
        return self.result

    def cleanup(self) -> None:
        pass


@pytest.fixture
def fake_cluster(tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    @contextlib.contextmanager
    def cluster(reuse: bool, nodes: int) -> Iterator[FakeKube]:
        yield FakeKube(tmp_path / "cluster")

    monkeypatch.setattr(cc, "cluster", cluster)
    monkeypatch.setattr(cc, "label_lanes", lambda kube, lanes: None)
    monkeypatch.setattr(cc, "Run", FakeRun)
    monkeypatch.setattr(cc, "REPO", repo)
    return repo / "bench" / "results" / "chaos-cluster.json"


def _runs(results: Path) -> list[dict[str, Any]]:
    return list(json.loads(results.read_text())["runs"])


def test_a_rerun_of_one_seed_is_appended_and_a_failed_runs_logs_are_kept(fake_cluster: Path) -> None:
    FakeRun.plan = [False, True]
    assert cc.main(["--one", "8", "--seed", "7", "--results", str(fake_cluster)]) == 1  # a run of ours failed
    (first,) = _runs(fake_cluster)
    assert (first["class"], first["seed"], first["passed"]) == (8, 7, False)
    archive = fake_cluster.parent / first["logs"]
    with tarfile.open(archive) as tar:
        assert any(n.endswith("record/result.json") for n in tar.getnames())
    assert cc.main(["--one", "8", "--seed", "7", "--results", str(fake_cluster)]) == 0
    runs = _runs(fake_cluster)
    assert runs[0] == first and len(runs) == 2 and runs[1]["passed"] and "logs" not in runs[1]
    assert all(r["source"] == _git(fake_cluster.parents[2], "rev-parse", "HEAD").strip() for r in runs)


def test_redo_appends_beside_the_runs_the_file_has(fake_cluster: Path) -> None:
    args = ["--classes", "8", "--runs", "1", "--torchrun-runs", "0", "--seed0", "7", "--results", str(fake_cluster)]
    FakeRun.plan = [True]
    assert cc.main(args) == 0
    assert cc.main(args) == 0  # nothing to run: the file has seed 7
    FakeRun.plan = [False]
    assert cc.main([*args, "--redo"]) == 1  # ours failed
    runs = _runs(fake_cluster)
    assert [(r["seed"], r["passed"]) for r in runs] == [(7, True), (7, False)]
    assert (fake_cluster.parent / runs[1]["logs"]).exists()
    assert "| 8 | one pod's network drops" in fake_cluster.with_suffix(".md").read_text()


def test_a_run_that_records_refuses_a_dirty_tree(fake_cluster: Path) -> None:
    (fake_cluster.parents[2] / "src" / "a.py").write_text("a = 5\n")
    FakeRun.plan = [True]
    with pytest.raises(SystemExit, match="not recording from this checkout: the tree differs"):
        cc.main(["--one", "8", "--seed", "7", "--results", str(fake_cluster)])
    assert _runs(fake_cluster) == [] and FakeRun.plan == [True]  # nothing ran
    assert cc.main(["--one", "8", "--seed", "7", "--results", ""]) == 0  # records nothing: runs


def test_a_kept_failed_run_is_judged_again_from_its_archive(tmp_path: Path, repo: Path) -> None:
    s = _loses(tmp_path, 25, frozenset({25}))
    folder = s.write()
    r = verdict(folder)
    results = cc.Results(repo / "bench" / "results" / "chaos-cluster.json")
    results.add(r, folder)
    (record,) = [x for x in results.records if x["seed"] == s.seed]
    assert results.path is not None
    with tarfile.open(results.path.parent / record["logs"]) as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    (unpacked,) = (tmp_path / "unpacked").iterdir()
    assert cc.main(["--rejudge", str(unpacked)]) == 1
    assert verdict(unpacked).reason == r.reason


def test_the_defaults_runs_go_to_their_own_file_once_per_seed_and_defaults(fake_cluster: Path) -> None:
    defaults = fake_cluster.with_name("chaos-defaults.json")
    args = ["--classes", "8", "--runs", "1", "--seed0", "7", "--defaults", "flytekit,ours", "--results", str(defaults)]
    FakeRun.plan = [True, True]
    assert cc.main(args) == 0
    runs = _runs(defaults)
    assert sorted((r["defaults"], r["side"], r["seed"]) for r in runs) == [
        ("flytekit", "torchrun", 7),
        ("ours", "ours", 7),
    ]
    assert json.loads(defaults.read_text())["about"]["defaults"].keys() == cc.DEFAULTS.keys()
    assert cc.main(args) == 0 and len(_runs(defaults)) == 2  # nothing to run: both are there
    assert _runs(fake_cluster) == []  # the matrix's file is untouched
    with pytest.raises(SystemExit, match="unknown defaults nope"):
        cc.main(["--defaults", "nope", "--results", ""])


# --------------------------------------------------------------------------- classes 16 to 21 (issue 35)


def _oom(tmp_path: Path, *, killed: bool) -> Story:
    """Class 16: worker-1's workers balloon at step 23; the kernel kills them (an `oom` event of
    its container); its launcher restarts the round in the same pod, which trains to the end."""
    s = Story(tmp_path, 16)
    s.train(2, 23)
    s.fault("worker-1's workers allocate past the container's limit")
    if killed:
        s.lifecycle.append({"t": s.tick(), "event": "oom", "ns": s.folder.name, "pod": s.pod(1),
                            "uid": s.uids[s.pod(1)], "node": s.nodes[s.pod(1)], "container": "pytorch", "restart": 0})  # fmt: skip
    s.train(2, s.cls.steps)
    s.succeed()
    return s


def test_class_16_without_the_kernels_oom_kill_fails(tmp_path: Path) -> None:
    fails(_oom(tmp_path, killed=False), "the kernel never OOM-killed in worker-1's container")


def test_class_16_with_the_kernels_oom_kill_passes_and_an_oom_event_ends_no_container(tmp_path: Path) -> None:
    s = _oom(tmp_path, killed=True)
    passes(s)
    run = cc.Run.from_record(s.folder)
    assert run.running_pods() == []  # both exited 0; the oom record between is no exit
    assert [len(i["ooms"]) for i in run.incarnations().values()] == [0, 1]


def _disk_full(tmp_path: Path, message: str) -> Story:
    """Class 17: the volume full at step 23; every later save fails; both pods give up (exit 3)."""
    s = Story(tmp_path, 17)
    s.train(2, 23)
    s.fault("fill the checkpoint volume")
    s.train(2, 24, commit=False)
    s.exit_pod(s.pod(0), 3, report=message)
    s.exit_pod(s.pod(1), 3, report="RuntimeError: Connection closed by peer")
    s.fail()
    return s


def test_class_17_whose_report_does_not_name_the_full_volume_fails(tmp_path: Path) -> None:
    fails(_disk_full(tmp_path, "RuntimeError: something else"), "no FailureReport names the full volume")


def test_class_17_that_fails_naming_enospc_passes(tmp_path: Path) -> None:
    passes(_disk_full(tmp_path, "OSError: [Errno 28] No space left on device: 'checkpoint.json.tmp'"))


def _operator_down(tmp_path: Path, *, recreated_at: float) -> Story:
    """Class 19: the operator down 20 s from T0+10; worker-1 killed meanwhile and started again
    `recreated_at` s after T0; the job resumes and succeeds."""
    s = Story(tmp_path, 19)
    s.train(2, 23)
    s.t = T0 + 10
    s.fault("the training operator crashed (SIGKILL)")
    s.exit_pod(s.pod(1), 137, killed_by="fault")
    s.result.scenario = {"training-operator_down": 10.0, "training-operator_started": 30.0,
                         "training-operator_ready": 31.0}  # fmt: skip
    s.t = T0 + recreated_at
    s.start_pod(s.pod(1))
    s.train(2, s.cls.steps)
    s.succeed()
    return s


def test_class_19_whose_pod_came_back_while_the_operator_was_down_fails(tmp_path: Path) -> None:
    fails(_operator_down(tmp_path, recreated_at=15.0), "worker-1 was recreated while the operator was down")


def test_class_19_whose_pod_came_back_after_the_operator_passes(tmp_path: Path) -> None:
    passes(_operator_down(tmp_path, recreated_at=32.0))


def _webhook_down(tmp_path: Path, refused: str | None) -> Story:
    s = Story(tmp_path, 20)
    s.train(2, 23)
    s.fault("the operator's webhook endpoint not ready")
    if refused is not None:
        s.result.scenario = {"refused": refused}
    s.fault("SIGKILL worker-1's container")
    s.exit_pod(s.pod(1), 137, killed_by="fault")
    s.start_pod(s.pod(1))
    s.train(2, s.cls.steps)
    s.succeed()
    return s


def test_class_20_whose_webhook_never_refused_fails(tmp_path: Path) -> None:
    fails(_webhook_down(tmp_path, None), "never refused a PyTorchJob for want of the webhook")


def test_class_20_whose_webhook_refused_passes(tmp_path: Path) -> None:
    passes(_webhook_down(tmp_path, 'failed calling webhook "validator.pytorchjob.training-operator.kubeflow.org"'))


def test_the_cluster_wide_classes_run_alone_and_class_21_has_room_past_its_5_minutes() -> None:
    assert {c.number for c in cc.CLASSES.values() if c.exclusive} == {18, 19, 20}
    assert cc.CLASSES[21].cap_s >= cc.UNTAINTED_S + cc.CAP_S
