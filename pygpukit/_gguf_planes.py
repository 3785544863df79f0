"""GGUF blocks regrouped by field ("planes"), the layout the GGUF kernels read.

A GGUF row is blocks back to back, each block its scales then its quants (q4_0: d | 16 bytes of
nibbles; 18 bytes). The blocks' sizes (18, 22, 34, 210 bytes) leave the quants only 2-byte
aligned, so a kernel reading them in place issues byte loads: on an H100 that measured 2-12% of
the copy bandwidth. Regrouping each row into planes (all quant bytes, then the high bits, then
the scales) keeps every byte and the row size, and makes the quant plane contiguous (16-byte
aligned when the row's bytes are a multiple of 16, e.g. K % 256 == 0 for q4_0/q8_0, K % 2048 for
q6_k), so a program loads it up to 16 bytes a lane.

The kernels work in groups of 32 values. Group g holds 16 bytes of the quant plane; for 4-bit
quants the low nibble of byte t holds value ``lo(g) + t`` and the high nibble ``lo(g) + span +
t`` (GGUF's own nibble order, so the quant plane is the blocks' quant bytes unchanged):

======  ======================  ====  ============================================
format  lo(g)                   span  planes per row (bytes for K values)
======  ======================  ====  ============================================
q8_0    32 g                    16    qs int8 K | d f16 K/16
q4_0    32 g                    16    qs K/2 | d K/16
q4_1    32 g                    16    qs K/2 | d K/16 | m K/16
q5_0    32 g                    16    qs K/2 | qh K/8 | d K/16
q5_1    32 g                    16    qs K/2 | qh K/8 | d K/16 | m K/16
q4_k    64 (g//2) + 16 (g%2)    32    qs K/2 | d K/128 | dmin K/128 | scales 12K/256
q5_k    64 (g//2) + 16 (g%2)    32    qs K/2 | qh K/8 | d | dmin | scales
q6_k    128 (g//4) + 16 (g%4)   64    ql K/2 | qh K/4 | d K/128 | scales int8 K/16
======  ======================  ====  ============================================

(q8_0's group g is bytes 32 g .. 32 g + 31 of its int8 plane: the first 16 values are "lo", the next
16 "hi".) q2_k and q3_k hold 2-bit quants, four values a byte: their group g is 16 bytes too but 64
values, bits 2s..2s+1 of byte t being value 128 (g//2) + 32 s + 16 (g%2) + t (GGUF's order, so again
the quant plane is the blocks' bytes): q2_k planes qs K/4 | d K/128 | dmin K/128 | scales K/16 (a
4-bit scale and a 4-bit min per 16 values); q3_k qs K/4 | hmask K/8 (bit j of byte l: the third bit
of value 32 j + l of the block, kept as stored) | d K/128 | scales 12 K/256 (6-bit, packed as in the
block). High bits are regrouped per group too: q5_* keep 4 bytes a group (a little-endian u32 whose
bit t is the fifth bit of lo value t and bit 16 + t of hi value t; for q5_0/q5_1 that is the block's
own qh word), q6_k 8 bytes a group (two u32: 2 bits a value, lo values then hi values). Scales keep
their GGUF encoding (q4_k/q5_k's 12-byte 6-bit packing, q6_k's int8 per 16 values).
``to_planes`` and ``to_blocks`` convert whole rows on the host, exactly.
"""

from __future__ import annotations

import numpy as np

__all__ = ["BLOCKS", "half_fields", "offsets", "to_planes", "to_blocks"]

# (values a block, bytes a block), as gguf.GGML_QUANT_SIZES
BLOCKS = {
    "q8_0": (32, 34),
    "q4_0": (32, 18),
    "q4_1": (32, 20),
    "q5_0": (32, 22),
    "q5_1": (32, 24),
    "q4_k": (256, 144),
    "q5_k": (256, 176),
    "q6_k": (256, 210),
    "q2_k": (256, 84),
    "q3_k": (256, 110),
}

