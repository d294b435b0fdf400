"""Server tools engine: declarations, URL construction, and real HTTP calls against the CRM stand-in."""

import asyncio
import json
import logging
import socket

import pytest
import server_tools_support
from prometheus_client import CollectorRegistry
from triton_fleet_openai.server_tools import (
    CallContext,
    Principal,
    ServerToolAccessError,
    ServerToolConfigError,
    ServerToolEngine,
    ServerToolMetrics,
    _ToolFailure,
)

crm = pytest.fixture(scope="module")(server_tools_support.crm_server)

ALICE = Principal("alice", "internal", ("crm:read", "crm:write"))
CTX = CallContext("req-1", ALICE)
CASE_SCHEMA = {
    "type": "object",
    "properties": {"case_id": {"type": "string"}},
    "required": ["case_id"],
    "additionalProperties": False,
}


def decl(**over):
    base = {
        "name": "get_case",
        "description": "Read a CRM case",
        "parameters": CASE_SCHEMA,
        "url": "http://127.0.0.1:8080/cases/{case_id}",
        "allowed_classes": ["internal"],
    }
    base.update(over)
    return base


def load(*tools, **cfg):
    cfg.setdefault("tools", list(tools))
    return ServerToolEngine.from_config(cfg)


# --- declarations -----------------------------------------------------------------------------------------------


def test_minimal_declaration_gets_defaults():
    engine = load(decl())
    tool = engine.tools["get_case"]
    assert (tool.method, tool.timeout_s, tool.connect_timeout_s, tool.max_response_bytes) == ("GET", 10.0, 2.0, 65536)
    assert tool.response_format == "json" and not tool.audit_arguments and engine.max_rounds == 4
    assert tool.openai_tool() == {
        "type": "function",
        "function": {"name": "get_case", "description": "Read a CRM case", "parameters": CASE_SCHEMA},
    }


@pytest.mark.parametrize(
    ("over", "fragment"),
    [
        ({"timout_s": 3}, "unknown field(s) ['timout_s']"),
        ({"timeout_s": -1}, "field 'timeout_s'"),
        ({"method": "TRACE"}, "field 'method'"),
        ({"max_response_bytes": 0}, "field 'max_response_bytes'"),
        ({"name": "bad name!"}, "field 'name'"),
        ({"parameters": {"type": "object", "properties": {"x": {"type": "strin"}}}}, "field 'parameters': not a valid JSON Schema"),
        ({"parameters": {"type": "array"}}, "the top level must be"),
        ({"url": "ftp://127.0.0.1/cases/{case_id}"}, "scheme must be http or https"),
        ({"url": "http://{case_id}.crm.internal/cases"}, "may only stand in the path"),
        ({"url": "http://crm.internal/cases?id={case_id}"}, "may only stand in the path"),
        ({"url": "http://user:pw@crm.internal/cases/{case_id}"}, "credentials in the URL"),
        ({"url": "http://crm.internal/cases/{case_id}#top"}, "fragment"),
        ({"url": "http://crm.internal/cases/{other}"}, "path parameter 'other' must be a property"),
        ({"url": "http://crm.internal/../cases/{case_id}"}, "'.' and '..' segments"),
        ({"url": "http://crm.internal:99999/cases/{case_id}"}, "field 'url'"),
        ({"allowed_classes": []}, "say who may use the tool"),
        ({"connect_timeout_s": 5, "timeout_s": 1}, "field 'connect_timeout_s'"),
        ({"headers": {"Bad Header": "x"}}, "not a valid header name"),
        ({"headers": {"Host": "evil"}}, "set by the HTTP client"),
    ],
)
def test_bad_declaration_names_tool_and_field(over, fragment):
    with pytest.raises(ServerToolConfigError) as err:
        load(decl(**over))
    assert fragment in str(err.value)
    assert str(err.value).startswith("server tool ")


def test_missing_name_is_numbered_and_required_field_named():
    with pytest.raises(ServerToolConfigError, match=r"server tool 'x': 'url' is a required property"):
        load(decl(), {"name": "x", "description": "d", "parameters": CASE_SCHEMA, "allowed_classes": ["a"]})
    with pytest.raises(ServerToolConfigError, match=r"server tool #2: 'name' is a required property"):
        load(decl(), {"description": "d", "parameters": CASE_SCHEMA, "url": "http://h/", "allowed_classes": ["a"]})
    with pytest.raises(ServerToolConfigError, match=r"server_tools: field 'tools': 'get_case' is not of type 'object'"):
        load("get_case")


