"""What the service makes of a request's body, field by field (issue 30, items 2-9): bodies it cannot read,
fields OpenAI refuses or clients send, sampling defaults, reasoning field names, and what a client learns of
a server-side failure. Through HTTP (real uvicorn, the real openai client) against a stand-in Triton node,
plus the decoding and sampling modules on their own."""

import json
import logging
import math

import httpx
import openai
import pytest
from conftest import GOLDEN, Served
from triton_fleet_openai import request_body, sampling
from triton_fleet_openai.app import create_app
from triton_fleet_openai.config import ModelInfo, Settings
from triton_fleet_openai.errors import APIError
from triton_fleet_openai.template import ChatTemplate
from triton_grpc_standin import StandinNode, load_config, pieces_from_text

MODEL = "qwen3-tiny"
HEADERS = {"X-Auth-Sub": "alice", "X-Auth-Class": "default", "X-Auth-Models": '["*"]', "X-Request-ID": "req-30"}
ANSWER = "<think>\nThe user greets me.\n</think>\n\nHello!"
# Qwen3's generation_config.json (Qwen/Qwen3-14B), as the role renders it into the service's configuration
QWEN3_GENERATION = {"bos_token_id": 151643, "do_sample": True, "eos_token_id": [151645, 151643],
                    "pad_token_id": 151643, "temperature": 0.6, "top_k": 20, "top_p": 0.95,
                    "transformers_version": "4.51.0"}
CREATED = 1714521600
CHAT = "/v1/chat/completions"


def settings(tokenizer_dir, nodes, **model_over):
    model = ModelInfo(**{"served_name": MODEL, "entry_model": MODEL, "runtime": "transformers", "context_length": 1024,
                         "max_input_len": 900, "max_output_len": 256, "created": CREATED,
                         "generation_config": QWEN3_GENERATION, **model_over})
    return Settings(model=model, tokenizer_dir=tokenizer_dir, triton_nodes=nodes, metrics_port=0, fail_timeout_s=30)


@pytest.fixture(scope="module")
def config():
    return load_config(GOLDEN / "transformers" / MODEL / "config.pbtxt")


@pytest.fixture(scope="module")
def node(config, hf_tokenizer):
    pieces = pieces_from_text(hf_tokenizer, ANSWER)
    n = StandinNode(config, lambda inputs: pieces[: int(inputs["max_tokens"])]).start()
    yield n
    n.close()


@pytest.fixture(scope="module")
def srv(node, tokenizer_dir):
    with Served(create_app(settings(tokenizer_dir, [node.url]))) as s:
        yield s


def post(srv, body, path=CHAT, **kw):
    headers = {**HEADERS, **kw.pop("headers", {})}
    if isinstance(body, bytes):
        return httpx.post(srv.url + path, content=body, headers=headers, timeout=20, **kw)
    return httpx.post(srv.url + path, json=body, headers=headers, timeout=20, **kw)


def client(srv):
    return openai.OpenAI(base_url=srv.url + "/v1", api_key="unused-behind-gateway", default_headers=HEADERS,
                         max_retries=0, timeout=20)


def ok_body(**extra):
    return {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8, **extra}


def assert_openai_error(r, status, param=None, code=None):
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"], err
    assert err["type"] == ("invalid_request_error" if status < 500 else "server_error"), err
    if param is not None:
        assert err["param"] == param, err
    if code is not None:
        assert err["code"] == code, err
    return err


# --- item 2: bodies that used to be plain-text 500s, and the rest of their kind --------------------------------

def nested(depth):
    return b'{"model": "' + MODEL.encode() + b'", "messages": ' + b"[" * depth + b"]" * depth + b"}"


