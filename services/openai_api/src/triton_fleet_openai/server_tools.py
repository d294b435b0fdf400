"""Server-side tools: HTTP functions the operator declares and the service runs when the model calls them.

The operator, never the request, declares each tool (name, description, JSON Schema of its arguments, HTTP
endpoint, limits, who may use it). At service start every declaration is checked (unknown fields, types, the
schema against its JSON Schema meta-schema, the URL template); a bad one stops the start with a message naming
the tool and the field. Per call, ``ServerToolEngine.invoke`` validates the model's arguments, builds the URL so
that no argument can change its scheme, host, port or path segments, calls the endpoint with bounded time and
size, and turns every failure into a ``ToolResult`` the model reads: it never raises to the caller (only a
cancellation, the client having gone, propagates).

Python 3.9-3.12: the service runs on gateway hosts.
"""

import asyncio
import json
import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional
from urllib.parse import quote, unquote, urlsplit

import httpx
import jsonschema
from jsonschema.validators import validator_for
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram

AUDIT_LOGGER = "triton_fleet_openai.audit"

# OpenAI's rule for function names; Qwen3's template puts the name in JSON, so nothing else is needed.
_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_PLACEHOLDER_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_HEADER_NAME_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # RFC 9110 token
_BODY_METHODS = ("POST", "PUT", "PATCH")
_ERROR_EXCERPT_CHARS = 512

# The declaration of one tool. Checked with jsonschema so that every wrong field gets the same kind of message.
DECLARATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "description", "parameters", "url"],
    "properties": {
        "name": {"type": "string", "pattern": _NAME_RE.pattern},
        "description": {"type": "string", "minLength": 1},
        "parameters": {"type": "object"},
        "method": {"enum": ["GET", "POST", "PUT", "PATCH", "DELETE"]},
        "url": {"type": "string", "minLength": 1},
        "headers": {"type": "object", "additionalProperties": {"type": "string"}},
        "connect_timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 60},
        "timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 600},
        "max_response_bytes": {"type": "integer", "minimum": 1, "maximum": 16 * 1024 * 1024},
        "response_format": {"enum": ["json", "text"]},
        "allowed_classes": {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": True},
        "required_scope": {"type": ["string", "null"], "minLength": 1},
        "models": {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": True},
        "audit_arguments": {"type": "boolean"},
    },
}
CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "max_rounds": {"type": "integer", "minimum": 1, "maximum": 32},
        # true only where the gateway sets X-Auth-Scope from the verified token (replacing any client value)
        "scope_header": {"type": "boolean"},
        "tools": {"type": "array", "items": {"type": "object"}},
    },
}
DEFAULT_MAX_ROUNDS = 4


class ServerToolConfigError(ValueError):
    """A server tool declaration is wrong; the message names the tool and the field."""


class ServerToolAccessError(Exception):
    """The request named a server tool the subject may not use (answered 403) or that does not exist (400)."""

    def __init__(self, message: str, status: int, tool: str):
        super().__init__(message)
        self.status = status
        self.tool = tool


class _ToolFailure(Exception):
    def __init__(self, kind: str, message: str, http_status: Optional[int] = None):
        super().__init__(message)
        self.kind = kind
        self.http_status = http_status


@dataclass(frozen=True)
class Principal:
    """The verified caller, as the gateway passed it: subject, class and the scopes of its token."""

    subject: str
    subject_class: Optional[str] = None
    scopes: tuple[str, ...] = ()

    @staticmethod
    def scopes_from_claim(claim: Any) -> tuple[str, ...]:
        # OAuth's `scope` is one space-separated string (RFC 8693 section 4.2); some issuers send a list.
        if claim is None:
            return ()
        if isinstance(claim, str):
            return tuple(claim.split())
        if isinstance(claim, (list, tuple)):
            return tuple(str(s) for s in claim)
        return ()


@dataclass(frozen=True)
class CallContext:
    request_id: str
    principal: Principal


