#!/usr/bin/env bash
# Builds _pygpukit_native (native/) in place with CMake + Ninja into build/native and points the
# venv at it (a .pth file), the development analogue of `pip install ./native`.
#
#   PYGPUKIT_CUDA_ARCHS  architectures (default "80;86;89;90a"; CI builds "90a" only)
#   CUDACXX              nvcc to use (else PATH, /usr/local/cuda, then the nvidia-cuda-nvcc wheel)
#   PYGPUKIT_NATIVE_FAMILIES  build only these families ("norm;gemv"), into their own build dir
#   PYGPUKIT_CUTLASS_BATCH    CUTLASS instance files per translation unit (default 1; CI's
#                             two cores build faster with several, see native/CMakeLists.txt)
#   PYGPUKIT_NATIVE_BUILD     build directory (default build/native; only that one gets the .pth)
#   PYTHON               interpreter whose site-packages gets the .pth (default .venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
ARCHS=${PYGPUKIT_CUDA_ARCHS:-80;86;89;90a}
BUILD=${PYGPUKIT_NATIVE_BUILD:-build/native}
pip_q() { "$PY" -m pip install -q --disable-pip-version-check "$@"; }

bindir=$(dirname "$("$PY" -c 'import sys; print(sys.executable)')")
have() { [ -x "$bindir/$1" ] || command -v "$1" >/dev/null 2>&1; }
if ! "$PY" -c "import pybind11, importlib.util as u; assert u.find_spec('cutlass_library')" \
    >/dev/null 2>&1 || ! have cmake || ! have ninja; then
  pip_q -r scripts/native-build.txt
fi
nvcc=${CUDACXX:-}
if [ -z "$nvcc" ]; then
  if command -v nvcc >/dev/null 2>&1; then
    nvcc=$(command -v nvcc)
  elif [ -x /usr/local/cuda/bin/nvcc ]; then
    nvcc=/usr/local/cuda/bin/nvcc
  else
    site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    if [ ! -x "$site/nvidia/cu13/bin/nvcc" ]; then
      pip_q -r scripts/native-cuda.txt
    fi
    nvcc="$site/nvidia/cu13/bin/nvcc"
  fi
fi
cmake_bin=$(command -v "$bindir/cmake" || command -v cmake)
ninja_bin=$(command -v "$bindir/ninja" || command -v ninja)
echo "build_native: nvcc $nvcc ($("$nvcc" --version | tail -n 2 | head -n 1)), archs $ARCHS"
"$cmake_bin" -S native -B "$BUILD" -G Ninja -DCMAKE_MAKE_PROGRAM="$ninja_bin" \
  -DCMAKE_CUDA_COMPILER="$nvcc" -DPYGPUKIT_CUDA_ARCHS="$ARCHS" \
  -DPYGPUKIT_NATIVE_FAMILIES="${PYGPUKIT_NATIVE_FAMILIES:-}" \
  -DPYGPUKIT_CUTLASS_BATCH="${PYGPUKIT_CUTLASS_BATCH:-1}" \
  -DPython_EXECUTABLE="$("$PY" -c 'import sys; print(sys.executable)')" \
  -Dpybind11_DIR="$("$PY" -m pybind11 --cmakedir)" >/dev/null
"$cmake_bin" --build "$BUILD" -j "${PYGPUKIT_NATIVE_JOBS:-$(nproc)}"
site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
if [ -w "$site" ] && [ "$BUILD" = build/native ]; then
  echo "$(pwd)/$BUILD" > "$site/pygpukit_native_build.pth"
fi
echo "build_native: $(ls "$BUILD"/_pygpukit_native*.so)"
