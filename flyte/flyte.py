"""Flyte 1.16's propeller on the one-machine cluster (issue 31; test equipment, not product).

    python flyte/flyte.py up      the cluster (cluster/cluster.py up), then propeller, built by
                                  flyte/build.sh; returns once propeller watches FlyteWorkflows.
                                  The last two lines are `export KUBECTL=...` / `export KUBECONFIG=...`
    python flyte/flyte.py restart [--elastic-idl KEY=VALUE] [--k8s KEY=VALUE]
                                  restart propeller alone with our plugin's section
                                  (plugins.elastic-idl-pytorch; `up --elastic-idl` and
                                  FLYTE_ELASTIC_IDL=K=V,K=V set it too) and extra plugins.k8s keys
    python flyte/flyte.py down    stop propeller, then the cluster (cluster/cluster.py down)
    python flyte/flyte.py run FILE WORKFLOW [--inputs JSON] [--plugin TASK_TYPE=PLUGIN] [--custom JSON]
                                  package FILE with pyflyte, compile WORKFLOW with propeller's
                                  kubectl-flyte (`create --dry-run`), create the FlyteWorkflow
                                  with kubectl (with the plugin overrides in its executionConfig,
                                  as admin writes a project's), wait for it; the last line is the
                                  workflow's outputs as one JSON object; before it, `== warning:`
                                  lines: our plugin's warnings about the execution's tasks.
                                  --custom merges JSON into each pytorch task's custom (a newer
                                  SDK's key, a broken config)

`make flyte-up` / `make flyte-down` / `make flyte-run` run these. State lives in CLUSTER_DIR
(default build/flyte-cluster): the cluster's own, plus `flyte/` (propeller's configuration, its
pid, the event file, each run's package and compiled workflow) and `logs/flytepropeller.log`.

What propeller gets (flyte/propeller.yaml in CLUSTER_DIR): the cluster's admin kubeconfig; the
object store as its blob store (storage type `minio`: S3 with an endpoint and access keys, the
bucket of objectstore.json); events written to a file (event sink `file`: there is no flyteadmin;
the Go module proxy refuses every version of it); the FlyteWorkflow CRD created at start
(`create-flyteworkflow-crd`); both pytorch plugins enabled, task type `pytorch` routed to ours
(`default-for-task-types: {pytorch: elastic-idl-pytorch}`; FLYTE_PYTORCH_PLUGIN=pytorch routes it
to flyteplugins' own); and every pod's env carries the store's FLYTE_AWS_* variables
(`plugins.k8s.default-env-vars`), as a deployment configures them. Propeller's admin client points
at a loopback port nothing listens on: nothing in a workflow without launch plans calls it.
Failure: one line `flyte <command>: <what>` on stderr, exit 1; a failed `up` stops what it started.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import subprocess
import sys
import tarfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "cluster"))

import cluster as kc  # noqa: E402  (cluster/cluster.py: the cluster's own helpers)

CLUSTER_PY = REPO / "cluster" / "cluster.py"
BUILD_SH = HERE / "build.sh"
#: The plugin that runs task type `pytorch` unless FLYTE_PYTORCH_PLUGIN says otherwise.
PYTORCH_PLUGIN = "elastic-idl-pytorch"
#: Plugins enabled: the pod plugins, the array plugin and both pytorch plugins.
ENABLED_PLUGINS = ["container", "sidecar", "k8s-array", "pytorch", "elastic-idl-pytorch"]
#: Where a FlyteWorkflow is created: the namespace Flyte's default template gives its project and
#: domain (`{{ project }}-{{ domain }}`; `run --project/--domain`, default flytesnacks/development).
NAMESPACE_TEMPLATE = "{project}-{domain}"
#: The image a package's tasks name when no cluster's is given (`package` alone). On the cluster a
#: task names its base image (task_image), which each Node's containerd holds, and the Flyte pods
#: get the host's files through REAL_NODES_POD_TEMPLATE.
IMAGE = "localhost/elastic-idl-flyte:dev"
#: The PodTemplate propeller starts every pod from on real Nodes (`plugins.k8s`
#: default-pod-template-name), in the namespace propeller reads its default templates from
#: (POD_NAMESPACE): the interpreter's prefix and the checkout mounted read-only at their host paths
#: and the venv's bin/ first on PATH (cluster/realnode.py host_files), as the cluster tests' pods get.
REAL_NODES_POD_TEMPLATE = "elastic-idl-real-nodes"
TEMPLATE_NAMESPACE = "flyte"
#: Where pyflyte-fast-execute unpacks the code in a pod: a folder that exists in the "image" (as
#: /root does in flytekit's default image); here each pod's own /tmp.
DEST_DIR = "/tmp"
#: What `kubectl-flyte create --dry-run` prints before the FlyteWorkflow (YAML).
DRY_RUN_HEAD = "Dry Run mode enabled. Printing the compiled workflow.\n"
#: propeller's log line once its informer caches are synced and its workers run.
WATCHING = "Started workers"


class FlyteError(Exception):
    """Why a command failed: one line, maybe followed by the end of a log."""


def state_dir() -> Path:
    if "CLUSTER_DIR" not in os.environ:
        os.environ["CLUSTER_DIR"] = str(kc.default_state_dir("flyte-cluster"))
    return kc.cluster_dir()


def flyte_dir(cluster: Path) -> Path:
    return cluster / "flyte"


def task_image(cluster: Path) -> str:
    """The image the tasks name: the cluster's base image."""
    return str(json.loads((cluster / "cluster.json").read_text())["images"]["base"])


