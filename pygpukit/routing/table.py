"""The routing table: for every op, its ordered candidate backends and their constraints.

Order is preference: the first candidate whose constraints all pass and whose backend is available
serves the call. Constraints are data (checked by pygpukit.routing.select), so ``explain`` can say
exactly which one failed. Triton comes first wherever it serves (docs/design.md: Triton-first),
except where a native kernel measured faster leads (the GEMM families, the FFT at its lengths); the
native backend is otherwise the twin selectable with ``ROUTE=<op>:native``; NumPy serves the CPU
device.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pygpukit.routing.crossovers import DENSE_GEMV_MAX_K, QUANT_CAPABILITY

FLOATS = frozenset({"float32", "float16", "bfloat16", "float64"})
INTS = frozenset({"int64", "int32", "int16", "int8", "uint8"})
NUMERIC = FLOATS | INTS
ANY = frozenset(FLOATS | INTS | {"bool", "float8_e4m3fn", "float8_e5m2"})
COMPLEX = frozenset({"complex64", "complex128"})


@dataclass(frozen=True)
class Candidate:
    """One backend for one op and what it needs of a call.

    dtypes: allowed dtypes of every array input (names); devices: device types it runs on;
    min_capability / max_capability: CUDA compute capability range (max: code built for one
    architecture only, e.g. sm_90a's wgmma); params: exact values a call's parameter must have
    (e.g. softmax only on the last axis); max_last_dim: largest size of the first input's last dim;
    smooth: (param, lo, hi, step, primes, any_hi): that parameter must be a multiple of step in
    [lo, hi], and either at most any_hi or free of prime factors outside primes (the native
    FFT's transform lengths: 7-smooth ones to the top, any to half of it by Bluestein).
    Per-input constraints name an input by its position in the op's inputs tuple (an absent
    optional input keeps its place): input_dtypes ((i, dtypes), ...): input i's dtype must be
    one of these (where ``dtypes`` admits more for the other inputs); multiple_of
    ((i, axis, m), ...): input i's dim ``axis`` must be a multiple of m (e.g. 16-byte rows for
    TMA loads).
    family: the backend's module family that holds this candidate's kernel when it is not the
    op's, so that each backend's status is that family's (qgemm_<format>_dense: the NumPy
    reference in cpu/qgemm.py, the CUTLASS kernel in native/mixed_gemm.py, which needs the
    extension's mixed_gemm family, not the gemv family native/qgemm.py's kernels come from);
    None: the op's family.
    Deterministic mode (pygpukit/determinism.py): ``invariant`` lists the dtypes for which the
    backend is batch invariant (None: all, e.g. row-wise ops), and the mode refuses it for any
    other; ``deterministic_only`` candidates serve only under the mode (unless forced).
    """

    backend: str
    dtypes: frozenset[str] = ANY
    devices: frozenset[str] = frozenset({"cuda"})
    min_capability: tuple[int, int] = (0, 0)
    max_capability: tuple[int, int] | None = None
    params: tuple[tuple[str, Any], ...] = ()
    max_last_dim: int | None = None
    smooth: tuple[str, int, int, int, tuple[int, ...], int] | None = None
    input_dtypes: tuple[tuple[int, frozenset[str]], ...] = ()
    multiple_of: tuple[tuple[int, int, int], ...] = ()
    invariant: frozenset[str] | None = None
    deterministic_only: bool = False
    family: str | None = None


@dataclass(frozen=True)
class OpRoute:
    op: str
    family: str  # module name in each backend home (pygpukit/backends/<home>/<family>.py)
    candidates: tuple[Candidate, ...]
    route_params: tuple[str, ...] = field(default=())  # params that enter the decision cache key

    def family_of(self, cand: Candidate) -> str:
        """The backend module family that holds ``cand``'s kernel for this op."""
        return cand.family or self.family


CPU = Candidate("cpu", devices=frozenset({"cpu"}))


