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

# Two workers (pytest-xdist), one per core: while one test waits (a browser, a subprocess) the other core runs the
# rest. A file's tests stay on one worker, so its module fixtures are made once.
XDIST := -n 2 --dist loadfile

test: $(STAMP) browser
	$(PY) -m pytest -q $(XDIST)

# Everything but the browser, Ray, multi-process and slow tests (the marks in each test file).
test-fast: $(STAMP)
	$(PY) -m pytest -q $(XDIST) -m "not browser and not ray and not ddp and not slow"

clean:
	rm -rf $(VENV) runs
