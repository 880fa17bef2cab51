"""Flyte times, ours vs flyteplugins' pytorch plugin in one propeller (issue 31 item 7).

    flock /var/lock/elastic-idl-cluster.lock .venv/bin/python bench/flyte_times.py [--rounds 5]
    make flyte-bench

Starts the cluster and propeller (flyte/flyte.py up, CLUSTER_DIR=build/flyte-bench; root and Go,
as `make flyte-up`) and stops them at the end. Each round runs flyte/examples/train.py's `wf` (a
2-node elastic_idl `Elastic` task, 3 steps, then a python task) once through each plugin, in
alternating order: ours (`--plugin pytorch=elastic-idl-pytorch`) and flyteplugins' own
(`--plugin pytorch=pytorch`), the same propeller. Measured per run:

- create -> Succeeded: from the moment `flyte.py run` prints that the FlyteWorkflow was created to
  the moment it prints its phase (it polls about once a second: up to ~1 s late);
- create -> first training step: from the same moment to the later of the two ranks' `first
  training step at <unix time>` lines in the workers' pod logs (CLUSTER_DIR/pods/.../log).

Writes bench/results/flyte-times.json (every sample, medians, ratios ours / flyteplugins') and
prints the medians. One machine shared with other sessions: compare the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
FLYTE_PY = REPO / "flyte" / "flyte.py"
WORKFLOW = REPO / "flyte" / "examples" / "train.py"
RESULT = REPO / "bench" / "results" / "flyte-times.json"
ARMS = {"ours": "elastic-idl-pytorch", "upstream": "pytorch"}
FIRST_STEP = re.compile(r"first training step at (\d+\.\d+) rank (\d+)")


def one_run(env: dict[str, str], cluster: Path, plugin: str) -> dict[str, Any]:
    proc = subprocess.Popen(
        [sys.executable, str(FLYTE_PY), "run", str(WORKFLOW), "wf", "--inputs", '{"steps": 3}',
         "--plugin", f"pytorch={plugin}"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None and proc.stdout is not None
    created = done = None
    name = ""
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if m := re.search(r"FlyteWorkflow \S+/(\S+) created", line):
            created, name = time.time(), m.group(1)
        elif name and f"/{name}: " in line and " s after create" in line:
            done = time.time()
    out = proc.stdout.read()
    if proc.wait() != 0 or created is None or done is None or "Success" not in "".join(lines):
        raise SystemExit(f"flyte run through {plugin} failed:\n{''.join(lines[-20:])}{out}")
    steps = {}
    for log in cluster.glob(f"pods/*_{name}-n0-0-worker-*/containers/*/log"):
        for m in FIRST_STEP.finditer(log.read_text(errors="replace")):
            steps[int(m.group(2))] = float(m.group(1))
    if sorted(steps) != [0, 1]:
        raise SystemExit(f"{name}: the workers' logs name no first step for both ranks ({steps})")
    return {
        "execution": name,
        "create_to_succeeded_s": round(done - created, 2),
        "create_to_first_step_s": round(max(steps.values()) - created, 2),
        "output": json.loads(out.strip().splitlines()[-1]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path, default=RESULT)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO / "cluster"))
    import cluster as kc

    cluster = kc.default_state_dir("flyte-bench")
    env = {**os.environ, "CLUSTER_DIR": str(cluster)}
    env.pop("FLYTE_PYTORCH_PLUGIN", None)
    env.pop("FLYTE_ELASTIC_IDL", None)
    started = datetime.now(UTC)
    load_start = os.getloadavg()[0]
    up = subprocess.run([sys.executable, str(FLYTE_PY), "up"], env=env, capture_output=True, text=True, check=False)
    if up.returncode != 0:
        subprocess.run([sys.executable, str(FLYTE_PY), "down"], env=env, capture_output=True, check=False)
        raise SystemExit(f"flyte up failed:\n{up.stderr[-3000:]}")
    runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}
    try:
        for i in range(args.rounds):
            order = list(ARMS) if i % 2 == 0 else list(reversed(ARMS))
            for arm in order:
                r = one_run(env, cluster, ARMS[arm])
                r["round"] = i
                runs[arm].append(r)
                print(
                    f"round {i} {arm:8} create->succeeded {r['create_to_succeeded_s']:6.2f} s  "
                    f"create->first step {r['create_to_first_step_s']:6.2f} s  {r['output']}",
                    file=sys.stderr,
                )
    finally:
        subprocess.run([sys.executable, str(FLYTE_PY), "down"], env=env, capture_output=True, check=False)
    medians = {
        arm: {k: statistics.median(r[k] for r in rs) for k in ("create_to_succeeded_s", "create_to_first_step_s")}
        for arm, rs in runs.items()
    }
    ratios = {k: round(medians["ours"][k] / medians["upstream"][k], 3) for k in medians["ours"]}
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    result = {
        "benchmark": "bench/flyte_times.py: create -> Succeeded and create -> first training step through propeller, "
        "elastic-idl-pytorch vs flyteplugins' pytorch, one propeller, alternating per round",
        "command": "make flyte-bench",
        "date": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "finished": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": commit,
        "rounds": args.rounds,
        "workflow": 'flyte/examples/train.py wf {"steps": 3}',
        "flytepropeller": "v1.16.8",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared)",
        "loadavg_1m": [round(load_start, 2), round(os.getloadavg()[0], 2)],
        "plugins": ARMS,
        "runs": runs,
        "medians_s": medians,
        "ratio_ours_over_upstream": ratios,
    }
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    for arm in ARMS:
        m = medians[arm]
        print(
            f"{arm:8} median create->succeeded {m['create_to_succeeded_s']:.2f} s, "
            f"create->first step {m['create_to_first_step_s']:.2f} s"
        )
    print(f"ratio ours/upstream: {ratios}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