def real_nodes_pod_template(image: str) -> dict[str, Any]:
    """REAL_NODES_POD_TEMPLATE: its container `default` applies to every container of a pod
    propeller makes (flytek8s merges the task's pod spec over it; the task's image wins, and the
    API server requires one here: the base image's)."""
    venv_bin = Path(sys.executable).parent
    files = kc.realnode.host_files(
        {"python": (Path(os.path.realpath(sys.executable)).parent.parent, True), "checkout": (REPO, True)}, venv_bin
    )
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": REAL_NODES_POD_TEMPLATE, "namespace": TEMPLATE_NAMESPACE},
        "template": {
            "spec": {
                "volumes": files.volumes,
                "containers": [
                    {"name": "default", "image": image, "env": [files.path], "volumeMounts": files.volume_mounts}
                ],
            }
        },
    }


def log_tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# ---------------------------------------------------------------- up / down


def elastic_idl_section(pairs: Sequence[str] = ()) -> dict[str, str]:
    """Our plugin's section (`plugins.elastic-idl-pytorch`, go/flyteplugin/config.go): the
    FLYTE_ELASTIC_IDL variable's comma-separated KEY=VALUE pairs, then `--elastic-idl KEY=VALUE`
    options (which win), e.g. `elastic-worker-restart-policy=ExitCode`."""
    items = [i for i in os.environ.get("FLYTE_ELASTIC_IDL", "").split(",") if i.strip()]
    section = {}
    for item in [*items, *pairs]:
        if "=" not in item:
            raise FlyteError(f"not KEY=VALUE for plugins.{PYTORCH_PLUGIN}: {item!r}")
        key, value = item.split("=", 1)
        section[key.strip()] = value.strip()
    return section


