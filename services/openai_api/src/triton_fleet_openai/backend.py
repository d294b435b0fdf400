"""Triton side: the entry model's tensors, request building, and the node pool over gRPC streaming.

The tensors are read from the model's own config (``ModelConfig`` over gRPC) on first use of a node,
so the service follows whatever the serving profile rendered (transformers runtime, the TRT-LLM
ensemble, the LLM API model) without a copy of their names: :data:`LOGICAL` lists, per request
field, the tensor names the runtimes use, first match wins.

Pool semantics are the gateway's (NGINX ``least_conn`` with passive health): the node with the
fewest requests in flight is picked (round robin among equals); a node whose connection fails is
skipped for ``fail_timeout`` seconds; a request that failed before its first token is retried on
the next node; a request already streaming when its node stops fails alone.

Streams: a request runs alone on a gRPC stream, because Triton cancels a stream only as a whole (that is
how a client that left frees its slot). The stream outlives it: a request that ended keeps its stream
open for the node's next request (Triton's ``triton_final_response`` flag marks a request's end), since
opening a stream costs more than the request's own messages (docs/benchmarks.md). A cancelled or broken
stream is dropped.

Draining (rolling changes): the gateway host keeps a drain file (addresses of serving nodes taken out
of rotation); :meth:`Pool.set_drained` is called with it at start and on SIGHUP. A drained node gets
no new request, never even as a last resort, while the requests it already has run to their end;
:meth:`Pool.snapshot` lists them per node, so a rolling change can wait for them.
"""

import array
import asyncio
import collections
import contextlib
import itertools
import json
import struct
import time
from collections.abc import AsyncIterator
from typing import Optional

import grpc
from tritonclient.grpc import MAX_GRPC_MESSAGE_SIZE, KeepAliveOptions, model_config_pb2, service_pb2, service_pb2_grpc

from .errors import APIError
from .shared import merge_snapshots, node_states

LOGICAL = {
    "prompt": ("text_input",),
    "max_tokens": ("max_tokens", "sampling_param_max_tokens"),
    "stream": ("stream", "streaming"),
    "temperature": ("temperature", "sampling_param_temperature"),
    "top_p": ("top_p", "sampling_param_top_p"),
    "top_k": ("top_k", "sampling_param_top_k"),
    "stop": ("stop_words", "sampling_param_stop"),
    "seed": ("seed", "random_seed", "sampling_param_seed"),
    "presence_penalty": ("presence_penalty", "sampling_param_presence_penalty"),
    "frequency_penalty": ("frequency_penalty", "sampling_param_frequency_penalty"),
    "repetition_penalty": ("repetition_penalty", "sampling_param_repetition_penalty"),
    "min_p": ("min_p", "sampling_param_min_p"),
    "exclude_input": ("exclude_input_in_output", "sampling_param_exclude_input_from_output"),
    "return_finish_reason": ("return_finish_reason",),
}
REQUIRED = ("prompt", "max_tokens", "stream")
# Triton's raw tensor contents are little-endian; struct's codes for the datatypes the entry models use.
_PACK = {"BOOL": "?", "INT32": "i", "INT64": "q", "UINT32": "I", "UINT64": "Q", "FP32": "f", "FP64": "d"}


