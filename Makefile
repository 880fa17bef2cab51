# elastic-idl: one entry point for setting up, checking and running the project.
# `make` alone (or `make help`) lists the targets: the lines starting with "##" below.
#
# Setup is idempotent: each venv carries a stamp named after the hash of its
# requirements file, so a second run skips it and an edited lock rebuilds it.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-builtin-rules

PYTHON ?= python3
VENV := .venv
GEN_VENV := .venv-gen
DOCS_VENV := .venv-docs
PY := $(VENV)/bin/python
BUF := $(GEN_VENV)/bin/buf
# The committed image of the released schema that `buf breaking` compares against.
BASELINE := buf/baseline.binpb
LINT_PATHS := src tests bench scripts cluster flyte

hash = $(shell sha256sum $(1) | cut -c1-16)
DEV_STAMP := $(VENV)/.stamp-dev-$(call hash,requirements/dev.txt)
GEN_STAMP := $(GEN_VENV)/.stamp-gen-$(call hash,requirements/gen.txt)
DOCS_STAMP := $(DOCS_VENV)/.stamp-docs-$(call hash,requirements/docs.txt)

.PHONY: help test checks venv venv-dev venv-gen devtree gen check-gen lint fmt typecheck buf-lint buf-breaking \
	pytest go-toolchain go-check baseline bench chaos chaos-defaults demo wheel docs docs-serve venv-docs chromium node-deps clean \
	cluster-build cluster-up cluster-down cluster-test long-test

## make help          this list (also what a bare `make` prints)
## make test          set up whatever is missing, then run every check (CI runs this: .ci/run)
## make demo          set up whatever is missing, then validate, render and train the demo
## make docs          the documentation site into build/site (mkdocs build --strict; .venv-docs)
## make docs-serve    the site at http://127.0.0.1:8000/elastic-idl/ (DOCS_PORT), rebuilt as you edit (mkdocs serve, loopback only)
## make chromium      Debian's chromium (apt-get, as root) for tests/test_docs_browser.py; nothing when installed
## make wheel         build the wheel into dist/ with the pinned backend (install: docs/guide/flytekit.md)
## make venv          only the setup: .venv (tests, runtime) and .venv-gen (the code generators)
## make lint / fmt    ruff check and format check / apply ruff fixes and formatting, buf format
## make typecheck     mypy --strict on src/elastic_idl
## make gen           regenerate gen/, go/gen/ and the Go tables; make check-gen fails when they are stale
## make go-check      gofmt -l, go mod verify, go vet, staticcheck, go test -race of go/
## make bench         the benchmarks, shortened (bench/README.md has the full-length commands)
## make chaos         the fault matrix on the one-machine cluster's real Nodes, CHAOS_JOBS=4 runs at a time at most, classes 18-20 one at a time after the others (its 315 runs here: 143.2 minutes in five rounds; bench/README.md, "Chaos on the cluster")
## make chaos-defaults  what users get by default: the fault classes under flytekit's, Flyte 2's and our defaults, 5 runs each (docs/guide/when-pods-die.md, "What the defaults give")
## make cluster-up    a Kubernetes control plane with real Nodes (kubelet, containerd, runc) on this machine (docs/guide/cluster.md); cluster-down stops it
## make cluster-test  every cluster test, the long ones too (make test runs the short ones)
## make node-deps     what the real Nodes need from Debian (apt-get, as root): libseccomp-dev, pkg-config, iptables, conntrack
## make flyte-up / flyte-down  the cluster plus Flyte 1.16's propeller with both pytorch plugins (docs/guide/flyte.md) / stop both
## make flyte-run     package, compile and run FILE's WORKFLOW with INPUTS='{...}' (ARGS=--plugin pytorch=pytorch: upstream's plugin); prints the outputs as JSON last
## make flyte-test    tests/test_flyte.py, the cluster ones too (its own cluster and propeller in build/flyte-test)
## make flyte-bench  create -> Succeeded and -> first training step through propeller, ours vs flyteplugins' pytorch, 5 alternating rounds (bench/results/flyte-times.json)
## make long-test     the local long tests (races repeated 20 times; make test runs 3 of each)
## make clean         remove build/, dist/ and the tool caches
help:
	@sed -n 's/^## //p' $(firstword $(MAKEFILE_LIST))