RAW_BODIES = [
    ("nested 2,000 deep", nested(2000), None, "invalid_json"),
    ("nested 10,000 deep", nested(10000), None, "invalid_json"),
    ("nested 70 deep (parses, past the limit)", nested(70), None, "invalid_json"),
    ("empty", b"", None, "invalid_json"),
    ("whitespace", b"  \n", None, "invalid_json"),
    ("not UTF-8", b'{"model": "\xff\xfe"}', None, "invalid_json"),
    ("UTF-16", json.dumps(ok_body()).encode("utf-16"), None, "invalid_json"),
    ("an array", b"[1, 2]", None, "invalid_body"),
    ("a string", b'"hello"', None, "invalid_body"),
    ("null", b"null", None, "invalid_body"),
    ("NaN", b'{"model": "qwen3-tiny", "messages": [{"role": "user", "content": "Hi"}], "temperature": NaN}',
     "temperature", "invalid_value"),
    ("Infinity", b'{"model": "qwen3-tiny", "messages": [{"role": "user", "content": "Hi"}], "top_p": -Infinity}',
     "top_p", "invalid_value"),
    ("1e400", b'{"model": "qwen3-tiny", "messages": [{"role": "user", "content": "Hi"}], "temperature": 1e400}',
     "temperature", "invalid_value"),
    ("a 5,000-digit integer", b'{"model": "qwen3-tiny", "max_tokens": ' + b"9" * 5000 + b"}", None, "invalid_value"),
    ("a 40-digit max_tokens", b'{"model": "qwen3-tiny", "messages": [{"role": "user", "content": "Hi"}], '
     b'"max_tokens": ' + b"9" * 40 + b"}", "max_tokens", None),
    ("a 40-digit top_k", b'{"model": "qwen3-tiny", "messages": [{"role": "user", "content": "Hi"}], '
     b'"top_k": ' + b"9" * 40 + b"}", "top_k", "invalid_value"),
    ("a lone surrogate in a message", b'{"model": "qwen3-tiny", "messages": [{"role": "user", "content": "a\\ud800b"}]}',
     "messages[0].content", "invalid_value"),
    ("a lone low surrogate in a text part",
     b'{"model": "qwen3-tiny", "messages": [{"role": "user", "content": [{"type": "text", "text": "\\udc00"}]}]}',
     "messages[0].content[0].text", "invalid_value"),
    ("a lone surrogate in stop", b'{"model": "qwen3-tiny", "messages": [{"role": "user", "content": "Hi"}], '
     b'"stop": ["x", "\\ud800"]}', "stop[1]", "invalid_value"),
    ("a lone surrogate in a key", b'{"model": "qwen3-tiny", "messages": [{"role": "user", "content": "Hi"}], '
     b'"metadata": {"\\udfff": "v"}}', "metadata.\udfff", "invalid_value"),  # read back as the key sent
    ("a lone surrogate in the model", b'{"model": "\\ud800", "messages": [{"role": "user", "content": "Hi"}]}',
     "model", "invalid_value"),
]


@pytest.mark.parametrize("body,param,code", [c[1:] for c in RAW_BODIES], ids=[c[0] for c in RAW_BODIES])
def test_unreadable_bodies_are_400s_in_openai_shape(srv, node, body, param, code):
    before = len(node.servicer.requests)
    err = assert_openai_error(post(srv, body, headers={"Content-Type": "application/json"}), 400, param, code)
    assert "\\ud800" not in err["message"] or "surrogate" in err["message"]
    assert len(node.servicer.requests) == before  # nothing reached Triton


def test_lone_surrogates_in_completions_are_400s(srv):
    for field, param in (("prompt", "prompt"), ("stop", "stop")):
        body = {"model": MODEL, "prompt": "Hi", "max_tokens": 4, field: "x\ud800"}
        raw = json.dumps(body).encode()  # json.dumps writes the lone surrogate as its escape
        assert b"\\ud800" in raw
        assert_openai_error(post(srv, raw, path="/v1/completions"), 400, param, "invalid_value")


def test_a_surrogate_pair_is_text_not_an_error(srv, node):
    r = post(srv, json.dumps(ok_body(messages=[{"role": "user", "content": "smile \U0001f642"}])).encode())
    assert r.status_code == 200, r.text
    assert "smile \U0001f642" in node.servicer.requests[-1]["text_input"]


@pytest.mark.parametrize("content_type,status", [
    ("application/json", 200), ("application/json; charset=utf-8", 200), ("application/vnd.api+json", 200),
    ("application/x-www-form-urlencoded", 200),  # curl -d sends this
    (None, 200),
    ("text/plain", 400), ("multipart/form-data; boundary=x", 400), ("application/xml", 400),
    ("application/json; charset=latin-1", 400),
])
def test_content_types(srv, content_type, status):
    headers = {"Content-Type": content_type} if content_type else {}
    r = httpx.post(srv.url + CHAT, content=json.dumps(ok_body()).encode(), headers={**HEADERS, **headers}, timeout=20)
    if status == 200:
        assert r.status_code == 200, r.text
    else:
        assert_openai_error(r, 400, None, "invalid_content_type")


def test_a_compressed_body_is_refused_with_why(srv):
    r = post(srv, b"\x1f\x8b\x08\x00", headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})
    assert "uncompressed" in assert_openai_error(r, 400, None, "unsupported_content_encoding")["message"]