def test_duplicate_names_and_bad_config_keys():
    with pytest.raises(ServerToolConfigError, match="declared twice"):
        load(decl(), decl())
    with pytest.raises(ServerToolConfigError, match=r"unknown field\(s\) \['rounds'\]"):
        ServerToolEngine.from_config({"rounds": 3, "tools": []})
    with pytest.raises(ServerToolConfigError, match="max_rounds"):
        ServerToolEngine.from_config({"max_rounds": 0, "tools": []})


def test_header_secret_never_in_errors_or_repr():
    secret = "Bearer sk-live-123\r\nX-Evil: 1"
    with pytest.raises(ServerToolConfigError) as err:
        load(decl(headers={"Authorization": secret}))
    assert "sk-live" not in str(err.value) and "control characters" in str(err.value)
    tool = load(decl(headers={"Authorization": "Bearer sk-live-123"})).tools["get_case"]
    assert "sk-live" not in repr(tool)


# --- URL construction -------------------------------------------------------------------------------------------


@pytest.fixture
def template():
    tool = load(decl(url="https://crm.internal:8443/api/cases/{case_id}/notes?v=2")).tools["get_case"]
    return tool._template


@pytest.mark.parametrize(
    ("value", "url"),
    [
        ("CS20240501", "https://crm.internal:8443/api/cases/CS20240501/notes?v=2"),
        (42, "https://crm.internal:8443/api/cases/42/notes?v=2"),
        ("%2f", "https://crm.internal:8443/api/cases/%252f/notes?v=2"),
        ("a/b", "https://crm.internal:8443/api/cases/a%2Fb/notes?v=2"),
        ("@evil.example", "https://crm.internal:8443/api/cases/%40evil.example/notes?v=2"),
        ("x@evil.example:80", "https://crm.internal:8443/api/cases/x%40evil.example%3A80/notes?v=2"),
        ("http://evil.example/x", "https://crm.internal:8443/api/cases/http%3A%2F%2Fevil.example%2Fx/notes?v=2"),
        ("//evil.example", "https://crm.internal:8443/api/cases/%2F%2Fevil.example/notes?v=2"),
        ("a?admin=1#f", "https://crm.internal:8443/api/cases/a%3Fadmin%3D1%23f/notes?v=2"),
        ("Müller 東京", "https://crm.internal:8443/api/cases/M%C3%BCller%20%E6%9D%B1%E4%BA%AC/notes?v=2"),
        ("...", "https://crm.internal:8443/api/cases/.../notes?v=2"),
    ],
)
def test_argument_stays_one_segment(template, value, url):
    assert template.build({"case_id": value}) == url


@pytest.mark.parametrize(
    "value",
    ["..", ".", "../admin", "../../etc/passwd", "a/../../b", "..\\x", "%2e%2e", "%2E%2E%2Fadmin", "%252e%252e",
     "a\r\nHost: evil", "a%0d%0aX: 1", "\x00", "", True, None, 1.5, ["a"], {"a": 1}],
)
def test_traversal_crlf_and_wrong_types_are_refused(template, value):
    with pytest.raises(_ToolFailure) as err:
        template.build({"case_id": value})
    assert err.value.kind == "invalid_arguments"


# --- access -----------------------------------------------------------------------------------------------------


def test_resolve_by_class_scope_and_model():
    engine = load(
        decl(),
        decl(name="save_summary", required_scope="crm:write", allowed_classes=[], models=["qwen3"]),
        decl(name="search", allowed_classes=["partner"], models=["qwen3"]),
    )
    names = lambda tools: sorted(t.name for t in tools)  # noqa: E731
    assert names(engine.resolve(["get_case"], "qwen3", ALICE)) == ["get_case", "save_summary"]
    assert names(engine.resolve(None, "other", ALICE)) == []
    reader = Principal("bob", "internal", ("crm:read",))
    assert names(engine.resolve(None, "qwen3", reader)) == []
    with pytest.raises(ServerToolAccessError) as err:
        engine.resolve(["save_summary"], "qwen3", reader)
    assert err.value.status == 403
    with pytest.raises(ServerToolAccessError) as err:
        engine.resolve(["search"], "qwen3", ALICE)
    assert err.value.status == 403
    with pytest.raises(ServerToolAccessError) as err:
        engine.resolve(["nope"], "qwen3", ALICE)
    assert err.value.status == 400
    with pytest.raises(ServerToolAccessError) as err:
        engine.resolve(["get_case"], "x", ALICE, client_tool_names=["get_case"])
    assert err.value.status == 400