def propeller_config(
    cluster: Path,
    kubeconfig: Path,
    store: dict[str, Any],
    ports: dict[str, int],
    elastic_idl: dict[str, str] | None = None,
    k8s: dict[str, Any] | None = None,
    pod_template: str | None = None,
) -> dict[str, Any]:
    """Propeller's configuration (flytestdlib config sections, by their keys at v1.16.8);
    pod_template: the PodTemplate every pod starts from (REAL_NODES_POD_TEMPLATE on real Nodes)."""
    plugins: dict[str, Any] = {
        "k8s": {
            "default-env-vars": [{k: v} for k, v in store["env"].items()],
            "inject-finalizer": True,
            **({"default-pod-template-name": pod_template} if pod_template else {}),
            **(k8s or {}),
        }
    }
    if elastic_idl:
        plugins[PYTORCH_PLUGIN] = dict(elastic_idl)
    return {
        "propeller": {
            "kube-config": str(kubeconfig),
            "create-flyteworkflow-crd": True,
            "workers": 4,
            "workflow-reeval-duration": "10s",
            "downstream-eval-duration": "5s",
            "limit-namespace": "all",
            "prof-port": ports["propeller-profiler"],
            "metadata-prefix": "metadata/propeller",
            "rawoutput-prefix": f"s3://{store['bucket']}/raw",
            "enable-admin-launcher": False,
            "leader-election": {"enabled": False},
            "kube-client-config": {"qps": 100, "burst": 50, "timeout": "30s"},
        },
        "storage": {
            "type": "minio",
            "container": store["bucket"],
            "connection": {
                "endpoint": store["endpoint"],
                "auth-type": "accesskey",
                "access-key": store["access_key_id"],
                "secret-key": store["secret_access_key"],
                "region": store["region"],
                "disable-ssl": True,
            },
        },
        "event": {"type": "file", "file-path": str(flyte_dir(cluster) / "events.txt"), "rate": 500, "capacity": 1000},
        # No flyteadmin: the admin client is made at start (grpc dials lazily) and never called.
        "admin": {"endpoint": f"dns:///127.0.0.1:{ports['admin-unused']}", "insecure": True},
        "tasks": {
            "task-plugins": {
                "enabled-plugins": ENABLED_PLUGINS,
                "default-for-task-types": {
                    "container": "container",
                    "sidecar": "sidecar",
                    "container_array": "k8s-array",
                    "pytorch": os.environ.get("FLYTE_PYTORCH_PLUGIN", PYTORCH_PLUGIN),
                },
            }
        },
        # A list of one-key maps, as Flyte's own charts write it: viper lowercases the keys of a
        # map it reads (the pods got `flyte_aws_endpoint`), not those inside a list.
        "plugins": plugins,
        "logger": {"level": 4, "show-source": True},
    }


def run_cluster(command: str) -> list[str]:
    """cluster/cluster.py <command>, its output passed on to stderr; its stdout lines."""
    r = subprocess.run(
        [sys.executable, str(CLUSTER_PY), command], stdout=subprocess.PIPE, stderr=None, text=True, check=False
    )
    sys.stderr.write(r.stdout)
    if r.returncode != 0:
        raise FlyteError(f"cluster {command} failed (exit {r.returncode})")
    return r.stdout.splitlines()


def build() -> Path:
    r = subprocess.run([str(BUILD_SH)], stdout=subprocess.PIPE, text=True, check=False)
    if r.returncode != 0:
        raise FlyteError(f"flyte/build.sh failed (exit {r.returncode})")
    return Path(r.stdout.strip().splitlines()[-1])


def exports(lines: Sequence[str]) -> dict[str, str]:
    found = {}
    for line in lines:
        if line.startswith("export ") and "=" in line:
            name, value = line[len("export ") :].split("=", 1)
            found[name] = value
    if not {"KUBECTL", "KUBECONFIG"} <= found.keys():
        raise FlyteError("cluster up printed no KUBECTL / KUBECONFIG exports")
    return found


