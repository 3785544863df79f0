#!/usr/bin/env bash
# Builds benchmarks/tuning/gemv_configs.cu once a format (in parallel) and runs each binary:
# the native decode GEMV's launch configurations against a pure read of the same bytes.
#   bash benchmarks/tuning/gemv_configs.sh [KxN ...]
# Every configuration at M = 1, then the shipped launch against the one before it at M = 16
# (the shipped one alone for fp8, whose earlier kernel is gone). NVCC (default: nvcc on PATH,
# else /usr/local/cuda/bin/nvcc), ARCH (default sm_90a), GEMV_CONFIGS_BIN (the binaries'
# folder, default /tmp/gemv_configs).
#
# GEMV_BASE=<git revision>: a before/after run instead. The same harness is also built from
# that revision's sources (git archive of native/ and the harness), and each format's shipped
# launch runs alternately, the revision's first, GEMV_ROUNDS times (default 2), at GEMV_M rows
# (default 1), the first GEMV_ONLY launches of each list (default 1; the lists pair by
# position, and a revision's may differ from this tree's past the second). Needs a git
# checkout. GEMV_FORMATS: the formats to build and run (default all). GEMV_GATED=1: the gated
# MLP's product (dense weights left out; a revision whose harness lacks it is refused).
# GEMV_PICK="name,name": the shipped launch and these configurations only (M = 1 runs; not
# with GEMV_BASE, whose lists pair by position).
set -euo pipefail
cd "$(dirname "$0")/../.."
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
ARCH=${ARCH:-sm_90a}
BIN=${GEMV_CONFIGS_BIN:-/tmp/gemv_configs}
BASE=${GEMV_BASE:-}
mkdir -p "$BIN"
FORMATS=${GEMV_FORMATS:-"INT4 NVFP4 FP8 FP8B DENSE"}
if [ "${GEMV_GATED:-}" = 1 ]; then  # dense weights have no gated product (the binary refuses)
  FORMATS=$(echo "$FORMATS" | tr ' ' '\n' | { grep -vx DENSE || true; } | tr '\n' ' ')
  [ -n "${FORMATS// /}" ] || { echo "GEMV_GATED: no format of GEMV_FORMATS has one" >&2; exit 2; }
fi
build() {  # build <source root> <binary prefix>: one binary a format, in parallel
  local pids=()
  for f in $FORMATS; do
    rm -f "$BIN/$2$f"
    (cd "$1" && "$NVCC" -O3 -std=c++17 -arch="$ARCH" --expt-relaxed-constexpr -Inative/include \
      -Inative/src -DFORMAT_"$f" benchmarks/tuning/gemv_configs.cu native/src/common/dtype.cpp \
      -o "$BIN/$2$f") &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done  # set -e: a failed build stops the script
}
if [ -n "$BASE" ]; then
  src=$(mktemp -d)
  trap 'rm -rf "$src"' EXIT
  git archive "$BASE" native benchmarks/tuning/gemv_configs.cu | tar -x -C "$src"
  # A harness from before GEMV_GATED would time the plain product against this tree's gated one.
  if [ "${GEMV_GATED:-}" = 1 ] && ! grep -q GEMV_GATED "$src/benchmarks/tuning/gemv_configs.cu"; then
    echo "GEMV_GATED: the harness at $BASE has no gated product" >&2
    exit 2
  fi
  build "$src" base_
  build . gemv_configs_
  for r in $(seq "${GEMV_ROUNDS:-2}"); do
    for f in $FORMATS; do
      echo "## round $r, $BASE, $f"
      GEMV_ONLY=${GEMV_ONLY:-1} GEMV_PICK= "$BIN/base_$f" "$@"
      echo "## round $r, this tree, $f"
      GEMV_ONLY=${GEMV_ONLY:-1} GEMV_PICK= "$BIN/gemv_configs_$f" "$@"
    done
  done
  exit 0
fi
build . gemv_configs_
for f in $FORMATS; do "$BIN/gemv_configs_$f" "$@"; done
for f in $FORMATS; do
  case $f in FP8*) only=1 ;; *) only=2 ;; esac
  GEMV_M=16 GEMV_ONLY=$only GEMV_PICK= "$BIN/gemv_configs_$f" "$@"
done
