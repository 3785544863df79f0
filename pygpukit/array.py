"""GPUArray: a strided view of device (or host) memory owned by the Rust pool.

A GPUArray is (owner, base address, shape, element strides, element offset, dtype, device). The
owner is a Rust ``Buffer`` (returned to its pool, on its stream, when the last view drops), a
DLPack import or a foreign ``__cuda_array_interface__`` object kept alive for the view's lifetime.
Views (slicing with steps, transpose/permute, reshape of compatible layouts, broadcast) never copy.
"""

from __future__ import annotations

import operator
from types import ModuleType
from typing import Any

import numpy as np

from pygpukit import _convert, _layout, _memory
from pygpukit.dtypes import DataType, as_dtype
from pygpukit.runtime import Device

__all__ = ["GPUArray", "view_as_complex", "view_as_real"]

_ops_mod: ModuleType | None = None


def _ops() -> ModuleType:
    global _ops_mod
    if _ops_mod is None:
        import pygpukit.ops as mod

        _ops_mod = mod
    return _ops_mod


class GPUArray:
    __slots__ = (
        "__weakref__",
        "_buf",
        "_device",
        "_dtype",
        "_estrides",
        "_offset",
        "_ptr",
        "_readonly",
        "_shape",
    )

    _buf: Any
    _ptr: int
    _shape: tuple[int, ...]
    _estrides: tuple[int, ...]
    _offset: int
    _dtype: DataType
    _device: Device
    _readonly: bool

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "GPUArray is not constructed directly; use gp.empty/zeros/from_numpy/asarray"
        )

    @classmethod
    def _make(
        cls,
        buf: Any,
        ptr: int,
        shape: tuple[int, ...],
        estrides: tuple[int, ...],
        offset: int,
        dtype: DataType,
        device: Device,
        readonly: bool = False,
    ) -> GPUArray:
        a = object.__new__(cls)
        a._buf = buf
        a._ptr = ptr
        a._shape = shape
        a._estrides = estrides
        a._offset = offset
        a._dtype = dtype
        a._device = device
        a._readonly = readonly
        return a

    def _view(self, shape: tuple[int, ...], estrides: tuple[int, ...], offset: int) -> GPUArray:
        if self._dtype.is_packed:
            _check_packed_view(shape, estrides, offset)
        return GPUArray._make(
            self._buf, self._ptr, shape, estrides, offset, self._dtype, self._device, self._readonly
        )

    # ----- metadata -------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> DataType:
        return self._dtype

    @property
    def device(self) -> Device:
        return self._device

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return _layout.numel(self._shape)

    @property
    def itemsize(self) -> int:
        return self._dtype.itemsize

    @property
    def nbytes(self) -> int:
        return _memory.packed_nbytes(self._dtype, self.size)

    @property
    def strides(self) -> tuple[int, ...]:
        """Strides in bytes (NumPy convention)."""
        if self._dtype.is_packed:
            raise TypeError("packed int4 has no byte strides; use element_strides")
        return tuple(s * self._dtype.itemsize for s in self._estrides)

    @property
    def element_strides(self) -> tuple[int, ...]:
        """Strides in elements (DLPack / torch convention, what kernels take)."""
        return self._estrides

    @property
    def byte_offset(self) -> int:
        """Offset of the first element from the owner's base address, in bytes."""
        if self._dtype.is_packed:
            return self._offset // 2
        return self._offset * self._dtype.itemsize

    @property
    def owner(self) -> Any:
        """The object that owns the memory (a pool Buffer, a DLPack import, a foreign array)."""
        return self._buf

    @property
    def readonly(self) -> bool:
        """True for imports of memory its producer marked read-only (DLPack's flag, a read-only
        __cuda_array_interface__); every write to it raises gp.ReadOnlyError. Views keep it."""
        return self._readonly

    @property
    def internal_overlap(self) -> bool:
        """Whether two elements of this view share memory (a broadcast view, stride 0). Such a
        view can be read but not written: gp.OverlapError (NumPy's internal overlap check)."""
        if _layout.is_contiguous(self._shape, self._estrides):
            return False
        return bool(_layout.overlap_reason(self._shape, self._estrides))

    def data_ptr(self) -> int:
        """Address of the first element (what Triton and native kernels receive)."""
        return self._ptr + self.byte_offset

    @property
    def ptr(self) -> int:
        return self.data_ptr()

    def is_contiguous(self) -> bool:
        return _layout.is_contiguous(self._shape, self._estrides)

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d array")
        return self._shape[0]

    def __repr__(self) -> str:
        head = f"dtype={self._dtype.name}, device='{self._device}'"
        if self.size > 1000:
            return f"GPUArray(shape={self._shape}, {head})"
        body = np.array2string(self.to_numpy(), separator=", ", prefix="GPUArray(")
        return f"GPUArray({body}, {head})"

    # ----- views ------------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> GPUArray:
        shape, strides, offset = _index(self._shape, self._estrides, self._offset, key)
        return self._view(shape, strides, offset)

    def __setitem__(self, key: Any, value: Any) -> None:
        target = self[key]
        _memory.check_target(self if self._readonly else target, "setitem")
        if isinstance(value, (bool, int, float, complex, np.generic)) or value is None:
            _memory.fill(target, value)
            return
        src = value if isinstance(value, GPUArray) else None
        if src is None:
            host = _convert.array(np.asarray(value), self._dtype, "setitem")
            _memory.upload(target, np.broadcast_to(host, target._shape))
            return
        if src._dtype is not self._dtype:
            src = src.astype(self._dtype)
        if src._device != self._device:
            src = src.to(self._device)
        _memory.copy_into(target, src.broadcast_to(target._shape))

    def reshape(self, *shape: Any) -> GPUArray:
        """A view when the layout allows it (NumPy's rule), otherwise a contiguous copy."""
        new = _layout.infer_reshape(self.size, _layout_arg(shape))
        strides = _layout.reshape_strides(self._shape, self._estrides, new)
        if strides is None:
            return self.copy().reshape(new)
        return self._view(new, strides, self._offset)

    def view(self, *shape: Any) -> GPUArray:
        """Like reshape but never copies: raises when the layout cannot be viewed as ``shape``."""
        new = _layout.infer_reshape(self.size, _layout_arg(shape))
        strides = _layout.reshape_strides(self._shape, self._estrides, new)
        if strides is None:
            raise ValueError(
                f"view: shape {self._shape} with element strides {self._estrides} cannot be "
                f"viewed as {new} without a copy; use reshape() or contiguous() first"
            )
        return self._view(new, strides, self._offset)

    def flatten(self) -> GPUArray:
        return self.reshape(-1)

    def permute(self, *axes: Any) -> GPUArray:
        perm = _layout_arg(axes)
        nd = self.ndim
        norm = tuple(_axis(a, nd) for a in perm)
        if sorted(norm) != list(range(nd)):
            raise ValueError(f"permute: axes {perm} are not a permutation of {nd} dims")
        return self._view(
            tuple(self._shape[a] for a in norm),
            tuple(self._estrides[a] for a in norm),
            self._offset,
        )

    def transpose(self, *axes: Any) -> GPUArray:
        """Reverse the axes (no arguments) or permute them; a view."""
        if not axes or axes == (None,):
            return self.permute(tuple(range(self.ndim - 1, -1, -1)))
        return self.permute(*axes)

    @property
    def T(self) -> GPUArray:
        return self.transpose()

    def swapaxes(self, a: int, b: int) -> GPUArray:
        perm = list(range(self.ndim))
        ia, ib = _axis(a, self.ndim), _axis(b, self.ndim)
        perm[ia], perm[ib] = perm[ib], perm[ia]
        return self.permute(tuple(perm))

    def squeeze(self, axis: int | None = None) -> GPUArray:
        if axis is None:
            keep = [i for i, n in enumerate(self._shape) if n != 1]
        else:
            ax = _axis(axis, self.ndim)
            if self._shape[ax] != 1:
                raise ValueError(f"squeeze: axis {axis} has size {self._shape[ax]}, not 1")
            keep = [i for i in range(self.ndim) if i != ax]
        return self._view(
            tuple(self._shape[i] for i in keep),
            tuple(self._estrides[i] for i in keep),
            self._offset,
        )

    def unsqueeze(self, axis: int) -> GPUArray:
        ax = _axis(axis, self.ndim + 1)
        shape = (*self._shape[:ax], 1, *self._shape[ax:])
        inner = self._estrides[ax] * self._shape[ax] if ax < self.ndim else 1
        return self._view(shape, (*self._estrides[:ax], inner, *self._estrides[ax:]), self._offset)

    def broadcast_to(self, shape: Any) -> GPUArray:
        """A view with stride 0 along broadcast dims (NumPy rules). Its elements share memory,
        so it can be read but not written (setitem or out= raise gp.OverlapError)."""
        target = _layout.as_shape(shape)
        if _layout.broadcast_shapes(self._shape, target) != target:
            raise ValueError(f"cannot broadcast shape {self._shape} to {target}")
        lead = len(target) - self.ndim
        strides = [0] * lead + [
            s if n == t else 0
            for n, t, s in zip(self._shape, target[lead:], self._estrides, strict=True)
        ]
        return self._view(target, tuple(strides), self._offset)

    expand = broadcast_to

    # ----- copies -----------------------------------------------------------------------------
    def empty_like_contiguous(self, device: Device | None = None) -> GPUArray:
        from pygpukit.creation import empty

        return empty(self._shape, self._dtype, device or self._device)

    def copy(self) -> GPUArray:
        """A new contiguous array with the same values, on the same device."""
        out = self.empty_like_contiguous()
        _memory.copy_into(out, self)
        return out

    def contiguous(self) -> GPUArray:
        return self if self.is_contiguous() else self.copy()

    def astype(self, dtype: Any) -> GPUArray:
        """Convert to ``dtype`` (always a new array; the ``cast`` op does the conversion)."""
        dt = as_dtype(dtype)
        if dt is self._dtype:
            return self.copy()
        if dt.is_complex or self._dtype.is_complex:
            from pygpukit._complex import complex_astype

            return complex_astype(self, dt)
        if dt.is_packed or self._dtype.is_packed:
            from pygpukit.creation import from_numpy

            return from_numpy(self.to_numpy().astype(dt.np_dtype), device=self._device)
        return _ops().cast(self, dt)  # type: ignore[no-any-return]

    def to_numpy(self) -> np.ndarray:
        """A host NumPy copy (waits for pending work on the current stream)."""
        return _memory.to_numpy(self)

    def numpy(self) -> np.ndarray:
        return self.to_numpy()

    def to(self, device: Any) -> GPUArray:
        from pygpukit import runtime

        dev = runtime.device(device)
        if dev == self._device:
            return self
        out = self.empty_like_contiguous(dev)
        _memory.copy_into(out, self)
        return out

    def cpu(self) -> GPUArray:
        return self.to("cpu")

    def cuda(self, index: int = 0) -> GPUArray:
        return self.to(f"cuda:{index}")

    def fill_(self, value: Any) -> GPUArray:
        _memory.fill(self, value)
        return self

    def item(self) -> Any:
        if self.size != 1:
            raise ValueError(f"item() needs an array of one element, got shape {self._shape}")
        v = self.to_numpy().reshape(())
        if self._dtype.is_complex:
            return complex(v)
        if self._dtype.is_floating:
            return float(v)
        if self._dtype.kind == "b":
            return bool(v)
        return int(v)

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __bool__(self) -> bool:
        return bool(self.item())

    def __index__(self) -> int:
        if not self._dtype.is_integer:
            raise TypeError(f"only integer arrays convert to an index, not {self._dtype.name}")
        return int(self.item())

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """NumPy conversion, zero-copy for CPU arrays; device arrays need an explicit to_numpy()."""
        if self._device.type != "cpu":
            raise TypeError(
                f"cannot convert a {self._device} array implicitly (that would hide a device "
                "sync and copy); call .to_numpy()"
            )
        a = self.to_numpy() if (copy or self._dtype.is_packed) else _memory.host_view(self)
        return a if dtype is None else a.astype(dtype, copy=False)

    # ----- interop ---------------------------------------------------------------------------
    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        from pygpukit import interop

        return interop.cuda_array_interface(self)

    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: Any = None,
        dl_device: Any = None,
        copy: bool | None = None,
    ) -> Any:
        from pygpukit import interop

        return interop.to_dlpack(
            self, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy
        )

    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, self._device.index) if self._device.type == "cuda" else (1, 0)

    # ----- operators (each one a routed op) ----------------------------------------------------
    def __add__(self, o: Any) -> GPUArray:
        return _ops().add(self, o)  # type: ignore[no-any-return]

    def __radd__(self, o: Any) -> GPUArray:
        return _ops().add(o, self)  # type: ignore[no-any-return]

    def __sub__(self, o: Any) -> GPUArray:
        return _ops().sub(self, o)  # type: ignore[no-any-return]

    def __rsub__(self, o: Any) -> GPUArray:
        return _ops().sub(o, self)  # type: ignore[no-any-return]

    def __mul__(self, o: Any) -> GPUArray:
        return _ops().mul(self, o)  # type: ignore[no-any-return]

    def __rmul__(self, o: Any) -> GPUArray:
        return _ops().mul(o, self)  # type: ignore[no-any-return]

    def __truediv__(self, o: Any) -> GPUArray:
        return _ops().div(self, o)  # type: ignore[no-any-return]

    def __rtruediv__(self, o: Any) -> GPUArray:
        return _ops().div(o, self)  # type: ignore[no-any-return]

    def __pow__(self, o: Any) -> GPUArray:
        return _ops().pow(self, o)  # type: ignore[no-any-return]

    def __matmul__(self, o: Any) -> GPUArray:
        return _ops().matmul(self, o)  # type: ignore[no-any-return]

    def __rmatmul__(self, o: Any) -> GPUArray:
        return _ops().matmul(o, self)  # type: ignore[no-any-return]

    def __neg__(self) -> GPUArray:
        return _ops().neg(self)  # type: ignore[no-any-return]

    def __pos__(self) -> GPUArray:
        return self

    def __abs__(self) -> GPUArray:
        return _ops().abs(self)  # type: ignore[no-any-return]

    def __eq__(self, o: Any) -> GPUArray:  # type: ignore[override]
        return _ops().eq(self, o)  # type: ignore[no-any-return]

    def __ne__(self, o: Any) -> GPUArray:  # type: ignore[override]
        return _ops().ne(self, o)  # type: ignore[no-any-return]

    def __lt__(self, o: Any) -> GPUArray:
        return _ops().lt(self, o)  # type: ignore[no-any-return]

    def __le__(self, o: Any) -> GPUArray:
        return _ops().le(self, o)  # type: ignore[no-any-return]

    def __gt__(self, o: Any) -> GPUArray:
        return _ops().gt(self, o)  # type: ignore[no-any-return]

    def __ge__(self, o: Any) -> GPUArray:
        return _ops().ge(self, o)  # type: ignore[no-any-return]

    __hash__ = None  # type: ignore[assignment]


