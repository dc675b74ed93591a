# The two commands a newcomer runs: `make demo` and `make test`. Both do all of their own setup:
# uv (into .venv-uv when missing), the project venv (uv sync), Go when missing or older (fetched
# and checksum-verified by hack/ensure-go.sh), and the control-plane binaries (built from source
# once, cached under ~/.cache/jobcontroller; see hack/build-control-plane.sh).
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
UV := $(shell command -v uv 2>/dev/null || echo $(CURDIR)/.venv-uv/bin/uv)
PY := $(UV) run --frozen
CLUSTER_DIR ?= .cluster
PYTEST_ARGS ?=

# REAL_NODE=1 make cluster-up: one real node (kubelet, containerd) beside the kwok nodes.
REAL_NODE ?=
# KUEUE=1 make cluster-up: Kueue (hack/build-kueue.sh) with the kubeflow.org, TrainJob and JobSet
# integrations (JobSet's build gives it JobSet's CRD; JOBSET=1 also runs JobSet, for TrainJobs).
KUEUE ?=
# JOBSET=1 make cluster-up: the JobSet controller (hack/build-jobset.sh) with its webhooks.
JOBSET ?=

.PHONY: test-quick help bootstrap control-plane kueue jobset node images conformance demo-real lint format crds pod-schema test test-unit chaos cluster-up cluster-down demo bench clean bench-micro

help:
	@echo "make demo     run the six operators and TrainJob against a local cluster with the seed and example jobs"
	@echo "REAL=1 make demo (make demo-real)  real PyTorch DDP and MPI jobs on a real node"
	@echo "make test     lint, type-check and run every test (unit, integration, e2e, chaos)"
	@echo "make chaos    the chaos suite alone, printing its figures"
	@echo "make cluster-up / cluster-down   start / stop the local cluster (.cluster/kubeconfig)"
	@echo "                 (REAL_NODE=1: with a real node beside the kwok nodes; needs root)"
	@echo "                 (KUEUE=1: with Kueue managing the jobs and TrainJobs that name a queue)"
	@echo "                 (JOBSET=1: with the JobSet controller, jobset.x-k8s.io/v1alpha2)"
	@echo "make kueue / make jobset   build Kueue / the JobSet controller (cached; make test does)"
	@echo "make conformance real distributed training (PyTorch, elastic, MPI, TF, XGBoost, JAX, Paddle) on the real node"

$(UV):
	python3 -m venv .venv-uv
	.venv-uv/bin/pip install --quiet --disable-pip-version-check uv

bootstrap: $(UV)
	$(UV) sync --frozen --quiet

control-plane:
	@bash hack/build-control-plane.sh >/dev/null

# Kueue's manager, its CRDs and webhooks (built once, cached; see hack/build-kueue.sh).
kueue:
	@bash hack/build-kueue.sh >/dev/null

# The JobSet controller, its CRD and webhooks (built once, cached; see hack/build-jobset.sh).
jobset:
	@bash hack/build-jobset.sh >/dev/null

# The real node's binaries (kubelet, kube-proxy, CoreDNS, pause) and Debian packages.
node: control-plane
	@bash hack/build-node.sh >/dev/null

# The real node's images, built from Debian packages, the project's wheels and the JobSet
# controller (cached).
images: bootstrap node jobset
	$(PY) python -m jobcontroller.testing images

# Real training jobs through the operators deployed on the real node.
conformance: bootstrap control-plane node jobset
	JOBCONTROLLER_K8S_BIN=$$(bash hack/build-control-plane.sh | tail -n1) \
	JOBCONTROLLER_NODE_BIN=$$(bash hack/build-node.sh | tail -n1) \
	  $(PY) pytest --timeout=1800 -s tests/conformance $(PYTEST_ARGS)

lint: bootstrap
	$(PY) ruff check .
	$(PY) ruff format --check .
	$(PY) mypy
	$(PY) python hack/gen-crds.py --check
	$(PY) python hack/gen-dashboard.py --check

format: bootstrap
	$(PY) ruff check --fix .
	$(PY) ruff format .

crds: bootstrap
	$(PY) python hack/gen-crds.py

pod-schema: bootstrap control-plane
	$(PY) python hack/gen-pod-schema.py
	$(PY) python hack/gen-crds.py

# The inner loop: lint, types and the pure tier (no cluster; kubectl renders the overlays).
test-quick: bootstrap control-plane lint
	JOBCONTROLLER_K8S_BIN=$$(bash hack/build-control-plane.sh | tail -n1) \
	  $(PY) pytest -q -n $(TEST_WORKERS) tests/unit $(PYTEST_ARGS)

test-unit: bootstrap control-plane
	JOBCONTROLLER_K8S_BIN=$$(bash hack/build-control-plane.sh | tail -n1) \
	  $(PY) pytest tests/unit $(PYTEST_ARGS)

