"""Rotary position embedding (RoFormer): neox and gptj pairings, partial rotary_dim.

Numerics of pygpukit/backends/cpu/rope.py: (a, b) -> (a cos - b sin, b cos + a sin) in float32
(float64 for float64 x), one rounding to x's dtype at the store; dims rotary_dim..D-1 pass
through. Inside the compute type the rounding is pinned (rotate_pair): each output rounds one
product and fuses the other into an FMA, (fma(a, cos, -(b sin)), fma(b, cos, a sin)), so every
kernel that rotates pairs (this one, kv_write's cache write with its q rotation, the one-launch
qkv write, decode attention's append path) stores the same bits whatever the compiler's
instruction schedule. The NumPy reference, and the native twin with it, round both products:
the compute-type results here may differ from theirs by that one product's rounding (half an
ulp of a c or b c), which the store's rounding to bf16/fp16 mostly hides.
x is token-major [..., S, H, D]; cos/sin are [max_pos, rotary_dim // 2] tables (any float dtype,
any strides); positions is an integer device array broadcastable to x.shape[:-2], or None for
arange(S) along the S axis. No host sync: a position outside [0, max_pos) is not an IndexError as
in the reference but turns that token's rotated dims into NaN (a visible, never out-of-bounds
result).

Design: one program per token and block of heads, a [BLOCK_H, BLOCK_HALF] tile per half, so the
token's cos/sin row is loaded once and shared by all its heads; for T=4096, H=32, D=128 that is
4096 programs moving 16 KiB each. neox reads the two contiguous halves of each head; gptj reads
each head's rotated dims as one contiguous row and de-interleaves the pairs in registers
(tl.reshape + tl.split, tl.join on the way out). x is loaded before the position, so its loads
are in flight while the dependent position -> cos/sin chain resolves.

Measured on an H200 (bf16, x [T, 32, 128], full rotary, device time): T=4096 takes 19.8 us
(3385 GB/s of x in + out, 80% of the 1 GiB copy rate; a plain copy of the same bytes takes
18.5 us, so the kernel is within 7% of it, the rest being the cos/sin rows and the position ->
table dependency); T=32768 runs at 3917 GB/s (92%). neox and gptj are equal. Two to eight
tokens per program, 2-16 warps and 8-32 heads per program were measured and are no faster.
"""

# Triton kernel and @triton.jit helper bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

import triton
import triton.language as tl

from pygpukit.backends.triton_kernels._common import (
    GPUArray,
    cdiv,
    new_out,
    next_pow2,
    plan_rows,
    row_offset,
)
from pygpukit.backends.triton_kernels.copy import contiguous, copy
from pygpukit.backends.triton_kernels.driver import launch

__all__ = ["rope", "rope_cfg"]


@triton.jit
def rotate_pair(a, b, c, s):
    """The pair (a, b) rotated by the angle of (c, s), in the operands' type:
    (a c - b s, b c + a s) with the rounding pinned, each output one product rounded and the
    other fused, round(a c - round(b s)) and round(b c + round(a s)). A plain a * c - b * s
    compiles to mul.f32 / sub.f32, which leave the backend free to pick the product it fuses
    into an FMA, and that pick follows the instruction schedule (reordering the cache write's
    loads changed it and the rotated q lost gp.rope's bits). With explicit FMAs every kernel
    compiling this expression rounds alike. (Triton's interpreter computes tl.fma as x * y + z
    in NumPy, two roundings: the CPU tests see the NumPy reference's arithmetic.) The product
    is negated as (b * s) * -1.0, exact: Triton's unary minus is 0 - x, which the compiler may
    contract into fma(-b, s, 0), an FFMA instead of the free negation, and +0 for a -0 product."""
    return tl.fma(a, c, (b * s) * -1.0), tl.fma(b, c, a * s)