# ---------------------------------------------------------------- setup

# This machine's pip config lists local index folders that do not hold every
# package; pip warns once per package about each. pipefail keeps pip's status.
PIP_NOISE := is ignored: it is neither a file nor a directory

# $(1): venv dir, $(2): requirements file, $(3): stamp.
define make_venv
	@echo "== setting up $(1) from $(2)"
	test -x $(1)/bin/python || $(PYTHON) -m venv $(1)
	$(1)/bin/python -m pip install -q -U pip 2>&1 | { grep -v "$(PIP_NOISE)" || true; }
	$(1)/bin/python -m pip install -q -r $(2) 2>&1 | { grep -v "$(PIP_NOISE)" || true; }
	rm -f $(1)/.stamp-*
	touch $(3)
endef

$(DEV_STAMP): requirements/dev.txt
	$(call make_venv,$(VENV),requirements/dev.txt,$@)

$(GEN_STAMP): requirements/gen.txt
	$(call make_venv,$(GEN_VENV),requirements/gen.txt,$@)

# The documentation site's tools (MkDocs, Material, mkdocstrings): a venv of their own, not in `make venv`.
$(DOCS_STAMP): requirements/docs.txt
	$(call make_venv,$(DOCS_VENV),requirements/docs.txt,$@)

venv-dev: $(DEV_STAMP)
venv-gen: $(GEN_STAMP)
venv-docs: $(DOCS_STAMP)
venv: venv-dev venv-gen

# The checkout as the package the wheel installs (symlinks, see the script).
# Cheap, so it is redone every time: new modules in src/ appear in it.
devtree: venv-dev $(VENV)/bin/elastic-idl
	$(PY) scripts/dev_install.py >/dev/null

# The console script the wheel declares ([project.scripts]), for the dev tree. The guard matters:
# a spawned worker imports the launcher's __main__ (this file) again, as pip's scripts allow.
$(VENV)/bin/elastic-idl: Makefile | venv-dev
	printf '%s\n' '#!$(abspath $(PY))' 'import sys' 'from elastic_idl.cli import main' \
		'if __name__ == "__main__":' '    sys.exit(main())' > $@
	chmod +x $@

# Headless Chromium for tests/test_docs_browser.py, Debian's package (scripts/apt_ensure.sh: installed
# as root when missing; otherwise one line says so and the test fails, saying what is missing).
chromium:
	@scripts/apt_ensure.sh chromium=chromium; chromium --version 2>/dev/null || true

# What the real Nodes need from the system (docs/guide/cluster.md, "Real Nodes"): libseccomp's
# headers and pkg-config for runc's build, iptables and conntrack for kube-proxy, ipset for the
# NetworkPolicy engine (kube-router's firewall, which `make cluster-test` runs).
node-deps:
	@scripts/apt_ensure.sh /usr/include/seccomp.h=libseccomp-dev pkg-config=pkg-config iptables=iptables ipset=ipset \
		conntrack=conntrack

# ---------------------------------------------------------------- Go toolchain

# The Go module (go/) builds with the Go on PATH (or /usr/local/go), at least the
# `go` line of go/go.mod, its dependencies from the module proxy and go/go.sum;
# the tools (protoc-gen-go, staticcheck) are pinned in go/tools/go.mod and built
# into Go's build cache once per version (scripts/go_toolchain.sh).
GO_TOOL := scripts/go_toolchain.sh
# Files the generators write (scripts/gen.sh); committed, never edited by hand.
GENERATED := gen go/gen go/elasticidl/tables_gen.go

# Says in one line when Go is missing (an error under CI=true).
go-toolchain:
	@$(GO_TOOL) ensure

# ---------------------------------------------------------------- generation

gen: venv-gen devtree
	scripts/gen.sh $(GEN_VENV) >/dev/null

# gen/, go/gen/ and the Go tables must be exactly what the pinned generators make.
check-gen: gen
	@if [ -n "$$(git status --porcelain -- $(GENERATED))" ]; then \
		echo "generated code is stale or edited by hand: run 'make gen' and commit it"; \
		git status --porcelain -- $(GENERATED); git --no-pager diff --stat -- $(GENERATED); exit 1; \
	fi
	@echo "gen/, go/gen/ and go/elasticidl/tables_gen.go are up to date"

