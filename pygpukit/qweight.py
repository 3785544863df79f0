"""Quantized weights for the decode GEMV kernels: quantize once at load, multiply every step.

``gp.quantize_weight(w, "fp8" | "int4" | "nvfp4" | "w8a8")`` turns a float weight matrix W [N, K]
(the torch.nn.Linear layout, out_features x in_features) into a ``QuantizedWeight``, and
``gp.linear_quantized(x, qw, bias)`` computes x @ dequant(W)^T + bias (pygpukit/ops/gemv.py).

Quantization (fp8, int4, nvfp4, w8a8) runs where the weight is going: routed ops
``weight_amax`` and ``quantize_weight``, Triton kernels on CUDA
(pygpukit/backends/triton_kernels/qweight.py), the NumPy reference quantizers of
pygpukit/backends/cpu/gemv.py on the CPU device; both compute in float64 and give the same bits.
A NumPy weight bound for a GPU is uploaded as it is (a bfloat16 checkpoint's 2 bytes a value)
and quantized there, with one read-back of its row maxima (the NaN / inf check, int4's scale
range, nvfp4's global scale). The GGUF formats below quantize on the host (the ``gguf``
package's reference). Formats (layouts in native/src/gemv/gemv.h):

======  ==========================  ===================================  ====================
format  data                        scales                               K
======  ==========================  ===================================  ====================
fp8     float8_e4m3fn [N, K]        float32 [N] (block 0, per output     multiple of 16
                                    channel) or [N, ceil(K/128)]
                                    (block 128)
int4    int4 [N, K] (-8..7, packed  float32/bfloat16/float16             multiple of 32
        two a byte, low nibble =    [N, ceil(K/128)] (block 128)
        even k)
nvfp4   uint8 [N, K/2] (e2m1 codes  float8_e4m3fn [N, K/16] (block 16)   multiple of 32
        two a byte, low nibble =    and one float32 global_scale
        even k)
w8a8    float8_e4m3fn [N, K]        float32 [N] (per output channel)     multiple of 16
======  ==========================  ===================================  ====================

w8a8 stores what per-channel fp8 stores; the difference is the product. fp8, int4 and nvfp4
multiply x as it is (W8A16 / W4A16: the weight dequantized in registers), while w8a8 also
quantizes x, per row (per token), to e4m3 on every call and runs the FP8 x FP8 tensor-core
product (gp.quantize_fp8 + gp.matmul_fp8, cuBLASLt): twice the tensor-core rate of a 16-bit
product for prefill, at the accuracy of 8-bit activations (BENCHMARKS.md lists each format's).

A QuantizedWeight can also be built from arrays loaded from a checkpoint in these layouts.

GGUF block formats (llama.cpp's, as a GGUF file stores them): ``q8_0``, ``q4_0``, ``q4_1``,
``q5_0``, ``q5_1`` (blocks of 32 values along K) and ``q2_k``, ``q3_k``, ``q4_k``, ``q5_k``,
``q6_k`` (super-blocks of 256). They are built from the file's rows, uint8 [N, K / block *
block_bytes] with the scales inside each block (``scales`` is None), and kept as the same bytes
regrouped by field (pygpukit/_gguf_planes.py; ``data`` holds those planes, the same size), which the
kernels of pygpukit/ops/gguf.py read in place. Dequantization gives the ``gguf`` package's values
bit for bit.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from pygpukit._gguf_planes import BLOCKS, to_blocks, to_planes
from pygpukit.array import GPUArray
from pygpukit.backends.cpu.gemv import (
    FP8_BLOCK,
    FP8_MAX,
    INT4_GROUP,
    INT4_MAX,
    NVFP4_BLOCK,
    dequantize_fp8_weight,
    dequantize_int4_weight,
    dequantize_nvfp4_weight,
    int4_range_error,
    nvfp4_global_scale,
    round_to,
)
from pygpukit.dtypes import DataType, as_dtype
from pygpukit.routing.dispatch import run

__all__ = ["FORMATS", "GGUF_BLOCKS", "GGUF_FORMATS", "QuantizedWeight", "quantize_weight"]

FORMATS = ("fp8", "int4", "nvfp4", "w8a8")
# GGUF block formats: (values a block, bytes a block), as gguf.GGML_QUANT_SIZES.
GGUF_BLOCKS = BLOCKS
GGUF_FORMATS = tuple(GGUF_BLOCKS)
# Formats gguf.quants can quantize to (it has no k-quant quantizer; those come from files).
_GGUF_QUANTIZERS = ("q8_0", "q4_0", "q4_1", "q5_0", "q5_1")
_K_MULTIPLE = {"fp8": 16, "int4": 32, "nvfp4": 32, "w8a8": 16}  # 16-byte rows for the GPU kernels
_INT4_SCALES = ("float32", "bfloat16", "float16")


def _dtype_name(a: Any) -> str:
    return str(a.dtype.name) if isinstance(a, GPUArray) else str(np.asarray(a).dtype)


def _desc(a: Any) -> str:
    return f"shape {tuple(a.shape)} and dtype {_dtype_name(a)}"


def _need(cond: bool, msg: str, exc: type[Exception] = ValueError) -> None:
    if not cond:
        raise exc(f"QuantizedWeight: {msg}")


class QuantizedWeight:
    """W [N, K] stored quantized: ``data`` and ``scales`` GPUArrays on one device plus
    ``format``, ``block`` (fp8: 0 per output channel or 128; int4: 128; nvfp4: 16; the GGUF
    formats: 32 or 256) and ``global_scale`` (nvfp4; 1.0 otherwise, kept as a float32 value).
    ``shape`` is (N, K).

    The constructor validates the layout (see the module docstring) and raises ValueError or
    TypeError naming the array at fault; fp8/int4/nvfp4 arrays must be contiguous. For a GGUF
    format, ``data`` is the file's rows (a GPUArray or NumPy uint8 [N, row bytes], any layout)
    and ``scales`` None; they are regrouped into planes (``self.data``, the same size) on the
    host and placed on data's device (the default device for NumPy; ``from_blocks`` takes a
    device). ``blocks()`` gives the file's rows back, so QuantizedWeight(qw.format,
    qw.blocks()) rebuilds the weight.
    """

    __slots__ = (
        "_device_arg", "block", "data", "experts", "format", "global_scale", "scales", "shape",
    )  # fmt: skip
    scales: GPUArray | None

    def __init__(
        self,
        format: str,
        data: GPUArray,
        scales: GPUArray | None = None,
        *,
        block: int | None = None,
        global_scale: float = 1.0,
    ) -> None:
        _need(
            format in FORMATS or format in GGUF_FORMATS,
            f"format must be one of {FORMATS + GGUF_FORMATS}, got {format!r}",
        )
        self.experts = 1
        if format in GGUF_FORMATS:
            self._device_arg = None
            self._init_gguf(format, data, scales, block, global_scale)
            return
        _need(scales is not None, f"{format} needs scales", TypeError)
        assert scales is not None
        for name, a in (("data", data), ("scales", scales)):
            _need(isinstance(a, GPUArray), f"{name} must be a GPUArray", TypeError)
            _need(a.is_contiguous(), f"{name} ({_desc(a)}) must be contiguous")
        _need(data.device == scales.device, f"data is on {data.device}, scales on {scales.device}")
        _need(data.ndim == 2, f"data must be 2-D [N, ...], got {_desc(data)}")
        n = data.shape[0]
        k = 2 * data.shape[1] if format == "nvfp4" else data.shape[1]
        want_dt = {"fp8": "float8_e4m3fn", "int4": "int4", "nvfp4": "uint8"}.get(
            format, "float8_e4m3fn"
        )
        _need(
            data.dtype.name == want_dt,
            f"{format} data must be {want_dt}, got {_desc(data)}",
            TypeError,
        )
        mult = _K_MULTIPLE[format]
        _need(
            k > 0 and k % mult == 0,
            f"{format} needs K (in_features) a positive multiple of {mult}, got K={k}",
        )
        if format == "fp8":
            per_row = scales.ndim == 1 or scales.shape == (n, 1)
            block = (0 if per_row else FP8_BLOCK) if block is None else block
            _need(block in (0, FP8_BLOCK), f"fp8 block must be 0 or 128, got {block!r}")
            wants = [(n,), (n, 1)] if block == 0 else [(n, -(-k // FP8_BLOCK))]
            sdt: tuple[str, ...] = ("float32",)
        elif format == "w8a8":
            block = 0 if block is None else block
            _need(block == 0, f"w8a8 weight scales are per output channel (block 0), got {block=}")
            wants, sdt = [(n,), (n, 1)], ("float32",)
        elif format == "int4":
            block = INT4_GROUP if block is None else block
            _need(block == INT4_GROUP, f"int4 groups are 128 values of K, got {block=}")
            wants, sdt = [(n, -(-k // block))], _INT4_SCALES
        else:
            block = NVFP4_BLOCK if block is None else block
            _need(block == NVFP4_BLOCK, f"nvfp4 blocks are 16 values of K, got {block=}")
            wants, sdt = [(n, k // block)], ("float8_e4m3fn",)
        _need(
            scales.dtype.name in sdt,
            f"{format} scales must be {'/'.join(sdt)}, got {_desc(scales)}",
            TypeError,
        )
        _need(
            scales.shape in wants,
            f"{format} scales (block {block}) must have shape "
            f"{' or '.join(map(str, wants))} for W [{n}, {k}], got {_desc(scales)}",
        )
        gs = float(np.float32(global_scale))
        _need(np.isfinite(gs), f"global_scale must be finite, got {global_scale!r}")
        _need(
            format == "nvfp4" or gs == 1.0,
            f"global_scale applies to nvfp4 only, got {global_scale!r}",
        )
        self.format = format
        self.data = data
        self.scales = scales
        self.block = int(block)
        self.global_scale = gs
        self.shape = (n, k)

    def _init_gguf(
        self, format: str, data: Any, scales: Any, block: int | None, global_scale: float
    ) -> None:
        qk, bb = GGUF_BLOCKS[format]
        _need(
            isinstance(data, (GPUArray, np.ndarray)),
            "data must be a GPUArray or numpy.ndarray of the file's rows",
            TypeError,
        )
        _need(scales is None, f"{format} keeps its scales inside the blocks: pass scales=None")
        _need(data.ndim == 2, f"data must be 2-D [N, row bytes], got {_desc(data)}")
        _need(
            _dtype_name(data) == "uint8",
            f"{format} data must be uint8, got {_desc(data)}",
            TypeError,
        )
        _need(
            data.shape[1] > 0 and data.shape[1] % bb == 0,
            f"{format} rows are whole blocks of {bb} bytes; got {_desc(data)}",
        )
        _need(block in (None, qk), f"{format} blocks are {qk} values, got {block=}")
        _need(global_scale == 1.0, f"global_scale applies to nvfp4 only, got {global_scale!r}")
        dev: Any = data.device if isinstance(data, GPUArray) else self._device_arg
        host = data.to_numpy() if isinstance(data, GPUArray) else data
        planes = to_planes(format, host)
        from pygpukit.creation import from_numpy

        self.format = format
        self.data = from_numpy(planes, device=dev)
        self.scales = None
        self.block = qk
        self.global_scale = 1.0
        self.shape = (data.shape[0], data.shape[1] // bb * qk)

    @classmethod
    def from_blocks(
        cls, format: str, blocks: np.ndarray, device: Any = None, *, experts: int = 1
    ) -> QuantizedWeight:
        """A GGUF-format weight from a file's rows (host uint8 [N, row bytes]), regrouped on the
        host and copied to ``device`` once (default: the default device). ``experts`` > 1: the
        rows stack that many [N / experts, K] matrices (a MoE layer's experts, gp.moe_linear)."""
        if format not in GGUF_FORMATS:
            raise ValueError(
                f"QuantizedWeight.from_blocks: format must be one of {GGUF_FORMATS}, got {format!r}"
            )
        if not isinstance(blocks, np.ndarray):
            raise TypeError(
                f"QuantizedWeight.from_blocks: blocks must be a numpy.ndarray of the file's rows, "
                f"got {type(blocks).__name__}"
            )
        try:
            experts = operator.index(experts) if not isinstance(experts, bool) else -1
        except TypeError:
            raise TypeError(
                f"QuantizedWeight.from_blocks: experts must be an int, got {experts!r}"
            ) from None
        if experts < 1:
            raise ValueError(f"QuantizedWeight.from_blocks: experts must be >= 1, got {experts}")
        if blocks.ndim == 2 and blocks.shape[0] % experts:
            raise ValueError(
                f"QuantizedWeight.from_blocks: {blocks.shape[0]} rows do not split into "
                f"{experts} experts"
            )
        qw = cls.__new__(cls)
        qw._device_arg = device
        qw.experts = experts
        qw._init_gguf(format, blocks, None, None, 1.0)
        return qw

    @property
    def is_gguf(self) -> bool:
        """Whether the format is a GGUF block format (scales inside the blocks)."""
        return self.format in GGUF_FORMATS

    def blocks(self) -> np.ndarray:
        """A GGUF-format weight's rows as the file stores them (host uint8 [N, row bytes])."""
        if not self.is_gguf:
            raise TypeError(f"QuantizedWeight.blocks: {self.format} is not a GGUF format")
        return to_blocks(self.format, self.data.to_numpy())

    @property
    def device(self) -> Any:
        return self.data.device

    @property
    def nbytes(self) -> int:
        """Bytes of data plus scales (what one product streams from memory)."""
        return int(self.data.nbytes + (0 if self.scales is None else self.scales.nbytes))

    def dequantize(self) -> np.ndarray:
        """W as float64 NumPy [N, K] on the host (the reference the kernels are tested with)."""
        if self.scales is None:
            from pygpukit.backends.cpu.gguf import dequantize_blocks

            return dequantize_blocks(self.data.to_numpy(), self.format).astype(np.float64)
        s = self.scales.to_numpy()
        if self.format in ("fp8", "w8a8"):
            return dequantize_fp8_weight(self.data.to_numpy(), s, self.block)
        if self.format == "int4":
            return dequantize_int4_weight(self.data.to_numpy(), s, self.block)
        return dequantize_nvfp4_weight(self.data.to_numpy(), s, self.global_scale)

    def __repr__(self) -> str:
        extra = f", global_scale={self.global_scale:g}" if self.format == "nvfp4" else ""
        sc = "in blocks" if self.scales is None else self.scales.dtype.name
        if self.experts > 1:
            extra += f", experts={self.experts}"
        return (
            f"QuantizedWeight({self.format}, shape={self.shape}, block={self.block}, "
            f"scales={sc}{extra}, device={self.device})"
        )


def quantize_weight(
    w: Any,
    format: str = "fp8",
    *,
    block: int | None = None,
    scale_dtype: Any = None,
    device: Any = None,
) -> QuantizedWeight:
    """Quantize W [N, K] (a GPUArray or NumPy array of floats) for gp.linear_quantized.

    The GGUF formats q8_0, q4_0, q4_1, q5_0 and q5_1 go through the ``gguf`` package's
    quantizers (llama.cpp's reference rounding, in float32 rather than float64); K % 32 == 0;
    a block whose float16 scale would overflow raises ValueError.

    format "fp8": e4m3 codes with float32 scales per output channel (block None or 0) or per
    block of 128 along K (block=128). "int4": symmetric int4 (scale = amax / 7) per group of 128
    along K, scales in scale_dtype ("float32" default, "bfloat16", "float16"). "nvfp4": e2m1
    codes, e4m3 scales per block of 16, float32 global scale. "w8a8": fp8's per-channel codes
    and scales, for the FP8 x FP8 product (x quantized per row on every call; module
    docstring). Rounding is round-to-nearest-even
    with the stored scales (pygpukit/backends/cpu/gemv.py). fp8 / int4 / nvfp4 / w8a8 run on
    ``device`` (default: w's device, or the default device for NumPy input; the routed ops
    weight_amax and quantize_weight, module docstring), in float64, the same bits on every
    device; the GGUF formats run on the host and upload. Weights whose scales would overflow
    their type (fp8's float32 scales from |w| about 1.5e41, nvfp4's float32 global scale, int4's
    scale_dtype) raise ValueError before any quantization.
    """
    if not isinstance(format, str) or (format not in FORMATS and format not in _GGUF_QUANTIZERS):
        raise ValueError(
            f"quantize_weight: format must be one of {FORMATS + _GGUF_QUANTIZERS}, got "
            f"{format!r}"
            + (" (k-quant weights come from GGUF files only)" if format in GGUF_FORMATS else "")
        )
    if isinstance(w, GPUArray):
        dev = w.device if device is None else device
        if not w.dtype.is_floating:
            raise TypeError(f"quantize_weight: w must be a float array, got {_desc(w)}")
    elif isinstance(w, np.ndarray):
        dev = device
        try:
            dt: DataType | None = as_dtype(w.dtype)
        except TypeError:
            dt = None
        if dt is None or not dt.is_floating:
            raise TypeError(f"quantize_weight: w must be a float array, got dtype {w.dtype}")
    else:
        raise TypeError(
            f"quantize_weight: w must be a GPUArray or numpy.ndarray, got {type(w).__name__}"
        )
    shape = tuple(w.shape)
    if len(shape) != 2:
        raise ValueError(f"quantize_weight: w must be 2-D [N, K], got shape {shape}")
    k = shape[1]
    mult = GGUF_BLOCKS[format][0] if format in GGUF_BLOCKS else _K_MULTIPLE[format]
    if k == 0 or k % mult:
        raise ValueError(
            f"quantize_weight: {format} needs K (w's last dim) > 0 and % {mult} == 0, got K={k}"
        )
    if scale_dtype is not None and format != "int4":
        raise ValueError(
            f"quantize_weight: scale_dtype applies to int4 only ({format} scales are fixed)"
        )

    if format in GGUF_BLOCKS:
        if block not in (None, GGUF_BLOCKS[format][0]) or scale_dtype is not None:
            raise ValueError(f"quantize_weight: {format} takes no block= or scale_dtype=")
        host = w.to_numpy() if isinstance(w, GPUArray) else w
        w64 = host.astype(np.float32).astype(np.float64) if host.dtype != np.float64 else host
        if not np.isfinite(w64).all():
            raise ValueError("quantize_weight: w has NaN or inf values")
        import gguf

        # gguf's quantizers are llama.cpp's reference (quantize_row_*_ref), bit for bit.
        qtype = gguf.GGMLQuantizationType[format.upper()]
        with np.errstate(over="ignore"):  # an overflowing scale is reported below
            blocks = np.ascontiguousarray(gguf.quants.quantize(w64.astype(np.float32), qtype))
        # d (and m) are float16: a block whose amax / 127 (or range / 15, ...) passes 65504
        # would store inf and dequantize to inf/NaN; refuse it rather than load such a weight.
        from pygpukit.backends.cpu.gguf import dequantize_blocks

        vals = dequantize_blocks(to_planes(format, blocks), format)
        if not np.isfinite(vals).all():
            bad = np.argwhere(~np.isfinite(vals))[0]
            raise ValueError(
                f"quantize_weight: w[{bad[0]}, {bad[1]}] is in a block whose {format} scale "
                "overflows float16 (|w| up to about 65504 * 127 for q8_0, 65504 * 8 for q4_0); "
                "scale w down or use fp8/int4"
            )
        return QuantizedWeight.from_blocks(format, blocks, device=dev)
    sname = "float32"
    if format in ("fp8", "w8a8"):
        blk = 0 if block is None else block
        if blk not in ((0, FP8_BLOCK) if format == "fp8" else (0,)):
            raise ValueError(
                f"quantize_weight: {format} block must be None/0"
                + (" or 128" if format == "fp8" else " (per-channel weight scales)")
                + f", got {block!r}"
            )
    elif format == "int4":
        if block not in (None, INT4_GROUP):
            raise ValueError(f"quantize_weight: int4 groups are 128 values, got block={block!r}")
        sname = as_dtype("float32" if scale_dtype is None else scale_dtype).name
        if sname not in _INT4_SCALES:
            raise ValueError(
                f"quantize_weight: int4 scale_dtype must be one of {_INT4_SCALES}, got {sname}"
            )
        blk = INT4_GROUP
    else:
        if block not in (None, NVFP4_BLOCK):
            raise ValueError(f"quantize_weight: nvfp4 blocks are 16 values, got block={block!r}")
        blk = NVFP4_BLOCK
    arr = _on_device(w, dev)
    amax = run("weight_amax", (arr,))
    top = float(np.max(amax.to_numpy(), initial=0.0))  # the one read-back (load time)
    if not np.isfinite(top):
        raise ValueError("quantize_weight: w has NaN or inf values")
    g = _scale_range(format, top, sname)
    params = {"format": format, "block": blk, "scale_dtype": sname, "global_scale": g}
    data, scales = run("quantize_weight", (arr, amax), params)
    if format == "nvfp4":
        return QuantizedWeight("nvfp4", data, scales, global_scale=g)
    if format == "int4":
        return QuantizedWeight("int4", data, scales)
    return QuantizedWeight(format, data, scales, block=blk)


def _scale_range(format: str, top: float, sname: str) -> float:
    """Refuses a weight whose largest |value| ``top`` gives scales past their type (int4's
    scale_dtype, fp8's float32 scales, nvfp4's float32 global scale); nvfp4's global scale, else
    1.0."""
    if format == "int4" and not np.isfinite(round_to(np.array(top / INT4_MAX), sname)):
        raise ValueError(int4_range_error(top, sname))
    with np.errstate(over="ignore"):
        fp8_scale = np.float32(top / FP8_MAX)
    if format in ("fp8", "w8a8") and not np.isfinite(fp8_scale):
        raise ValueError(
            f"quantize_weight: |w| up to {top:.4g} needs {format} scales beyond float32's range; "
            "scale w down"
        )
    if format != "nvfp4":
        return 1.0
    g = nvfp4_global_scale(top)
    if not np.isfinite(g):
        raise ValueError(
            f"quantize_weight: |w| up to {top:.4g} needs an nvfp4 global scale beyond float32's "
            "range; scale w down"
        )
    return g


# Input dtypes the quantize kernels read as they are.
_QUANT_INPUTS = ("float16", "bfloat16", "float32", "float64")


def _on_device(w: Any, dev: Any) -> GPUArray:
    """w as a float array on dev (default: w's device, or the default device for NumPy input),
    uploaded as it is (float types other than float16 / bfloat16 / float32 / float64, e.g. fp8,
    widened to float32 on the host first: exact)."""
    from pygpukit.creation import from_numpy
    from pygpukit.runtime import device

    if isinstance(w, GPUArray):
        if w.dtype.name in _QUANT_INPUTS and (dev is None or w.device == device(dev)):
            return w
        w = w.to_numpy()
    if np.dtype(w.dtype).name not in _QUANT_INPUTS:
        w = w.astype(np.float32)
    return from_numpy(w, device=dev)
