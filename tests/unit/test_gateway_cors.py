"""module_utils/triton_fleet/gateway_cors.py and its filter plugin: the gateway's CORS origin allow-list."""

import importlib.util
import re
from pathlib import Path

import pytest
from triton_fleet import gateway_cors as gc

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("given", "origin"),
    [
        ("https://app.example.com", "https://app.example.com"),
        ("HTTPS://App.Example.COM", "https://app.example.com"),
        ("https://app.example.com:443", "https://app.example.com"),
        ("http://localhost:80", "http://localhost"),
        ("http://127.0.0.1:3000", "http://127.0.0.1:3000"),
        ("https://app.example.com:8443", "https://app.example.com:8443"),
        ("http://[::1]:5173", "http://[::1]:5173"),
        ("https://[2001:DB8:0:0::1]", "https://[2001:db8::1]"),
        ("https://xn--bcher-kva.example", "https://xn--bcher-kva.example"),
    ],
)
def test_origins_are_normalised_as_browsers_send_them(given, origin):
    assert gc.normalize_origin(given) == origin


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ("*", "'\\*' is not accepted"),
        ("https://*.example.com", "wildcards"),
        ("null", "sandboxed"),
        ("https://app.example.com/", "trailing '/'"),
        ("https://app.example.com/chat", "path"),
        ("https://app.example.com?x=1", "path, query"),
        ("https://app.example.com#top", "path, query"),
        ("app.example.com", "scheme://host"),
        ("ftp://app.example.com", "only http and https"),
        ("chrome-extension://abcdef", "only http and https"),
        ("https://user@app.example.com", "not a DNS name|scheme://host"),
        ("https://app.example.com:0", "1 to 65535"),
        ("https://app.example.com:70000", "1 to 65535"),
        ("https://app.example.com:https", "1 to 65535"),
        ("https://", "no host"),
        ("https://app_1.example.com", "not a DNS name"),
        ("https://-app.example.com", "not a DNS name"),
        ("https://bücher.example", "xn--"),
        ("https://[fe80::zz]", "IPv6"),
        (" https://app.example.com", "blanks"),
        ("", "empty"),
        (443, "a string"),
    ],
)
def test_bad_origins_say_why(given, why):
    with pytest.raises(gc.CorsError, match=why):
        gc.normalize_origin(given)


def test_problems_name_every_bad_entry_and_only_those():
    bad = gc.problems(["https://ok.example", "*", "https://app.example/", "https://ok2.example:8443"])
    assert len(bad) == 2
    assert bad[0].startswith("'*':")
    assert bad[1].startswith("'https://app.example/':")
    assert gc.problems([]) == []
    assert gc.problems("https://app.example")[0].startswith("nginx_gateway_cors_allowed_origins must be a list")


def test_allowed_origins_keep_order_and_drop_repeats():
    assert gc.allowed_origins(["https://b.example", "https://a.example", "HTTPS://B.example:443"]) == [
        "https://b.example",
        "https://a.example",
    ]
    with pytest.raises(gc.CorsError, match=r"'\*'.*'null'"):
        gc.allowed_origins(["*", "null"])


@pytest.mark.parametrize(
    "value",
    [
        "authorization,content-type",
        "authorization",
        # what the openai SDK (JS) sends from a browser
        "authorization,content-type,openai-organization,openai-project,x-stainless-arch,x-stainless-lang,"
        "x-stainless-os,x-stainless-package-version,x-stainless-retry-count,x-stainless-runtime,"
        "x-stainless-runtime-version,x-stainless-timeout",
        # a future X-Stainless header, the Python SDK's names, spaces after commas, another case
        "Authorization, Content-Type, X-Stainless-Read-Timeout, X-Stainless-Async, x-stainless-something-new",
        "x-request-id,openai-beta,idempotency-key,user-agent",
    ],
)
def test_request_headers_regex_accepts_what_the_sdks_send(value):
    # nginx's ~* is PCRE without case; Python's re.I reads this pattern the same way
    assert re.match(gc.request_headers_regex(), value, re.I)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "authorization,cookie",
        "x-auth-sub",
        "authorization,x-auth-scope",
        "x-stainless-",
        "authorization,,content-type",
        "authorization;content-type",
        "authorization\r\nx-injected: 1",
        "x-stainless-a b",
    ],
)
def test_request_headers_regex_refuses_other_headers(value):
    assert not re.match(gc.request_headers_regex(), value, re.I)


def test_gateway_cors_is_what_the_template_formats():
    cfg = gc.gateway_cors(["https://app.example.com:443", "http://localhost:3000"])
    assert cfg["origins"] == ["https://app.example.com", "http://localhost:3000"]
    assert cfg["allow_headers"].split(", ")[:2] == ["Authorization", "Content-Type"]
    assert "OpenAI-Organization" in cfg["allow_headers"] and "OpenAI-Project" in cfg["allow_headers"]
    assert cfg["expose_headers"] == "X-Request-ID, Retry-After"
    # the regex goes into a double-quoted nginx map key: no quote, no '$' but its final anchor, no braces
    rx = cfg["request_headers_regex"]
    assert '"' not in rx and "{" not in rx and rx.count("$") == 1 and rx.endswith("$")
    assert gc.gateway_cors([])["origins"] == []


def _filters():
    path = ROOT / "filter_plugins/gateway_cors.py"
    spec = importlib.util.spec_from_file_location("gateway_cors_filter", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.FilterModule().filters()


# The filter plugin runs on the controller (ansible.errors): not under the target Pythons.
@pytest.mark.controller
def test_filter_plugin_reports_and_wraps_errors():
    from ansible.errors import AnsibleFilterError

    f = _filters()
    assert f["triton_fleet_gateway_cors_problems"](["https://ok.example"]) == []
    assert len(f["triton_fleet_gateway_cors_problems"](["https://ok.example/", "*"])) == 2
    assert f["triton_fleet_gateway_cors"](["https://OK.example"])["origins"] == ["https://ok.example"]
    with pytest.raises(AnsibleFilterError, match="trailing '/'"):
        f["triton_fleet_gateway_cors"](["https://ok.example/"])