def kubectl(env: dict[str, str], *args: str, check: bool = True, input: str | None = None) -> str:
    r = subprocess.run(
        [env["KUBECTL"], "--kubeconfig", env["KUBECONFIG"], *args],
        capture_output=True,
        text=True,
        input=input,
        check=False,
        timeout=60,
    )
    if check and r.returncode != 0:
        raise FlyteError(f"kubectl {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def propeller_watching(log: Path, offset: int = 0) -> bool:
    try:
        with open(log, "rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError:
        return False
    for line in text.splitlines():
        try:
            if json.loads(line).get("msg") == WATCHING:
                return True
        except (ValueError, AttributeError):
            continue
    return False


def k8s_section(pairs: Sequence[str] = ()) -> dict[str, Any]:
    """Extra keys of `plugins.k8s` (flytek8s' section), `--k8s KEY=VALUE`, each value read as YAML
    (`enable-distributed-error-aggregation=true`)."""
    out = {}
    for item in pairs:
        if "=" not in item:
            raise FlyteError(f"not KEY=VALUE for plugins.k8s: {item!r}")
        key, value = item.split("=", 1)
        out[key.strip()] = yaml.safe_load(value)
    return out


def start_propeller(
    cluster: Path, env: dict[str, str], elastic_idl: dict[str, str], k8s: dict[str, Any] | None = None
) -> None:
    """Write propeller's configuration, start it, return once it watches."""
    fd = flyte_dir(cluster)
    fd.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    bin_dir = build()
    build_s = time.monotonic() - t0
    store = json.loads((cluster / "objectstore.json").read_text())
    ports = kc.free_ports(["propeller-profiler", "admin-unused"])
    config = fd / "propeller.yaml"
    config.write_text(
        yaml.safe_dump(
            propeller_config(cluster, Path(env["KUBECONFIG"]), store, ports, elastic_idl, k8s, REAL_NODES_POD_TEMPLATE)
        )
    )
    config.chmod(0o600)  # it holds the store's keys
    (fd / "env.json").write_text(json.dumps(env))
    propeller_env = dict(os.environ)
    if kubectl(env, "get", "namespace", TEMPLATE_NAMESPACE, check=False) == "":
        kubectl(env, "create", "namespace", TEMPLATE_NAMESPACE)
    kubectl(env, "apply", "--server-side", "--field-manager=flyte-up", "-f", "-",
            input=json.dumps(real_nodes_pod_template(task_image(cluster))))  # fmt: skip
    propeller_env["POD_NAMESPACE"] = TEMPLATE_NAMESPACE
    log = cluster / "logs" / "flytepropeller.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(log, "ab") as out:  # appended: a restart keeps the earlier propeller's lines
        mark = out.tell()
        p = subprocess.Popen(
            [str(bin_dir / "flytepropeller"), "--config", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=fd,
            env=propeller_env,
            start_new_session=True,
        )
    (fd / "propeller.json").write_text(
        json.dumps({"pid": p.pid, "start": kc._start_time(p.pid), "bin": str(bin_dir), "ports": ports})
    )
    deadline = started + 120 * kc.timeout_scale()
    while not propeller_watching(log, mark):
        if p.poll() is not None:
            raise FlyteError(f"flytepropeller exited ({p.returncode}) before it watched:\n{log_tail(log)}")
        if time.monotonic() > deadline:
            raise FlyteError(f"flytepropeller did not watch within 120 s:\n{log_tail(log)}")
        time.sleep(0.2)
    watching_s = time.monotonic() - started
    kubectl(env, "get", "crd", "flyteworkflows.flyte.lyft.com")
    section = f"; plugins.{PYTORCH_PLUGIN}: {json.dumps(elastic_idl)}" if elastic_idl else ""
    section += f"; plugins.k8s also: {json.dumps(k8s)}" if k8s else ""
    print(
        f"== flytepropeller watches (pid {p.pid}; build check {build_s:.1f} s, start -> watching "
        f"{watching_s:.1f} s); log {log}; events {fd / 'events.txt'}{section}",
        file=sys.stderr,
    )


def up(elastic_idl: Sequence[str] = ()) -> None:
    cluster = state_dir()
    section = elastic_idl_section(elastic_idl)
    env = exports(run_cluster("up"))
    try:
        log = cluster / "logs" / "flytepropeller.log"
        if log.exists():
            log.unlink()
        start_propeller(cluster, env, section)
    except BaseException:
        stop_propeller(cluster)
        run_cluster("down")
        raise
    print(f"export KUBECTL={env['KUBECTL']}")
    print(f"export KUBECONFIG={env['KUBECONFIG']}")


def restart(elastic_idl: Sequence[str] = (), k8s: Sequence[str] = ()) -> None:
    """Stop propeller and start it again with a new configuration (our plugin's section); the
    cluster, its workflows and propeller's log stay."""
    cluster = state_dir()
    fd = flyte_dir(cluster)
    if not (fd / "env.json").exists():
        raise FlyteError(f"no flyte up in {cluster}: make flyte-up first")
    section = elastic_idl_section(elastic_idl)
    for line in stop_propeller(cluster):
        print(f"== {line}", file=sys.stderr)
    start_propeller(cluster, json.loads((fd / "env.json").read_text()), section, k8s_section(k8s))


def stop_propeller(cluster: Path) -> list[str]:
    state = flyte_dir(cluster) / "propeller.json"
    if not state.exists():
        return []
    s = json.loads(state.read_text())
    done = []
    if s.get("start") and kc._start_time(int(s["pid"])) == s["start"]:
        kc._terminate(int(s["pid"]))
        done.append(f"stopped flytepropeller (pid {s['pid']})")
    state.unlink()
    return done


def down() -> None:
    cluster = state_dir()
    for line in stop_propeller(cluster):
        print(f"== {line}")
    for line in run_cluster("down"):
        print(line)


# ---------------------------------------------------------------- run


def package(file: Path, out: Path, image: str = IMAGE) -> Path:
    """pyflyte package of FILE's module, the code as a fast-registration tarball (--copy all),
    its tasks naming image."""
    pyflyte = Path(sys.executable).parent / "pyflyte"
    tgz = out / "package.tgz"
    r = subprocess.run(
        [str(pyflyte), "--pkgs", file.stem, "package", "--image", image, "--copy", "all",
         "--in-container-source-path", DEST_DIR, "--output", str(tgz), "--force"],
        cwd=file.parent, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if r.returncode != 0:
        raise FlyteError(f"pyflyte package failed:\n{r.stdout}{r.stderr}")
    return tgz


def s3_client(store: dict[str, Any]) -> Any:
    import botocore.config
    import botocore.session

    return botocore.session.get_session().create_client(
        "s3",
        endpoint_url=store["endpoint"],
        region_name=store["region"],
        aws_access_key_id=store["access_key_id"],
        aws_secret_access_key=store["secret_access_key"],
        config=botocore.config.Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}),
    )


def read_package(tgz: Path) -> tuple[dict[str, Any], dict[str, Any], tuple[str, bytes] | None]:
    """The package's task templates and workflow templates by name, and the code tarball."""
    from flyteidl.admin import task_pb2, workflow_pb2

    tasks: dict[str, Any] = {}
    workflows: dict[str, Any] = {}
    tarball = None
    with tarfile.open(tgz) as tar:
        for member in tar.getmembers():
            data = tar.extractfile(member)
            if data is None:
                continue
            raw = data.read()
            if member.name.endswith(".tar.gz"):
                tarball = (Path(member.name).name, raw)
            elif member.name.endswith("_1.pb"):  # <n>_<name>_<resource type>.pb: 1 task, 2 workflow, 3 launch plan
                t = task_pb2.TaskSpec()
                t.ParseFromString(raw)
                tasks[t.template.id.name] = t.template
            elif member.name.endswith("_2.pb"):
                w = workflow_pb2.WorkflowSpec()
                w.ParseFromString(raw)
                workflows[w.template.id.name] = w
    return tasks, workflows, tarball


def hydrate(message: Any, project: str, domain: str, version: str) -> None:
    """What `flytectl register` does to a package's ids: every flyteidl.core.Identifier in the
    message (the entity's own and each node's reference) gets the project, domain and version
    where pyflyte package left them empty."""
    if message.DESCRIPTOR.full_name == "flyteidl.core.Identifier":
        message.project = message.project or project
        message.domain = message.domain or domain
        message.version = message.version or version
        return
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            items = value.values() if field.message_type.fields_by_name["value"].message_type else []
            for item in items:
                hydrate(item, project, domain, version)
        elif field.is_repeated:
            for item in value:
                hydrate(item, project, domain, version)
        else:
            hydrate(value, project, domain, version)


def set_package_path(template: Any, path: str) -> None:
    """`{{ .remote_package_path }}` in the task's container args (a container task) or in each
    container's args of its pod spec (a k8s_pod task, as an Elastic task is) becomes `path`."""

    def sub(args: Sequence[str]) -> list[str]:
        return [a.replace("{{ .remote_package_path }}", path) for a in args]

    target = template.WhichOneof("target")
    if target == "container":
        args = sub(template.container.args)
        del template.container.args[:]
        template.container.args.extend(args)
    elif target == "k8s_pod":
        for container in template.k8s_pod.pod_spec.fields["containers"].list_value.values:
            fields = container.struct_value.fields
            if "args" in fields:
                args = sub([v.string_value for v in fields["args"].list_value.values])
                fields["args"].list_value.Clear()
                fields["args"].list_value.extend(args)


def merge_custom(template: Any, extra: dict[str, Any]) -> None:
    """Merge EXTRA into a task template's custom (objects key by key): a task as a newer SDK, or a
    broken one, would have serialized it (`run --custom '{"futureKnob": 1}'`)."""
    from google.protobuf.json_format import MessageToDict

    def merged(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
        out = dict(a)
        for k, v in b.items():
            out[k] = merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
        return out

    new = merged(MessageToDict(template.custom), extra)
    template.custom.Clear()
    template.custom.update(new)


def task_warnings(flyte_wf: dict[str, Any]) -> list[str]:
    """The task phase reasons a user should see (what flyteadmin shows as a task event's reason;
    the local event sink writes the phases only): those with `warnings:` or from our plugin, in a
    node's message or in the reason a k8s plugin's state keeps (taskNodeStatus.pluginState:
    flytek8s' PluginState, gob-encoded, its Reason a plain string in it) while the task runs."""
    import base64

    found = []

    def walk(statuses: dict[str, Any]) -> None:
        for node, ns in statuses.items():
            texts = [ns.get("message", "")]
            state = (ns.get("taskNodeStatus") or {}).get("pluginState")
            if state:
                raw = base64.b64decode(state).decode("utf-8", errors="replace")
                texts += re.findall(r"[\x20-\x7e]{12,}", raw)
            for text in texts:
                if "warnings:" in text or PYTORCH_PLUGIN in text:
                    found.append(f"node {node}: {text[text.find('warnings:') if 'warnings:' in text else 0 :]}")
            walk(ns.get("subNodeStatus", {}) or {})

    walk(flyte_wf.get("status", {}).get("nodeStatus", {}) or {})
    return found


def plugin_log_warnings(log: Path, execution: str) -> list[str]:
    """Our plugin's warnings about the execution's tasks in propeller's log (level warning, the
    message starting with the plugin's id: BuildResource's unknown-key and dropped-field ones)."""
    found = []
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return found
    for line in lines:
        if execution not in line or not line.startswith("{"):
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        msg = entry.get("msg", "")
        if entry.get("json", {}).get("exec_id") == execution and entry.get("level") == "warning":
            if msg.startswith(PYTORCH_PLUGIN + ":"):
                found.append(f"node {entry['json'].get('node', '?')}: {msg} (propeller's log)")
    return found


def load_workflow(file: Path, name: str) -> Any:
    import importlib

    sys.path.insert(0, str(file.parent))
    module = importlib.import_module(file.stem)
    return getattr(module, name)


def run(
    file: Path,
    workflow: str,
    inputs: dict[str, Any],
    timeout: float,
    project: str,
    domain: str,
    plugins: dict[str, str] | None = None,
    custom: dict[str, Any] | None = None,
) -> int:
    from flyteidl.core import workflow_closure_pb2
    from flytekit.core.context_manager import FlyteContextManager
    from flytekit.core.type_engine import TypeEngine

    cluster = state_dir()
    fd = flyte_dir(cluster)
    if not (fd / "propeller.json").exists():
        raise FlyteError(f"no propeller runs for {cluster}: make flyte-up first")
    env = json.loads((fd / "env.json").read_text())
    info = json.loads((fd / "propeller.json").read_text())
    store = json.loads((cluster / "objectstore.json").read_text())
    file = file.resolve()
    name = f"f{dt.datetime.now(dt.UTC).strftime('%H%M%S')}{os.urandom(2).hex()}"
    work = fd / "runs" / name
    work.mkdir(parents=True)
    t0 = time.monotonic()
    tasks, workflows, tarball = read_package(package(file, work, task_image(cluster)))
    full = f"{file.stem}.{workflow}"
    if full not in workflows:
        raise FlyteError(f"no workflow {full} in the package (it has {sorted(workflows)})")
    wf_spec = workflows[full]
    # What `flytectl register files` does with a fast-registration package: upload the code
    # tarball and write its address into each task's `{{ .remote_package_path }}`.
    if tarball is not None:
        key = f"fast/{name}/{tarball[0]}"
        s3 = s3_client(store)
        try:
            s3.put_object(Bucket=store["bucket"], Key=key, Body=tarball[1])
        finally:
            s3.close()
        for t in tasks.values():
            set_package_path(t, f"s3://{store['bucket']}/{key}")
    if custom:
        for t in tasks.values():
            if t.type == "pytorch":
                merge_custom(t, custom)
    closure = workflow_closure_pb2.WorkflowClosure(workflow=wf_spec.template, tasks=list(tasks.values()))
    hydrate(closure, project, domain, name)
    (work / "workflow.pb").write_bytes(closure.SerializeToString())
    wf = load_workflow(file, workflow)
    ctx = FlyteContextManager.current_context()
    # The default launch plan's part: the workflow's own defaults for the inputs not given.
    inputs = {**wf.python_interface.default_inputs_as_kwargs, **inputs}
    # JSON writes 25.0 as 25: a whole number for a float input is that float.
    types = wf.python_interface.inputs
    inputs = {k: float(v) if types.get(k) is float and type(v) is int else v for k, v in inputs.items()}
    literals = TypeEngine.dict_to_literal_map(ctx, inputs, wf.python_interface.inputs)
    (work / "inputs.pb").write_bytes(literals.to_flyte_idl().SerializeToString())
    namespace = NAMESPACE_TEMPLATE.format(project=project, domain=domain)
    if kubectl(env, "get", "namespace", namespace, check=False) == "":
        kubectl(env, "create", "namespace", namespace)
    wait_until = time.monotonic() + 60 * kc.timeout_scale()  # a namespace takes pods once its ServiceAccount exists
    while kubectl(env, "get", "serviceaccount", "default", "-n", namespace, check=False) == "":
        if time.monotonic() > wait_until:
            raise FlyteError(f"no ServiceAccount default in {namespace} after 60 s")
        time.sleep(0.5)
    r = subprocess.run(
        [str(Path(info["bin"]) / "kubectl-flyte"), "--kubeconfig", env["KUBECONFIG"], "--namespace", namespace,
         "create", "--proto-path", str(work / "workflow.pb"), "--input-path", str(work / "inputs.pb"),
         "--execution-id", name, "--dry-run"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    (work / "kubectl-flyte.log").write_text(r.stdout + r.stderr)
    if r.returncode != 0 or DRY_RUN_HEAD not in r.stdout:
        raise FlyteError(f"kubectl-flyte create failed:\n{r.stdout}{r.stderr}")
    # The object kubectl-flyte create would send, created by kubectl, with what admin would add
    # from a project's or domain's plugin override (its matchable attributes): the execution
    # config's plugin for a task type.
    flyte_wf = yaml.safe_load(r.stdout.split(DRY_RUN_HEAD, 1)[1])
    # The dry run prints the object's own TypeMeta (kind "flyteworkflow"); client-go's encoder
    # writes the kind the scheme registers, which the API server requires.
    flyte_wf["kind"] = "FlyteWorkflow"
    for task_type, plugin in (plugins or {}).items():
        impls = flyte_wf["executionConfig"].get("TaskPluginImpls") or {}
        impls[task_type] = {"PluginIDs": [plugin], "MissingPluginBehavior": 0}  # 0: FAIL
        flyte_wf["executionConfig"]["TaskPluginImpls"] = impls
    # JSON, not YAML: kubectl reads YAML 1.1, where a bare `n` (a variable's name) is false.
    (work / "flyteworkflow.json").write_text(json.dumps(flyte_wf, indent=1))
    kubectl(env, "create", "-f", str(work / "flyteworkflow.json"))
    print(f"== FlyteWorkflow {namespace}/{name} created ({time.monotonic() - t0:.1f} s)", file=sys.stderr)
    created = time.monotonic()
    deadline = created + timeout
    # v1alpha1.WorkflowPhase, by number.
    phase_names = ["Ready", "Running", "Succeeding", "Success", "Failing", "Failed", "Aborted", "HandlingFailureNode"]
    phase = 0
    obj: dict[str, Any] = {}
    warned: list[str] = []
    while time.monotonic() < deadline:
        obj = json.loads(kubectl(env, "get", "flyteworkflow", name, "-n", namespace, "-o", "json"))
        phase = obj.get("status", {}).get("phase", 0)
        for line in task_warnings(obj):
            if line not in warned:
                warned.append(line)
                print(f"== warning: {line}", file=sys.stderr)
        if phase in (3, 5, 6):
            break
        if kc._start_time(int(info["pid"])) != info["start"]:
            log = cluster / "logs" / "flytepropeller.log"
            raise FlyteError(f"flytepropeller (pid {info['pid']}) is gone; its log ends:\n{log_tail(log)}")
        time.sleep(1)
    else:
        raise FlyteError(f"{namespace}/{name} not done within {timeout:.0f} s (phase {phase_names[phase]})")
    for line in plugin_log_warnings(cluster / "logs" / "flytepropeller.log", name):
        if line not in warned:
            warned.append(line)
            print(f"== warning: {line}", file=sys.stderr)
    status = obj["status"]
    print(
        f"== {namespace}/{name}: {phase_names[status['phase']]} {time.monotonic() - created:.1f} s after create",
        file=sys.stderr,
    )
    if status["phase"] != 3:
        print(json.dumps(status.get("error", status.get("message", "")), indent=1), file=sys.stderr)
        for node, ns in status.get("nodeStatus", {}).items():
            if ns.get("error"):
                print(f"node {node}: {json.dumps(ns['error'])}", file=sys.stderr)
        return 1
    outputs: dict[str, Any] = {}
    ref = status.get("outputRef")
    if ref:
        from flyteidl.core import literals_pb2
        from flytekit.models.literals import LiteralMap

        bucket, key = ref.removeprefix("s3://").split("/", 1)
        s3 = s3_client(store)
        try:
            raw = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        finally:
            s3.close()
        lm = literals_pb2.LiteralMap()
        lm.ParseFromString(raw)
        outputs = TypeEngine.literal_map_to_kwargs(
            ctx, LiteralMap.from_flyte_idl(lm), python_types=wf.python_interface.outputs
        )
    print(json.dumps(outputs, default=str))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    section_help = (
        f"a key of our plugin's section, plugins.{PYTORCH_PLUGIN} (go/flyteplugin/config.go), e.g. "
        "elastic-worker-restart-policy=ExitCode; FLYTE_ELASTIC_IDL=K=V,K=V sets them too"
    )
    u = sub.add_parser("up")
    u.add_argument("--elastic-idl", action="append", default=[], metavar="KEY=VALUE", help=section_help)
    rs = sub.add_parser("restart", help="restart propeller only, with a new configuration")
    rs.add_argument("--elastic-idl", action="append", default=[], metavar="KEY=VALUE", help=section_help)
    rs.add_argument(
        "--k8s",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a key of plugins.k8s, e.g. enable-distributed-error-aggregation=true",
    )
    sub.add_parser("down")
    r = sub.add_parser("run")
    r.add_argument("file", type=Path)
    r.add_argument("workflow")
    r.add_argument("--inputs", default="{}", help="the workflow's inputs, one JSON object")
    r.add_argument("--timeout", type=float, default=600.0)
    r.add_argument("--project", default="flytesnacks", help="the execution's project (default: Flyte's sandbox one)")
    r.add_argument("--domain", default="development")
    r.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="TASK_TYPE=PLUGIN",
        help="this execution's plugin for a task type (what a project's plugin override gives), e.g. pytorch=pytorch",
    )
    r.add_argument(
        "--custom",
        default="{}",
        metavar="JSON",
        help="merged into every pytorch task's custom, e.g. '{\"futureKnob\": 1}' (a newer SDK's task)",
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            up(args.elastic_idl)
        elif args.command == "restart":
            restart(args.elastic_idl, args.k8s)
        elif args.command == "down":
            down()
        else:
            return run(
                args.file,
                args.workflow,
                json.loads(args.inputs),
                args.timeout,
                args.project,
                args.domain,
                dict(p.split("=", 1) for p in args.plugin),
                json.loads(args.custom),
            )
    except (FlyteError, kc.ClusterError, KeyboardInterrupt) as e:
        print(f"flyte {args.command}: {e or 'interrupted'}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