def _gpu(
    *triton: Candidate,
    native: Candidate | None = None,
    native_invariant: frozenset[str] | None = None,
) -> tuple[Candidate, ...]:
    """Triton first, the native twin (batch invariant for native_invariant's dtypes under the
    deterministic mode; None: all), NumPy on the CPU."""
    dt = triton[0].dtypes if triton else ANY
    nat = native or Candidate("native", dtypes=dt, invariant=native_invariant)
    return (*triton, nat, CPU)


def _entry(op: str, family: str, *cands: Candidate, route_params: tuple[str, ...] = ()) -> OpRoute:
    return OpRoute(op, family, cands, route_params)


_T_FLOAT = Candidate("triton", dtypes=FLOATS)
_T_NUMERIC = Candidate("triton", dtypes=NUMERIC | {"bool"})
_T_ANY = Candidate("triton", dtypes=ANY)
_T_FIXED_GEMM = Candidate("triton", dtypes=FLOATS - {"float64"}, deterministic_only=True)
_NOT_INVARIANT: frozenset[str] = frozenset()
_N_GEMM = Candidate("native", dtypes=FLOATS, invariant=_NOT_INVARIANT)
_HALF = frozenset({"float16", "bfloat16"})
_GEMV_IO = _HALF  # x, bias, y (and int4 scales)
_FP8_IO = frozenset({"float8_e4m3fn", "float8_e5m2", "float32", "float16", "bfloat16"})
_F32_F64 = frozenset({"float32", "float64"})
# A quantized weight's data and scale dtypes by format (pygpukit/qweight.py), beside x's.
_QUANT_OPERANDS = {
    "fp8": frozenset({"float8_e4m3fn", "float32"}),
    "int4": frozenset({"int4", "float32", "float16", "bfloat16"}),
    "nvfp4": frozenset({"uint8", "float8_e4m3fn"}),
}


def _quant_native(extra: frozenset[str]) -> Candidate:
    """The native candidate of a quantized decode-GEMV op (gemv_<format>, its gated and RMSNorm
    forms, qgemm_<format>'s fallback): tensor-core mma, sm_80+."""
    return Candidate(
        "native", dtypes=_GEMV_IO | extra, min_capability=(8, 0), invariant=_NOT_INVARIANT
    )


# Their NumPy reference (float64 on the dequantized weight; int4 data arrives as int4).
_QUANT_CPU = Candidate("cpu", dtypes=ANY | {"int4"}, devices=frozenset({"cpu"}))


# The native FFT (native/src/fft/fft.h): its input dtypes and lengths n by op: 7-smooth (prime
# factors 2, 3, 5, 7), a complex transform of up to 4096 points in shared memory, any length up
# to 2048 points by Bluestein; the real ones through pairs (even n, n / 2 complex points).
_FFT_REAL_IN = frozenset({"float32", "float16", "bfloat16"})
_FFT_NATIVE_IO = {
    "fft": _FFT_REAL_IN | {"complex64"},
    "ifft": _FFT_REAL_IN | {"complex64"},
    "rfft": _FFT_REAL_IN,
    "irfft": frozenset({"complex64"}),
    "rfft_windowed": _FFT_REAL_IN,
    "rfft_frames": _FFT_REAL_IN,
}
_FFT_NATIVE_N = {op: (2, 8192, 2) for op in _FFT_NATIVE_IO} | {
    "fft": (1, 4096, 1),
    "ifft": (1, 4096, 1),
}
_FFT_PRIMES = (2, 3, 5, 7)


