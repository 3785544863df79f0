"""The GGUF formats' values, decoded in Triton from the planes of pygpukit/_gguf_planes.py (the
file's bytes regrouped by field, the same size), shared by the kernels of gguf.py.

A group is 32 values, the low and high nibbles of 16 quant bytes ("lo" and "hi", 16 positions
each; q2_k / q3_k: four parts of 16). ``affine`` returns a group as exact quants and per
half-group scales and offsets, ``quarter`` a q2_k / q3_k part as float32 values. Each is a load
step and a decode step: ``fields`` / ``quarter_fields`` only load a tile's bytes (a tuple of
uint8 tensors), ``affine_of`` / ``values_of`` (a group's lo and hi values) / ``quarter_of``
decode them, so a kernel can load the next K tile while it decodes this one. Shapes
broadcast: rows, groups and positions may come in any axis order ([BN, G, 16], [G, BN, 16],
[BN, G, 2, 8]).

Each format's arithmetic follows gguf.quants' dequantize_blocks operation by operation
(q4_1: d * q + m as two roundings; q4_k: (d * sc) * q - dmin * m), so a kernel compiled with FMA
contraction off gives the ``gguf`` package's bits. Quants become floats through 2^23's exponent
bits (``_exact_f32``: a LOP3 and an FADD, exact), not int-to-float conversions, which run at a
quarter of the FMA rate.
"""

# Triton kernel and @triton.jit helper bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

import triton
import triton.language as tl

from pygpukit._gguf_planes import offsets

__all__ = [
    "FORMAT_IDS", "affine", "affine_of", "fields", "groups_per_row", "has_offset", "part_start",
    "plane_args", "quarter", "quarter_fields", "quarter_of", "subtracts_offset", "values_of",
]  # fmt: skip

FORMAT_IDS = {
    "q8_0": 0,
    "q4_0": 1,
    "q4_1": 2,
    "q5_0": 3,
    "q5_1": 4,
    "q4_k": 5,
    "q5_k": 6,
    "q6_k": 7,
    "q2_k": 8,
    "q3_k": 9,
}


@triton.jit
def _ld(P, off, mask):
    """Bytes at offsets off (uint8; zero where masked off), not yet widened: the fields
    functions only load, so a kernel can issue a tile's loads a step before decoding it."""
    return tl.load(P + off, mask=mask, other=0)


@triton.jit
def _i32(b):
    return b.to(tl.int32)


@triton.jit
def _pair(P, off, mask):
    """The two bytes of a little-endian 16-bit field (block fields are only 2-byte aligned,
    and the interpreter takes no pointer casts, so fields load byte by byte)."""
    return _ld(P, off, mask), _ld(P, off + 1, mask)


@triton.jit
def _quad(P, off, mask):
    """The four bytes of a little-endian 32-bit word."""
    return _ld(P, off, mask), _ld(P, off + 1, mask), _ld(P, off + 2, mask), _ld(P, off + 3, mask)


@triton.jit
def _half_of(pair):
    """A _pair's float16 as float32."""
    bits = _i32(pair[0]) | (_i32(pair[1]) << 8)
    return bits.to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32)


@triton.jit
def _u32_of(quad):
    """A _quad's word (int32 bits)."""
    w = _i32(quad[0]) | (_i32(quad[1]) << 8)
    return w | (_i32(quad[2]) << 16) | (_i32(quad[3]) << 24)


@triton.jit
def _scale_min_bytes(P, base, j, mask):
    """The three bytes q4_k/q5_k's get_scale_min reads for sub-block j of the 12 at base."""
    return _ld(P, base + j % 4, mask), _ld(P, base + j + 4, mask), _ld(P, base + j, mask)


@triton.jit
def _scale_min_of(b, j):
    """(scale, min) of sub-block j from its _scale_min_bytes (j < 4 reads bytes j and j + 4;
    j >= 4 packs their top bits in)."""
    lo = _i32(b[0])
    hi = _i32(b[1])
    mid = _i32(b[2])
    sc = tl.where(j < 4, lo & 63, (hi & 15) | ((lo >> 2) & 48))
    mn = tl.where(j < 4, hi & 63, (hi >> 4) | ((mid >> 2) & 48))
    return sc.to(tl.float32), mn.to(tl.float32)