def test_decode_walks_only_when_the_text_asks_for_it(monkeypatch):
    walked = []
    monkeypatch.setattr(request_body, "_walk", walked.append)
    request_body.decode(json.dumps(ok_body(messages=[{"role": "user", "content": "é " * 100}])).encode())
    assert walked == []
    request_body.decode(b'{"a": "\\ud83d\\ude42"}')  # an escaped pair: walked, and fine
    assert len(walked) == 1


def test_decode_names_the_place_of_a_deep_value():
    deep = {"type": "object"}
    for _ in range(request_body.MAX_DEPTH):
        deep = {"type": "object", "properties": {"x": deep}}
    body = ok_body(tools=[{"type": "function", "function": {"name": "f", "parameters": deep}}])
    with pytest.raises(APIError) as err:
        request_body.decode(json.dumps(body).encode())
    assert err.value.param.startswith("tools[0].function.parameters.properties.x.properties")
    # one level less than the limit is fine
    request_body.decode(json.dumps({"a": json.loads("[" * 62 + "]" * 62)}).encode())


# --- item 3: unknown models --------------------------------------------------------------------------------------

def test_unknown_model_is_404_model_not_found(srv):
    for r in (httpx.get(srv.url + "/v1/models/gpt-4o", headers=HEADERS, timeout=20), post(srv, ok_body(model="gpt-4o"))):
        err = assert_openai_error(r, 404, "model", "model_not_found")
        assert "gpt-4o" in err["message"]
    with pytest.raises(openai.NotFoundError) as exc:
        client(srv).models.retrieve("gpt-4o")
    assert exc.value.code == "model_not_found"
    assert client(srv).models.retrieve(MODEL).id == MODEL


# --- item 4: what OpenAI refuses -------------------------------------------------------------------------------

