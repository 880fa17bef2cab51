"""Time from `kubectl apply` to the first training step on the one-machine cluster: our pod
entrypoint (`python -m elastic_idl.pod`) vs stock `torchrun` as the container command.

    .venv/bin/python bench/bench_cluster_start.py [--rounds 5]

Starts a cluster of its own (cluster/cluster.py up, CLUSTER_DIR=build/cluster-bench; root, the
binaries cached: docs/guide/cluster.md) and stops it at the end. Each round applies the
same 2-node elastic job (rendered by `elastic-idl render`) once per arm, in alternating order, and
waits for `Succeeded`; the first step is the first line rank 0 writes
(tests/workers/cluster_train.py). Prints medians and the ratio ours / torchrun (same run, side by
side: compare only ratios on a shared machine).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
CLUSTER_PY = REPO / "cluster" / "cluster.py"
TRAIN = REPO / "tests" / "workers" / "cluster_train.py"
OUT = Path("/var/tmp/elastic-idl-cluster-bench")
TASK = {
    "worker_replicas": {"replicas": 2},
    "elastic_config": {"rdzv_backend": "c10d", "min_replicas": 2, "max_replicas": 2, "nproc_per_node": 1},
}


def kubectl(env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    r = subprocess.run([env["KUBECTL"], *args], input=stdin, capture_output=True, text=True, env=env, check=False)
    if r.returncode != 0:
        raise SystemExit(f"kubectl {' '.join(args[:2])}: {r.stderr.strip()}")
    return r.stdout


def one_job(env: dict[str, str], name: str, torchrun: bool) -> tuple[float, float]:
    out = OUT / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    cli = Path(sys.executable).parent / "elastic-idl"
    rendered = subprocess.run(
        [str(cli), "render", "-", "--format", "yaml", "--name", name, "--image", "example.com/train:1",
         "--", str(TRAIN), str(out), "3", "0.1"],
        input=yaml.safe_dump(TASK), capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    job: dict[str, Any] = yaml.safe_load(rendered)
    (container,) = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    if torchrun:
        container["command"] = ["torchrun"]
        container["args"] = [a for a in container["args"] if a != "--"]
    applied = time.time()
    kubectl(env, "apply", "--server-side", "-f", "-", stdin=json.dumps(job))
    kubectl(env, "wait", "--for=condition=Succeeded", f"pytorchjob/{name}", "--timeout=300s")
    done = time.time()
    first = float((out / "steps").read_text().split()[0])
    kubectl(env, "delete", "pytorchjob", name, "--wait=true")
    return first - applied, done - applied


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location("cluster_tool", CLUSTER_PY)
    assert spec and spec.loader
    cluster_tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cluster_tool)
    env = {**os.environ, "CLUSTER_DIR": str(cluster_tool.default_state_dir("cluster-bench"))}
    up = subprocess.run([sys.executable, str(CLUSTER_PY), "up"], env=env, capture_output=True, text=True, check=False)
    if up.returncode != 0:
        raise SystemExit(up.stderr.strip())
    for line in up.stdout.strip().splitlines()[-2:]:
        key, _, value = line.removeprefix("export ").partition("=")
        env[key] = value
    results: dict[str, list[tuple[float, float]]] = {"ours": [], "torchrun": []}
    try:
        for i in range(args.rounds):
            arms = ["ours", "torchrun"] if i % 2 == 0 else ["torchrun", "ours"]
            for arm in arms:
                results[arm].append(one_job(env, f"bench-{arm}-{i}", arm == "torchrun"))
    finally:
        subprocess.run([sys.executable, str(CLUSTER_PY), "down"], env=env, capture_output=True, check=False)
    med = {
        arm: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs)) for arm, rs in results.items()
    }
    print(f"{args.rounds} rounds, medians (s): apply -> first step | apply -> Succeeded")
    for arm, (first, done) in med.items():
        print(f"  {arm:9s} {first:6.1f} | {done:6.1f}")
    print(
        f"  ratio ours/torchrun: {med['ours'][0] / med['torchrun'][0]:.2f} | {med['ours'][1] / med['torchrun'][1]:.2f}"
    )


if __name__ == "__main__":
    main()
