"""The service end to end over HTTP (real uvicorn, the real openai client) against stand-in Triton nodes.

The stand-in (tests/standin/triton_grpc_standin.py) serves the golden transformers repository's real
config.pbtxt and streams scripted Qwen3-format text with the real tokenizer's ids.
"""

import json
import time

import httpx
import openai
import pytest
from conftest import GOLDEN, Served
from triton_fleet_openai.app import create_app
from triton_fleet_openai.config import ModelInfo, Settings
from triton_fleet_openai.template import ChatTemplate
from triton_grpc_standin import StandinNode, load_config, pieces_from_text

MODEL = "qwen3-tiny"
HEADERS = {"X-Auth-Sub": "alice", "X-Auth-Class": "default", "X-Auth-Models": '["*"]', "X-Request-ID": "req-1"}
THINK_ANSWER = "<think>\nThe user greets me.\n</think>\n\nHello! How can I help you today?"
TOOLS_OUT = (
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
)
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}


@pytest.fixture(scope="module")
def config():
    return load_config(GOLDEN / "transformers" / MODEL / "config.pbtxt")


def make_script(hf_tokenizer, text):
    pieces = pieces_from_text(hf_tokenizer, text)

    def script(inputs):
        return pieces[: int(inputs["max_tokens"])]

    return script


def settings(tokenizer_dir, nodes, **over):
    model = ModelInfo(served_name=MODEL, entry_model=MODEL, runtime="transformers", context_length=1024,
                      max_input_len=900, max_output_len=256, fingerprint="f" * 64)
    return Settings(model=model, tokenizer_dir=tokenizer_dir, triton_nodes=nodes, metrics_port=0,
                    fail_timeout_s=30, **over)


@pytest.fixture
def node_factory(config):
    made = []

    def make(script, interval=0.0):
        node = StandinNode(config, script, interval).start()
        made.append(node)
        return node

    yield make
    for n in made:
        n.close()


@pytest.fixture
def served(tokenizer_dir):
    stack = []

    def serve(nodes, **over):
        s = Served(create_app(settings(tokenizer_dir, [n.url for n in nodes], **over)))
        stack.append(s)
        return s.__enter__()

    yield serve
    for s in stack:
        s.__exit__(None, None, None)


def client(srv, headers=HEADERS):
    return openai.OpenAI(base_url=srv.url + "/v1", api_key="unused-behind-gateway", default_headers=headers,
                         max_retries=0, timeout=20)


def test_models_and_chat(node_factory, served, hf_tokenizer, tokenizer_dir):
    node = node_factory(make_script(hf_tokenizer, THINK_ANSWER))
    srv = served([node])
    c = client(srv)
    models = c.models.list()
    assert [m.id for m in models.data] == [MODEL]
    assert models.data[0].model_extra["context_length"] == 1024

    messages = [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hi"}]
    r = c.chat.completions.create(model=MODEL, messages=messages, max_tokens=100, temperature=0)
    msg = r.choices[0].message
    assert msg.content == "Hello! How can I help you today?"
    assert msg.model_extra["reasoning_content"] == "The user greets me."
    assert r.choices[0].finish_reason == "stop"
    prompt = ChatTemplate.from_tokenizer_dir(tokenizer_dir).render(messages)
    assert node.servicer.requests[-1]["text_input"] == prompt
    assert r.usage.prompt_tokens == len(hf_tokenizer.encode(prompt, add_special_tokens=False).ids)
    assert r.usage.completion_tokens == len(hf_tokenizer.encode(THINK_ANSWER, add_special_tokens=False).ids)
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    sent = node.servicer.requests[-1]
    assert sent["temperature"] == 0 and sent["top_k"] == 1 and sent["stream"] is True
    assert sent["exclude_input_in_output"] is True and sent["max_tokens"] == 100


def test_streaming_with_usage_and_length(node_factory, served, hf_tokenizer):
    node = node_factory(make_script(hf_tokenizer, THINK_ANSWER))
    c = client(served([node]))
    stream = c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], stream=True,
                                       stream_options={"include_usage": True})
    content, reasoning, finish, usage, n = "", "", None, None, 0
    for chunk in stream:
        n += 1
        if chunk.usage:
            usage = chunk.usage
        for ch in chunk.choices:
            content += ch.delta.content or ""
            reasoning += (ch.delta.model_extra or {}).get("reasoning_content") or ""
            finish = ch.finish_reason or finish
    assert content == "Hello! How can I help you today?" and reasoning == "The user greets me."
    assert finish == "stop" and n > 5
    assert usage.completion_tokens == len(hf_tokenizer.encode(THINK_ANSWER, add_special_tokens=False).ids)

    r = c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=3)
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 3


