.PHONY: setup demo test
setup:
	bash scripts/setup.sh
demo: setup
	.venv/bin/citekeeper demo
test: setup
	.venv/bin/python -m pytest
