"""One task, three render targets (issue 34 item 1, the Python half): ``ei.render_target`` and
``elastic-idl render --target pytorchjob|trainjob|jobset``.

- every contract vector renders on each target or is refused with a typed error, the same refusal as the
  PyTorchJob's when the task breaks a rule;
- the loss report names exactly the fields the task sets that the target cannot carry (a table);
- the TrainJob and the JobSet survive a round trip through kubeflow-trainer-api 2.3.0's models (which
  drop any field they do not know), but for the proposed elasticPolicy, which they drop;
- the pod entrypoint's launch spec from each target's env: endpoint node 0, the task's sizes; and two pods
  of each target run as processes from that env, rendezvous and train (about 5 s a target);
- the CLI: --target, the warning lines, --json, --strict.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml

import elastic_idl as ei
from elastic_idl._conformance import SDK_KINDS, Case, load_cases, read_expected
from elastic_idl.cli import main

ROOT = Path(__file__).resolve().parent.parent
CASES = load_cases(ROOT / "contract" / "cases")
TARGETS = ("pytorchjob", "trainjob", "jobset")
OPTIONS = ei.JobOptions(name="job", image="example.com/train:1", entrypoint=["train.py"])
try:  # kubeflow-trainer-api 2.3.0 (requirements/dev.txt): Trainer's TrainJob and JobSet v1alpha2 models
    from kubeflow_trainer_api.models import JobsetV1alpha2JobSet, TrainerV1alpha1TrainJob

    _MODELS: dict[str, Any] = {"trainjob": TrainerV1alpha1TrainJob, "jobset": JobsetV1alpha2JobSet}
except ImportError:  # pragma: no cover - the dev lock has it
    _MODELS = {}


def _task_of(case: Case) -> tuple[Any, int] | None:
    """The case's task as the backend gets it: the decoded textproto, or the SDK's custom dict; None when
    the SDK emits no pytorch task (a one-node python-task) or the input does not decode."""
    if case.kind in SDK_KINDS:
        sdk = read_expected(case.path)["sdk"]
        if sdk.get("task_type") != "pytorch":
            return None
        return sdk["custom"], int(sdk["task_type_version"])
    assert case.textproto is not None
    try:
        return ei.decode(case.textproto, format="textproto", task_type_version=case.task_type_version), (
            case.task_type_version
        )
    except ei.ElasticIdlError:
        return None


def _outcome(task: Any, version: int, options: ei.JobOptions, target: str) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ei.SkewWarning)  # a STORAGE resource dropped: said on every target
        try:
            return ei.render_target(task, options, target=target, task_type_version=version)
        except ei.ElasticIdlError as exc:
            return exc


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_vector_renders_on_every_target_or_is_refused_alike(case: Case) -> None:
    loaded = _task_of(case)
    if loaded is None:
        return
    task, version = loaded
    options = ei.JobOptions(**case.render)
    base = _outcome(task, version, options, "pytorchjob")
    pytorchjob_only = [
        name
        for name, default in (
            ("mode", "strict"),
            ("network_policy", False),
            ("elastic_worker_restart_policy", "ExitCode"),
        )
        if getattr(options, name) != default
    ]
    for target in ("trainjob", "jobset"):
        got = _outcome(task, version, options, target)
        refused_option = [
            name for name in pytorchjob_only if not (target == "jobset" and name == "elastic_worker_restart_policy")
        ]
        if refused_option:  # an option only a PyTorchJob takes: refused by its name, before the task is read
            assert isinstance(got, ei.RenderError) and got.field == refused_option[0], (target, got)
        elif isinstance(base, ei.ElasticIdlError):  # the same refusal as the PyTorchJob's
            assert type(got) is type(base), (target, got, base)
            if isinstance(base, ei.ValidationError):
                assert got.violations == base.violations
            elif isinstance(base, ei.RenderError):
                assert got.field == base.field, (target, got, base)
        else:
            assert not isinstance(got, ei.ElasticIdlError), (target, got)
            assert len(got.objects) == 1 and got.target == target
            assert got.objects[0]["metadata"]["name"] == options.name
            assert all(loss.target == target for loss in got.losses)
            model = _MODELS.get(target)
            if model is not None:  # nothing the Trainer API's generated models do not know
                assert model.from_dict(got.objects[0]).to_dict() == got.objects[0]


def _kf(text: str) -> Any:
    return ei.decode(text, format="textproto", task_type_version=1)


ELASTIC = 'elastic_config { min_replicas: 2 max_replicas: 2 nproc_per_node: 1 rdzv_backend: "c10d" }'
#: task (textproto, kubeflow shape) -> the fields each target reports, in task order.
LOSS_TABLE: list[tuple[str, str, list[str], list[str]]] = [
    ("fixed size", ELASTIC, [], []),
    (
        "min < max",
        'elastic_config { min_replicas: 1 max_replicas: 3 nproc_per_node: 1 rdzv_backend: "c10d" }',
        ["elastic_config.min_replicas"],
        [],
    ),
    (
        "static backend",
        'elastic_config { min_replicas: 2 max_replicas: 2 nproc_per_node: 1 rdzv_backend: "static" }',
        ["elastic_config.rdzv_backend"],
        ["elastic_config.rdzv_backend"],
    ),
    (
        "what the pod entrypoint reads of the task",
        'elastic_config { min_replicas: 2 max_replicas: 2 nproc_per_node: 2 rdzv_backend: "etcd-v2" max_restarts: 3 '
        'rdzv_host: "etcd.example" rdzv_port: 2379 rdzv_id: "r1" } ',
        [],
        [],
    ),
    (
        "worker on failure",
        ELASTIC + " worker_replicas { common { restart_policy: RESTART_POLICY_ON_FAILURE } }",
        ["worker_replicas.common.restart_policy"],
        [],
    ),
    (
        "worker always",
        ELASTIC + " worker_replicas { common { restart_policy: RESTART_POLICY_ALWAYS } }",
        ["worker_replicas.common.restart_policy"],
        ["worker_replicas.common.restart_policy"],
    ),
    (
        "run policy",
        ELASTIC + " run_policy { clean_pod_policy: CLEANPOD_POLICY_ALL ttl_seconds_after_finished: 60 "
        "active_deadline_seconds: 600 backoff_limit: 3 }",
        ["run_policy.clean_pod_policy", "run_policy.ttl_seconds_after_finished", "run_policy.backoff_limit"],
        ["run_policy.clean_pod_policy"],
    ),
    (
        "a master of its own",
        'worker_replicas { common { replicas: 2 } } master_replicas { common { replicas: 1 image: "m:1" '
        "restart_policy: RESTART_POLICY_ON_FAILURE } }",
        ["master_replicas.common.image", "master_replicas.common.restart_policy"],
        ["master_replicas.common.image", "master_replicas.common.restart_policy"],
    ),
    (
        "a master like the workers",
        'worker_replicas { common { replicas: 2 image: "w:1" } } master_replicas { common { replicas: 1 image: "w:1" } }',
        [],
        [],
    ),
]


@pytest.mark.parametrize(("text", "trainjob", "jobset"), [r[1:] for r in LOSS_TABLE], ids=[r[0] for r in LOSS_TABLE])
def test_the_loss_report_names_exactly_what_the_target_cannot_carry(
    text: str, trainjob: list[str], jobset: list[str]
) -> None:
    task = _kf(text)
    assert ei.render_target(task, OPTIONS).losses == ()
    for target, expected in (("trainjob", trainjob), ("jobset", jobset)):
        got = ei.render_target(task, OPTIONS, target=target)
        assert [loss.field for loss in got.losses] == expected, target
        assert all(loss.target == target and loss.why for loss in got.losses)
        if expected:
            with pytest.raises(ei.TargetLossError) as info:
                ei.render_target(task, OPTIONS, target=target, strict=True)
            assert info.value.losses == got.losses and info.value.target == target
            assert isinstance(info.value, ValueError)
        else:
            assert ei.render_target(task, OPTIONS, target=target, strict=True).objects == got.objects


def test_min_max_renders_at_max_and_the_proposal_is_marked() -> None:
    task = _kf('elastic_config { min_replicas: 1 max_replicas: 3 nproc_per_node: 4 rdzv_backend: "c10d" }')
    job = ei.render_target(task, OPTIONS, target="trainjob").objects[0]
    assert job["spec"]["trainer"]["numNodes"] == 3 and job["spec"]["trainer"]["numProcPerNode"] == 4
    assert "elasticPolicy" not in job["spec"]["trainer"] and "annotations" not in job["metadata"]
    rendered = ei.render_target(task, OPTIONS, target="trainjob", trainjob_elastic_policy=True)
    job = rendered.objects[0]
    assert job["spec"]["trainer"]["elasticPolicy"] == {"minNodes": 1, "maxNodes": 3}
    assert "KEP-2903" in job["metadata"]["annotations"]["elastic-idl/proposal"]
    assert "KEP-2903" in rendered.losses[0].why
    with pytest.raises(ei.RenderError) as info:
        ei.render_target(task, OPTIONS, target="jobset", trainjob_elastic_policy=True)
    assert info.value.field == "trainjob_elastic_policy"


def test_options_only_a_pytorchjob_takes_are_refused_by_name() -> None:
    task = _kf(ELASTIC)
    for target in ("trainjob", "jobset"):
        for change, field in (
            ({"mode": "upstream"}, "mode"),
            ({"network_policy": True}, "network_policy"),
        ):
            with pytest.raises(ei.RenderError) as info:
                ei.render_target(task, ei.JobOptions(**{**_fields(OPTIONS), **change}), target=target)
            assert info.value.field == field
    never = ei.JobOptions(**{**_fields(OPTIONS), "elastic_worker_restart_policy": "Never"})
    with pytest.raises(ei.RenderError) as info:
        ei.render_target(task, never, target="trainjob")
    assert info.value.field == "elastic_worker_restart_policy"
    job = ei.render_target(task, never, target="jobset").objects[0]
    assert job["spec"]["replicatedJobs"][0]["template"]["spec"]["backoffLimit"] == 0
    with pytest.raises(ei.RenderError) as info:
        ei.render_target(task, OPTIONS, target="tfjob")
    assert info.value.field == "target"
    reserved = ei.JobOptions(**{**_fields(OPTIONS), "env": {"ELASTIC_IDL_RESTART_ATTEMPT": "1"}})
    with pytest.raises(ei.RenderError) as info:
        ei.render_target(task, reserved, target="jobset")
    assert info.value.field == "env.ELASTIC_IDL_RESTART_ATTEMPT"
    long_name = ei.JobOptions(**{**_fields(OPTIONS), "name": "a" * 55})
    with pytest.raises(ei.RenderError) as info:
        ei.render_target(task, long_name, target="jobset")  # its last pod, <name>-node-0-1, has 64 characters
    assert info.value.field == "name" and "'" + "a" * 55 + "-node-0-1'" in info.value.reason


def _fields(options: ei.JobOptions) -> dict[str, Any]:
    return {name: getattr(options, name) for name in options.__dataclass_fields__}


FULL = (
    'elastic_config { min_replicas: 2 max_replicas: 4 nproc_per_node: 2 rdzv_backend: "c10d" } '
    'worker_replicas { common { image: "example.com/w:2" resources { requests { name: CPU value: "2" } '
    'limits { name: MEMORY value: "4Gi" } } } } '
    "run_policy { active_deadline_seconds: 600 ttl_seconds_after_finished: 60 backoff_limit: 2 }"
)
LABELLED = ei.JobOptions(
    name="job", image="example.com/train:1", entrypoint=["train.py"], labels={"team": "ml"}, annotations={"a": "b"}
)


def test_the_trainjob_survives_the_trainer_api_models() -> None:
    models = pytest.importorskip("kubeflow_trainer_api.models")
    job = ei.render_target(_kf(FULL), LABELLED, target="trainjob").objects[0]
    assert models.TrainerV1alpha1TrainJob.from_dict(job).to_dict() == job
    trainer = job["spec"]["trainer"]
    assert trainer["image"] == "example.com/w:2"
    assert trainer["resourcesPerNode"] == {"requests": {"cpu": "2"}, "limits": {"memory": "4Gi"}}
    assert job["spec"]["activeDeadlineSeconds"] == 600
    assert job["spec"]["runtimeRef"] == {
        "name": "torch-distributed",
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
    }
    patch = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    assert patch["name"] == "node"
    assert patch["template"]["spec"]["template"]["metadata"] == {"labels": {"team": "ml"}, "annotations": {"a": "b"}}
    # Trainer's reserved names are never written; the endpoint it does not give is.
    names = [e["name"] for e in trainer["env"]]
    assert not {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"} & set(names)
    assert {"name": "PET_RDZV_ENDPOINT", "value": "job-node-0-0.job:29500"} in trainer["env"]
    proposal = ei.render_target(_kf(FULL), LABELLED, target="trainjob", trainjob_elastic_policy=True).objects[0]
    back = models.TrainerV1alpha1TrainJob.from_dict(proposal).to_dict()
    assert "elasticPolicy" not in back["spec"]["trainer"]  # v2.3 has no such field
    back["spec"]["trainer"]["elasticPolicy"] = proposal["spec"]["trainer"]["elasticPolicy"]
    assert back == proposal


def test_the_jobset_survives_the_jobset_models() -> None:
    models = pytest.importorskip("kubeflow_trainer_api.models")
    js = ei.render_target(_kf(FULL), LABELLED, target="jobset").objects[0]
    assert models.JobsetV1alpha2JobSet.from_dict(js).to_dict() == js
    assert js["spec"]["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    assert js["spec"]["ttlSecondsAfterFinished"] == 60
    job = js["spec"]["replicatedJobs"][0]
    assert job["name"] == "node" and job["replicas"] == 1
    spec = job["template"]["spec"]
    assert (spec["parallelism"], spec["completions"], spec["completionMode"]) == (4, 4, "Indexed")
    assert (spec["backoffLimit"], spec["activeDeadlineSeconds"]) == (2, 600)
    assert spec["successPolicy"] == {"rules": [{"succeededCount": 1}]}
    assert spec["podFailurePolicy"]["rules"][0]["onExitCodes"]["values"] == [1, 2, 3, 4]
    pod = spec["template"]
    assert pod["metadata"] == {"labels": {"team": "ml"}, "annotations": {"a": "b"}}
    assert pod["spec"]["restartPolicy"] == "Never"
    (container,) = pod["spec"]["containers"]
    assert container["image"] == "example.com/w:2"
    env = {e["name"]: e for e in container["env"]}
    assert env["PET_RDZV_ENDPOINT"]["value"] == "job-node-0-0.job:29500"
    assert env["PET_RDZV_ID"]["value"] == "job-$(ELASTIC_IDL_RESTART_ATTEMPT)"
    attempt = env["ELASTIC_IDL_RESTART_ATTEMPT"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert attempt == "metadata.labels['jobset.sigs.k8s.io/restart-attempt']"
    names = [e["name"] for e in container["env"]]
    assert names.index("ELASTIC_IDL_RESTART_ATTEMPT") < names.index("PET_RDZV_ID")  # $(VAR) sees earlier vars only


def _expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion of an env value, for the variables defined before it."""
    for name, v in env.items():
        value = value.replace(f"$({name})", v)
    return value


