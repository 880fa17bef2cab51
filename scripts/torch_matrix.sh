#!/usr/bin/env bash
# The torch version matrix (issue 33, item 3): for each version given, a venv of its own at
# build/venv-torch-<version> (made when missing: requirements/dev.txt without its torch, triton,
# CUDA and nvidia pins, plus torch==<version> from PyPI with whatever CUDA packages that version
# pulls, plus the dev tree), then the launcher, drop-in, round-trip and flytekit tests in it.
#
# Usage: scripts/torch_matrix.sh [--venv-only | --ci] VERSION...
# Each step prints its wall time; `make test-torch` runs it for TORCH_VERSIONS. --ci runs CI_TESTS
# instead of TESTS (`make test-torch-ci`, which .ci/run runs after `make test`): the files that
# exercise the installed torch's launcher, torchrun and private names, within CI's time budget;
# it removes each venv after its tests.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
PIP_NOISE="is ignored: it is neither a file nor a directory"
# The tests that depend on torch's elastic launcher and torchrun, and the flytekit round trip.
TESTS=(
	tests/test_torch_private.py
	tests/test_torchrun.py
	tests/test_torchrun_surface.py
	tests/test_torch_version.py
	tests/test_signal_enrichment.py
	tests/test_cli.py
	tests/test_launcher.py
	tests/test_launcher_unit.py
	tests/test_launcher_faults.py
	tests/test_launcher_stop.py
	tests/test_launcher_multinode.py
	tests/test_launch_config.py
	tests/test_spec.py
	tests/test_pod.py
	tests/test_flytekit_plugin.py
	tests/test_flytekit_run.py
	tests/test_flytekit_parity.py
)

# CI's part of TESTS (about 3 minutes a version on the 2-core machine, measured on 2.15.0 under
# load): torch's private names and versions, the drop-in's surface and parsing, the launch config
# and spec, the launcher (unit and real launches beside stock torchrun), the flytekit round trip.
# Left to `make test-torch`: the CLI, faults, stop and multinode launches, the pod and the parity tables.
CI_TESTS=(
	tests/test_torch_private.py
	tests/test_torch_version.py
	tests/test_signal_enrichment.py
	tests/test_torchrun.py
	tests/test_torchrun_surface.py
	tests/test_launch_config.py
	tests/test_spec.py
	tests/test_launcher_unit.py
	tests/test_launcher.py
	tests/test_flytekit_run.py
)

venv_only=0 remove=0
case ${1:-} in
--venv-only) venv_only=1; shift ;;
# CI removes each version's venv (about 6 GB) after its tests: one at a time on the disk.
--ci) TESTS=("${CI_TESTS[@]}"); remove=1; shift ;;
esac
[[ $# -gt 0 ]] || { echo "usage: $0 [--venv-only | --ci] VERSION..." >&2; exit 2; }

make_venv() {
	local version=$1 dir=build/venv-torch-$1
	local stamp=$dir/.stamp-$(sha256sum requirements/dev.txt | cut -c1-16)
	if [[ -e $stamp ]]; then echo "== $dir: up to date"; return; fi
	echo "== setting up $dir (torch==$version)"
	local start=$SECONDS
	test -x "$dir/bin/python" || "$PYTHON" -m venv "$dir"
	"$dir/bin/python" -m pip install -q -U pip 2>&1 | { grep -v "$PIP_NOISE" || true; }
	grep -vE '^(torch|triton|nvidia-|cuda-)' requirements/dev.txt > "$dir/requirements.txt"
	# torch and its CUDA wheels are 3-4 GB from PyPI: a download cut short is resumed (pip's
	# --resume-retries), and the whole install is tried once more before giving up.
	local try
	for try in 1 2; do
		if "$dir/bin/python" -m pip install -q --resume-retries 10 "torch==$version" -r "$dir/requirements.txt" 2>&1 |
			{ grep -v "$PIP_NOISE" || true; }; then
			break
		fi
		[[ $try == 2 ]] && { echo "== $dir: pip install failed twice (df: $(df -h --output=avail . | tail -1) free)" >&2; return 1; }
		echo "== $dir: pip install failed; trying again"
	done
	# The dev tree (build/devtree) is shared with .venv: made when missing, else only put on this venv's path.
	if [[ -d build/devtree/elastic_idl ]]; then
		"$dir/bin/python" -c 'import site, sys; from pathlib import Path
Path(site.getsitepackages()[0], "elastic_idl_devtree.pth").write_text(f"import sys; sys.path.insert(0, {sys.argv[1]!r})\n")' \
			"$(pwd)/build/devtree"
	else
		"$dir/bin/python" scripts/dev_install.py >/dev/null
	fi
	printf '%s\n' "#!$(pwd)/$dir/bin/python" 'import sys' 'from elastic_idl.cli import main' \
		'if __name__ == "__main__":' '    sys.exit(main())' > "$dir/bin/elastic-idl"
	chmod +x "$dir/bin/elastic-idl"
	rm -f "$dir"/.stamp-*
	touch "$stamp"
	echo "== $dir: torch $("$dir/bin/python" -c 'import torch; print(torch.__version__)'), $(du -sh "$dir" | cut -f1), $((SECONDS - start)) s"
}

status=0
for version in "$@"; do
	make_venv "$version"
	[[ $venv_only == 1 ]] && continue
	dir=build/venv-torch-$version
	start=$SECONDS
	echo "== torch $version: ${TESTS[*]}"
	"$dir/bin/python" -m pytest -q -p no:cacheprovider "${TESTS[@]}" || status=1
	echo "== torch $version: tests $((SECONDS - start)) s"
	if [[ $remove == 1 ]]; then rm -rf "$dir"; fi
done
exit $status
