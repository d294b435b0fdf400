"""The server-tools loop: generate a turn, run the server tools it calls, feed the results back, generate again.

Pure over an abstract "generate one assistant turn" callable, so that it is tested without Triton:

    generate(messages, tools, round_index) -> async iterator of events
        ("content", str) | ("reasoning", str) | ("tool_call", {"name", "arguments"[, "id"]})
        and last ("end", {"finish_reason": str, "usage": {"prompt_tokens", "completion_tokens", ...}})

``ToolLoop.stream`` yields the client's events: content and reasoning as they come (every round), a
``("server_tool", {...})`` event after each server call (the chat handler sends it as an extension chunk that
OpenAI clients ignore), the client's tool calls of the last turn, and ``("end", {...})``. ``ToolLoop.run``
collects the same into one assistant message, so a streamed and a whole answer carry the same text.

Rules (docs/server-tools.md says why):
- A call whose name is one of the request's server tools is a server call; any other name is the client's.
- A turn with server calls: they run (concurrently, results in call order), the turn with only its server calls
  and one ``tool`` message per call go into the conversation, and the model generates again. Client calls in that
  same turn are dropped: nothing has run for them, and the model, now seeing the server results, asks for them
  again if it still needs them. So the client never receives a call it must answer next to results it cannot
  see, and a side-effecting server call never runs without its result reaching the model.
- A turn without server calls ends the loop: it goes to the client as usual (its client calls, if any, with
  finish_reason "tool_calls").
- After ``max_rounds`` rounds of server calls the next turn is the last: server calls in it do not run, the
  loop ends with what the model said (and its client calls), ``server_tool_rounds_exhausted`` is set.
- tool_choice applies to round 0 only (the chat handler passes ``round_index``): forcing a call in every round
  would only run the loop to its limit.
"""

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Sequence
from typing import Any, Callable

from .server_tools import CallContext, ServerTool, ServerToolEngine, ToolResult

Event = tuple[str, Any]
Generate = Callable[[list[dict], list[dict], int], AsyncIterator[Event]]
Invoke = Callable[[ServerTool, Any, CallContext], Awaitable[ToolResult]]

_USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")


class ToolLoop:
    def __init__(self, max_rounds: int, invoke: Invoke):
        if max_rounds < 1:
            raise ValueError("max_rounds must be at least 1")
        self.max_rounds = max_rounds
        self.invoke = invoke

    @classmethod
    def for_engine(cls, engine: ServerToolEngine) -> "ToolLoop":
        return cls(engine.max_rounds, engine.invoke)

    async def stream(
        self,
        generate: Generate,
        messages: Sequence[dict],
        client_tools: Sequence[dict],
        server_tools: Sequence[ServerTool],
        ctx: CallContext,
    ) -> AsyncIterator[Event]:
        conversation = list(messages)
        by_name = {t.name: t for t in server_tools}
        tools = list(client_tools) + [t.openai_tool() for t in server_tools]
        usage = dict.fromkeys(_USAGE_KEYS, 0)
        calls_run = 0
        round_index = 0
        while True:
            content, reasoning, calls = [], [], []
            end: dict = {}
            async for kind, value in generate(conversation, tools, round_index):
                if kind == "content":
                    content.append(value)
                    yield kind, value
                elif kind == "reasoning":
                    reasoning.append(value)
                    yield kind, value
                elif kind == "tool_call":
                    calls.append(_with_id(value))
                elif kind == "end":
                    end = dict(value or {})
                else:
                    raise ValueError(f"unknown turn event {kind!r}")
            for key in _USAGE_KEYS:
                usage[key] += int((end.get("usage") or {}).get(key, 0))
            server_calls = [c for c in calls if c["name"] in by_name]
            client_calls = [c for c in calls if c["name"] not in by_name]
            exhausted = bool(server_calls) and round_index >= self.max_rounds
            if not server_calls or exhausted:
                for call in client_calls:
                    yield "tool_call", call
                finish = end.get("finish_reason") or "stop"
                if finish == "tool_calls" and not client_calls:
                    finish = "stop"  # the only calls were server calls the limit kept from running
                elif client_calls:
                    finish = "tool_calls"
                yield "end", {
                    "finish_reason": finish,
                    "usage": usage,
                    "rounds": round_index,
                    "server_tool_calls": calls_run,
                    "server_tool_rounds_exhausted": exhausted,
                }
                return
            round_index += 1
            results = await asyncio.gather(
                *(self.invoke(by_name[c["name"]], c["arguments"], ctx) for c in server_calls)
            )
            assistant: dict = {
                "role": "assistant",
                "content": "".join(content),
                "tool_calls": [
                    {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                    for c in server_calls
                ],
            }
            if reasoning:
                assistant["reasoning_content"] = "".join(reasoning)
            conversation.append(assistant)
            for call, result in zip(server_calls, results):
                conversation.append({"role": "tool", "tool_call_id": call["id"], "name": call["name"],
                                     "content": result.content})
                calls_run += 1
                yield "server_tool", {
                    "name": call["name"],
                    "tool_call_id": call["id"],
                    "status": result.status,
                    "duration_ms": round(result.duration_s * 1000, 1),
                    "round": round_index,
                }

    async def run(
        self,
        generate: Generate,
        messages: Sequence[dict],
        client_tools: Sequence[dict],
        server_tools: Sequence[ServerTool],
        ctx: CallContext,
    ) -> dict:
        """The whole answer: {"message", "finish_reason", "usage", "server_tools": [...], "rounds", ...}."""
        content, reasoning, calls, ran = [], [], [], []
        end: dict = {}
        async for kind, value in self.stream(generate, messages, client_tools, server_tools, ctx):
            if kind == "content":
                content.append(value)
            elif kind == "reasoning":
                reasoning.append(value)
            elif kind == "tool_call":
                calls.append(value)
            elif kind == "server_tool":
                ran.append(value)
            else:
                end = value
        message: dict = {"role": "assistant", "content": "".join(content) if content or not calls else None}
        if reasoning:
            # vLLM's current name and its older one (DeepSeek's), as the chat handler sends them
            message["reasoning"] = message["reasoning_content"] = "".join(reasoning)
        if calls:
            message["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in calls
            ]
        return dict(end, message=message, server_tools=ran)


def _with_id(call: dict) -> dict:
    out = {"name": call["name"], "arguments": call.get("arguments", "{}")}
    out["id"] = call.get("id") or "call_" + uuid.uuid4().hex[:24]
    return out


def server_tool_chunk(base: dict, info: dict) -> dict:
    """The streamed extension chunk between rounds: no choices (OpenAI clients skip it), a ``server_tool`` field."""
    return dict(base, choices=[], server_tool=dict(info))

