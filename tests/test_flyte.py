"""Flyte 1.16's propeller, built here, on the one-machine cluster (flyte/, docs/guide/flyte.md).

The short tests read the wrapper module against upstream's own plugin loader (in Go's module
cache) and check what flyte/flyte.py hands propeller and its compiler: the configuration, and a
`pyflyte package` archive made into a WorkflowClosure (ids filled in, the code tarball's address
written into the tasks' args). The long ones (marker cluster_long; `make flyte-test`) start the
cluster and propeller (`flyte.py up`, in build/flyte-test), ask propeller to validate its own
configuration strictly, read from its log which plugins the binary holds and which one serves
`pytorch`, and run two workflows to Success through propeller: a plain one (two python tasks)
and a 2-node Elastic task feeding a plain task, with the outputs read back from the object store
as propeller wrote them. Issue 31 item 6 adds flyte/examples/train.py's runs: a checkpoint read
back from the store, both SDKs' Elastic through flyteplugins' plugin, a rank-1 user error,
worker-0 force-deleted under Never and under ExitCode (`flyte.py restart --elastic-idl`), a newer
SDK's unknown key and its warning, an invalid Elastic refused before any pod. Root and Go, as the
cluster tests. `make test` runs one of them (marker cluster): the 2-node Elastic task through our
plugin, package to outputs; the rest run in `make flyte-test` and `make cluster-test`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
FLYTE = REPO / "flyte"
FLYTE_PY = FLYTE / "flyte.py"
EXAMPLES = FLYTE / "examples"
PROPELLER = "github.com/flyteorg/flyte/flytepropeller"
OUR_PLUGIN = "github.com/elastic-idl/elastic-idl/go/flyteplugin"
SPARK = "github.com/flyteorg/flyte/flyteplugins/go/tasks/plugins/k8s/spark"

_spec = importlib.util.spec_from_file_location("flyte_tool", FLYTE_PY)
assert _spec and _spec.loader
ft = importlib.util.module_from_spec(_spec)
sys.modules["flyte_tool"] = ft
_spec.loader.exec_module(ft)


def _go() -> str:
    go = shutil.which("go") or "/usr/local/go/bin/go"
    if not Path(go).exists():
        pytest.skip("no go: the wrapper module cannot be read")
    return go


def _blank_imports(go_file: Path) -> set[str]:
    return set(re.findall(r'^\s*_ "([^"]+)"', go_file.read_text(), re.M))


def test_the_propeller_main_loads_upstreams_plugins_but_spark_plus_ours() -> None:
    """cmd/flytepropeller imports what upstream's plugin loader at v1.16.8 imports, but spark, and ours."""
    env = {**os.environ, "GOWORK": "off", "GOFLAGS": "-mod=readonly"}
    r = subprocess.run(
        [_go(), "list", "-m", "-json", PROPELLER], cwd=FLYTE, env=env, capture_output=True, text=True, check=True
    )
    module = json.loads(r.stdout)
    assert module["Version"] == "v1.16.8"
    upstream = _blank_imports(Path(module["Dir"]) / "plugins" / "loader.go")
    ours = _blank_imports(FLYTE / "cmd" / "flytepropeller" / "main.go")
    assert len(upstream) == 14 and SPARK in upstream, sorted(upstream)
    assert upstream - ours == {SPARK}
    assert ours - upstream == {OUR_PLUGIN}
    # The flyte modules propeller replaces by directory are the release's tags here.
    gomod = (FLYTE / "go.mod").read_text()
    for name in ("flyteidl", "flyteplugins", "flytestdlib"):
        assert re.search(rf"github.com/flyteorg/flyte/{name} => github.com/flyteorg/flyte/{name} v1\.16\.8\n", gomod)
    assert "tool github.com/flyteorg/flyte/flytepropeller/cmd/kubectl-flyte" in gomod


STORE = {
    "endpoint": "http://10.237.0.1:7070",
    "region": "us-east-1",
    "access_key_id": "EIDL0000000000000000",
    "secret_access_key": "s" * 40,
    "bucket": "elastic-idl",
    "env": {
        "FLYTE_AWS_ENDPOINT": "http://10.237.0.1:7070",
        "FLYTE_AWS_ACCESS_KEY_ID": "EIDL0000000000000000",
        "FLYTE_AWS_SECRET_ACCESS_KEY": "s" * 40,
    },
}


