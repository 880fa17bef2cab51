#!/usr/bin/env bash
# The main command of README.md (`make demo`): decode, validate and render the example
# task, then train a small DDP model on 2 local CPU workers through our launcher.
# With --fail-once it also shows a worker failing and the restart resuming from
# the checkpoint. Expects the venv `make venv` builds.
set -euo pipefail
cd "$(dirname "$0")/.."
cli=.venv/bin/elastic-idl
task=examples/demo.yaml
ckpt=$(mktemp -d)
trap 'rm -rf "$ckpt"' EXIT

echo "== 1. validate $task"
"$cli" validate "$task"
echo "== 2. the LaunchConfig it becomes"
"$cli" launch-config "$task"
echo "== 3. the PyTorchJob the backend would create (dry run)"
"$cli" render "$task" --name demo --image ghcr.io/example/train:latest -- examples/train.py --epochs 5
echo "== 4. train: 2 CPU workers, gloo, checkpoint in $ckpt"
TIMEFORMAT='== training wall time: %R s'
time "$cli" run "$task" -- examples/train.py --epochs 5 --checkpoint-dir "$ckpt"
if [[ "${1:-}" == "--fail-once" ]]; then
  echo "== 5. again from scratch, with rank 1 failing once at epoch 2: the restart resumes"
  rm -rf "${ckpt:?}"/*
  time "$cli" run "$task" -- examples/train.py --epochs 5 --checkpoint-dir "$ckpt" --fail-once-at-epoch 2
fi
