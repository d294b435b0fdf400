#!/usr/bin/env python3
"""The whole-fleet scenario's sample of issue 30's cases (verify.yml), from the controller through the real gateway
to the real OpenAI-compatible service and Triton: each must be answered as OpenAI answers it.

  openai_edges_check.py --url https://127.0.0.1:28443 --model qwen3-tiny --token T --origin https://app.fleet.test
                        [--insecure]

--token: a token allowed the served model; --origin: one of nginx_gateway_cors_allowed_origins.
The `openai` client where an application would use it (models.retrieve, chat with store/metadata), raw HTTP where
the client cannot send the body (deep nesting, a lone surrogate, a string max_tokens) or for CORS.
Prints one JSON object; exit 1 naming every failed check.
"""

import argparse
import json
import sys

import httpx
import openai

ERROR_KEYS = ["code", "message", "param", "type"]


def client(a):
    return openai.OpenAI(base_url=a.url.rstrip("/") + "/v1", api_key=a.token, max_retries=0, timeout=60,
                         http_client=httpx.Client(verify=not a.insecure, timeout=60))


def error_of(r):
    """(status, the error object or None) of a raw answer; None unless it is OpenAI's shape exactly."""
    try:
        body = r.json()
    except ValueError:
        return r.status_code, None
    err = body.get("error") if isinstance(body, dict) else None
    return r.status_code, err if isinstance(err, dict) and sorted(err) == ERROR_KEYS else None


def post_raw(a, text):
    return httpx.post(a.url.rstrip("/") + "/v1/chat/completions", content=text, verify=not a.insecure, timeout=60,
                      headers={"Authorization": "Bearer " + a.token, "Content-Type": "application/json"})


def retrieve_served(a):
    # models.retrieve: the served model's card
    # Its sampling defaults are the lab checkpoint's generation_config.json (Qwen3's values, fetched by the role
    # from the serving node), and its creation time that checkpoint's.
    m = client(a).models.retrieve(a.model)
    card = m.model_dump()
    defaults = card.get("sampling_defaults") or {}
    sampled = (defaults.get("temperature"), defaults.get("top_p"), defaults.get("top_k")) == (0.6, 0.95, 20)
    return m.id == a.model and m.object == "model" and sampled and card.get("created", 0) > 0, card


def retrieve_unknown(model):
    # an unknown id, also one with '/' and ':' as OpenAI's ids have: 404 model_not_found (not the gateway's unknown_url)
    def run(a):
        try:
            got = client(a).models.retrieve(model)
            return False, f"200 for an unknown model: {got.model_dump()}"
        except openai.NotFoundError as e:
            return e.code == "model_not_found", f"status={e.status_code} body={e.body}"
    return run


def deep_nesting(a):
    # a body nested 10,000 levels deep: a 400 OpenAI error, not a 500 (RecursionError)
    text = '{"model": ' + json.dumps(a.model) + ', "messages": ' + "[" * 10000 + "]" * 10000 + "}"
    status, err = error_of(post_raw(a, text))
    return status == 400 and err is not None, f"status={status} error={err}"


def lone_surrogate(a):
    # a lone surrogate in a message (valid JSON text, not valid Unicode): 400, not a 500 (UnicodeEncodeError)
    # json.dumps writes the lone surrogate as the escape \ud800 (ensure_ascii), which a JSON parser accepts
    text = json.dumps({"model": a.model, "messages": [{"role": "user", "content": "a\ud800b"}], "max_tokens": 4})
    status, err = error_of(post_raw(a, text))
    return status == 400 and err is not None, f"status={status} error={err}"


def max_tokens_string(a):
    # max_tokens as a string: refused naming it (it was read as 4)
    body = {"model": a.model, "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": "4"}
    status, err = error_of(post_raw(a, json.dumps(body)))
    return status == 400 and err is not None and err["param"] == "max_tokens", f"status={status} error={err}"


def store_false_metadata(a):
    # what SDKs and agent frameworks send by default is accepted
    r = client(a).chat.completions.create(model=a.model, messages=[{"role": "user", "content": "Say hello."}],
                                          max_tokens=4, store=False, metadata={"app": "fleet-check", "case": "issue-30"})
    return r.object == "chat.completion" and len(r.choices) == 1, r.model_dump()


def store_true(a):
    # store: true would be a lie (nothing is stored): refused naming it
    try:
        r = client(a).chat.completions.create(model=a.model, messages=[{"role": "user", "content": "Say hello."}],
                                              max_tokens=4, store=True)
        return False, f"200 for store: true: {r.model_dump()}"
    except openai.BadRequestError as e:
        return e.param == "store", f"status={e.status_code} body={e.body}"


def cors_preflight(a):
    # a configured origin's preflight is answered by the gateway, without a token
    r = httpx.options(a.url.rstrip("/") + "/v1/chat/completions", verify=not a.insecure, timeout=30, headers={
        "Origin": a.origin, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type,x-stainless-lang,x-stainless-retry-count"})
    h = r.headers
    ok = (r.status_code == 204 and h.get("access-control-allow-origin") == a.origin
          and "POST" in h.get("access-control-allow-methods", "") and h.get("vary") == "Origin"
          and "x-stainless-retry-count" in h.get("access-control-allow-headers", "").lower())
    return ok, f"status={r.status_code} headers={dict(h)}"


def cors_preflight_other_origin(a):
    r = httpx.options(a.url.rstrip("/") + "/v1/chat/completions", verify=not a.insecure, timeout=30,
                      headers={"Origin": "https://not-listed.invalid", "Access-Control-Request-Method": "POST"})
    status, err = error_of(r)
    ok = status == 403 and err is not None and err["code"] == "cors_origin_not_allowed"
    return ok and "access-control-allow-origin" not in r.headers, f"status={status} error={err} headers={dict(r.headers)}"


def cors_actual(a):
    # the configured origin's answers name it
    r = httpx.get(a.url.rstrip("/") + "/v1/models", verify=not a.insecure, timeout=30,
                  headers={"Authorization": "Bearer " + a.token, "Origin": a.origin})
    return r.status_code == 200 and r.headers.get("access-control-allow-origin") == a.origin, \
        f"status={r.status_code} headers={dict(r.headers)}"


CASES = [
    ("models_retrieve_served", retrieve_served),
    ("models_retrieve_unknown_404", retrieve_unknown("no-such-model")),
    ("models_retrieve_unknown_slash_colon_404", retrieve_unknown("org/no-such:model")),
    ("deep_nesting_400", deep_nesting),
    ("lone_surrogate_400", lone_surrogate),
    ("max_tokens_string_400", max_tokens_string),
    ("store_false_metadata_200", store_false_metadata),
    ("store_true_400", store_true),
    ("cors_preflight_204", cors_preflight),
    ("cors_preflight_other_origin_403", cors_preflight_other_origin),
    ("cors_actual_answer", cors_actual),
]


def check(a):
    """Every case, each on its own: one that raises (an unexpected status, a connection error) fails alone."""
    results, failed = {}, []
    for name, case in CASES:
        try:
            ok, detail = case(a)
        except (openai.APIError, httpx.HTTPError, ValueError, KeyError) as e:
            ok, detail = False, f"unexpected {type(e).__name__}: {e}"
        results[name] = {"ok": bool(ok), "detail": detail}
        if not ok:
            failed.append(f"{name}: {detail}")
    return results, failed


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--origin", required=True, help="an origin of nginx_gateway_cors_allowed_origins")
    ap.add_argument("--insecure", action="store_true")
    a = ap.parse_args(argv)
    results, failed = check(a)
    print(json.dumps({"checks": results, "failed": failed}, default=str))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
