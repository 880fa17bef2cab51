"""Real Nodes (issue 35, first part): ``cluster/cluster.py up``.

This module's own cluster of 2 Nodes, each a kubelet 1.36.3 with containerd 2.4 and runc in
namespaces of its own (cluster/realnode.py), pods from the images built here (cluster/image.py)
that mount the interpreter, the checkout and its venv read-only. What is asserted is what the
kubelet, containerd, runc and the kernel do, none of it ours: the runtime the Nodes report, a pod's
Python importing torch and this package, a container over its memory limit OOMKilled by the kernel,
pods on two Nodes talking over their addresses, cluster DNS, `kubectl logs` through the kubelet.
And the machine left as found: the kernel settings the kubelet changes only in the Node's files,
and after `down` no process, link, mount, cgroup or network namespace of the cluster.

All of it in `make cluster-test` (marker cluster_long): the Node binaries' first build is minutes.
Start it under ``flock /var/lock/elastic-idl-cluster.lock``.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import elastic_idl as ei
import test_cluster as tc

pytestmark = pytest.mark.cluster_long

ct = tc.ct
rn = ct.realnode
NODES = ("node-0", "node-1")
NS = "e2e-real"
#: A pod's command (python -c): an HTTP server on port 8080 of every address.
HTTP_SERVER = "import http.server as h; h.test(h.SimpleHTTPRequestHandler, port=8080, bind='0.0.0.0')"
BEFORE: dict[str, Any] = {}  # the host as the fixture found it


def _host_state() -> dict[str, Any]:
    """What a cluster must leave as it found: the kernel settings the kubelet would set, the
    firewall rules, links, network namespaces (by inode), mounts and the cgroups under this
    process's own."""
    own = rn.own_cgroup().lstrip("/")
    cgroups = []
    for h in rn.CGROUP_HIERARCHIES:
        top = rn.CGROUP_ROOT / h / own / "elastic-idl"
        cgroups += [str(p) for p in top.rglob("*") if p.is_dir()] + ([str(top)] if top.is_dir() else [])
    netns = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                netns.add(os.readlink(proc / "ns" / "net"))
            except OSError:
                continue
    rules = []
    for save in ("iptables-save", "iptables-legacy-save"):  # the host's firewall, nf_tables and legacy
        out = subprocess.run([save], capture_output=True, text=True, check=False).stdout
        rules += [line for line in out.splitlines() if not line.startswith("#")]
    return {
        "sysctl": {name: (Path("/proc/sys") / name).read_text() for name in rn.KERNEL_TUNABLES},
        "rules": rules,
        "links": sorted(p.name for p in Path("/sys/class/net").iterdir()),
        "netns": sorted(netns),
        "mounts": sorted(line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()),
        "cgroups": sorted(cgroups),
    }


@pytest.fixture(scope="module")
def real() -> Iterator[tc.Kube]:
    state = ct.default_state_dir("cluster-real-test")
    env = {**os.environ, "CLUSTER_DIR": str(state)}
    cmd = [sys.executable, str(tc.CLUSTER_PY)]
    before = _host_state()
    BEFORE.update(before)
    try:
        up = subprocess.run(
            [*cmd, "up", "--nodes", str(len(NODES))],
            env=env, capture_output=True, text=True, timeout=3600, check=False,
        )  # fmt: skip
        if up.returncode != 0:
            pytest.fail(f"cluster up failed: {up.stderr.strip()}\n{up.stdout[-3000:]}")
        last = up.stdout.strip().splitlines()[-2:]
        kube = tc.Kube(last[0].split("=", 1)[1], last[1].split("=", 1)[1], state)
        kube.run("create", "namespace", NS)
        tc._until(lambda: kube.run("get", "sa", "default", "-n", NS, check=False).returncode == 0, 60)
        yield kube
    finally:
        down = subprocess.run([*cmd, "down"], env=env, capture_output=True, text=True, timeout=300, check=False)
        assert down.returncode == 0, down.stderr
        after = _wait_settled(before)
        tc._nothing_left(state)
        assert after == before, "cluster down did not leave the machine as it found it"


