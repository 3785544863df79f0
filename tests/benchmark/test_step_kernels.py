"""benchmarks/tuning/step_kernels.py's table from an Nsight Compute CSV: kernels grouped by name
without template arguments, times and DRAM bytes summed per family in any of ncu's units."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.tuning import step_kernels  # noqa: E402

HEAD = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
        '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
        '"Metric Value"')  # fmt: skip


def _row(i: int, name: str, metric: str, unit: str, value: str) -> str:
    return (f'"{i}","1","python3","h","{name}","1","7","(128, 1, 1)","(896, 1, 1)","0","9.0",'
            f'"Command line profiler metrics","{metric}","{unit}","{value}"')  # fmt: skip


def test_family_drops_templates_and_parameters() -> None:
    name = "void pgk::gemv_detail::wa::gemv_wa_kernel<__nv_bfloat16, Nvfp4, Config<1, 4>>(Params)"
    assert step_kernels._family(name) == "gemv_wa_kernel"
    assert step_kernels._family("_gemv_dense_kernel") == "_gemv_dense_kernel"


def test_table_sums_each_family(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gemv = "void k::gemv<float, 2>(P)"  # two launches of the same grid and bytes
    lines = [
        "==PROF== Connected to process 1",
        HEAD,
        _row(0, gemv, "dram__bytes_read.sum", "Mbyte", "4.00"),
        _row(0, gemv, "gpu__time_duration.sum", "usecond", "2.00"),
        _row(1, "norm_kernel", "dram__bytes_read.sum", "Kbyte", "8.00"),
        _row(1, "norm_kernel", "gpu__time_duration.sum", "ns", "1,000.00"),
        _row(2, "void k::gemv<half, 4>(P)", "dram__bytes_read.sum", "byte", "4,000,000"),
        _row(2, "void k::gemv<half, 4>(P)", "gpu__time_duration.sum", "usecond", "2.00"),
        _row(3, gemv, "dram__bytes_read.sum", "MB", "1.00"),
        _row(3, gemv, "gpu__time_duration.sum", "us", "1.00"),
    ]
    csv_path = tmp_path / "step.csv"
    csv_path.write_text("\n".join(lines) + "\n")
    step_kernels._table(str(csv_path), copy_gbs=2000.0)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "4 launches, 6.0 us in all (one at a time)"
    # gemv of 4 MB: 2 launches, 4 us, 8 MB -> 2000 GB/s, 100% of copy; norm: 1 us, 8 KB -> 8 GB/s
    assert out[3] == "| gemv (896, 1, 1) 4.0 MB | 2 | 4.0 | 66.7% | 8.0 | 2000 | 100% |"
    # equal times keep the order of their first launch
    assert out[4] == "| norm_kernel (896, 1, 1) 0.0 MB | 1 | 1.0 | 16.7% | 0.0 | 8 | 0% |"
    assert out[5] == "| gemv (896, 1, 1) 1.0 MB | 1 | 1.0 | 16.7% | 1.0 | 1000 | 50% |"
