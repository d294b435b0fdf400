"""What the OpenAI oracle (test_openai_oracle.py) sends: requests drawn from the ``openai`` SDK's own request
types, and a mutator that breaks them.

Requests come from ``st.from_type`` over the SDK's ``TypedDict`` params (chat and legacy completions), so a field
the SDK gains is drawn without a change here. Strategies are registered only for what the SDK leaves free-form
(``object``: JSON Schemas, tool definitions), for what its abstract types leave open (``Iterable`` and
``SequenceNotStr``, which are JSON arrays on the wire) and for the text of messages (some of it Qwen3's own
markup, so that the template and the parsers see it). ``plausible`` values are drawn beside the SDK's
(``st.one_of``) where the SDK's type is far wider than what any server takes (a ``float`` temperature), so that
many requests are accepted and their answers are checked too.

The mutator breaks one drawn request at one place and says where (``Mutation.path``), so that the oracle can
check that a refusal names that place: a value of a JSON type the SDK's type does not allow there, a value not
in a ``Literal``, a required key left out, an unknown key, lone surrogates, huge and deeply nested values,
tokens that are not JSON (``NaN``), and bodies that are not JSON at all (invalid UTF-8, cut short, not an object,
another content type).

Registering type strategies is global to Hypothesis in this process; they cover only the SDK's types and the two
abstract collection types, which no other test draws.
"""

import collections.abc
import functools
import json
import types
import typing
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import typing_extensions
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir
from openai._types import SequenceNotStr
from openai.types import completion_create_params as completion_params
from openai.types.chat import ChatCompletionMessageParam
from openai.types.chat import completion_create_params as chat_params
from openai.types.chat.chat_completion_allowed_tools_param import ChatCompletionAllowedToolsParam
from openai.types.chat.chat_completion_content_part_text_param import ChatCompletionContentPartTextParam
from openai.types.shared_params import FunctionDefinition
from openai.types.shared_params.response_format_json_schema import JSONSchema

# Hypothesis keeps what it learns (its Unicode tables, a cache of the code's constants, the long profile's examples)
# in the repository's .cache/, which git ignores, not in a .hypothesis/ of whatever directory the tests ran from.
# Set before any strategy is built: building one reads the Unicode tables.
set_hypothesis_home_dir(Path(__file__).resolve().parents[3] / ".cache" / "hypothesis")

# ----------------------------------------------------------------------------------------------- values

JSON_KINDS = frozenset({"null", "bool", "int", "float", "string", "array", "object"})

# Markup the Qwen3 template and the service's parsers give meaning to, mixed into drawn text.
QWEN_MARKUP = ("<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "<|im_start|>",
               "<|im_end|>", "<|endoftext|>", "{{ x }}", "{% raw %}", "\n", " ", "Hello", "é", "\u4e2d", "\U0001f642",
               "\u0000", "\ufeff", "\u202e")


@functools.cache
def texts(max_size=24):
    """Message text: any Unicode (no surrogates: those are the mutator's), or pieces of Qwen3 markup."""
    markup = st.lists(st.sampled_from(QWEN_MARKUP) | st.text(max_size=4), max_size=6).map("".join)
    return st.text(max_size=max_size) | markup


names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,15}", fullmatch=True)
json_scalars = (st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8)
                | st.floats(allow_nan=False, allow_infinity=False))
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)


@functools.cache
def json_schemas():
    """A function's ``parameters``: JSON Schemas as tools declare them, and now and then any JSON object
    (the SDK's type is ``Dict[str, object]``)."""
    leaf = st.fixed_dictionaries(
        {"type": st.sampled_from(["string", "integer", "number", "boolean", "null"])},
        optional={"description": st.text(max_size=12), "enum": st.lists(json_scalars, min_size=1, max_size=3)})
    schema = st.recursive(leaf, lambda inner: st.fixed_dictionaries({
        "type": st.just("object"), "properties": st.dictionaries(names, inner, max_size=3)},
        optional={"required": st.lists(names, max_size=2), "additionalProperties": st.booleans()})
        | st.fixed_dictionaries({"type": st.just("array"), "items": inner}), max_leaves=6)
    obj = st.fixed_dictionaries({"type": st.just("object"), "properties": st.dictionaries(names, schema, max_size=3)})
    return obj | st.dictionaries(st.text(max_size=8), json_values, max_size=3)