def test_scope_claim_forms():
    assert Principal.scopes_from_claim("a b  c") == ("a", "b", "c")
    assert Principal.scopes_from_claim(["a", "b"]) == ("a", "b")
    assert Principal.scopes_from_claim(None) == () == Principal.scopes_from_claim(5)


# --- calls against the CRM stand-in -----------------------------------------------------------------------------


@pytest.fixture
def engine_for(crm):
    made = []

    def make(*tools, registry=None, logger=None, token=crm.token):
        decls = []
        for given in tools:
            t = dict(given, url=given["url"].replace("CRM", crm.url))
            if token is not None:
                t.setdefault("headers", {"Authorization": f"Bearer {token}"})
            decls.append(t)
        metrics = ServerToolMetrics(registry=registry or CollectorRegistry())
        engine = ServerToolEngine.from_config({"tools": decls}, metrics=metrics, audit_logger=logger)
        made.append(engine)
        return engine

    yield make
    for e in made:
        asyncio.run(e.aclose())


def call(engine, name, args, ctx=CTX):
    async def run():
        try:
            return await engine.invoke(engine.tools[name], args, ctx)
        finally:
            await engine.aclose()

    return asyncio.run(run())


def seen(crm):
    with crm.lock:
        return [r["target"] for r in crm.requests]


def test_get_case_ok_and_raw_path(engine_for, crm):
    engine = engine_for(decl(url="CRM/cases/{case_id}"))
    result = call(engine, "get_case", '{"case_id": "CS20240501"}')
    assert result.ok and result.http_status == 200
    assert json.loads(result.content)["customer"] == "Example GmbH"
    assert seen(crm)[-1] == "/cases/CS20240501"


def test_percent_encoded_argument_arrives_as_one_segment(engine_for, crm):
    engine = engine_for(decl(url="CRM/cases/{case_id}"))
    result = call(engine, "get_case", {"case_id": "%2f_requests"})
    assert result.status == "client_error" and result.http_status == 404
    assert "no such case" in json.loads(result.content)["error"]["message"]
    assert seen(crm)[-1] == "/cases/%252f_requests"


def test_post_summary_sends_the_rest_as_json(engine_for, crm):
    schema = {
        "type": "object",
        "properties": {"case_id": {"type": "string", "pattern": "^CS[0-9]{8}$"}, "summary": {"type": "string"}},
        "required": ["case_id", "summary"],
        "additionalProperties": False,
    }
    engine = engine_for(decl(name="save", method="POST", parameters=schema, url="CRM/cases/{case_id}/summary"))
    result = call(engine, "save", {"case_id": "CS20240777", "summary": "Term: 2 years."})
    assert result.ok
    assert json.loads(result.content) == {"case_id": "CS20240777", "saved": True, "summary_chars": 14}
    assert crm.cases["CS20240777"]["summary"] == "Term: 2 years."


def test_get_sends_other_arguments_as_query(engine_for, crm):
    schema = {"type": "object", "properties": {"seconds": {"type": "number"}}}
    engine = engine_for(decl(name="slow", parameters=schema, url="CRM/slow"))
    assert call(engine, "slow", {"seconds": 0}).ok
    assert seen(crm)[-1] == "/slow?seconds=0"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ("{not json", "not JSON"),
        ("[1]", "JSON object"),
        ({}, "'case_id' is a required property"),
        ({"case_id": 5}, "argument case_id: 5 is not of type 'string'"),
        ({"case_id": "CS1", "extra": 1}, "Additional properties"),
        ({"case_id": "../_requests"}, "'..' path segment"),
        ({"case_id": "x\r\nX-Injected: 1"}, "control characters"),
    ],
)
def test_invalid_arguments_never_reach_the_endpoint(engine_for, crm, args, fragment):
    engine = engine_for(decl(url="CRM/cases/{case_id}"))
    before = len(seen(crm))
    result = call(engine, "get_case", args)
    assert result.status == "invalid_arguments"
    assert fragment in json.loads(result.content)["error"]["message"]
    assert len(seen(crm)) == before


def test_timeout_is_a_tool_error(engine_for):
    engine = engine_for(decl(name="slow", parameters={"type": "object"}, url="CRM/slow?seconds=5", timeout_s=0.3,
                             connect_timeout_s=0.3))
    result = call(engine, "slow", {})
    assert result.status == "timeout" and "0.3 s" in result.content
    assert result.duration_s < 5


