"""A property-based oracle for /v1: Hypothesis draws requests from the ``openai`` SDK's own request types and breaks
them (oracle_strategies.py); the service answers over real HTTP (uvicorn) from a stand-in Triton node whose output
is drawn too. Every answer must hold these properties, whatever was sent:

- no response is a 5xx;
- every 4xx is OpenAI's error object, ``{"error": {"message", "type", "param", "code"}}``, whose ``param``, where
  there is one, is a place in the request (not a name of the service's internals);
- a request broken at one place is refused naming that place (its field, or the object holding it), when the
  request was accepted before it was broken; a body that is not JSON, or not an object, is a 400;
- every 2xx body parses with the SDK's response types in pydantic's strict mode, every stream chunk too, and a
  stream ends with ``data: [DONE]`` or an error event.

How much runs: the ``ci`` profile (``make unit``) a bounded number of examples, derandomized: every run draws the
same ones, so a failure in CI is one anyone can reproduce, and there is no example database to keep in the repo
(its entries are keyed by the test's source, which would make them silently stale). A finding is kept as an
``@example``-like regression test below. ``OPENAI_ORACLE_PROFILE=long`` runs thousands of random examples by hand
(docs/openai-api.md, "How the API is tested: the oracle"), with a local database under .cache/ that replays what
it found.

Every finding is kept in FINDINGS with the smallest requests that showed it, which test_finding sends again. One
not yet fixed in the service is marked open: the oracle sets aside its violations (only those) and its test is an
xfail (strict), which fails the run once the service is fixed, so that it is then marked fixed.
"""

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from conftest import GOLDEN, Served
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from openai.types import Completion
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.shared import ErrorObject
from oracle_strategies import (
    CHAT_FIELDS,
    CHAT_NAMES,
    CHAT_REQUIRED,
    COMPLETION_FIELDS,
    COMPLETION_NAMES,
    COMPLETION_REQUIRED,
    NAMED,
    NOT_JSON,
    NOT_OBJECT,
    ODD_VALUES,
    Mutation,
    accepted_chat_requests,
    accepted_completion_requests,
    chat_requests,
    completion_requests,
    dumps,
    fmt_path,
    model_outputs,
    mutations,
    removed,
    replaced,
    with_raw,
)
from pydantic import ValidationError
from triton_fleet_openai.app import create_app
from triton_fleet_openai.config import ModelInfo, Settings
from triton_grpc_standin import StandinNode, load_config, pieces_from_text

MODEL = "qwen3-tiny"
HEADERS = {"X-Auth-Sub": "oracle", "X-Auth-Class": "default", "X-Auth-Models": '["*"]', "X-Request-ID": "oracle-1"}
CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"
ROOT = Path(__file__).resolve().parents[3]

# ----------------------------------------------------------------------------------------------- profiles

_COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large,
                                                        HealthCheck.filter_too_much]}
PROFILES = {
    # make unit: the same examples every run, nothing written
    "ci": settings(max_examples=int(os.environ.get("OPENAI_ORACLE_EXAMPLES", "120")), derandomize=True,
                   database=None, print_blob=True, **_COMMON),
    # by hand: random examples, what fails is kept under .cache/ (oracle_strategies sets Hypothesis's directory)
    # and tried first next time
    "long": settings(max_examples=int(os.environ.get("OPENAI_ORACLE_EXAMPLES", "2500")), print_blob=True,
                     database=DirectoryBasedExampleDatabase(str(ROOT / ".cache" / "hypothesis" / "examples")),
                     **_COMMON),
}
PROFILE = os.environ.get("OPENAI_ORACLE_PROFILE", "ci")
if PROFILE not in PROFILES:
    raise ValueError(f"OPENAI_ORACLE_PROFILE={PROFILE!r}: one of {', '.join(PROFILES)}")
oracle_settings = PROFILES[PROFILE]

# ---------------------------------------------------------------------------------------------- the service