@pytest.mark.parametrize("target", ["trainjob", "jobset"])
def test_the_pod_entrypoint_starts_from_each_targets_env(target: str) -> None:
    task = _kf(FULL)
    obj = ei.render_target(task, OPTIONS, target=target).objects[0]
    if target == "trainjob":
        container_env = obj["spec"]["trainer"]["env"]
        # What Trainer v2.3's torch plugin adds to pod 1 (numNodes, numProcPerNode, the completion index, node 0).
        given = {
            "PET_NNODES": "4",
            "PET_NPROC_PER_NODE": "2",
            "PET_NODE_RANK": "1",
            "PET_MASTER_ADDR": "job-node-0-0.job",
            "PET_MASTER_PORT": "29500",
        }
    else:
        container_env = obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["env"]
        given = {}
    env: dict[str, str] = {}
    for item in container_env:
        env[item["name"]] = "2" if "valueFrom" in item else _expand(item["value"], env)  # restart attempt 2
    env.update(given)
    spec = ei.to_launch_spec(ei.decode(env["ELASTIC_IDL_TASK"], format="json", task_type_version=1), env=env)
    assert spec.rdzv_endpoint == "job-node-0-0.job:29500"
    assert (spec.min_nodes, spec.max_nodes, spec.nproc_per_node) == (2, 4, 2)
    assert spec.run_id == ("job-2" if target == "jobset" else "none")


