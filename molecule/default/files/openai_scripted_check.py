#!/usr/bin/env python3
"""The whole-fleet scenario's scripted-model check (openai-scripted.yml), from the controller through the real
gateway with the real `openai` client. The gateway's OpenAI-compatible service is pointed, for this check only, at
a STAND-IN Triton node (tests/standin/triton_grpc_standin.py --turns) that replays fixed Qwen3-format turns,
because the lab's model has random weights and never decides to call a tool; its server tools call the CRM
stand-in (tools/crm-standin) on the gateway's loopback.

  openai_scripted_check.py --url https://127.0.0.1:28443 --token T --default-token T2 --scoped-token T3 [--insecure]

--token: a subject of class premium (the tools' allowed class); --default-token: one of class default;
--scoped-token: one whose scope claim holds crm:write (the scoped tool's required scope).
Prints one JSON object; exit 1 naming every failed check.
"""

import argparse
import json
import sys

import httpx
import openai

MODEL = "qwen3-tiny"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def client(a, token, **kw):
    return openai.OpenAI(base_url=a.url.rstrip("/") + "/v1", api_key=token, max_retries=0, timeout=60,
                         http_client=httpx.Client(verify=not a.insecure, timeout=60), **kw)


def user(marker):
    return [{"role": "user", "content": f"{marker}: please help with case CS20240501."}]


def streamed(c, **kw):
    """(content, tool call deltas by index, finish reason, server-tool events) of a streamed chat."""
    content, calls, finish, events = "", {}, None, []
    with c.chat.completions.create(model=MODEL, stream=True, **kw) as stream:
        for ch in stream:
            extra = ch.model_extra or {}
            if extra.get("server_tool"):
                events.append(extra["server_tool"])
            if not ch.choices:
                continue
            choice = ch.choices[0]
            content += choice.delta.content or ""
            for tc in choice.delta.tool_calls or []:
                entry = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                entry["id"] = entry["id"] or tc.id
                if tc.function is not None:
                    entry["name"] += tc.function.name or ""
                    entry["arguments"] += tc.function.arguments or ""
            finish = choice.finish_reason or finish
    return content, calls, finish, events