def test_the_configuration_routes_pytorch_to_ours_keeps_events_local_and_uses_the_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("FLYTE_PYTORCH_PLUGIN", raising=False)
    kubeconfig, folder = Path("/var/tmp/c/admin.kubeconfig"), Path("/var/tmp/c")
    cfg = ft.propeller_config(folder, kubeconfig, STORE, {"propeller-profiler": 20001, "admin-unused": 20002})
    plugins = cfg["tasks"]["task-plugins"]
    assert {"pytorch", "elastic-idl-pytorch"} <= set(plugins["enabled-plugins"])
    assert plugins["default-for-task-types"]["pytorch"] == "elastic-idl-pytorch"
    assert cfg["event"]["type"] == "file" and cfg["event"]["file-path"] == "/var/tmp/c/flyte/events.txt"
    assert cfg["propeller"]["kube-config"] == str(kubeconfig) and cfg["propeller"]["create-flyteworkflow-crd"]
    conn = cfg["storage"]["connection"]
    assert cfg["storage"]["type"] == "minio" and cfg["storage"]["container"] == "elastic-idl"
    assert (conn["endpoint"], conn["access-key"], conn["secret-key"]) == (
        STORE["endpoint"],
        STORE["access_key_id"],
        STORE["secret_access_key"],
    )
    # One-key maps in a list: viper would lowercase the keys of a map (the pods got flyte_aws_endpoint).
    assert cfg["plugins"]["k8s"]["default-env-vars"] == [{k: v} for k, v in STORE["env"].items()]
    assert cfg["admin"]["endpoint"].startswith("dns:///127.0.0.1:")
    assert "default-pod-template-name" not in cfg["plugins"]["k8s"]  # none asked: no template
    real = ft.propeller_config(
        folder, kubeconfig, STORE, {"propeller-profiler": 20001, "admin-unused": 20002},
        pod_template=ft.REAL_NODES_POD_TEMPLATE,
    )  # fmt: skip
    assert real["plugins"]["k8s"]["default-pod-template-name"] == ft.REAL_NODES_POD_TEMPLATE
    monkeypatch.setenv("FLYTE_PYTORCH_PLUGIN", "pytorch")
    cfg = ft.propeller_config(folder, kubeconfig, STORE, {"propeller-profiler": 20001, "admin-unused": 20002})
    assert cfg["tasks"]["task-plugins"]["default-for-task-types"]["pytorch"] == "pytorch"


def test_a_package_becomes_a_closure_with_ids_and_the_code_address(tmp_path: Path) -> None:
    """What flytectl register would do to a `pyflyte package` archive, done by flyte.py."""
    from flyteidl.core import workflow_closure_pb2

    tasks, workflows, tarball = ft.read_package(ft.package(EXAMPLES / "elastic.py", tmp_path))
    assert sorted(tasks) == ["elastic.plus_one", "elastic.reduce_sum"] and sorted(workflows) == ["elastic.wf"]
    assert tarball is not None and tarball[0].startswith("fast") and tarball[0].endswith(".tar.gz")
    elastic = tasks["elastic.reduce_sum"]
    assert (elastic.type, elastic.WhichOneof("target")) == ("pytorch", "k8s_pod")
    for t in tasks.values():
        ft.set_package_path(t, "s3://b/fast/x.tar.gz")
    # The pod task keeps its target: no empty container appears beside it (the compiler refuses one).
    assert elastic.WhichOneof("target") == "k8s_pod" and not elastic.HasField("container")
    closure = workflow_closure_pb2.WorkflowClosure(workflow=workflows["elastic.wf"].template, tasks=tasks.values())
    ft.hydrate(closure, "p", "d", "v1")
    text = str(closure)
    assert "remote_package_path" not in text and text.count("s3://b/fast/x.tar.gz") == 2
    ids = [
        closure.workflow.id,
        *(t.id for t in closure.tasks),
        *(n.task_node.reference_id for n in closure.workflow.nodes),
    ]
    assert len(ids) == 5 and all((i.project, i.domain, i.version) == ("p", "d", "v1") for i in ids)
    assert {n.task_node.reference_id.name for n in closure.workflow.nodes} == set(tasks)


# ---------------------------------------------------------------- on the cluster