@pytest.mark.parametrize(
    ("url", "over", "status"),
    [
        ("CRM/error", {}, "server_error"),
        ("CRM/error?status=500", {}, "server_error"),
        ("CRM/oversized?bytes=1048576", {"max_response_bytes": 1000}, "oversized"),
        ("CRM/oversized?bytes=1048576&declare=1", {"max_response_bytes": 1000}, "oversized"),
        ("CRM/not-json", {}, "non_json"),
        ("CRM/redirect", {}, "redirect"),
    ],
)
def test_failures_become_tool_errors(engine_for, url, over, status):
    engine = engine_for(decl(name="t", parameters={"type": "object"}, url=url, **over))
    result = call(engine, "t", {})
    assert result.status == status and not result.ok
    assert json.loads(result.content)["error"]["type"] == status


def test_text_format_and_size_limit_boundary(engine_for):
    engine = engine_for(decl(name="page", parameters={"type": "object"}, url="CRM/not-json", response_format="text"))
    assert call(engine, "page", {}).content == "<html><body>maintenance</body></html>"
    engine = engine_for(decl(name="big", parameters={"type": "object"}, url="CRM/oversized?bytes=65536",
                             max_response_bytes=65536 + 12))
    assert call(engine, "big", {}).ok


def test_missing_secret_header_gets_401(engine_for):
    engine = engine_for(decl(url="CRM/cases/{case_id}"), token="wrong")
    result = call(engine, "get_case", {"case_id": "CS20240501"})
    assert result.status == "client_error" and result.http_status == 401


def test_refused_connection():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    engine = load(decl(url=f"http://127.0.0.1:{port}/cases/{{case_id}}"))
    assert call(engine, "get_case", {"case_id": "CS1"}).status == "connect_error"


def test_metrics_and_audit(engine_for, crm, caplog):
    registry = CollectorRegistry()
    logger = logging.getLogger("test.audit.server_tools")
    engine = engine_for(decl(url="CRM/cases/{case_id}"), decl(name="err", parameters={"type": "object"},
                        url="CRM/error", audit_arguments=True), registry=registry, logger=logger)

    async def run():
        await engine.invoke(engine.tools["get_case"], {"case_id": "CS20240501"}, CTX)
        await engine.invoke(engine.tools["get_case"], {"case_id": "CS20240502"}, CTX)
        await engine.invoke(engine.tools["err"], {"note": "visible"}, CallContext("req-2", ALICE))
        await engine.aclose()

    with caplog.at_level(logging.INFO, logger="test.audit.server_tools"):
        asyncio.run(run())
    value = registry.get_sample_value
    assert value("triton_fleet_openai_server_tool_calls_total", {"tool": "get_case", "subject": "alice", "status": "ok"}) == 2
    assert value("triton_fleet_openai_server_tool_errors_total", {"tool": "err", "subject": "alice", "kind": "server_error"}) == 1
    assert value("triton_fleet_openai_server_tool_errors_total", {"tool": "get_case", "subject": "alice", "kind": "server_error"}) is None
    assert value("triton_fleet_openai_server_tool_duration_seconds_count", {"tool": "get_case", "subject": "alice"}) == 2
    lines = [json.loads(r.getMessage()) for r in caplog.records]
    assert [(x["request_id"], x["tool"], x["status"]) for x in lines] == [
        ("req-1", "get_case", "ok"), ("req-1", "get_case", "ok"), ("req-2", "err", "server_error")]
    assert set(lines[0]) == {"event", "time", "request_id", "subject", "tool", "status", "duration_ms"}
    assert "CS20240501" not in caplog.text and crm.token not in caplog.text
    assert lines[2]["arguments"] == {"note": "visible"}


def test_cancellation_propagates_and_is_audited(engine_for, caplog):
    logger = logging.getLogger("test.audit.cancel")
    engine = engine_for(decl(name="slow", parameters={"type": "object"}, url="CRM/slow?seconds=3"), logger=logger)

    async def run():
        task = asyncio.ensure_future(engine.invoke(engine.tools["slow"], {}, CTX))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await engine.aclose()

    with caplog.at_level(logging.INFO, logger="test.audit.cancel"):
        asyncio.run(run())
    assert json.loads(caplog.records[-1].getMessage())["status"] == "cancelled"
