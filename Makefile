# Two commands for a newcomer:  make demo  (set up, then generate + build + bench the demo spec)
#                               make test  (the test suite; GPU tests skip themselves without a GPU)

.PHONY: setup demo test clean

.venv/.ftgen-installed: pyproject.toml
	python3 -m venv .venv
	.venv/bin/python -m pip install -q --upgrade pip
	.venv/bin/python -m pip install -q -e '.[dev]'
	touch $@

setup: .venv/.ftgen-installed

demo: setup
	PATH="$(CURDIR)/.venv/bin:$$PATH:/usr/local/cuda/bin" bash scripts/demo.sh

test: setup
	PATH="$$PATH:/usr/local/cuda/bin" .venv/bin/python -m pytest -q

clean:
	rm -rf generated .pytest_cache