CALL = {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
REFUSED = [
    ("max_tokens as a string", {"max_tokens": "4"}, "max_tokens"),
    ("max_tokens as a float", {"max_tokens": 4.0}, "max_tokens"),
    ("max_tokens as true", {"max_tokens": True}, "max_tokens"),
    ("max_completion_tokens as a string", {"max_completion_tokens": "4"}, "max_completion_tokens"),
    ("seed as a float", {"seed": 1.0}, "seed"),
    ("top_k as a string", {"top_k": "20"}, "top_k"),
    ("n as true", {"n": True}, "n"),
    ("stream as 1", {"stream": 1}, "stream"),
    ("temperature as a string", {"temperature": "0.5"}, "temperature"),
    ("temperature as true", {"temperature": True}, "temperature"),
    ("stream_options without stream", {"stream_options": {"include_usage": True}}, "stream_options"),
    ("stream_options with stream false", {"stream": False, "stream_options": {"include_usage": True}}, "stream_options"),
    ("parallel_tool_calls without tools", {"parallel_tool_calls": False}, "parallel_tool_calls"),
    ("a tool message answering no call", {"messages": [
        {"role": "user", "content": "Hi"}, {"role": "tool", "tool_call_id": "call_x", "content": "1"}]},
     "messages[1].role"),
    ("a tool message answering another id", {"messages": [
        {"role": "user", "content": "Weather?"}, {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_b", "content": "21 C"}], "tools": [WEATHER]},
     "messages[2].tool_call_id"),
    ("a tool message after the next user turn", {"messages": [
        {"role": "user", "content": "Weather?"}, {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_a", "content": "21 C"}, {"role": "user", "content": "and?"},
        {"role": "tool", "tool_call_id": "call_a", "content": "21 C"}], "tools": [WEATHER]},
     "messages[4].role"),
    ("a call answered twice", {"messages": [
        {"role": "user", "content": "Weather?"}, {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_a", "content": "21 C"},
        {"role": "tool", "tool_call_id": "call_a", "content": "22 C"}], "tools": [WEATHER]},
     "messages[3].tool_call_id"),
    ("structured outputs", {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}},
     "response_format"),
    ("a call left unanswered", {"messages": [
        {"role": "user", "content": "Weather?"}, {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "user", "content": "never mind"}], "tools": [WEATHER]},
     "messages[1].tool_calls"),
]


@pytest.mark.parametrize("extra,param", [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_what_openai_refuses_is_refused(srv, extra, param):
    assert_openai_error(post(srv, ok_body(**extra)), 400, param)


def test_an_int_for_a_float_field_is_taken_as_openai_does(srv, node):
    r = post(srv, ok_body(temperature=1, top_p=1, presence_penalty=0))
    assert r.status_code == 200, r.text
    assert node.servicer.requests[-1]["temperature"] == 1.0


def test_completions_are_strict_too(srv):
    body = {"model": MODEL, "prompt": "Hi"}
    assert_openai_error(post(srv, {**body, "max_tokens": "4"}, path="/v1/completions"), 400, "max_tokens")
    assert_openai_error(post(srv, {**body, "echo": 0}, path="/v1/completions"), 400, "echo")
    assert_openai_error(post(srv, {**body, "stream_options": {"include_usage": True}}, path="/v1/completions"), 400,
                        "stream_options")
    err = assert_openai_error(post(srv, {**body, "prompt": [1, 2, 3]}, path="/v1/completions"), 400, "prompt")
    assert "token-id" in err["message"]


# --- item 5: what clients send ---------------------------------------------------------------------------------

ACCEPTED = [
    {"store": False}, {"store": None}, {"stream": None},
    {"metadata": {"team": "search", "k" * 64: "v" * 512}},
    {"service_tier": "auto"}, {"service_tier": "default"},
    {"reasoning_effort": "low"}, {"reasoning_effort": "medium"}, {"reasoning_effort": "high"},
    {"prompt_cache_key": "tenant-7/session-3"}, {"prompt_cache_retention": "in-memory"},
    {"safety_identifier": "user-hash-1"}, {"user": "u-1"},
    {"stream": True, "stream_options": {"include_usage": True, "include_obfuscation": True}},
    {"stream": True, "stream_options": {"include_obfuscation": False}},
    {"modalities": ["text"]}, {"verbosity": "medium"},
    {"prediction": {"type": "content", "content": "Hello!"}},
    {"audio": None, "functions": None, "function_call": None, "web_search_options": None},
    {"parallel_tool_calls": True, "tools": [WEATHER]},
    {"min_p": 0.0, "repetition_penalty": 1.1},
]


@pytest.mark.parametrize("extra", ACCEPTED, ids=[",".join(e) for e in ACCEPTED])
def test_fields_clients_send_are_accepted(srv, extra):
    r = post(srv, ok_body(**extra))
    assert r.status_code == 200, r.text


REFUSED_WITH_WHY = [
    ({"store": True}, "store", "nothing is stored"),
    ({"metadata": {str(i): "v" for i in range(17)}}, "metadata", "16"),
    ({"metadata": {"k" * 65: "v"}}, "metadata", "64"),
    ({"metadata": {"k": "v" * 513}}, "metadata", "512"),
    ({"metadata": {"k": 1}}, "metadata.k", None),
    ({"service_tier": "flex"}, "service_tier", "one tier"),
    ({"service_tier": "priority"}, "service_tier", "one tier"),
    ({"prompt_cache_key": 7}, "prompt_cache_key", None),
    ({"reasoning_effort": "extreme"}, "reasoning_effort", None),
    ({"reasoning_effort": "none", "chat_template_kwargs": {"enable_thinking": True}}, "reasoning_effort", "send one"),
    ({"reasoning_effort": "high", "chat_template_kwargs": {"enable_thinking": False}}, "reasoning_effort", "send one"),
    ({"verbosity": "low"}, "verbosity", "verbosity"),
    ({"modalities": ["text", "audio"]}, "modalities", "text"),
    ({"audio": {"voice": "alloy", "format": "mp3"}}, "audio", "text"),
    ({"functions": [{"name": "f"}]}, "functions", "tools"),
    ({"function_call": "auto"}, "function_call", "tool_choice"),
    ({"web_search_options": {}}, "web_search_options", "searches"),
    ({"stream": True, "stream_options": {"include_obfuscation": "yes"}}, "stream_options.include_obfuscation", None),
    ({"repetition_penalty": 0}, "repetition_penalty", None),
]


@pytest.mark.parametrize("extra,param,why", REFUSED_WITH_WHY, ids=[",".join(c[0]) + f"={i}" for i, c in enumerate(REFUSED_WITH_WHY)])
def test_what_would_be_a_lie_is_refused_with_why(srv, extra, param, why):
    err = assert_openai_error(post(srv, ok_body(**extra)), 400, param)
    if why:
        assert why in err["message"], err


@pytest.mark.parametrize("effort,thinking", [("none", False), ("minimal", False), ("low", True), ("high", True)])
def test_reasoning_effort_is_qwen3s_thinking_switch(srv, node, effort, thinking):
    r = post(srv, ok_body(reasoning_effort=effort))
    assert r.status_code == 200, r.text
    closed = node.servicer.requests[-1]["text_input"].endswith("<think>\n\n</think>\n\n")
    assert closed is not thinking
    # the same switch said twice is no conflict
    r = post(srv, ok_body(reasoning_effort=effort, chat_template_kwargs={"enable_thinking": thinking}))
    assert r.status_code == 200, r.text


def test_the_sdk_sends_the_new_fields_and_gets_answers(srv):
    c = client(srv)
    r = c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_completion_tokens=8,
                                  store=False, metadata={"a": "b"}, service_tier="auto", reasoning_effort="low",
                                  prompt_cache_key="k", safety_identifier="s", user="u")
    assert r.choices[0].message.content is not None
    with pytest.raises(openai.BadRequestError) as err:
        c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], store=True)
    assert err.value.param == "store"


# --- item 6: what a client learns of a server-side failure -----------------------------------------------------

def test_a_triton_crash_mid_stream_tells_the_client_a_stable_message_and_the_log_the_detail(
    config, hf_tokenizer, tokenizer_dir, caplog
):
    slow = StandinNode(config, lambda inputs: pieces_from_text(hf_tokenizer, "word " * 60), interval=0.05).start()
    try:
        with Served(create_app(settings(tokenizer_dir, [slow.url]))) as s, caplog.at_level(logging.INFO):
            body = ok_body(stream=True, max_tokens=60, chat_template_kwargs={"enable_thinking": False})
            events = []
            with httpx.stream("POST", s.url + CHAT, json=body, headers=HEADERS, timeout=20) as r:
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        events.append(line[6:])
                        if len(events) == 4:
                            slow.stop()
            assert events[-1] == "[DONE]"
            error = json.loads(events[-2])["error"]
            assert error["code"] == "upstream_failed" and error["type"] == "server_error"
            assert "req-30" in error["message"]
            text = json.dumps(error)
            assert slow.url not in text and str(slow.port) not in text and "127.0.0.1" not in text
            for leak in ("grpc", "StatusCode", "debug", "UNAVAILABLE", "ipv4"):
                assert leak.lower() not in text.lower(), text
            logged = [rec.getMessage() for rec in caplog.records if "req-30" in rec.getMessage()]
            assert any(slow.url in m and "mid-stream" in m for m in logged), logged
    finally:
        slow.close()


def test_no_node_is_a_503_without_addresses(config, hf_tokenizer, tokenizer_dir, caplog):
    gone = StandinNode(config, lambda inputs: []).start()
    url = gone.url
    gone.close()
    with Served(create_app(settings(tokenizer_dir, [url]))) as s, caplog.at_level(logging.INFO):
        for body in (ok_body(), ok_body(stream=True)):
            r = post(s, body)
            err = assert_openai_error(r, 503, None, "upstream_unavailable")
            assert url not in err["message"] and "127.0.0.1" not in err["message"] and "req-30" in err["message"]
            assert r.headers["x-request-id"] == "req-30"
        assert any(url in rec.getMessage() and "req-30" in rec.getMessage() for rec in caplog.records)


def test_an_unexpected_exception_is_a_json_500_with_the_request_id(srv, caplog, monkeypatch):
    app_state = srv.app.state.fleet

    def broken(*a, **k):
        raise RuntimeError("secret internals at /opt/triton-fleet")

    monkeypatch.setattr(app_state.template, "render", broken)
    with caplog.at_level(logging.INFO):
        r = post(srv, ok_body())
    err = assert_openai_error(r, 500, None, "internal_error")
    assert "secret" not in err["message"] and "req-30" in err["message"]
    assert any("secret internals" in (rec.getMessage() + str(rec.exc_info)) for rec in caplog.records)


def test_an_unexpected_exception_mid_stream_is_an_error_event_then_done(srv, caplog, monkeypatch):
    from triton_fleet_openai import app as appmod

    def broken(*a, **k):
        raise RuntimeError("parser internals")

    monkeypatch.setattr(appmod.OutputParser, "feed", broken)
    with caplog.at_level(logging.INFO):
        r = post(srv, ok_body(stream=True))
    events = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    error = json.loads(events[-2])["error"]
    assert error["code"] == "internal_error" and "parser internals" not in error["message"]
    assert "req-30" in error["message"]
    assert any("req-30" in rec.getMessage() for rec in caplog.records)


# --- item 8: sampling defaults -----------------------------------------------------------------------------------

def test_left_out_sampling_parameters_are_the_checkpoints(srv, node):
    assert post(srv, ok_body()).status_code == 200
    sent = node.servicer.requests[-1]
    assert sent["temperature"] == pytest.approx(0.6) and sent["top_p"] == pytest.approx(0.95) and sent["top_k"] == 20
    assert "presence_penalty" not in sent and "repetition_penalty" not in sent
    assert post(srv, {"model": MODEL, "prompt": "Hi", "max_tokens": 4}, path="/v1/completions").status_code == 200
    sent = node.servicer.requests[-1]
    assert sent["temperature"] == pytest.approx(0.6) and sent["top_k"] == 20


def test_a_request_overrides_each_default_alone(srv, node):
    assert post(srv, ok_body(temperature=0.9)).status_code == 200
    sent = node.servicer.requests[-1]
    assert sent["temperature"] == pytest.approx(0.9) and sent["top_p"] == pytest.approx(0.95) and sent["top_k"] == 20
    assert post(srv, ok_body(top_k=-1, top_p=0.5)).status_code == 200
    sent = node.servicer.requests[-1]
    assert sent["top_k"] == 0 and sent["top_p"] == pytest.approx(0.5) and sent["temperature"] == pytest.approx(0.6)
    assert post(srv, ok_body(temperature=0)).status_code == 200
    sent = node.servicer.requests[-1]
    assert sent["temperature"] == 0 and sent["top_k"] == 1  # greedy, whatever the default top_k
    assert post(srv, ok_body(repetition_penalty=1.2)).status_code == 200
    assert node.servicer.requests[-1]["repetition_penalty"] == pytest.approx(1.2)


def test_the_model_card_shows_the_defaults_and_the_checkpoint_time(srv):
    card = client(srv).models.retrieve(MODEL)
    assert card.created == CREATED
    assert card.model_extra["sampling_defaults"] == {"temperature": 0.6, "top_p": 0.95, "top_k": 20}
    listed = httpx.get(srv.url + "/v1/models", headers=HEADERS, timeout=20).json()["data"][0]
    assert listed["sampling_defaults"] == card.model_extra["sampling_defaults"] and listed["created"] == CREATED


def test_operator_overrides_and_a_checkpoint_without_generation_config(config, node, tokenizer_dir):
    over = settings(tokenizer_dir, [node.url], sampling_defaults={"temperature": 0.7, "top_k": None,
                                                                  "repetition_penalty": 1.05})
    with Served(create_app(over)) as s:
        assert client(s).models.retrieve(MODEL).model_extra["sampling_defaults"] == {
            "temperature": 0.7, "top_p": 0.95, "repetition_penalty": 1.05}
        assert post(s, ok_body()).status_code == 200
        sent = node.servicer.requests[-1]
        assert sent["temperature"] == pytest.approx(0.7) and "top_k" not in sent
        assert sent["repetition_penalty"] == pytest.approx(1.05)  # the transformers runtime has the input
    bare = settings(tokenizer_dir, [node.url], generation_config={})
    assert bare.model.sampling == {"temperature": 1.0, "top_p": 1.0}  # OpenAI's, not the runtime's greedy


@pytest.mark.parametrize("generation,overrides,fragment", [
    ({"temperature": 3.0}, {}, "generation_config.json sets temperature"),
    ({"top_k": 2.5}, {}, "an integer"),
    ({"temperature": "hot"}, {}, "a number"),
    ({}, {"top_p": 0}, "above 0.0"),
    ({}, {"beam_width": 2}, "beam_width"),
    ({}, {"temperature": True}, "a number"),
    ({}, {"min_p": math.inf}, "finite"),
])
def test_bad_sampling_defaults_fail_the_configuration(generation, overrides, fragment):
    with pytest.raises(sampling.SamplingConfigError, match=fragment):
        sampling.resolve(generation, overrides)
    with pytest.raises(ValueError, match=fragment):
        ModelInfo(served_name=MODEL, entry_model=MODEL, runtime="transformers", context_length=8, max_input_len=4,
                  max_output_len=4, generation_config=generation, sampling_defaults=overrides)


def test_sampling_resolve_layers():
    assert sampling.resolve({}, {}) == {"temperature": 1.0, "top_p": 1.0}
    assert sampling.resolve(QWEN3_GENERATION, {}) == {"temperature": 0.6, "top_p": 0.95, "top_k": 20}
    # do_sample is not read (as vLLM does not); min_p and repetition_penalty are, presence_penalty is not
    assert sampling.resolve({"do_sample": False, "min_p": 0.05, "repetition_penalty": 1.05, "presence_penalty": 1.5},
                            {"presence_penalty": 0.5, "top_p": None}) == {
        "temperature": 1.0, "min_p": 0.05, "repetition_penalty": 1.05, "presence_penalty": 0.5}


# --- item 9: the reasoning field's two names ---------------------------------------------------------------------

def test_reasoning_is_sent_under_both_names(srv):
    c = client(srv)
    msg = c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}]).choices[0].message
    assert msg.model_extra["reasoning"] == msg.model_extra["reasoning_content"] == "The user greets me."
    deltas = [ch.choices[0].delta.model_extra or {} for ch in
              c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], stream=True)
              if ch.choices]
    with_reasoning = [d for d in deltas if "reasoning" in d or "reasoning_content" in d]
    assert with_reasoning and all(d["reasoning"] == d["reasoning_content"] for d in with_reasoning)
    assert "".join(d["reasoning"] for d in with_reasoning) == "The user greets me."


