"""Chat templates: the model's own Jinja template rendered as HF transformers renders it.

Following transformers' chat template utilities (utils/chat_template_utils.py): a sandboxed
Jinja2 environment with trim_blocks and lstrip_blocks, the ``raise_exception`` and
``strftime_now`` helpers, a ``tojson`` filter that keeps non-ASCII text, and the variables
``messages``, ``add_generation_prompt``, ``bos_token``, ``eos_token`` plus any template keyword
(Qwen3's ``enable_thinking``).

Qwen3-style reasoning: the model writes ``<think>...</think>`` before its answer. ThinkFilter
removes that block from streamed text when the user asked to hide it ("hide"); "show" passes it
through; "off" asks the template not to think (enable_thinking=False).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from pygpukit.models.errors import ModelLoadError

__all__ = ["ChatTemplate", "ThinkFilter", "THINK_MODES"]

THINK_MODES = ("show", "hide", "off")


def _raise(message: str) -> None:
    from jinja2.exceptions import TemplateError

    raise TemplateError(message)


def _tojson(
    x: Any,
    ensure_ascii: bool = False,
    indent: Any = None,
    separators: Any = None,
    sort_keys: bool = False,
) -> str:
    return json.dumps(
        x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


class ChatTemplate:
    def __init__(self, source: str, bos_token: str | None = None, eos_token: str | None = None):
        from jinja2 import TemplateError
        from jinja2.ext import loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        env = ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]
        )
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise
        env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
        try:
            self.template = env.from_string(source)
        except TemplateError as exc:
            raise ModelLoadError(f"the chat template does not parse: {exc}") from None
        self.source = source
        self.bos_token = bos_token or ""
        self.eos_token = eos_token or ""

    @property
    def supports_thinking(self) -> bool:
        return "enable_thinking" in self.source or "<think>" in self.source

    def render(
        self,
        messages: list[dict[str, str]],
        add_generation_prompt: bool = True,
        **kwargs: Any,
    ) -> str:
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or "role" not in m or "content" not in m:
                raise ValueError(f"message {i} must be a dict with 'role' and 'content', got {m!r}")
        return str(
            self.template.render(
                messages=messages,
                add_generation_prompt=add_generation_prompt,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
                **kwargs,
            )
        )


class ThinkFilter:
    """Streaming filter that drops ``<think>...</think>`` (mode "hide") and passes everything
    through otherwise. Text that might be the start of a marker is held back until it is known."""

    OPEN, CLOSE = "<think>", "</think>"

    def __init__(self, mode: str = "show") -> None:
        if mode not in THINK_MODES:
            raise ValueError(f"think mode must be one of {THINK_MODES}, got {mode!r}")
        self.hide = mode == "hide"
        self.inside = False
        self.after_close = False  # drop the newlines that follow </think>
        self.pending = ""

    def push(self, text: str) -> str:
        if not self.hide:
            return text
        self.pending += text
        out: list[str] = []
        while True:
            if self.after_close and not self.inside:
                self.pending = self.pending.lstrip("\n")
                if not self.pending:
                    return "".join(out)
                self.after_close = False
            marker = self.CLOSE if self.inside else self.OPEN
            i = self.pending.find(marker)
            if i >= 0:
                if not self.inside:
                    out.append(self.pending[:i])
                self.pending = self.pending[i + len(marker) :]
                self.inside = not self.inside
                self.after_close = not self.inside
                continue
            keep = _partial_suffix(self.pending, marker)
            if not self.inside:
                out.append(self.pending[: len(self.pending) - keep])
            self.pending = self.pending[len(self.pending) - keep :]
            return "".join(out)

    def flush(self) -> str:
        rest, self.pending = ("" if self.inside else self.pending), ""
        return rest if self.hide else ""


def _partial_suffix(text: str, marker: str) -> int:
    """Length of the longest suffix of text that is a proper prefix of marker."""
    for n in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:n]):
            return n
    return 0
