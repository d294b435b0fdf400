"""Request shapes (pydantic v2) and the checks that answer 400 naming the parameter.

Every model forbids unknown fields: a parameter this server does not implement is refused, never
silently ignored. Parameters that exist in OpenAI's API but are not implemented here are accepted
by the model only to be refused with a clear message in :func:`check_unsupported`; docs/openai-api.md has
the table of every field and what this server does with it.

The models are strict, as OpenAI is: ``max_tokens`` as ``"4"``, ``4.0`` or ``true`` is refused, not read as 4
or 1 (pydantic's lax mode would); a float field still takes an integer (``temperature: 1``), as OpenAI's does.
"""

import json
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError

from .errors import APIError, invalid, unsupported
from .request_body import param_path

# INT32 is the narrowest tensor a runtime reads an integer sampling parameter into (top_k).
INT32_MAX = 2**31 - 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class TextPart(_Strict):
    type: Literal["text"]
    text: str


# The other content parts OpenAI defines: modelled so that their keys are checked as every object's are, and
# then refused with why (conversation.py: the model reads text).
class ImagePart(_Strict):
    type: Literal["image_url"]
    image_url: dict[str, Any]


class AudioPart(_Strict):
    type: Literal["input_audio"]
    input_audio: dict[str, Any]


class FilePart(_Strict):
    type: Literal["file"]
    file: dict[str, Any]


class RefusalPart(_Strict):  # an assistant turn's refusal, as OpenAI's assistant content parts carry it
    type: Literal["refusal"]
    refusal: str


_PARTS = {cls.model_fields["type"].annotation.__args__[0]: cls for cls in (TextPart, ImagePart, AudioPart, FilePart, RefusalPart)}


def _part_tag(value):
    """The content part class a part's ``type`` names (the union's tag); an unknown type is returned as it is
    (pydantic's union_tag_invalid), none as None (union_tag_not_found): parse() names ``...type`` for both."""
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    if not isinstance(kind, str):
        return None
    cls = _PARTS.get(kind)
    return cls.__name__ if cls is not None else kind


ContentPart = Annotated[
    Union[tuple(Annotated[cls, Tag(cls.__name__)] for cls in _PARTS.values())], Discriminator(_part_tag)
]


class FunctionCall(_Strict):
    name: str
    arguments: str  # required, as OpenAI's: a call sent back without them is refused, not read as "{}"


class ToolCall(_Strict):
    id: str
    type: Literal["function"]
    function: FunctionCall


class Message(_Strict):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Optional[Union[str, list[ContentPart]]] = None
    name: Optional[str] = None
    tool_calls: Optional[list[ToolCall]] = None
    tool_call_id: Optional[str] = None
    # The reasoning of an assistant turn sent back: vLLM's current name and its older one (which this server
    # also emits); either is accepted (conversation.py).
    reasoning_content: Optional[str] = None
    reasoning: Optional[str] = None
    # What an OpenAI SDK's response message carries when it is sent back whole (message.model_dump()).
    refusal: Optional[str] = None
    annotations: Optional[list[Any]] = None
    audio: Optional[Any] = None
    function_call: Optional[Any] = None


class FunctionDef(_Strict):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    description: Optional[str] = None
    parameters: Optional[dict[str, Any]] = None
    strict: Optional[bool] = None


class Tool(_Strict):
    type: Literal["function"]
    function: FunctionDef


class NamedFunction(_Strict):
    name: str


class NamedToolChoice(_Strict):
    type: Literal["function"]
    function: NamedFunction


class StreamOptions(_Strict):
    include_usage: Optional[bool] = False
    # OpenAI pads stream chunks against side channels when this is true (its default); this server adds no
    # padding either way: accepted so that clients that send it work.
    include_obfuscation: Optional[bool] = None


class ResponseFormat(_Strict):
    type: str
    # OpenAI's structured outputs: taken so that the refusal says why (no guided decoding), not "unknown field"
    json_schema: Optional[dict[str, Any]] = None


class PredictionContent(_Strict):
    type: Literal["content"]
    content: Union[str, list[TextPart]]


