"""Server tools through /v1/chat/completions: the real openai client, the service under uvicorn, a stand-in
Triton node replaying scripted Qwen3-format turns (chosen by how many tool results the prompt already has) and
the CRM stand-in (tools/crm-standin) as the tools' endpoint."""

import importlib.util
import json
import logging

import httpx
import openai
import pytest
from conftest import GOLDEN, ROOT, Served
from triton_fleet_openai.app import create_app
from triton_fleet_openai.config import ModelInfo, Settings
from triton_grpc_standin import StandinNode, load_config, pieces_from_text

_spec = importlib.util.spec_from_file_location("crm_standin", ROOT / "tools" / "crm-standin" / "crm_standin.py")
crm_standin = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(crm_standin)

MODEL = "qwen3-tiny"
TOKEN = "crm-stand-in-token-42"
HEADERS = {"X-Auth-Sub": "alice", "X-Auth-Class": "internal", "X-Auth-Models": '["*"]', "X-Request-ID": "req-st"}
CASE = {"type": "object", "properties": {"case_id": {"type": "string", "pattern": "^CS[0-9]{8}$"}},
        "required": ["case_id"], "additionalProperties": False}
SUMMARY = {"type": "object", "properties": {"case_id": {"type": "string"}, "summary": {"type": "string"}},
           "required": ["case_id", "summary"]}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}


def call(name, **args):
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


@pytest.fixture(scope="module")
def crm():
    server = crm_standin.start(token=TOKEN)
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def service(tokenizer_dir, hf_tokenizer, crm):
    """serve(turns, max_rounds=4) -> (openai client, uvicorn, node, app); turns[i] is answered when the prompt
    holds i tool results."""
    stack = []

    def serve(turns, max_rounds=4, scope_header=False):
        def script(inputs):
            done = inputs["text_input"].count("<tool_response>")
            text = turns[min(done, len(turns) - 1)]
            return pieces_from_text(hf_tokenizer, text)[: int(inputs["max_tokens"])]

        node = StandinNode(load_config(GOLDEN / "transformers" / MODEL / "config.pbtxt"), script).start()
        auth = {"Authorization": f"Bearer {TOKEN}"}
        tools = [
            {"name": "get_case", "description": "Read a CRM case", "parameters": CASE,
             "url": crm.url + "/cases/{case_id}", "headers": auth, "allowed_classes": ["internal"],
             "models": [MODEL]},
            {"name": "save_summary", "description": "Store a case summary", "parameters": SUMMARY,
             "method": "POST", "url": crm.url + "/cases/{case_id}/summary", "headers": auth,
             "allowed_classes": ["internal"], "models": [MODEL]},
            {"name": "crm_write", "description": "Needs the crm:write scope", "parameters": {"type": "object"},
             "url": crm.url + "/healthz", "headers": auth, "required_scope": "crm:write"},
            {"name": "crm_error", "description": "A failing endpoint", "parameters": {"type": "object"},
             "url": crm.url + "/error", "headers": auth, "allowed_classes": ["internal"]},
            {"name": "crm_slow", "description": "A slow endpoint", "parameters": {"type": "object"},
             "url": crm.url + "/slow?seconds=3", "headers": auth, "allowed_classes": ["internal"],
             "timeout_s": 0.3, "connect_timeout_s": 0.3},
            {"name": "crm_big", "description": "An oversized answer", "parameters": {"type": "object"},
             "url": crm.url + "/oversized", "headers": auth, "allowed_classes": ["internal"],
             "max_response_bytes": 4096},
        ]
        model = ModelInfo(served_name=MODEL, entry_model=MODEL, runtime="transformers", context_length=1024,
                          max_input_len=900, max_output_len=256)
        settings = Settings(model=model, tokenizer_dir=tokenizer_dir, triton_nodes=[node.url], metrics_port=0,
                            server_tools={"max_rounds": max_rounds, "scope_header": scope_header,
                                          "tools": tools})
        app = create_app(settings)
        srv = Served(app).__enter__()
        stack.append((srv, node))
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", default_headers=HEADERS,
                               max_retries=0, timeout=20)
        return client, srv, node, app

    yield serve
    for srv, node in stack:
        srv.__exit__(None, None, None)
        node.close()