# ------------------------------------------------------------------------------ the SDK's types, registered


@functools.cache
def hints(td) -> dict:
    """A TypedDict's fields and their types (``Required``/``NotRequired`` stripped)."""
    return typing.get_type_hints(td)


@functools.cache
def required_keys(td) -> frozenset:
    """A TypedDict's required keys. The SDK's modules use ``from __future__ import annotations``, so that
    ``__required_keys__`` misses the keys marked ``Required[...]``: read them from the annotations."""
    marked = typing.get_type_hints(td, include_extras=True)
    req = {k for k, t in marked.items() if typing.get_origin(t) is typing_extensions.Required}
    opt = {k for k, t in marked.items() if typing.get_origin(t) is typing_extensions.NotRequired}
    return frozenset((td.__required_keys__ | req) - opt)


def sdk_value(t):
    """``st.from_type(t)``, but a ``Dict[K, V]`` is drawn as a dict of K to V: Hypothesis would also draw any
    registered TypedDict for it (a TypedDict is a dict), which is no ``logit_bias``."""
    t = strip(t)
    origin, args = typing.get_origin(t), typing.get_args(t)
    if is_union(t):
        return st.one_of([sdk_value(a) for a in args])
    if origin in (dict, collections.abc.Mapping) and len(args) == 2:
        return st.dictionaries(sdk_value(args[0]), sdk_value(args[1]), max_size=3)
    return st.deferred(lambda: st.from_type(t))


def typed_dict(td, **override):
    """``td`` drawn as ``st.from_type`` draws it (its required keys, any of its optional ones), with
    strategies of one's own for some fields."""
    h = hints(td)

    def field(k):
        return override[k] if k in override else sdk_value(h[k])

    req = required_keys(td)
    return st.fixed_dictionaries({k: field(k) for k in sorted(req)},
                                 optional={k: field(k) for k in sorted(h.keys() - req)})


def _element(t):
    args = typing.get_args(t)
    return st.lists(sdk_value(args[0]) if args else json_values, max_size=3)


def register():
    """Register the strategies the SDK's own types leave open (idempotent)."""
    st.register_type_strategy(collections.abc.Iterable, _element)
    st.register_type_strategy(SequenceNotStr, _element)
    st.register_type_strategy(FunctionDefinition, typed_dict(FunctionDefinition, name=names | st.text(max_size=70),
                                                             parameters=json_schemas()))
    st.register_type_strategy(chat_params.Function, typed_dict(chat_params.Function, parameters=json_schemas()))
    st.register_type_strategy(JSONSchema, typed_dict(JSONSchema, name=names, schema=json_schemas()))
    st.register_type_strategy(ChatCompletionAllowedToolsParam, typed_dict(
        ChatCompletionAllowedToolsParam, tools=st.lists(st.dictionaries(st.text(max_size=8), json_values), max_size=2)))
    st.register_type_strategy(ChatCompletionContentPartTextParam,
                              typed_dict(ChatCompletionContentPartTextParam, text=texts()))
    for td in typing.get_args(ChatCompletionMessageParam):
        h = hints(td)
        over = {}
        if "content" in h:
            over["content"] = texts() | sdk_value(h["content"])
        st.register_type_strategy(td, typed_dict(td, **over))


# ------------------------------------------------------------------------------------------- requests

CHAT_TYPES = (chat_params.CompletionCreateParamsNonStreaming, chat_params.CompletionCreateParamsStreaming)
COMPLETION_TYPES = (completion_params.CompletionCreateParamsNonStreaming,
                    completion_params.CompletionCreateParamsStreaming)