def test_thinking_off(node_factory, served, hf_tokenizer):
    node = node_factory(make_script(hf_tokenizer, "Hello!"))
    c = client(served([node]))
    r = c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}],
                                  extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    assert node.servicer.requests[-1]["text_input"].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert r.choices[0].message.content == "Hello!"
    assert "reasoning_content" not in (r.choices[0].message.model_extra or {})


def test_tool_calls_stream_and_whole(node_factory, served, hf_tokenizer):
    node = node_factory(make_script(hf_tokenizer, TOOLS_OUT))
    c = client(served([node]))
    kw = {"model": MODEL, "messages": [{"role": "user", "content": "Weather and time in Paris?"}],
          "tools": [WEATHER, TIME]}
    r = c.chat.completions.create(**kw)
    calls = r.choices[0].message.tool_calls
    assert [(t.function.name, json.loads(t.function.arguments)) for t in calls] == [("get_weather", {"city": "Paris"}), ("get_time", {})]
    assert r.choices[0].finish_reason == "tool_calls" and r.choices[0].message.content is None
    assert "<tools>" in node.servicer.requests[-1]["text_input"]

    acc, order, finish = {}, [], None
    for chunk in c.chat.completions.create(stream=True, **kw):
        for ch in chunk.choices:
            finish = ch.finish_reason or finish
            assert not ch.delta.content  # no tag text leaks
            for tc in ch.delta.tool_calls or []:
                slot = acc.setdefault(tc.index, {"id": None, "name": None, "arguments": ""})
                if tc.id:
                    order.append(("id+name", tc.index))
                    assert tc.function.name and slot["arguments"] == ""
                    slot["id"], slot["name"] = tc.id, tc.function.name
                if tc.function and tc.function.arguments:
                    order.append(("args", tc.index))
                    slot["arguments"] += tc.function.arguments
    assert finish == "tool_calls"
    assert order == [("id+name", 0), ("args", 0), ("id+name", 1), ("args", 1)]
    assert json.loads(acc[0]["arguments"]) == {"city": "Paris"} and acc[1]["name"] == "get_time"

    r = c.chat.completions.create(tool_choice="none", **kw)
    assert r.choices[0].message.content == TOOLS_OUT and not r.choices[0].message.tool_calls
    assert "<tools>" not in node.servicer.requests[-1]["text_input"]
    r = c.chat.completions.create(parallel_tool_calls=False, **kw)
    assert len(r.choices[0].message.tool_calls) == 1


def test_named_and_required_tool_choice_prefill(node_factory, served, hf_tokenizer):
    node = node_factory(make_script(hf_tokenizer, '{"city": "Oslo"}}\n</tool_call>'))
    c = client(served([node]))
    r = c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Oslo?"}], tools=[WEATHER, TIME],
                                  tool_choice={"type": "function", "function": {"name": "get_weather"}})
    sent = node.servicer.requests[-1]["text_input"]
    assert sent.endswith('<think>\n\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": ')
    assert r.choices[0].message.tool_calls[0].function.name == "get_weather"
    assert json.loads(r.choices[0].message.tool_calls[0].function.arguments) == {"city": "Oslo"}
    assert r.usage.prompt_tokens == len(hf_tokenizer.encode(sent, add_special_tokens=False).ids)

    node2 = node_factory(make_script(hf_tokenizer, '{"name": "get_time", "arguments": {}}\n</tool_call>'))
    c2 = client(served([node2]))
    r = c2.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "time?"}], tools=[WEATHER, TIME],
                                   tool_choice="required")
    assert node2.servicer.requests[-1]["text_input"].endswith("<tool_call>\n")
    assert r.choices[0].message.tool_calls[0].function.name == "get_time"


