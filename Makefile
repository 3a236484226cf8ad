# The two set-up commands of the README: `make demo` and `make test` each create .venv on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
STAMP := $(VENV)/.installed-stamp
# The lock of the tested environment (docs/environment.md), one per Python; without one for the
# running Python, install falls back to pyproject.toml's ranges (newest versions), with a warning.
PYV := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')
LOCK := requirements/py$(PYV).txt
LOCKED := $(wildcard $(LOCK))
# Extras of the fallback install (the lock always holds dev,hf,chartqapro). hf: CPU torch 2.13.0 +
# transformers, the numerical oracle of the parity tests; chartqapro: pyarrow, its builder's reader.
EXTRAS ?= dev,hf,chartqapro
# uv reads no pip configuration: pip's find-links (where this machine keeps the CPU torch wheel)
# are handed on, unless UV_FIND_LINKS is set.
FIND_LINKS := $(or $(UV_FIND_LINKS),$(PIP_FIND_LINKS),$(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null))
ifneq ($(FIND_LINKS),)
export UV_FIND_LINKS := $(FIND_LINKS)
endif
export TF_CPP_MIN_LOG_LEVEL := 2
# No __pycache__ in the working tree; the installed packages are compiled once at install
# (`--compile-bytecode`): without their .pyc every test and CLI process recompiled jax, torch and
# TensorFlow from source, about half of each process's start-up.
export PYTHONDONTWRITEBYTECODE := 1
LATEST := build/latest

# Headless Chromium renders report.html in tests/metrics/test_html_report.py: Debian's package,
# installed when missing and apt-get exists (as root, else through sudo -n).
APT := $(if $(filter 0,$(shell id -u)),,sudo -n) env DEBIAN_FRONTEND=noninteractive apt-get

.PHONY: install demo test test-fast test-latest lock lint bench clean chromium

$(STAMP): pyproject.toml $(LOCKED)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
ifneq ($(LOCKED),)
	$(PY) -m pip install -q "uv==$$(sed -n 's/^uv==//p' $(LOCK))"
	$(UV) pip sync -q --compile-bytecode --python $(PY) $(LOCK)
	grep -q '^torch==' $(LOCK) || $(PY) -m pip install -q 'torch==2.13.0'
	$(UV) pip install -q --python $(PY) --no-deps -e .
else
	@echo "WARNING: no lock for Python $(PYV) ($(LOCK)): installing the newest versions that" \
	  "pyproject.toml's ranges allow, a combination nobody tested (docs/environment.md)" >&2
	$(PY) -m pip install -q uv
	$(UV) pip install -q --compile-bytecode --python $(PY) --upgrade -e '.[$(EXTRAS)]' pip uv
endif
	$(PY) -m chartjax.tools.nltk_data  # WordNet + punkt for METEOR, offline (docs/metrics.md §6)
	touch $(STAMP)

chromium:
	@command -v chromium >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1 || \
	  $(APT) install -y -q chromium || { $(APT) update -q && $(APT) install -y -q chromium; }

install: $(STAMP) chromium

demo: $(STAMP)
	$(PY) -m chartjax.tools.demo --out demo_out

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: $(STAMP) chromium
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=15

# The fast tier while you work: units, metrics, builders and the structural recipe checks; every
# test marked `slow` (training runs, model and parity runs, several processes) left out.
test-fast: $(STAMP)
	$(VENV)/bin/pytest -q -n 2 --dist loadfile --no-loadscope-reorder -m "not slow" --durations=10

# Every lock resolved anew from pyproject.toml's ranges, and docs/environment.md's table.
lock:
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	test -x $(UV) || $(PY) -m pip install -q uv
	$(PY) tools/lock.py

# The newest versions the ranges allow, in an environment of their own: drift found before users
# find it (docs/environment.md says when to run it).
test-latest: chromium
	rm -rf $(LATEST) && $(PYTHON) -m venv $(LATEST)/venv
	$(LATEST)/venv/bin/python -m pip install -q uv
	$(LATEST)/venv/bin/uv pip install -q --python $(LATEST)/venv/bin/python -e '.[dev,hf,chartqapro]' pip uv
	$(LATEST)/venv/bin/python -m chartjax.tools.nltk_data
	$(LATEST)/venv/bin/python tools/lock.py --out $(LATEST)/requirements --no-docs
	$(LATEST)/venv/bin/pip list --format=freeze > $(LATEST)/installed.txt
	$(LATEST)/venv/bin/pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=15

bench: $(STAMP)
	$(PY) -m chartjax.tools.bench.input --with-step
	$(PY) -m chartjax.tools.bench.runner step --rerun --out bench_step.json
	$(PY) -m chartjax.tools.bench.step --model pix2struct --compare-hf
	$(PY) -m chartjax.tools.bench.training_parity --out bench_training_parity.json
	$(PY) -m chartjax.tools.bench.synth --figures 100
	$(PY) -m chartjax.tools.bench.synth_chart_info --num 100
	$(PY) -m chartjax.tools.bench.score
	$(PY) -m chartjax.tools.bench.build --charts 300
	$(PY) -m chartjax.tools.bench.t5x_load
	$(PY) -m chartjax.tools.bench.scaling --out bench_scaling.json
	$(PY) -m chartjax.tools.bench.classify --examples 256 --batch 16
	$(PY) -m chartjax.tools.bench.runner demo --rerun --out bench_demo.json
	$(PY) -m chartjax.tools.bench.runner ordering --rerun --out bench_ordering.json
	$(PY) -m chartjax.tools.bench.runner reading --rerun --out bench_reading.json
	$(PY) -m chartjax.tools.bench.runner memory --rerun --out bench_memory.json
	$(PY) -m chartjax.tools.bench.runner peft_memory --rerun --out bench_peft_memory.json
	$(PY) -m chartjax.tools.bench.runner peft_step --rerun --out bench_peft_step.json

clean:
	rm -rf $(VENV) demo_out .pytest_cache