# Test files run in parallel, each whole on one of TEST_WORKERS pytest-xdist workers with a local
# cluster of its own: the suite mostly waits on API servers and simulated pods, so 3 workers fit
# 2 cores (measured: 28 min with 1, 12 min with 3). The chaos tier runs after the rest, 2 files
# at a time: it times operators' recovery from API-server restarts and kills, which is what it
# must measure, not the other tests' load (a restart's recovery once took over 40 s beside
# them). TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 3
CHAOS_WORKERS ?= 2
test: bootstrap control-plane kueue jobset lint
	JOBCONTROLLER_K8S_BIN=$$(bash hack/build-control-plane.sh | tail -n1) \
	  $(PY) pytest --timeout=600 -n $(TEST_WORKERS) --dist loadfile --durations=20 \
	  tests/unit tests/integration tests/e2e $(PYTEST_ARGS)
	JOBCONTROLLER_K8S_BIN=$$(bash hack/build-control-plane.sh | tail -n1) \
	  $(PY) pytest --timeout=900 -n $(CHAOS_WORKERS) --dist loadfile --durations=10 \
	  tests/chaos $(PYTEST_ARGS)

# The chaos suite alone (make test runs it too): operators killed, the API server restarted and
# compacted, leaders failed over, faults injected, specs fuzzed; it prints its figures.
chaos: bootstrap control-plane jobset
	JOBCONTROLLER_K8S_BIN=$$(bash hack/build-control-plane.sh | tail -n1) \
	  $(PY) pytest --timeout=900 -s tests/chaos $(PYTEST_ARGS)

cluster-up: bootstrap control-plane $(if $(REAL_NODE),node jobset) $(if $(KUEUE),kueue jobset) $(if $(JOBSET),jobset)
	JOBCONTROLLER_K8S_BIN=$$(bash hack/build-control-plane.sh | tail -n1) $(if $(KUEUE),JOBCONTROLLER_KUEUE_BIN=$$(bash hack/build-kueue.sh | tail -n1)) \
	  $(if $(JOBSET),JOBCONTROLLER_JOBSET_BIN=$$(bash hack/build-jobset.sh | tail -n1)) \
	  $(PY) python -m jobcontroller.testing up --dir $(CLUSTER_DIR) $(if $(REAL_NODE),--real-node) $(if $(KUEUE),--kueue) $(if $(JOBSET),--jobset)

cluster-down: $(UV)
	@if [ -d .venv ]; then $(PY) python -m jobcontroller.testing down --dir $(CLUSTER_DIR); else echo "no cluster"; fi

REAL ?=
demo: bootstrap control-plane jobset $(if $(REAL),node)
ifeq ($(REAL),)
	JOBCONTROLLER_K8S_BIN=$$(bash hack/build-control-plane.sh | tail -n1) \
	JOBCONTROLLER_JOBSET_BIN=$$(bash hack/build-jobset.sh | tail -n1) $(PY) python hack/demo.py
else
	JOBCONTROLLER_K8S_BIN=$$(bash hack/build-control-plane.sh | tail -n1) \
	JOBCONTROLLER_NODE_BIN=$$(bash hack/build-node.sh | tail -n1) $(PY) python hack/demo_real.py
endif

# Real training (PyTorch DDP, MPI over SSH) on the real node, with the operators as Deployments.
demo-real:
	$(MAKE) demo REAL=1

# The scenarios of bench/suite.py, each on a fresh audited cluster, against a bare client and (when
# built) the Go operators: JSON and plots in bench/results/, the table in bench/results/summary.md.
# BENCH="idle timers" runs some; BENCH_GO=0 skips the Go operators. BENCH=scale-50k (10,000 jobs,
# 50,000 kwok pods: most of an hour; BENCH_SCALE_JOBS=N for fewer) runs only when named.
BENCH ?=
bench: bootstrap control-plane
	JOBCONTROLLER_K8S_BIN=$$(bash hack/build-control-plane.sh | tail -n1) $(PY) --group bench python bench/suite.py $(BENCH)

# The micro-benchmarks: work queue, informer, in-process TFJob throughput, each script's footprint,
# the planner's CPU per reconcile.
bench-micro: bootstrap control-plane
	JOBCONTROLLER_K8S_BIN=$$(bash hack/build-control-plane.sh | tail -n1) $(PY) python bench/bench_workqueue.py
	JOBCONTROLLER_K8S_BIN=$$(bash hack/build-control-plane.sh | tail -n1) $(PY) python bench/bench_informer.py
	JOBCONTROLLER_K8S_BIN=$$(bash hack/build-control-plane.sh | tail -n1) $(PY) python bench/bench_tfjobs.py
	JOBCONTROLLER_K8S_BIN=$$(bash hack/build-control-plane.sh | tail -n1) $(PY) python bench/bench_footprint.py
	$(PY) python bench/bench_plan.py
	$(PY) python bench/bench_logging.py

clean: cluster-down
	rm -rf .venv .venv-uv .pytest_cache .mypy_cache .ruff_cache
