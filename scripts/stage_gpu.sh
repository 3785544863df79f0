#!/usr/bin/env bash
# Here (a machine with cargo): build what the GPU host cannot build into STAGE (default .gpu):
#   STAGE/wheels/  the pygpukit abi3 wheel (one wheel for every CPython >= 3.10) and any extra
#                  dependency wheels already placed there
#   STAGE/rust/    the Rust test binaries (the device tests in rust/pygpukit-core/tests/gpu.rs)
# Then carry STAGE to the GPU host and run .ci/gpu/check.sh OUT STAGE there.
set -euo pipefail
cd "$(dirname "$0")/.."
STAGE=${1:-.gpu}
PYGPUKIT_SKIP_NATIVE=1 scripts/setup.sh  # native/ is built on the GPU host (its nvcc, 16 cores)
rm -rf "$STAGE/rust" "$STAGE"/wheels/pygpukit-*.whl
mkdir -p "$STAGE/rust" "$STAGE/wheels"
.venv/bin/maturin build --release --quiet -o "$STAGE/wheels"
(cd rust && cargo test -p pygpukit-core --release --no-run --message-format=json 2>/dev/null) |
  .venv/bin/python -c '
import json, shutil, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        shutil.copy(m["executable"], sys.argv[1] + "/test_" + m["target"]["name"])
' "$STAGE/rust"
# Pure-Python dependencies the GPU image lacks, at the versions installed here.
gguf_version=$(.venv/bin/python -c "import importlib.metadata as m; print(m.version('gguf'))")
.venv/bin/python -m pip download -q --no-deps --only-binary=:all: -d "$STAGE/wheels" "gguf==$gguf_version"
# CUTLASS's headers for the native moe family (built on the GPU host), at native-build.txt's pin.
cutlass=$(grep '^nvidia-cutlass==' scripts/native-build.txt)
.venv/bin/python -m pip download -q --no-deps --only-binary=:all: -d "$STAGE/wheels" "$cutlass"
# nnAudio (pure Python on torch and scipy): the GPU peer of benchmarks/audio.py's cqt case.
.venv/bin/python -m pip download -q --no-deps --only-binary=:all: -d "$STAGE/wheels" "nnAudio==0.3.4"
ls -la "$STAGE/wheels" "$STAGE/rust"
