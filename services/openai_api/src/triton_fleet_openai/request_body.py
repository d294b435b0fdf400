"""A request's body, from bytes to the JSON object the request models validate: every way a body can be
unreadable ends here as a 400 in OpenAI's error shape, never as an exception further in.

What is refused, and why it must be refused here rather than where it would break:

- a content type that is not JSON (``application/json``, ``application/*+json``; a body without a content
  type and curl's default ``application/x-www-form-urlencoded`` are read as JSON too, since ``curl -d``
  sends that), a compressed body, an empty body, bytes that are not UTF-8 (RFC 8259 section 8.1);
- text that is not JSON, and JSON that is not an object;
- numbers that are not finite (``NaN``, ``Infinity``: Python's extensions to JSON, and ``1e400``, which
  Python reads as infinity): a sampling parameter or a tool schema holding one cannot be sent on;
- strings or keys holding a lone UTF-16 surrogate (``"\\ud800"``): JSON's escapes can write one, no UTF-8
  text can hold it, so the token counter, the gRPC request and even the error message would fail on it;
- integers of more than 4,300 digits (Python 3.11's limit; 3.9 would spend seconds converting one);
- nesting deeper than :data:`MAX_DEPTH`: Python's own JSON reader stops with a RecursionError about 1,000
  levels down, and the validation, the chat template and the JSON writer recurse too.

The checks that need a walk over the decoded object run only when the raw text says they may be needed (an
escape of a surrogate, a non-finite number, more brackets than :data:`MAX_DEPTH`), so that the walk costs the
common request nothing; the walk names the offending value's place as ``error.param``.
"""

import json
import math
import re
from typing import Any, Optional

from .errors import APIError

# Far above what a request needs (a tool's JSON schema nests a few levels per property), far below where
# Python's recursion limit is in reach.
MAX_DEPTH = 64
# A JSON escape of a UTF-16 surrogate (half of a pair or alone); pairs decode to one code point, lone ones stay.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")
# CPython's own limit for int() of a string (3.11+), for every Python the service runs on.
MAX_INT_DIGITS = 4300
_JSON_TYPES = ("application/json", "application/x-www-form-urlencoded")


def body_error(message: str, code: str, param: Optional[str] = None) -> APIError:
    return APIError(400, message, param=param, code=code)


def param_path(loc) -> str:
    """A place in the body as OpenAI names it in ``error.param``: ``messages[0].content``. A key with a lone
    surrogate stays as it is: error bodies are written with JSON's escapes (app.ErrorResponse), so the client
    reads back the very key it sent."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def check_content_type(content_type: Optional[str], content_encoding: Optional[str]) -> None:
    if content_encoding and content_encoding.strip().lower() not in ("identity", ""):
        raise body_error(
            f"the request body is {content_encoding}-encoded: send it uncompressed (Content-Encoding: identity)",
            "unsupported_content_encoding",
        )
    if not content_type:
        return
    media = content_type.split(";", 1)[0].strip().lower()
    if media in _JSON_TYPES or (media.startswith("application/") and media.endswith("+json")):
        charset = re.search(r"charset\s*=\s*\"?([^\";\s]+)", content_type, re.IGNORECASE)
        if charset and charset.group(1).lower().replace("_", "-") not in ("utf-8", "utf8"):
            raise body_error(
                f"the request body is declared as {charset.group(1)}: send JSON in UTF-8", "invalid_content_type"
            )
        return
    raise body_error(
        f"the request body is {media}: send a JSON object with Content-Type: application/json",
        "invalid_content_type",
    )


class _Scan:
    """What the decoder saw that asks for the walk."""

    __slots__ = ("nonfinite",)

    def __init__(self):
        self.nonfinite = False

    def constant(self, name: str) -> float:  # NaN, Infinity, -Infinity
        self.nonfinite = True
        return float("nan") if name == "NaN" else float(name.replace("Infinity", "inf"))

    @staticmethod
    def integer(text: str) -> int:
        # Python 3.11+ refuses longer ones itself; 3.9 and 3.10 (gateway hosts) would take quadratic time on them.
        if len(text.lstrip("-")) > MAX_INT_DIGITS:
            raise body_error(
                f"the request body has an integer of {len(text.lstrip('-'))} digits (at most {MAX_INT_DIGITS})",
                "invalid_value",
            )
        return int(text)

    def number(self, text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            self.nonfinite = True
        return value


def decode(body: bytes, content_type: Optional[str] = None, content_encoding: Optional[str] = None) -> dict:
    """The request's JSON object, or an :class:`APIError` (400) saying what is wrong with the body."""
    check_content_type(content_type, content_encoding)
    if not body.strip():
        raise body_error("the request body is empty: send a JSON object", "invalid_json")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise body_error(
            f"the request body is not valid UTF-8 (byte {exc.start}): send JSON encoded as UTF-8", "invalid_json"
        ) from None
    scan = _Scan()
    try:
        data = json.loads(text, parse_constant=scan.constant, parse_float=scan.number, parse_int=scan.integer)
    except RecursionError:
        raise body_error(
            f"the request body nests too deeply: at most {MAX_DEPTH} levels of objects and arrays", "invalid_json"
        ) from None
    except ValueError as exc:  # json.JSONDecodeError
        raise body_error(f"the request body is not valid JSON: {exc}", "invalid_json") from None
    if not isinstance(data, dict):
        raise body_error(
            f"the request body must be a JSON object, not {_json_type(data)}", "invalid_body"
        )
    deep = text.count("{") + text.count("[") > MAX_DEPTH
    if scan.nonfinite or deep or _SURROGATE_ESCAPE.search(text):
        _walk(data)
    return data


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return "a number"


def _walk(data: dict) -> None:
    """Refuse the first lone surrogate, non-finite number or too deep a level, naming its place."""
    stack = [(data, (), 1)]
    while stack:
        value, loc, depth = stack.pop()
        if isinstance(value, dict):
            if depth > MAX_DEPTH:
                raise _too_deep(loc)
            for key, item in value.items():
                if _SURROGATE.search(key):
                    raise body_error(
                        f"{param_path(loc) or 'the body'} has a key with a lone UTF-16 surrogate "
                        f"({key!r}): such text cannot be encoded; send valid Unicode",
                        "invalid_value",
                        param_path(loc + (key,)),
                    )
                stack.append((item, loc + (key,), depth + 1))
        elif isinstance(value, list):
            if depth > MAX_DEPTH:
                raise _too_deep(loc)
            stack.extend((item, loc + (i,), depth + 1) for i, item in enumerate(value))
        elif isinstance(value, str):
            if _SURROGATE.search(value):
                raise body_error(
                    f"{param_path(loc)} holds a lone UTF-16 surrogate (a \\ud800-\\udfff escape without its pair): "
                    "such text cannot be encoded; send valid Unicode",
                    "invalid_value",
                    param_path(loc),
                )
        elif isinstance(value, float) and not math.isfinite(value):
            raise body_error(
                f"{param_path(loc)} is not a finite number: JSON numbers must be finite (no NaN, Infinity or "
                "values beyond 1.8e308)",
                "invalid_value",
                param_path(loc),
            )


def _too_deep(loc) -> APIError:
    return body_error(
        f"the request body nests too deeply at {param_path(loc)}: at most {MAX_DEPTH} levels of objects and arrays",
        "invalid_json",
        param_path(loc),
    )