def test_either_reasoning_name_is_read_back(srv, node, tokenizer_dir):
    history = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"},
               {"role": "user", "content": "thanks"}]
    expected = ChatTemplate.from_tokenizer_dir(tokenizer_dir).render(
        [history[0], {**history[1], "reasoning_content": "add them"}, history[2]])
    for fields in ({"reasoning": "add them"}, {"reasoning_content": "add them"},
                   {"reasoning": "add them", "reasoning_content": "add them"}):
        messages = [history[0], {**history[1], **fields}, history[2]]
        assert post(srv, ok_body(messages=messages)).status_code == 200
        assert node.servicer.requests[-1]["text_input"] == expected
    messages = [history[0], {**history[1], "reasoning": "a", "reasoning_content": "b"}, history[2]]
    assert_openai_error(post(srv, ok_body(messages=messages)), 400, "messages[1].reasoning")


def test_a_response_message_sent_back_whole_is_accepted(srv, node):
    """The openai SDK's message.model_dump(): refusal, annotations, audio, function_call as null, and the
    reasoning under both names."""
    c = client(srv)
    first = c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}])
    back = first.choices[0].message.model_dump()
    assert {"refusal", "annotations", "audio", "function_call"} <= set(back)
    r = c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}, back,
                                                         {"role": "user", "content": "And?"}])
    assert r.choices[0].message.content