class Interface:
    """Which tensor carries each request field, with its datatype and shape rule."""

    def __init__(self, model: str, inputs: dict[str, tuple[str, str, bool]], outputs: list[str]):
        self.model = model
        self.inputs = inputs  # logical -> (tensor name, triton datatype, list-valued)
        self.outputs = outputs
        self.batched = False

    @classmethod
    def from_config(cls, config) -> "Interface":
        by_name = {}
        for t in config.input:
            dtype = model_config_pb2.DataType.Name(t.data_type).replace("TYPE_", "")
            by_name[t.name] = ("BYTES" if dtype == "STRING" else dtype, list(t.dims) == [-1])
        inputs = {}
        for logical, names in LOGICAL.items():
            for name in names:
                if name in by_name:
                    inputs[logical] = (name, by_name[name][0], by_name[name][1])
                    break
        missing = [k for k in REQUIRED if k not in inputs]
        if missing:
            raise ValueError(
                f"model {config.name!r} has no input for {', '.join(missing)} (expected one of "
                + "; ".join("/".join(LOGICAL[k]) for k in missing)
                + "): is it the entry model of a triton-fleet repository?"
            )
        outputs = [t.name for t in config.output]
        if "text_output" not in outputs:
            raise ValueError(f"model {config.name!r} has no text_output output")
        iface = cls(config.name, inputs, outputs)
        iface.batched = config.max_batch_size > 0
        return iface

    @property
    def params(self):
        return set(self.inputs)

    def build(self, fields: dict) -> service_pb2.ModelInferRequest:
        """The inference request for ``fields`` ({logical: value}), its tensors as raw contents; fields the
        model has no input for are left out (the caller refused those it cannot honour). The same message
        tritonclient builds from InferInputs (tests/unit/openai_api), without a numpy array per tensor."""
        request = service_pb2.ModelInferRequest(model_name=self.model)
        for logical, value in fields.items():
            if value is None or logical not in self.inputs:
                continue
            name, dtype, is_list = self.inputs[logical]
            values = list(value) if is_list else [value]
            if dtype == "BYTES":
                encoded = [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in values]
                raw = b"".join(len(v).to_bytes(4, "little") + v for v in encoded)
            else:
                code = _PACK[dtype]
                if code in "iIqQ":
                    values = [int(v) for v in values]
                raw = struct.pack(f"<{len(values)}{code}", *values)
            request.inputs.add(name=name, datatype=dtype, shape=[1, len(values)] if self.batched else [len(values)])
            request.raw_input_contents.append(raw)
        return request


class Piece:
    """One streamed response: new text, new token ids (None when the runtime returns none), finish."""

    __slots__ = ("finish", "ids", "text")

    def __init__(self, text: str, ids: Optional[list[int]], finish: Optional[str]):
        self.text = text
        self.ids = ids
        self.finish = finish


# Read straight from the response protobuf: InferResult.as_numpy builds numpy (object) arrays per tensor
# per token, a tenth of the service's CPU per streamed token (py-spy, docs/benchmarks.md).
_INT_CODES = {"INT32": "i", "INT64": "q", "UINT32": "I", "UINT64": "Q"}
_PIECE_OUTPUTS = frozenset(("text_output", "output_ids", "finish_reason"))


def _bytes_elements(raw: bytes) -> list:
    """Triton's BYTES tensor encoding: each element a 4-byte little-endian length, then its bytes."""
    out, off, end = [], 0, len(raw)
    while off + 4 <= end:
        n = int.from_bytes(raw[off:off + 4], "little")
        out.append(raw[off + 4:off + 4 + n])
        off += 4 + n
    return out


def _typed_contents(output) -> list:
    """A tensor's typed contents (a server that fills these instead of raw ones)."""
    contents = output.contents
    for field in ("bytes_contents", "int_contents", "int64_contents", "uint_contents", "uint64_contents"):
        values = getattr(contents, field)
        if len(values):
            return list(values)
    return []


def _decode_piece(response) -> Piece:
    """One ModelInferResponse of the stream as a :class:`Piece`."""
    raw_contents = response.raw_output_contents
    text, ids, finish = "", None, None
    for i, output in enumerate(response.outputs):
        name = output.name
        if name not in _PIECE_OUTPUTS:
            continue
        raw = raw_contents[i] if i < len(raw_contents) else None
        if name == "output_ids":
            code = _INT_CODES.get(output.datatype)
            # Triton sends little-endian tensors; the gateway hosts (x86_64, aarch64) are little-endian too.
            if raw is not None and code:
                ids = array.array(code, raw).tolist()
            else:
                ids = [int(v) for v in _typed_contents(output)]
            continue
        values = _bytes_elements(raw) if raw is not None else [bytes(v) for v in _typed_contents(output)]
        if name == "text_output":
            text = b"".join(values).decode("utf-8", errors="replace")
        elif values:
            finish = values[0].decode("utf-8", errors="replace") or None
    return Piece(text, ids, finish)