def test_tool_round_trip_prompt(node_factory, served, hf_tokenizer):
    node = node_factory(make_script(hf_tokenizer, "It is 21 C in Paris."))
    c = client(served([node]))
    messages = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_a", "content": '{"temp_c": 21}'},
    ]
    r = c.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER])
    assert r.choices[0].message.content == "It is 21 C in Paris."
    sent = node.servicer.requests[-1]["text_input"]
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in sent
    assert "<tool_response>\n{\"temp_c\": 21}\n</tool_response>" in sent


def test_stop_strings_are_honoured_by_the_service(node_factory, served, hf_tokenizer):
    node = node_factory(make_script(hf_tokenizer, "one two three four five six seven eight nine ten"), interval=0.01)
    c = client(served([node]))
    r = c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "count"}], stop=["four"],
                                  extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    assert r.choices[0].message.content == "one two three " and r.choices[0].finish_reason == "stop"
    assert node.servicer.requests[-1]["stop_words"] == ["four"]
    time.sleep(0.3)
    assert node.servicer.inflight == 0 and node.servicer.cancelled == 1  # the rest was not generated


def test_completions(node_factory, served, hf_tokenizer):
    node = node_factory(make_script(hf_tokenizer, " jumps over the dog"))
    c = client(served([node]))
    r = c.completions.create(model=MODEL, prompt="The quick fox", max_tokens=50)
    assert r.choices[0].text == " jumps over the dog" and node.servicer.requests[-1]["text_input"] == "The quick fox"
    assert r.usage.prompt_tokens == len(hf_tokenizer.encode("The quick fox", add_special_tokens=False).ids)
    text = "".join(ch.choices[0].text for ch in c.completions.create(model=MODEL, prompt="x", stream=True, max_tokens=2) if ch.choices)
    assert text == " jumps over"


def post(srv, body, headers=HEADERS, path="/v1/chat/completions"):
    return httpx.post(srv.url + path, json=body, headers=headers, timeout=20)


def test_errors_are_openai_objects(node_factory, served, hf_tokenizer):
    node = node_factory(make_script(hf_tokenizer, "x"))
    srv = served([node])
    ok = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}]}

    r = post(srv, ok, headers={})
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    with pytest.raises(openai.AuthenticationError):
        client(srv, headers={}).models.list()

    r = post(srv, ok, headers={**HEADERS, "X-Auth-Models": '["qwen3-32b"]'})
    assert r.status_code == 403 and r.json()["error"]["code"] == "model_not_allowed"
    with pytest.raises(openai.PermissionDeniedError):
        client(srv, headers={**HEADERS, "X-Auth-Models": '["other"]'}).chat.completions.create(**ok)
    assert client(srv, headers={**HEADERS, "X-Auth-Models": '["other"]'}).models.list().data == []
    assert post(srv, ok, headers={**HEADERS, "X-Auth-Models": "not json"}).status_code == 403

    r = post(srv, {**ok, "model": "gpt-4"})
    assert r.status_code == 404 and r.json()["error"]["param"] == "model"

    cases = [
        ({"n": 2}, "n"), ({"logprobs": True}, "logprobs"), ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"presence_penalty": 0.5}, "presence_penalty"), ({"frobnicate": 1}, "frobnicate"),
        ({"temperature": 3}, "temperature"), ({"chat_template_kwargs": {"foo": 1}}, "chat_template_kwargs.foo"),
        ({"tool_choice": "required"}, "tool_choice"), ({"messages": []}, "messages"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, "messages[0].content[0]"),
        ({"logit_bias": {"1": 2}}, "logit_bias"), ({"stop": [""]}, "stop"),
    ]
    for extra, param in cases:
        r = post(srv, {**ok, **extra})
        assert r.status_code == 400, (extra, r.text)
        err = r.json()["error"]
        assert err["param"] == param and param.split(".")[0].split("[")[0] in err["message"], (extra, err)
        assert err["type"] == "invalid_request_error"

    r = post(srv, {**ok, "max_tokens": 1000})
    assert r.status_code == 400 and "256" in r.json()["error"]["message"]
    long = {**ok, "messages": [{"role": "user", "content": "word " * 850}], "max_tokens": 200}
    r = post(srv, long)
    msg = r.json()["error"]["message"]
    assert r.status_code == 400 and "1024" in msg and "200" in msg and r.json()["error"]["code"] == "context_length_exceeded"
    r = httpx.post(srv.url + "/v1/chat/completions", content=b"{not json", headers=HEADERS)
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"
    r = httpx.get(srv.url + "/v1/nope", headers=HEADERS)
    assert r.status_code == 404 and "error" in r.json()
    r = post(srv, {"model": MODEL, "prompt": "x", "echo": True}, path="/v1/completions")
    assert r.status_code == 400 and r.json()["error"]["param"] == "echo"
    assert len(node.servicer.requests) == 0  # nothing invalid reached Triton