class _Sampling(_Strict):
    model: str
    stream: Optional[bool] = False  # null: not streamed, as the SDK reads it
    stream_options: Optional[StreamOptions] = None
    max_tokens: Optional[int] = Field(default=None, ge=1)
    temperature: Optional[float] = Field(default=None, ge=0.0, le=2.0)
    top_p: Optional[float] = Field(default=None, gt=0.0, le=1.0)
    # vLLM's extensions: top_k (-1 = off), min_p, repetition_penalty
    top_k: Optional[int] = Field(default=None, ge=-1, le=INT32_MAX)
    min_p: Optional[float] = Field(default=None, ge=0.0, le=1.0)
    repetition_penalty: Optional[float] = Field(default=None, gt=0.0, le=2.0)
    stop: Optional[Union[str, list[str]]] = None
    seed: Optional[int] = Field(default=None, ge=0, le=2**63 - 1)
    presence_penalty: Optional[float] = Field(default=None, ge=-2.0, le=2.0)
    frequency_penalty: Optional[float] = Field(default=None, ge=-2.0, le=2.0)
    n: Optional[int] = Field(default=None, ge=1, le=128)
    logit_bias: Optional[dict[str, float]] = None
    user: Optional[str] = None


class ChatRequest(_Sampling):
    messages: list[Message] = Field(min_length=1)
    max_completion_tokens: Optional[int] = Field(default=None, ge=1)
    tools: Optional[list[Tool]] = None
    tool_choice: Optional[Union[Literal["none", "auto", "required"], NamedToolChoice]] = None
    parallel_tool_calls: Optional[bool] = None
    chat_template_kwargs: Optional[dict[str, Any]] = None
    logprobs: Optional[bool] = None
    top_logprobs: Optional[int] = Field(default=None, ge=0, le=20)
    response_format: Optional[ResponseFormat] = None
    # Accepted, not changing generation (docs/openai-api.md, "Parameters"):
    store: Optional[bool] = None
    metadata: Optional[dict[str, str]] = None
    service_tier: Optional[Literal["auto", "default", "flex", "scale", "priority"]] = None
    # Kept on the request for routing by prompt prefix (not used for routing yet): a string, as OpenAI's.
    prompt_cache_key: Optional[str] = None
    prompt_cache_retention: Optional[Literal["in-memory", "24h"]] = None
    safety_identifier: Optional[str] = None
    reasoning_effort: Optional[Literal["none", "minimal", "low", "medium", "high"]] = None
    verbosity: Optional[Literal["low", "medium", "high"]] = None
    modalities: Optional[list[Literal["text", "audio"]]] = None
    prediction: Optional[PredictionContent] = None
    # Refused unless null (check_unsupported says why)
    audio: Optional[Any] = None
    functions: Optional[Any] = None
    function_call: Optional[Any] = None
    web_search_options: Optional[Any] = None
    # extension: the operator's server tools this request wants (server_tools.py); others may be attached by model
    server_tools: Optional[list[str]] = None


class CompletionRequest(_Sampling):
    prompt: Union[str, list[str]]
    echo: Optional[bool] = None
    logprobs: Optional[int] = Field(default=None, ge=0, le=5)
    suffix: Optional[str] = None
    best_of: Optional[int] = Field(default=None, ge=1, le=20)


# Template switches a client may set through chat_template_kwargs (as vLLM accepts them).
TEMPLATE_KWARGS = {"enable_thinking": bool}
MAX_STOP_STRINGS = 16
# OpenAI's limits on metadata: 16 pairs, keys up to 64 characters, values up to 512.
METADATA_PAIRS, METADATA_KEY_CHARS, METADATA_VALUE_CHARS = 16, 64, 512
# reasoning_effort on Qwen3's one switch: no or minimal effort is thinking off, any other is thinking on.
THINKING_BY_EFFORT = {"none": False, "minimal": False, "low": True, "medium": True, "high": True}


def parse(model_cls, data):
    """``model_cls`` from the decoded JSON body, or an APIError naming the first bad parameter."""
    if not isinstance(data, dict):
        raise APIError(400, "the request body must be a JSON object", code="invalid_body")
    if model_cls is CompletionRequest:
        _check_prompt_shape(data.get("prompt"))
    try:
        return model_cls.model_validate(data)
    except ValidationError as exc:
        raise _refusal(exc.errors(), data) from exc


