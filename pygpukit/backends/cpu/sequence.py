"""Viterbi decoding in NumPy: the reference of pygpukit/ops/sequence.py's contract.

librosa.sequence._viterbi's loop, vectorised over the batch: at each step the [states, states]
sums V[t - 1, k] + log_trans[k, j] (laid out [j, k], so the argmax runs along a contiguous
axis), their first argmax over k, and V[t, j] = log_prob[t, j] + that maximum. The same
additions in the same dtype as the Triton kernel, so the two return the same path.
"""

from __future__ import annotations

import numpy as np

from ._common import Array

__all__ = ["viterbi"]


def viterbi(log_prob: Array, log_trans: Array, log_p_init: Array) -> Array:
    """states int32 [batch, steps]; see pygpukit/ops/sequence.py."""
    lp = np.asarray(log_prob)
    b, n_steps, n_states = lp.shape
    trans_t = np.ascontiguousarray(np.asarray(log_trans).T)  # [j, k]
    ptr = np.zeros((b, n_steps, n_states), dtype=np.int32)
    rows = np.arange(n_states)
    value = lp[:, 0] + np.asarray(log_p_init)
    with np.errstate(invalid="ignore"):
        for t in range(1, n_steps):
            for r in range(b):
                trans_out = value[r] + trans_t  # [j, k] = V[t - 1, k] + log_trans[k, j]
                best = np.argmax(trans_out, axis=1)
                ptr[r, t] = best
                value[r] = lp[r, t] + trans_out[rows, best]
    states = np.empty((b, n_steps), dtype=np.int32)
    states[:, -1] = np.argmax(value, axis=1)
    for t in range(n_steps - 2, -1, -1):
        states[:, t] = ptr[np.arange(b), t + 1, states[:, t + 1]]
    return states
