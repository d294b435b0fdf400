"""The checks on a chat request's messages, each a 400 naming the message (``messages[i]...``), as OpenAI's.

Tool calls and their results pair up as OpenAI requires them to: a ``tool`` message answers a call of the
assistant message right before it (only other ``tool`` messages between), by that call's id; an assistant
message with ``tool_calls`` is followed by an answer to each of its calls. A result the model cannot tie to a
call would reach the chat template as a ``<tool_response>`` of nothing.

The reasoning of an assistant turn sent back may come as ``reasoning`` (vLLM's current name) or
``reasoning_content`` (its older one, DeepSeek's): both are emitted by this server, so a client that sends
a message back whole sends both; two different texts are refused, since either could be meant.
"""

from .errors import invalid, unsupported

_ASSISTANT_ONLY = ("tool_calls", "reasoning_content", "reasoning", "refusal", "annotations")


def check_messages(messages) -> None:
    open_calls = None  # ids the latest assistant tool_calls message still waits on; None: no such message
    answered_by, answered = None, set()  # index of that assistant message, the ids answered since
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        _check_content(m, where)
        _check_fields(m, where)
        if m.role == "tool":
            if open_calls is None:
                raise invalid(
                    f"{where}.role",
                    "a tool message must answer a call of the assistant message with tool_calls right before it "
                    "(only tool messages between)",
                )
            if m.tool_call_id in answered:
                raise invalid(f"{where}.tool_call_id", f"tool_call_id {m.tool_call_id!r} is answered twice")
            if m.tool_call_id not in open_calls:
                raise invalid(
                    f"{where}.tool_call_id",
                    f"tool_call_id {m.tool_call_id!r} answers none of the tool calls of messages[{answered_by}]"
                    + (f" (still unanswered: {', '.join(sorted(open_calls))})" if open_calls else ""),
                )
            open_calls.discard(m.tool_call_id)
            answered.add(m.tool_call_id)
            continue
        if open_calls:
            raise _unanswered(answered_by, open_calls)
        open_calls = None
        if m.role == "assistant" and m.tool_calls:
            open_calls = {c.id for c in m.tool_calls}
            answered, answered_by = set(), i
    if open_calls:
        raise _unanswered(answered_by, open_calls)


def _unanswered(index, ids):
    return invalid(
        f"messages[{index}].tool_calls",
        "an assistant message with tool_calls must be followed by tool messages answering each tool_call_id; "
        f"not answered: {', '.join(sorted(ids))}",
    )


def _check_content(m, where: str) -> None:
    if isinstance(m.content, list):
        for j, part in enumerate(m.content):
            if part.type != "text":  # image_url, input_audio, file, refusal: well-formed (schemas.py), not read
                raise unsupported(f"{where}.content[{j}]", f"only text parts (the model reads text), not {part.type!r}")
    if m.content is None and not (m.role == "assistant" and (m.tool_calls or m.refusal is not None)):
        raise invalid(
            f"{where}.content", "content is required (null only for an assistant turn with tool_calls or a refusal)"
        )


def _check_fields(m, where: str) -> None:
    if m.role == "tool" and not m.tool_call_id:
        raise invalid(f"{where}.tool_call_id", "a tool message needs the tool_call_id it answers")
    if m.role != "tool" and m.tool_call_id is not None:
        raise invalid(f"{where}.tool_call_id", "only tool messages carry a tool_call_id")
    if m.role != "assistant":
        for name in _ASSISTANT_ONLY:
            if getattr(m, name) is not None:
                raise invalid(f"{where}.{name}", f"only assistant messages carry {name}")
    if m.reasoning is not None and m.reasoning_content is not None and m.reasoning != m.reasoning_content:
        raise invalid(
            f"{where}.reasoning",
            "reasoning and reasoning_content are two names of one field and differ here: send one of them",
        )
    if m.audio is not None:
        raise unsupported(f"{where}.audio", "no audio (the model reads text)")
    if m.function_call is not None:
        raise unsupported(f"{where}.function_call", "the deprecated functions API; send tool_calls")