USER = [{"role": "user", "content": "Summarise case CS20240501 and save it."}]


def test_one_round_not_streamed(service, crm, caplog, hf_tokenizer):
    client, _, node, app = service([call("get_case", case_id="CS20240501"), "The case is open."])
    with caplog.at_level(logging.INFO, logger="triton_fleet_openai.audit"):
        r = client.chat.completions.create(model=MODEL, messages=USER, max_tokens=64)
    assert r.choices[0].message.content == "The case is open." and r.choices[0].finish_reason == "stop"
    assert not r.choices[0].message.tool_calls
    assert [(s["name"], s["status"]) for s in r.model_extra["server_tools"]] == [("get_case", "ok")]
    second_prompt = node.servicer.requests[-1]["text_input"]
    assert '"customer": "Example GmbH"' in second_prompt or '"customer":"Example GmbH"' in second_prompt
    assert '"name": "get_case"' in node.servicer.requests[0]["text_input"]  # offered through Qwen3's template
    audit = [json.loads(rec.getMessage()) for rec in caplog.records if rec.name == "triton_fleet_openai.audit"]
    assert [(a["request_id"], a["subject"], a["tool"], a["status"]) for a in audit] == [
        ("req-st", "alice", "get_case", "ok")]
    assert TOKEN not in caplog.text
    reg = app.state.fleet.metrics.registry
    assert reg.get_sample_value("triton_fleet_openai_server_tool_calls_total",
                                {"tool": "get_case", "subject": "alice", "status": "ok"}) == 1
    # both generations are counted in usage, exactly
    prompts = [req["text_input"] for req in node.servicer.requests]
    assert len(prompts) == 2
    assert r.usage.prompt_tokens == sum(len(hf_tokenizer.encode(p, add_special_tokens=False).ids) for p in prompts)


def test_two_rounds_streamed_with_extension_events(service, crm):
    turns = [call("get_case", case_id="CS20240501"),
             "Saving. " + call("save_summary", case_id="CS20240501", summary="Open supply contract."),
             "Saved the summary."]
    client, srv, _, _ = service(turns)
    stream = client.chat.completions.create(model=MODEL, messages=USER, stream=True, max_tokens=64,
                                            stream_options={"include_usage": True})
    content, finish, usage = "", None, None
    for chunk in stream:
        usage = chunk.usage or usage
        for ch in chunk.choices:
            content += ch.delta.content or ""
            finish = ch.finish_reason or finish
    assert content == "Saving. Saved the summary." and finish == "stop" and usage.completion_tokens > 0
    assert crm.cases["CS20240501"]["summary"] == "Open supply contract."
    # the raw stream: one server_tool chunk per call, between the rounds, with no choices
    with httpx.stream("POST", srv.url + "/v1/chat/completions", headers=HEADERS, timeout=20,
                      json={"model": MODEL, "messages": USER, "stream": True, "max_tokens": 64}) as resp:
        lines = [json.loads(x[6:]) for x in resp.iter_lines() if x.startswith("data: {")]
    events = [c["server_tool"] for c in lines if "server_tool" in c]
    assert [(e["name"], e["status"], e["round"]) for e in events] == [("get_case", "ok", 1), ("save_summary", "ok", 2)]
    assert all(c["choices"] == [] for c in lines if "server_tool" in c)


@pytest.mark.parametrize(
    ("tool", "kind"),
    [("crm_error", "server_error"), ("crm_slow", "timeout"), ("crm_big", "oversized")],
)
def test_failures_are_tool_errors_and_a_200(service, tool, kind):
    client, _, node, _ = service([call(tool), "The CRM did not help."])
    r = client.chat.completions.create(model=MODEL, messages=USER, max_tokens=64, extra_body={"server_tools": [tool]})
    assert r.choices[0].message.content == "The CRM did not help."
    assert r.model_extra["server_tools"][0]["status"] == kind
    assert f'"type": "{kind}"' in node.servicer.requests[-1]["text_input"]


