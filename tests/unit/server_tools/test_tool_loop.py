"""The server-tools loop over a scripted "generate one turn" callable: rounds, limit, mixed calls, streaming."""

import asyncio
import copy
import json

import pytest
import server_tools_support
from prometheus_client import CollectorRegistry
from triton_fleet_openai.server_tools import (
    CallContext,
    Principal,
    ServerToolEngine,
    ServerToolMetrics,
    ToolResult,
)
from triton_fleet_openai.tool_loop import ToolLoop, server_tool_chunk

crm = pytest.fixture(scope="module")(server_tools_support.crm_server)

CTX = CallContext("req-9", Principal("alice", "internal"))
CLIENT_TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}


def engine_with(url_base="http://127.0.0.1:9", token="unused"):
    schema = {"type": "object", "properties": {"case_id": {"type": "string"}}, "required": ["case_id"]}
    return ServerToolEngine.from_config({
        "max_rounds": 2,
        "tools": [
            {"name": "get_case", "description": "Read a case", "parameters": schema,
             "url": url_base + "/cases/{case_id}", "allowed_classes": ["internal"],
             "headers": {"Authorization": f"Bearer {token}"}},
            {"name": "crm_error", "description": "Always fails", "parameters": {"type": "object"},
             "url": url_base + "/error", "allowed_classes": ["internal"],
             "headers": {"Authorization": f"Bearer {token}"}},
        ],
    }, metrics=ServerToolMetrics(CollectorRegistry()))