# tritonclient's own channel options (message sizes, keepalive) plus a short reconnect backoff: gRPC's default
# grows to 120 s, and while it waits every call to that node fails at once, so a Triton node that came back
# (a restart, a rolling change) would be skipped by each worker for minutes. The pool decides when a node is
# tried again (fail_timeout); the channel only has to be ready by then.
_KEEPALIVE = KeepAliveOptions()
CHANNEL_ARGS = [
    ("grpc.max_send_message_length", MAX_GRPC_MESSAGE_SIZE),
    ("grpc.max_receive_message_length", MAX_GRPC_MESSAGE_SIZE),
    ("grpc.keepalive_time_ms", _KEEPALIVE.keepalive_time_ms),
    ("grpc.keepalive_timeout_ms", _KEEPALIVE.keepalive_timeout_ms),
    ("grpc.keepalive_permit_without_calls", _KEEPALIVE.keepalive_permit_without_calls),
    ("grpc.http2.max_pings_without_data", _KEEPALIVE.http2_max_pings_without_data),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


class Node:
    def __init__(self, url: str):
        self.url = url
        self.address = url.rsplit(":", 1)[0].strip("[]")
        self.inflight = 0
        self.drained = False
        # request id -> (monotonic start, wall-clock start) of the requests running on this node
        self.active: dict[str, tuple[float, float]] = {}
        self.down_until = 0.0
        self.failures = 0
        self.channel: Optional[grpc.aio.Channel] = None
        self.stub = None
        self.interface: Optional[Interface] = None
        self.idle: collections.deque = collections.deque()  # open streams whose request has ended
        self.reuse = True  # false once the node is seen not to flag a request's end

    def healthy(self, now: float) -> bool:
        return now >= self.down_until

    def connect(self):
        """The node's stub on its one channel (opened on first use; gRPC reconnects it by itself)."""
        if self.stub is None:
            self.channel = grpc.aio.insecure_channel(self.url, options=CHANNEL_ARGS)
            self.stub = service_pb2_grpc.GRPCInferenceServiceStub(self.channel)
        return self.stub


# What counts against a node: any gRPC error of the call (unreachable, reset, a broken stream; what Triton
# refuses of a request comes as the stream's error message instead) or a failed connection.
_NODE_FAILURES = (grpc.aio.AioRpcError, OSError, ConnectionError)


_FINAL = "triton_final_response"
# Asks Triton for an empty response where a decoupled model ends a request without one (a final flag sent
# alone): every request's end is then seen on its stream, which stays open for the next request.
_EMPTY_FINAL = "triton_enable_empty_final_response"
# Open streams kept per node and worker beyond those in use: enough for a burst's requests to find one.
MAX_IDLE_STREAMS = 128


def _retrieved(task: asyncio.Task):
    """A failed write shows as the stream's failure on the next read; its own exception is not news."""
    if not task.cancelled():
        task.exception()


class Opened:
    """A request on a stream of one node.

    ``keep`` (stream reuse on): the stream is written with ``write`` and stays open after the request, which
    Triton's final flag ends (``done``); ``reused``: an ended request left it open. Otherwise the stream is
    the request's alone, half-closed after it (gRPC's task writes it) and ended by Triton after the request."""

    __slots__ = ("call", "done", "keep", "key", "node", "reused", "writer")

    def __init__(self, node: Node, key: str, request, keep: bool, call=None):
        self.node = node
        self.key = key
        self.keep = keep
        self.reused = call is not None
        self.done = False
        if keep:
            self.call = call or node.connect().ModelStreamInfer()
            # gRPC allows one write in flight per call: a task writes the request, as gRPC's own task for a
            # request iterator would, so that it is on its way before the caller's next await.
            self.writer = asyncio.ensure_future(self.call.write(request))
            self.writer.add_done_callback(_retrieved)
        else:
            self.call = node.connect().ModelStreamInfer(iter((request,)))
            self.writer = None

    def __aiter__(self):
        return self

    async def __anext__(self):
        if self.done:
            raise StopAsyncIteration
        response = await self.call.read()
        if response is grpc.aio.EOF:
            if self.keep:
                raise ConnectionError("the node ended the stream before the request's final response")
            self.done = True
            raise StopAsyncIteration
        if self.keep:
            params = response.infer_response.parameters
            if _FINAL in params:
                self.done = response.error_message != "" or params[_FINAL].bool_param
            else:
                # A Triton that does not flag a request's end: this stream is half-closed so that it ends
                # after the request, and the node's later requests get streams of their own.
                self.node.reuse = self.keep = False
                asyncio.ensure_future(self._half_close())
        return response

    async def _half_close(self):
        with contextlib.suppress(Exception):
            await self.writer
            await self.call.done_writing()

    def reusable(self) -> bool:
        return self.keep and self.done and self.writer.done() and not self.call.done()

    def cancel(self):
        if self.writer is not None:
            self.writer.cancel()
        self.call.cancel()  # a no-op on a stream that has ended; else Triton cancels the request


class Pool:
    def __init__(self, urls: list[str], model: str, fail_timeout: float = 10.0, connect_timeout: float = 5.0,
                 reuse_streams: bool = True):
        if not urls:
            raise ValueError("no Triton nodes configured (triton_nodes is empty)")
        self.nodes = [Node(u) for u in urls]
        self.model = model
        self.fail_timeout = fail_timeout
        self.connect_timeout = connect_timeout
        self.reuse_streams = reuse_streams
        self._rr = itertools.count()
        # Called with the pool after each change of its state (shared.SharedNodes.publish, several workers);
        # ``urgent`` when whoever waits on the state must see it at once (the drain set).
        self.on_change = None

    def set_drained(self, addresses) -> list[str]:
        """Take the nodes at these addresses (or host:port URLs) out of rotation, put every other one back;
        the drained nodes' URLs."""
        wanted = set(addresses)
        for node in self.nodes:
            node.drained = node.address in wanted or node.url in wanted
        self._changed(urgent=True)
        return [n.url for n in self.nodes if n.drained]

    def snapshot(self) -> list[dict]:
        """Per node: drained or not, and the requests running on it (for a drain to wait on)."""
        return merge_snapshots([node_states(self)])

    def _changed(self, urgent: bool = False):
        if self.on_change is not None:
            self.on_change(self, urgent)

    def _order(self) -> list[Node]:
        """Healthy nodes by fewest in flight, round robin among equals; failed ones last, as a last resort.
        Drained nodes are never picked."""
        now = time.monotonic()
        start = next(self._rr) % len(self.nodes)
        rotated = [n for n in self.nodes[start:] + self.nodes[:start] if not n.drained]
        healthy = sorted((n for n in rotated if n.healthy(now)), key=lambda n: n.inflight)
        failed = sorted((n for n in rotated if not n.healthy(now)), key=lambda n: n.down_until)
        return healthy + failed

    def mark_failed(self, node: Node):
        node.failures += 1
        node.down_until = time.monotonic() + self.fail_timeout
        self._changed()

    async def _interface(self, node: Node) -> Interface:
        if node.interface is None:
            resp = await node.connect().ModelConfig(
                service_pb2.ModelConfigRequest(name=self.model), timeout=self.connect_timeout
            )
            node.interface = Interface.from_config(resp.config)
        return node.interface

    async def interface(self) -> Interface:
        """The entry model's interface from the first node that answers."""
        for node in self.nodes:
            if node.interface is not None:
                return node.interface
        last = None
        now = time.monotonic()
        for node in sorted(self.nodes, key=lambda n: not n.healthy(now)):
            try:
                return await self._interface(node)
            except Exception as exc:
                last = exc
                self.mark_failed(node)
        raise APIError(
            503, "no model server answered for this model; retry shortly", code="upstream_unavailable",
            detail=f"no Triton node answered ModelConfig for {self.model!r}: {last}",
        )

    async def ready(self) -> dict[str, bool]:
        out = {}
        for node in self.nodes:
            try:
                resp = await node.connect().ModelReady(
                    service_pb2.ModelReadyRequest(name=self.model), timeout=self.connect_timeout
                )
                out[node.url] = bool(resp.ready)
            except Exception:
                out[node.url] = False
        return out

    def _open(self, node: Node, fields: dict, request_id: str, fresh: bool = False) -> Opened:
        """Send the request (node.interface known) on a stream of the node that an ended request left open, or
        on a new one (``fresh``: always a new one)."""
        request = node.interface.build(fields)
        request.id = request_id
        key = request_id or f"anonymous-{id(fields)}"
        node.inflight += 1
        node.active[key] = (time.monotonic(), time.time())
        keep = self.reuse_streams and node.reuse
        if keep:
            request.parameters[_EMPTY_FINAL].bool_param = True
        kept = None
        while keep and node.idle and not fresh and kept is None:
            kept = node.idle.pop()
            if kept.done():  # ended while idle (the node restarted, the connection broke)
                kept = None
        opened = Opened(node, key, request, keep, kept)
        self._changed()
        return opened

    def _close(self, opened: Opened):
        node = opened.node
        node.inflight -= 1
        node.active.pop(opened.key, None)
        if opened.reusable() and len(node.idle) < MAX_IDLE_STREAMS:
            node.idle.append(opened.call)
        else:
            # A request that has not ended (its client left, its node failed): cancelling its stream cancels it
            # in Triton and frees its slot.
            opened.cancel()
        self._changed()

    def generate(self, fields: dict, request_id: str = "") -> "Upstream":
        """The request's pieces from one node, failing over to the next while nothing has been produced.
        Sent to the first node at once when its interface is known: the request is on its way to Triton
        before the caller's next await (the HTTP response's headers and first chunk go out meanwhile)."""
        attempts = self._order()
        if not attempts:
            raise APIError(503, "every Triton node is drained (a rolling change is under way)", code="upstream_unavailable")
        return Upstream(self, attempts, fields, request_id)

    async def close(self):
        for node in self.nodes:
            while node.idle:
                node.idle.pop().cancel()
            if node.channel is not None:
                await node.channel.close()


class Upstream:
    """One request's stream of :class:`Piece` (see :meth:`Pool.generate`); ``aclose`` cancels it in Triton,
    also when it was opened and never read (the client left before its response began)."""

    def __init__(self, pool: Pool, attempts: list[Node], fields: dict, request_id: str):
        self.pool = pool
        self.attempts = attempts
        self.fields = fields
        self.request_id = request_id
        first = attempts[0]
        self._opened = pool._open(first, fields, request_id) if first.interface is not None else None
        self._pieces = self._run()

    def __aiter__(self):
        return self

    def __anext__(self):
        return self._pieces.__anext__()

    async def aclose(self):
        await self._pieces.aclose()
        if self._opened is not None:  # never read: _run did not take it over
            opened, self._opened = self._opened, None
            self.pool._close(opened)

    async def _run(self) -> AsyncIterator[Piece]:
        pool = self.pool
        last_error = None
        for node in self.attempts:
            produced = False
            opened, self._opened = self._opened, None
            fresh = False
            while True:
                retry = False
                try:
                    if opened is None:
                        await pool._interface(node)
                        opened = pool._open(node, self.fields, self.request_id, fresh=fresh)
                    async for response in opened:
                        if response.error_message:
                            # Before any token it is this request's fault (the runtime validates each request):
                            # the runtime's message says what to change. After, the generation broke: the
                            # client gets a stable message, the log the runtime's.
                            detail = f"Triton node {node.url}: {response.error_message}"
                            if produced:
                                raise APIError(
                                    502, "the model server failed while generating this response",
                                    code="upstream_error", detail=detail,
                                )
                            raise APIError(
                                400, f"Triton: {response.error_message}", code="upstream_error", detail=detail
                            )
                        if not response.infer_response.outputs:
                            continue  # an empty final response: the request's end
                        piece = _decode_piece(response.infer_response)
                        produced = True
                        yield piece
                    node.failures = 0
                    return
                except APIError:
                    raise
                except (asyncio.CancelledError, GeneratorExit):
                    raise
                except Exception as exc:
                    if not isinstance(exc, _NODE_FAILURES):
                        raise
                    if opened is not None and opened.reused and not produced:
                        # A stream kept open from an earlier request may have died with a restart of the node
                        # since, which says nothing of the node now: a new stream on it is tried first.
                        retry = True
                    else:
                        pool.mark_failed(node)
                        last_error = exc
                        if produced:
                            raise APIError(
                                502, "the model server failed mid-stream; the response is incomplete",
                                code="upstream_failed", detail=f"Triton node {node.url} failed mid-stream: {exc}",
                            ) from exc
                finally:
                    if opened is not None:
                        pool._close(opened)
                        opened = None
                if not retry:
                    break
                fresh = True
        raise APIError(
            503, "no model server could take the request; retry shortly", code="upstream_unavailable",
            detail=f"no Triton node could take the request: {last_error}",
        )


def read_drain_file(path: str) -> list[str]:
    """The drained node addresses in the gateway's drain file; none when the file does not exist.

    The file is written by the ``triton_fleet_drain`` Ansible module: ``{"version": 1, "drained":
    {"<address>": {"host": ..., "since": ..., "reason": ...}}}``. A file that cannot be read raises
    ValueError (the caller keeps its current drain set: a broken file never un-drains a node).
    """
    if not path:
        return []
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read the drain file {path}: {exc}") from exc
    drained = data.get("drained") if isinstance(data, dict) else None
    if not isinstance(drained, dict):
        raise ValueError(f"drain file {path} has no 'drained' object")
    return sorted(drained)