class Oracle:
    """The service (real uvicorn, one stand-in Triton node whose output is set per example) and a client that
    sends bytes as they are."""

    def __init__(self, http, output):
        self.http = http
        self.output = output

    def send(self, path, body: bytes, content_type="application/json") -> httpx.Response:
        headers = dict(HEADERS)
        if content_type is not None:
            headers["Content-Type"] = content_type
        return self.http.post(path, content=body, headers=headers)


@pytest.fixture(scope="module")
def oracle(tokenizer_dir, hf_tokenizer):
    output = {"text": "Hello!"}

    def script(inputs):
        # an empty generation is one empty final response (as a runtime sends the end token it strips)
        return pieces_from_text(hf_tokenizer, output["text"])[: int(inputs["max_tokens"])] or [("", [])]

    node = StandinNode(load_config(GOLDEN / "transformers" / MODEL / "config.pbtxt"), script).start()
    model = ModelInfo(served_name=MODEL, entry_model=MODEL, runtime="transformers", context_length=1024,
                      max_input_len=900, max_output_len=256, fingerprint="f" * 64)
    app = create_app(Settings(model=model, tokenizer_dir=tokenizer_dir, triton_nodes=[node.url], metrics_port=0))
    try:
        with Served(app) as srv, httpx.Client(base_url=srv.url, timeout=60) as http:
            yield Oracle(http, output)
    finally:
        node.close()


# --------------------------------------------------------------------------------------------- properties


@dataclass(frozen=True)
class Violation:
    prop: str
    detail: str

    def __str__(self):
        return f"{self.prop}: {self.detail}"


def renderings(path) -> set:
    """The ways a param may write ``path``: OpenAI's ``messages[0].content`` and the dotted ``messages.0.content``."""
    dotted = ".".join(str(p) for p in path)
    return {fmt_path(path), dotted}


def resolves(body, param: str, known=frozenset()) -> bool:
    """Whether ``param`` is a place in ``body``: every step but the last exists, the last exists or is a field
    name of the SDK's (``known``) that the object lacks (a missing field). Keys are matched as they are (a key
    may hold a dot)."""

    def go(node, rest, top):
        if rest == "":
            return not top  # an empty param names nothing
        if not top:
            if rest.startswith("."):
                rest = rest[1:]
            elif not rest.startswith("["):
                return False
        if isinstance(node, list):
            m = re.match(r"\[(\d+)\]|(\d+)(?=$|[.\[])", rest)
            if not m:
                return False
            i = int(m[1] or m[2])
            return i < len(node) and go(node[i], rest[m.end():], False)
        if isinstance(node, dict):
            if any(rest.startswith(k) and go(v, rest[len(k):], False) for k, v in node.items() if k):
                return True
            return rest in known and rest not in node
        return False

    return go(body, param, True)


def names_place(param, path, body, *, ancestors, known=frozenset()) -> bool:
    """Whether ``param`` names ``path``: the place itself, a place inside it, or the object holding it (any
    object above it with ``ancestors``)."""
    if param in renderings(path):
        return True
    if any(param.startswith(r + sep) for r in renderings(path) for sep in ".[") and resolves(body, param, known):
        return True
    above = [path[:i] for i in range(len(path) - 1, 0, -1)]
    return any(param in renderings(p) for p in (above if ancestors else above[:1]))


def error_object(r, out):
    """The error object of a 4xx, or None after recording why it is not one."""
    if not r.headers.get("content-type", "").startswith("application/json"):
        out.append(Violation("error_shape", f"{r.status_code} with content-type {r.headers.get('content-type')!r}"))
        return None
    try:
        body = r.json()
    except ValueError:
        out.append(Violation("error_shape", f"{r.status_code} body is not JSON: {r.content[:200]!r}"))
        return None
    return event_error(body, out)


def event_error(body, out):
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict) or set(body) != {"error"} or not {"message", "type", "param", "code"} <= err.keys():
        out.append(Violation("error_shape", f"not OpenAI's error object: {json.dumps(body)[:300]}"))
        return None
    try:
        ErrorObject.model_validate(err, strict=True)
    except ValidationError as exc:
        out.append(Violation("error_shape", f"{exc.errors()[0]} in {json.dumps(err)[:300]}"))
        return None
    if not err["message"]:
        out.append(Violation("error_shape", "empty message"))
    return err