# --------------------------------------------------------------------------- the command line


@pytest.fixture
def task_file(tmp_path: Path) -> Path:
    path = tmp_path / "task.textproto"
    path.write_text(
        'elastic_config { min_replicas: 1 max_replicas: 3 nproc_per_node: 1 rdzv_backend: "c10d" }\n'
        "run_policy { backoff_limit: 2 }\n"
    )
    return path


def _render(capsys: pytest.CaptureFixture[str], task_file: Path, *flags: str) -> tuple[int, str, str]:
    code = main(["render", str(task_file), "--name", "job", "--image", "i:1", *flags, "--", "train.py"])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_target_warnings_json_and_strict(capsys: pytest.CaptureFixture[str], task_file: Path) -> None:
    code, out, err = _render(capsys, task_file)
    assert code == 0 and yaml.safe_load(out)["kind"] == "PyTorchJob" and "warning" not in err
    code, out, err = _render(capsys, task_file, "--target", "trainjob")
    assert code == 0 and yaml.safe_load(out)["kind"] == "TrainJob"
    warnings = [line for line in err.splitlines() if line.startswith("elastic-idl: warning: ")]
    assert [w.split(": ")[2] for w in warnings] == ["elastic_config.min_replicas", "run_policy.backoff_limit"]
    assert "worst case" not in err  # the PyTorchJob's
    code, out, err = _render(capsys, task_file, "--target", "jobset", "--json")
    report = json.loads(out)
    assert code == 0 and report["target"] == "jobset" and report["objects"][0]["kind"] == "JobSet"
    assert report["losses"] == []
    code, out, err = _render(capsys, task_file, "--target", "trainjob", "--json")
    assert [loss["field"] for loss in json.loads(out)["losses"]] == [
        "elastic_config.min_replicas",
        "run_policy.backoff_limit",
    ]
    assert all(set(loss) == {"field", "target", "why"} for loss in json.loads(out)["losses"])
    code, out, err = _render(capsys, task_file, "--target", "trainjob", "--strict")
    assert code == 1 and out == ""
    assert err.splitlines()[-1] == "elastic-idl: error: --strict: a trainjob cannot carry what the task sets"
    assert err.count("elastic-idl: error: ") == 3
    code, out, err = _render(capsys, task_file, "--target", "jobset", "--strict")
    assert code == 0 and yaml.safe_load(out)["kind"] == "JobSet"
    code, out, err = _render(capsys, task_file, "--target", "trainjob", "--trainjob-elastic-policy")
    assert code == 0 and yaml.safe_load(out)["spec"]["trainer"]["elasticPolicy"] == {"minNodes": 1, "maxNodes": 3}