@dataclass(frozen=True)
class _UrlTemplate:
    scheme: str
    netloc: str
    host: str
    port: int
    segments: tuple[str, ...]  # path segments of the template, placeholders still in
    query: str
    placeholders: tuple[str, ...]

    @classmethod
    def parse(cls, template: str, where: str) -> "_UrlTemplate":
        if _CONTROL_RE.search(template) or " " in template:
            raise ServerToolConfigError(f"{where}: field 'url': control characters or spaces are not allowed")
        parts = urlsplit(template)
        if parts.scheme not in ("http", "https"):
            raise ServerToolConfigError(f"{where}: field 'url': the scheme must be http or https, not {parts.scheme!r}")
        for name, value in (("host and port", parts.netloc), ("query", parts.query)):
            if _PLACEHOLDER_RE.search(value) or "{" in value or "}" in value:
                raise ServerToolConfigError(
                    f"{where}: field 'url': a {{parameter}} may only stand in the path, not in the {name}"
                )
        if parts.fragment:
            raise ServerToolConfigError(f"{where}: field 'url': a #fragment is never sent; remove it")
        if "@" in parts.netloc:
            raise ServerToolConfigError(
                f"{where}: field 'url': credentials in the URL are not allowed; put them in 'headers' (from vault)"
            )
        try:
            port = parts.port
        except ValueError as exc:
            raise ServerToolConfigError(f"{where}: field 'url': {exc}") from None
        if not parts.hostname:
            raise ServerToolConfigError(f"{where}: field 'url': no host in {template!r}")
        path = parts.path or "/"
        if not path.startswith("/"):
            raise ServerToolConfigError(f"{where}: field 'url': the path must start with '/'")
        segments = tuple(path.split("/")[1:])
        placeholders: list[str] = []
        for seg in segments:
            if seg in (".", ".."):
                raise ServerToolConfigError(f"{where}: field 'url': '.' and '..' segments are not allowed")
            rest = _PLACEHOLDER_RE.sub("", seg)
            if "{" in rest or "}" in rest:
                raise ServerToolConfigError(
                    f"{where}: field 'url': malformed placeholder in segment {seg!r} (use {{name}}, a Python identifier)"
                )
            placeholders.extend(_PLACEHOLDER_RE.findall(seg))
        if len(set(placeholders)) != len(placeholders):
            raise ServerToolConfigError(f"{where}: field 'url': a path parameter appears twice")
        default_port = 443 if parts.scheme == "https" else 80
        return cls(
            scheme=parts.scheme,
            netloc=parts.netloc,
            host=parts.hostname.lower(),
            port=port or default_port,
            segments=segments,
            query=parts.query,
            placeholders=tuple(placeholders),
        )

    def build(self, args: Mapping[str, Any]) -> str:
        built_segments = []
        for seg in self.segments:

            def fill(m: re.Match, seg: str = seg) -> str:
                return quote(_path_value(m.group(1), args.get(m.group(1))), safe="")

            built = _PLACEHOLDER_RE.sub(fill, seg)
            if seg != built and built in ("", ".", ".."):
                raise _ToolFailure("invalid_arguments", f"a path parameter in {seg!r} makes an empty or dot segment")
            built_segments.append(built)
        url = f"{self.scheme}://{self.netloc}/" + "/".join(built_segments)
        if self.query:
            url += "?" + self.query
        self._check_authority(url, len(built_segments))
        return url

    def _check_authority(self, url: str, n_segments: int) -> None:
        # Percent-encoding each value as one segment already makes this impossible; this is the second lock: the
        # URL as both urllib and httpx read it must have the configured scheme, host, port and segment count.
        parts = urlsplit(url)
        hx = httpx.URL(url)
        same = (
            parts.scheme == self.scheme
            and parts.netloc == self.netloc
            and hx.scheme == self.scheme
            and hx.host == self.host
            and (hx.port or (443 if hx.scheme == "https" else 80)) == self.port
            and len(hx.raw_path.split(b"?")[0].split(b"/")) - 1 == n_segments
            and not hx.fragment
        )
        if not same:
            raise _ToolFailure("invalid_arguments", "the arguments would change the tool's endpoint")