# One type for the top level of either kind of request: ``stream`` is a bool (or null) there.
CHAT_FIELDS = {**hints(chat_params.CompletionCreateParamsBase), "stream": bool | None}
CHAT_REQUIRED = required_keys(chat_params.CompletionCreateParamsBase)
COMPLETION_FIELDS = {**hints(completion_params.CompletionCreateParamsBase), "stream": bool | None}
COMPLETION_REQUIRED = required_keys(completion_params.CompletionCreateParamsBase)


@functools.cache
def _function():
    return typed_dict(FunctionDefinition, name=st.just(""), parameters=json_schemas())


def function_tool(name):
    return _function().map(lambda f: {"type": "function", "function": {**f, "name": name}})


@st.composite
def conversations(draw):
    """A coherent conversation in the SDK's message types: a system or developer message, user turns,
    assistant turns with tool calls, each answered by a tool message, ending on a user or tool message."""
    out = []
    if draw(st.booleans()):
        out.append({"role": draw(st.sampled_from(["system", "developer"])), "content": draw(texts())})
    for _ in range(draw(st.integers(1, 3))):
        content = draw(texts() | st.lists(st.from_type(ChatCompletionContentPartTextParam), min_size=1, max_size=2))
        out.append({"role": "user", "content": content})
        if draw(st.booleans()):
            ids = draw(st.lists(st.from_regex(r"call_[a-z0-9]{4,8}", fullmatch=True), min_size=1, max_size=2,
                                unique=True))
            calls = [{"id": i, "type": "function", "function": {
                "name": draw(names), "arguments": json.dumps(draw(st.dictionaries(names, json_scalars, max_size=2)))}}
                for i in ids]
            out.append({"role": "assistant", "content": None, "tool_calls": calls})
            out.extend({"role": "tool", "tool_call_id": i, "content": draw(texts())} for i in ids)
            if draw(st.booleans()):
                out.append({"role": "assistant", "content": draw(texts())})
    return out


@st.composite
def tools_and_choice(draw):
    """Function tools and a tool_choice that fits them (the SDK's own are drawn beside these)."""
    tool_names = draw(st.lists(names, min_size=1, max_size=3, unique=True))
    tools = [draw(function_tool(n)) for n in tool_names]
    choice = draw(st.none() | st.sampled_from(["none", "auto", "required"])
                  | st.sampled_from(tool_names).map(lambda n: {"type": "function", "function": {"name": n}}))
    return tools, choice


@functools.cache
def plausible_chat(model):
    """Values a server takes, for fields whose SDK type is far wider."""
    return {
        "model": st.just(model),
        "messages": conversations() | st.lists(st.from_type(ChatCompletionMessageParam), min_size=1, max_size=3),
        "max_tokens": st.integers(1, 48), "max_completion_tokens": st.integers(1, 48),
        "temperature": st.floats(0, 2), "top_p": st.floats(0.01, 1), "seed": st.integers(0, 2**31),
        "presence_penalty": st.floats(-2, 2), "frequency_penalty": st.floats(-2, 2), "n": st.just(1),
        "stop": st.none() | st.text(min_size=1, max_size=6)
        | st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=4),
        "user": st.text(max_size=12), "response_format": st.just({"type": "text"}),
    }


@functools.cache
def plausible_completion(model):
    p = plausible_chat(model)
    return {**{k: p[k] for k in ("model", "max_tokens", "temperature", "top_p", "seed", "presence_penalty",
                                 "frequency_penalty", "n", "stop", "user")},
            "prompt": texts(40) | st.lists(texts(40), min_size=1, max_size=1)}


