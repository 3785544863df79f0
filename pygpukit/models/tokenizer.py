"""Tokenizers: HF ``tokenizers`` from tokenizer.json, or a byte-level BPE built from GGUF metadata.

A model directory brings tokenizer.json (the fast tokenizer), tokenizer_config.json (bos/eos
tokens, add_bos_token, the chat template) and maybe chat_template.jinja / generation_config.json.
A GGUF file brings ``tokenizer.ggml.*``: for ``model == "gpt2"`` (byte-level BPE: GPT-2, Llama 3,
Qwen, SmolLM) the vocabulary, merges and token types are enough to rebuild the same tokenizer;
the pre-tokenizer split is chosen from ``tokenizer.ggml.pre`` the way llama.cpp does
(llama-vocab.cpp, LLAMA_VOCAB_PRE_TYPE_*). Control and user-defined tokens become special added
tokens, so chat markers such as <|im_start|> encode to one id.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pygpukit.models.errors import ModelLoadError, UnsupportedModelError

__all__ = ["Tokenizer", "StreamDecoder"]

# Split patterns of llama.cpp's pre-tokenizers (llama-vocab.cpp), by tokenizer.ggml.pre.
_GPT2_RE = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_LLAMA3_RE = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_RE = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# pre name -> (split each digit first, regex)
_PRE: dict[str, tuple[bool, str]] = {
    "default": (False, _GPT2_RE),
    "gpt2": (False, _GPT2_RE),
    "gpt-2": (False, _GPT2_RE),
    "smollm": (True, _GPT2_RE),
    "starcoder": (True, _GPT2_RE),
    "refact": (True, _GPT2_RE),
    "llama-bpe": (False, _LLAMA3_RE),
    "llama3": (False, _LLAMA3_RE),
    "smaug-bpe": (False, _LLAMA3_RE),
    "qwen2": (False, _QWEN2_RE),
}
# GGUF token types (gguf.TokenType): 3 = CONTROL, 4 = USER_DEFINED.
_SPECIAL_TYPES = (3, 4)
# End-of-turn markers of common chat templates: generation also stops on these when present.
_END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>")


class Tokenizer:
    """Encode/decode plus what generation and chat need: bos/eos, stop ids, the chat template."""

    def __init__(
        self,
        backend: Any,
        bos_token: str | None = None,
        eos_token: str | None = None,
        chat_template: str | None = None,
        add_bos: bool = False,
        eos_ids: Sequence[int] = (),
    ) -> None:
        self.backend = backend
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.chat_template = chat_template
        self.add_bos = add_bos
        stop = {int(i) for i in eos_ids}
        for tok in (eos_token, *_END_OF_TURN):
            tid = backend.token_to_id(tok) if tok else None
            if tid is not None:
                stop.add(int(tid))
        self.stop_ids: frozenset[int] = frozenset(stop)

    @property
    def vocab_size(self) -> int:
        return int(self.backend.get_vocab_size(with_added_tokens=True))

    @property
    def bos_id(self) -> int | None:
        return self.backend.token_to_id(self.bos_token) if self.bos_token else None

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Token ids of text; special markers in the text (chat templates) map to their ids."""
        ids = list(self.backend.encode(text, add_special_tokens=False).ids)
        if add_special_tokens and self.add_bos and self.bos_id is not None:
            if not ids or ids[0] != self.bos_id:
                ids.insert(0, self.bos_id)
        return ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return str(self.backend.decode(list(ids), skip_special_tokens=skip_special_tokens))

    def token_to_id(self, token: str) -> int | None:
        tid = self.backend.token_to_id(token)
        return None if tid is None else int(tid)

    # ----- constructors ----------------------------------------------------------------------
    @classmethod
    def from_dir(cls, model_dir: str | Path) -> Tokenizer:
        from tokenizers import Tokenizer as HFTokenizer

        d = Path(model_dir)
        tj = d / "tokenizer.json"
        if not tj.is_file():
            raise ModelLoadError(f"{d}: tokenizer.json is missing (needed to encode text)")
        try:
            backend = HFTokenizer.from_file(str(tj))
        except Exception as exc:  # the Rust parser raises its own Exception type
            raise ModelLoadError(f"{tj}: cannot be parsed ({exc})") from None
        cfg = _read_json(d / "tokenizer_config.json")
        template = cfg.get("chat_template")
        if isinstance(template, list):  # [{"name": "default", "template": ...}, ...]
            named = {t.get("name"): t.get("template") for t in template}
            template = named.get("default") or next(iter(named.values()), None)
        jinja = d / "chat_template.jinja"
        if template is None and jinja.is_file():
            template = jinja.read_text(encoding="utf-8")
        gen = _read_json(d / "generation_config.json")
        eos = gen.get("eos_token_id", _read_json(d / "config.json").get("eos_token_id"))
        eos_ids = eos if isinstance(eos, list) else ([eos] if eos is not None else [])
        return cls(
            backend,
            bos_token=_token_str(cfg.get("bos_token")),
            eos_token=_token_str(cfg.get("eos_token")),
            chat_template=template,
            add_bos=bool(cfg.get("add_bos_token", False)),
            eos_ids=[int(i) for i in eos_ids],
        )

    @classmethod
    def from_gguf_fields(cls, meta: dict[str, Any], where: str = "GGUF") -> Tokenizer:
        """A byte-level BPE tokenizer from GGUF ``tokenizer.ggml.*`` metadata."""
        from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers
        from tokenizers import Tokenizer as HFTokenizer

        kind = meta.get("tokenizer.ggml.model")
        if kind != "gpt2":
            raise UnsupportedModelError(
                f"{where}: tokenizer model {kind!r} is not supported (only byte-level BPE, "
                "tokenizer.ggml.model = 'gpt2')"
            )
        tokens: list[str] = _meta_list(meta, "tokenizer.ggml.tokens", str, where, required=True)
        merge_lines = _meta_list(meta, "tokenizer.ggml.merges", str, where)
        bad = next((m for m in merge_lines if " " not in m), None)
        if bad is not None:
            raise ModelLoadError(
                f"{where}: metadata 'tokenizer.ggml.merges' holds {bad!r}, not two tokens "
                "separated by a space",
                file=where,
                field="tokenizer.ggml.merges",
            )
        merges = [tuple(m.split(" ", 1)) for m in merge_lines]
        types = _meta_list(meta, "tokenizer.ggml.token_type", int, where) or [1] * len(tokens)
        vocab = {t: i for i, t in enumerate(tokens)}
        try:
            backend = HFTokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
        except Exception as exc:  # tokenizers raises a bare Exception for inconsistent tables
            raise ModelLoadError(
                f"{where}: metadata 'tokenizer.ggml.tokens' and 'tokenizer.ggml.merges' do not "
                f"form a BPE vocabulary ({exc})",
                file=where,
                field="tokenizer.ggml.merges",
            ) from None
        pre = str(meta.get("tokenizer.ggml.pre", "default"))
        if pre not in _PRE:
            warnings.warn(
                f"{where}: pre-tokenizer {pre!r} is not known; using GPT-2's split (text with "
                "digits or unusual whitespace may tokenize differently from llama.cpp)",
                stacklevel=2,
            )
        digits, regex = _PRE.get(pre, _PRE["default"])
        parts: list[Any] = []
        if digits:
            parts.append(pre_tokenizers.Digits(individual_digits=True))
        parts.append(pre_tokenizers.Split(Regex(regex), behavior="isolated"))
        parts.append(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False))
        backend.pre_tokenizer = pre_tokenizers.Sequence(parts)
        backend.decoder = decoders.ByteLevel()
        special = [
            AddedToken(tokens[i], special=True, normalized=False)
            for i, t in enumerate(types)
            if int(t) in _SPECIAL_TYPES
        ]
        backend.add_special_tokens(special)

        def tok(key: str) -> str | None:
            i = _meta_id(meta, key, where)
            return tokens[i] if i is not None and 0 <= i < len(tokens) else None

        eos = _meta_id(meta, "tokenizer.ggml.eos_token_id", where)
        return cls(
            backend,
            bos_token=tok("tokenizer.ggml.bos_token_id"),
            eos_token=tok("tokenizer.ggml.eos_token_id"),
            chat_template=meta.get("tokenizer.chat_template"),
            add_bos=bool(meta.get("tokenizer.ggml.add_bos_token", False)),
            eos_ids=[eos] if eos is not None else [],
        )


