"""``python -m pygpukit info``: device, driver, memory, and which backends are usable (and why)."""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import sys
from typing import Any


def _module_version(name: str) -> tuple[str | None, str]:
    """(version, "") when importable, else (None, reason)."""
    try:
        mod = importlib.import_module(name)
    except Exception as exc:  # any import failure is a reason to report, not to crash
        return None, f"{type(exc).__name__}: {exc}"
    return str(getattr(mod, "__version__", "unknown")), ""


def collect() -> dict[str, Any]:
    import numpy as np

    import pygpukit as gp
    from pygpukit import _core

    ok, reason = _core.driver_status()
    report: dict[str, Any] = {
        "pygpukit": gp.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "driver": {"available": ok, "reason": reason},
        "devices": [],
        "default_device": str(gp.default_device()),
        "backends": {},
    }
    if ok:
        v = _core.driver_version()
        report["driver"]["cuda_version"] = f"{v // 1000}.{(v % 1000) // 10}"
        for i in range(_core.device_count()):
            props = _core.device_properties(i)
            free, total = _core.mem_get_info(i)
            props.update(free_memory=free, total_memory=total)
            report["devices"].append(props)
    report["backends"]["numpy"] = {"available": True, "version": np.__version__}
    report["backends"]["native"] = _native_entry(ok, reason)
    for name, module in (("triton", "triton"), ("torch", "torch")):
        ver, why = _module_version(module)
        entry: dict[str, Any] = {"available": ver is not None}
        if ver is not None:
            entry["version"] = ver
        else:
            entry["reason"] = why
        if name == "triton" and ver is not None and not ok:
            entry.update(available=False, reason="no CUDA driver: " + reason)
        report["backends"][name] = entry
    report["backends"]["torch"]["note"] = "optional, interop and benchmarks only"
    return report


def _native_entry(driver_ok: bool, driver_reason: str) -> dict[str, Any]:
    """cuBLASLt and NVRTC (loaded at run time by the Rust core) and the C++ kernel extension."""
    from pygpukit.backends.native import _libs as native

    jit = importlib.import_module("pygpukit.jit")  # the module (gp.jit is the function)

    blas_ok, blas = native.cublaslt_status()
    nvrtc_ok, nvrtc_where, _, _ = jit._load()
    kernels, why = _module_version("_pygpukit_native")
    parts = [
        f"cuBLASLt {'at ' + blas if blas_ok else 'absent: ' + blas}",
        f"NVRTC {'at ' + nvrtc_where if nvrtc_ok else 'absent: ' + nvrtc_where}",
        "C++ kernels "
        + (f"version {kernels}{_native_archs()}" if kernels else f"not built ({why})"),
    ]
    entry: dict[str, Any] = {"available": driver_ok and blas_ok, "parts": parts}
    if not driver_ok:
        entry["reason"] = "no CUDA driver: " + driver_reason
    elif not blas_ok:
        entry["reason"] = "cuBLASLt not found: " + blas
    else:
        entry["version"] = "cuBLASLt + NVRTC"
    return entry


def _native_archs() -> str:
    """' for sm_90a, ...' from the built extension (its CUDA architectures)."""
    try:
        archs = str(importlib.import_module("_pygpukit_native").cuda_archs)
    except Exception:
        return ""
    return " for " + ", ".join("sm_" + a for a in archs.split(",") if a)


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def render(r: dict[str, Any]) -> str:
    lines = [
        f"pygpukit {r['pygpukit']}  (Python {r['python']}, {r['platform']})",
        f"default device: {r['default_device']}",
    ]
    drv = r["driver"]
    if drv["available"]:
        lines.append(f"CUDA driver: available, CUDA {drv['cuda_version']}")
    else:
        lines.append(f"CUDA driver: absent ({drv['reason']})")
    for i, d in enumerate(r["devices"]):
        lines.append(
            f"  cuda:{i} {d['name']}  sm_{d['major']}{d['minor']}  {d['sm_count']} SMs  "
            f"{_gib(d['total_memory'])} ({_gib(d['free_memory'])} free)  "
            f"L2 {d['l2_cache_bytes'] // 2**20} MiB"
        )
    lines.append("backends:")
    for name, b in r["backends"].items():
        state = f"yes ({b['version']})" if b["available"] else f"no - {b['reason']}"
        note = f"  [{b['note']}]" if "note" in b else ""
        lines.append(f"  {name:<7} {state}{note}")
        for part in b.get("parts", []):
            lines.append(f"          {part}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    report = collect()
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("info", help="devices, driver, memory and available backends")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)