@dataclass
class Flyte:
    env: dict[str, str]  # the process env with CLUSTER_DIR
    dir: Path  # CLUSTER_DIR
    kubectl: str
    kubeconfig: str

    def kube(self, *args: str) -> str:
        return subprocess.run(
            [self.kubectl, "--kubeconfig", self.kubeconfig, *args], capture_output=True, text=True, check=True
        ).stdout

    def run_raw(self, file: str, workflow: str, inputs: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(FLYTE_PY), "run", str(EXAMPLES / file), workflow, "--inputs", json.dumps(inputs),
             *args],
            env=self.env, capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip

    def run(self, file: str, workflow: str, inputs: dict[str, Any], *args: str) -> tuple[str, dict[str, Any]]:
        """flyte.py run; the execution's name and the outputs it printed last."""
        r = self.run_raw(file, workflow, inputs, *args)
        assert r.returncode == 0, r.stdout + r.stderr
        created = re.search(r"FlyteWorkflow flytesnacks-development/(\S+) created", r.stderr)
        assert created, r.stderr
        assert re.search(rf"flytesnacks-development/{created.group(1)}: Success ", r.stderr), r.stderr
        return created.group(1), json.loads(r.stdout.strip().splitlines()[-1])

    def log(self) -> list[dict[str, Any]]:
        lines = []
        for line in (self.dir / "logs" / "flytepropeller.log").read_text().splitlines():
            if line.startswith("{"):
                lines.append(json.loads(line))
        return lines


@pytest.fixture(scope="module")
def flyte() -> Iterator[Flyte]:
    sys.path.insert(0, str(REPO / "cluster"))
    import cluster as kc

    state = kc.default_state_dir("flyte-test")
    env = {**os.environ, "CLUSTER_DIR": str(state)}
    env.pop("FLYTE_PYTORCH_PLUGIN", None)
    try:
        up = subprocess.run(
            [sys.executable, str(FLYTE_PY), "up"], env=env, capture_output=True, text=True, timeout=3600, check=False
        )
        assert up.returncode == 0, up.stderr[-4000:]
        last = up.stdout.strip().splitlines()[-2:]
        assert last[0].startswith("export KUBECTL=/") and last[1].startswith("export KUBECONFIG=/"), up.stdout
        assert "flytepropeller watches" in up.stderr
        yield Flyte(env, state, last[0].split("=", 1)[1], last[1].split("=", 1)[1])
    finally:
        subprocess.run([sys.executable, str(FLYTE_PY), "down"], env=env, capture_output=True, timeout=300, check=True)
        left = []
        for proc in Path("/proc").iterdir():
            if proc.name.isdigit() and proc.name != str(os.getpid()):
                try:
                    cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
                except OSError:
                    continue
                if str(state) in cmdline:
                    left.append(cmdline.replace("\0", " ")[:200])
        assert left == [] and not Path(f"/sys/class/net/{kc.POD_BRIDGE}").exists(), left