def strict(model, data, out, what):
    try:
        model.model_validate(data, strict=True)
    except ValidationError as exc:
        out.append(Violation("strict_parse", f"{what}: {exc.errors()[:2]} in {json.dumps(data)[:300]}"))


def check_stream(r, endpoint, out):
    text = r.content.decode("utf-8", errors="replace")
    events = [e for e in text.split("\n\n") if e.strip()]
    if not events:
        out.append(Violation("stream_end", "an empty stream"))
        return
    datas = []
    for e in events:
        if not e.startswith("data: ") or "\n" in e:
            out.append(Violation("stream_framing", f"not one data line: {e[:120]!r}"))
            return
        datas.append(e[len("data: "):])
    done = [i for i, d in enumerate(datas) if d == "[DONE]"]
    if done and done[0] != len(datas) - 1:
        out.append(Violation("stream_end", f"events after [DONE]: {datas[done[0] + 1:][:2]}"))
    body = datas[: done[0]] if done else datas
    finish_seen = False
    for i, d in enumerate(body):
        try:
            obj = json.loads(d)
        except ValueError:
            out.append(Violation("stream_chunk", f"not JSON: {d[:120]!r}"))
            continue
        if isinstance(obj, dict) and "error" in obj:
            event_error(obj, out)
            if i != len(body) - 1:
                out.append(Violation("stream_end", "events after the error event"))
            finish_seen = True
            continue
        if endpoint == CHAT:
            strict(ChatCompletionChunk, obj, out, "chunk")
            finish_seen |= any(c.get("finish_reason") for c in obj.get("choices", []) if isinstance(c, dict))
        else:
            # The SDK types streamed completions as Completion, whose choices' finish_reason is required; OpenAI's
            # streams send null until the last choice (as the SDK's own streaming docs show): null is let through
            # here, any other value is checked, and one choice must finish.
            choices = obj.get("choices") if isinstance(obj, dict) else None
            finished = [c.get("finish_reason") for c in choices or [] if isinstance(c, dict)]
            finish_seen |= any(finished)
            shown = dict(obj, choices=[dict(c, finish_reason=c.get("finish_reason") or "stop")
                                       if isinstance(c, dict) else c for c in choices]) if isinstance(choices, list) else obj
            strict(Completion, shown, out, "chunk")
    if not done and not (body and '"error"' in body[-1]):
        out.append(Violation("stream_end", f"no [DONE] and no error event at the end: {datas[-1][:120]!r}"))
    if not finish_seen:
        out.append(Violation("stream_end", "no choice finished and no error event"))


def check(r: httpx.Response, endpoint, sent, *, mutation: Mutation | None = None, base_ok=False):
    """The properties every answer has, and those of a broken request. ``sent``: the request as Python sees
    it (None when it is not JSON)."""
    out = []
    status = r.status_code
    if status >= 500:
        out.append(Violation("no_5xx", f"{status}: {r.content[:300]!r}"))
        return out
    kind = mutation.kind if mutation else None
    if 400 <= status < 500:
        err = error_object(r, out)
        if err is None:
            return out
        param = err["param"]
        known = CHAT_NAMES if endpoint == CHAT else COMPLETION_NAMES
        if param is not None and isinstance(sent, dict) and not resolves(sent, param, known):
            out.append(Violation("param_is_a_place", f"param {param!r} is no place in the request"))
        if kind in NAMED and base_ok and not (param and any(
                names_place(param, p, sent, ancestors=False, known=known) for p in (mutation.path, *mutation.also))):
            out.append(Violation("param_names_the_field", f"{kind} at {fmt_path(mutation.path)}: param {param!r}"))
        # A prompt too long for the model is OpenAI's context_length_exceeded on the prompt as a whole, whichever
        # value made it long (a huge tool list, say).
        whole_prompt = err["code"] == "context_length_exceeded" and param == ("messages" if endpoint == CHAT else "prompt")
        if kind in ODD_VALUES | NOT_JSON and base_ok and param is not None and not whole_prompt and not any(
                names_place(param, p, sent, ancestors=True, known=known) for p in (mutation.path or (), *mutation.also)):
            out.append(Violation("param_names_the_field", f"{kind} at {fmt_path(mutation.path)}: param {param!r}"))
        if kind in NOT_OBJECT and param is not None:
            out.append(Violation("param_names_the_field", f"the body is no object, yet param {param!r}"))
        if kind in NOT_JSON | NOT_OBJECT and status != 400:
            out.append(Violation("refused", f"{kind}: {status}, not 400"))
        return out
    if kind in NAMED and base_ok:
        out.append(Violation("refused", f"{kind} at {fmt_path(mutation.path)} accepted ({status})"))
    if kind in NOT_JSON | NOT_OBJECT:
        out.append(Violation("refused", f"{kind} accepted ({status})"))
    ctype = r.headers.get("content-type", "")
    if isinstance(sent, dict) and sent.get("stream") is True and not ctype.startswith("text/event-stream"):
        out.append(Violation("stream_flag", f"stream: true answered with {ctype!r}"))
    if ctype.startswith("text/event-stream"):
        check_stream(r, endpoint, out)
    elif ctype.startswith("application/json"):
        try:
            body = r.json()
        except ValueError:
            out.append(Violation("strict_parse", f"2xx body is not JSON: {r.content[:200]!r}"))
            return out
        strict(ChatCompletion if endpoint == CHAT else Completion, body, out, "body")
    else:
        out.append(Violation("strict_parse", f"2xx with content-type {ctype!r}"))
    return out


