"""The native backend: cuBLASLt products through the Rust core, and the CUDA kernels of the C++
extension ``_pygpukit_native`` (built from ``native/``).

One module per op family, named as the Triton home's (pygpukit/backends/triton_kernels/) and
exposing the same functions with the same signatures, so ``ROUTE=<op>:native`` serves an op by
the same call as the Triton twin:

- ``matmul.py`` (matmul, linear, linear_bias_gelu) and ``matmul_fp8.py`` on cuBLASLt (always
  built into pygpukit._core); ``matmul_int.py`` serves integer results for matmul;
- every other family on the extension: the adapter takes validated GPUArrays (the ops layer
  checked shapes, dtypes and devices), allocates its output from pygpukit's pool on the current
  stream, and passes raw pointers, element strides and that stream to the extension, which
  allocates nothing and releases the GIL while it launches.

Where the libraries come from: ``_libs.py``. Plumbing shared with the Triton home:
pygpukit/backends/_support/.
"""

from __future__ import annotations

from pygpukit.backends._record import Backend
from pygpukit.backends.native._libs import cublaslt_status, extension, status

__all__ = ["BACKEND", "cublaslt_status", "extension", "status"]

# Families served by cuBLASLt (pygpukit._core) rather than the extension.
_CUBLASLT_FAMILIES = frozenset({"matmul", "matmul_fp8"})
# Families whose adapters also launch another family's kernels (bool/fp8 results and strided
# inputs go through the copy family's cast and copy).
_NEEDS = {"unary": ("copy",), "elementwise": ("copy",), "reduce": ("copy",)}
# Python families whose kernels are another family's (qgemm.py re-exports the gemv kernels).
_BUILT_AS = {"qgemm": "gemv"}


def _probe() -> tuple[bool, str]:
    # cuBLASLt and NVRTC live in pygpukit._core (always built); each family says what it lacks
    # (family_status). Without a driver, nothing runs.
    from pygpukit import _core

    ok, why = _core.driver_status()
    if ok:
        return True, ""
    reason = f"no CUDA driver ({why})"
    built, why_not = status()
    if not built:
        reason += f"; {why_not}"
    return False, reason


def _family_status(family: str) -> tuple[bool, str]:
    if family in _CUBLASLT_FAMILIES:
        ok, why = cublaslt_status()
        return (True, "") if ok else (False, f"cuBLASLt is not available: {why}")
    ok, why = status()
    if not ok:
        return False, why + "; build it with scripts/build_native.sh"
    # A partial build (PYGPUKIT_NATIVE_FAMILIES) lacks the other families' kernels.
    built = getattr(extension(), "families", ())
    family = _BUILT_AS.get(family, family)
    for fam in (family, *_NEEDS.get(family, ())):
        if fam not in built:
            needed = "" if fam == family else f" (the {family} family needs it)"
            return False, (
                f"the {fam} family of _pygpukit_native is not built{needed}; this build has "
                f"{', '.join(built) or 'none'}; rebuild with scripts/build_native.sh"
            )
    return True, ""


BACKEND: Backend = Backend(
    name="native",
    package=__name__,
    devices=frozenset({"cuda"}),
    probe=_probe,
    family_status=_family_status,
)
