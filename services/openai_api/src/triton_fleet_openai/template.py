"""The model's own chat template (``chat_template`` of tokenizer_config.json), rendered in a jinja2 sandbox.

The environment mirrors what Hugging Face transformers builds for ``apply_chat_template``
(transformers 4.57, ``src/transformers/utils/chat_template_utils.py``: ``_compile_jinja_template``):
``ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])``, a
``tojson`` filter that keeps non-ASCII text, ``raise_exception`` and ``strftime_now`` globals, and the
special tokens of the tokenizer config as variables. The prompt strings are compared with
transformers' in the unit tests.
"""

import json
import os
from datetime import datetime
from typing import Optional

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .errors import APIError

_SPECIAL = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token")


class TemplateError(APIError):
    def __init__(self, message):
        super().__init__(400, f"the chat template refused the conversation: {message}", param="messages")


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt):
    return datetime.now().strftime(fmt)


def _token_text(value):
    if isinstance(value, dict):  # AddedToken serialised as {"content": ...}
        return value.get("content")
    return value


class ChatTemplate:
    def __init__(self, source: str, special_tokens: Optional[dict] = None):
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = _strftime_now
        self.template = env.from_string(source)
        self.special_tokens = {k: v for k, v in (special_tokens or {}).items() if v is not None}

    @classmethod
    def from_tokenizer_dir(cls, path: str) -> "ChatTemplate":
        config_path = os.path.join(path, "tokenizer_config.json")
        try:
            with open(config_path, encoding="utf-8") as fh:
                config = json.load(fh)
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot read {config_path}: {exc} (copy the model's tokenizer files there)") from exc
        source = config.get("chat_template")
        if isinstance(source, list):  # named templates: [{"name": "default", "template": ...}, ...]
            named = {t.get("name"): t.get("template") for t in source if isinstance(t, dict)}
            source = named.get("default")
        if not source:
            jinja_file = os.path.join(path, "chat_template.jinja")
            if os.path.isfile(jinja_file):
                with open(jinja_file, encoding="utf-8") as fh:
                    source = fh.read()
        if not isinstance(source, str) or not source:
            raise ValueError(f"{config_path} has no chat_template (and there is no chat_template.jinja beside it)")
        special = {k: _token_text(config.get(k)) for k in _SPECIAL}
        return cls(source, special)

    def render(
        self,
        messages: list[dict],
        tools: Optional[list[dict]] = None,
        add_generation_prompt: bool = True,
        **kwargs,
    ) -> str:
        context = dict(self.special_tokens)
        context.update(kwargs)
        try:
            return self.template.render(
                messages=messages, tools=tools, add_generation_prompt=add_generation_prompt, **context
            )
        except jinja2.exceptions.TemplateError as exc:
            raise TemplateError(str(exc)) from exc
        except (TypeError, AttributeError, KeyError) as exc:
            raise TemplateError(f"{type(exc).__name__}: {exc}") from exc