def _meta_list(
    meta: dict[str, Any], key: str, kind: type, where: str, required: bool = False
) -> list[Any]:
    """A GGUF metadata array of ``kind`` elements; a ModelLoadError naming the key otherwise
    (missing when required, or of the wrong type)."""
    if key not in meta:
        if required:
            raise ModelLoadError(f"{where}: metadata {key!r} is missing", file=where, field=key)
        return []
    v = meta[key]
    if not isinstance(v, (list, tuple)) or not all(
        isinstance(x, kind) and not isinstance(x, bool) for x in v
    ):
        raise ModelLoadError(
            f"{where}: metadata {key!r} must be an array of {kind.__name__}, got "
            f"{type(v).__name__}",
            file=where,
            field=key,
        )
    return list(v)


def _meta_id(meta: dict[str, Any], key: str, where: str) -> int | None:
    v = meta.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise ModelLoadError(
            f"{where}: metadata {key!r} must be a token id (an integer), got {v!r}",
            file=where,
            field=key,
        )
    return v


class StreamDecoder:
    """Incremental detokenization: feed ids, get the new text (held back while the last bytes
    form an incomplete UTF-8 character, which decodes to U+FFFD)."""

    def __init__(self, tokenizer: Tokenizer, skip_special_tokens: bool = True) -> None:
        self.tokenizer = tokenizer
        self.skip = skip_special_tokens
        self.ids: list[int] = []
        self.emitted = 0

    def push(self, token_id: int) -> str:
        self.ids.append(int(token_id))
        text = self.tokenizer.decode(self.ids, skip_special_tokens=self.skip)
        if text.endswith("\ufffd"):
            return ""
        new = text[self.emitted :]
        self.emitted = len(text)
        return new

    def flush(self) -> str:
        text = self.tokenizer.decode(self.ids, skip_special_tokens=self.skip)
        new = text[self.emitted :]
        self.emitted = len(text)
        return new


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        v = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelLoadError(f"{path}: not valid JSON ({exc})") from None
    return v if isinstance(v, dict) else {}


def _token_str(v: Any) -> str | None:
    if isinstance(v, dict):
        v = v.get("content")
    return v if isinstance(v, str) else None
