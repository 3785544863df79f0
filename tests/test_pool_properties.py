"""Property tests of the pool through the Python binding (host pool: the same logic as the GPU)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import pygpukit as gp
from pygpukit import _core


@settings(max_examples=60, deadline=None)
@given(
    quota=st.integers(1, 1 << 16),
    ops=st.lists(st.tuples(st.booleans(), st.integers(0, 1 << 14)), min_size=1, max_size=300),
)
def test_quota_never_exceeded_counters_conserve_no_leak(
    quota: int, ops: list[tuple[bool, int]]
) -> None:
    pool = _core.Pool(device=-1, name="prop", quota=quota)
    live: list[_core.Buffer] = []
    for is_alloc, n in ops:
        if is_alloc or not live:
            try:
                live.append(pool.allocate(n))
            except gp.QuotaExceededError:
                assert sum(b.nbytes for b in live) + n > quota
        else:
            live.pop(n % len(live))  # dropping the last reference frees it
        s = pool.stats()
        assert s["current_bytes"] <= quota
        assert s["allocated_bytes"] - s["freed_bytes"] == s["current_bytes"]
        assert s["current_bytes"] == sum(b.nbytes for b in live)
        assert s["peak_bytes"] >= s["current_bytes"]
        assert s["num_allocs"] - s["num_frees"] == len(live)
    live.clear()
    s = pool.stats()
    assert s["current_bytes"] == 0 and s["num_allocs"] == s["num_frees"]
