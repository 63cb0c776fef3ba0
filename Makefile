# Attention, step by step: the two commands are `make book` and `make test` (see README.md).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
PY     := $(VENV)/bin/python
# The environment is rebuilt only when the lock file or the package metadata change.
MAKE_STARTED := $(shell date +%s)
UV_PIN := uv==0.13.10
STAMP  := $(VENV)/.installed-$(shell cat requirements.lock pyproject.toml | sha1sum | cut -c1-12)

.PHONY: setup book student pdf check-colab translations test quick bench figures export check serve clean release grade check-assignments dry-run estimate gpu-run

setup: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	@$(PYTHON) -c 'import sys; v = sys.version_info[:2]; sys.exit(f"Python 3.11 is needed, found {sys.version.split()[0]} at {sys.executable}; run make PYTHON=/path/to/python3.11") if v < (3, 10) else print("" if v == (3, 11) else f"warning: requirements.lock is made for Python 3.11, this is {sys.version.split()[0]}")'
	$(PYTHON) -m venv $(VENV)
	@# uv installs the lock file's 200 packages in about 10 s where pip took about 2 minutes; pip stays
	@# the fallback (a registry without uv). uv reads pip's settings from the environment, not pip.conf:
	@# the find-links folder of this kind of machine (the CPU build of torch on disk) is passed on.
	@# --compile-bytecode: the .pyc files are written once, here. Without them every Python process
	@# compiles what it imports (torch alone: 2.3 s instead of 1.2 s) wherever it cannot write a cache:
	@# in each grading sandbox (the environment is read-only there) and under PYTHONDONTWRITEBYTECODE.
	if $(PY) -m pip install --quiet $(UV_PIN) && $(VENV)/bin/uv --version; then \
	  $(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(PY) --index-strategy unsafe-best-match \
	    $$($(PY) -c 'import os, shlex, subprocess; v = os.environ.get("PIP_FIND_LINKS") or subprocess.run(["$(PY)", "-m", "pip", "config", "get", "global.find-links"], capture_output=True, text=True).stdout; print(" ".join("--find-links " + shlex.quote(p) for p in v.split()))') \
	    -r requirements.lock && \
	  $(VENV)/bin/uv pip install --quiet --python $(PY) --no-deps --no-build-isolation -e .; \
	else \
	  echo "uv unavailable: installing with pip (about 2 minutes)"; \
	  $(PY) -m pip install --quiet --upgrade pip && \
	  $(PY) -m pip install --quiet -r requirements.lock && \
	  $(PY) -m pip install --quiet --no-deps --no-build-isolation -e .; \
	fi
	@rm -f $(VENV)/.installed-*
	@touch $@
	@echo $$(( $$(date +%s) - $(MAKE_STARTED) )) > $(VENV)/.setup-seconds  # reported by make test
	@echo "Environment ready in $(VENV) ($$(du -sh $(VENV) | cut -f1))."

## book: execute every notebook (profile from the hardware or $ATTN_PROFILE) and build the English
## edition in _build/html and the Chinese one in _build/html/zh (the notebooks execute once, for both)
book: setup
	$(PY) tools/build.py book

## pdf: the book as one PDF per edition (_build/pdf/attention-step-by-step.pdf and .zh_CN.pdf), printed by
## headless Chromium from the outputs of the book built in the same profile (run make book first)
pdf: setup
	$(PY) tools/pdf.py

## check-colab: run notebook 0 as Colab would open it, in a clean virtual environment with only what a Colab
## runtime preinstalls; its setup cell installs the course (a local wheel) and finds the data (a few minutes)
check-colab: setup
	$(PY) tools/colab_check.py

## translations: after a change to the English, merge it into the Chinese catalogues (locales/zh_CN)
## and list what is left to translate (see locales/README.md); make test fails until it is done
translations: setup
	$(PY) tools/translations.py update
	$(PY) tools/translations.py stats

## student: the same book with the solutions of the exercises hidden, in _build/student/html
student: setup
	$(PY) tools/build.py book --student

## release: student versions of the graded assignments (solutions, hidden tests removed), in _build/classroom/student
release: setup
	$(PY) tools/classroom.py release

## grade: autograde a folder of submissions, each in a sandbox: make grade ASSIGNMENT=a1_masked_attention SUBMISSIONS=path/to/folder
## (UNSAFE=1 grades without a sandbox where none can be made: only for submissions you trust;
## ROSTER=file.csv maps students to Canvas/Moodle ids for canvas.csv and moodle.csv, see tools/grading/lms.toml)
grade: setup
	@test -n "$(ASSIGNMENT)" -a -n "$(SUBMISSIONS)" || { echo "usage: make grade ASSIGNMENT=<name> SUBMISSIONS=<folder>"; exit 2; }
	$(PY) tools/classroom.py grade $(ASSIGNMENT) $(SUBMISSIONS) $(if $(UNSAFE),--unsafe) $(if $(ROSTER),--roster $(ROSTER))

## check-assignments: grade each assignment's solution, blank and wrong answers and check the points
check-assignments: setup
	$(PY) tools/classroom.py check

## dry-run: every experiment at a profile's sizes, two optimisation steps each: make dry-run [PROFILE=full]
dry-run: setup
	$(PY) -m attn_tutorial.results dry-run --profile $(or $(PROFILE),full)

## estimate: time two steps of every experiment here and print how long the real runs take: make estimate [PROFILE=full]
estimate: setup
	$(PY) -m attn_tutorial.results estimate --profile $(or $(PROFILE),full)

## gpu-run: record every full-profile experiment on a GPU, BUDGET seconds per call (default 540); call again to continue
gpu-run: setup
	$(PY) tools/gpu_run.py --budget $(or $(BUDGET),540)

## test: data check, unit tests, nbval on every notebook (smoke), strict book builds, headless-browser check,
## then where the time went (_build/test-reports/timings.json)
test: setup
	$(PY) tools/run_tests.py

## quick: the contributor's inner loop (about half a minute): export check, the unit tests but the slowest,
## and nbval on the notebooks changed since the last commit (else notebook 0). make test stays the gate.
quick: setup
	$(PY) tools/run_tests.py --quick

## bench: only the tests that measure times, and their table against the budgets (never fails on time)
bench: setup
	$(PY) tools/run_tests.py --bench

## figures: redraw the figures of the theory pages from book/figures/chNN.py (the build does it too)
figures: setup
	$(PY) tools/figures.py

## export: regenerate attn_tutorial/ from the notebooks' `#| export` cells
export: setup
	$(PY) -m attn_tutorial.export

check: setup
	$(PY) -m attn_tutorial.export --check

serve:
	$(PY) -m http.server --directory _build/html 8000

clean:
	rm -rf _build conf.py book/_static/mathjax
