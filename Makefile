# Two entry points: `make run` (the app on the bundled sample) and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test test-fast browser clean

$(STAMP): requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first and pinned, so nothing that depends on it can pull a CUDA build
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -r requirements.txt
	touch $(STAMP)

run: $(STAMP)
	$(PY) -m streamlit run app.py

browser:
	@bash scripts/ensure_chromium.sh

test: $(STAMP) browser
	$(PY) -m pytest -q

# Everything but the browser, Ray, multi-process and slow tests (the marks in each test file): about 2.5 minutes on 2 cores.
test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not browser and not ray and not ddp and not slow"

clean:
	rm -rf $(VENV) runs
