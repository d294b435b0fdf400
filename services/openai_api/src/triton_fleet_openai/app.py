"""The ASGI application: /v1/models, /v1/chat/completions, /v1/completions, /health.

Requests arrive only from the gateway's NGINX on loopback, which has verified the JWT and set
``X-Auth-Sub`` (subject), ``X-Auth-Class`` (rate class), ``X-Auth-Models`` (the models claim, a JSON
array, ``["*"]`` = every model) and ``X-Request-ID``. A request without ``X-Auth-Sub`` did not come
through the gateway and is refused.
"""

import asyncio
import json
import logging
import time
import uuid
from typing import Optional

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .backend import Pool, read_drain_file
from .budgets import Budgets
from .errors import APIError, error_body, internal_error, invalid
from .metrics import Metrics, PoolCollector
from .parsers import TOOL_OPEN, OutputParser, StopMatcher
from .request_body import decode
from .sampling import request_fields
from .schemas import (
    ChatRequest,
    CompletionRequest,
    NamedToolChoice,
    check_unsupported,
    parse,
    stop_list,
    template_messages,
)
from .server_tools import (
    CallContext,
    Principal,
    ServerToolAccessError,
    ServerToolConfigError,
    ServerToolEngine,
    ServerToolMetrics,
)
from .shared import SharedBudgets
from .template import ChatTemplate
from .thinking import Turn, turn_of
from .tokenizer import TokenCounter
from .tool_loop import ToolLoop, server_tool_chunk

log = logging.getLogger("triton_fleet_openai")


class Caller:
    def __init__(self, subject: str, rate_class: str, models: list[str], request_id: str):
        self.subject = subject
        self.rate_class = rate_class
        self.models = models
        self.request_id = request_id

    def may_use(self, model: str) -> bool:
        return "*" in self.models or model in self.models


def caller_of(request: Request) -> Caller:
    subject = request.headers.get("x-auth-sub", "")
    if not subject:
        raise APIError(
            401,
            "missing verified subject: send requests through the gateway with a bearer token",
            code="invalid_api_key",
        )
    raw = request.headers.get("x-auth-models", "")
    try:
        models = json.loads(raw) if raw else []
    except ValueError:
        models = None
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        raise APIError(403, "the token's models claim is not a list of model names", code="model_not_allowed")
    request_id = request.headers.get("x-request-id") or uuid.uuid4().hex
    return Caller(subject, request.headers.get("x-auth-class", "default") or "default", models, request_id)


# Longer prompts are tokenized off the event loop (~1 ms of tokenizing on this project's CI machine; a
# thread hand-off costs ~0.1 ms).
LONG_PROMPT_CHARS = 4096


class PromptTokens:
    """A prompt's token count: an upper bound at once (no tokenizing), the exact count (the model's tokenizer)
    when first read. A prompt clearly within the model's limits by its bound goes to Triton without waiting
    for its tokenization (a 2,100-token prompt takes ~3 ms: docs/benchmarks.md) and is counted exactly for
    usage and accounting once the request has ended; any other is counted before, so that a refusal states
    the exact numbers."""

    __slots__ = ("_counter", "_exact", "_text", "bound")

    def __init__(self, counter: TokenCounter, text: str):
        self._counter = counter
        self._text = text
        self._exact: Optional[int] = None
        self.bound = counter.upper_bound(text)

    @property
    def exact(self) -> int:
        if self._exact is None:
            self._exact = self._counter.count(self._text)
        return self._exact

    async def exact_soon(self) -> int:
        """:attr:`exact`, a long prompt tokenized in a thread (``tokenizers`` releases the GIL): the worker's
        other streams go on meanwhile."""
        if self._exact is None and len(self._text) > LONG_PROMPT_CHARS:
            self._exact = await asyncio.to_thread(self._counter.count, self._text)
        return self.exact


def _sse(data) -> bytes:
    return b"data: " + json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n\n"


class ErrorResponse(JSONResponse):
    """An error object written with JSON's escapes for anything outside ASCII: a parameter naming a key that holds
    a lone surrogate (request_body.py) cannot be written as UTF-8, and the client reads the escape back as the
    key it sent."""

    def render(self, content) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