def test_a_prompt_within_limits_goes_to_triton_before_it_is_counted(node_factory, tokenizer_dir, hf_tokenizer):
    from triton_fleet_openai.tokenizer import TokenCounter

    node = node_factory(make_script(hf_tokenizer, "Hello there friend"))
    seen = []  # requests the node had when a prompt was counted

    class Counter(TokenCounter):
        def count(self, text):
            seen.append(len(node.servicer.requests))
            return super().count(text)

    app = create_app(settings(tokenizer_dir, [node.url]), counter=Counter(tokenizer_dir))
    with Served(app) as srv:
        for messages, max_tokens, counted_first in (
            ([{"role": "user", "content": "Hi"}], None, False),  # the default max_tokens, within the context
            ([{"role": "user", "content": "Hi"}], 100, False),
            # 150 words: within the limits, but not by the bound (~780 bytes + 256 > 1024): counted first
            ([{"role": "user", "content": "word " * 150}], 256, True),
        ):
            seen.clear()
            before = len(node.servicer.requests)
            body = {"model": MODEL, "messages": messages, "stream": True, "stream_options": {"include_usage": True}}
            if max_tokens:
                body["max_tokens"] = max_tokens
            stream = client(srv).chat.completions.create(**body)
            usage = [c.usage for c in stream if c.usage][0]
            prompt = node.servicer.requests[-1]["text_input"]
            assert usage.prompt_tokens == len(hf_tokenizer.encode(prompt, add_special_tokens=False).ids)
            assert node.servicer.requests[-1]["max_tokens"] == (max_tokens or 256)
            assert seen == [before if counted_first else before + 1], (messages[0]["content"][:20], seen)


def test_token_budget_429(node_factory, served, hf_tokenizer):
    node = node_factory(make_script(hf_tokenizer, "Hello there friend"))
    srv = served([node], token_budgets={"small": 20})
    hdr = {**HEADERS, "X-Auth-Class": "small"}
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}]}
    assert post(srv, body, headers=hdr).status_code == 200  # ~15 prompt + 3 completion tokens
    assert post(srv, body, headers=hdr).status_code == 200  # the budget is checked before, counted after
    r = post(srv, body, headers=hdr)
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
    assert r.json()["error"]["code"] == "token_budget_exceeded"
    assert post(srv, body, headers={**HEADERS, "X-Auth-Sub": "bob", "X-Auth-Class": "small"}).status_code == 200
    assert post(srv, body).status_code == 200  # class without a budget
    metrics = httpx.get(srv.url + "/metrics").status_code  # metrics are not on the API port
    assert metrics == 404


def test_stopped_node_is_skipped(node_factory, served, hf_tokenizer):
    a = node_factory(make_script(hf_tokenizer, "from a"))
    b = node_factory(make_script(hf_tokenizer, "from b"))
    srv = served([a, b])
    c = client(srv)
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}],
            "extra_body": {"chat_template_kwargs": {"enable_thinking": False}}}
    seen = {c.chat.completions.create(**body).choices[0].message.content for _ in range(4)}
    assert seen == {"from a", "from b"}  # both serve
    a.stop()
    answers = [c.chat.completions.create(**body).choices[0].message.content for _ in range(6)]
    assert answers == ["from b"] * 6  # no request failed: the dead node is retried once, then skipped
    health = httpx.get(srv.url + "/health").json()
    assert health["nodes"] == {a.url: False, b.url: True}