def test_cli_refusals(capsys: pytest.CaptureFixture[str], task_file: Path) -> None:
    with pytest.raises(SystemExit) as info:
        _render(capsys, task_file, "--target", "tfjob")
    assert info.value.code == 2
    capsys.readouterr()
    for flags in (
        ("--target", "jobset", "--trainjob-elastic-policy"),
        ("--target", "jobset", "--max-worst-case", "1h"),
    ):
        with pytest.raises(SystemExit) as info:
            _render(capsys, task_file, *flags)
        assert info.value.code == 2
        capsys.readouterr()
    code, _, err = _render(capsys, task_file, "--target", "trainjob", "--mode", "upstream")
    assert code == 1 and err.startswith("elastic-idl: error: mode: ")


# --------------------------------------------------------------------------- the pods, as processes

#: What each pod's workers run (``--call``): one gloo all_reduce over the world.
_TRAIN = """
def train() -> dict:
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo")
    t = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(t)
    out = {"world": dist.get_world_size(), "sum": float(t)}
    dist.destroy_process_group()
    return out
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("target", ["trainjob", "jobset"])
def test_two_pods_start_from_the_targets_env_and_train(target: str, tmp_path: Path) -> None:
    """Each target's two node pods as local processes, with the rendered container's command, args and env
    (Kubernetes' $(VAR) expansion and the downward API played here: restart attempt 3), Trainer's five
    variables on a TrainJob, and, as tests/test_pod_e2e.py does for the PyTorchJob, the endpoint override
    (node 0's name does not resolve here) and is_host on node 0 (a cluster decides that by IP)."""
    pytest.importorskip("torch")
    custom = {
        "elasticConfig": {
            "rdzvBackend": "c10d",
            "minReplicas": 2,
            "maxReplicas": 2,
            "nprocPerNode": 1,
            "joinTimeout": "60s",
            "startMethod": "START_METHOD_FORKSERVER",
        },
    }
    options = ei.JobOptions(name="job", image="example.com/train:1", pod_args=["--call"], entrypoint=["tt_train:train"])
    obj = ei.render_target(custom, options, target=target, task_type_version=1).objects[0]
    if target == "trainjob":
        container = obj["spec"]["trainer"]
    else:
        container = obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    (tmp_path / "tt_train.py").write_text(_TRAIN)
    port = _free_port()
    procs = []
    for i in range(2):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "ELASTIC_IDL_"))}
        for item in container["env"]:
            env[item["name"]] = "3" if "valueFrom" in item else _expand(item["value"], env)
        if target == "trainjob":
            env |= {
                "PET_NNODES": "2",
                "PET_NPROC_PER_NODE": "1",
                "PET_NODE_RANK": str(i),
                "PET_MASTER_ADDR": "job-node-0-0.job",
                "PET_MASTER_PORT": "29500",
            }
        d = tmp_path / f"pod-{i}"
        d.mkdir()
        env |= {
            "PET_RDZV_CONF": f"is_host={int(i == 0)}",
            "ELASTIC_IDL_RDZV_ENDPOINT_OVERRIDE": f"127.0.0.1:{port}",
            "ELASTIC_IDL_OUTPUT": str(d / "result.json"),
            "ELASTIC_IDL_FAILURE_PATH": str(d / "failure.json"),
            "PYTHONPATH": os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        }
        argv = [sys.executable if p == "python" else p for p in container["command"]] + container["args"]
        with open(d / "pod.log", "wb") as log:
            procs.append(
                subprocess.Popen(argv, env=env, cwd=d, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            )
    try:
        codes = [p.wait(120) for p in procs]
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    logs = "\n".join((tmp_path / f"pod-{i}" / "pod.log").read_text(errors="replace") for i in range(2))
    assert codes == [0, 0], logs
    results = [json.loads(r.read_text()) for r in sorted(tmp_path.glob("pod-*/result.json"))]
    assert len(results) == 1, logs
    assert results[0]["return_value"] == {"world": 2, "sum": 3.0}
    assert results[0]["run_id"] == ("job-3" if target == "jobset" else "none")


@pytest.mark.parametrize(
    ("host", "refused"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("::1", True),
        ("::ffff:127.0.0.2", True),  # IPv4-mapped loopback: Python 3.11's is_loopback alone says no
        ("10.0.0.1", False),
        ("trainer-0.ns.svc", False),
    ],
)
def test_a_loopback_rdzv_host_on_more_than_one_pod_is_refused_on_every_target(host: str, refused: bool) -> None:
    """pith-train#91's hang: each pod rendezvousing on its own loopback. Refused on every target, naming the
    field; a one-pod job keeps it (its pod is where the rendezvous runs); the upstream mode renders it, as
    Flyte 1.x's propeller does."""
    task = _kf(f'elastic_config {{ min_replicas: 1 max_replicas: 2 nproc_per_node: 1 rdzv_host: "{host}" }}')
    for target in TARGETS:
        if not refused:
            assert ei.render_target(task, OPTIONS, target=target).objects
            continue
        with pytest.raises(ei.RenderError) as info:
            ei.render_target(task, OPTIONS, target=target)
        assert info.value.field == "elastic_config.rdzv_host"
        assert "2 pods" in info.value.reason and "never form" in info.value.reason
    one = _kf(f'elastic_config {{ min_replicas: 1 max_replicas: 1 nproc_per_node: 2 rdzv_host: "{host}" }}')
    for target in TARGETS:
        assert ei.render_target(one, OPTIONS, target=target).objects
    upstream = ei.JobOptions(**{**_fields(OPTIONS), "mode": "upstream"})
    job = ei.render_pytorchjob(task, upstream)
    assert job["spec"]["elasticPolicy"]["rdzvHost"] == host


def test_pet_nnodes_in_the_env_is_refused_and_a_trainjob_says_what_the_workaround_does() -> None:
    """kubeflow/trainer#3559's workaround, PET_NNODES=min:max in the TrainJob's env: refused on every target
    (each sets PET_NNODES itself); the TrainJob's reason says what it would do and what to set instead."""
    task = _kf(ELASTIC)
    options = ei.JobOptions(**{**_fields(OPTIONS), "env": {"PET_NNODES": "1:3"}})
    reasons = {}
    for target in TARGETS:
        with pytest.raises(ei.RenderError) as info:
            ei.render_target(task, options, target=target)
        assert info.value.field == "env.PET_NNODES"
        reasons[target] = info.value.reason
    assert "#3559" in reasons["trainjob"] and "min_replicas and max_replicas" in reasons["trainjob"]
    assert reasons["pytorchjob"] == reasons["jobset"] != reasons["trainjob"]