def _layout_arg(args: tuple[Any, ...]) -> tuple[int, ...]:
    """Accept both f(2, 3) and f((2, 3))."""
    if len(args) == 1 and not isinstance(args[0], int):
        return tuple(operator.index(a) for a in args[0])
    return tuple(operator.index(a) for a in args)


def _axis(axis: Any, ndim: int) -> int:
    a = operator.index(axis)
    if not -ndim <= a < ndim:
        raise IndexError(f"axis {axis} is out of range for an array of {ndim} dims")
    return a % ndim


def _check_packed_view(shape: tuple[int, ...], estrides: tuple[int, ...], offset: int) -> None:
    if offset % 2 or (shape and (shape[-1] % 2 or (shape[-1] > 1 and estrides[-1] != 1))):
        raise ValueError(
            "packed int4 views must keep whole bytes: the last dim must stay contiguous and "
            "even, and views start at an even element"
        )


def _index(
    shape: tuple[int, ...], strides: tuple[int, ...], offset: int, key: Any
) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    keys = key if isinstance(key, tuple) else (key,)
    n_real = sum(1 for k in keys if k is not None and k is not Ellipsis)
    if n_real > len(shape):
        raise IndexError(f"too many indices ({n_real}) for an array of {len(shape)} dims")
    if sum(1 for k in keys if k is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    out_shape: list[int] = []
    out_strides: list[int] = []
    dim = 0
    for k in keys:
        if k is None:
            out_shape.append(1)
            out_strides.append(0)
        elif k is Ellipsis:
            take = len(shape) - n_real
            out_shape.extend(shape[dim : dim + take])
            out_strides.extend(strides[dim : dim + take])
            dim += take
        elif isinstance(k, slice):
            start, stop, step = k.indices(shape[dim])
            length = len(range(start, stop, step))
            if length:
                offset += start * strides[dim]
            out_shape.append(length)
            out_strides.append(strides[dim] * step)
            dim += 1
        else:
            if isinstance(k, (GPUArray, np.ndarray, list)) or isinstance(k, bool):
                raise TypeError(
                    "advanced (array or boolean) indexing is not supported on GPUArray; "
                    "use gp.embedding for gathers"
                )
            try:
                i = operator.index(k)
            except TypeError:
                raise TypeError(f"invalid index {k!r} of type {type(k).__name__}") from None
            n = shape[dim]
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {dim} with size {n}")
            offset += (i % n) * strides[dim]
            dim += 1
    out_shape.extend(shape[dim:])
    out_strides.extend(strides[dim:])
    return tuple(out_shape), tuple(out_strides), offset


# The complex views live in pygpukit/_complex.py (they need creation, which needs this module)
# and are importable from here as well, next to the array type they view.
from pygpukit._complex import view_as_complex, view_as_real  # noqa: E402