def test_invalid_arguments_reach_the_model(service, crm):
    client, _, node, _ = service([call("get_case", case_id="../_requests"), "Bad id."])
    before = len(crm.requests)
    r = client.chat.completions.create(model=MODEL, messages=USER, max_tokens=64)
    assert r.model_extra["server_tools"][0]["status"] == "invalid_arguments"
    assert len(crm.requests) == before


def test_subject_outside_the_class_gets_403_and_no_attached_tools(service):
    client, srv, node, _ = service(["Hello."])
    partner = openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0,
                            default_headers=dict(HEADERS, **{"X-Auth-Class": "partner"}))
    with pytest.raises(openai.PermissionDeniedError, match="server tool 'get_case'"):
        partner.chat.completions.create(model=MODEL, messages=USER, extra_body={"server_tools": ["get_case"]})
    r = partner.chat.completions.create(model=MODEL, messages=USER, max_tokens=16)
    assert r.choices[0].message.content == "Hello."
    assert "get_case" not in node.servicer.requests[-1]["text_input"]
    with pytest.raises(openai.BadRequestError, match="does not exist"):
        client.chat.completions.create(model=MODEL, messages=USER, extra_body={"server_tools": ["nope"]})


def test_mixed_turn_and_round_limit(service):
    client, _, _, _ = service([call("get_weather", city="Bern") + "\n" + call("get_case", case_id="CS20240501"),
                               call("get_weather", city="Bern")])
    r = client.chat.completions.create(model=MODEL, messages=USER, tools=[WEATHER], max_tokens=64)
    msg = r.choices[0].message
    assert r.choices[0].finish_reason == "tool_calls"
    assert [c.function.name for c in msg.tool_calls] == ["get_weather"]
    assert [s["name"] for s in r.model_extra["server_tools"]] == ["get_case"]

    client, _, _, _ = service([call("get_case", case_id="CS20240501")], max_rounds=2)
    r = client.chat.completions.create(model=MODEL, messages=USER, max_tokens=64)
    assert r.model_extra["server_tool_rounds_exhausted"] is True and len(r.model_extra["server_tools"]) == 2
    assert r.choices[0].finish_reason == "stop"


def test_bad_declaration_stops_the_start(tokenizer_dir):
    model = ModelInfo(served_name=MODEL, entry_model=MODEL, runtime="transformers", context_length=1024,
                      max_input_len=900, max_output_len=256)
    bad = {"tools": [{"name": "t", "description": "d", "parameters": {"type": "object"}, "url": "ftp://x/",
                      "allowed_classes": ["a"]}]}
    settings = Settings(model=model, tokenizer_dir=tokenizer_dir, triton_nodes=["127.0.0.1:1"], server_tools=bad)
    with pytest.raises(SystemExit, match="server tool 't': field 'url'"):
        create_app(settings)


@pytest.mark.parametrize("trusted", [False, True])
def test_scope_header_is_read_only_where_the_gateway_sets_it(service, trusted):
    client, srv, _, _ = service([call("crm_write"), "ok"], scope_header=trusted)
    scoped = openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0,
                           default_headers=dict(HEADERS, **{"X-Auth-Scope": "crm:read crm:write"}))
    if not trusted:
        with pytest.raises(openai.PermissionDeniedError, match="crm_write"):
            scoped.chat.completions.create(model=MODEL, messages=USER, extra_body={"server_tools": ["crm_write"]})
        return
    r = scoped.chat.completions.create(model=MODEL, messages=USER, max_tokens=32,
                                       extra_body={"server_tools": ["crm_write"]})
    assert [(x["name"], x["status"]) for x in r.model_extra["server_tools"]] == [("crm_write", "ok")]
    with pytest.raises(openai.PermissionDeniedError):
        client.chat.completions.create(model=MODEL, messages=USER, extra_body={"server_tools": ["crm_write"]})