def _refusal(errors: list, data: dict) -> APIError:
    """The 400 of pydantic's errors: the first error of a union branch that fits what was sent.

    A union that fails reports every branch's errors, the branches that expect another JSON type first
    (``"stop": ["a", 5]`` is not a string, ``tool_choice: {...}`` is not 'none'): those say nothing of the
    request, so the error reported is the first one whose branches all fit the value at their place (an array
    for ``list[str]``, an object for a model); only where no branch fits is it the first error as it comes."""
    places = [_place(err.get("loc", ()), data) for err in errors]
    best = min(range(len(errors)), key=lambda i: places[i][1])
    err, (path, misfits, union_at, value) = errors[best], places[best]
    param = param_path(path)
    kind = err.get("type")
    if misfits:  # no branch takes what was sent: say what the union takes
        loc, param = union_at
        branches = dict.fromkeys(
            _branch_kind(e["loc"][len(loc)])
            for e in errors
            if tuple(e.get("loc", ()))[: len(loc)] == loc and len(e["loc"]) > len(loc)
        )
        return APIError(
            400,
            f"invalid value for {param}: expected {' or '.join(branches)}, got {_json_kind(value)}",
            param=param,
            code="invalid_value",
        )
    if kind in ("union_tag_not_found", "union_tag_invalid"):
        return _bad_tag(err, path)
    if kind == "extra_forbidden":
        return APIError(
            400,
            f"unknown or unsupported parameter: {param} (this server implements the parameters listed in docs/openai-api.md)",
            param=param,
            code="unsupported_parameter",
        )
    if kind == "missing":
        return APIError(400, f"missing required parameter: {param}", param=param, code="missing_required_parameter")
    return APIError(400, f"invalid value for {param}: {err.get('msg')}", param=param, code="invalid_value")


def _place(loc, data) -> tuple:
    """The body's path of an error's location (its union branch tags left out), how many of the branches it
    went through expect another JSON type than the value sent there, and for the first such union: its location
    as pydantic writes it (tags kept) with the parameter it is, and the value sent there.

    A tag is told from a key by its form (``str``, ``list[str]``, ``literal[...]``, a class name) and by the value
    at that point: a key the client sent (``"metadata": {"str": 1}``) stays a key."""
    path, misfits, union_at, union_value, value = [], 0, None, None, data
    for i, part in enumerate(loc):
        if isinstance(part, str) and _is_tag(part) and not (isinstance(value, dict) and part in value):
            if not _fits(part, value):
                misfits += 1
                if union_at is None:  # pydantic's location of the union and the parameter it is
                    union_at, union_value = (tuple(loc[:i]), param_path(path)), value
            continue
        path.append(part)
        if isinstance(value, dict) and isinstance(part, str):
            value = value.get(part)
        elif isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value):
            value = value[part]
        else:
            value = None
    return path, misfits, union_at, union_value


def _is_tag(part: str) -> bool:
    return "[" in part or part in _SCALAR_TAGS or part in _MODEL_TAGS


def _fits(tag: str, value) -> bool:
    """Whether a union branch named ``tag`` expects the JSON type of ``value``."""
    if tag == "str" or tag.startswith("literal["):
        return isinstance(value, str)
    if tag in ("int", "float"):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tag == "bool":
        return isinstance(value, bool)
    if tag.startswith("list["):
        return isinstance(value, list)
    if tag in _MODEL_TAGS or tag.startswith("dict["):
        return isinstance(value, dict)
    return True  # a validator's step (function-after[...]): no branch of its own


def _branch_kind(tag: str) -> str:
    """What a union branch takes, in a client's words."""
    if tag.startswith("literal["):
        return "one of " + tag[len("literal["):-1].replace(",", ", ")
    if tag == "str":
        return "a string"
    if tag.startswith("list["):
        return "an array"
    if tag in ("int", "float"):
        return "a number"
    if tag == "bool":
        return "a boolean"
    return "an object"


def _json_kind(value) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return "a number"