def turn(*events, finish=None, prompt=10, completion=5):
    calls = any(k == "tool_call" for k, _ in events)
    return [*events, ("end", {"finish_reason": finish or ("tool_calls" if calls else "stop"),
                              "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                        "total_tokens": prompt + completion}})]


def call(name, **args):
    return ("tool_call", {"name": name, "arguments": json.dumps(args)})


class Scripted:
    """Replays fixed turns; records what each round was given."""

    def __init__(self, *turns):
        self.turns = list(turns)
        self.seen = []

    async def __call__(self, messages, tools, round_index):
        self.seen.append((copy.deepcopy(messages), [t["function"]["name"] for t in tools], round_index))
        script = self.turns[min(len(self.seen) - 1, len(self.turns) - 1)]
        for event in script:
            await asyncio.sleep(0)
            yield event


class FakeInvoke:
    def __init__(self):
        self.calls = []

    async def __call__(self, tool, arguments, ctx):
        self.calls.append((tool.name, json.loads(arguments), ctx.request_id))
        await asyncio.sleep(0.01 if tool.name == "get_case" else 0)
        return ToolResult(tool.name, "ok", json.dumps({"tool": tool.name, "args": json.loads(arguments)}), 0.0123)


USER = [{"role": "user", "content": "Summarise case CS20240501"}]


def run(loop, gen, server, client=(CLIENT_TOOL,)):
    return asyncio.run(loop.run(gen, USER, list(client), server, CTX))


def collect(loop, gen, server, client=(CLIENT_TOOL,)):
    async def go():
        return [e async for e in loop.stream(gen, USER, list(client), server, CTX)]

    return asyncio.run(go())


@pytest.fixture
def tools():
    engine = engine_with()
    return list(engine.tools.values())


def test_no_tool_call_is_one_generation(tools):
    gen = Scripted(turn(("reasoning", "hm"), ("content", "Hello")))
    out = run(ToolLoop(2, FakeInvoke()), gen, tools)
    # the reasoning under vLLM's current name and its older one, as the chat handler sends it
    assert out["message"] == {"role": "assistant", "content": "Hello", "reasoning": "hm", "reasoning_content": "hm"}
    assert (out["finish_reason"], out["rounds"], out["server_tool_calls"]) == ("stop", 0, 0)
    assert gen.seen[0][1] == ["get_weather", "get_case", "crm_error"]  # client and server tools both offered


def test_one_round_feeds_the_result_back(tools):
    invoke = FakeInvoke()
    gen = Scripted(turn(("content", "Looking it up. "), call("get_case", case_id="CS20240501")),
                   turn(("content", "The case is open.")))
    out = run(ToolLoop(2, invoke), gen, tools)
    assert out["message"]["content"] == "Looking it up. The case is open."
    assert out["finish_reason"] == "stop" and out["rounds"] == 1
    assert invoke.calls == [("get_case", {"case_id": "CS20240501"}, "req-9")]
    messages, _, round_index = gen.seen[1]
    assert round_index == 1
    assistant, tool_msg = messages[-2], messages[-1]
    assert assistant["role"] == "assistant" and assistant["content"] == "Looking it up. "
    assert [c["function"]["name"] for c in assistant["tool_calls"]] == ["get_case"]
    assert tool_msg == {"role": "tool", "tool_call_id": assistant["tool_calls"][0]["id"], "name": "get_case",
                        "content": '{"tool": "get_case", "args": {"case_id": "CS20240501"}}'}
    assert out["usage"] == {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}
    assert [s["name"] for s in out["server_tools"]] == ["get_case"]


def test_two_rounds_and_parallel_calls_keep_call_order(tools):
    invoke = FakeInvoke()
    gen = Scripted(
        turn(call("get_case", case_id="A"), call("crm_error"), call("get_case", case_id="B")),
        turn(call("get_case", case_id="C")),
        turn(("content", "done")),
    )
    out = run(ToolLoop(2, invoke), gen, tools)
    assert out["rounds"] == 2 and out["server_tool_calls"] == 4 and not out["server_tool_rounds_exhausted"]
    first_round = gen.seen[1][0]
    assert [m["role"] for m in first_round[1:]] == ["assistant", "tool", "tool", "tool"]
    ids = [c["id"] for c in first_round[1]["tool_calls"]]
    assert [m["tool_call_id"] for m in first_round[2:]] == ids
    assert [json.loads(m["content"])["args"].get("case_id") for m in first_round[2:]] == ["A", None, "B"]
    assert len(gen.seen[2][0]) == 1 + 4 + 2


def test_round_limit_ends_with_what_the_model_said(tools):
    invoke = FakeInvoke()
    gen = Scripted(turn(("content", "again "), call("get_case", case_id="X")))  # always calls
    out = run(ToolLoop(2, invoke), gen, tools)
    assert len(gen.seen) == 3 and len(invoke.calls) == 2
    assert out["server_tool_rounds_exhausted"] is True
    assert out["finish_reason"] == "stop"
    assert out["message"] == {"role": "assistant", "content": "again again again "}


def test_mixed_turn_runs_server_calls_then_returns_client_calls(tools):
    invoke = FakeInvoke()
    gen = Scripted(
        turn(call("get_weather", city="Bern"), call("get_case", case_id="CS1")),
        turn(("content", "I also need the weather."), call("get_weather", city="Bern")),
    )
    out = run(ToolLoop(2, invoke), gen, tools)
    assert invoke.calls == [("get_case", {"case_id": "CS1"}, "req-9")]
    # the dropped client call is not in the conversation the model sees next; the server result is
    second = gen.seen[1][0]
    assert [c["function"]["name"] for c in second[-2]["tool_calls"]] == ["get_case"]
    assert second[-1]["role"] == "tool"
    assert out["finish_reason"] == "tool_calls"
    assert [c["function"]["name"] for c in out["message"]["tool_calls"]] == ["get_weather"]
    assert json.loads(out["message"]["tool_calls"][0]["function"]["arguments"]) == {"city": "Bern"}
    assert out["message"]["content"] == "I also need the weather."


def test_client_only_calls_go_back_without_invoking(tools):
    invoke = FakeInvoke()
    gen = Scripted(turn(call("get_weather", city="Bern"), ("tool_call", {"name": "unknown_fn", "arguments": "{}",
                                                                       "id": "call_given"})))
    out = run(ToolLoop(2, invoke), gen, tools)
    assert invoke.calls == [] and len(gen.seen) == 1
    assert out["finish_reason"] == "tool_calls" and out["message"]["content"] is None
    assert [c["function"]["name"] for c in out["message"]["tool_calls"]] == ["get_weather", "unknown_fn"]
    assert out["message"]["tool_calls"][1]["id"] == "call_given"


def test_limit_reached_on_a_mixed_turn_returns_its_client_calls(tools):
    invoke = FakeInvoke()
    gen = Scripted(turn(call("get_case", case_id="X"), call("get_weather", city="Bern")))
    out = run(ToolLoop(1, invoke), gen, tools)
    assert len(invoke.calls) == 1 and out["server_tool_rounds_exhausted"]
    assert out["finish_reason"] == "tool_calls"
    assert [c["function"]["name"] for c in out["message"]["tool_calls"]] == ["get_weather"]


def test_stream_order_and_equal_to_whole(tools):
    script = (turn(("reasoning", "r0"), ("content", "a"), call("get_case", case_id="CS1"), call("get_weather")),
              turn(("content", "b"), ("content", "c"), call("get_weather", city="Bern")))
    events = collect(ToolLoop(2, FakeInvoke()), Scripted(*script), tools)
    kinds = [k for k, _ in events]
    assert kinds == ["reasoning", "content", "server_tool", "content", "content", "tool_call", "end"]
    info = events[2][1]
    assert (info["name"], info["status"], info["duration_ms"], info["round"]) == ("get_case", "ok", 12.3, 1)
    whole = run(ToolLoop(2, FakeInvoke()), Scripted(*script), tools)
    assert "".join(v for k, v in events if k == "content") == whole["message"]["content"] == "abc"
    assert events[-1][1]["finish_reason"] == whole["finish_reason"] == "tool_calls"


def test_tool_errors_reach_the_model_and_the_loop_goes_on(crm):
    engine = engine_with(crm.url, crm.token)
    loop = ToolLoop.for_engine(engine)
    gen = Scripted(turn(call("crm_error"), call("get_case", case_id="../x"), call("get_case", case_id="CS20240501")),
                   turn(("content", "Partly done.")))

    async def go():
        try:
            return await loop.run(gen, USER, [], list(engine.tools.values()), CTX)
        finally:
            await engine.aclose()

    out = asyncio.run(go())
    assert out["finish_reason"] == "stop" and out["message"]["content"] == "Partly done."
    assert [s["status"] for s in out["server_tools"]] == ["server_error", "invalid_arguments", "ok"]
    results = [json.loads(m["content"]) for m in gen.seen[1][0] if m["role"] == "tool"]
    assert results[0]["error"]["type"] == "server_error"
    assert results[1]["error"]["type"] == "invalid_arguments"
    assert results[2]["customer"] == "Example GmbH"


def test_extension_chunk_and_bad_settings():
    chunk = server_tool_chunk({"id": "c", "object": "chat.completion.chunk", "choices": [{"x": 1}]},
                              {"name": "get_case", "status": "ok", "duration_ms": 3.0})
    assert chunk["choices"] == [] and chunk["server_tool"]["name"] == "get_case"
    with pytest.raises(ValueError, match="max_rounds"):
        ToolLoop(0, FakeInvoke())