# --- the oracle's findings 8-11: the refusal names the place that is wrong -----------------------------------

def test_a_prompt_past_the_input_limit_is_named_where_it_was_sent(srv):
    """A completion's prompt is ``prompt`` (there are no messages on /v1/completions), a chat's ``messages``."""
    long = "word " * 1_000  # past max_input_len (900 tokens)
    r = post(srv, {"model": MODEL, "prompt": long}, path="/v1/completions")
    assert_openai_error(r, 400, "prompt", "context_length_exceeded")
    r = post(srv, {"model": MODEL, "prompt": long, "max_tokens": 8}, path="/v1/completions")
    assert_openai_error(r, 400, "prompt", "context_length_exceeded")
    assert_openai_error(post(srv, ok_body(messages=[{"role": "user", "content": long}])), 400, "messages",
                        "context_length_exceeded")


def _round_trip(call):
    return ok_body(messages=[{"role": "user", "content": "Weather?"},
                             {"role": "assistant", "content": None, "tool_calls": [call]},
                             {"role": "tool", "tool_call_id": call["id"], "content": "21 C"}], tools=[WEATHER])


def test_a_tool_call_sent_back_needs_its_type_and_arguments(srv):
    """OpenAI refuses them missing ("Missing required parameter: 'messages[1].tool_calls[0].type'"); they are
    not filled in."""
    assert post(srv, _round_trip(CALL)).status_code == 200
    no_type = {k: v for k, v in CALL.items() if k != "type"}
    err = assert_openai_error(post(srv, _round_trip(no_type)), 400, "messages[1].tool_calls[0].type",
                              "missing_required_parameter")
    assert "messages[1].tool_calls[0].type" in err["message"]
    no_arguments = {**CALL, "function": {"name": "get_weather"}}
    assert_openai_error(post(srv, _round_trip(no_arguments)), 400, "messages[1].tool_calls[0].function.arguments",
                        "missing_required_parameter")


