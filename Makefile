# The two set-up commands of the README: `make demo` and `make test` each create .venv on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# hf: CPU torch 2.13.0 + transformers, the numerical oracle of the parity tests.
EXTRAS ?= dev,hf
export TF_CPP_MIN_LOG_LEVEL := 2
export PYTHONDONTWRITEBYTECODE := 1

# Headless Chromium renders report.html in tests/metrics/test_html_report.py: Debian's package,
# installed when missing and apt-get exists (as root, else through sudo -n).
APT := $(if $(filter 0,$(shell id -u)),,sudo -n) env DEBIAN_FRONTEND=noninteractive apt-get

.PHONY: install demo test lint bench clean chromium

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[$(EXTRAS)]'
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
	$(VENV)/bin/pytest -q -n 2 --dist loadfile --durations=15

bench: $(STAMP)
	$(PY) -m chartjax.tools.bench.input --with-step
	$(PY) -m chartjax.tools.bench.train_step --kind rn --image-size 256 --conv-layers 5 --batch 16
	$(PY) -m chartjax.tools.bench.step --model pix2struct --compare-hf
	$(PY) -m chartjax.tools.bench.training_parity --out bench_training_parity.json
	$(PY) -m chartjax.tools.bench.synth --figures 100
	$(PY) -m chartjax.tools.bench.synth_chart_info --num 100
	$(PY) -m chartjax.tools.bench.score
	$(PY) -m chartjax.tools.bench.build --charts 300
	$(PY) -m chartjax.tools.bench.t5x_load
	$(PY) -m chartjax.tools.bench.scaling --out bench_scaling.json
	$(PY) -m chartjax.tools.bench.classify --examples 256 --batch 16
	$(PY) -m chartjax.tools.bench.rn_learning --images 400 --steps 500 --eval_every 250
	$(PY) -m chartjax.tools.bench.figureqa_sanity --budget-s 600 --out figureqa_sanity.json
	$(PY) -m chartjax.tools.bench.figureqa_ordering --corpus bars --lr-schedule cosine \
		--out figureqa_ordering.json \
		--plot figureqa_ordering.png
	$(PY) -m chartjax.tools.bench.learning --out bench_learning_out --rerun
	$(PY) -m chartjax.tools.bench.learning --out runs/bench_learning_values --rerun \
		--types "Grouped vertical bar" --size 480x360 --max_series 1 --value_labels 16 \
		--prompt none --steps 1800 --budget_s 100000 --eval_every 600
	$(PY) -m chartjax.tools.bench.reading --out runs/bench_reading_grid --rerun \
		--size 576x416 --text_grid 32 --value_labels 20 --stage1_steps 0 --stage2_steps 3000 \
		--train_charts 3000 --heldout_charts 200 --split_digits --eval_every 500
	$(PY) -m chartjax.tools.bench.t5_summary --out runs/bench_t5_summary
	$(PY) -m chartjax.tools.bench.remat_memory --out bench_remat_memory.json
	$(PY) -m chartjax.tools.bench.peft --batch 2 --patches 64 --input_len 64 --target_len 16 --out bench_peft.json
	$(PY) -m chartjax.tools.bench.packing --out bench_packing.json

clean:
	rm -rf $(VENV) demo_out .pytest_cache