def test_a_node_that_comes_back_is_used_within_a_second(config, served, hf_tokenizer, tokenizer_dir):
    """A node that was down while the service kept trying it (gRPC's reconnect backoff would have grown to
    several seconds by then) answers within about a second of its start."""
    first = StandinNode(config, make_script(hf_tokenizer, "back again")).start()
    port = first.port
    first.close()
    srv = served([first])  # the node's address, nothing listening there
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
    deadline = time.monotonic() + 6
    while time.monotonic() < deadline:  # every try fails and backs the channel off further
        assert post(srv, body).status_code == 503
        time.sleep(0.3)
    node = StandinNode(config, make_script(hf_tokenizer, "back again"), port=port).start()
    try:
        started = time.monotonic()
        while post(srv, body).status_code != 200:
            assert time.monotonic() - started < 2.5, "the node was not used within 2.5 s of its start"
            time.sleep(0.1)
    finally:
        node.close()


def test_node_stopped_mid_stream_fails_only_its_request(node_factory, served, hf_tokenizer):
    slow = node_factory(make_script(hf_tokenizer, "word " * 60), interval=0.05)
    srv = served([slow])
    c = client(srv)
    stream = c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], stream=True,
                                       extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    got = ""
    with pytest.raises(openai.APIError) as err:
        for i, chunk in enumerate(stream):
            got += chunk.choices[0].delta.content or "" if chunk.choices else ""
            if i == 3:
                slow.stop()
    assert got.startswith("word") and "failed mid-stream" in str(err.value)


@pytest.mark.parametrize("reuse", [True, False], ids=["streams reused", "a new stream per request"])
def test_client_disconnect_cancels_the_triton_request(reuse, node_factory, served, hf_tokenizer):
    """A client that leaves has its request's stream cancelled, which cancels the request in Triton; a stream
    kept open from an earlier request is cancelled the same way, and never reused after."""
    node = node_factory(make_script(hf_tokenizer, "word " * 200), interval=0.02)
    srv = served([node], reuse_streams=reuse)
    c = client(srv)
    assert c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}],
                                     max_tokens=3).choices[0].finish_reason == "length"
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "stream": True}
    with httpx.stream("POST", srv.url + "/v1/chat/completions", json=body, headers=HEADERS, timeout=20) as r:
        lines = r.iter_lines()
        for _ in range(6):
            next(lines)
        assert node.servicer.inflight == 1
    deadline = time.monotonic() + 5
    while node.servicer.inflight and time.monotonic() < deadline:
        time.sleep(0.05)
    assert node.servicer.inflight == 0 and node.servicer.cancelled == 1 and node.servicer.completed == 1
    # the first request's stream carried the second; the cancelled one is not used again
    assert node.servicer.streams == (1 if reuse else 2)
    assert c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}],
                                     max_tokens=3).choices[0].finish_reason == "length"
    assert node.servicer.streams == (2 if reuse else 3)


@pytest.mark.parametrize("final_alone", [False, True], ids=["final flag on the last piece", "final flag alone"])
def test_streams_are_reused_and_concurrent_requests_get_their_own(final_alone, node_factory, served, hf_tokenizer):
    """Twelve streamed requests at once, twice: twelve streams, opened by the first round and reused by the
    second; each request's pieces reach its own client, each ends at its own final flag (on its last piece, or
    alone after it: an empty final response)."""
    from concurrent.futures import ThreadPoolExecutor

    def script(inputs):
        n = inputs["text_input"].split("question ")[1].split("<")[0]
        return pieces_from_text(hf_tokenizer, f"answer {n} " * 6)[: int(inputs["max_tokens"])]

    node = node_factory(script, interval=0.01)
    node.servicer.final_alone = final_alone
    srv = served([node])
    c = client(srv)

    def ask(i):
        stream = c.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": f"question {i}"}], stream=True, max_tokens=50,
            extra_body={"chat_template_kwargs": {"enable_thinking": False}})
        chunks = [ch for ch in stream if ch.choices]
        assert chunks[-1].choices[0].finish_reason == "stop"
        return "".join(ch.choices[0].delta.content or "" for ch in chunks)

    with ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(ask, range(12)))
        assert answers == [f"answer {i} " * 6 for i in range(12)]
        assert node.servicer.streams <= 12
        opened = node.servicer.streams
        assert list(pool.map(ask, range(12))) == answers
    assert node.servicer.streams == opened and node.servicer.completed == 24 and node.servicer.cancelled == 0
    assert srv.app.state.fleet.pool.nodes[0].inflight == 0