PART_REFUSALS = [
    ("an unknown key in a text part", {"type": "text", "text": "Hi", "oracle_x": 1},
     "messages[0].content[0].oracle_x", "unsupported_parameter", None),
    ("an unknown key in an image part", {"type": "image_url", "image_url": {"url": "https://x/a.png"}, "oracle_x": 1},
     "messages[0].content[0].oracle_x", "unsupported_parameter", None),
    ("an image part", {"type": "image_url", "image_url": {"url": "https://x/a.png"}},
     "messages[0].content[0]", "unsupported_parameter", "only text parts"),
    ("an audio part", {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
     "messages[0].content[0]", "unsupported_parameter", "only text parts"),
    ("a file part", {"type": "file", "file": {"file_id": "file-1"}},
     "messages[0].content[0]", "unsupported_parameter", "only text parts"),
    ("a part of an unknown type", {"type": "video", "video": {}}, "messages[0].content[0].type", "invalid_value",
     "'video'"),
    ("a part without a type", {"text": "Hi"}, "messages[0].content[0].type", "missing_required_parameter", None),
    ("a part that is not an object", "Hi", "messages[0].content[0]", "invalid_value", "object"),
    ("a text part without text", {"type": "text"}, "messages[0].content[0].text", "missing_required_parameter", None),
    ("a text part with a number", {"type": "text", "text": 5}, "messages[0].content[0].text", "invalid_value", None),
]


@pytest.mark.parametrize("part,param,code,why", [c[1:] for c in PART_REFUSALS], ids=[c[0] for c in PART_REFUSALS])
def test_content_parts_are_checked_as_every_object_is(srv, part, param, code, why):
    err = assert_openai_error(post(srv, ok_body(messages=[{"role": "user", "content": [part]}])), 400, param, code)
    if why:
        assert why in err["message"], err


def test_an_assistant_refusal_part_is_refused_with_why(srv):
    messages = [{"role": "user", "content": "Hi"},
                {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't."}]},
                {"role": "user", "content": "Why?"}]
    err = assert_openai_error(post(srv, ok_body(messages=messages)), 400, "messages[1].content[0]")
    assert "only text parts" in err["message"] and "'refusal'" in err["message"]


UNION_REFUSALS = [
    ("a named choice without a name", {"tool_choice": {"type": "function", "function": {}}},
     "tool_choice.function.name", "missing_required_parameter", None),
    ("a named choice with a number for a name", {"tool_choice": {"type": "function", "function": {"name": 5}}},
     "tool_choice.function.name", "invalid_value", "string"),
    ("a named choice with an unknown key", {"tool_choice": {"type": "function",
                                                            "function": {"name": "get_weather", "oracle_x": 1}}},
     "tool_choice.function.oracle_x", "unsupported_parameter", None),
    ("a named choice of another type", {"tool_choice": {"type": "tool", "function": {"name": "get_weather"}}},
     "tool_choice.type", "invalid_value", "'function'"),
    ("a tool_choice of no kind", {"tool_choice": 5}, "tool_choice", "invalid_value",
     "expected one of 'none', 'auto', 'required' or an object, got a number"),
    ("an unknown tool_choice string", {"tool_choice": "any"}, "tool_choice", "invalid_value", "'required'"),
    ("a number among the stops", {"stop": ["a", 5]}, "stop[1]", "invalid_value", "string"),
    ("stop as a number", {"stop": 5}, "stop", "invalid_value", "expected a string or an array, got a number"),
    ("content as an object", {"messages": [{"role": "user", "content": {"type": "text", "text": "Hi"}}]},
     "messages[0].content", "invalid_value", "expected a string or an array, got an object"),
    ("a key named like a union member", {"metadata": {"str": 5}}, "metadata.str", "invalid_value", None),
]


@pytest.mark.parametrize("extra,param,code,why", [c[1:] for c in UNION_REFUSALS], ids=[c[0] for c in UNION_REFUSALS])
def test_a_union_refusal_names_the_place_in_the_branch_that_was_sent(srv, extra, param, code, why):
    """A value that fails every member of a union is reported by the member of its JSON type (an object for a
    named tool_choice, an array for stop); one of no member's type gets what the union takes."""
    err = assert_openai_error(post(srv, ok_body(tools=[WEATHER], **extra)), 400, param, code)
    if why:
        assert why in err["message"], err


def test_completions_union_refusals_name_the_place(srv):
    body = {"model": MODEL, "prompt": "Hi", "max_tokens": 4}
    assert_openai_error(post(srv, {**body, "stop": ["a", 5]}, path="/v1/completions"), 400, "stop[1]")
    err = assert_openai_error(post(srv, {**body, "prompt": {"text": "Hi"}}, path="/v1/completions"), 400, "prompt")
    assert "expected a string or an array, got an object" in err["message"]
