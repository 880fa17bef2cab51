"""The real Nodes' pure parts (cluster/realnode.py): addresses, and the configuration files of
containerd, CNI, the kubelet and kube-proxy, as `up` writes them; and what
`up` refuses before it changes anything. The Nodes themselves: tests/test_cluster_real.py."""

from __future__ import annotations

import ipaddress
import itertools
from pathlib import Path

import pytest
import tomllib

import test_cluster as tc

ct = tc.ct
rn = ct.realnode


def test_each_node_has_its_own_address_and_a_disjoint_subnet_of_the_pod_range() -> None:
    nets = [rn.node_net(i) for i in range(rn.MAX_REAL_NODES)]
    first = next(iter(rn.POD_RANGE.subnets(new_prefix=rn.SUBNET_PREFIX)))  # the host's and the Nodes' own
    for net in nets:
        assert net.subnet.subnet_of(rn.POD_RANGE) and not net.subnet.overlaps(first)
        assert net.ip in first and net.ip != ct.BRIDGE_IP
        assert net.gateway == net.subnet.network_address + 1
    for a, b in itertools.combinations(nets, 2):
        assert not a.subnet.overlaps(b.subnet) and a.ip != b.ip and a.host_link != b.host_link
    assert rn.POD_RANGE == ct.POD_CIDR
    for bad in (-1, rn.MAX_REAL_NODES):
        with pytest.raises(ValueError, match="index"):
            rn.node_net(bad)


def test_containerd_keeps_everything_under_the_node_folder_with_runc_on_cgroupfs(tmp_path: Path) -> None:
    bindir = Path("/cache/bin")
    config = tomllib.loads(rn.containerd_config(tmp_path, bindir, "localhost/elastic-idl/pause:abc"))
    assert config["version"] == 4
    for key in ("root", "state", "temp"):
        assert Path(config[key]).is_relative_to(tmp_path)
    plugins = config["plugins"]
    assert Path(plugins["io.containerd.server.v1.grpc"]["address"]).is_relative_to(tmp_path)
    runtime = plugins["io.containerd.cri.v1.runtime"]
    # No negative OOM score for containers (root here lacks CAP_SYS_RESOURCE), pods' netns files
    # under the state folder, CNI from the build.
    assert runtime["restrict_oom_score_adj"] is True and runtime["netns_mounts_under_state_dir"] is True
    assert runtime["cni"]["bin_dirs"] == [str(bindir)] and Path(runtime["cni"]["conf_dir"]).is_relative_to(tmp_path)
    runc = runtime["containerd"]["runtimes"]["runc"]
    assert runc["options"] == {"BinaryName": str(bindir / "runc"), "SystemdCgroup": False}
    images = plugins["io.containerd.cri.v1.images"]
    assert images["pinned_images"]["sandbox"] == "localhost/elastic-idl/pause:abc"
    assert plugins["io.containerd.grpc.v1.cri"]["disable_tcp_service"] is True


def test_the_cni_network_is_the_nodes_subnet_behind_its_bridge_without_masquerading(tmp_path: Path) -> None:
    net = rn.node_net(2)
    (plugin,) = rn.cni_config(net, tmp_path)["plugins"]  # type: ignore[misc]
    assert plugin["type"] == "bridge" and plugin["isGateway"] is True and plugin["ipMasq"] is False
    (rng,) = plugin["ipam"]["ranges"][0]
    assert ipaddress.ip_network(rng["subnet"]) == net.subnet and rng["gateway"] == str(net.gateway)
    assert Path(plugin["ipam"]["dataDir"]).is_relative_to(tmp_path)


def test_the_kubelet_leaves_the_machine_as_found_and_takes_only_the_clusters_certificates(tmp_path: Path) -> None:
    net = rn.node_net(0)
    config = rn.kubelet_config(
        net=net, node_dir=tmp_path, ca=tmp_path / "ca.crt", cgroup_root="/a/elastic-idl/node-0",
        dns="10.237.0.1", cluster_domain="cluster.local",
    )  # fmt: skip
    assert config["failCgroupV1"] is False and config["cgroupDriver"] == "cgroupfs"
    assert config["cgroupRoot"] == "/a/elastic-idl/node-0" and config["oomScoreAdj"] == 0
    # The kernel settings it changes are files of the Node's mount namespace (realnode.setup_mounts).
    assert config["protectKernelDefaults"] is False
    assert config["authentication"] == {
        "anonymous": {"enabled": False}, "webhook": {"enabled": False}, "x509": {"clientCAFile": str(tmp_path / "ca.crt")},
    }  # fmt: skip
    assert config["readOnlyPort"] == 0 and config["address"] == str(net.ip)
    assert config["healthzBindAddress"] == "127.0.0.1"
    for key in ("resolvConf", "podLogsDir"):
        assert Path(str(config[key])).is_relative_to(tmp_path)
    assert config["maxPods"] == net.subnet.num_addresses - 3  # network, broadcast, gateway


def test_kube_proxy_leaves_the_global_conntrack_settings_alone(tmp_path: Path) -> None:
    config = rn.kube_proxy_config(net=rn.node_net(1), node_name="node-1", kubeconfig=tmp_path / "k")
    assert config["conntrack"] == {
        "maxPerCore": 0,
        "min": 0,
        "tcpEstablishedTimeout": "0s",
        "tcpCloseWaitTimeout": "0s",
    }
    assert config["clusterCIDR"] == str(ct.POD_CIDR)


def test_up_refuses_more_nodes_than_it_can_serve_before_changing_anything(tmp_path: Path) -> None:
    c = ct.Cluster(tmp_path / "c")
    with pytest.raises(ct.ClusterError, match=f"at most {rn.MAX_REAL_NODES} real Nodes"):
        ct.up(c, [f"node-{i}" for i in range(rn.MAX_REAL_NODES + 1)])
    assert not c.began and not (tmp_path / "c").exists()