def _bad_tag(err: dict, path: list) -> APIError:
    """A tagged union's object (a content part) with no ``type`` or one that names no branch."""
    key, tags = _TAG_KEYS[err["ctx"]["discriminator"]]
    place = param_path(path)
    sent = err.get("input")
    if not isinstance(sent, dict):
        return APIError(400, f"invalid value for {place}: it must be an object with a {key!r}", param=place,
                        code="invalid_value")
    param = param_path([*path, key])
    if key not in sent:
        return APIError(400, f"missing required parameter: {param}", param=param, code="missing_required_parameter")
    return APIError(
        400,
        f"invalid value for {param}: {_short(sent[key])} (expected one of {', '.join(map(repr, tags))})",
        param=param,
        code="invalid_value",
    )


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _models(cls) -> set:
    """The names of ``cls``'s subclasses, all levels down."""
    return {name for sub in cls.__subclasses__() for name in (sub.__name__, *_models(sub))}


# The names pydantic gives a union's members in an error's location, besides generic ones (list[str],
# literal['none','auto','required'], tagged-union[...]) that hold a "[": scalar types and this module's models
# (a tagged union's tags are its classes' names: ContentPart).
_SCALAR_TAGS = {"str", "int", "float", "bool"}
_MODEL_TAGS = _models(_Strict)
# A tagged union's discriminator (as pydantic names it in an error) -> the key it reads and the values it takes.
_TAG_KEYS = {"_part_tag()": ("type", tuple(_PARTS))}


def _check_prompt_shape(prompt) -> None:
    """A completions prompt of token ids (OpenAI accepts them) gets its own message, not a union's errors."""
    if isinstance(prompt, list) and prompt and not all(isinstance(p, str) for p in prompt):
        raise unsupported("prompt", "token-id prompts are not taken; send the prompt as text")


def stop_list(req) -> list[str]:
    if req.stop is None:
        return []
    stops = [req.stop] if isinstance(req.stop, str) else list(req.stop)
    if len(stops) > MAX_STOP_STRINGS:
        raise invalid("stop", f"at most {MAX_STOP_STRINGS} stop strings, got {len(stops)}")
    if any(not s for s in stops):
        raise invalid("stop", "stop strings must not be empty")
    return stops


def template_kwargs(req: "ChatRequest") -> dict:
    """The chat template's switches: ``chat_template_kwargs`` with ``reasoning_effort`` applied to
    ``enable_thinking``; the two naming different settings is a 400."""
    kwargs = dict(req.chat_template_kwargs or {})
    if req.reasoning_effort is None:
        return kwargs
    thinking = THINKING_BY_EFFORT[req.reasoning_effort]
    explicit = kwargs.get("enable_thinking")
    if explicit is not None and explicit is not thinking:
        raise invalid(
            "reasoning_effort",
            f"reasoning_effort {req.reasoning_effort!r} turns thinking {'on' if thinking else 'off'}, "
            f"chat_template_kwargs.enable_thinking turns it {'on' if explicit else 'off'}: send one of them",
        )
    kwargs["enable_thinking"] = thinking
    return kwargs


def check_unsupported(req, runtime_params) -> None:
    """Refuse what the request asks that neither this server nor the runtime can do."""
    if req.n is not None and req.n > 1:
        raise unsupported("n", "one choice per request (n=1); send several requests instead")
    if req.logit_bias:
        raise unsupported("logit_bias", "the Triton runtimes here take no logit bias")
    for name in ("presence_penalty", "frequency_penalty", "repetition_penalty", "min_p"):
        value = getattr(req, name)
        neutral = (None, 1, 1.0) if name == "repetition_penalty" else (None, 0, 0.0)
        if value not in neutral and name not in runtime_params:
            raise unsupported(name, "the serving runtime of this model has no such input")
    if req.stream_options is not None and not req.stream:
        raise invalid("stream_options", "stream_options is only allowed when stream is true")
    if isinstance(req, ChatRequest):
        _check_chat(req)
    else:
        _check_completion(req)