def _path_value(name: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise _ToolFailure("invalid_arguments", f"path parameter {name!r} must be a string or an integer")
    text = str(value)
    if text == "":
        raise _ToolFailure("invalid_arguments", f"path parameter {name!r} must not be empty")
    # Reject what a backend or proxy decoding %2F / %2E could still read as traversal or header injection.
    for candidate in (text, unquote(text), unquote(unquote(text))):
        if _CONTROL_RE.search(candidate):
            raise _ToolFailure("invalid_arguments", f"path parameter {name!r} contains control characters")
        if any(part in (".", "..") for part in re.split(r"[/\\]", candidate)):
            raise _ToolFailure("invalid_arguments", f"path parameter {name!r} contains a '.' or '..' path segment")
    return text


@dataclass(frozen=True)
class ServerTool:
    name: str
    description: str
    parameters: dict[str, Any]
    method: str
    url: str
    connect_timeout_s: float
    timeout_s: float
    max_response_bytes: int
    response_format: str
    allowed_classes: tuple[str, ...]
    required_scope: Optional[str]
    models: tuple[str, ...]
    audit_arguments: bool
    # Header values may be secrets: kept out of repr() so that no log line or traceback shows them.
    headers: dict[str, str] = field(repr=False, default_factory=dict)
    _template: _UrlTemplate = field(repr=False, default=None, compare=False)  # type: ignore[assignment]
    _validator: Any = field(repr=False, default=None, compare=False)

    def allows(self, principal: Principal) -> bool:
        if self.allowed_classes and principal.subject_class not in self.allowed_classes:
            return False
        return not (self.required_scope and self.required_scope not in principal.scopes)

    def openai_tool(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


def _load_tool(raw: Any, index: int) -> ServerTool:
    name = raw.get("name") if isinstance(raw, dict) else None
    where = f"server tool {name!r}" if isinstance(name, str) and name else f"server tool #{index + 1}"
    if not isinstance(raw, dict):
        raise ServerToolConfigError(f"{where}: must be a mapping, got {type(raw).__name__}")
    _check(DECLARATION_SCHEMA, raw, where)
    params = raw["parameters"]
    cls = validator_for(params, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(params)
    except jsonschema.SchemaError as exc:
        loc = "/".join(str(p) for p in exc.absolute_path) or "(top)"
        raise ServerToolConfigError(
            f"{where}: field 'parameters': not a valid JSON Schema at {loc}: {exc.message}"
        ) from None
    if params.get("type") != "object":
        raise ServerToolConfigError(f"{where}: field 'parameters': the top level must be {{\"type\": \"object\"}}")
    template = _UrlTemplate.parse(raw["url"], where)
    required = set(params.get("required") or ())
    props = params.get("properties") or {}
    for ph in template.placeholders:
        if ph not in props or ph not in required:
            raise ServerToolConfigError(
                f"{where}: field 'url': path parameter {ph!r} must be a property of 'parameters' and listed "
                f"in its 'required'"
            )
    headers = raw.get("headers") or {}
    for hname, hvalue in headers.items():
        if not _HEADER_NAME_RE.match(hname):
            raise ServerToolConfigError(f"{where}: field 'headers': {hname!r} is not a valid header name")
        if _CONTROL_RE.search(hvalue.replace("\t", " ")):
            # the value itself is never printed: it may be a secret
            raise ServerToolConfigError(f"{where}: field 'headers': the value of {hname!r} contains control characters")
        if hname.lower() in ("host", "content-length", "transfer-encoding", "connection"):
            raise ServerToolConfigError(f"{where}: field 'headers': {hname!r} is set by the HTTP client, not here")
    allowed = tuple(raw.get("allowed_classes") or ())
    scope = raw.get("required_scope") or None
    if not allowed and not scope:
        raise ServerToolConfigError(
            f"{where}: fields 'allowed_classes' / 'required_scope': say who may use the tool (at least one of them)"
        )
    connect = float(raw.get("connect_timeout_s", 2.0))
    total = float(raw.get("timeout_s", 10.0))
    if connect > total:
        raise ServerToolConfigError(f"{where}: field 'connect_timeout_s': {connect} is longer than timeout_s {total}")
    return ServerTool(
        name=raw["name"],
        description=raw["description"],
        parameters=params,
        method=raw.get("method", "GET"),
        url=raw["url"],
        connect_timeout_s=connect,
        timeout_s=total,
        max_response_bytes=int(raw.get("max_response_bytes", 65536)),
        response_format=raw.get("response_format", "json"),
        allowed_classes=allowed,
        required_scope=scope,
        models=tuple(raw.get("models") or ()),
        audit_arguments=bool(raw.get("audit_arguments", False)),
        headers=dict(headers),
        _template=template,
        _validator=cls(params, format_checker=cls.FORMAT_CHECKER),
    )


def _check(schema: dict[str, Any], instance: Any, where: str) -> None:
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(instance))
    if error is None:
        return
    path = list(error.absolute_path)
    field_name = str(path[0]) if path else None
    if error.validator == "additionalProperties" and not path:
        extra = sorted(set(instance) - set(schema["properties"]))
        raise ServerToolConfigError(f"{where}: unknown field(s) {extra}; known: {sorted(schema['properties'])}")
    if error.validator == "required":
        raise ServerToolConfigError(f"{where}: {error.message}")
    # Never echo a header value: it may be a secret.
    message = "must be a string" if field_name == "headers" else error.message
    raise ServerToolConfigError(f"{where}: field {field_name!r}: {message}")


@dataclass
class ToolResult:
    """What one call produced; ``content`` is what the model reads in the ``tool`` message."""

    tool: str
    status: str  # "ok" or the error kind
    content: str
    duration_s: float
    http_status: Optional[int] = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class ServerToolMetrics:
    def __init__(self, registry: Optional[CollectorRegistry] = None, prefix: str = "triton_fleet_openai"):
        reg = REGISTRY if registry is None else registry
        self.calls = Counter(
            f"{prefix}_server_tool_calls",
            "Server tool calls the service ran, by tool, verified subject and status (ok or the error kind).",
            ["tool", "subject", "status"],
            registry=reg,
        )
        self.errors = Counter(
            f"{prefix}_server_tool_errors",
            "Server tool calls that ended in a tool error, by tool, subject and kind.",
            ["tool", "subject", "kind"],
            registry=reg,
        )
        self.duration = Histogram(
            f"{prefix}_server_tool_duration_seconds",
            "Time from a server tool call's start to its result, by tool and subject.",
            ["tool", "subject"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            registry=reg,
        )


class ServerToolEngine:
    """The operator's server tools and the HTTP client that runs them. One per service process."""

    def __init__(
        self,
        tools: Sequence[ServerTool],
        *,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
        scope_header: bool = False,
        metrics: Optional[ServerToolMetrics] = None,
        audit_logger: Optional[logging.Logger] = None,
        transport: Optional[httpx.AsyncBaseTransport] = None,
    ):
        self.tools: dict[str, ServerTool] = {t.name: t for t in tools}
        self.max_rounds = max_rounds
        self.scope_header = scope_header
        self.metrics = metrics
        self.audit = audit_logger or logging.getLogger(AUDIT_LOGGER)
        # No redirects (a 3xx is a tool error), no proxy or netrc from the environment: the request goes to the
        # configured host and port and nowhere else.
        self._client = httpx.AsyncClient(follow_redirects=False, trust_env=False, transport=transport)

    @classmethod
    def from_config(cls, config: Optional[Mapping[str, Any]], **kwargs: Any) -> "ServerToolEngine":
        config = config or {}
        if not isinstance(config, Mapping):
            raise ServerToolConfigError("server_tools: must be a mapping with 'max_rounds' and 'tools'")
        _check(CONFIG_SCHEMA, dict(config), "server_tools")
        raw_tools = config.get("tools") or []
        tools = [_load_tool(raw, i) for i, raw in enumerate(raw_tools)]
        seen: dict[str, int] = {}
        for i, t in enumerate(tools):
            if t.name in seen:
                raise ServerToolConfigError(f"server tool {t.name!r}: declared twice (#{seen[t.name] + 1} and #{i + 1})")
            seen[t.name] = i
        return cls(
            tools,
            max_rounds=int(config.get("max_rounds", DEFAULT_MAX_ROUNDS)),
            scope_header=bool(config.get("scope_header", False)),
            **kwargs,
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def __aenter__(self) -> "ServerToolEngine":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def resolve(
        self,
        requested: Optional[Iterable[str]],
        model: str,
        principal: Principal,
        client_tool_names: Iterable[str] = (),
    ) -> list[ServerTool]:
        """The server tools of one request: those it names plus those the deployment attaches to its model.

        A named tool that does not exist is a 400, one the subject may not use a 403. An attached tool the subject
        may not use is simply not offered. A client tool with a server tool's name is a 400 (the service could
        not tell whose call it is).
        """
        chosen: dict[str, ServerTool] = {}
        for name in requested or ():
            tool = self.tools.get(name)
            if tool is None:
                raise ServerToolAccessError(
                    f"server tool {name!r} does not exist; this deployment has {sorted(self.tools)}", 400, name
                )
            if not tool.allows(principal):
                raise ServerToolAccessError(f"subject may not use server tool {name!r}", 403, name)
            chosen[name] = tool
        for tool in self.tools.values():
            if model in tool.models and tool.allows(principal):
                chosen.setdefault(tool.name, tool)
        clash = sorted(set(client_tool_names) & set(chosen))
        if clash:
            raise ServerToolAccessError(
                f"client tool(s) {clash} have the name of a server tool; rename them", 400, clash[0]
            )
        return list(chosen.values())

    async def invoke(self, tool: ServerTool, arguments: Any, ctx: CallContext) -> ToolResult:
        start = time.monotonic()
        status = "cancelled"
        result: Optional[ToolResult] = None
        parsed: Any = None
        try:
            try:
                parsed = self._parse_arguments(tool, arguments)
                method, url, params, body = self._request_parts(tool, parsed)
                http_status, content = await asyncio.wait_for(
                    self._send(tool, method, url, params=params, body=body, request_id=ctx.request_id), timeout=tool.timeout_s
                )
                result = ToolResult(tool.name, "ok", content, time.monotonic() - start, http_status)
            except _ToolFailure as exc:
                result = _error(tool, exc.kind, str(exc), start, exc.http_status)
            except (asyncio.TimeoutError, httpx.TimeoutException):
                result = _error(tool, "timeout", f"the tool did not answer within {tool.timeout_s:g} s", start)
            except httpx.ConnectError:
                result = _error(tool, "connect_error", "the tool's endpoint refused or could not be reached", start)
            except httpx.HTTPError as exc:
                result = _error(tool, "transport_error", f"HTTP error talking to the tool ({type(exc).__name__})", start)
            except Exception as exc:  # the caller must never see an exception from a tool
                logging.getLogger(__name__).error("server tool %s: unexpected %s", tool.name, type(exc).__name__)
                result = _error(tool, "internal_error", "the service could not run the tool", start)
            status = result.status
            return result
        finally:
            duration = time.monotonic() - start
            self._account(tool, ctx, status, duration, parsed if tool.audit_arguments else None)

    def _parse_arguments(self, tool: ServerTool, arguments: Any) -> dict[str, Any]:
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError as exc:
                raise _ToolFailure("invalid_arguments", f"the arguments are not JSON: {exc}") from None
        if not isinstance(arguments, dict):
            raise _ToolFailure("invalid_arguments", "the arguments must be a JSON object")
        error = jsonschema.exceptions.best_match(tool._validator.iter_errors(arguments))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(top)"
            raise _ToolFailure("invalid_arguments", f"argument {where}: {error.message[:300]}")
        return arguments

    def _request_parts(
        self, tool: ServerTool, args: dict[str, Any]
    ) -> tuple[str, str, Optional[dict[str, Any]], Optional[dict[str, Any]]]:
        url = tool._template.build(args)
        rest = {k: v for k, v in args.items() if k not in tool._template.placeholders}
        if tool.method in _BODY_METHODS:
            return tool.method, url, None, rest
        for key, value in rest.items():
            items = value if isinstance(value, list) else [value]
            if any(isinstance(v, (dict, list)) or v is None for v in items):
                raise _ToolFailure("invalid_arguments", f"argument {key!r}: a {tool.method} tool takes only scalars")
        params = {k: (json.dumps(v) if isinstance(v, bool) else v) for k, v in rest.items()}
        return tool.method, url, params or None, None

    async def _send(
        self,
        tool: ServerTool,
        method: str,
        url: str,
        *,
        params: Optional[dict[str, Any]],
        body: Optional[dict[str, Any]],
        request_id: str,
    ) -> tuple[int, str]:
        headers = {"accept": "application/json" if tool.response_format == "json" else "*/*"}
        headers.update(tool.headers)
        headers["x-request-id"] = request_id
        timeout = httpx.Timeout(tool.timeout_s, connect=tool.connect_timeout_s)
        limit = tool.max_response_bytes
        async with self._client.stream(
            method, url, params=params, json=body, headers=headers, timeout=timeout
        ) as response:
            code = response.status_code
            if 300 <= code < 400:
                raise _ToolFailure("redirect", f"the tool answered {code} (redirects are not followed)", code)
            declared = response.headers.get("content-length")
            if declared and declared.isdigit() and int(declared) > limit:
                raise _ToolFailure("oversized", f"the answer is larger than the tool's limit of {limit} bytes", code)
            data = bytearray()
            async for chunk in response.aiter_bytes():
                data += chunk
                if len(data) > limit:
                    # leaving the block closes the connection: the rest is never read
                    raise _ToolFailure("oversized", f"the answer is larger than the tool's limit of {limit} bytes", code)
        text = data.decode(response.encoding or "utf-8", errors="replace")
        if code >= 500:
            raise _ToolFailure("server_error", f"the tool failed with HTTP {code}", code)
        if code >= 400:
            raise _ToolFailure("client_error", f"the tool answered HTTP {code}: {text[:_ERROR_EXCERPT_CHARS]}", code)
        if tool.response_format == "json":
            try:
                value = json.loads(text)
            except ValueError:
                raise _ToolFailure("non_json", "the tool's answer is not JSON", code) from None
            return code, json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        return code, text

    def _account(self, tool: ServerTool, ctx: CallContext, status: str, duration: float, arguments: Any) -> None:
        subject = ctx.principal.subject
        if self.metrics is not None:
            self.metrics.calls.labels(tool.name, subject, status).inc()
            self.metrics.duration.labels(tool.name, subject).observe(duration)
            if status != "ok":
                self.metrics.errors.labels(tool.name, subject, status).inc()
        line: dict[str, Any] = {
            "event": "server_tool_call",
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "request_id": ctx.request_id,
            "subject": subject,
            "tool": tool.name,
            "status": status,
            "duration_ms": round(duration * 1000, 1),
        }
        if arguments is not None:
            line["arguments"] = arguments
        self.audit.info(json.dumps(line, ensure_ascii=False, sort_keys=True, default=str))


def _error(tool: ServerTool, kind: str, message: str, start: float, http_status: Optional[int] = None) -> ToolResult:
    content = json.dumps({"error": {"type": kind, "message": message}}, ensure_ascii=False)
    return ToolResult(tool.name, kind, content, time.monotonic() - start, http_status)