@triton.jit
def _nibbles(b):
    """The low and high nibbles of quant bytes b (int32)."""
    v = _i32(b)
    return v & 15, v >> 4


@triton.jit
def _exact_f32(q, bias: tl.constexpr):
    """q - bias as float32, exactly, for int32 q in [0, 2^23): the bits of 2^23 + q read as a
    float, minus 2^23 + bias (one LOP3 and one FADD; int-to-float conversion runs at a quarter
    of the FMA rate and was one instruction per value in the one-row product's loop)."""
    return (q | 0x4B000000).to(tl.float32, bitcast=True) - (8388608.0 + bias)


@triton.jit
def _signed8(v):
    return tl.where(v >= 128, v - 256, v)


@triton.jit
def span(FMT: tl.constexpr):
    """Distance from a group's lo values to its hi values."""
    if FMT == 5 or FMT == 6:
        return 32
    elif FMT == 7:
        return 64
    else:
        return 16


@triton.jit
def lo_start(g, FMT: tl.constexpr):
    """Index of group g's first lo value (the table of pygpukit/_gguf_planes.py)."""
    if FMT == 5 or FMT == 6:
        return 64 * (g // 2) + 16 * (g % 2)
    elif FMT == 7:
        return 128 * (g // 4) + 16 * (g % 4)
    else:
        return 32 * g


@triton.jit
def has_offset(FMT: tl.constexpr):
    """Whether the format's values are a * q +- b (q4_1, q5_1, q4_k, q5_k) rather than a * q."""
    return FMT == 2 or FMT == 4 or subtracts_offset(FMT)


@triton.jit
def subtracts_offset(FMT: tl.constexpr):
    """Whether the offset is subtracted (q4_k, q5_k: (d * sc) * q - dmin * m)."""
    return FMT == 5 or FMT == 6


@triton.jit
def fields(P, row, g, t, mask, OQH, OD, OM, OS, FMT: tl.constexpr):
    """The bytes affine decodes for groups g of the rows whose planes start at byte offsets row
    (t: the positions in a half-group; g, row and t broadcast, e.g. [1, G, 1], [BN, 1, 1] and
    [1, 1, 16]; mask as g and row), as a tuple of uint8 tensors: loads only, so a kernel can
    load the next tile's fields before it decodes this one's (affine_of). Formats 0-7 (q2_k /
    q3_k: quarter_fields)."""
    if FMT == 0:  # q8_0: int8 quants, w = q * d
        return (_ld(P, row + 32 * g + t, mask), _ld(P, row + 32 * g + 16 + t, mask),
                _pair(P, row + OD + 2 * g, mask))  # fmt: skip
    elif FMT <= 4:  # q4_0, q4_1, q5_0, q5_1: one block a group
        b = _ld(P, row + 16 * g + t, mask)
        d = _pair(P, row + OD + 2 * g, mask)
        # b stands in for the fields a format lacks (no load).
        w = _quad(P, row + OQH + 4 * g, mask) if FMT >= 3 else b
        m = _pair(P, row + OM + 2 * g, mask) if FMT == 2 or FMT == 4 else b
        return b, w, d, m
    elif FMT <= 6:  # q4_k, q5_k: lo in sub-block j, hi in j + 1 of super-block g // 8
        b = _ld(P, row + 16 * g + t, mask)
        sb = g // 8
        j = 2 * ((g // 2) % 4)
        w = _quad(P, row + OQH + 4 * g, mask) if FMT == 6 else b
        return (b, w, _scale_min_bytes(P, row + OS + 12 * sb, j, mask),
                _scale_min_bytes(P, row + OS + 12 * sb, j + 1, mask),
                _pair(P, row + OD + 2 * sb, mask), _pair(P, row + OM + 2 * sb, mask))  # fmt: skip
    else:  # q6_k: 2 high bits a value, int8 scales per 16 values
        u = g // 4
        r = g % 4
        return (_ld(P, row + 16 * g + t, mask), _quad(P, row + OQH + 8 * g, mask),
                _quad(P, row + OQH + 8 * g + 4, mask), _ld(P, row + OS + 8 * u + r, mask),
                _ld(P, row + OS + 8 * u + 4 + r, mask),
                _pair(P, row + OD + 2 * (g // 8), mask))  # fmt: skip


@triton.jit
def affine_of(f, g, t, FMT: tl.constexpr):
    """Groups g as (q_lo, q_hi, a_lo, b_lo, a_hi, b_hi) from their fields f: the value at lo
    position t is a_lo * q_lo + b_lo (q4_1, q5_1), a_lo * q_lo - b_lo (q4_k, q5_k: (d * sc) * q
    - dmin * m; subtracted, not added negated, since Triton negates as 0 - x and -0 would
    become +0) or a_lo * q_lo, gguf.quants' operations in its order. q is the quant less the
    format's bias, an exact float32; a and b are per half-group (position axes of size 1); b is
    0 where not has_offset(FMT)."""
    if FMT == 0:
        ql = _exact_f32(_i32(f[0]) ^ 128, 128)  # the byte is q + 128
        qh = _exact_f32(_i32(f[1]) ^ 128, 128)
        d = _half_of(f[2])
        return ql, qh, d, tl.zeros_like(d), d, tl.zeros_like(d)
    elif FMT <= 4:
        ql, qh = _nibbles(f[0])
        if FMT >= 3:
            w = _u32_of(f[1])
            ql = ql | (((w >> t) & 1) << 4)
            qh = qh | (((w >> (t + 16)) & 1) << 4)
        d = _half_of(f[2])
        if FMT == 1:
            return _exact_f32(ql, 8), _exact_f32(qh, 8), d, tl.zeros_like(d), d, tl.zeros_like(d)
        elif FMT == 3:
            return _exact_f32(ql, 16), _exact_f32(qh, 16), d, tl.zeros_like(d), d, tl.zeros_like(d)
        else:
            m = _half_of(f[3])
            return _exact_f32(ql, 0), _exact_f32(qh, 0), d, m, d, m
    elif FMT <= 6:
        ql, qh = _nibbles(f[0])
        if FMT == 6:
            w = _u32_of(f[1])
            ql = ql | (((w >> t) & 1) << 4)
            qh = qh | (((w >> (t + 16)) & 1) << 4)
        j = 2 * ((g // 2) % 4)
        sc_l, mn_l = _scale_min_of(f[2], j)
        sc_h, mn_h = _scale_min_of(f[3], j + 1)
        d = _half_of(f[4])
        dmin = _half_of(f[5])
        return _exact_f32(ql, 0), _exact_f32(qh, 0), d * sc_l, dmin * mn_l, d * sc_h, dmin * mn_h
    else:
        ql, qh = _nibbles(f[0])
        wl = _u32_of(f[1])
        wh = _u32_of(f[2])
        ql = ql | (((wl >> (2 * t)) & 3) << 4)
        qh = qh | (((wh >> (2 * t)) & 3) << 4)
        sc_l = _signed8(_i32(f[3])).to(tl.float32)
        sc_h = _signed8(_i32(f[4])).to(tl.float32)
        d = _half_of(f[5])
        al = d * sc_l
        return (
            _exact_f32(ql, 32),
            _exact_f32(qh, 32),
            al,
            tl.zeros_like(al),
            d * sc_h,
            tl.zeros_like(al),
        )


@triton.jit
def affine(P, row, g, t, mask, OQH, OD, OM, OS, FMT: tl.constexpr):
    """affine_of(fields(...)): groups g of the rows at row as exact quants and per half-group
    scales and offsets (see affine_of)."""
    return affine_of(fields(P, row, g, t, mask, OQH, OD, OM, OS, FMT), g, t, FMT)


@triton.jit
def values_of(f, g, t, FMT: tl.constexpr):
    """(lo, hi) float32 (g, row and t's broadcast shape): the values of groups g from their
    fields f."""
    ql, qh, al, bl, ah, bh = affine_of(f, g, t, FMT)
    if subtracts_offset(FMT):
        return al * ql - bl, ah * qh - bh
    elif has_offset(FMT):
        return al * ql + bl, ah * qh + bh
    else:
        return al * ql, ah * qh


@triton.jit
def quarter_fields(P, row, g, t, mask, OQH, OD, OM, OS, s: tl.constexpr, FMT: tl.constexpr):
    """The bytes quarter_of decodes for part s of groups g (q2_k, q3_k; see fields)."""
    sb = g // 4
    i = 8 * ((g % 4) // 2) + 2 * s + g % 2  # the 16-value sub-block: its scale byte / 6-bit scale
    q = _ld(P, row + 16 * g + t, mask)
    d = _pair(P, row + OD + 2 * sb, mask)
    if FMT == 8:
        return q, _ld(P, row + OS + 16 * sb + i, mask), d, _pair(P, row + OM + 2 * sb, mask)
    else:
        return (q, _ld(P, row + OQH + 32 * sb + 16 * (g % 2) + t, mask),
                _ld(P, row + OS + 12 * sb + i % 8, mask),
                _ld(P, row + OS + 12 * sb + 8 + i % 4, mask), d)  # fmt: skip


@triton.jit
def quarter_of(f, g, s: tl.constexpr, FMT: tl.constexpr):
    """q2_k (FMT 8) / q3_k (FMT 9): float32 values (shapes as in fields) of part s (bits
    2s..2s+1 of the group's 16 quant bytes), value 128 (g//2) + 32 s + 16 (g%2) + t of the row,
    from its quarter_fields f."""
    q = (_i32(f[0]) >> (2 * s)) & 3
    h = (g % 4) // 2  # the half of the super-block
    i = 8 * h + 2 * s + g % 2
    if FMT == 8:  # q2_k: w = (d * sc) * q - dmin * m, sc/m the nibbles of scale byte i
        b = _i32(f[1])
        d = _half_of(f[2])
        dmin = _half_of(f[3])
        return (d * (b & 15).to(tl.float32)) * q.to(tl.float32) - dmin * (b >> 4).to(tl.float32)
    else:  # q3_k: w = (d * (sc - 32)) * (q - 4 (1 - hbit)), hmask bit 4h + s of byte 16 (g%2) + t
        hb = (_i32(f[1]) >> (4 * h + s)) & 1
        lo4 = (_i32(f[2]) >> (4 * (i // 8))) & 15
        hi2 = (_i32(f[3]) >> (2 * (i // 4))) & 3
        sc = (lo4 | (hi2 << 4)) - 32
        d = _half_of(f[4])
        return (d * sc.to(tl.float32)) * (q - 4 * (1 - hb)).to(tl.float32)


@triton.jit
def quarter(P, row, g, t, mask, OQH, OD, OM, OS, s: tl.constexpr, FMT: tl.constexpr):
    """quarter_of(quarter_fields(...)): part s of groups g as float32 values."""
    return quarter_of(quarter_fields(P, row, g, t, mask, OQH, OD, OM, OS, s, FMT), g, s, FMT)


@triton.jit
def part_start(g, s: tl.constexpr, FMT: tl.constexpr):
    """Index of the first value of part s of group g (parts: lo/hi, or q2_k/q3_k's four)."""
    if FMT >= 8:
        return 128 * (g // 2) + 32 * s + 16 * (g % 2)
    else:
        return lo_start(g, FMT) + s * span(FMT)


def groups_per_row(fmt: str, k: int) -> int:
    """Groups of 16 quant bytes in a row of k values."""
    return k // 64 if fmt in ("q2_k", "q3_k") else k // 32


def plane_args(fmt: str, k: int) -> tuple[int, int, int, int]:
    off = offsets(fmt, k)
    return off.get("qh", 0), off["d"], off.get("m", 0), off.get("sc", 0)