def _error_event(exc: Exception, request_id: str) -> bytes:
    """A failure once a stream has begun: OpenAI's error object as an SSE event (the openai SDK raises it),
    with a stable message for a server-side one; what happened goes to the log under the request id."""
    if not isinstance(exc, APIError):
        log.error("request %s: the stream failed", request_id, exc_info=exc)
        exc = internal_error(exc)
    return _sse(exc.report(request_id, log))


def _reasoning(text: str) -> dict:
    """A turn's reasoning under vLLM's current name and its older one (DeepSeek's), so that clients written
    for either read it."""
    return {"reasoning": text, "reasoning_content": text}


class Generation:
    """One request's run through the pool: stop strings, parsers, usage, metrics."""

    def __init__(
        self,
        app_state,
        caller: Caller,
        *,
        fields: dict,
        prompt: PromptTokens,
        stops: list[str],
        parser: Optional[OutputParser],
        max_tokens: int,
    ):
        self.s = app_state
        self.caller = caller
        self.fields = fields
        self.prompt = prompt
        self.stop = StopMatcher(stops)
        self.parser = parser
        self.max_tokens = max_tokens
        self.completion_ids = 0
        self.text_for_count = []
        self.ids_known = True
        self.finish = None
        self.tool_calls = 0
        self.upstream = None
        self.started = None

    def start(self):
        """Send the request to Triton now: a streamed response's headers and first chunk then go out while
        the node works on it, not before it has the request (:meth:`run` reads it)."""
        if self.upstream is None:
            self.started = time.monotonic()
            self.upstream = self.s.pool.generate(self.fields, request_id=self.caller.request_id)

    async def close(self):
        """Cancel the request in Triton unless it has ended (a client that left before the response began)."""
        if self.upstream is not None:
            await self.upstream.aclose()

    def _events(self, text: str, final: bool):
        if self.parser is None:
            events = [("content", text)] if text else []
            return events
        events = self.parser.feed(text) if text else []
        if final:
            events += self.parser.finish()
        return events

    async def run(self):
        """Yields lists of events; sets finish and token counts."""
        model = self.s.settings.model.served_name
        self.start()
        started = self.started
        last = None
        first = True
        agen = self.upstream
        backend_finish = None
        try:
            async for piece in agen:
                now = time.monotonic()
                n = len(piece.ids) if piece.ids is not None else 0
                if piece.ids is None:
                    self.ids_known = False
                    self.text_for_count.append(piece.text)
                self.completion_ids += n
                if piece.text:
                    if first:
                        self.s.metrics.ttft.labels(model).observe(now - started)
                        first = False
                    elif last is not None:
                        self.s.metrics.itl.labels(model).observe((now - last) / max(1, n))
                    last = now
                if piece.finish:
                    backend_finish = piece.finish
                text = self.stop.feed(piece.text)
                events = self._events(text, final=False)
                if events:
                    yield events
                if self.stop.stopped:
                    self.finish = "stop"
                    break
        finally:
            await agen.aclose()  # cancels the Triton stream when we stopped early or the client left
        events = self._events(self.stop.finish(), final=True)
        if events:
            yield events
        if not self.ids_known:
            self.completion_ids = self.s.counter.count("".join(self.text_for_count))
        if self.finish is None:
            if backend_finish in ("stop", "length"):
                self.finish = backend_finish
            else:
                self.finish = "length" if self.completion_ids >= self.max_tokens else "stop"
        if self.parser is not None and self.parser.tool_calls and self.finish == "stop":
            self.finish = "tool_calls"

    @property
    def prompt_tokens(self) -> int:
        return self.prompt.exact

    def usage(self):
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_ids,
            "total_tokens": self.prompt_tokens + self.completion_ids,
        }

    def account(self):
        model = self.s.settings.model.served_name
        self.s.metrics.prompt_tokens.labels(self.caller.subject, model).inc(self.prompt_tokens)
        self.s.metrics.completion_tokens.labels(self.caller.subject, model).inc(self.completion_ids)
        self.s.budgets.record(self.caller.subject, self.caller.rate_class, self.prompt_tokens + self.completion_ids)