def _check_chat(req: ChatRequest) -> None:
    from .conversation import check_messages

    if req.logprobs:
        raise unsupported("logprobs", "log probabilities are not returned by this server")
    if req.top_logprobs:
        raise unsupported("top_logprobs", "log probabilities are not returned by this server")
    if req.response_format is not None and req.response_format.type != "text":
        raise unsupported("response_format", f"type {req.response_format.type!r}: only 'text' (no guided decoding)")
    for key, value in (req.chat_template_kwargs or {}).items():
        kind = TEMPLATE_KWARGS.get(key)
        if kind is None:
            raise unsupported(f"chat_template_kwargs.{key}", "accepted keys: " + ", ".join(sorted(TEMPLATE_KWARGS)))
        if not isinstance(value, kind):
            raise invalid(f"chat_template_kwargs.{key}", f"must be a {kind.__name__}")
    template_kwargs(req)  # reasoning_effort against enable_thinking
    if req.tool_choice is not None and req.tool_choice != "none" and not req.tools:
        raise invalid("tool_choice", "tool_choice needs tools")
    if req.parallel_tool_calls is not None and not (req.tools or req.server_tools):
        raise invalid("parallel_tool_calls", "parallel_tool_calls is only allowed when tools are specified")
    if isinstance(req.tool_choice, NamedToolChoice):
        names = [t.function.name for t in req.tools or []]
        if req.tool_choice.function.name not in names:
            raise invalid(
                "tool_choice",
                f"function {req.tool_choice.function.name!r} is not among the tools ({', '.join(names)})",
            )
    _check_accepted_fields(req)
    check_messages(req.messages)


def _check_accepted_fields(req: ChatRequest) -> None:
    """The fields clients send that change nothing here, or would be a lie to accept."""
    if req.store:
        raise unsupported("store", "nothing is stored (send store: false or leave it out)")
    if req.metadata is not None:
        if len(req.metadata) > METADATA_PAIRS:
            raise invalid("metadata", f"at most {METADATA_PAIRS} key-value pairs, got {len(req.metadata)}")
        for key, value in req.metadata.items():
            if len(key) > METADATA_KEY_CHARS:
                raise invalid(
                    "metadata", f"metadata keys have at most {METADATA_KEY_CHARS} characters, {key[:20]!r}... has {len(key)}"
                )
            if len(value) > METADATA_VALUE_CHARS:
                raise invalid(
                    "metadata", f"metadata values have at most {METADATA_VALUE_CHARS} characters, {key!r}'s has {len(value)}"
                )
    if req.service_tier not in (None, "auto", "default"):
        raise unsupported("service_tier", f"{req.service_tier!r}: this server has one tier ('auto' or 'default')")
    if req.verbosity not in (None, "medium"):
        raise unsupported("verbosity", "Qwen3 has no verbosity control ('medium', the default, is accepted)")
    if req.modalities is not None and "audio" in req.modalities:
        raise unsupported("modalities", "text output only")
    if req.audio is not None:
        raise unsupported("audio", "text output only")
    if req.functions is not None:
        raise unsupported("functions", "the deprecated functions API; send tools")
    if req.function_call is not None:
        raise unsupported("function_call", "the deprecated functions API; send tool_choice")
    if req.web_search_options is not None:
        raise unsupported("web_search_options", "this server searches nothing (server tools are the operator's)")


def _check_completion(req: CompletionRequest) -> None:
    if req.echo:
        raise unsupported("echo", "the prompt is not echoed")
    if req.logprobs:
        raise unsupported("logprobs", "log probabilities are not returned by this server")
    if req.suffix:
        raise unsupported("suffix", "no fill-in-the-middle")
    if req.best_of is not None and req.best_of > 1:
        raise unsupported("best_of", "one sequence per request")
    if isinstance(req.prompt, list) and len(req.prompt) != 1:
        raise unsupported("prompt", "one prompt per request (a list of exactly one string)")


def template_messages(req: ChatRequest) -> list[dict]:
    """Messages as the chat template reads them: text content, developer as system, unset fields absent."""
    out = []
    for m in req.messages:
        content = m.content
        if isinstance(content, list):
            content = "".join(p.text for p in content)
        if content is None and m.refusal is not None:
            content = m.refusal  # what the assistant said, in OpenAI's refusal field
        msg = {"role": "system" if m.role == "developer" else m.role, "content": content if content is not None else ""}
        if m.tool_calls:
            msg["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.function.name, "arguments": c.function.arguments},
                }
                for c in m.tool_calls
            ]
        if m.tool_call_id:
            msg["tool_call_id"] = m.tool_call_id
        if m.name:
            msg["name"] = m.name
        reasoning = m.reasoning_content if m.reasoning_content is not None else m.reasoning
        if reasoning is not None:
            msg["reasoning_content"] = reasoning
        out.append(msg)
    return out
