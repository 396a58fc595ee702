# Every target works on a fresh machine from nothing: it creates .venv, installs
# numagate with its test extras and compiles the Cython core.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.numagate-installed
EXT_STAMP := core/.ext-built

VERSION := $(shell sed -n 's/^__version__ = "\(.*\)"/\1/p' webhook/version.py)

.PHONY: install build run test lint bench soak clean promtool image e2e-build

install: $(STAMP) $(EXT_STAMP)

# constraints.txt: the exact versions tested (setup.py only bounds the ranges).
$(STAMP): setup.py pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip setuptools wheel
	$(PY) -m pip install --quiet -c constraints.txt Cython
	$(PY) -m pip install --quiet -c constraints.txt -e '.[test]'
	touch $(STAMP)

# Compile the core in place; a compile error stops here (no silent pure fallback).
$(EXT_STAMP): core/feasibility/_kernel_c.pyx setup.py $(STAMP)
ifeq ($(NUMAGATE_NO_EXTENSIONS),)
	$(PY) setup.py --quiet build_ext --inplace
endif
	touch $(EXT_STAMP)

build: install

# The image, labelled org.opencontainers.image.version from webhook/version.py.
image:
	docker build --build-arg VERSION=$(VERSION) -t numagate:$(VERSION) .

run: install
	$(VENV)/bin/numagate serve

test: install promtool e2e-build
	$(PY) -m pytest

# The end-to-end suite's etcd, kube-apiserver, kube-scheduler, kubectl and kwok, built with
# Go from the module proxy into ~/.cache/numagate/e2e once per version (docs/e2e.md).
e2e-build:
	$(PYTHON) tests/e2e/build.py

# tests/test_observability.py runs the real promtool (Debian's prometheus package). Only
# when it is missing and apt-get exists (as root, or through sudo) is it installed.
promtool:
	@if ! command -v promtool >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update && $$SUDO apt-get install -y --no-install-recommends prometheus; \
	fi

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench: install e2e-build
	$(PY) benchmarks/core.py
	$(PY) benchmarks/inventory.py
	$(PY) benchmarks/server.py
	$(PY) benchmarks/churn.py
	$(PY) benchmarks/thread_cpu.py
	$(PY) benchmarks/sustained.py
	$(PY) benchmarks/e2e_creates.py
	$(PY) benchmarks/worst_case.py

# Ten minutes of steady load (zero errors, flat memory), then a ten-minute fuzz run of the
# annotation parsers; either failing fails the target.
soak: install
	$(PY) benchmarks/soak.py
	$(PY) fuzz/annotations_fuzz.py -max_total_time=600 -max_len=2048 -artifact_prefix=fuzz/crash-

clean:
	rm -rf $(VENV) build *.egg-info core/feasibility/*.so core/feasibility/_kernel_c.c $(EXT_STAMP)
