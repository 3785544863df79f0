#!/usr/bin/env bash
# Builds benchmarks/tuning/gemv_configs.cu once a format (in parallel) and runs each binary:
# the native decode GEMV's launch configurations against a pure read of the same bytes.
#   bash benchmarks/tuning/gemv_configs.sh [KxN ...]
# Every configuration at M = 1, then the shipped launch against the one before it at M = 4 and
# M = 16. NVCC (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc), ARCH (default sm_90a),
# GEMV_CONFIGS_BIN (the binaries' folder, default /tmp/gemv_configs).
set -euo pipefail
cd "$(dirname "$0")/../.."
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
ARCH=${ARCH:-sm_90a}
BIN=${GEMV_CONFIGS_BIN:-/tmp/gemv_configs}
mkdir -p "$BIN"
FORMATS="INT4 NVFP4 FP8 FP8B DENSE"
for f in $FORMATS; do
  "$NVCC" -O3 -std=c++17 -arch="$ARCH" --expt-relaxed-constexpr -Inative/include -Inative/src \
    -DFORMAT_"$f" benchmarks/tuning/gemv_configs.cu native/src/common/dtype.cpp \
    -o "$BIN/gemv_configs_$f" &
done
wait
for f in $FORMATS; do "$BIN/gemv_configs_$f" "$@"; done
for m in 16; do
  for f in $FORMATS; do GEMV_M=$m GEMV_ONLY=2 "$BIN/gemv_configs_$f" "$@"; done
done
