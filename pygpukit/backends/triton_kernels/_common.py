"""Shared pieces of the Triton kernels: dtype rules, scalar passing, layout plans, index helpers.

Host side (plain Python, on every launcher's hot path, so cheap and cached where it can be):
- ``compute_tl``: the Triton dtype arithmetic runs in (the rule of pygpukit/backends/_support/
  dtypes.py, shared with the native home: float64 -> float64, other floats -> float32, integers
  keep their type; bool arithmetic runs in int32 and is turned back into bool by ``!= 0``).
- ``scalar_bits``: a Python/NumPy scalar as two int32 halves of its bit pattern in the compute
  dtype. Triton passes a Python float as fp32, which would round a float64 operand; the bits
  travel exactly and the kernel rebuilds the value with ``scalar_value``. Kernels mark the two
  halves ``do_not_specialize`` so every value shares one compiled kernel.
- ``nd_args``: kernel arguments from the operand collapse (``plan_nd``); it and the row plans
  (``plan_rows`` / ``row_view``) come from pygpukit/backends/_support/ and are re-exported here
  for the kernel modules (and for edited copies of them in a user's kernel directory).
- the launch heuristics ``flat_cfg``, ``nd_tile`` and ``row_cfg`` (each with its reasoning and
  the H200 measurements behind it).
- under TRITON_INTERPRET=1 only: NumPy stand-ins for libdevice calls and a fix for Triton 3.6's
  interpreter with NumPy >= 2.4 (see _install_interpreter_externs).

Kernel side (``@triton.jit`` helpers): ``scalar_value``, ``nd_offsets`` (row-decomposed offsets of
a 2-D tile over up to 5 collapsed dims) and ``row_offset`` (offset of one row of a [..., N] array
over up to 3 collapsed leading dims). Offsets are int64: arrays may exceed 2**31 elements.
"""

# Triton kernel and @triton.jit helper bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import triton
import triton.language as tl
from triton.language.extra.cuda import libdevice

from pygpukit import determinism, runtime
from pygpukit.array import GPUArray
from pygpukit.backends._support.collapse import contiguous_strides, plan_nd
from pygpukit.backends._support.dtypes import as_dt, compute_name, float_result
from pygpukit.backends._support.rows import MAX_LEAD, plan_rows, row_view
from pygpukit.creation import empty
from pygpukit.dtypes import DataType

__all__ = [
    "MAX_LEAD",
    "sm_count",
    "GPUArray",
    "libdevice",
    "as_dt",
    "cdiv",
    "compute_tl",
    "float_result",
    "nd_offsets",
    "new_out",
    "next_pow2",
    "plan_nd",
    "plan_rows",
    "row_offset",
    "row_view",
    "contiguous_strides",
    "scalar_bits",
    "scalar_value",
]

# Outer dims the N-d elementwise kernels decompose (plus the innermost one); more are split on
# the host (rare: it needs 6+ dims that no two neighbours of can be merged).
MAX_OUTER = 4

_TL = {
    "float64": tl.float64,
    "float32": tl.float32,
    "float16": tl.float16,
    "bfloat16": tl.bfloat16,
    "float8_e4m3fn": tl.float8e4nv,
    "float8_e5m2": tl.float8e5,
    "int64": tl.int64,
    "int32": tl.int32,
    "int16": tl.int16,
    "int8": tl.int8,
    "uint8": tl.uint8,
    "bool": tl.int1,
}


def tl_dtype(dt: DataType) -> Any:
    return _TL[dt.name]


# Compute dtype per result dtype, derived once from the shared rule (_support.dtypes.compute_name):
# launchers read it on every call, so one dict lookup.
_CT = {name: _TL[compute_name(as_dt(name))] for name in _TL}


def compute_tl(dt: DataType) -> Any:
    """Triton dtype the arithmetic for a result of ``dt`` runs in (``compute_name``)."""
    return _CT[dt.name]