# Each block's fields: (name, first byte, bytes), in block order (gguf.quants' dequantize_blocks).
_FIELDS = {
    "q8_0": (("d", 0, 2), ("qs", 2, 32)),
    "q4_0": (("d", 0, 2), ("qs", 2, 16)),
    "q4_1": (("d", 0, 2), ("m", 2, 2), ("qs", 4, 16)),
    "q5_0": (("d", 0, 2), ("qh", 2, 4), ("qs", 6, 16)),
    "q5_1": (("d", 0, 2), ("m", 2, 2), ("qh", 4, 4), ("qs", 8, 16)),
    "q4_k": (("d", 0, 2), ("m", 2, 2), ("sc", 4, 12), ("qs", 16, 128)),
    "q5_k": (("d", 0, 2), ("m", 2, 2), ("sc", 4, 12), ("qh", 16, 32), ("qs", 48, 128)),
    "q6_k": (("qs", 0, 128), ("qh", 128, 64), ("sc", 192, 16), ("d", 208, 2)),
    "q2_k": (("sc", 0, 16), ("qs", 16, 64), ("d", 80, 2), ("m", 82, 2)),
    "q3_k": (("qh", 0, 32), ("qs", 32, 64), ("sc", 96, 12), ("d", 108, 2)),
}
# Plane order in a row (names absent from a format are skipped).
_ORDER = ("qs", "qh", "d", "m", "sc")


def half_fields(fmt: str) -> tuple[int, ...]:
    """Byte offsets of a block's float16 fields (d, and m/dmin where present): the bytes that
    random test blocks must fill with finite values."""
    return tuple(start for name, start, _ in _FIELDS[fmt] if name in ("d", "m"))