# ---------------------------------------------------------------- checks

lint: venv-dev
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)

fmt: venv-dev venv-gen
	$(VENV)/bin/ruff check --fix $(LINT_PATHS)
	$(VENV)/bin/ruff format $(LINT_PATHS)
	$(BUF) format -w
	if command -v gofmt >/dev/null; then gofmt -w go; fi

typecheck: devtree
	$(VENV)/bin/mypy src/elastic_idl

buf-lint: venv-gen
	$(BUF) lint
	$(BUF) format -d --exit-code

buf-breaking: venv-gen
	$(BUF) breaking --against $(BASELINE)

# ELASTIC_IDL_DOCS=run: tests/test_docs.py builds the site (.venv-docs) and fails rather than skips without it;
# tests/test_docs_browser.py opens it in headless chromium, likewise.
# Flyte 2's test modules run in a pytest process of their own, after the rest: importing flyte starts
# a thread the process keeps, and the launcher's warm fork server needs one thread (tests/conftest.py,
# FLYTE2_MODULES, which a plain pytest leaves out). Both runs run even when the first fails.
# --durations: the 30 slowest tests close the suite's output (where CI's time goes).
FLYTE2_TESTS := tests/test_cluster_flyte2.py tests/test_flyte2_parity.py tests/test_flyte2_pods.py tests/test_flyte2_run.py
pytest: devtree venv-gen venv-docs chromium node-deps
	@status=0; ELASTIC_IDL_DOCS=run $(PY) -m pytest --durations=30 || status=$$?; \
	$(PY) -m pytest $(FLYTE2_TESTS) || status=$$?; \
	exit $$status

# gofmt, go mod verify, go vet, staticcheck and go test of the three Go modules
# (GO_MODULES; go/go.work joins them for development; tests/test_go.py runs the
# contract suite against the conformance command), then a consumer's build of
# the submodules without the workspace (scripts/go_release_check.sh). -race on
# the core only (GO_RACE_MODULES): the submodules' race build of flyteplugins'
# dependency graph costs minutes and they run no goroutines of their own. The
# core is checked outside the workspace (GOWORK=off), on its own build list
# (protobuf v1.34.2), as a program that imports only the core builds it.
# Skipped when ELASTIC_IDL_GO=skip (set by `make test` after go-toolchain said
# so); CI=true never skips.
GO_MODULES := go go/kubeflow go/flyteplugin
GO_RACE_MODULES := go
go-check:
	@if [[ "$${ELASTIC_IDL_GO:-}" == skip && "$${CI:-}" != true ]]; then exit 0; fi; \
	$(GO_TOOL) present || { echo "go-check: Go is missing (make go-toolchain)"; exit 1; }; \
	unformatted=$$(gofmt -l go); \
	if [[ -n "$$unformatted" ]]; then echo "gofmt -l go: not formatted:"; echo "$$unformatted"; exit 1; fi; \
	echo "gofmt -l go: clean"; \
	staticcheck=$$($(GO_TOOL) path staticcheck); \
	for m in $(GO_MODULES); do \
		race=; [[ " $(GO_RACE_MODULES) " == *" $$m "* ]] && race=-race; \
		work=; [[ $$m == go ]] && work=off; \
		(cd $$m && export GOWORK=$$work && set -x && go mod verify && go vet ./... && "$$staticcheck" ./... && \
			go test $$race ./...) || exit 1; \
	done; \
	scripts/go_release_check.sh

# Setup stops at the first error; the checks all run (-k) so that one report
# shows every failing gate.
test: venv venv-docs devtree
	@go=run; $(GO_TOOL) ensure || { rc=$$?; [[ $$rc == 3 ]] || exit $$rc; go=skip; }; \
	$(MAKE) --no-print-directory -k checks ELASTIC_IDL_GO=$$go
	@echo "make test: all checks passed"

checks: lint typecheck buf-lint buf-breaking check-gen go-check pytest

# ---------------------------------------------------------------- other

