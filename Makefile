# Two commands for a newcomer, in either order on a fresh clone:
#   make demo  set up .venv, then generate and build the tensor-core ABFT GEMM (with its unprotected twin) and a
#              protected FFT, and on a GPU bench them with faults injected beside cuBLAS / cuFFT (scripts/demo.sh);
#              without a GPU it says that benching needs one and exits 0
#   make test  the test suite (GPU tests skip themselves without a GPU)

.PHONY: setup demo test clean

.venv/.ftgen-installed: pyproject.toml
	python3 -m venv .venv
	.venv/bin/python -m pip install -q --upgrade pip
	.venv/bin/python -m pip install -q -e '.[dev]'
	touch $@

setup: .venv/.ftgen-installed

demo: setup
	PATH="$(CURDIR)/.venv/bin:$$PATH:/usr/local/cuda/bin" bash scripts/demo.sh

# (the test files spread over the machine's cores, at most 4 -- a CUTLASS compile test takes a few GB -- each file in one
# worker, so a file's module-scoped builds run once)
test: setup
	PATH="$$PATH:/usr/local/cuda/bin" .venv/bin/python -m pytest -q -n auto --maxprocesses 4 --dist loadfile --durations=25

clean:
	rm -rf generated .pytest_cache