def _wait_settled(before: dict[str, Any], seconds: float = 20.0) -> dict[str, Any]:
    """The host state once the kernel has torn down the Nodes' namespaces (in the background)."""
    deadline = time.monotonic() + seconds
    while True:
        after = _host_state()
        if after == before or time.monotonic() > deadline:
            return after
        time.sleep(0.5)


def _pod(kube: tc.Kube, name: str, code: str, *, node: str, memory: str = "1Gi", cpu: str = "1") -> dict[str, Any]:
    """A pod on `node` running `code` with the venv's Python, through the tests' pod template."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "restartPolicy": "Never",
            "nodeName": node,
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": "main",
                    "image": "example.com/unused:1",  # the template puts the base image here
                    "command": ["python", "-c", code],
                    "resources": {"limits": {"memory": memory, "cpu": cpu}},
                }
            ],
        },
    }
    return tc.on_real_nodes(kube, [pod])[0]


def _apply(kube: tc.Kube, pod: dict[str, Any]) -> None:
    kube.run("apply", "-f", "-", stdin=json.dumps(pod))


def _get(kube: tc.Kube, name: str) -> dict[str, Any]:
    return dict(json.loads(kube.run("get", "pod", name, "-n", NS, "-o", "json").stdout))


def _finished(kube: tc.Kube, name: str, seconds: float = 120) -> dict[str, Any]:
    """The pod's container's terminated state, once it has one."""
    found: dict[str, Any] = {}

    def done() -> bool:
        statuses = _get(kube, name).get("status", {}).get("containerStatuses") or []
        found.update(statuses[0].get("state", {}).get("terminated") or {} if statuses else {})
        return bool(found)

    tc._until(done, seconds)
    return found


def test_every_node_is_a_kubelet_on_containerd(real: tc.Kube) -> None:
    nodes = json.loads(real.run("get", "nodes", "-o", "json").stdout)["items"]
    assert sorted(n["metadata"]["name"] for n in nodes) == list(NODES)
    for n in nodes:
        info = n["status"]["nodeInfo"]
        assert info["kubeletVersion"] == ct.K8S_VERSION
        assert info["containerRuntimeVersion"].startswith("containerd://2.4."), info
        ready = {c["type"]: c["status"] for c in n["status"]["conditions"]}["Ready"]
        assert ready == "True"
        ip = [a["address"] for a in n["status"]["addresses"] if a["type"] == "InternalIP"]
        assert ip == [str(rn.node_net(NODES.index(n["metadata"]["name"])).ip)]


def test_a_pod_runs_the_venvs_python_with_torch_and_reaches_the_object_store(real: tc.Kube) -> None:
    code = (
        "import socket, urllib.request, urllib.error, torch, elastic_idl\n"
        "try:\n    code = urllib.request.urlopen('http://10.237.0.1:7070/', timeout=10).status\n"
        "except urllib.error.HTTPError as e:\n    code = e.code\n"
        "print(socket.gethostname(), torch.__version__, code)\n"
    )
    _apply(real, _pod(real, "hello", code, node="node-0"))
    state = _finished(real, "hello")
    logs = real.run("logs", "hello", "-n", NS).stdout.split()  # through the kubelet's API
    assert state["exitCode"] == 0, logs
    # Unsigned, the store answers 403: the request reached it across the Node's network.
    assert logs[0] == "hello" and logs[1].startswith("2.") and logs[2] == "403", logs
    pod = _get(real, "hello")
    assert ct.realnode.POD_RANGE.overlaps(ct.ipaddress.ip_network(pod["status"]["podIP"] + "/32"))
    assert ct.ipaddress.ip_address(pod["status"]["podIP"]) in rn.node_net(0).subnet


def test_a_container_over_its_memory_limit_is_oomkilled_by_the_kernel(real: tc.Kube) -> None:
    _apply(real, _pod(real, "oom", "b = bytearray(400 * 2**20); print(len(b))", node="node-1", memory="64Mi"))
    state = _finished(real, "oom")
    assert (state["reason"], state["exitCode"]) == ("OOMKilled", 137), state


def test_pods_on_two_nodes_talk_over_their_addresses_a_cluster_ip_and_cluster_dns(real: tc.Kube) -> None:
    server = _pod(real, "srv", HTTP_SERVER, node="node-1")
    server["metadata"]["labels"] = {"app": "srv"}
    _apply(real, server)
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "srv", "namespace": NS},
        "spec": {"selector": {"app": "srv"}, "ports": [{"port": 80, "targetPort": 8080}]},
    }
    real.run("apply", "-f", "-", stdin=json.dumps(service))
    tc._until(lambda: bool(_get(real, "srv").get("status", {}).get("podIP")), 60)
    ip = _get(real, "srv")["status"]["podIP"]
    assert ct.ipaddress.ip_address(ip) in rn.node_net(1).subnet
    cluster_ip = json.loads(real.run("get", "service", "srv", "-n", NS, "-o", "json").stdout)["spec"]["clusterIP"]
    assert ct.ipaddress.ip_address(cluster_ip) in ct.SERVICE_CIDR
    code = (
        "import socket, time, urllib.request\n"
        f"for url in ('http://{ip}:8080/', 'http://srv.{NS}.svc.cluster.local/'):\n"
        "    for _ in range(60):\n"
        "        try:\n"
        "            print(urllib.request.urlopen(url, timeout=5).status); break\n"
        "        except OSError:\n            time.sleep(0.5)\n"
        f"print(socket.gethostbyname('srv.{NS}.svc.cluster.local'))\n"
    )
    _apply(real, _pod(real, "cli", code, node="node-0"))
    state = _finished(real, "cli")
    out = real.run("logs", "cli", "-n", NS).stdout.split()
    # The pod's address across the Nodes, then the Service's name: CoreDNS gives its ClusterIP and
    # kube-proxy's rules in node-0's namespace carry the connection to the pod on node-1.
    assert state["exitCode"] == 0 and out == ["200", "200", cluster_ip], out


def test_the_kubelets_kernel_settings_land_in_the_nodes_files_not_the_kernel(real: tc.Kube) -> None:
    # What its container manager sets (setupKernelTunables) when protectKernelDefaults is false.
    wanted = {"kernel/panic": "10", "kernel/panic_on_oops": "1", "vm/overcommit_memory": "1"}
    for name, value in wanted.items():
        for node in NODES:
            copy = real.dir / "nodes" / node / "sysctl" / name.replace("/", ".")
            assert copy.read_text().strip() == value, (node, name)
    now = _host_state()
    assert now["sysctl"] == BEFORE["sysctl"]
    # kube-proxy's rules are in the Nodes' namespaces only (the ClusterIP test above used them).
    assert now["rules"] == BEFORE["rules"]


def _real_job(kube: tc.Kube, name: str, steps: int, step_seconds: float, start_method: str | None = None) -> tc.Run:
    """test_cluster's 2-node job as `elastic-idl render` prints it, plus the tests' pod template, applied."""
    tc.ensure_train_ns(kube)
    tc.SHARED.mkdir(parents=True, exist_ok=True)
    run = tc._new_run(kube, name)
    task = copy.deepcopy(tc.TWO_NODES)
    if start_method:
        task["elastic_config"]["start_method"] = start_method
    objects = tc._render_cli(task, run.name, [str(tc.TRAIN), str(run.out), str(steps), str(step_seconds)])
    tc._container(objects[0]).setdefault("env", []).append(
        {"name": "ELASTIC_IDL_OUTPUT", "value": str(run.out / "result.json")}
    )
    run.apply(objects)
    return run


def test_the_two_node_elastic_job_trains_on_real_nodes_to_succeeded(real: tc.Kube) -> None:
    """The operator makes the pods, the scheduler binds them, the kubelets run our entrypoint in
    containers; they rendezvous at worker-0 by its name (cluster DNS) and train with gloo."""
    run = _real_job(real, "real-two", 5, 0.1)
    assert run.wait_done(300) == "Succeeded", run.logs()
    assert [s for _, s, _, _ in run.steps()] == list(range(5))
    assert {w for _, _, w, _ in run.steps()} == {2}
    assert json.loads((run.out / "result.json").read_text())["rank"] == 0
    pods = run.pods()
    seen = {s["hostname"]: s for s in run.seen()}
    assert set(seen) == set(pods) == {f"real-two-worker-{i}" for i in range(2)}
    for name, s in seen.items():
        # The pod's own address, from its Node's /28; the container's command is PID 1.
        assert s["addresses"] == [pods[name]["status"]["podIP"]]
        node = pods[name]["spec"]["nodeName"]
        assert ct.ipaddress.ip_address(s["addresses"][0]) in rn.node_net(NODES.index(node)).subnet
        assert s["pid1"][:3] == ["python", "-m", "elastic_idl.pod"]


def test_worker_0_force_deleted_on_a_real_node_is_recreated_and_the_job_resumes(real: tc.Kube) -> None:
    """The kubelet kills the deleted pod's containers, the operator makes a new worker-0, the
    network a new address; the survivors re-rendezvous and resume from the checkpoint."""
    run = _real_job(real, "real-kill0", 30, 0.3, start_method="START_METHOD_SPAWN")
    run.wait_steps(3, 240)
    before = run.pods()["real-kill0-worker-0"]
    real.run("delete", "pod", before["metadata"]["name"], "-n", tc.TRAIN_NS, "--grace-period=0", "--force")
    killed_at = time.time()
    assert run.wait_done(400) == "Succeeded", run.logs()
    tc.assert_recreated_and_resumed(run, before, killed_at, 30)


#: The NetworkPolicy test's pods' CPU limit (and so request): small, for a Node's 2 CPUs admit them
#: beside what the module's other tests left running (a pod of 1 CPU each).
NETPOL_POD_CPU = "100m"

#: What kube-router's network policy controller watches (it writes nothing to the API).
NETPOL_RBAC = [
    {"apiGroups": [""], "resources": ["pods", "namespaces", "nodes", "services"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": ["get", "list", "watch"]},
]


def _netpol_kubeconfig(kube: tc.Kube) -> Path:
    """A ServiceAccount of its own with NETPOL_RBAC, as a kubeconfig with its token."""
    objects = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "netpol", "namespace": "kube-system"}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "netpol"},
         "rules": NETPOL_RBAC},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "netpol"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "netpol"},
         "subjects": [{"kind": "ServiceAccount", "name": "netpol", "namespace": "kube-system"}]},
    ]  # fmt: skip
    kube.run("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    token = kube.run("create", "token", "netpol", "-n", "kube-system", "--duration=1h").stdout.strip()
    api = json.loads((kube.dir / "cluster.json").read_text())["api"]
    return ct.write_kubeconfig(kube.dir / "netpol.kubeconfig", api, kube.dir / "pki" / "ca.crt", token=token)  # type: ignore[no-any-return]


def _reach(kube: tc.Kube, name: str, ip: str, node: str, labels: dict[str, str], seconds: float) -> str:
    """A pod on `node` with `labels` asks the server at ip:8080 until it answers or `seconds` pass:
    "200 <seconds to the answer>" or "refused <the last error>"."""
    code = (
        "import time, urllib.request\n"
        "t0, last = time.time(), ''\n"
        f"while time.time() - t0 < {seconds}:\n"
        "    try:\n"
        f"        print(urllib.request.urlopen('http://{ip}:8080/', timeout=2).status, round(time.time() - t0, 1))\n"
        "        break\n"
        "    except OSError as e:\n"
        "        last = type(e).__name__\n"
        "        time.sleep(0.5)\n"
        "else:\n"
        "    print('refused', last)\n"
    )
    pod = _pod(kube, name, code, node=node, cpu=NETPOL_POD_CPU)
    pod["metadata"]["labels"] = labels
    _apply(kube, pod)
    assert _finished(kube, name, seconds + 60)["exitCode"] == 0
    return kube.run("logs", name, "-n", NS).stdout.strip()


def test_the_rendered_network_policy_is_enforced_by_kube_routers_firewall(real: tc.Kube) -> None:
    """kube-router's network policy controller alone (cluster/netpol, built by cluster/build.sh
    netpol) in each Node's namespaces, as its DaemonSet would run it: once the job's rendered
    NetworkPolicy is applied, a pod with the job's labels reaches the job's pod, on its Node and
    from the other, and a pod without them does not."""
    build = subprocess.run(
        [str(tc.REPO / "cluster" / "build.sh"), "netpol"], capture_output=True, text=True, check=False
    )
    assert build.returncode == 0, build.stderr
    binary = Path(build.stdout.strip().splitlines()[-1]) / "kube-router"
    kubeconfig = _netpol_kubeconfig(real)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for node in NODES:
            holder = int((real.dir / "pids" / f"{node}-ns.pid").read_text().split()[0])
            with open(real.dir / "logs" / f"{node}-kube-router.log", "wb") as log:
                procs.append(subprocess.Popen(
                    [*rn.nsenter(holder), str(binary), f"--kubeconfig={kubeconfig}", f"--hostname-override={node}",
                     "--run-firewall=true", "--run-router=false", "--run-service-proxy=false",
                     "--run-loadbalancer=false", "--enable-ipv6=false", f"--service-cluster-ip-range={ct.SERVICE_CIDR}",
                     "--health-addr=127.0.0.1", "--health-port=20244", "--metrics-port=0"],
                    stdout=log, stderr=subprocess.STDOUT,
                ))  # fmt: skip
        job = {"metadata": {"name": "np", "namespace": NS}}
        policy = ei.render_network_policy(job)
        labels = dict(policy["spec"]["podSelector"]["matchLabels"])
        server = _pod(real, "np-srv", HTTP_SERVER, node="node-1", cpu=NETPOL_POD_CPU)
        server["metadata"]["labels"] = labels
        _apply(real, server)

        def serving() -> bool:
            statuses = _get(real, "np-srv").get("status", {}).get("containerStatuses") or []
            return bool(statuses and statuses[0].get("state", {}).get("running"))

        tc._until(serving, 60)
        ip = _get(real, "np-srv")["status"]["podIP"]
        other = {"app": "not-the-job"}
        assert _reach(real, "np-before", ip, "node-0", other, 30).startswith("200 "), "no policy yet: open"
        real.run("apply", "-f", "-", stdin=json.dumps(policy))
        time.sleep(2)  # each Node's controller syncs on the policy's event
        got = {
            "job, other Node": _reach(real, "np-in0", ip, "node-0", labels, 20),
            "job, same Node": _reach(real, "np-in1", ip, "node-1", labels, 20),
            "not the job, other Node": _reach(real, "np-out0", ip, "node-0", other, 10),
            "not the job, same Node": _reach(real, "np-out1", ip, "node-1", other, 10),
        }
        assert got["job, other Node"].startswith("200 ") and got["job, same Node"].startswith("200 "), got
        assert got["not the job, other Node"].startswith("refused") and got["not the job, same Node"].startswith(
            "refused"
        ), got
        assert all(p.poll() is None for p in procs), "a kube-router exited (logs/node-*-kube-router.log)"
    finally:
        for p in procs:
            p.terminate()
            p.wait(30)