def test_streams_left_open_before_a_node_restart_cost_the_node_nothing(config, served, hf_tokenizer):
    """The node restarts while the service keeps streams to it open: the next request finds its kept stream
    dead, takes a new one on the same node, and the node is not counted as failed."""
    first = StandinNode(config, make_script(hf_tokenizer, "before")).start()
    srv = served([first])
    c = client(srv)
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}],
            "extra_body": {"chat_template_kwargs": {"enable_thinking": False}}}
    assert c.chat.completions.create(**body).choices[0].message.content == "before"
    port = first.port
    first.close()
    again = StandinNode(config, make_script(hf_tokenizer, "after"), port=port).start()
    try:
        assert c.chat.completions.create(**body).choices[0].message.content == "after"
        node = srv.app.state.fleet.pool.nodes[0]
        assert node.failures == 0 and node.healthy(time.monotonic())
    finally:
        again.close()


def test_a_triton_that_does_not_flag_the_final_response_gets_a_stream_per_request(node_factory, served, hf_tokenizer):
    """Without Triton's final flag a request's end can only be its stream's end: the stream of the request
    that showed it is half-closed (Triton ends it after the request), and every later one gets its own."""
    node = node_factory(make_script(hf_tokenizer, "no flags here"))
    node.servicer.flags = False
    srv = served([node])
    c = client(srv)
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}],
            "extra_body": {"chat_template_kwargs": {"enable_thinking": False}}}
    answers = [c.chat.completions.create(**body).choices[0].message.content for _ in range(3)]
    assert answers == ["no flags here"] * 3 and node.servicer.streams == 3
    pool_node = srv.app.state.fleet.pool.nodes[0]
    assert not pool_node.reuse and not pool_node.idle and pool_node.failures == 0


def test_a_node_stopped_under_two_requests_fails_over_the_one_without_output(node_factory, served, hf_tokenizer):
    """Two requests on one node when it stops: the one already streaming fails (its output cannot be resumed
    elsewhere), the one that has produced nothing goes to the next node."""
    import threading

    a = node_factory(make_script(hf_tokenizer, "slow " * 40), interval=0.3)
    b = node_factory(make_script(hf_tokenizer, "from b"))
    srv = served([a, b])
    pool = srv.app.state.fleet.pool
    pool.nodes[1].down_until = time.monotonic() + 60  # b only as the last resort: both requests go to a
    c = client(srv)
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}],
            "extra_body": {"chat_template_kwargs": {"enable_thinking": False}}}
    streaming = c.chat.completions.create(stream=True, **body)
    chunks = iter(streaming)
    while not (next(chunks).choices[0].delta.content or ""):
        pass  # the first request has output
    second = {}
    thread = threading.Thread(target=lambda: second.update(r=c.chat.completions.create(**body)))
    thread.start()
    deadline = time.monotonic() + 5
    while len(a.servicer.requests) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(a.servicer.requests) == 2
    a.stop()
    with pytest.raises(openai.APIError) as err:
        for _ in chunks:
            pass
    assert "failed mid-stream" in str(err.value)
    thread.join(10)
    assert second["r"].choices[0].message.content == "from b"
    assert [n.inflight for n in pool.nodes] == [0, 0]


