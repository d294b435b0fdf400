"""Request shapes (pydantic v2) and the checks that answer 400 naming the parameter.

Every model forbids unknown fields: a parameter this server does not implement is refused, never
silently ignored. Parameters that exist in OpenAI's API but are not implemented here are accepted
by the model only to be refused with a clear message in :func:`check_unsupported`.
"""

from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import APIError, invalid, unsupported


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TextPart(_Strict):
    type: Literal["text"]
    text: str


class FunctionCall(_Strict):
    name: str
    arguments: str = "{}"


class ToolCall(_Strict):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(_Strict):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Optional[Union[str, list[dict[str, Any]]]] = None
    name: Optional[str] = None
    tool_calls: Optional[list[ToolCall]] = None
    tool_call_id: Optional[str] = None
    reasoning_content: Optional[str] = None


class FunctionDef(_Strict):
    name: str = Field(min_length=1, max_length=64)
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
    include_usage: bool = False


class ResponseFormat(_Strict):
    type: str


class _Sampling(_Strict):
    model: str
    stream: bool = False
    stream_options: Optional[StreamOptions] = None
    max_tokens: Optional[int] = Field(default=None, ge=1)
    temperature: Optional[float] = Field(default=None, ge=0.0, le=2.0)
    top_p: Optional[float] = Field(default=None, gt=0.0, le=1.0)
    top_k: Optional[int] = Field(default=None, ge=-1)
    stop: Optional[Union[str, list[str]]] = None
    seed: Optional[int] = Field(default=None, ge=0, le=2**63 - 1)
    presence_penalty: Optional[float] = Field(default=None, ge=-2.0, le=2.0)
    frequency_penalty: Optional[float] = Field(default=None, ge=-2.0, le=2.0)
    n: Optional[int] = Field(default=None, ge=1)
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
    top_logprobs: Optional[int] = None
    response_format: Optional[ResponseFormat] = None
    # extension: the operator's server tools this request wants (server_tools.py); others may be attached by model
    server_tools: Optional[list[str]] = None


class CompletionRequest(_Sampling):
    prompt: Union[str, list[str]]
    echo: Optional[bool] = None
    logprobs: Optional[int] = None
    suffix: Optional[str] = None
    best_of: Optional[int] = None


# Template switches a client may set through chat_template_kwargs (as vLLM accepts them).
TEMPLATE_KWARGS = {"enable_thinking": bool}
MAX_STOP_STRINGS = 16


def parse(model_cls, data):
    """``model_cls`` from the decoded JSON body, or an APIError naming the first bad parameter."""
    if not isinstance(data, dict):
        raise APIError(400, "the request body must be a JSON object", code="invalid_body")
    try:
        return model_cls.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        param = ".".join(str(p) for p in err.get("loc", ()) if not str(p).startswith("function-"))
        if err.get("type") == "extra_forbidden":
            raise APIError(
                400,
                f"unknown or unsupported parameter: {param} (this server implements the parameters listed in docs/openai-api.md)",
                param=param,
                code="unsupported_parameter",
            ) from exc
        if err.get("type") == "missing":
            raise APIError(
                400, f"missing required parameter: {param}", param=param, code="missing_required_parameter"
            ) from exc
        raise APIError(400, f"invalid value for {param}: {err.get('msg')}", param=param, code="invalid_value") from exc


def stop_list(req) -> list[str]:
    if req.stop is None:
        return []
    stops = [req.stop] if isinstance(req.stop, str) else list(req.stop)
    if len(stops) > MAX_STOP_STRINGS:
        raise invalid("stop", f"at most {MAX_STOP_STRINGS} stop strings, got {len(stops)}")
    if any(not s for s in stops):
        raise invalid("stop", "stop strings must not be empty")
    return stops


def check_unsupported(req, runtime_params) -> None:
    """Refuse what the request asks that neither this server nor the runtime can do."""
    if req.n is not None and req.n > 1:
        raise unsupported("n", "one choice per request (n=1); send several requests instead")
    if req.logit_bias:
        raise unsupported("logit_bias", "the Triton runtimes here take no logit bias")
    for name in ("presence_penalty", "frequency_penalty"):
        value = getattr(req, name)
        if value not in (None, 0, 0.0) and name not in runtime_params:
            raise unsupported(name, "the serving runtime of this model has no such input")
    if isinstance(req, ChatRequest):
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
        if req.tool_choice is not None and req.tool_choice != "none" and not req.tools:
            raise invalid("tool_choice", "tool_choice needs tools")
        if isinstance(req.tool_choice, NamedToolChoice):
            names = [t.function.name for t in req.tools or []]
            if req.tool_choice.function.name not in names:
                raise invalid(
                    "tool_choice",
                    f"function {req.tool_choice.function.name!r} is not among the tools ({', '.join(names)})",
                )
        for i, m in enumerate(req.messages):
            if isinstance(m.content, list):
                for j, part in enumerate(m.content):
                    if part.get("type") != "text" or not isinstance(part.get("text"), str):
                        raise unsupported(f"messages[{i}].content[{j}]", "only text parts (the model reads text)")
            if m.role == "tool" and not m.tool_call_id:
                raise invalid(f"messages[{i}].tool_call_id", "a tool message needs the tool_call_id it answers")
            if m.role != "assistant" and m.tool_calls:
                raise invalid(f"messages[{i}].tool_calls", "only assistant messages carry tool_calls")
            if m.content is None and not (m.role == "assistant" and m.tool_calls):
                raise invalid(
                    f"messages[{i}].content", "content is required (null only for an assistant turn with tool_calls)"
                )
    else:
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
            content = "".join(p["text"] for p in content)
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
        if m.reasoning_content is not None:
            msg["reasoning_content"] = m.reasoning_content
        out.append(msg)
    return out