def python_view(raw: bytes):
    """The body as the client meant it (Python's own JSON reading), or None."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


# ----------------------------------------------------------------------------------------------- findings


ANY = None  # a finding that shows whatever the request was


@dataclass(frozen=True)
class Finding:
    """A property the service did not hold, and the smallest requests that showed it. While it is open, the oracle
    sets aside its violations (only those: the property, the kind of request, the endpoint and the violation's
    wording all match) and its examples are xfail (strict); once fixed they are plain regression tests."""

    name: str
    props: frozenset
    kinds: frozenset | None  # mutation kinds it shows on (None in it: a request as drawn); ANY: every request
    detail: str  # a regular expression the violation's detail matches
    examples: tuple  # (endpoint, the request accepted before the break or None, the request that shows it)
    endpoint: str | None = ANY
    open: bool = True

    def covers(self, v: Violation, kind, endpoint):
        return (v.prop in self.props and (self.kinds is ANY or kind in self.kinds)
                and self.endpoint in (ANY, endpoint) and re.search(self.detail, v.detail) is not None)


def _ex(endpoint, base, kind, path, value=None, *, raw=None, drop=False):
    """An example: ``base`` (accepted) broken at ``path`` by ``value``, by raw JSON text, or by dropping the key."""
    if drop:
        body = dumps(removed(base, path))
    elif raw is not None:
        body = with_raw(base, path, raw)
    else:
        body = dumps(replaced(base, path, value))
    return endpoint, base, Mutation(kind, path, body)


def _bytes(endpoint, kind, body: bytes):
    """An example that is a body as it is, not a request broken at one place."""
    return endpoint, None, Mutation(kind, None, body)


_HI = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}]}
_PARTS = {"model": MODEL, "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]}
_ROUND_TRIP = {"model": MODEL, "messages": [
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": None,
     "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "42"}]}
_TOOLS = {**_HI, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}
_NAMED = {**_TOOLS, "tool_choice": {"type": "function", "function": {"name": "f"}}}
_PROMPT = {"model": MODEL, "prompt": "Hi"}
_PARAM_NAMES = frozenset({"param_is_a_place", "param_names_the_field"})

# Found at 1a0f638 (before issue 30's fixes) unless said, in the order found; docs/openai-api.md tells each.
FINDINGS = [
    Finding("deep-json-is-a-500", frozenset({"no_5xx"}), frozenset({"deep"}), "", (
        _ex(CHAT, _HI, "deep", ("user",), raw="[" * 10_000 + "]" * 10_000),
        _ex(COMPLETIONS, _PROMPT, "deep", ("prompt",), raw='{"a":' * 100_000 + "1" + "}" * 100_000)), open=False),
    Finding("lone-surrogate-is-a-500", frozenset({"no_5xx"}), frozenset({"lone_surrogate"}), "", (
        _ex(CHAT, _HI, "lone_surrogate", ("messages", 0, "content"), "\ud800"),
        _ex(CHAT, {**_HI, "stop": "x"}, "lone_surrogate", ("stop",), "\ud800"),
        _ex(COMPLETIONS, _PROMPT, "lone_surrogate", ("prompt",), "\ud800")), open=False),
    Finding("utf8-encoded-surrogate-is-read", frozenset({"refused", "no_5xx", "param_names_the_field"}),
            frozenset({"invalid_utf8"}), "", (
                _bytes(CHAT, "invalid_utf8", dumps(_HI).replace(b'"Hi"', b'"Hi\xed\xa0\x80"')),
                _bytes(CHAT, "invalid_utf8", dumps(_HI).replace(b'"qwen', b'"\xed\xa0\x80qwen'))), open=False),
    Finding("wrong-json-types-are-coerced", frozenset({"refused"}), frozenset({"wrong_type"}), "accepted", (
        _ex(CHAT, _HI, "wrong_type", ("max_tokens",), "4"),
        _ex(CHAT, _HI, "wrong_type", ("max_tokens",), 4.0),
        _ex(CHAT, _HI, "wrong_type", ("max_tokens",), True),
        _ex(CHAT, _HI, "wrong_type", ("temperature",), "0.5"),
        _ex(CHAT, _HI, "wrong_type", ("stream",), "false"),
        _ex(COMPLETIONS, _PROMPT, "wrong_type", ("echo",), 0.0)), open=False),
    Finding("param-holds-a-pydantic-union-tag", _PARAM_NAMES, ANY,
            r"param ['\"][^ ]*\.(str|int|float|bool|literal\[.*\]|list\[.*\]|dict\[.*\])['\"]", (
                _ex(CHAT, _HI, "wrong_type", ("stop",), 5),
                _ex(CHAT, _HI, "wrong_type", ("messages", 0, "content"), 5),
                _ex(CHAT, _TOOLS, "wrong_type", ("tool_choice",), 5),
                _ex(COMPLETIONS, _PROMPT, "wrong_type", ("prompt",), 5),
                _bytes(COMPLETIONS, None, dumps({"model": MODEL, "prompt": [1, 2]}))), open=False),
    Finding("surrogate-key-is-refused-naming-nothing", _PARAM_NAMES, frozenset({"unknown_field"}), "param ''", (
        _ex(CHAT, _HI, "unknown_field", ("oracle_\ud800",), 1),), open=False),
    Finding("nan-and-infinity-are-read-as-json", frozenset({"refused"}), frozenset({"non_json_number"}), "accepted", (
        _bytes(CHAT, "non_json_number", with_raw(_TOOLS, ("tools", 0, "function", "parameters", "x"), "NaN")),),
            open=False),
    Finding("completions-context-length-names-messages", _PARAM_NAMES, ANY, "param 'messages'", (
        _ex(COMPLETIONS, _PROMPT, "huge_string", ("prompt",), "word " * 1_000),), endpoint=COMPLETIONS, open=False),
    Finding("required-fields-get-defaults", frozenset({"refused"}), frozenset({"missing"}), "accepted", (
        _ex(CHAT, _ROUND_TRIP, "missing", ("messages", 1, "tool_calls", 0, "function", "arguments"), drop=True),
        _ex(CHAT, _ROUND_TRIP, "missing", ("messages", 1, "tool_calls", 0, "type"), drop=True)), open=False),
    Finding("content-part-keys-are-not-checked", frozenset({"refused"}), frozenset({"unknown_field"}), r"content\[", (
        _ex(CHAT, _PARTS, "unknown_field", ("messages", 0, "content", 0, "oracle_x"), 1),), open=False),
    # found by the long run at 64108a2: the refusal names the union and says a string was expected
    Finding("named-tool-choice-refused-as-a-string", frozenset({"param_names_the_field"}), ANY,
            r"at tool_choice\.\S+: param 'tool_choice'$", (
                _ex(CHAT, _NAMED, "missing", ("tool_choice", "function", "name"), drop=True),
                _ex(CHAT, _NAMED, "wrong_type", ("tool_choice", "function", "name"), 5),
                _ex(CHAT, _NAMED, "unknown_field", ("tool_choice", "function", "oracle_x"), 1)), open=False),
]


KNOWN_OPEN = [f for f in FINDINGS if f.open]


def open_findings(violations, kind, endpoint):
    return [v for v in violations if not any(f.covers(v, kind, endpoint) for f in KNOWN_OPEN)]


# ---------------------------------------------------------------------------------------------- the oracle


def sent_and_checked(oracle, endpoint, body, *, mutation=None, base_ok=False):
    r = oracle.send(endpoint, mutation.body if mutation else dumps(body),
                    mutation.content_type if mutation else "application/json")
    note(f"{'mutation' if mutation else 'request'} -> {r.status_code} {r.content[:500]!r}")
    kind = mutation.kind if mutation else None
    found = check(r, endpoint, python_view(mutation.body) if mutation else body, mutation=mutation, base_ok=base_ok)
    assert not open_findings(found, kind, endpoint), found
    return r


def sdk_request(oracle, data, endpoint, requests):
    body = data.draw(requests(MODEL), label="request")
    oracle.output["text"] = data.draw(model_outputs, label="model output")
    try:  # a float the SDK's type allows may be NaN or infinite: then the body is no JSON
        json.dumps(body, allow_nan=False)
    except ValueError:
        sent_and_checked(oracle, endpoint, body, mutation=Mutation("non_json_number", None, dumps(body)))
        return
    sent_and_checked(oracle, endpoint, body)


def broken_request(oracle, data, endpoint, requests, fields_required):
    body = data.draw(requests(MODEL), label="request")
    oracle.output["text"] = data.draw(model_outputs, label="model output")
    r = sent_and_checked(oracle, endpoint, body)
    m = data.draw(mutations(body, *fields_required), label="mutation")
    sent_and_checked(oracle, endpoint, body, mutation=m, base_ok=r.status_code < 300)


@oracle_settings
@given(data=st.data())
def test_chat_requests_of_the_sdk(oracle, data):
    sdk_request(oracle, data, CHAT, chat_requests)


@oracle_settings
@given(data=st.data())
def test_completion_requests_of_the_sdk(oracle, data):
    sdk_request(oracle, data, COMPLETIONS, completion_requests)


@oracle_settings
@given(data=st.data())
def test_broken_chat_requests(oracle, data):
    broken_request(oracle, data, CHAT, accepted_chat_requests, (CHAT_FIELDS, CHAT_REQUIRED))


@oracle_settings
@given(data=st.data())
def test_broken_completion_requests(oracle, data):
    broken_request(oracle, data, COMPLETIONS, accepted_completion_requests, (COMPLETION_FIELDS, COMPLETION_REQUIRED))


STILL_OPEN = pytest.mark.xfail(strict=True, raises=AssertionError,
                               reason="a finding still open: once this passes, set its open=False")


@pytest.mark.parametrize(("finding", "example"), [
    pytest.param(f, e, id=f"{f.name}-{i}", marks=[STILL_OPEN] if f.open else [])
    for f in FINDINGS for i, e in enumerate(f.examples)])
def test_finding(oracle, finding, example):
    """Each finding of the oracle, as the smallest request that showed it: a regression test once fixed."""
    endpoint, base, m = example
    if base is not None and oracle.send(endpoint, dumps(base)).status_code >= 300:
        raise RuntimeError(f"the request before the break is refused: {base}")  # not the finding: fails the test
    r = oracle.send(endpoint, m.body, m.content_type)
    found = check(r, endpoint, python_view(m.body), mutation=m, base_ok=base is not None)
    assert not [v for v in found if finding.covers(v, m.kind, endpoint)], (r.status_code, r.content[:300])


# ------------------------------------------------------------------------------ the oracle can say no


def fake(status, body=b"", ctype="application/json"):
    return httpx.Response(status, content=body, headers={"content-type": ctype})


OK_CHAT = {"id": "c", "object": "chat.completion", "created": 1, "model": MODEL,
           "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}


@pytest.mark.parametrize(("response", "sent", "mutation", "prop"), [
    (fake(500, b"Internal Server Error", "text/plain"), {}, None, "no_5xx"),
    (fake(400, b'{"detail": "bad"}'), {}, None, "error_shape"),
    (fake(400, b'{"error": {"message": "bad", "type": "invalid_request_error"}}'), {}, None, "error_shape"),
    (fake(400, b'{"error": {"message": "x", "type": "t", "param": "stop.str", "code": null}}'), {"stop": 1}, None,
     "param_is_a_place"),
    (fake(400, b'{"error": {"message": "x", "type": "t", "param": "messages", "code": null}}'),
     {"messages": [{"role": 1}]}, Mutation("wrong_type", ("messages", 0, "role"), b""), "param_names_the_field"),
    (fake(200, json.dumps(OK_CHAT).encode()), {"max_tokens": "4"}, Mutation("wrong_type", ("max_tokens",), b""),
     "refused"),
    (fake(200, json.dumps({**OK_CHAT, "created": "1"}).encode()), {}, None, "strict_parse"),
    (fake(200, b'data: {"error": {"message": "x", "type": "t", "param": null, "code": null}}\n\n', "text/event-stream"),
     {}, None, None),
    (fake(200, b"data: " + json.dumps({**OK_CHAT, "object": "chat.completion.chunk"}).encode()
          + b"\n\ndata: [DONE]\n\n", "text/event-stream"), {}, None, "strict_parse"),
    (fake(200, b'data: {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": []}\n\n',
          "text/event-stream"), {}, None, "stream_end"),
])
def test_the_properties_can_fail(response, sent, mutation, prop):
    """Each property, shown a response that breaks it, says so (and an error event that ends a stream is one)."""
    found = {v.prop for v in check(response, CHAT, sent, mutation=mutation, base_ok=True)}
    assert found == ({prop} if prop else set()), found


def test_a_param_is_a_place_in_the_request():
    body = {"messages": [{"role": "user", "content": "x"}], "a.b": {"c": 1}, "stop": 1}
    for param in ("messages", "messages[0].content", "messages.0.content", "messages[0].name", "a.b.c", "model"):
        assert resolves(body, param, CHAT_NAMES), param
    for param in ("messages[1]", "messages.0.content.str", "stop.str", "messages[0].content[0]", "prompt.list[str].0",
                  "frobnicate", "prompt"):
        assert not resolves(body, param, CHAT_NAMES), param
    assert names_place("messages[0]", ("messages", 0, "role"), body, ancestors=False)
    assert not names_place("messages", ("messages", 0, "role"), body, ancestors=False)
    assert names_place("messages", ("messages", 0, "content"), body, ancestors=True)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("endpoint", [CHAT, COMPLETIONS])
def test_a_plain_request_holds_every_property(oracle, endpoint, stream):
    """The oracle's own setup: an ordinary request is answered, and its answer passes."""
    oracle.output["text"] = "<think>\nHm.\n</think>\n\nHello!"
    body = {"model": MODEL, "max_tokens": 20, "stream": stream,
            **({"messages": [{"role": "user", "content": "Hi"}]} if endpoint == CHAT else {"prompt": "Hi"})}
    r = oracle.send(endpoint, dumps(body))
    assert r.status_code == 200 and check(r, endpoint, body) == []


def test_a_finding_sets_aside_only_its_own_violations():
    """An open finding hides the violations it names, never another property's, kind's, endpoint's or wording's."""
    f = Finding("x", frozenset({"refused"}), frozenset({"missing"}), "accepted", (), endpoint=CHAT)
    v = Violation("refused", "missing at messages[0].role accepted (200)")
    assert f.covers(v, "missing", CHAT)
    assert not f.covers(v, "wrong_type", CHAT)
    assert not f.covers(v, "missing", COMPLETIONS)
    assert not f.covers(Violation("no_5xx", "500: accepted"), "missing", CHAT)
    assert not f.covers(Violation("refused", "missing: 404, not 400"), "missing", CHAT)