def test_drained_node_gets_no_new_request_and_finishes_its_stream(node_factory, served, hf_tokenizer, tmp_path):
    """A drained node keeps its running stream to the end; new requests go elsewhere, or 503 when none is left."""
    a = node_factory(make_script(hf_tokenizer, "word " * 40), interval=0.02)
    b = node_factory(make_script(hf_tokenizer, "from b"))
    drain = tmp_path / "drained-nodes.json"
    srv = served([a, b], drain_file=str(drain))
    c = client(srv)
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}],
            "extra_body": {"chat_template_kwargs": {"enable_thinking": False}}}
    # Start a stream, find the node it runs on, drain that one while it streams.
    stream = c.chat.completions.create(stream=True, **body)
    first = next(iter(stream))
    nodes = httpx.get(srv.url + "/internal/nodes").json()["nodes"]
    busy = [n for n in nodes if n["requests"]]
    assert len(busy) == 1 and busy[0]["requests"][0]["id"] == "req-1"
    # Both stand-ins listen on 127.0.0.1: name the node by host:port (a fleet names it by address).
    drain.write_text(json.dumps({"version": 1, "drained": {busy[0]["url"]: {"host": "n", "since": 1, "reason": "t"}}}))
    assert srv.app.state.reload_drain() == [busy[0]["url"]]
    rest = "".join(ch.choices[0].delta.content or "" for ch in stream if ch.choices)
    assert (first.choices[0].delta.content or "") + rest  # the drained node's stream ran to its end
    other = b if busy[0]["url"] == a.url else a
    answers = {c.chat.completions.create(**body).choices[0].message.content for _ in range(4)}
    assert len(answers) == 1  # only the node still in rotation answers
    snap = {n["url"]: n for n in httpx.get(srv.url + "/internal/nodes").json()["nodes"]}
    assert snap[busy[0]["url"]]["drained"] and snap[busy[0]["url"]]["inflight"] == 0
    assert not snap[other.url]["drained"]
    # Both drained: a clear 503, not a request to a node being changed.
    drain.write_text(json.dumps({"version": 1, "drained": {n["url"]: {} for n in nodes}}))
    srv.app.state.reload_drain()
    r = post(srv, {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}]})
    assert r.status_code == 503 and "drained" in r.json()["error"]["message"]
    # A broken drain file keeps the drain set; removing the file puts every node back.
    drain.write_text("{")
    assert srv.app.state.reload_drain() is None
    assert post(srv, {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}]}).status_code == 503
    drain.unlink()
    assert srv.app.state.reload_drain() == []
    assert post(srv, {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}]}).status_code == 200



async def _never():
    import asyncio

    await asyncio.sleep(30)
    return {"type": "http.disconnect"}


def _asgi_chats(app, calls, spec_version="2.3"):
    """Call the ASGI app with streamed chat requests one after the other, in one event loop (the pool's
    channels belong to it). Each call: (body, what each receive() after the body gets, list of sent
    messages); ``_never`` waits until the response has ended. Spec 2.3 is uvicorn's (a task watches for
    the disconnect); under 2.4 a server's send raises OSError once the client has gone."""
    import asyncio

    from starlette.requests import ClientDisconnect

    async def one(body, receive_after_body, sent):
        payload = json.dumps(body).encode()
        headers = [(k.lower().encode(), v.encode()) for k, v in {**HEADERS, "content-type": "application/json"}.items()]
        scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": spec_version}, "http_version": "1.1",
                 "method": "POST", "scheme": "http", "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions",
                 "query_string": b"", "root_path": "", "headers": headers, "client": ("127.0.0.1", 1),
                 "server": ("127.0.0.1", 80)}
        first = [True]

        async def receive():
            if first[0]:
                first[0] = False
                return {"type": "http.request", "body": payload, "more_body": False}
            return await receive_after_body()

        async def send(message):
            await asyncio.sleep(getattr(sent, "delay", 0))  # a slow network in front of the client
            sent.append(message)

        try:
            await app(scope, receive, send)
        except ClientDisconnect:
            pass

    async def run():
        for call in calls:
            await one(*call)
        await asyncio.sleep(0.3)  # the cancelled stream's end reaches the node

    asyncio.run(run())