# Cut a new baseline when a schema version is released (see docs/guide/development.md).
baseline: venv-gen
	$(BUF) build --exclude-source-info -o $(BASELINE)
	@echo "wrote $(BASELINE): commit it with the release"

# Shortened runs; bench/README.md gives the full-length commands behind its tables.
bench: devtree
	$(PY) bench/bench_import.py
	$(PY) bench/bench_launch.py --rounds 5
	$(PY) bench/stress_restart.py --runs 10
	$(PY) bench/bench_pure.py --rounds 20
	$(PY) bench/bench_flytekit.py --rounds 3
	if $(GO_TOOL) present; then $(PY) bench/bench_go.py --rounds 3; \
	else echo "bench_go.py did not run: no Go toolchain (make go-toolchain)"; fi

# The chaos matrix on the one-machine cluster (bench/chaos_cluster.py): the 21 fault classes, 10 runs
# with our pod entrypoint and 5 with stock torchrun as the pod command, the renderer's default restart
# policy; each run appends to bench/results/chaos-cluster.json (a second `make chaos` runs only what is
# missing: delete the file, or pass --redo, to start over) and the table goes to
# bench/results/chaos-cluster.md. It starts its own cluster of real Nodes (build/cluster-chaos,
# CHAOS_JOBS x 3 Nodes) and stops it, under the machine's cluster lock. CHAOS_JOBS runs at a time, each
# on 3 Nodes of its own (4 at most: 14 Nodes); the cluster-wide classes 18-20 (the API server, the
# operator, its webhook) run one at a time after the others. The help above gives the duration
# bench/README.md measured for the matrix recorded before the real Nodes (8 runs at a time).
CHAOS_JOBS ?= 4
CLUSTER_LOCK ?= /var/lock/elastic-idl-cluster.lock
chaos: devtree
	flock $(CLUSTER_LOCK) $(PY) bench/chaos_cluster.py --runs 10 --torchrun-runs 5 --jobs $(CHAOS_JOBS)

# The defaults table (issue 30 item 8): every fault class under the defaults a user gets when stating
# only nnodes (flytekit's and Flyte 2's, torch's agent under upstream's Never; ours), 5 runs each,
# recording what each got into bench/results/chaos-defaults.json (resumable like `make chaos`).
chaos-defaults: devtree
	flock $(CLUSTER_LOCK) $(PY) bench/chaos_cluster.py --defaults flytekit,flyte2,ours --runs 5 --jobs $(CHAOS_JOBS)

demo: venv devtree
	@if [ -x scripts/demo.sh ]; then scripts/demo.sh $(ARGS); \
	else echo "scripts/demo.sh is not there yet"; exit 1; fi

# ---------------------------------------------------------------- the one-machine cluster

# A real control plane on this machine (docs/guide/cluster.md): binaries built once
# per version into ~/.cache/elastic-idl (cluster/build.sh), state in CLUSTER_DIR (build/cluster).
# `cluster-up` ends with `export KUBECTL=...` and `export KUBECONFIG=...`. Root only.
cluster-build: node-deps
	cluster/build.sh >/dev/null
	cluster/build.sh node >/dev/null

cluster-up: devtree node-deps
	$(PY) cluster/cluster.py up

cluster-down: venv-dev
	$(PY) cluster/cluster.py down

# Every cluster test (tests/test_cluster*.py, tests/test_flyte.py), the long ones too;
# `make test` runs the short ones (docs/guide/cluster.md, docs/guide/flyte.md, docs/guide/flyte2.md,
# docs/guide/targets.md).
cluster-test: devtree node-deps
	$(PY) -m pytest -m "cluster or cluster_long" tests/test_cluster.py tests/test_cluster_flytekit.py \
		tests/test_cluster_flyte2.py tests/test_cluster_targets.py tests/test_cluster_real.py \
		tests/test_cluster_real_faults.py tests/test_flyte.py

# ---------------------------------------------------------------- Flyte on the cluster

