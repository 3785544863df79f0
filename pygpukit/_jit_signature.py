"""Parsing the parameter lists of CUDA ``__global__`` functions for ``gp.jit``.

Each parameter becomes a ``Param``: a pointer (with its pointee type, which decides which
GPUArray dtypes it accepts) or a scalar (with its struct code and size, for range checks and
packing into the launch's argument buffer).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Param", "parse_kernels"]

# C scalar types by value: struct format code, byte size.
_SCALARS: dict[str, tuple[str, int]] = {}
for _names, _code, _size in (
    (("float",), "f", 4),
    (("double",), "d", 8),
    (("int", "signed", "signed int", "int32_t"), "i", 4),
    (("unsigned", "unsigned int", "uint32_t"), "I", 4),
    (
        (
            *("long", "long int", "long long", "long long int", "signed long"),
            *("signed long long", "int64_t", "ptrdiff_t", "ssize_t", "intptr_t"),
        ),
        "q",
        8,
    ),
    (
        (
            *("unsigned long", "unsigned long int", "unsigned long long"),
            *("unsigned long long int", "uint64_t", "size_t", "uintptr_t"),
        ),
        "Q",
        8,
    ),
    (("short", "short int", "signed short", "int16_t"), "h", 2),
    (("unsigned short", "unsigned short int", "uint16_t"), "H", 2),
    (("char", "signed char", "int8_t"), "b", 1),
    (("unsigned char", "uint8_t"), "B", 1),
    (("bool",), "?", 1),
    (("half", "__half"), "e16", 2),
    (("__nv_bfloat16", "nv_bfloat16"), "bf16", 2),
):
    for _n in _names:
        _SCALARS[_n] = (_code, _size)

# Pointee types whose arrays must have one dtype; any other pointee takes any array.
_POINTEE_DTYPES: dict[str, tuple[str, ...]] = {
    "float": ("float32",),
    "double": ("float64",),
    "half": ("float16",),
    "__half": ("float16",),
    "__nv_bfloat16": ("bfloat16",),
    "nv_bfloat16": ("bfloat16",),
    "int": ("int32",),
    "int32_t": ("int32",),
    "long long": ("int64",),
    "int64_t": ("int64",),
    "long": ("int64",),
    "short": ("int16",),
    "int16_t": ("int16",),
    "int8_t": ("int8",),
    "signed char": ("int8",),
    "uint8_t": ("uint8", "bool"),
    "bool": ("bool", "uint8"),
}
_QUALIFIERS = frozenset(
    {"const", "volatile", "__restrict__", "__restrict", "restrict", "__grid_constant__", "register"}
)
_TYPE_WORDS = frozenset({"unsigned", "signed", "long", "short", "int", "char"})
_SKIP_CALLS = frozenset(
    {"__launch_bounds__", "__attribute__", "__maxnreg__", "__cluster_dims__", "__declspec"}
)


@dataclass(frozen=True)
class Param:
    """One kernel parameter: its name (None when unnamed), C type, and how it is passed."""

    name: str | None
    ctype: str
    pointer: bool
    code: str  # struct code ("P" for pointers; "e16"/"bf16" for 16-bit floats)
    const_pointee: bool = False  # `const T*`: the kernel promises not to write through it

    @property
    def dtypes(self) -> tuple[str, ...] | None:
        """Array dtypes a pointer parameter accepts (None: any)."""
        return _POINTEE_DTYPES.get(self.ctype) if self.pointer else None


def _strip_comments(src: str) -> str:
    return re.sub(r"//[^\n]*|/\*.*?\*/", " ", src, flags=re.S)


def _close(text: str, i: int) -> int:
    """Index of the parenthesis closing the one at text[i]."""
    depth = 0
    for j in range(i, len(text)):
        c = text[j]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return j
    raise ValueError("unbalanced parentheses in a __global__ declaration")


def _split_params(text: str) -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for c in text:
        if c in "(<[":
            depth += 1
        elif c in ")>]":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def _param(func: str, text: str) -> Param:
    t = text.split("=", 1)[0].strip()  # default arguments
    tokens = re.findall(r"[A-Za-z_]\w*(?:::\w+)*|\*|&|\[|\]", t)
    pointer = "*" in tokens or "[" in tokens
    if "&" in tokens:
        raise ValueError(f"jit: kernel {func}: parameter {text!r} is a reference, not allowed")
    words = [w for w in tokens if w not in _QUALIFIERS and w not in ("*", "[", "]", "struct")]
    name = None
    if len(words) >= 2 and words[-1] not in _TYPE_WORDS:
        name = words.pop()
    ctype = " ".join(words)
    if pointer:
        star = tokens.index("*") if "*" in tokens else tokens.index("[")
        return Param(name, ctype, True, "P", "const" in tokens[:star])
    got = _SCALARS.get(ctype)
    if got is None:
        raise ValueError(
            f"jit: kernel {func}: parameter {name or repr(text)} has type {ctype!r} passed by "
            "value, which gp.jit cannot pack (supported: integer types, float, double, bool, "
            "__half, __nv_bfloat16, and pointers)"
        )
    return Param(name, ctype, False, got[0])


def parse_kernels(source: str) -> dict[str, tuple[Param, ...]]:
    """The ``__global__`` functions of ``source`` and their parameters, in source order."""
    text = _strip_comments(source)
    found: dict[str, tuple[Param, ...]] = {}
    for m in re.finditer(r"\b__global__\b", text):
        i = m.end()
        while True:
            j = text.find("(", i)
            if j < 0:
                raise ValueError("jit: a __global__ declaration has no parameter list")
            ident = re.search(r"([A-Za-z_]\w*)\s*$", text[i:j])
            if ident is None:
                raise ValueError(
                    f"jit: cannot read the __global__ declaration near {text[m.start() : j + 1]!r}"
                )
            if ident.group(1) in _SKIP_CALLS:
                i = _close(text, j) + 1
                continue
            name = ident.group(1)
            k = _close(text, j)
            body = text[j + 1 : k].strip()
            params = (
                () if body in ("", "void") else tuple(_param(name, p) for p in _split_params(body))
            )
            found[name] = params
            break
    return found