def _request(td, plausible, extra_optional=3):
    """``td`` with its required fields and up to ``extra_optional`` of its optional ones, each drawn from the
    SDK's type or, where there is one, a plausible value."""
    h = hints(td)

    def value(k):
        sdk = sdk_value(h[k])
        return (plausible[k] | sdk) if k in plausible and k != "model" else plausible.get(k, sdk)

    values = {k: value(k) for k in h}
    req = required_keys(td)
    optional = sorted(h.keys() - req - {"stream"})

    @st.composite
    def build(draw):
        body = {k: draw(values[k]) for k in sorted(req) if k != "stream"}
        for k in draw(st.lists(st.sampled_from(optional), max_size=extra_optional, unique=True)):
            body[k] = draw(values[k])
        if "stream" in req:
            body["stream"] = True
        else:  # absent mostly; null is the SDK's too
            stream = draw(st.sampled_from(["absent", "absent", "absent", False, None]))
            if stream != "absent":
                body["stream"] = stream
        return body

    return build()


@functools.cache
def chat_requests(model):
    """A chat request as the SDK's ``CompletionCreateParams`` types allow it, as JSON."""
    either = st.one_of([_request(td, plausible_chat(model)) for td in CHAT_TYPES])

    @st.composite
    def build(draw):
        body = draw(either)
        if draw(st.booleans()):  # tools that fit a tool_choice, as agents send them
            body["tools"], choice = draw(tools_and_choice())
            if choice is not None:
                body["tool_choice"] = choice
        return body

    return build()


@functools.cache
def completion_requests(model):
    return st.one_of([_request(td, plausible_completion(model)) for td in COMPLETION_TYPES])


# Fields an OpenAI-compatible server for one text model takes: the requests the mutator breaks are made of these
# (each of their values is one the SDK's type allows), so that most are accepted before they are broken and a
# refusal after it can be laid at the broken place.
ACCEPTED_CHAT = ("max_tokens", "max_completion_tokens", "temperature", "top_p", "seed", "stop", "user", "n",
                 "response_format")
ACCEPTED_COMPLETION = ("max_tokens", "temperature", "top_p", "seed", "stop", "user", "n")


@st.composite
def _accepted(draw, required, plausible, keys):
    body = {k: draw(v) for k, v in required.items()}
    for k in draw(st.lists(st.sampled_from(keys), max_size=3, unique=True)):
        body[k] = draw(plausible[k])
    stream = draw(st.sampled_from(["absent", False, True]))
    if stream != "absent":
        body["stream"] = stream
    if stream is True and draw(st.booleans()):
        body["stream_options"] = {"include_usage": draw(st.booleans())}
    return body


@functools.cache
def accepted_chat_requests(model):
    """A chat request a server like this one takes (a coherent conversation, tools and a tool_choice that fit)."""
    p = plausible_chat(model)
    plain = _accepted({"model": p["model"], "messages": conversations()}, p, ACCEPTED_CHAT)

    @st.composite
    def build(draw):
        body = draw(plain)
        if draw(st.booleans()):
            body["tools"], choice = draw(tools_and_choice())
            if choice is not None:
                body["tool_choice"] = choice
            if draw(st.booleans()):
                body["parallel_tool_calls"] = draw(st.booleans())
        return body

    return build()


@functools.cache
def accepted_completion_requests(model):
    p = plausible_completion(model)
    return _accepted({"model": p["model"], "prompt": texts(40)}, p, ACCEPTED_COMPLETION)


# ------------------------------------------------------------------------------- the SDK's types, read


def field_names(t, seen=None) -> frozenset:
    """Every field name of every TypedDict that ``t`` holds, at any depth."""
    seen = set() if seen is None else seen
    t = strip(t)
    if t in seen or isinstance(t, str | int | bool) or t is None:
        return frozenset()
    seen.add(t)
    names_ = set()
    if typing_extensions.is_typeddict(t):
        for k, v in hints(t).items():
            names_ |= {k} | field_names(v, seen)
    for a in typing.get_args(t):
        names_ |= field_names(a, seen)
    return frozenset(names_)



def strip(t):
    while typing.get_origin(t) in (typing.Annotated, typing_extensions.Required, typing_extensions.NotRequired):
        t = typing.get_args(t)[0]
    return t


def is_union(t):
    return typing.get_origin(t) in (Union, types.UnionType)