@triton.jit
def _rope_kernel(
    X, COS, SIN, P, Y, H, HALF, D, S, max_pos, D1, D2,
    sx0, sx1, sx2, sxh, sxd, sy0, sy1, sy2, syh, syd, sp0, sp1, sp2,
    scr, scc, ssr, ssc,
    HAS_POS: tl.constexpr, GPTJ: tl.constexpr, TAIL: tl.constexpr, CT: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr, BLOCK_T: tl.constexpr,
):  # fmt: skip
    tok = tl.program_id(0)
    hs = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    xo = row_offset(tok, D1, D2, sx0, sx1, sx2)
    yo = row_offset(tok, D1, D2, sy0, sy1, sy2)
    i = tl.arange(0, BLOCK_HALF)
    im = i < HALF
    hm = (hs < H)[:, None]
    xh = X + xo + hs[:, None].to(tl.int64) * sxh
    yh = Y + yo + hs[:, None].to(tl.int64) * syh
    # x first: its loads do not depend on the position, so they are in flight while the
    # dependent chain position -> cos/sin row is resolved (loads issue in program order).
    if GPTJ:
        # The interleaved pairs as one contiguous [BLOCK_H, 2*BLOCK_HALF] row, de-interleaved
        # in registers (stride-2 loads would waste half of every sector).
        j = tl.arange(0, 2 * BLOCK_HALF)[None, :]
        jm = hm & (j < 2 * HALF)
        v = tl.load(xh + j * sxd, mask=jm, other=0.0).to(CT)
        a, b = tl.split(tl.reshape(v, [BLOCK_H, BLOCK_HALF, 2]))
    else:
        mask = hm & im[None, :]
        ia = i[None, :]
        ib = ia + HALF
        a = tl.load(xh + ia * sxd, mask=mask, other=0.0).to(CT)
        b = tl.load(xh + ib * sxd, mask=mask, other=0.0).to(CT)
    if HAS_POS:
        pos = tl.load(P + row_offset(tok, D1, D2, sp0, sp1, sp2)).to(tl.int64)
    else:
        pos = (tok % S).to(tl.int64)
    valid = (pos >= 0) & (pos < max_pos)
    pos = tl.where(valid, pos, 0)
    c = tl.load(COS + pos * scr + i * scc, mask=im, other=0.0).to(CT)
    s = tl.load(SIN + pos * ssr + i * ssc, mask=im, other=0.0).to(CT)
    c = tl.where(valid, c, float("nan"))[None, :]
    s = tl.where(valid, s, float("nan"))[None, :]
    ra, rb = rotate_pair(a, b, c, s)
    if GPTJ:
        r = tl.reshape(tl.join(ra, rb), [BLOCK_H, 2 * BLOCK_HALF])
        tl.store(yh + j * syd, r.to(Y.dtype.element_ty), mask=jm)
    else:
        tl.store(yh + ia * syd, ra.to(Y.dtype.element_ty), mask=mask)
        tl.store(yh + ib * syd, rb.to(Y.dtype.element_ty), mask=mask)
    if TAIL:  # partial rotary: dims 2*HALF..D-1 pass through
        for t0 in range(2 * HALF, D, BLOCK_T):
            t = (t0 + tl.arange(0, BLOCK_T))[None, :]
            tm = hm & (t < D)
            tl.store(yh + t * syd, tl.load(xh + t * sxd, mask=tm), mask=tm)


def rope_cfg(h: int, half: int) -> tuple[int, int, int]:
    """(BLOCK_H, BLOCK_HALF, num_warps): all heads of a token in one program while the tile
    [BLOCK_H, BLOCK_HALF] (one per half) stays within 2048 elements, 16 values per thread per
    half at 4 warps; for 32 heads x 64 pairs that is the whole token (16 KiB of bf16 in and out)
    and cos/sin are read once per token. Measured on an H200 (T=4096, H=32, D=128 bf16, device
    time): BLOCK_H 8/16/32 with 2-8 warps all take 19.7-20.4 us; 16 warps or BLOCK_H=4 are
    slower (22-23 us)."""
    bhalf = next_pow2(half)
    bh = min(next_pow2(h), max(1, 2048 // bhalf))
    return bh, bhalf, 4


def rope(
    x: GPUArray,
    cos: GPUArray,
    sin: GPUArray,
    positions: GPUArray | None = None,
    *,
    style: str = "neox",
    rotary_dim: int | None = None,
    out: GPUArray | None = None,
) -> GPUArray:
    """x rotated by the table rows at ``positions``; out may be x itself (in place)."""
    if style not in ("neox", "gptj"):
        raise ValueError(f"rope: style must be 'neox' or 'gptj', got {style!r}")
    d = x.shape[-1]
    r = d if rotary_dim is None else int(rotary_dim)
    half = r // 2
    y = new_out(out, x.shape, x.dtype, x)
    lead = x.shape[:-2]
    h = x.shape[-2]
    ntok = 1
    for n in lead:
        ntok *= n
    if ntok == 0 or h == 0 or d == 0:
        return y
    in_place = y is x or (y.data_ptr() == x.data_ptr() and y.element_strides == x.element_strides)
    pos = positions.broadcast_to(lead) if positions is not None else None
    ops = [x, y] + ([pos] if pos is not None else [])
    plan = plan_rows(lead, tuple(o.element_strides[: len(lead)] for o in ops))
    if plan is None:  # token dims that do not collapse (rare): compact copies of the inputs
        x = contiguous(x)
        pos = contiguous(pos) if pos is not None else None
        if not y.is_contiguous():
            return copy(rope(x, cos, sin, pos, style=style, rotary_dim=r), out=y)
        return rope(x, cos, sin, pos, style=style, rotary_dim=r, out=y)
    sizes, st = plan
    sp = st[2] if pos is not None else [0, 0, 0]
    bh, bhalf, warps = rope_cfg(h, half)
    ct = tl.float64 if x.dtype.name == "float64" else tl.float32
    xs, ys = x.element_strides, y.element_strides
    launch(
        _rope_kernel, (ntok, cdiv(h, bh)),
        x, cos, sin, pos if pos is not None else x, y, h, half, d,
        x.shape[-3], cos.shape[0], sizes[1], sizes[2],
        *st[0], xs[-2], xs[-1], *st[1], ys[-2], ys[-1], *sp,
        *cos.element_strides, *sin.element_strides,
        HAS_POS=pos is not None, GPTJ=style == "gptj", TAIL=(r < d) and not in_place,
        CT=ct, BLOCK_H=bh, BLOCK_HALF=bhalf, BLOCK_T=min(next_pow2(d - r), 256) if r < d else 1,
        num_warps=warps,
    )  # fmt: skip
    return y