def check(a):
    results, failed = {}, []

    def expect(name, ok, detail):
        results[name] = {"ok": bool(ok), "detail": detail}
        if not ok:
            failed.append(f"{name}: {detail}")

    c = client(a, a.token)

    # Client tool round trip: the call comes back to the client, its result goes in, the final answer comes out.
    r = c.chat.completions.create(model=MODEL, messages=user("WEATHER"), tools=[WEATHER], max_tokens=64)
    calls = r.choices[0].message.tool_calls or []
    expect("client_tool_call", r.choices[0].finish_reason == "tool_calls" and len(calls) == 1
           and calls[0].function.name == "get_weather" and json.loads(calls[0].function.arguments) == {"city": "Paris"},
           f"finish={r.choices[0].finish_reason} calls={[tc.model_dump() for tc in calls]}")
    if calls:
        follow = user("WEATHER") + [
            {"role": "assistant", "content": None, "tool_calls": [calls[0].model_dump()]},
            {"role": "tool", "tool_call_id": calls[0].id, "content": json.dumps({"sky": "sunny"})},
        ]
        r2 = c.chat.completions.create(model=MODEL, messages=follow, tools=[WEATHER], max_tokens=64)
        expect("client_tool_final_answer", r2.choices[0].message.content == "It is sunny in Paris."
               and r2.choices[0].finish_reason == "stop", f"content={r2.choices[0].message.content!r}")
    content, scalls, finish, _ = streamed(c, messages=user("WEATHER"), tools=[WEATHER], max_tokens=64)
    expect("client_tool_call_streamed", finish == "tool_calls" and [v["name"] for v in scalls.values()] == ["get_weather"]
           and json.loads(scalls[0]["arguments"]) == {"city": "Paris"} and scalls[0]["id"], f"finish={finish} calls={scalls}")

    # Server tools: one round and two rounds, whole and streamed; the client sees only the final answer.
    for marker, want_tools, want_text, named in (("CASE1", ["get_case"], "The case is open.", []),
                                                 ("CASE2", ["get_case", "save_summary"], "Summary saved.",
                                                  ["save_summary"])):
        extra = {"extra_body": {"server_tools": named}} if named else {}
        r = c.chat.completions.create(model=MODEL, messages=user(marker), max_tokens=64, **extra)
        ran = [(s["name"], s["status"]) for s in (r.model_extra or {}).get("server_tools", [])]
        expect(f"server_tools_{marker}", r.choices[0].message.content == want_text and not r.choices[0].message.tool_calls
               and ran == [(t, "ok") for t in want_tools], f"content={r.choices[0].message.content!r} ran={ran}")
        content, scalls, finish, events = streamed(c, messages=user(marker), max_tokens=64, **extra)
        expect(f"server_tools_{marker}_streamed", content == want_text and not scalls and finish == "stop"
               and [e.get("name") for e in events] == want_tools,
               f"content={content!r} finish={finish} events={events}")

    # Every failure mode is a tool error the model reads, and a 200 to the client.
    r = c.chat.completions.create(model=MODEL, messages=user("FAILURES"), max_tokens=128,
                                  extra_body={"server_tools": ["crm_error", "crm_slow", "crm_big"]})
    ran = {s["name"]: s["status"] for s in (r.model_extra or {}).get("server_tools", [])}
    expect("server_tool_failures_are_answers", r.choices[0].message.content == "Done despite the errors."
           and set(ran) == {"get_case", "crm_error", "crm_slow", "crm_big"} and "ok" not in ran.values(),
           f"content={r.choices[0].message.content!r} statuses={ran}")
    # An endpoint that refuses the connection is a tool error too.
    r = c.chat.completions.create(model=MODEL, messages=user("REFUSED"), max_tokens=64,
                                  extra_body={"server_tools": ["crm_refused"]})
    ran = [(s["name"], s["status"]) for s in (r.model_extra or {}).get("server_tools", [])]
    expect("server_tool_refused_connection", r.choices[0].message.content == "The CRM is down."
           and ("crm_refused", "connect_error") in ran, f"content={r.choices[0].message.content!r} ran={ran}")

    # A subject outside the tools' allowed classes cannot name one.
    try:
        client(a, a.default_token).chat.completions.create(
            model=MODEL, messages=user("CASE1"), max_tokens=8, extra_body={"server_tools": ["get_case"]})
        expect("server_tool_class_403", False, "a default-class subject used a premium-only server tool")
    except openai.PermissionDeniedError as e:
        expect("server_tool_class_403", e.status_code == 403, f"status={e.status_code} body={e.body}")
    # A required_scope tool: the scope comes from the verified token (the gateway's X-Auth-Scope), so a subject
    # whose token has it may name the tool, one without it (of any class) may not, whatever header it sends.
    r = client(a, a.scoped_token).chat.completions.create(
        model=MODEL, messages=user("SCOPED"), max_tokens=64, extra_body={"server_tools": ["crm_write"]})
    ran = [(s["name"], s["status"]) for s in (r.model_extra or {}).get("server_tools", [])]
    expect("server_tool_scope", r.choices[0].message.content == "Written." and ran == [("crm_write", "ok")],
           f"content={r.choices[0].message.content!r} ran={ran}")
    try:
        client(a, a.token, default_headers={"X-Auth-Scope": "crm:write"}).chat.completions.create(
            model=MODEL, messages=user("SCOPED"), max_tokens=8, extra_body={"server_tools": ["crm_write"]})
        expect("server_tool_scope_403", False, "a token without the scope used a crm:write tool")
    except openai.PermissionDeniedError as e:
        expect("server_tool_scope_403", e.status_code == 403, f"status={e.status_code} body={e.body}")
    return results, failed


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--default-token", required=True)
    ap.add_argument("--scoped-token", required=True, help="a token whose scope claim holds crm:write")
    ap.add_argument("--insecure", action="store_true")
    a = ap.parse_args(argv)
    try:
        results, failed = check(a)
    except openai.APIError as e:
        results, failed = {}, [f"unexpected API error: {type(e).__name__}: {e}"]
    print(json.dumps({"checks": results, "failed": failed}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