def offsets(fmt: str, k: int) -> dict[str, int]:
    """Byte offset of each plane in a row of k values, plus "row" (the row's bytes)."""
    qk, _ = BLOCKS[fmt]
    sizes = {name: size for name, _, size in _FIELDS[fmt]}
    out, pos = {}, 0
    for name in _ORDER:
        if name in sizes:
            out[name] = pos
            pos += sizes[name] * (k // qk)
    out["row"] = pos
    return out


def _fields(fmt: str, raw: np.ndarray) -> tuple[dict[str, np.ndarray], int, int]:
    bb = BLOCKS[fmt][1]
    n = raw.shape[0]
    nb = raw.shape[1] // bb
    blocks = np.ascontiguousarray(raw, dtype=np.uint8).reshape(n, nb, bb)
    return {name: blocks[:, :, s : s + z] for name, s, z in _FIELDS[fmt]}, n, nb


def _q5k_groups(qh: np.ndarray) -> np.ndarray:
    """q5_k's qh [n, nb, 32] (bit j of byte l: value 32 j + l) as 8 groups of u32 a block."""
    bits = (qh[:, :, None, :] >> np.arange(8, dtype=np.uint8)[None, None, :, None]) & 1
    # bits[n, b, j, l]: sub-block j, value l. Group g = 2c + r: lo = sub-block 2c, l = 16r + t;
    # hi = sub-block 2c + 1, same l.
    b = bits.reshape(*qh.shape[:2], 4, 2, 2, 16)  # [n, b, c, lo/hi, r, t]
    word = b.transpose(0, 1, 2, 4, 3, 5).reshape(*qh.shape[:2], 8, 32)  # [.., g, hi*16 + t]
    return _pack_bits(word, 1)


def _q6k_groups(qh: np.ndarray) -> np.ndarray:
    """q6_k's qh [n, nb, 64] (bits 2s of byte 32 h + l: value 128 h + 32 s + l) as 8 groups of
    two u32 a block."""
    two = (qh[:, :, None, :] >> (2 * np.arange(4, dtype=np.uint8))[None, None, :, None]) & 3
    v = two.reshape(*qh.shape[:2], 4, 2, 32).transpose(0, 1, 3, 2, 4)  # [n, b, h, s, l]
    v = v.reshape(*qh.shape[:2], 2, 128)  # [n, b, h, value within the half]
    # Group g = 4 h + r: lo values 16 r + t, hi values 64 + 16 r + t of half h.
    lo = v[:, :, :, :64].reshape(*qh.shape[:2], 2, 4, 16)
    hi = v[:, :, :, 64:].reshape(*qh.shape[:2], 2, 4, 16)
    word = np.concatenate([lo, hi], axis=-1).reshape(*qh.shape[:2], 8, 32)
    return _pack_bits(word, 2)


def _pack_bits(vals: np.ndarray, width: int) -> np.ndarray:
    """[.., 32] values of ``width`` bits packed little-endian into 4 * width bytes."""
    per = 8 // width
    v = vals.reshape(*vals.shape[:-1], 4 * width, per).astype(np.uint8)
    shifts = (width * np.arange(per, dtype=np.uint8)).astype(np.uint8)
    return np.bitwise_or.reduce(v << shifts, axis=-1).astype(np.uint8)


def _unpack_bits(packed: np.ndarray, width: int) -> np.ndarray:
    per = 8 // width
    shifts = (width * np.arange(per, dtype=np.uint8)).astype(np.uint8)
    v = (packed[..., None] >> shifts) & ((1 << width) - 1)
    return v.reshape(*packed.shape[:-1], 32)


def to_planes(fmt: str, raw: np.ndarray) -> np.ndarray:
    """GGUF rows uint8 [n, row bytes] -> planes uint8 [n, row bytes]."""
    f, n, nb = _fields(fmt, raw)
    if fmt == "q5_k":
        f["qh"] = _q5k_groups(f["qh"]).reshape(n, nb, 32)
    elif fmt == "q6_k":
        f["qh"] = _q6k_groups(f["qh"]).reshape(n, nb, 64)
    parts = [f[name].reshape(n, nb * f[name].shape[-1]) for name in _ORDER if name in f]
    return np.ascontiguousarray(np.concatenate(parts, axis=1))


def to_blocks(fmt: str, planes: np.ndarray) -> np.ndarray:
    """The inverse of to_planes."""
    qk, bb = BLOCKS[fmt]
    p = np.ascontiguousarray(planes, dtype=np.uint8)
    n = p.shape[0]
    nb = p.shape[1] // bb
    off = offsets(fmt, nb * qk)
    out = np.empty((n, nb, bb), dtype=np.uint8)
    for name, s, z in _FIELDS[fmt]:
        vals = p[:, off[name] : off[name] + z * nb].reshape(n, nb, z)
        if name == "qh" and fmt == "q5_k":
            bits = _unpack_bits(vals.reshape(n, nb, 8, 4), 1)  # [n, b, g, hi*16 + t]
            b = bits.reshape(n, nb, 4, 2, 2, 16).transpose(0, 1, 2, 4, 3, 5)  # [.., c, lh, r, t]
            b = b.reshape(n, nb, 8, 32)  # [n, b, sub-block j, l]
            vals = np.bitwise_or.reduce(
                b << np.arange(8, dtype=np.uint8)[None, None, :, None], axis=2
            ).astype(np.uint8)
        elif name == "qh" and fmt == "q6_k":
            two = _unpack_bits(vals.reshape(n, nb, 8, 8), 2)  # [n, b, g, lo16 | hi16]
            two = two.reshape(n, nb, 2, 4, 2, 16)  # [n, b, h, r, lo/hi, t]
            v = two.transpose(0, 1, 2, 4, 3, 5).reshape(n, nb, 2, 128)  # value in the half
            v = v.reshape(n, nb, 2, 4, 32)  # [n, b, h, s, l]
            vals = (
                np.bitwise_or.reduce(
                    v << (2 * np.arange(4, dtype=np.uint8))[None, None, None, :, None], axis=3
                )
                .astype(np.uint8)
                .reshape(n, nb, 64)
            )
        out[:, :, s : s + z] = vals
    return out.reshape(n, nb * bb)
