"""How many query rows of gp.sdpa_decode change with the number of queries in the launch.

    python benchmarks/tuning/diag_sq_invariance.py

For each dtype and head layout: random caches of 2048 slots, batch 2, random lengths of
300-2000 keys; for Sq = 2..16 the Sq-query launch against Sq one-query launches at each query's
own length (what a speculative check against plain decoding compares). Prints the rows whose bits
differ, in the default mode and in the deterministic mode (gp.set_deterministic).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

import pygpukit as gp


def rows_differ(dtype: str, h: int, hkv: int, d: int, det: bool, seed: int = 0) -> tuple[int, int]:
    rng = np.random.default_rng(seed)
    npdt = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float32
    b, cap = 2, 2048

    def up(x: np.ndarray) -> gp.GPUArray:
        return gp.from_numpy(np.ascontiguousarray(x), device="cuda:0")

    kc = up(rng.standard_normal((b, hkv, cap, d)).astype(npdt))
    vc = up(rng.standard_normal((b, hkv, cap, d)).astype(npdt))
    bad = total = 0
    with gp.deterministic(det):
        for sq in range(2, 17):
            lens = rng.integers(300, 2000, b).astype(np.int32)
            q = rng.standard_normal((b, h, sq, d)).astype(npdt)
            many = gp.sdpa_decode(up(q), kc, vc, up(lens)).to_numpy()
            for i in range(sq):
                one = gp.sdpa_decode(up(q[:, :, i : i + 1]), kc, vc, up(lens - sq + 1 + i))
                a = one.to_numpy().view(np.uint8).reshape(b, h, -1)
                ref = many[:, :, i : i + 1].view(np.uint8).reshape(b, h, -1)
                diff = (a != ref).any(-1)
                bad += int(diff.sum())
                total += diff.size
    return bad, total


def main() -> int:
    for dtype in ("bfloat16", "float32"):
        for h, hkv, d in ((9, 3, 64), (32, 8, 128)):
            for det in (False, True):
                bad, total = rows_differ(dtype, h, hkv, d, det)
                mode = "deterministic" if det else "default"
                print(f"sdpa_decode {dtype} H{h}/Hkv{hkv} D{d} {mode:>13}: {bad} of {total} rows "
                      "differ between Sq 2..16 and Sq 1", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