def _fft_lengths(lo: int, hi: int, step: int) -> tuple[str, int, int, int, tuple[int, ...], int]:
    return ("n", lo, hi, step, _FFT_PRIMES, hi // 2)


# ... and in float64 (complex128): half the points (a row's float64 planes fill the same
# shared memory); the Triton kernels serve float64 at every other length.
_FFT_F64_IN = frozenset({"float64", "complex128"})
_FFT_NATIVE_IO64 = {
    "fft": _FFT_F64_IN,
    "ifft": _FFT_F64_IN,
    "rfft": frozenset({"float64"}),
    "irfft": frozenset({"complex128"}),
    "rfft_windowed": frozenset({"float64"}),
    "rfft_frames": frozenset({"float64"}),
}
_FFT_NATIVE_N64 = {op: (lo, hi // 2, step) for op, (lo, hi, step) in _FFT_NATIVE_N.items()}

_ROUTES: list[OpRoute] = [
    *(
        _entry(op, "elementwise", *_gpu(_T_NUMERIC))
        for op in (
            "add",
            "sub",
            "mul",
            "div",
            "maximum",
            "minimum",
            "pow",
            "eq",
            "ne",
            "lt",
            "le",
            "gt",
            "ge",
            "where",
            "clamp",
        )
    ),
    *(
        _entry(op, "unary", *_gpu(_T_NUMERIC))
        for op in ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh")
    ),
    # Integer (and bool) x: relu stays integer, the others give float32; both GPU backends
    # serve that. The gated forms take floats only (ops/activation.py).
    *(
        _entry(op, "activation", *_gpu(_T_NUMERIC))
        for op in ("sigmoid", "relu", "silu", "gelu", "softplus")
    ),
    *(_entry(op, "activation", *_gpu(_T_FLOAT)) for op in ("silu_mul", "gelu_mul")),
    _entry("cast", "copy", *_gpu(_T_ANY)),
    # Strided copy (contiguous(), copy(), setitem on device): Triton first; without any GPU
    # backend the runtime's driver copy engine serves it (pygpukit/_memory.py).
    _entry("copy", "copy", *_gpu(_T_ANY)),
    # sum and mean: the native twin's split follows the number of outputs, so the deterministic
    # mode keeps it for integers only (exact); max, min and argmax are exact in any order.
    *(
        _entry(
            op,
            "reduce",
            *_gpu(_T_NUMERIC, native_invariant=INTS | {"bool"}),
            route_params=("axis",),
        )
        for op in ("sum", "mean")
    ),
    *(
        _entry(op, "reduce", *_gpu(_T_NUMERIC), route_params=("axis",))
        for op in ("max", "min", "argmax")
    ),
    _entry(
        "softmax",
        "softmax",
        *_gpu(Candidate("triton", dtypes=FLOATS, params=(("axis", -1),))),
        route_params=("axis",),
    ),
    _entry("rmsnorm", "norm", *_gpu(_T_FLOAT)),
    _entry("layernorm", "norm", *_gpu(_T_FLOAT)),
    # positions are an integer device array: the float-only constraint would reject the call
    _entry(
        "rope",
        "rope",
        *_gpu(Candidate("triton", dtypes=FLOATS | {"int32", "int64"})),
        route_params=("style",),
    ),
    _entry("embedding", "embedding", *_gpu(_T_ANY)),
    _entry("bias_add", "embedding", *_gpu(_T_FLOAT)),
    # GEMM-class ops: cuBLASLt through the native backend (pygpukit/backends/native/matmul.py);
    # under the deterministic mode the Triton fixed-tile GEMM (cuBLASLt's heuristic picks its
    # kernel per M, so a row's bits depend on the batch; integer products are exact either way).
    # sdpa: Triton flash attention (fp16/bf16/fp32, head dim <= 256), then the native twin
    # (native/src/attention: every float dtype, so float64 on CUDA runs there; D <= 256).
    # Integer results: native/src/matmul_int (wraparound as NumPy), reached through native.matmul.
    _entry(
        "matmul",
        "matmul",
        _T_FIXED_GEMM,
        Candidate("native", dtypes=FLOATS | INTS, invariant=INTS),
        CPU,
    ),
    _entry("linear", "matmul", _T_FIXED_GEMM, _N_GEMM, CPU),
    _entry("linear_bias_gelu", "matmul", _T_FIXED_GEMM, _N_GEMM, CPU),
    _entry(
        "sdpa",
        "attention",
        Candidate("triton", dtypes=FLOATS - {"float64"}, max_last_dim=256),
        Candidate("native", dtypes=FLOATS, max_last_dim=256, invariant=_NOT_INVARIANT),
        CPU,
    ),
    # Packed variable-length attention: the int32 cu_seqlens are inputs too; D <= 256 as sdpa.
    _entry(
        "sdpa_varlen",
        "attention",
        Candidate("triton", dtypes=FLOATS - {"float64"} | {"int32"}, max_last_dim=256),
        Candidate("native", dtypes=FLOATS | {"int32"}, max_last_dim=256),
        CPU,
    ),
    # Decode attention over a (paged) KV cache and the cache write: int32 lengths, positions and
    # block tables are inputs too. D <= 256: a [rows, D] fp32 accumulator per program. The native
    # twin (split-key tensor cores for half dtypes, else the row kernel) measured 1.15-1.4x
    # slower than Triton on an H200 (docs/benchmark-notes.md): Triton stays first.
    _entry(
        "sdpa_decode",
        "attention_decode",
        Candidate("triton", dtypes=FLOATS - {"float64"} | {"int32"}, max_last_dim=256),
        Candidate("native", dtypes=FLOATS | {"int32"}, max_last_dim=256, invariant=_NOT_INVARIANT),
        CPU,
    ),
    _entry(
        "kv_cache_write",
        "attention_decode",
        # The native twin does not normalise heads (q_norm / k_norm): calls with them go to
        # the Triton kernel (or the NumPy reference).
        *_gpu(
            Candidate("triton", dtypes=FLOATS | {"int32"}),
            native=Candidate("native", dtypes=FLOATS | {"int32"}, params=(("qk_norm", None),)),
        ),
        route_params=("qk_norm",),
    ),
    # The cache write and decode attention in one launch (the decode step's form of the two
    # ops above). The native twin runs the native write and attention one after the other
    # (without head norms, as its kv_cache_write).
    _entry(
        "sdpa_decode_append",
        "attention_decode",
        *_gpu(
            Candidate("triton", dtypes=FLOATS - {"float64"} | {"int32"}, max_last_dim=256),
            native=Candidate(
                "native",
                dtypes=FLOATS | {"int32"},
                max_last_dim=256,
                params=(("qk_norm", None),),
                invariant=_NOT_INVARIANT,
            ),
        ),
        route_params=("qk_norm",),
    ),
    # Drawing the next token on the device (Philox; int64 counters and uint8 seen marks are
    # inputs too). One program a row: batch invariant. No native twin yet.
    _entry(
        "sample",
        "sampling",
        Candidate("triton", dtypes=FLOATS - {"float64"} | {"int64", "uint8"}),
        CPU,
    ),
    # Mixture of experts (pygpukit/ops/moe.py): router top-k, grouping by expert and the grouped
    # expert GEMM in Triton, the NumPy reference on the CPU; float64 on CUDA has no GPU backend.
    # moe_linear's native twin is CUTLASS's Hopper grouped GEMM (native/src/moe, sm_90 only):
    # float16/bfloat16 x and experts with K and N multiples of 8 (TMA's 16-byte rows).
    _entry("moe_router", "moe", Candidate("triton", dtypes=FLOATS - {"float64"}), CPU),
    _entry("moe_align", "moe", Candidate("triton", dtypes=frozenset({"int32"})), CPU),
    _entry(
        "moe_linear",
        "moe",
        Candidate("triton", dtypes=FLOATS - {"float64"} | {"int32"}),
        Candidate(
            "native",
            dtypes=_HALF | {"int32", "float32"},
            input_dtypes=((0, _HALF),),
            multiple_of=((0, 1, 8), (1, 1, 8)),
            min_capability=(9, 0),
            max_capability=(9, 0),
        ),
        CPU,
    ),
    # The STFT synthesis steps (ops/spectral.py: Griffin-Lim's projection, the istft's windowed
    # overlap-add): one Triton pass each, NumPy on the CPU; no native twins.
    _entry(
        "phase_project",
        "spectral",
        Candidate("triton", dtypes=COMPLEX | {"float32", "float64"}),
        Candidate("cpu", dtypes=COMPLEX | {"float32", "float64"}, devices=frozenset({"cpu"})),
    ),
    _entry(
        "overlap_add",
        "spectral",
        Candidate("triton", dtypes=_F32_F64),
        Candidate("cpu", dtypes=_F32_F64, devices=frozenset({"cpu"})),
    ),
    # Median filter (ops/median.py): an exact selection, so the Triton kernel serves every float
    # dtype, float64 included; NumPy on the CPU. No native twin.
    _entry("median_filter", "median", Candidate("triton", dtypes=FLOATS), CPU),
    # Pitch tracking's device ops (pygpukit.audio.pyin): pYIN's per-frame observation model
    # (ops/pitch.py) and Viterbi decoding (ops/sequence.py), both computed in float64 where
    # librosa does (Triton on CUDA serves float64 there); NumPy on the CPU. No native twins.
    _entry("pyin_observations", "pitch", Candidate("triton", dtypes=_F32_F64), CPU),
    _entry("viterbi", "sequence", Candidate("triton", dtypes=_F32_F64), CPU),
    # FP8: cuBLASLt scaled products (sm_89+; the scale modes beyond per tensor need Hopper and
    # cuBLASLt 12.9+, checked by the Rust core with a message naming both); quantize/dequantize
    # in Triton (pygpukit/backends/triton_kernels/quant.py), their native twins next
    # (native/src/quant).
    _entry(
        "matmul_fp8",
        "matmul_fp8",
        Candidate("native", dtypes=_FP8_IO, min_capability=(8, 9), invariant=_NOT_INVARIANT),
        CPU,
    ),
    _entry(
        "quantize_fp8",
        "quant",
        Candidate("triton", dtypes=FLOATS - {"float64"}),
        Candidate("native", dtypes=FLOATS - {"float64"}),
        CPU,
    ),
    _entry(
        "dequantize_fp8",
        "quant",
        Candidate("triton", dtypes=_FP8_IO),
        Candidate("native", dtypes=_FP8_IO),
        CPU,
    ),
    # FFT (numpy.fft semantics, ops/fft.py): the native kernels (backends/native/fft.py; no
    # cuFFT: driver-only at run time) for powers of two (radix 8), 7-smooth lengths (radices 7,
    # 5, 3, 8, 4, 2) and any other length up to half the top (Bluestein in the same kernel), the
    # Triton mixed-radix / Bluestein kernels for every length (backends/triton_kernels/fft.py),
    # both fp32 (float32/16/bf16 in, complex64 out), then NumPy's pocketfft in float64 on the
    # CPU. Native first where it serves: faster at every length timed (H100, 96000 rows, one
    # run each: rfft 2048 670 vs 1518 us, fft 4096 2390 vs 11368, fft 16 24 vs 68; rfft 400 233
    # vs 282, fft 1000 923 vs 3281; BENCHMARKS.md "FFT and audio"). float64 and complex128: the
    # native kernels at half those lengths (the second candidate; fft 1000 1602 vs 6430 us),
    # the Triton passes and Bluestein in float64 past them. The length n enters the decision
    # (route_params).
    *(
        _entry(
            op,
            "fft",
            Candidate("native", dtypes=_FFT_NATIVE_IO[op], smooth=_fft_lengths(*_FFT_NATIVE_N[op])),
            Candidate(
                "native", dtypes=_FFT_NATIVE_IO64[op], smooth=_fft_lengths(*_FFT_NATIVE_N64[op])
            ),
            Candidate("triton", dtypes=FLOATS | COMPLEX),
            Candidate("cpu", dtypes=FLOATS | COMPLEX, devices=frozenset({"cpu"})),
            route_params=("n",),
        )
        for op in ("fft", "ifft", "rfft", "irfft", "rfft_windowed", "rfft_frames")
    ),
    # GGUF formats read in place (pygpukit/ops/gguf.py, the planes of pygpukit/_gguf_planes.py):
    # Triton kernels on CUDA (no native twin yet), the gguf package's values in NumPy on the CPU.
    _entry(
        "dequantize_gguf",
        "gguf",
        Candidate("triton", dtypes=frozenset({"uint8", "int32", "int64"})),
        CPU,
    ),
    _entry(
        "linear_gguf",
        "gguf",
        Candidate("triton", dtypes=frozenset({"uint8", "float32", "float16", "bfloat16"})),
        CPU,
    ),
    _entry(
        "moe_linear_gguf",
        "gguf",
        Candidate("triton", dtypes=frozenset({"uint8", "int32", "float32", "float16", "bfloat16"})),
        CPU,
    ),
    # Decode GEMV and quantized-weight products (native/src/gemv, tensor-core mma: sm_80+): the
    # native kernels on CUDA, the float64 NumPy reference on the CPU (ops/gemv.py checks the
    # dtypes of each operand; these sets only admit them). The quantized ones have a Triton twin
    # after the native kernel, the mixed-input GEMM of backends/triton_kernels/qgemm.py, which
    # serves them under the deterministic mode (one tile: batch invariant) and where the native
    # extension is not built. Each format also has its gated form, gemv_<format>_silu_mul (a
    # gated MLP's stacked gate/up weight, silu(g) * u stored: gp.linear_silu_mul's decode path).
    # The dense GEMV: gp.gemv on the native kernel (built for up to 16 rows), its Triton twin
    # after it (rows computed on their own: batch invariant). gp.linear's one-row decode path
    # (linear_gemv), the fused gate/up product (linear_silu_mul) and the product with the
    # RMSNorm before it read in (rmsnorm_linear) are the Triton kernel (programmatic dependent
    # launch, sm_90+), for K <= DENSE_GEMV_MAX_K (its K tiles are unrolled: the compile grows
    # with K).
    _entry(
        "gemv",
        "gemv",
        Candidate("native", dtypes=_GEMV_IO, min_capability=(8, 0), invariant=_NOT_INVARIANT),
        Candidate("triton", dtypes=_GEMV_IO),
        Candidate("cpu", dtypes=ANY | {"int4"}, devices=frozenset({"cpu"})),
    ),
    *(
        _entry(
            op,
            "gemv",
            Candidate("triton", dtypes=_GEMV_IO, max_last_dim=DENSE_GEMV_MAX_K),
            Candidate("cpu", dtypes=ANY, devices=frozenset({"cpu"})),
        )
        for op in ("linear_gemv", "linear_silu_mul", "rmsnorm_linear")
    ),
    # gp.rmsnorm_qkv_rope_write's one launch (rmsnorm_linear's kernel with RoPE and the cache
    # store in its epilogue): x half, the positions int32, the tables also float32; the head
    # dim (k_cache's dim 3) a multiple of 4 (a program's four columns are two rotated pairs).
    _entry(
        "rmsnorm_qkv_rope_write",
        "qkv_write",
        Candidate(
            "triton",
            dtypes=_GEMV_IO | {"int32", "float32"},
            input_dtypes=((0, _GEMV_IO),),
            max_last_dim=DENSE_GEMV_MAX_K,
            multiple_of=((3, 3, 4),),
        ),
        Candidate("cpu", dtypes=ANY, devices=frozenset({"cpu"})),
    ),
    *(
        _entry(
            op,
            "gemv",
            _quant_native(extra),
            Candidate("triton", dtypes=_GEMV_IO | extra, min_capability=QUANT_CAPABILITY[fmt]),
            _QUANT_CPU,
        )
        for fmt, extra in _QUANT_OPERANDS.items()
        for op in (f"gemv_{fmt}", f"gemv_{fmt}_silu_mul")
    ),
    # The RMSNorm forms, rmsnorm_gemv_<format> (one row of x: the pre-norm block's RMSNorm read
    # into the decode GEMV, gp.rmsnorm_linear with a quantized weight): the native kernel, the
    # NumPy reference. No Triton twin: where the native one cannot serve, gp.rmsnorm_linear runs
    # gp.rmsnorm and gp.linear_quantized (the same result within one rounding of the row).
    *(
        _entry(
            f"rmsnorm_gemv_{fmt}",
            "gemv",
            _quant_native(extra),
            _QUANT_CPU,
        )
        for fmt, extra in _QUANT_OPERANDS.items()
    ),
    # The mixed-input GEMM for more rows than QGEMV_MAX_ROWS: the weight dequantized in the
    # mainloop (Triton, qgemm.py); behind it the native GEMV kernels, which serve any number of
    # rows (slower: W re-read per 16 rows) where Triton cannot run; the same NumPy reference on
    # the CPU.
    *(
        _entry(
            f"qgemm_{fmt}",
            "qgemm",
            Candidate("triton", dtypes=_GEMV_IO | extra, min_capability=QUANT_CAPABILITY[fmt]),
            _quant_native(extra),
            _QUANT_CPU,
        )
        for fmt, extra in _QUANT_OPERANDS.items()
    ),
    # linear_quantized's dense path for an int4 or fp8 weight below QDENSE_FUSED_MAX_ROWS rows:
    # the product with each weight value rounded to x's dtype, dequantized in the mainloop of
    # CUTLASS's mixed-input GEMM (native/src/mixed_gemm, sm_90 only: K a multiple of 128, N of
    # 8 for TMA's 16-byte rows; x, bias and y float16/bfloat16); where it cannot serve, the
    # dense path expands the weight (dequantize_weight, then linear).
    *(
        _entry(
            f"qgemm_{fmt}_dense",
            "qgemm",
            Candidate(
                "native",
                dtypes=_GEMV_IO | _QUANT_OPERANDS[fmt],
                input_dtypes=((0, _HALF), (1, frozenset({data}))),
                multiple_of=((1, 0, 8), (1, 1, 128)),
                min_capability=(9, 0),
                max_capability=(9, 0),
                invariant=_NOT_INVARIANT,
                family="mixed_gemm",
            ),
            Candidate("cpu", dtypes=ANY | {"int4"}, devices=frozenset({"cpu"})),
        )
        for fmt, data in (("int4", "int4"), ("fp8", "float8_e4m3fn"))
    ),
    # W8A8 up to W8A8_MAX_ROWS rows and under the deterministic mode: x's e4m3 codes and row
    # scales through the same kernel (cuBLASLt's FP8 product, matmul_fp8, serves the rest).
    _entry(
        "qgemm_w8a8",
        "qgemm",
        Candidate("triton", dtypes=_GEMV_IO | _QUANT_OPERANDS["fp8"], min_capability=(8, 9)),
        Candidate("cpu", dtypes=ANY, devices=frozenset({"cpu"})),
    ),
    # An fp8 / int4 / nvfp4 weight expanded to a float dtype: linear_quantized's path past
    # QDENSE_MIN_ROWS rows on CUDA (then gp.linear, cuBLASLt), taken only where the device has
    # QUANT_CAPABILITY[format] (ops/gemv.py checks; e4m3 needs sm_89).
    _entry(
        "dequantize_weight",
        "qgemm",
        Candidate("triton", dtypes=frozenset().union(*_QUANT_OPERANDS.values())),
        Candidate("cpu", dtypes=ANY | {"int4"}, devices=frozenset({"cpu"})),
    ),
    # gp.quantize_weight: float64 Triton kernels (triton_kernels/qweight.py), NumPy's bits.
    _entry("weight_amax", "qweight", Candidate("triton", dtypes=FLOATS), CPU),
    _entry("quantize_weight", "qweight", Candidate("triton", dtypes=FLOATS), CPU),
]

TABLE: dict[str, OpRoute] = {r.op: r for r in _ROUTES}
BACKENDS = ("triton", "native", "cpu")


def replace_candidates(op: str, candidates: tuple[Candidate, ...]) -> None:
    """Swap an op's candidates (used by backends that register measured crossovers)."""
    r = TABLE[op]
    TABLE[op] = OpRoute(r.op, r.family, candidates, r.route_params)
