"""Mutated safetensors and GGUF files: every outcome is a clean ModelLoadError or a correct load.

The default run mutates a few hundred files; the slow run
(``PYGPUKIT_SLOW=1 pytest -m slow tests/bad_input/test_fuzz_readers.py``, about 30 s on two
cores) draws 7,000 of each format, over 10,000 distinct files in all. A load that succeeds must
give tensors whose shapes match the header and whose bytes lie inside the file; reading them
all must not fault.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pygpukit.models import ModelLoadError, SafeTensorsFile
from pygpukit.models.gguf_io import GGUFSource
from pygpukit.models.tokenizer import Tokenizer

from ._files import safetensors_bytes, write_gguf

pytestmark = pytest.mark.filterwarnings("error")

DEFAULT_EXAMPLES = 200  # per format and mutation family in the default run
SLOW_EXAMPLES = 3500  # per format and family: 2 x 2 x 3500 = 14,000 draws in the slow run

_INTS = st.sampled_from([0, 1, -1, 3, 24, 40, 2**31, 2**32, 2**62, 2**63 - 1, 2**64 - 1, -(2**63)])
_JSON = st.recursive(
    st.none() | st.booleans() | _INTS | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
    max_leaves=6,
)


def _byte_mutation(raw: bytes, words_only: bool = False) -> st.SearchStrategy[bytes]:
    """Truncation, byte overwrites, an 8-byte integer written over a field, a cut-out range."""
    n = len(raw)
    pos = st.integers(0, n - 1)

    def flip(p: int, b: int) -> bytes:
        return raw[:p] + bytes([b]) + raw[p + 1 :]

    def word(p: int, v: int) -> bytes:
        p -= p % 4  # GGUF fields sit on 4-byte boundaries
        return raw[:p] + (v % 2**64).to_bytes(8, "little") + raw[p + 8 :]

    if words_only:
        return st.builds(word, pos, _INTS)
    return st.one_of(
        pos.map(lambda k: raw[:k]),
        st.builds(flip, pos, st.integers(0, 255)),
        st.builds(word, pos, _INTS),
        st.builds(lambda a, k: raw[:a] + raw[a + k :], pos, st.integers(1, 16)),
    )


def _header_mutation() -> st.SearchStrategy[bytes]:
    """A header field of a valid file replaced by an arbitrary JSON value (data unchanged)."""

    def build(tensor: str, key: str, value: Any, extra: Any) -> bytes:
        hdr = json.loads(safetensors_bytes()[8:].split(b"}}", 1)[0] + b"}}")
        hdr.setdefault(tensor, {})
        if isinstance(hdr[tensor], dict):
            hdr[tensor][key] = value
        if extra is not None:
            hdr["b"] = extra  # a second field changed at once
        return safetensors_bytes(hdr)

    return st.builds(
        build,
        st.sampled_from(["a", "b", "__metadata__", "c"]),
        st.sampled_from(["dtype", "shape", "data_offsets", "format"]),
        _JSON,
        st.none() | st.fixed_dictionaries({"dtype": st.sampled_from(["F32", "U8", "BF16"]),
                                           "shape": st.lists(_INTS, max_size=2),
                                           "data_offsets": st.lists(_INTS, max_size=3)}),
    )  # fmt: skip


def _check_safetensors(path: Path) -> None:
    try:
        f = SafeTensorsFile(path)
    except ModelLoadError:
        return
    size = path.stat().st_size
    for name in f.tensor_names:
        dtype, shape = f.tensor_info(name)
        t = f.tensor(name)
        assert t.shape == shape and t.dtype == dtype
        assert t.nbytes <= size
        np.asarray(t).tobytes()  # touch every byte


def _check_gguf(path: Path) -> None:
    try:
        src = GGUFSource(path)
        src.config_dict()
        Tokenizer.from_gguf_fields(src.meta, str(path))
    except ModelLoadError:
        return
    size = path.stat().st_size
    for name in src.tensor_names:
        w = np.asarray(src.tensor(name))
        assert w.nbytes <= 4 * size  # dequantized F32 at most


def _twice(raw: bytes, words_only: bool = False) -> st.SearchStrategy[bytes]:
    """One mutation, or a second on top of the first (a search space large enough that
    hypothesis does not run out of distinct files before the slow run's count)."""
    once = _byte_mutation(raw, words_only)
    again = once.flatmap(lambda r: _byte_mutation(r, words_only) if len(r) > 1 else st.just(r))
    return st.one_of(once, again)


def _run(
    mutations: st.SearchStrategy[bytes], check: Callable[[Path], None], n: int, fixed: bool
) -> int:
    """Check ``n`` mutated files; returns how many distinct files were checked. ``fixed``: the
    same draws every run (CI is reproducible; the slow run explores new files each time)."""
    seen: set[bytes] = set()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "fuzz.bin"

        @settings(
            max_examples=n,
            deadline=None,
            database=None,
            derandomize=fixed,
            suppress_health_check=list(HealthCheck),
        )
        @given(mutations)
        def one(raw: bytes) -> None:
            seen.add(raw)
            path.write_bytes(raw)
            check(path)

        one()
    return len(seen)


def _gguf_seed() -> bytes:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "seed.gguf"
        write_gguf(p)
        return p.read_bytes()


def _count(slow: bool) -> int:
    return int(
        os.environ.get("PYGPUKIT_FUZZ_EXAMPLES", SLOW_EXAMPLES if slow else DEFAULT_EXAMPLES)
    )


CASES = {
    "safetensors-bytes": (lambda: _twice(safetensors_bytes()), _check_safetensors),
    "safetensors-header": (_header_mutation, _check_safetensors),
    "gguf-bytes": (lambda: _twice(_gguf_seed()), _check_gguf),
    "gguf-words": (lambda: _twice(_gguf_seed(), words_only=True), _check_gguf),
}


@pytest.mark.parametrize("case", list(CASES))
def test_fuzz_readers(case: str) -> None:
    make, check = CASES[case]
    n = _count(slow=False)
    assert _run(make(), check, n, fixed=True) >= n // 2  # distinct files, not repeats


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_fuzz_readers_slow(case: str) -> None:
    make, check = CASES[case]
    n = _count(slow=True)
    files = _run(make(), check, n, fixed=False)
    print(f"{case}: {files} distinct mutated files checked")
    assert files >= 0.6 * n  # hypothesis repeats some draws; the distinct total is > 10,000