# Flyte 1.16's propeller (flyte/go.mod: v1.16.8, upstream's plugins and ours), built once per
# version into ~/.cache/elastic-idl/flyte (flyte/build.sh), run on the host against the cluster;
# state in CLUSTER_DIR (build/flyte-cluster). `flyte-up` ends with the cluster's two exports.
# One cluster per machine: hold /var/lock/elastic-idl-cluster.lock around up ... down.
.PHONY: flyte-build flyte-up flyte-down flyte-run flyte-test
flyte-build:
	flyte/build.sh >/dev/null

flyte-up: devtree
	$(PY) flyte/flyte.py up

flyte-down: venv-dev
	$(PY) flyte/flyte.py down

FILE ?= flyte/examples/hello.py
WORKFLOW ?= wf
INPUTS ?= {}
flyte-run: devtree
	$(PY) flyte/flyte.py run $(FILE) $(WORKFLOW) --inputs '$(INPUTS)' $(ARGS)

# Every Flyte test (tests/test_flyte.py): the short ones and one run through our plugin (marker
# cluster), which `make test` runs, and the rest (marker cluster_long): up, propeller's strict
# config check, its plugins, the workflows of issue 31 item 6, down.
flyte-test: devtree
	$(PY) -m pytest -m "cluster_long or not cluster_long" tests/test_flyte.py

# Issue 31 item 7: flyte/examples/train.py through each pytorch plugin of one propeller, alternating
# per round (its own cluster in build/flyte-bench); writes bench/results/flyte-times.json.
.PHONY: flyte-bench
flyte-bench: devtree
	flock $(CLUSTER_LOCK) nice $(PY) bench/flyte_times.py --rounds 5

# The local long tests (marker long): races repeated 20 times; `make test` runs 3 runs of each.
long-test: devtree
	@status=0; $(PY) -m pytest -m long || status=$$?; \
	$(PY) -m pytest -m long $(FLYTE2_TESTS) || status=$$?; \
	exit $$status

# The wheel users install (docs/guide/flytekit.md, "Install"): built by the backend pyproject.toml pins
# (hatchling, in .venv from requirements/dev.txt), without build isolation, so no index is needed.
wheel: venv-dev
	rm -f dist/elastic_idl-*.whl
	$(PY) -m build --wheel --no-isolation --outdir dist .
	@ls -l dist/elastic_idl-*.whl

# The site (mkdocs.yml): the reference pages and the charts are regenerated from the code and
# bench/results/ first (commit them: tests/test_docs.py fails when they are stale), then built with
# --strict, so a broken link, a missing reference or any warning fails. Mermaid comes from the npm
# cache (requirements/docs-npm.txt; fetched once with npm pack), never from a CDN.
# NO_MKDOCS_2_WARNING=1: Material prints an 8-line notice of its end of life on every build otherwise
# (docs/guide/development.md, "The documentation site").
docs: devtree venv-docs
	$(PY) scripts/docs_gen.py
	$(PY) scripts/docs_charts.py
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict --quiet
	@echo "site: build/site/index.html"

# Read the site in a browser: its pages link to folders (quickstart/ml-engineer/), which a file://
# URL shows as a listing, so it is served, on loopback only.
DOCS_PORT ?= 8000
docs-serve: devtree venv-docs
	$(PY) scripts/docs_gen.py
	$(PY) scripts/docs_charts.py
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs serve --dev-addr 127.0.0.1:$(DOCS_PORT)

clean:
	rm -rf build dist .pytest_cache .mypy_cache .ruff_cache .hypothesis

# ---------------------------------------------------------------- torch version matrix (issue 33)

## make test-torch    the launcher, drop-in, round-trip and flytekit tests on each other torch (TORCH_VERSIONS: 2.14.1 2.15.0), each in build/venv-torch-<version>, made when missing; not part of make test
TORCH_VERSIONS ?= 2.14.1 2.15.0
.PHONY: test-torch test-torch-ci
test-torch:
	nice -n 19 scripts/torch_matrix.sh $(TORCH_VERSIONS)

## make test-torch-ci  CI's part of the matrix (scripts/torch_matrix.sh --ci: the launcher, drop-in, private-name and flytekit round-trip tests) on TORCH_VERSIONS; .ci/run runs it after make test
test-torch-ci:
	scripts/torch_matrix.sh --ci $(TORCH_VERSIONS)