def json_kinds(t) -> frozenset:
    """The JSON types a value of the SDK type ``t`` may have on the wire."""
    t = strip(t)
    if t in (object, Any):
        return JSON_KINDS
    if t is type(None) or t is None:
        return frozenset({"null"})
    if is_union(t):
        return frozenset().union(*(json_kinds(a) for a in typing.get_args(t)))
    origin = typing.get_origin(t)
    if origin is typing.Literal:
        return frozenset(kind_of(v) for v in typing.get_args(t))
    if typing_extensions.is_typeddict(t) or origin in (dict, collections.abc.Mapping) or t is dict:
        return frozenset({"object"})
    if origin in (list, tuple, collections.abc.Iterable, collections.abc.Sequence) or origin is SequenceNotStr:
        return frozenset({"array"})
    if t is bool:
        return frozenset({"bool"})
    if t is int:
        return frozenset({"int"})
    if t is float:
        return frozenset({"int", "float"})
    if t is str:
        return frozenset({"string"})
    return JSON_KINDS  # a type this reader does not know: anything may be right


def kind_of(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    raise TypeError(type(v))


def literal_values(t):
    """The values of a ``Literal`` type (``Optional`` of one too), else None."""
    t = strip(t)
    args = [a for a in typing.get_args(t) if a is not type(None)] if is_union(t) else [t]
    if len(args) == 1 and typing.get_origin(args[0]) is typing.Literal:
        return typing.get_args(args[0])
    return None


def resolve(t, value):
    """The one member of a union of TypedDicts that ``value`` is (by its keys and Literal fields); None when
    none or several fit."""
    t = strip(t)
    members = [strip(a) for a in typing.get_args(t)] if is_union(t) else [t]
    fits = []
    for m in members:
        if not (typing_extensions.is_typeddict(m) and isinstance(value, dict)):
            continue
        h = hints(m)
        if not (required_keys(m) <= value.keys() <= h.keys()):
            continue
        if all(lits is None or value[k] in lits for k in value for lits in [literal_values(h[k])]):
            fits.append(m)
    return fits[0] if len(fits) == 1 else None


def element_type(t, value):
    """The SDK type of the items of ``value`` (a list) or of its values (a dict) when ``t`` is a collection."""
    for m in ([strip(a) for a in typing.get_args(strip(t))] if is_union(t) else [strip(t)]):
        origin, args = typing.get_origin(m), typing.get_args(m)
        if isinstance(value, list) and (origin in (list, collections.abc.Iterable) or origin is SequenceNotStr):
            return args[0] if args else None
        if isinstance(value, dict) and origin in (dict, collections.abc.Mapping) and len(args) == 2:
            return args[1]
    return None


@dataclass(frozen=True)
class Node:
    path: tuple  # keys and indices from the body's top
    type: Any  # its SDK type
    value: Any
    fields: dict | None = None  # the TypedDict's fields, where the node is one
    required: frozenset = frozenset()  # and its required ones
    optional: bool = False  # a field its TypedDict does not require (null there means "not given")


def nodes(body, fields, required):
    """Every place of ``body`` whose SDK type is known (the top: ``fields``, of which ``required``)."""
    out = [Node((), dict, body, fields, frozenset(required))]

    def walk(path, t, value, optional):
        td = resolve(t, value) if isinstance(value, dict) else None
        out.append(Node(path, t, value, hints(td) if td else None, required_keys(td) if td else frozenset(),
                        optional))
        if td is not None:
            for k, v in value.items():
                walk((*path, k), hints(td)[k], v, k not in required_keys(td))
        elif isinstance(value, list | dict):
            et = element_type(t, value)
            if et is not None:
                for k, v in (enumerate(value) if isinstance(value, list) else value.items()):
                    walk((*path, k), et, v, False)

    for k, v in body.items():
        if k in fields:
            walk((k,), fields[k], v, k not in required)
    return out


# Names a refusal may give for a field the request lacks.
CHAT_NAMES = field_names(chat_params.CompletionCreateParamsBase)
COMPLETION_NAMES = field_names(completion_params.CompletionCreateParamsBase)


# ------------------------------------------------------------------------------------------- mutations

MARK = "\u0001oracle-raw\u0001"  # replaced in the serialized body by raw text that json.dumps cannot write


@dataclass
class Mutation:
    kind: str
    path: tuple | None  # the place it breaks; None: the body as a whole
    body: bytes
    content_type: str | None = "application/json"
    note: str = ""
    # places holding the same value as the broken one (a tool call's id and the tool_call_id answering it): a
    # request broken at one of them may well be refused at another
    also: tuple = ()

    def __repr__(self):
        shown = self.body if len(self.body) <= 300 else self.body[:200] + b"...(%d bytes)" % len(self.body)
        return f"Mutation({self.kind}, path={fmt_path(self.path)}, {self.note} body={shown!r})"


# The most a huge value adds to a body, in bytes of JSON: NGINX's client_max_body_size (1m) is the most the service
# is sent through the gateway.
HUGE = 1_000_000

# Refusal expected, naming the place (when the request was accepted before the mutation).
NAMED = {"wrong_type", "wrong_literal", "missing", "unknown_field"}
# Valid JSON, values odd in size or content: accepted, or refused naming the place or the body.
ODD_VALUES = {"lone_surrogate", "huge_string", "huge_number", "huge_array", "deep"}
# Not JSON (RFC 8259): a 400 that names no parameter, or names the place.
NOT_JSON = {"non_json_number", "invalid_utf8", "cut_short", "trailing_garbage", "empty"}
# Not a JSON object: a 400 naming no parameter.
NOT_OBJECT = {"not_object"}
# The body as it is, another content type: no expectation beyond the properties every response has.
OTHER = {"content_type"}


def fmt_path(path) -> str:
    if path is None:
        return "<body>"
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else ("." if out else "") + str(p)
    return out or "<top>"


def dumps(body) -> bytes:
    # ensure_ascii: a lone surrogate is written as its \\ud800 escape, as a client's JSON library does
    return json.dumps(body, ensure_ascii=True).encode()


def with_raw(body, path, raw: str) -> bytes:
    """``body`` serialized with the value at ``path`` replaced by the raw JSON text ``raw``."""
    return dumps(replaced(body, path, MARK)).replace(json.dumps(MARK).encode(), raw.encode())


def replaced(body, path, value):
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(body, list):
        return [replaced(v, rest, value) if i == head else v for i, v in enumerate(body)]
    return {**body, head: replaced(body.get(head), rest, value)}


def removed(body, path):
    if len(path) == 1:
        return {k: v for k, v in body.items() if k != path[0]}
    return replaced(body, path[:-1], removed(get(body, path[:-1]), path[-1:]))


def get(body, path):
    for p in path:
        body = body[p]
    return body


def right_kinds(n: Node) -> frozenset:
    """The JSON types a value may have at ``n``. Null is right wherever the field is optional, whatever its type:
    the SDK itself sends a parameter passed as None as null (``create(user=None)`` sends ``"user": null``), and
    callers and frameworks pass None for what they leave unset, so null there can only mean "not given"."""
    return json_kinds(n.type) | ({"null"} if n.optional else frozenset())


def wrong_values(kinds):
    """A value of a JSON type not among ``kinds``, leaning to the ones lax parsers take ("4", 4.0, true)."""
    strategies = {
        "null": st.none(), "bool": st.booleans(), "int": st.integers(-3, 2**40),
        "float": st.sampled_from([4.0, 0.5, 1e300, -0.0]) | st.floats(allow_nan=False, allow_infinity=False),
        "string": st.sampled_from(["4", "1", "true", "false", "null", "", "[]", "{}"]) | st.text(max_size=6),
        "array": st.lists(json_scalars, max_size=2), "object": st.dictionaries(names, json_scalars, max_size=2),
    }
    return st.one_of([strategies[k] for k in sorted(JSON_KINDS - kinds)])


def unknown_keys():
    # a prefix no field of the SDK or extension of the service has; the rest may hold a lone surrogate
    return st.builds("oracle_{}".format, st.text(max_size=6) | st.sampled_from(["\ud800", "a\udfffb", "é", ""]))


@st.composite
def mutations(draw, body, fields, required):
    """One way of breaking ``body``, a request whose top-level SDK fields are ``fields`` (``required`` of them).

    Hypothesis draws a test's last choices at their simplest (the first kind, the first place) in many of its
    examples: every list chosen from here is turned by a number taken from the request, so that the simplest
    choice is another kind and place for every request, and they are spread over all of them."""
    turn = zlib.crc32(dumps(body))

    def pick(seq):
        seq = list(seq)
        k = turn % len(seq)
        return st.sampled_from(seq[k:] + seq[:k])

    all_nodes = nodes(body, fields, required)

    def twins(n):
        if not (isinstance(n.value, str) and n.value):
            return ()
        return tuple(m.path for m in all_nodes if m.path != n.path and m.value == n.value)

    typed = [n for n in all_nodes if n.path and right_kinds(n) != JSON_KINDS]
    literal = [n for n in all_nodes if n.path and literal_values(n.type)]
    objects = [n for n in all_nodes if n.fields is not None]
    required = [(n, k) for n in objects for k in sorted(n.required) if k in n.value]
    strings = [n for n in all_nodes if n.path and isinstance(n.value, str)]
    numbers = [n for n in all_nodes if n.path and kind_of(n.value) in ("int", "float")]
    arrays = [n for n in all_nodes if n.path and isinstance(n.value, list)]
    anywhere = [n for n in all_nodes if n.path]
    kinds = [k for k, ok in (("wrong_type", typed), ("wrong_literal", literal), ("missing", required),
                             ("unknown_field", objects), ("lone_surrogate", strings), ("huge_string", strings),
                             ("huge_number", numbers), ("huge_array", arrays), ("deep", anywhere),
                             ("non_json_number", numbers or anywhere), ("invalid_utf8", True), ("cut_short", True),
                             ("trailing_garbage", True), ("empty", True), ("not_object", True),
                             ("content_type", True)) if ok]
    kind = draw(pick(kinds))
    if kind == "wrong_type":
        # the top level (a field the request has or not) as often as the places inside it
        absent = [Node((k,), fields[k], None, optional=k not in required) for k in sorted(fields.keys() - body.keys())]
        top = [n for n in typed if len(n.path) == 1] + [n for n in absent if right_kinds(n) != JSON_KINDS]
        inner = [n for n in typed if len(n.path) > 1]
        n = draw(st.one_of([pick(places) for places in (top, inner) if places]))
        value = draw(wrong_values(right_kinds(n)))
        return Mutation(kind, n.path, dumps(replaced(body, n.path, value)), also=twins(n),
                        note=f"{value!r} where the SDK allows {'/'.join(sorted(right_kinds(n)))}")
    if kind == "wrong_literal":
        n = draw(pick(literal))
        allowed = literal_values(n.type)
        value = draw(st.text(max_size=8).filter(lambda v: v not in allowed))
        return Mutation(kind, n.path, dumps(replaced(body, n.path, value)), also=twins(n),
                        note=f"{value!r} not in {allowed}")
    if kind == "missing":
        n, key = draw(pick(required))
        gone = next((m for m in all_nodes if m.path == (*n.path, key)), None)
        return Mutation(kind, (*n.path, key), dumps(removed(body, (*n.path, key))), also=twins(gone) if gone else ())
    if kind == "unknown_field":
        n = draw(pick(objects))
        key = draw(unknown_keys().filter(lambda k: k not in n.value))
        value = draw(json_values)
        return Mutation(kind, (*n.path, key), dumps(replaced(body, n.path, {**n.value, key: value})))
    if kind == "lone_surrogate":
        n = draw(pick(strings))
        at = draw(st.integers(0, len(n.value)))
        s = n.value[:at] + draw(pick(["\ud800", "\udfff", "\udc00x", "\ud83d"])) + n.value[at:]
        return Mutation(kind, n.path, dumps(replaced(body, n.path, s)), also=twins(n))
    if kind == "huge_string":
        n = draw(pick(strings))
        size = draw(pick([5_000, 60_000, HUGE]))
        unit = draw(pick(["a", "word ", "\u4e2d", "\U0001f642", "<think>"]))
        times = min(size // len(unit), HUGE // (len(dumps(unit)) - 2))
        return Mutation(kind, n.path, dumps(replaced(body, n.path, unit * times)), also=twins(n),
                        note=f"{len(unit) * times} chars")
    if kind == "huge_number":
        n = draw(pick(numbers))
        raw = draw(pick(["1" + "0" * 400, "-1" + "0" * 400, "9" * 4000, "9" * 5000, "1e309", "-1e309",
                                    "1e-400", "2147483648", "9223372036854775808", "18446744073709551616"]))
        return Mutation(kind, n.path, with_raw(body, n.path, raw), note=f"{raw[:24]}")
    if kind == "huge_array":
        n = draw(pick(arrays))
        items = n.value if n.value else [draw(json_scalars)]
        size = min(draw(pick([1_000, 10_000])), HUGE * len(items) // len(dumps(items)))
        return Mutation(kind, n.path, dumps(replaced(body, n.path, (items * size)[:size])), note=f"{size} items")
    if kind == "deep":
        n = draw(pick(anywhere))
        depth = draw(pick([100, 500, 900, 990, 2_000, 10_000, 100_000]))
        open_, close = draw(pick([("[", "]"), ('{"a":', "}")]))
        return Mutation(kind, n.path, with_raw(body, n.path, open_ * depth + "1" + close * depth), also=twins(n),
                        note=f"depth {depth}")
    if kind == "non_json_number":
        n = draw(pick(numbers or anywhere))
        raw = draw(pick(["NaN", "Infinity", "-Infinity"]))
        return Mutation(kind, n.path, with_raw(body, n.path, raw), also=twins(n), note=raw)
    raw = dumps(body)
    if kind == "invalid_utf8":
        bad = draw(pick([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\x80"]))
        # inside a string where there is one (the body is still JSON but for its encoding)
        spots = [i + 1 for i in range(len(raw)) if raw[i:i + 1] == b'"'] or [0]
        at = draw(pick(spots))
        return Mutation(kind, None, raw[:at] + bad + raw[at:], note=repr(bad))
    if kind == "cut_short":
        return Mutation(kind, None, raw[:draw(st.integers(1, len(raw) - 1))])
    if kind == "trailing_garbage":
        return Mutation(kind, None, raw + draw(pick([b"x", b"}", b",", b"{}", b"\x00", b"]"])))
    if kind == "empty":
        return Mutation(kind, None, draw(pick([b"", b" ", b"\n"])))
    if kind == "not_object":
        value = draw(pick([[body], body.get("messages", []), "body", 1, None, True]))
        return Mutation(kind, None, dumps(value))
    ctype = draw(pick([None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                                  "application/json; charset=latin-1", "application/octet-stream"]))
    return Mutation("content_type", None, raw, content_type=ctype, note=f"Content-Type {ctype}")


# What the stand-in Triton node generates: Qwen3's markup, whole and broken, and any text.
OUTPUT_PIECES = ("<think>\n", "\n</think>\n\n", "</think>", "Hello", " world.", "\n", "\ufffd", "\u4e2d\u6587",
                 '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
                 '<tool_call>\n{"name": 5}\n</tool_call>', "<tool_call>\nnot json\n</tool_call>", "<tool_call>\n{",
                 "<tool_response>", "<|im_end|>")
model_outputs = st.lists(st.sampled_from(OUTPUT_PIECES) | st.text(max_size=6), max_size=8).map("".join)

register()
