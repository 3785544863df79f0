#!/usr/bin/env bash
# Builds benchmarks/tuning/gemv_configs.cu once a format (in parallel) and runs each binary:
# the native decode GEMV's launch configurations against a pure read of the same bytes.
#   bash benchmarks/tuning/gemv_configs.sh [KxN ...]
# Every configuration at M = 1, then the shipped launch against the one before it at M = 16
# (the shipped one alone for fp8, whose earlier kernel is gone). NVCC (default: nvcc on PATH,
# else /usr/local/cuda/bin/nvcc), ARCH (default sm_90a), GEMV_CONFIGS_BIN (the binaries'
# folder, default /tmp/gemv_configs).
set -euo pipefail
cd "$(dirname "$0")/../.."
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
ARCH=${ARCH:-sm_90a}
BIN=${GEMV_CONFIGS_BIN:-/tmp/gemv_configs}
mkdir -p "$BIN"
FORMATS="INT4 NVFP4 FP8 FP8B DENSE"
pids=()
for f in $FORMATS; do
  rm -f "$BIN/gemv_configs_$f"
  "$NVCC" -O3 -std=c++17 -arch="$ARCH" --expt-relaxed-constexpr -Inative/include -Inative/src \
    -DFORMAT_"$f" benchmarks/tuning/gemv_configs.cu native/src/common/dtype.cpp \
    -o "$BIN/gemv_configs_$f" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done  # set -e: a failed build stops the script
for f in $FORMATS; do "$BIN/gemv_configs_$f" "$@"; done
for f in $FORMATS; do
  case $f in FP8*) only=1 ;; *) only=2 ;; esac
  GEMV_M=16 GEMV_ONLY=$only "$BIN/gemv_configs_$f" "$@"
done