def test_the_request_is_sent_to_triton_before_the_response_begins(node_factory, tokenizer_dir, hf_tokenizer):
    from triton_fleet_openai.backend import Pool

    node = node_factory(make_script(hf_tokenizer, "Hello there friend"))
    events = []

    class Recording(Pool):
        def _open(self, *a, **k):
            events.append("sent to Triton")
            return super()._open(*a, **k)

    class Log(list):
        def append(self, message):
            if message["type"] == "http.response.start":
                events.append("response started")
            elif message.get("body", b"").startswith(b"data: {"):
                events.append("chunk")
            super().append(message)

    app = create_app(settings(tokenizer_dir, [node.url]), pool=Recording([node.url], MODEL))
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "stream": True}
    # the first request reads the model's interface before it is sent; every later one is sent at once
    first, second = Log(), Log()
    _asgi_chats(app, [(body, _never, first), (body, _never, second)])
    assert events.count("sent to Triton") == 2
    later = events[events.index("sent to Triton", 1):]
    assert later[:3] == ["sent to Triton", "response started", "chunk"], events
    assert b"".join(m.get("body", b"") for m in second).endswith(b"data: [DONE]\n\n")
    assert node.servicer.completed == 2


@pytest.mark.parametrize("how", ["disconnect seen before the first token", "send fails (ASGI 2.4)"])
def test_a_client_gone_before_its_first_token_has_its_request_cancelled(how, node_factory, tokenizer_dir, hf_tokenizer):
    """The request goes to Triton as the response is made: a client that leaves before its first token (a long
    prefill) has its request cancelled in Triton, not generated to the end, whether the server sees the
    disconnect while the response waits or its send fails."""
    import asyncio

    node = node_factory(make_script(hf_tokenizer, "word " * 200), interval=0.5)
    app = create_app(settings(tokenizer_dir, [node.url]))
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "stream": True}

    async def leaves():
        await asyncio.sleep(0.2)  # the node has the request, its first piece comes at 0.5 s
        return {"type": "http.disconnect"}

    class Gone(list):
        delay = 0.2  # the node has the request by the time the headers would go out

        def append(self, message):
            raise OSError("the client has gone")  # as an ASGI 2.4 server's send does

    if how.startswith("send"):
        sent, spec, receive = Gone(), "2.4", _never
    else:
        sent, spec, receive = [], "2.3", leaves
    _asgi_chats(app, [(body, receive, sent)], spec_version=spec)
    assert not any(b'"content":"w' in m.get("body", b"") for m in sent) and len(node.servicer.requests) == 1
    deadline = time.monotonic() + 5
    while (node.servicer.inflight or not node.servicer.cancelled) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert node.servicer.inflight == 0 and node.servicer.cancelled == 1 and node.servicer.completed == 0
    assert app.state.fleet.pool.nodes[0].inflight == 0 and not app.state.fleet.pool.nodes[0].active


def test_a_request_triton_refuses_is_an_error_event_every_node_drained_a_503(node_factory, served, hf_tokenizer):
    """Triton's refusal of a streamed request (its stream's error message, before any output) reaches the
    client as OpenAI's error object in the stream, which the openai SDK raises; with every node drained a
    streamed request is refused before its response begins, with a 503 the SDK retries by itself."""
    refusing = node_factory(lambda inputs: "in ensemble 'qwen3': unexpected stop word")
    srv = served([refusing])
    c = client(srv)
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "stream": True}
    with pytest.raises(openai.APIError) as err:
        list(c.chat.completions.create(**body))
    assert "unexpected stop word" in err.value.message and err.value.body["code"] == "upstream_error"
    with pytest.raises(openai.APIError, match="unexpected stop word"):
        list(c.completions.create(model=MODEL, prompt="Hi", stream=True))
    srv.app.state.fleet.pool.set_drained([refusing.url])
    r = httpx.post(srv.url + "/v1/chat/completions", json=body, headers=HEADERS, timeout=20)
    assert r.status_code == 503 and r.json()["error"]["code"] == "upstream_unavailable"
    assert r.headers["x-request-id"] == HEADERS["X-Request-ID"]
