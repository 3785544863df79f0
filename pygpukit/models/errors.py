"""Exceptions of the LLM engine. Each names the file, field or limit that is wrong.

All derive from ValueError (bad input, not a runtime fault), so callers that only know the
standard exceptions still catch them, and a failed load leaves the process usable.
"""

from __future__ import annotations

__all__ = [
    "ModelLoadError",
    "UnsupportedModelError",
    "ContextLengthError",
]


class ModelLoadError(ValueError):
    """A checkpoint, config or tokenizer file is missing, truncated or malformed."""


class UnsupportedModelError(ModelLoadError):
    """The model is well-formed but uses an architecture or format this engine does not run."""


class ContextLengthError(ValueError):
    """A prompt (plus the requested new tokens) does not fit the model's context or the cache."""