@pytest.mark.cluster_long
def test_propeller_validates_the_configuration_strictly(flyte: Flyte) -> None:
    """Propeller's own strict check: every key flyte.py writes is one of its registered sections'."""
    binary = Path(json.loads((flyte.dir / "flyte" / "propeller.json").read_text())["bin"]) / "flytepropeller"
    config = flyte.dir / "flyte" / "propeller.yaml"

    def validate(path: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(binary), "config", "--file", str(path), "validate", "--strict"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip

    r = validate(config)
    assert r.returncode == 0 and "Validated config file successfully." in r.stdout + r.stderr, r.stdout + r.stderr
    # The check is a real one: a key no section registers is refused.
    bad = flyte.dir / "flyte" / "propeller-bad.yaml"
    bad.write_text(config.read_text().replace("show-source:", "show-sources:"))
    r = validate(bad)
    assert r.returncode == 1 and "invalid keys: show-sources" in r.stdout + r.stderr, r.stdout + r.stderr


@pytest.mark.cluster_long
def test_the_binary_holds_upstreams_k8s_plugins_but_spark_and_ours_serves_pytorch(flyte: Flyte) -> None:
    log = flyte.log()
    k8s = {m.group(1) for e in log if (m := re.match(r"K8s Plugin \[([\w-]+)\] is", e.get("msg", "")))}
    assert k8s == {"container", "sidecar", "pod", "dask", "mpi", "pytorch", "tensorflow", "ray", "elastic-idl-pytorch"}
    loaded = {m.group(1) for e in log if (m := re.match(r"Loading Plugin \[([\w-]+)\] ENABLED", e.get("msg", "")))}
    assert {"pytorch", "elastic-idl-pytorch"} <= loaded
    assert any(e.get("msg") == "Plugin [elastic-idl-pytorch] registered for TaskType [pytorch]" for e in log)
    assert not any(e.get("msg") == "Plugin [pytorch] registered for TaskType [pytorch]" for e in log)
    assert flyte.kube("get", "crd", "flyteworkflows.flyte.lyft.com", "-o", "name").strip()


@pytest.mark.cluster_long
def test_a_plain_workflow_runs_to_success_and_its_outputs_are_in_the_store(flyte: Flyte) -> None:
    name, outputs = flyte.run("hello.py", "wf", {})  # n: the workflow's default, 5
    assert outputs == {"o0": 113}  # 5 * 5 + 88, through two pods
    wf = json.loads(flyte.kube("get", "flyteworkflow", name, "-n", "flytesnacks-development", "-o", "json"))
    assert wf["status"]["phase"] == 3  # WorkflowPhaseSuccess
    ref = wf["status"]["outputRef"]
    assert ref == f"s3://elastic-idl/metadata/propeller/flytesnacks-development-{name}/end-node/data/0/outputs.pb"
    objects = flyte.dir / "objectstore" / "elastic-idl" / ref.removeprefix("s3://elastic-idl/")
    assert objects.is_file() and objects.stat().st_size > 0
    events = (flyte.dir / "flyte" / "events.txt").read_text()
    ours = [ln for ln in events.splitlines() if f'name:"{name}"' in ln]
    assert any(ln.startswith("[--WF EVENT--]") and "Phase: SUCCEEDED" in ln for ln in ours), ours
    assert sum(ln.startswith("[--TASK EVENT--]") and "Phase: SUCCEEDED" in ln for ln in ours) == 2, ours


@pytest.mark.cluster  # the one `make test` runs: package -> compile -> run -> outputs, through our plugin
def test_an_elastic_task_runs_through_our_plugin_and_feeds_the_next_task(flyte: Flyte) -> None:
    name, outputs = flyte.run("elastic.py", "wf", {"x": 3})
    assert outputs == {"o0": 73}  # (3 + 4) * 10 + a world of 2, plus one
    jobs = json.loads(flyte.kube("get", "pytorchjobs", "-n", "flytesnacks-development", "-o", "json"))["items"]
    job = next(j for j in jobs if j["metadata"]["labels"].get("execution-id") == name)
    assert list(job["spec"]["pytorchReplicaSpecs"]) == ["Worker"]
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    assert job["spec"]["elasticPolicy"]["minReplicas"] == job["spec"]["elasticPolicy"]["maxReplicas"] == 2
    assert any(c["type"] == "Succeeded" and c["status"] == "True" for c in job["status"]["conditions"])
    handled = [e for e in flyte.log() if e.get("msg", "").startswith("Plugin [elastic-idl-pytorch] returned")]
    assert handled, "propeller's log names no task handled by elastic-idl-pytorch"
    cluster = json.loads((flyte.dir / "cluster.json").read_text())
    if cluster.get("runtime") == "containerd":
        # On real Nodes: the task names the base image, and the workers started from propeller's
        # default PodTemplate (the host's files mounted read-only, the venv's bin/ on PATH).
        pods = json.loads(
            flyte.kube("get", "pods", "-n", "flytesnacks-development", "-l", f"execution-id={name}", "-o", "json")
        )["items"]
        workers = [p for p in pods if p["metadata"]["name"].startswith(f"{name}-n0-0-worker-")]
        assert len(workers) == 2, [p["metadata"]["name"] for p in pods]
        for pod in workers:
            (c,) = pod["spec"]["containers"]
            assert c["image"] == cluster["images"]["base"]
            assert {
                m["mountPath"]: m["readOnly"] for m in c["volumeMounts"] if m["name"] in ("python", "checkout")
            } == {
                str(Path(os.path.realpath(sys.executable)).parent.parent): True,
                str(REPO): True,
            }
            assert {"name": "PATH", "value": f"{Path(sys.executable).parent}:/usr/bin:/bin"} in c["env"]
            (status,) = pod["status"]["containerStatuses"]
            assert status["image"] == cluster["images"]["base"] and status["state"]["terminated"]["exitCode"] == 0


@pytest.mark.cluster_long
def test_one_propeller_runs_the_same_elastic_task_through_upstreams_plugin_by_override(flyte: Flyte) -> None:
    """The FlyteWorkflow's executionConfig names flyteplugins' `pytorch` for the task type (what admin
    writes from a project's plugin override); propeller's default stays ours."""
    name, outputs = flyte.run("elastic.py", "wf", {"x": 3}, "--plugin", "pytorch=pytorch")
    assert outputs == {"o0": 73}
    wf = json.loads(flyte.kube("get", "flyteworkflow", name, "-n", "flytesnacks-development", "-o", "json"))
    assert wf["executionConfig"]["TaskPluginImpls"] == {
        "pytorch": {"PluginIDs": ["pytorch"], "MissingPluginBehavior": 0}
    }
    handled = [e for e in flyte.log() if e.get("msg", "").startswith("Plugin [pytorch] returned")]
    assert handled, "propeller's log names no task handled by flyteplugins' pytorch"


def _attempt_pods(flyte: Flyte, name: str) -> list[str]:
    """The pods propeller created for the execution, by its log: <node>-<attempt> each (it deletes
    an attempt's pod before the next, so the API server keeps only the last)."""
    made = re.compile(rf"Creating Object: Type:\[/v1, Kind=pod\], Object:\[flytesnacks-development/{name}-(\S+)\]")
    return sorted({m.group(1) for e in flyte.log() if (m := made.match(e.get("msg", "")))})


@pytest.mark.cluster_long
@pytest.mark.parametrize(
    ("n", "message", "attempts"),
    [
        (-1, "ValueError: n must not be negative, got -1", ["n0-0"]),  # non-recoverable: no retry
        (0, "[2/2] currentAttempt done", ["n0-0", "n0-1"]),  # recoverable: retries=1, one more
    ],
)
def test_a_user_error_fails_the_run_with_its_message_and_node_retried_as_flyte_says(
    flyte: Flyte, n: int, message: str, attempts: list[str]
) -> None:
    r = flyte.run_raw("fail.py", "wf", {"n": n})
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout == ""  # no outputs line
    assert message in r.stderr and "node n0:" in r.stderr and '"kind": "USER"' in r.stderr, r.stderr
    name = re.search(r"FlyteWorkflow flytesnacks-development/(\S+) created", r.stderr)
    assert name and re.search(rf"flytesnacks-development/{name.group(1)}: Failed ", r.stderr), r.stderr
    assert _attempt_pods(flyte, name.group(1)) == attempts


def test_the_package_archive_holds_what_read_package_reads(tmp_path: Path) -> None:
    """read_package's file-name rule (<n>_<name>_<resource type>.pb) against pyflyte's archive."""
    tgz = ft.package(EXAMPLES / "hello.py", tmp_path)
    with tarfile.open(tgz) as tar:
        names = sorted(m.name for m in tar.getmembers())
    assert [n for n in names if n.endswith("_1.pb")] and [n for n in names if n.endswith("_2.pb")], names
    tasks, workflows, tarball = ft.read_package(tgz)
    assert sorted(tasks) == ["hello.plus", "hello.square"] and list(workflows) == ["hello.wf"] and tarball


# ------------------------------------------------ issue 31 item 6: the training workflow end to end


def _jobs_made(flyte: Flyte, name: str) -> list[str]:
    """The PyTorchJobs propeller created for the execution, by its log: <node>-<attempt> each."""
    made = re.compile(
        rf"Creating Object: Type:\[kubeflow.org/v1, Kind=PyTorchJob\], Object:\[flytesnacks-development/{name}-(\S+)\]"
    )
    return sorted({m.group(1) for e in flyte.log() if (m := made.match(e.get("msg", "")))})


def _created(r: subprocess.CompletedProcess[str]) -> str:
    m = re.search(r"FlyteWorkflow flytesnacks-development/(\S+) created", r.stderr)
    assert m, r.stderr
    return m.group(1)


def _object(flyte: Flyte, key: str) -> Path:
    return flyte.dir / "objectstore" / "elastic-idl" / key


@pytest.mark.cluster_long
def test_a_training_workflow_with_a_checkpoint_runs_through_our_plugin_outputs_from_the_store(flyte: Flyte) -> None:
    """Item 6a: a 2-node elastic task (typed input and output, a checkpoint), a task consuming its
    output; the outputs are what propeller wrote to the store, the checkpoint what flytekit wrote."""
    name, outputs = flyte.run("train.py", "wf", {"steps": 3})
    assert outputs == {"o0": "trained 3 steps in a world of 2"}
    from flyteidl.core import literals_pb2

    prefix = f"metadata/propeller/flytesnacks-development-{name}"
    for node, value in (("n0", ("integer", 32)), ("n1", ("string_value", "trained 3 steps in a world of 2"))):
        lm = literals_pb2.LiteralMap()
        lm.ParseFromString(_object(flyte, f"{prefix}/{node}/data/0/outputs.pb").read_bytes())
        primitive = lm.literals["o0"].scalar.primitive
        assert getattr(primitive, value[0]) == value[1], (node, lm)
    # rank 0's checkpoint: the steps done, under the attempt's raw-output prefix (_flytecheckpoints).
    checkpoints = list((flyte.dir / "objectstore" / "elastic-idl" / "raw").glob(f"*/{name}-n0-0/_flytecheckpoints/*"))
    assert [p.read_bytes() for p in checkpoints] == [b"3"], checkpoints
    assert _jobs_made(flyte, name) == ["n0-0"]
    jobs = json.loads(flyte.kube("get", "pytorchjobs", "-n", "flytesnacks-development", "-o", "json"))["items"]
    job = next(j for j in jobs if j["metadata"]["labels"].get("execution-id") == name)
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    assert any(e.get("msg", "").startswith("Plugin [elastic-idl-pytorch] returned") and e["json"].get("exec_id") == name
               for e in flyte.log())  # fmt: skip


@pytest.mark.cluster_long
@pytest.mark.parametrize(
    ("workflow", "sdk"),
    [("wf_kf", "flytekitplugins-kfpytorch's Elastic"), ("wf", "elastic_idl's Elastic (a user who switched the SDK)")],
)
def test_the_training_workflow_runs_through_upstreams_plugin_with_either_sdks_elastic(
    flyte: Flyte, workflow: str, sdk: str
) -> None:
    """Item 6b: the same workflow through flyteplugins' `pytorch` (a plugin override, as admin's)."""
    name, outputs = flyte.run("train.py", workflow, {"steps": 3}, "--plugin", "pytorch=pytorch")
    assert outputs == {"o0": "trained 3 steps in a world of 2"}, sdk
    assert any(e.get("msg", "").startswith("Plugin [pytorch] returned") and e["json"].get("exec_id") == name
               for e in flyte.log()), sdk  # fmt: skip
    assert _jobs_made(flyte, name) == ["n0-0"]


def _restart(flyte: Flyte, *args: str) -> None:
    """Propeller alone restarted with a new configuration (flyte.py restart); the cluster stays."""
    r = subprocess.run(
        [sys.executable, str(FLYTE_PY), "restart", *args], env=flyte.env, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert r.returncode == 0 and "flytepropeller watches" in r.stderr, r.stderr


def _message(r: subprocess.CompletedProcess[str]) -> str:
    """The execution's error message flyte.py run printed (a JSON object after the phase line)."""
    m = re.search(r": Failed [\d.]+ s after create\n(\{.*?\n\})\n", r.stderr, re.S)
    assert m, r.stderr
    return str(json.loads(m.group(1))["message"])


@pytest.mark.cluster_long
def test_a_rank_1_user_error_fails_the_run_once_with_a_traceback(flyte: Flyte) -> None:
    """Item 6c: rank 1 raises a ValueError at its first step (the task has no retries: one attempt).

    Both workers write the attempt's one error document, and which lands is a race: rank 1's
    ValueError, or rank 0's collateral gloo error ("Connection closed by peer" / "Connection reset
    by peer"), each with its traceback: all seen here. The user's own message is therefore not
    reliably what Flyte shows (docs/guide/flyte.md, "End to end")."""
    r = flyte.run_raw("train.py", "wf", {"fail_rank": 1})
    assert r.returncode == 1 and r.stdout == "", r.stdout + r.stderr
    name = _created(r)
    message = _message(r)
    assert '"kind": "USER"' in r.stderr and "node n0:" in r.stderr, r.stderr
    assert "Traceback (most recent call last)" in message, message
    assert "ValueError: rank 1 refuses step 0" in message or "by peer" in message, message
    assert _jobs_made(flyte, name) == ["n0-0"]  # retries=0: one attempt


def _force_delete_worker_0(
    flyte: Flyte, workflow: str, inputs: dict[str, Any]
) -> tuple[subprocess.CompletedProcess[str], str]:
    """flyte.py run of train.py's WORKFLOW; once worker-0's pod has run 8 s (inside `hold`, the group
    formed), `kubectl delete pod --force --grace-period=0` it; the run's result and name."""
    proc = subprocess.Popen(
        [sys.executable, str(FLYTE_PY), "run", str(EXAMPLES / "train.py"), workflow, "--inputs", json.dumps(inputs)],
        env=flyte.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    lines, name = [], ""
    for line in proc.stderr:
        lines.append(line)
        if m := re.search(r"FlyteWorkflow flytesnacks-development/(\S+) created", line):
            name = m.group(1)
            break
    assert name, "".join(lines)
    pod = f"{name}-n0-0-worker-0"
    for _ in range(180):
        phase = subprocess.run(
            [flyte.kubectl, "--kubeconfig", flyte.kubeconfig, "get", "pod", pod, "-n", "flytesnacks-development",
             "-o", "jsonpath={.status.phase}"], capture_output=True, text=True, check=False,
        ).stdout  # fmt: skip
        if phase == "Running":
            break
        time.sleep(1)
    else:
        proc.kill()
        pytest.fail(f"{pod} never ran")
    time.sleep(8)
    flyte.kube("delete", "pod", pod, "-n", "flytesnacks-development", "--force", "--grace-period=0")
    out, err = proc.communicate(timeout=900)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "".join(lines) + err), name


@pytest.mark.cluster_long
def test_worker_0_force_deleted_fails_under_never_and_succeeds_under_exit_code(flyte: Flyte) -> None:
    """Item 6d: worker-0's pod force-deleted 8 s after it ran (hold 30 s: in the rendezvous or the
    formed group's wait).

    Under our plugin's default (upstream's `Never` for the elastic Worker; train.py's `wf`, no
    retries) the execution fails, as it does through flyteplugins' own. Under
    `plugins.elastic-idl-pytorch.elastic-worker-restart-policy: ExitCode` (`flyte.py restart
    --elastic-idl ...`), `wf_retry` (retries=1) succeeds, and which way depends on where the loss
    lands, both seen here: while worker-1's agent is in the rendezvous it loses the c10d store
    (it lived in worker-0's agent) and exits 200 (retryable): the operator re-creates both pods and
    the group RE-FORMS in the same PyTorchJob (n0-0 only); once the group formed, worker-1's
    worker gets a gloo error in user code, exits 1 (permanent under ExitCode), the PyTorchJob
    fails and propeller RETRIES: a second attempt, a new PyTorchJob (n0-1). The test says which."""
    r, name = _force_delete_worker_0(flyte, "wf", {"steps": 3, "hold": 30})
    assert r.returncode == 1 and re.search(rf"/{name}: Failed ", r.stderr), r.stderr
    assert _jobs_made(flyte, name) == ["n0-0"]
    job = json.loads(flyte.kube("get", "pytorchjob", f"{name}-n0-0", "-n", "flytesnacks-development", "-o", "json"))
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "Never"
    try:
        _restart(flyte, "--elastic-idl", "elastic-worker-restart-policy=ExitCode")
        r, name = _force_delete_worker_0(flyte, "wf_retry", {"steps": 3, "hold": 30})
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout.strip().splitlines()[-1]) == {"o0": "trained 3 steps in a world of 2"}
        jobs = _jobs_made(flyte, name)
        last = json.loads(
            flyte.kube("get", "pytorchjob", f"{name}-{jobs[-1]}", "-n", "flytesnacks-development", "-o", "json")
        )
        assert last["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "ExitCode"
        # Each pod's folder of the kept logs of the Nodes' kubelets (pod-logs/).
        worker_pods = sorted(p.name for p in flyte.dir.glob(f"pod-logs/*_{name}-n0-0-worker-*"))
        if jobs == ["n0-0"]:
            assert len(worker_pods) >= 3, worker_pods  # re-formed: worker-0 (at least) made again
            print(f"re-formed: one PyTorchJob, worker pods {len(worker_pods)}")
        else:
            assert jobs == ["n0-0", "n0-1"], jobs
            print("retried: a second attempt, PyTorchJob n0-1")
    finally:
        _restart(flyte)


@pytest.mark.cluster_long
def test_a_newer_sdks_unknown_key_runs_and_its_warning_reaches_the_run(flyte: Flyte) -> None:
    """Item 6e: `"futureKnob": 1` in the task's custom (what a newer SDK would write) runs; our
    plugin's warning about it is in propeller's log for the execution and flyte.py run prints it.
    Not in events.txt: propeller's local event sink writes each event's phase, not its reasons."""
    r = flyte.run_raw("train.py", "wf", {"steps": 1}, "--custom", '{"futureKnob": 1}')
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {"o0": "trained 1 steps in a world of 2"}
    name = _created(r)
    warning = re.search(
        r"== warning: node n0: elastic-idl-pytorch: task custom field not used: futureKnob\b.*", r.stderr
    )
    assert warning, r.stderr
    logged = [e for e in flyte.log() if e.get("json", {}).get("exec_id") == name and e.get("level") == "warning"]
    assert any("task custom field not used: futureKnob" in e["msg"] for e in logged), logged


@pytest.mark.cluster_long
def test_an_invalid_elastic_fails_before_any_pod_naming_the_field(flyte: Flyte) -> None:
    """Item 6f: minReplicas 3 above maxReplicas 2 in the custom: BuildResource's BadTaskSpecification."""
    r = flyte.run_raw("train.py", "wf", {}, "--custom", '{"elasticConfig": {"minReplicas": 3}}')
    assert r.returncode == 1, r.stdout + r.stderr
    name = _created(r)
    message = _message(r)
    assert "[BadTaskSpecification]" in message and "elastic_config.max_replicas" in message, message
    assert "max_replicas 2 is below min_replicas 3" in message and '"kind": "USER"' in r.stderr, r.stderr
    assert _jobs_made(flyte, name) == []
    pods = flyte.kube("get", "pods", "-n", "flytesnacks-development", "-o", "name")
    assert name not in pods, pods


def test_our_plugins_section_and_k8s_keys_reach_the_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    """`up`/`restart --elastic-idl KEY=VALUE` (and FLYTE_ELASTIC_IDL) write plugins.elastic-idl-pytorch;
    `restart --k8s KEY=VALUE` adds keys to plugins.k8s; none: no section (the plugin's defaults)."""
    monkeypatch.delenv("FLYTE_ELASTIC_IDL", raising=False)
    ports = {"propeller-profiler": 20001, "admin-unused": 20002}
    folder = Path("/var/tmp/c")
    cfg = ft.propeller_config(folder, folder / "k", STORE, ports, ft.elastic_idl_section())
    assert "elastic-idl-pytorch" not in cfg["plugins"]
    monkeypatch.setenv("FLYTE_ELASTIC_IDL", "mode=strict,elastic-worker-restart-policy=Never")
    section = ft.elastic_idl_section(["elastic-worker-restart-policy=ExitCode"])
    assert section == {"mode": "strict", "elastic-worker-restart-policy": "ExitCode"}
    k8s = ft.k8s_section(["enable-distributed-error-aggregation=true"])
    cfg = ft.propeller_config(folder, folder / "k", STORE, ports, section, k8s)
    assert cfg["plugins"]["elastic-idl-pytorch"] == section
    assert cfg["plugins"]["k8s"]["enable-distributed-error-aggregation"] is True
    assert cfg["plugins"]["k8s"]["default-env-vars"]


def test_a_custom_merges_into_the_pytorch_tasks_custom(tmp_path: Path) -> None:
    """run --custom: what a newer SDK (an unknown key) or a broken config would have serialized."""
    from google.protobuf.json_format import MessageToDict

    tasks, _, _ = ft.read_package(ft.package(EXAMPLES / "elastic.py", tmp_path))
    t = tasks["elastic.reduce_sum"]
    ft.merge_custom(t, {"futureKnob": 1, "elasticConfig": {"minReplicas": 3}})
    custom = MessageToDict(t.custom)
    assert custom["futureKnob"] == 1 and custom["elasticConfig"]["minReplicas"] == 3
    assert custom["elasticConfig"]["maxReplicas"] == 2 and custom["workerReplicas"] == {"replicas": 2}