def cdiv(a: int, b: int) -> int:
    # triton.cdiv is a constexpr_function: several microseconds per host call.
    return -(-a // b)


def sm_count(x: GPUArray) -> int:
    """Multiprocessors x's work may run on (runtime.sm_count: the current stream's SM partition
    or the device): sizes split-K / split-key grids so they fill what they can use."""
    return runtime.sm_count(x._device)


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def new_out(out: GPUArray | None, shape: tuple[int, ...], dt: DataType, like: GPUArray) -> GPUArray:
    """``out`` itself (the kernels take its strides), or a fresh contiguous array: the
    ``_support.output.target(..., strided=True)`` policy, written out because every launcher
    calls it."""
    return out if out is not None else empty(shape, dt, like._device)


def _signed32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= (1 << 31) else v


def scalar_bits(value: Any, ct: Any) -> tuple[int, int]:
    """(hi, lo) int32 halves of ``value``'s bit pattern in compute dtype ``ct`` (a Triton dtype).

    float64: the IEEE double bits; float32: the IEEE single bits in ``lo`` (a float32 scalar
    from the op layer is exact; a Python float rounds once, to nearest even); integers and bool:
    the two's-complement int64 value.
    """
    if isinstance(value, np.ndarray) or isinstance(value, np.generic):
        value = value.item()
    if ct == tl.float64:
        bits = struct.unpack("<q", struct.pack("<d", float(value)))[0]
    elif ct == tl.float32:
        try:
            bits = struct.unpack("<i", struct.pack("<f", float(value)))[0]
        except OverflowError:  # |value| > float32 max: the nearest float32 is +-inf
            bits = struct.unpack("<i", struct.pack("<f", np.copysign(np.inf, value)))[0]
    else:
        bits = int(value)
    return _signed32(bits >> 32), _signed32(bits)


def nd_args(rows: list[tuple[int, ...]], n_ops: int) -> tuple[list[int], list[list[int]]]:
    """Kernel size/stride arguments for ``nd_offsets`` from at most 1 + MAX_OUTER rows.

    Returns ([n_rows, n_cols, D1, D2, D3], per-operand [S0, S1, S2, S3, S4]); D1 is the outer
    dim nearest the inner one. Missing dims get size 1 and stride 0: Triton specializes the
    size-1 ints as constants, so the unused div/mod steps fold away.
    """
    inner = rows[-1]
    outer = rows[-2::-1]  # nearest the inner dim first
    sizes = [r[0] for r in outer] + [1] * (MAX_OUTER - len(outer))
    n_rows = 1
    for r in outer:
        n_rows *= r[0]
    strides = []
    for k in range(n_ops):
        s = [inner[k + 1]] + [r[k + 1] for r in outer] + [0] * (MAX_OUTER - len(outer))
        strides.append(s)
    return [n_rows, inner[0], sizes[0], sizes[1], sizes[2]], strides


def nd_tile(n_rows: int, n_cols: int) -> tuple[int, int, int]:
    """(BLOCK_R, BLOCK_C, num_warps) for a 2-D elementwise tile.

    A tile of up to 4096 elements: the inner dim gets up to 1024 contiguous columns (wide enough
    for 128-bit accesses and full sectors), the rest of the tile stacks rows, so a short inner
    dim (a broadcast bias of 7, a transposed view) still gives programs of useful size. 8 warps
    at 4096 elements leave 16 elements per thread; smaller tiles use 4 warps.
    """
    bc = min(next_pow2(n_cols), 1024)
    br = min(next_pow2(n_rows), max(1, 4096 // bc))
    return br, bc, (8 if br * bc >= 4096 else 4)


def flat_cfg(n: int) -> tuple[int, int]:
    """(BLOCK, num_warps) of 1-D contiguous elementwise kernels.

    Large arrays: 4096 elements per program and 8 warps, 16 elements a thread (two to four
    128-bit accesses per operand), few enough programs that the tail wave is short. Mid sizes
    use 1024 so that there are still several programs per SM (2**20 elements -> 1024 programs
    on 132 SMs). Measured on an H200, silu_mul 16384x8192 bf16: BLOCK/warps 1024/4, 2048/8 and
    4096/8 all reach 4320-4340 GB/s (102% of the 1 GiB copy rate: three streams, two of them
    reads); 8192/8 drops to 3807 GB/s.
    """
    if n >= 1 << 24:
        return 4096, 8
    if n >= 1 << 16:
        return 1024, 4
    return max(128, min(1024, next_pow2(n))), 4


# ----- libdevice under the interpreter ---------------------------------------------------------
# The kernels call CUDA's libdevice (accurate exp/log/sin/cos/tanh/pow/erfc) through
# triton.language.extra.cuda.libdevice. Triton's interpreter has no extern calls
# (create_extern_elementwise raises), so under TRITON_INTERPRET=1 they are served by the NumPy
# function of the same name, evaluated in the argument dtype: the interpreter tests then check
# the kernels' own arithmetic against a reference that uses the same library functions.

_erfc_vec = np.vectorize(math.erfc, otypes=[np.float64])
_NP_FUNCS: dict[str, Callable[..., Any]] = {
    "exp": np.exp,
    "log": np.log,
    "log1p": np.log1p,
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
    "pow": np.power,
    "erfc": lambda z: _erfc_vec(z).astype(z.dtype),
}


def _install_interpreter_externs() -> None:
    from triton.runtime import interpreter as interp

    def extern(
        lib_name: str, lib_path: str, symbol: str, args: list[Any], ret: Any, pure: bool
    ) -> Any:
        name = symbol.removeprefix("__nv_")
        fn = _NP_FUNCS.get(name) or _NP_FUNCS.get(name[:-1])  # "powf" -> "pow"
        if fn is None:
            raise NotImplementedError(f"{symbol} has no NumPy stand-in under the interpreter")
        np_t = interp._get_np_dtype(ret)
        with np.errstate(all="ignore"):
            data = fn(*(np.asarray(a.data).astype(np_t, copy=False) for a in args))
        return interp.TensorHandle(np.asarray(data, dtype=np_t), ret.scalar)

    interp.interpreter_builder.create_extern_elementwise = extern
    # The interpreter binds its builder only into triton.language itself; bind it into the
    # libdevice module too (for the life of the process, which is an interpreter-only one).
    interp._patch_builtin(libdevice, interp.interpreter_builder, interp._LangPatchScope())

    # Triton 3.6's interpreter turns a runtime int used as a loop bound into a Python int with
    # int() of a 1-element array, which NumPy >= 2.4 rejects (triton-lang/triton#9171, fixed
    # upstream by #9172 after 3.6.0). Apply the same fix: squeeze to 0-d first.
    patch_tensor = interp._patch_lang_tensor
    if not getattr(patch_tensor, "_pygpukit_fixed", False):

        def fixed(tensor: Any, scope: Any) -> None:
            patch_tensor(tensor, scope)
            scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))

        fixed._pygpukit_fixed = True  # type: ignore[attr-defined]
        interp._patch_lang_tensor = fixed

    # tl.dot under the interpreter is np.matmul in the accumulator's dtype, and a float32
    # matmul's summation order depends on OpenBLAS's kernel for the shape (and on the CPU:
    # DYNAMIC_ARCH picks per model), so a row's bits would depend on how many rows share the
    # tile. The kernels' batch-invariance tests need a row's result to depend on the row alone,
    # as on the GPU: float dots are summed in float64 and rounded once to the accumulator dtype.
    dot = interp.InterpreterBuilder.create_dot
    if not getattr(dot, "_pygpukit_fixed", False):

        def row_exact_dot(self: Any, a: Any, b: Any, d: Any, prec: Any, imprecise: Any) -> Any:
            acc = d.data.dtype
            if acc.kind != "f" or acc == np.float64:
                return dot(self, a, b, d, prec, imprecise)
            f64 = dot(self, _f64(a), _f64(b), _f64(d), prec, imprecise)
            return interp.TensorHandle(f64.data.astype(acc), d.dtype.scalar)

        def _f64(h: Any) -> Any:
            if h.dtype.primitive_bitwidth == 8:  # float8 operands: the builder converts them
                return h
            return interp.TensorHandle(h.data.astype(np.float64), tl.float64)

        row_exact_dot._pygpukit_fixed = True  # type: ignore[attr-defined]
        interp.InterpreterBuilder.create_dot = row_exact_dot


if triton.knobs.runtime.interpret:  # the same switch that makes @triton.jit interpret
    _install_interpreter_externs()


# ----- kernel-side helpers --------------------------------------------------------------------


@triton.jit
def scalar_value(hi, lo, CT: tl.constexpr):
    """Rebuild a scalar from ``scalar_bits`` halves, as compute dtype CT."""
    bits = (hi.to(tl.int64) << 32) | (lo.to(tl.int64) & 0xFFFFFFFF)
    if CT == tl.float64:
        v = bits.to(tl.float64, bitcast=True)
    elif CT == tl.float32:
        v = lo.to(tl.float32, bitcast=True)
    else:
        v = bits.to(CT)
    return v


@triton.jit
def rsqrt_rn(v):
    """1 / sqrt(v): sqrt.rn for float32 (tl.sqrt is the approximate instruction), the IEEE
    float64 sqrt otherwise."""
    if v.dtype == tl.float32:
        r = 1.0 / tl.sqrt_rn(v)
    else:
        r = 1.0 / tl.sqrt(v)
    return r


@triton.jit
def nd_offsets(rows, cols, D1, D2, D3, S0, S1, S2, S3, S4):
    """int64 offsets [len(rows), len(cols)] of a tile: cols run along the inner dim (stride S0),
    rows decompose over outer dims D1, D2, D3 (innermost first) and the rest (stride S4)."""
    r = rows
    i1 = r % D1
    r = r // D1
    i2 = r % D2
    r = r // D2
    i3 = r % D3
    i4 = r // D3
    ro = i1.to(tl.int64) * S1 + i2.to(tl.int64) * S2 + i3.to(tl.int64) * S3 + i4.to(tl.int64) * S4
    return ro[:, None] + cols.to(tl.int64)[None, :] * S0


@triton.jit
def row_offset(r, D1, D2, s0, s1, s2):
    """int64 start of flat row ``r`` (see plan_rows)."""
    i2 = r % D2
    t = r // D2
    i1 = t % D1
    i0 = t // D1
    return i0.to(tl.int64) * s0 + i1.to(tl.int64) * s1 + i2.to(tl.int64) * s2


# ----- row kernels (norms, softmax) ---------------------------------------------------------------

# Longest row a norm/softmax program holds in registers in one pass; longer rows loop over
# chunks of CHUNK (two or three passes over the row, the re-reads mostly hitting L2).
SINGLE_MAX = 16384
CHUNK = 4096


def row_cfg(n: int, m: int) -> tuple[int, int, int, bool]:
    """(BLOCK_M, BLOCK_N, num_warps, single_pass) for a row kernel over [m, n].

    One row per program with BLOCK_N = next_pow2(n), the whole row in registers (a single read
    and a single write per element, the design that reaches HBM bandwidth for norms/softmax).
    num_warps scales with the row so each thread holds 16-32 elements. Measured on an H200 at
    16384x8192 bf16 (GB/s for 4/8/16/32 warps): rmsnorm 4012/4039/4023/3007, layernorm
    3527/4064/3702/2947, softmax 4081/4063/4145/2911; 8 warps is the best overall at 8192
    (about 95% of the 4246 GB/s copy rate), 32 warps is always worse. Rows of 512 or fewer are
    packed several to a program (up to 2048 elements a tile) so short rows do not leave most
    lanes idle; under the deterministic mode always 2048 // BLOCK_N of them, so the tile's
    layout (and a row's reduction order) does not depend on the number of rows.
    """
    bn = next_pow2(n)
    if bn > SINGLE_MAX:
        return 1, CHUNK, 8, False
    if bn <= 512:
        per = 2048 // bn
        return (per if determinism._on[0] else min(next_pow2(m), per)), bn, 4, True
    warps = 4 if bn <= 2048 else (8 if bn <= 8192 else 16)
    return 1, bn, warps, True


@triton.jit
def pad_index(p, n, MODE: tl.constexpr):
    """(source index, valid) of position p of a signal of n samples padded as np.pad's MODE
    (_support.fft.PAD_MODES's numbers, shared with the native twin: 1 constant: valid only
    inside; 2 reflect about the edge sample, 3 symmetric about the edge, 4 edge: the end sample
    repeated). One reflection: the caller keeps the padding
    shorter than the signal (n > pad for reflect, n >= pad for symmetric)."""
    if MODE == 2:
        q = tl.where(p < 0, -p, p)
        q = tl.where(q >= n, 2 * (n - 1) - q, q)
    elif MODE == 3:
        q = tl.where(p < 0, -p - 1, p)
        q = tl.where(q >= n, 2 * n - 1 - q, q)
    elif MODE == 4:
        q = tl.minimum(tl.maximum(p, 0), n - 1)
    else:
        q = p
    return q, (q >= 0) & (q < n)