# A streamed response's own headers: no caching, and no buffering by NGINX (each chunk goes out as it comes).
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class _ClientGone(Exception):
    """The ASGI server's send failed: the client has gone (an ASGI 2.4 server's OSError)."""


class GenerationStream(StreamingResponse):
    """A streamed (SSE) chat or completion.

    - The request goes to Triton as the response is made, before anything is sent to the client; the
      headers and first chunk follow once every request that arrived meanwhile has been sent too (one turn
      of the event loop), so a burst's requests reach Triton before any of its responses begin. The client
      reads the headers while the model works on the request, not after its first token.
    - A client that leaves is watched for with one task (Starlette's streamed response runs a task group and
      two tasks per response); its request is cancelled in Triton, also when its body had not started.
    """

    def __init__(self, gen: Generation, body, headers: dict):
        super().__init__(body, media_type="text/event-stream", headers={**headers, **SSE_HEADERS})
        self.gen = gen
        gen.start()

    async def __call__(self, scope, receive, send):
        task = asyncio.current_task()
        gone = done = False

        async def watch():
            nonlocal gone
            while (await receive())["type"] != "http.disconnect":
                pass
            if not done:  # a server's receive also answers "disconnect" once the response is complete
                gone = True
                task.cancel()

        async def emit(message):
            try:
                await send(message)
            except OSError as exc:
                raise _ClientGone() from exc

        body = self.body_iterator
        watcher = asyncio.ensure_future(watch())
        try:
            await asyncio.sleep(0)  # the other requests of a burst first (see above)
            await emit({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            async for chunk in body:
                await emit({"type": "http.response.body", "body": chunk, "more_body": True})
            done = True
            await emit({"type": "http.response.body", "body": b"", "more_body": False})
        except _ClientGone:
            pass
        except asyncio.CancelledError:
            if not gone:
                raise
            if hasattr(task, "uncancel"):  # Python 3.11+: the cancel was ours, the task ends normally
                task.uncancel()
        finally:
            watcher.cancel()
            await body.aclose()
            await self.gen.close()


class State:
    def __init__(self, settings, *, pool, template, counter, metrics, budgets):
        self.settings = settings
        self.pool = pool
        self.template = template
        self.counter = counter
        self.metrics = metrics
        self.budgets = budgets


def create_app(settings, *, pool=None, template=None, counter=None, metrics=None, budgets=None, shared=None) -> FastAPI:
    """The application of one process. ``shared``: a :class:`shared.SharedNodes` when the service runs several
    workers (its requests in flight and token budgets are then the workers' together)."""
    model_info = settings.model
    pool = pool or Pool(
        settings.triton_nodes, model_info.entry_model, settings.fail_timeout_s, settings.connect_timeout_s,
        reuse_streams=settings.reuse_streams,
    )
    if shared is not None:
        pool.on_change = shared.publish
        if budgets is None:
            budgets = SharedBudgets(shared.dir / "budgets.sqlite", settings.token_budgets)
    template = template or ChatTemplate.from_tokenizer_dir(settings.tokenizer_dir)
    counter = counter or TokenCounter(settings.tokenizer_dir)
    metrics = metrics or Metrics()
    budgets = budgets or Budgets(settings.token_budgets)
    st = State(settings, pool=pool, template=template, counter=counter, metrics=metrics, budgets=budgets)
    try:
        # server tools (server_tools.py, tool_loop.py): checked here, so --check refuses a bad declaration
        server_engine = ServerToolEngine.from_config(settings.server_tools, metrics=ServerToolMetrics(metrics.registry))
    except ServerToolConfigError as exc:
        raise SystemExit(f"configuration is invalid: {exc}") from exc
    tool_loop = ToolLoop.for_engine(server_engine)
    app = FastAPI(title="triton-fleet OpenAI-compatible API", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.fleet = st

    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError):
        headers = dict(exc.headers)
        request_id = request.headers.get("x-request-id", "")
        if request_id:
            headers["x-request-id"] = request_id
        return ErrorResponse(exc.report(request_id, log), status_code=exc.status, headers=headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception):
        # Starlette logs the traceback as well once this response is sent; the client learns only the request id.
        request_id = request.headers.get("x-request-id", "")
        err = internal_error(exc)
        headers = {"x-request-id": request_id} if request_id else {}
        return ErrorResponse(err.report(request_id, log), status_code=err.status, headers=headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException):
        message = {
            404: f"no such endpoint: {request.method} {request.url.path}",
            405: f"method {request.method} is not allowed on {request.url.path}",
        }.get(exc.status_code, str(exc.detail))
        return ErrorResponse(error_body(exc.status_code, message), status_code=exc.status_code)

    def model_card():
        card = {
            "id": model_info.served_name,
            "object": "model",
            "created": model_info.created,
            "owned_by": settings.owned_by,
            "max_model_len": model_info.context_length,
            "context_length": model_info.context_length,
            "runtime": model_info.runtime,
            # extension: what a request that leaves these out is decoded with (sampling.py)
            "sampling_defaults": model_info.sampling,
            # extension: the model's reasoning (switchable, never, always: thinking.py)
            "thinking": model_info.thinking.mode,
        }
        if model_info.sampling_thinking_off is not None:
            card["sampling_defaults_thinking_off"] = model_info.sampling_thinking_off
        return card

    nodes_snapshot = shared.snapshot if shared is not None else st.pool.snapshot
    metrics.registry.register(PoolCollector(nodes_snapshot))

    def reload_drain():
        """Re-read the drain file; a broken one keeps the current drain set (never un-drains by accident)."""
        try:
            drained = st.pool.set_drained(read_drain_file(settings.drain_file))
        except ValueError as exc:
            log.error("%s; keeping the current drain set", exc)
            return None
        log.info("drained nodes: %s", ", ".join(drained) or "none")
        return drained

    app.state.reload_drain = reload_drain
    reload_drain()

    # Loopback only: NGINX routes /v1/ alone to this service, so no client reaches these.
    @app.get("/internal/nodes")
    async def internal_nodes():
        return {"drain_file": settings.drain_file, "nodes": nodes_snapshot()}

    @app.get("/health")
    async def health():
        nodes = await st.pool.ready()
        ok = any(nodes.values())
        return JSONResponse(
            {"status": "ok" if ok else "no ready Triton node", "model": model_info.served_name, "nodes": nodes},
            status_code=200 if ok else 503,
        )

    @app.get("/v1/models")
    async def list_models(request: Request):
        caller = caller_of(request)
        data = [model_card()] if caller.may_use(model_info.served_name) else []
        return {"object": "list", "data": data}

    @app.get("/v1/models/{name:path}")
    async def get_model(name: str, request: Request):
        caller = caller_of(request)
        if name != model_info.served_name:
            raise APIError(
                404,
                f"the model {name!r} does not exist (served here: {model_info.served_name})",
                param="model",
                code="model_not_found",
            )
        if not caller.may_use(name):
            raise APIError(
                403, f"your token does not grant the model {name!r}", param="model", code="model_not_allowed"
            )
        return model_card()

    async def _prepare(request: Request, cls):
        caller = caller_of(request)
        headers = request.headers
        body = decode(await request.body(), headers.get("content-type"), headers.get("content-encoding"))
        req = parse(cls, body)
        if req.model != model_info.served_name:
            raise APIError(
                404,
                f"the model {req.model!r} does not exist (served here: {model_info.served_name})",
                param="model",
                code="model_not_found",
            )
        if not caller.may_use(req.model):
            raise APIError(
                403, f"your token does not grant the model {req.model!r}", param="model", code="model_not_allowed"
            )
        wait = st.budgets.retry_after(caller.subject, caller.rate_class)
        if wait is not None:
            st.metrics.budget_rejections.labels(caller.rate_class).inc()
            raise APIError(
                429,
                f"token budget of rate class {caller.rate_class!r} is spent for this minute; retry in {wait} s",
                code="token_budget_exceeded",
                headers={"Retry-After": str(wait)},
            )
        iface = await st.pool.interface()
        check_unsupported(req, iface.params)
        return caller, req, iface

    async def _limits(req, prompt: PromptTokens, max_tokens: Optional[int], param: str) -> int:
        ctx = model_info.context_length
        default = min(settings.default_max_tokens or model_info.max_output_len, model_info.max_output_len)
        bound = prompt.bound
        # Within every limit even at its bound (exact <= bound): no tokenizing before the request is sent.
        if bound is not None and bound <= model_info.max_input_len:
            if max_tokens is None and default <= ctx - bound:
                return default
            if max_tokens is not None and max_tokens <= model_info.max_output_len and bound + max_tokens <= ctx:
                return max_tokens
        prompt_tokens = await prompt.exact_soon()
        # what holds the prompt: a chat's messages, a completion's prompt (param is the max_tokens field)
        prompt_param = "prompt" if isinstance(req, CompletionRequest) else "messages"
        if prompt_tokens > model_info.max_input_len:
            raise APIError(
                400,
                f"the prompt is {prompt_tokens} tokens; this model takes at most "
                f"{model_info.max_input_len} input tokens",
                param=prompt_param,
                code="context_length_exceeded",
            )
        if max_tokens is None:
            max_tokens = min(default, ctx - prompt_tokens)
            if max_tokens < 1:
                raise APIError(
                    400,
                    f"the prompt is {prompt_tokens} tokens and fills the context length of {ctx}",
                    param=prompt_param,
                    code="context_length_exceeded",
                )
            return max_tokens
        if max_tokens > model_info.max_output_len:
            raise invalid(
                param,
                f"{param} is {max_tokens}; this model generates at most {model_info.max_output_len} tokens per request",
            )
        if prompt_tokens + max_tokens > ctx:
            raise APIError(
                400,
                f"this model's context length is {ctx} tokens; the prompt is {prompt_tokens} tokens and "
                f"{param} asks for {max_tokens} ({prompt_tokens + max_tokens} in all): shorten the prompt "
                f"or lower {param}",
                param=param,
                code="context_length_exceeded",
            )
        return max_tokens

    sampling_defaults = model_info.sampling
    sampling_thinking_off = model_info.sampling_thinking_off

    def _fields(req, prompt: str, max_tokens: int, stops: list[str], iface, *, turn: Optional[Turn] = None) -> dict:
        defaults = sampling_thinking_off if turn is not None and turn.switched_off else sampling_defaults
        fields = {
            "prompt": prompt,
            "max_tokens": max_tokens,
            "stream": True,
            "exclude_input": True,
            "return_finish_reason": True,
            **request_fields(req, defaults),
        }
        if stops and "stop" in iface.params:
            fields["stop"] = stops
        return fields

    def _prefill(turn: Turn, prompt: str, choice) -> str:
        """tool_choice "required" / named: the assistant turn is prefilled with the opening of a call (the model
        cannot but continue it); any thinking is closed empty first, as the template does when it is off."""
        if not (choice == "required" or isinstance(choice, NamedToolChoice)):
            return ""
        prefill = turn.think_prefill(prompt) + TOOL_OPEN + "\n"
        if isinstance(choice, NamedToolChoice):
            prefill += '{"name": ' + json.dumps(choice.function.name, ensure_ascii=False) + ', "arguments": '
        return prefill

    async def chat(request: Request):
        caller, req, iface = await _prepare(request, ChatRequest)
        # the model's reasoning behaviour against the request's switch (a 400 before anything runs)
        turn = turn_of(model_info.thinking, req, model_info.served_name)
        # --- server tools: a request with any goes through the tool loop; without, chat() is unchanged ---
        server = _server_tools_of(request, req, caller)
        if server:
            return await _chat_server_tools(caller, req, iface, server, turn)
        choice = req.tool_choice or ("auto" if req.tools else "none")
        use_tools = bool(req.tools) and choice != "none"
        tools = [t.model_dump(exclude_none=True) for t in req.tools] if use_tools else None
        prompt = st.template.render(template_messages(req), tools=tools, add_generation_prompt=True, **turn.kwargs)
        prefill = _prefill(turn, prompt, choice) if use_tools else ""
        prompt_tokens = PromptTokens(st.counter, prompt + prefill)
        param = "max_completion_tokens" if req.max_completion_tokens is not None else "max_tokens"
        max_tokens = await _limits(req, prompt_tokens, req.max_completion_tokens or req.max_tokens, param)
        stops = stop_list(req)
        parser = turn.parser(use_tools, prefill)
        gen = Generation(
            st,
            caller,
            fields=_fields(req, prompt + prefill, max_tokens, stops, iface, turn=turn),
            prompt=prompt_tokens,
            stops=stops,
            parser=parser,
            max_tokens=max_tokens,
        )
        single_call = req.parallel_tool_calls is False
        cid = "chatcmpl-" + uuid.uuid4().hex
        created = int(time.time())
        headers = {"x-request-id": caller.request_id}
        if req.stream:
            include_usage = bool(req.stream_options and req.stream_options.include_usage)
            return GenerationStream(gen, _chat_stream(gen, cid, created, include_usage, single_call), headers)
        return JSONResponse(await _chat_whole(gen, cid, created, single_call), headers=headers)

    def _server_tools_of(request: Request, req, caller):
        if (req.tool_choice or "auto") == "none" or not server_engine.tools:
            return []
        # X-Auth-Scope is read only where the gateway is said to set it; otherwise a client could send its own
        scopes = Principal.scopes_from_claim(request.headers.get("x-auth-scope")) if server_engine.scope_header else ()
        principal = Principal(caller.subject, caller.rate_class, scopes)
        try:
            return server_engine.resolve(
                req.server_tools, req.model, principal, [t.function.name for t in req.tools or ()]
            )
        except ServerToolAccessError as exc:
            code = "server_tool_not_allowed" if exc.status == 403 else "invalid_value"
            raise APIError(exc.status, str(exc), param="server_tools", code=code) from exc

    async def _chat_server_tools(caller, req, iface, server, turn: Turn):
        client_tools = [t.model_dump(exclude_none=True) for t in req.tools or ()]
        stops = stop_list(req)
        model = model_info.served_name

        async def generate(messages, tools, round_index):
            # tool_choice holds for the first turn only: forcing a call every round would only reach the limit
            choice = (req.tool_choice or "auto") if round_index == 0 else "auto"
            prompt = st.template.render(messages, tools=tools, add_generation_prompt=True, **turn.kwargs)
            prefill = _prefill(turn, prompt, choice)
            prompt_tokens = PromptTokens(st.counter, prompt + prefill)
            param = "max_completion_tokens" if req.max_completion_tokens is not None else "max_tokens"
            max_tokens = await _limits(req, prompt_tokens, req.max_completion_tokens or req.max_tokens, param)
            parser = turn.parser(True, prefill)
            gen = Generation(
                st, caller, fields=_fields(req, prompt + prefill, max_tokens, stops, iface, turn=turn),
                prompt=prompt_tokens, stops=stops, parser=parser, max_tokens=max_tokens,
            )
            st.metrics.inflight.labels(model).inc()
            try:
                async for events in gen.run():
                    for event in events:
                        yield event
            finally:
                st.metrics.inflight.labels(model).dec()
                gen.account()
            yield "end", {"finish_reason": gen.finish, "usage": gen.usage()}

        ctx = CallContext(caller.request_id, Principal(caller.subject, caller.rate_class))
        cid = "chatcmpl-" + uuid.uuid4().hex
        created = int(time.time())
        headers = {"x-request-id": caller.request_id}
        messages = template_messages(req)
        if not req.stream:
            out = await tool_loop.run(generate, messages, client_tools, server, ctx)
            return JSONResponse({
                "id": cid, "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "message": out["message"], "logprobs": None,
                             "finish_reason": out["finish_reason"]}],
                "usage": out["usage"],
                # extension fields (OpenAI clients ignore them): which server tools ran, and whether the limit hit
                "server_tools": out["server_tools"],
                "server_tool_rounds_exhausted": out["server_tool_rounds_exhausted"],
            }, headers=headers)
        include_usage = bool(req.stream_options and req.stream_options.include_usage)

        async def events():
            base = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model}
            yield _sse(_chunk(cid, created, {"role": "assistant", "content": ""}, usage_field=include_usage))
            calls = 0
            try:
                async for kind, value in tool_loop.stream(generate, messages, client_tools, server, ctx):
                    if kind == "content":
                        yield _sse(_chunk(cid, created, {"content": value}, usage_field=include_usage))
                    elif kind == "reasoning":
                        yield _sse(_chunk(cid, created, _reasoning(value), usage_field=include_usage))
                    elif kind == "server_tool":
                        yield _sse(server_tool_chunk(base, value))
                    elif kind == "tool_call":
                        head = {"index": calls, "id": value["id"], "type": "function",
                                "function": {"name": value["name"], "arguments": ""}}
                        yield _sse(_chunk(cid, created, {"tool_calls": [head]}, usage_field=include_usage))
                        tail = {"index": calls, "function": {"arguments": value["arguments"]}}
                        yield _sse(_chunk(cid, created, {"tool_calls": [tail]}, usage_field=include_usage))
                        calls += 1
                    else:
                        yield _sse(_chunk(cid, created, {}, value["finish_reason"], usage_field=include_usage))
                        if include_usage:
                            yield _sse(dict(base, choices=[], usage=value["usage"]))
            except Exception as exc:
                yield _error_event(exc, caller.request_id)
            yield b"data: [DONE]\n\n"

        return StreamingResponse(
            events(), media_type="text/event-stream",
            headers={**headers, **SSE_HEADERS},
        )

    def _chunk(cid, created, delta, finish=None, usage_field=False):
        body = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model_info.served_name,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if usage_field:
            body["usage"] = None
        return body

    async def _chat_stream(gen: Generation, cid, created, include_usage, single_call):
        model = model_info.served_name
        st.metrics.inflight.labels(model).inc()
        finished = False
        try:
            yield _sse(_chunk(cid, created, {"role": "assistant", "content": ""}, usage_field=include_usage))
            calls = 0
            try:
                async for events in gen.run():
                    for kind, value in events:
                        if kind == "content":
                            delta = {"content": value}
                        elif kind == "reasoning":
                            delta = _reasoning(value)
                        else:
                            if single_call and calls:
                                continue
                            call_id = "call_" + uuid.uuid4().hex[:24]
                            yield _sse(
                                _chunk(
                                    cid,
                                    created,
                                    {
                                        "tool_calls": [
                                            {
                                                "index": calls,
                                                "id": call_id,
                                                "type": "function",
                                                "function": {"name": value["name"], "arguments": ""},
                                            }
                                        ]
                                    },
                                    usage_field=include_usage,
                                )
                            )
                            delta = {"tool_calls": [{"index": calls, "function": {"arguments": value["arguments"]}}]}
                            calls += 1
                        yield _sse(_chunk(cid, created, delta, usage_field=include_usage))
            except Exception as exc:
                yield _error_event(exc, gen.caller.request_id)
                yield b"data: [DONE]\n\n"
                finished = True
                return
            yield _sse(_chunk(cid, created, {}, gen.finish, usage_field=include_usage))
            if include_usage:
                yield _sse(
                    {
                        "id": cid,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": model,
                        "choices": [],
                        "usage": gen.usage(),
                    }
                )
            yield b"data: [DONE]\n\n"
            finished = True
        finally:
            st.metrics.inflight.labels(model).dec()
            if not finished:
                st.metrics.cancelled.labels(model).inc()
            gen.account()

    async def _chat_whole(gen: Generation, cid, created, single_call):
        model = model_info.served_name
        st.metrics.inflight.labels(model).inc()
        content, reasoning, calls = [], [], []
        try:
            async for events in gen.run():
                for kind, value in events:
                    if kind == "content":
                        content.append(value)
                    elif kind == "reasoning":
                        reasoning.append(value)
                    elif not (single_call and calls):
                        calls.append({"id": "call_" + uuid.uuid4().hex[:24], "type": "function", "function": value})
        finally:
            st.metrics.inflight.labels(model).dec()
            gen.account()
        message = {"role": "assistant", "content": "".join(content) if content or not calls else None}
        if reasoning:
            message.update(_reasoning("".join(reasoning)))
        if calls:
            message["tool_calls"] = calls
        return {
            "id": cid,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": gen.finish}],
            "usage": gen.usage(),
        }

    async def completions(request: Request):
        caller, req, iface = await _prepare(request, CompletionRequest)
        prompt = req.prompt if isinstance(req.prompt, str) else req.prompt[0]
        prompt_tokens = PromptTokens(st.counter, prompt)
        max_tokens = await _limits(req, prompt_tokens, req.max_tokens if req.max_tokens is not None else 16, "max_tokens")
        stops = stop_list(req)
        gen = Generation(
            st,
            caller,
            fields=_fields(req, prompt, max_tokens, stops, iface),
            prompt=prompt_tokens,
            stops=stops,
            parser=None,
            max_tokens=max_tokens,
        )
        cid = "cmpl-" + uuid.uuid4().hex
        created = int(time.time())
        headers = {"x-request-id": caller.request_id}
        if req.stream:
            include_usage = bool(req.stream_options and req.stream_options.include_usage)
            return GenerationStream(gen, _completion_stream(gen, cid, created, include_usage), headers)
        text = []
        st.metrics.inflight.labels(model_info.served_name).inc()
        try:
            async for events in gen.run():
                text.extend(v for _, v in events)
        finally:
            st.metrics.inflight.labels(model_info.served_name).dec()
            gen.account()
        return JSONResponse(
            {
                "id": cid,
                "object": "text_completion",
                "created": created,
                "model": model_info.served_name,
                "choices": [{"index": 0, "text": "".join(text), "logprobs": None, "finish_reason": gen.finish}],
                "usage": gen.usage(),
            },
            headers=headers,
        )

    async def _completion_stream(gen: Generation, cid, created, include_usage):
        model = model_info.served_name

        def chunk(text, finish=None):
            body = {
                "id": cid,
                "object": "text_completion",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}],
            }
            if include_usage:
                body["usage"] = None
            return body

        st.metrics.inflight.labels(model).inc()
        finished = False
        try:
            try:
                async for events in gen.run():
                    for _, value in events:
                        yield _sse(chunk(value))
            except Exception as exc:
                yield _error_event(exc, gen.caller.request_id)
                yield b"data: [DONE]\n\n"
                finished = True
                return
            yield _sse(chunk("", gen.finish))
            if include_usage:
                yield _sse(
                    {
                        "id": cid,
                        "object": "text_completion",
                        "created": created,
                        "model": model,
                        "choices": [],
                        "usage": gen.usage(),
                    }
                )
            yield b"data: [DONE]\n\n"
            finished = True
        finally:
            st.metrics.inflight.labels(model).dec()
            if not finished:
                st.metrics.cancelled.labels(model).inc()
            gen.account()

    # The two generating routes are plain Starlette routes: FastAPI's route adds dependency solving that these
    # endpoints do not use, on every request's way to Triton (bench/openai/critical-path). Errors still go
    # through the app's handlers above.
    app.add_route("/v1/chat/completions", chat, methods=["POST"])
    app.add_route("/v1/completions", completions, methods=["POST"])
    return RequestCounter(app, st.metrics, model_info.served_name)


class RequestCounter:
    """Counts /v1 responses by status (plain ASGI: Starlette's http middleware would re-stream every chunk)."""

    def __init__(self, app, metrics, model):
        self.app = app
        self.metrics = metrics
        self.model = model
        self.state = app.state

    async def __call__(self, scope, receive, send):
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        endpoint = path if path in ENDPOINTS else "other"

        async def counting_send(message):
            if message["type"] == "http.response.start":
                self.metrics.requests.labels(endpoint, self.model, str(message["status"])).inc()
            await send(message)

        await self.app(scope, receive, counting_send)


ENDPOINTS = ("/v1/models", "/v1/chat/completions", "/v1/completions")
