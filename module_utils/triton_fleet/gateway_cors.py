"""CORS for the gateway's /v1 routes: the operator's origin allow-list, checked and normalised, and the
request headers a preflight may ask for.

Pure logic (no Ansible import): roles/nginx_gateway's filter plugin (filter_plugins/gateway_cors.py) calls it
from tasks/validate.yml, and gateway.conf.j2 only formats what it returns into nginx `map` blocks.

An origin is what a browser sends in `Origin`: scheme://host[:port] (RFC 6454 §6.2), the host lowercase, the
scheme's default port left out, no path, no trailing '/'. The list is compared with that header exactly, so an
entry written any other way could never match: it is refused with the reason, not silently corrected, except for
case and a default port, which name the same origin.

Never accepted: `*` (any web page could then drive a visitor's browser against the gateway with a token it
holds; list each application instead, the gateway answers with the request's own origin), `null` (the origin
of sandboxed frames and file:// pages, which any page can produce), and schemes other than http/https.
"""

import ipaddress
import re

# Request headers the OpenAI SDKs send from a browser (openai-python's and openai-node's base clients:
# Authorization, Content-Type, OpenAI-Organization, OpenAI-Project, User-Agent, X-Stainless-Lang,
# -Package-Version, -OS, -Arch, -Runtime, -Runtime-Version, -Retry-Count, -Timeout, -Read-Timeout, -Async,
# -Helper-Method, ...; OpenAI-Beta and Idempotency-Key where a call sets them), plus X-Request-ID, which the
# gateway takes from clients. Accept is CORS-safelisted and needs no entry.
ALLOWED_REQUEST_HEADERS = (
    "Authorization",
    "Content-Type",
    "OpenAI-Organization",
    "OpenAI-Project",
    "OpenAI-Beta",
    "Idempotency-Key",
    "User-Agent",
    "X-Request-ID",
)
# The SDKs add X-Stainless-* headers from release to release: any name under the prefix is allowed.
ALLOWED_REQUEST_HEADER_PREFIXES = ("X-Stainless-",)
# Response headers a page's script may read: the request id (the SDK's `_request_id`) and Retry-After (the
# SDK's wait before a retry on 429).
EXPOSED_RESPONSE_HEADERS = ("X-Request-ID", "Retry-After")

_DEFAULT_PORTS = {"http": 80, "https": 443}
_ORIGIN = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<host>\[[^\]/]*\]|[^/:?#@\[\]]*)(?::(?P<port>[^/?#]*))?(?P<rest>.*)$")
_DNS_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")


class CorsError(ValueError):
    """The allow-list cannot be used."""


def _host(host):
    """The host, lowercase, or raise CorsError saying what is wrong with it."""
    if host.startswith("["):
        try:
            return "[" + ipaddress.IPv6Address(host[1:-1]).compressed + "]"
        except ValueError:
            raise CorsError("the address in [] is not an IPv6 address") from None
    low = host.lower()
    if not low:
        raise CorsError("there is no host")
    if "*" in low:
        raise CorsError("wildcards are not accepted: list each origin")
    if not low.isascii():
        raise CorsError("write an internationalised name in its ASCII (xn--) form, as browsers send it")
    labels = low[:-1].split(".") if low.endswith(".") else low.split(".")
    if len(low) > 253 or not all(_DNS_LABEL.match(label) for label in labels):
        raise CorsError("the host is not a DNS name or an IPv4 address (letters, digits, '-' and '.')")
    return low


def normalize_origin(value):
    """The origin as a browser serialises it ('https://app.example', 'http://127.0.0.1:3000'), or CorsError."""
    if not isinstance(value, str):
        raise CorsError(f"an origin is a string, got {type(value).__name__}")
    if value.strip() != value or not value:
        raise CorsError("empty, or blanks around it")
    if value == "*":
        raise CorsError("'*' is not accepted: list each web application's origin (the answer names the request's own origin)")
    if value.lower() == "null":
        raise CorsError("'null' is the origin of sandboxed frames and file:// pages, which any page can produce")
    m = _ORIGIN.match(value)
    if not m:
        raise CorsError("not of the form scheme://host[:port]")
    scheme = m.group("scheme").lower()
    if scheme not in _DEFAULT_PORTS:
        raise CorsError(f"scheme {scheme!r}: only http and https")
    if m.group("rest"):
        what = "a trailing '/'" if m.group("rest") == "/" else "a path, query or fragment"
        raise CorsError(f"{what}: an origin is scheme://host[:port] only, as in the browser's Origin header")
    host = _host(m.group("host"))
    port = m.group("port")
    if port is not None:
        if not re.match(r"^[0-9]{1,5}$", port) or not 1 <= int(port) <= 65535:
            raise CorsError("the port is not a number from 1 to 65535")
        if int(port) == _DEFAULT_PORTS[scheme]:
            port = None
    return f"{scheme}://{host}" + (f":{int(port)}" if port is not None else "")


def problems(origins):
    """Every entry that cannot be used, as 'entry: why' lines (empty when the list is good)."""
    if not isinstance(origins, (list, tuple)):
        return [f"nginx_gateway_cors_allowed_origins must be a list of origins, got {type(origins).__name__}"]
    out = []
    for value in origins:
        try:
            normalize_origin(value)
        except CorsError as exc:
            # str(): Ansible hands in str subclasses, whose repr is not always the plain one
            out.append(f"{str(value)!r}: {exc}" if isinstance(value, str) else f"{value!r}: {exc}")
    return out


def allowed_origins(origins):
    """The normalised origins, in the given order without repeats; CorsError naming every bad entry."""
    bad = problems(origins)
    if bad:
        raise CorsError("bad nginx_gateway_cors_allowed_origins entries: " + "; ".join(bad))
    out = []
    for value in origins:
        origin = normalize_origin(value)
        if origin not in out:
            out.append(origin)
    return out


def request_headers_regex():
    """An nginx case-insensitive (~*) regex matching an Access-Control-Request-Headers value that names only
    allowed headers (browsers send lowercase names joined by ','), so that the preflight answer may repeat it."""
    # Header names here are letters, digits and '-': nothing to escape.
    names = [h.lower() for h in ALLOWED_REQUEST_HEADERS]
    names += [p.lower() + "[a-z0-9-]+" for p in ALLOWED_REQUEST_HEADER_PREFIXES]
    name = "(?:" + "|".join(names) + ")"
    return f"^ *{name}(?: *, *{name})* *$"


def gateway_cors(origins):
    """What gateway.conf.j2 formats: the origins, the preflight's header regex, and the fixed header lists."""
    return {
        "origins": allowed_origins(origins),
        "request_headers_regex": request_headers_regex(),
        # Answered when a preflight asks for a header outside the list: the browser then names the one refused.
        "allow_headers": ", ".join(ALLOWED_REQUEST_HEADERS),
        "expose_headers": ", ".join(EXPOSED_RESPONSE_HEADERS),
    }
