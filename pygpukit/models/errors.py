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
    """A checkpoint, config or tokenizer file is missing, truncated or malformed.

    The message names the file and, where one is at fault, the tensor and the header or config
    field; the same are kept as ``file``, ``tensor`` and ``field`` (None where not known), so a
    caller can report or skip the file without parsing the text. Loading nothing is the only
    effect: no partial model, no read past the end of the file.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        tensor: str | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.file = file
        self.tensor = tensor
        self.field = field


class UnsupportedModelError(ModelLoadError):
    """The model is well-formed but uses an architecture or format this engine does not run."""


class ContextLengthError(ValueError):
    """A prompt (plus the requested new tokens) does not fit the model's context or the cache."""
