"""Shared pieces of the Triton kernels: dtype rules, scalar passing, layout plans, index helpers.

Host side (plain Python, on every launcher's hot path, so cheap and cached where it can be):
- ``compute_tl`` / ``float_result``: the dtype arithmetic runs in, mirroring
  pygpukit/backends/cpu/_common.py (float64 -> float64, other floats -> float32, integers keep
  their type; bool arithmetic runs in int32 and is turned back into bool by ``!= 0``).
- ``scalar_bits``: a Python/NumPy scalar as two int32 halves of its bit pattern in the compute
  dtype. Triton passes a Python float as fp32, which would round a float64 operand; the bits
  travel exactly and the kernel rebuilds the value with ``scalar_value``. Kernels mark the two
  halves ``do_not_specialize`` so every value shares one compiled kernel.
- ``plan_nd`` / ``plan_rows``: collapse dims that are jointly contiguous in every operand
  (pygpukit._layout.merge_dims) so kernels see at most a few dims with div/mod index math.
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

from pygpukit import _layout, runtime
from pygpukit.array import GPUArray
from pygpukit.creation import empty
from pygpukit.dtypes import DataType, as_dtype

__all__ = [
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
    "scalar_bits",
    "scalar_value",
]

# Outer dims the N-d elementwise kernels decompose (plus the innermost one); more are split on
# the host (rare: it needs 6+ dims that no two neighbours of can be merged).
MAX_OUTER = 4
# Leading dims of row kernels (norms, softmax, rope); more -> a contiguous copy first.
MAX_LEAD = 3

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
# Compute dtype per result dtype (the NumPy backend's compute_dtype, bool -> int32).
_CT = {
    "float64": tl.float64,
    "float32": tl.float32,
    "float16": tl.float32,
    "bfloat16": tl.float32,
    "float8_e4m3fn": tl.float32,
    "float8_e5m2": tl.float32,
    "int64": tl.int64,
    "int32": tl.int32,
    "int16": tl.int16,
    "int8": tl.int8,
    "uint8": tl.uint8,
    "bool": tl.int32,
}


def as_dt(dtype: Any) -> DataType:
    """A pygpukit DataType from a DataType, NumPy dtype or name (a dict lookup when cached)."""
    return dtype if isinstance(dtype, DataType) else as_dtype(dtype)


def tl_dtype(dt: DataType) -> Any:
    return _TL[dt.name]


def compute_tl(dt: DataType) -> Any:
    """Triton dtype the arithmetic for a result of ``dt`` runs in."""
    return _CT[dt.name]


def float_result(dt: DataType) -> DataType:
    """Floats keep their dtype; integers and bool give float32 (torch's rule, as the backend)."""
    return dt if dt.is_floating else as_dtype("float32")


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
    """``out`` itself, or a fresh contiguous array on ``like``'s device."""
    if out is not None:
        return out
    return empty(shape, dt, like.device)


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


def plan_nd(shape: tuple[int, ...], strides: tuple[tuple[int, ...], ...]) -> list[tuple[int, ...]]:
    """merge_dims rows ``(n, stride_0, stride_1, ...)`` outermost first; at least one row."""
    rows = _layout.merge_dims(shape, *strides)
    return rows or [(1,) + (0,) * len(strides)]


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


def plan_rows(
    lead: tuple[int, ...], strides: tuple[tuple[int, ...], ...]
) -> tuple[list[int], list[list[int]]] | None:
    """Row addressing for a [*lead, N] operand set: ([R, D1, D2], per-operand [s0, s1, s2]).

    Flat row r decomposes as i2 = r % D2, i1 = (r // D2) % D1, i0 = r // (D1 * D2); operand k's
    row starts at i0*s0 + i1*s1 + i2*s2. None when the lead dims do not collapse to MAX_LEAD.
    """
    if len(lead) == 1:  # the hot case: [M, N]
        return [lead[0], 1, 1], [[s[0], 0, 0] for s in strides]
    rows = _layout.merge_dims(lead, *strides)
    if len(rows) > MAX_LEAD:
        return None
    rows = [(1,) + (0,) * len(strides)] * (MAX_LEAD - len(rows)) + rows
    n = 1
    for r in rows:
        n *= r[0]
    return [n, rows[1][0], rows[2][0]], [[r[k + 1] for r in rows] for k in range(len(strides))]


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
    lanes idle.
    """
    bn = next_pow2(n)
    if bn > SINGLE_MAX:
        return 1, CHUNK, 8, False
    if bn <= 512:
        return min(next_pow2(m), 2048 // bn), bn, 4, True
    warps = 4 if bn <= 2048 else (8 if bn <= 8192 else 16)
    return 1, bn, warps, True


def row_view(x: GPUArray, *others: GPUArray | None) -> tuple[list[int], list[list[int]]] | None:
    """plan_rows over the leading dims of x and of the same-shaped operands in ``others``
    (None entries get zero strides); the last-dim strides are appended to each stride list."""
    if x.ndim == 2:  # the hot case, without the general planner
        return [x._shape[0], 1, 1], [
            [0, 0, 0, 0] if o is None else [o._estrides[0], 0, 0, o._estrides[1]]
            for o in (x, *others)
        ]
    lead = x.shape[:-1]
    ops = [o for o in (x, *others) if o is not None]
    plan = plan_rows(lead or (1,), tuple(o._estrides[:-1] or (0,) for o in ops))
    if plan is None:
        return None
    sizes, st = plan
    res = []
    k = 0
    for o in (x, *others):
        if o is None:
            res.append([0, 0, 0, 0])
        else:
            res.append([*st[k], o._estrides[-1] if o.ndim else 1])
            k += 1
    return sizes, res


_contig: dict[tuple[int, ...], tuple[int, ...]] = {}


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """C-contiguous element strides of ``shape`` (cached: launchers compare against them)."""
    st = _contig.get(shape)
    if st is None:
        st = _layout.contiguous_strides(shape) if shape else ()
        if len(_contig) > 4096:
            _contig.clear()
        _contig[shape] = st
    return st
