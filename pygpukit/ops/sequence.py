"""Sequence decoding: ``viterbi(log_prob, log_trans, log_p_init)``, the most likely state path of
a hidden Markov model (librosa.sequence.viterbi's recursion, in log space).

For each row b of log_prob [batch, steps, states] (log_prob[b, t, j] = log P[obs_t | state j]),
with log_trans [states, states] (log_trans[i, j] = log P[state_{t+1} = j | state_t = i]) and
log_p_init [states]:

    V[0, j] = log_prob[0, j] + log_p_init[j]
    ptr[t, j] = argmax_k (V[t - 1, k] + log_trans[k, j])          (first k on ties)
    V[t, j] = log_prob[t, j] + (V[t - 1, ptr[t, j]] + log_trans[ptr[t, j], j])
    state[T - 1] = argmax_j V[T - 1, j];  state[t] = ptr[t + 1, state[t + 1]]

which is librosa.sequence._viterbi operation for operation (so float64 inputs give librosa's
path exactly; librosa.sequence.viterbi takes probabilities and applies log(p + tiny) first, the
caller's step here). NaN ranks above every number (np.argmax's rule).

- dtypes: float32 or float64, all three arrays the same; the recursion runs in that dtype.
- result: int32 [batch, steps] (librosa returns uint16, which caps it at 65536 states).
- ``out``: an optional int32 [batch, steps] buffer (any layout).

Routing (pygpukit/routing/table.py): Triton (backends/triton_kernels/sequence.py: one launch a
step, parallel over rows and states, then a backtracking launch) on CUDA, NumPy on the CPU
(backends/cpu/sequence.py, the reference); no native twin. The steps are sequential by nature:
the GPU's work per step is the [states, states] max-plus product, so its time grows with steps
x states^2 / (SM count) plus one launch a step.
"""

from __future__ import annotations

from typing import Any

from pygpukit.array import GPUArray
from pygpukit.dtypes import int32
from pygpukit.ops import _checks as chk
from pygpukit.routing.dispatch import run

__all__ = ["viterbi"]


def viterbi(
    log_prob: GPUArray, log_trans: GPUArray, log_p_init: GPUArray, *, out: GPUArray | None = None
) -> GPUArray:
    """The most likely state sequence, int32 [batch, steps], of each row of log_prob [batch,
    steps, states] under log_trans [states, states] and log_p_init [states] (all log
    probabilities, one float dtype). See the module docstring for the recursion."""
    op = "viterbi"
    named: dict[str, Any] = {
        "log_prob": log_prob,
        "log_trans": log_trans,
        "log_p_init": log_p_init,
    }
    for name, a in named.items():
        chk.array(op, name, a)
        if a.dtype.name not in ("float32", "float64"):
            raise TypeError(f"{op}: {name} must be a float32 or float64 array, got {chk.desc(a)}")
    if log_prob.ndim != 3 or log_prob.shape[1] < 1 or log_prob.shape[2] < 1:
        raise ValueError(
            f"{op}: log_prob must be [batch, steps >= 1, states >= 1], got {chk.desc(log_prob)}"
        )
    s = log_prob.shape[2]
    if log_trans.shape != (s, s):
        raise ValueError(
            f"{op}: log_trans must be [states, states] = ({s}, {s}), got {chk.desc(log_trans)}"
        )
    if log_p_init.shape != (s,):
        raise ValueError(f"{op}: log_p_init must be [states] = ({s},), got {chk.desc(log_p_init)}")
    for name in ("log_trans", "log_p_init"):
        if named[name].dtype is not log_prob.dtype:
            raise TypeError(
                f"{op}: {name} must have log_prob's dtype {log_prob.dtype.name}, got "
                f"{chk.desc(named[name])}"
            )
    chk.out_arg(op, out, log_prob.shape[:2], int32)
    return run(op, (log_prob, log_trans, log_p_init), {}, out=out)  # type: ignore[no-any-return]
