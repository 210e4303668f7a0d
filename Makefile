.PHONY: setup demo lint test
setup:
	bash scripts/setup.sh
demo: setup
	.venv/bin/citekeeper demo
lint: setup
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy
test: setup
	.venv/bin/python -m pytest
