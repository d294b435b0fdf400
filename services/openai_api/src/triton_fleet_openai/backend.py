"""Triton side: the entry model's tensors, request building, and the node pool over gRPC streaming.

The tensors are read from the model's own config (``ModelConfig`` over gRPC) on first use of a node,
so the service follows whatever the serving profile rendered (transformers runtime, the TRT-LLM
ensemble, the LLM API model) without a copy of their names: :data:`LOGICAL` lists, per request
field, the tensor names the runtimes use, first match wins.

Pool semantics are the gateway's (NGINX ``least_conn`` with passive health): the node with the
fewest requests in flight is picked (round robin among equals); a node whose connection fails is
skipped for ``fail_timeout`` seconds; a request that failed before its first token is retried on
the next node; a request already streaming when its node stops fails alone.

Draining (rolling changes): the gateway host keeps a drain file (addresses of serving nodes taken out
of rotation); :meth:`Pool.set_drained` is called with it at start and on SIGHUP. A drained node gets
no new request, never even as a last resort, while the requests it already has run to their end;
:meth:`Pool.snapshot` lists them per node, so a rolling change can wait for them.
"""

import array
import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator
from typing import Optional

import grpc
import numpy as np
import tritonclient.grpc.aio as grpcclient
from tritonclient.grpc import MAX_GRPC_MESSAGE_SIZE, InferInput, KeepAliveOptions, model_config_pb2
from tritonclient.utils import InferenceServerException

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
    "exclude_input": ("exclude_input_in_output", "sampling_param_exclude_input_from_output"),
    "return_finish_reason": ("return_finish_reason",),
}
REQUIRED = ("prompt", "max_tokens", "stream")
_NUMPY = {
    "BYTES": np.object_,
    "BOOL": np.bool_,
    "INT32": np.int32,
    "INT64": np.int64,
    "UINT64": np.uint64,
    "FP32": np.float32,
    "FP64": np.float64,
}


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

    def build(self, fields: dict) -> list[InferInput]:
        """InferInputs for ``fields`` ({logical: value}); fields the model has no input for are left out
        (the caller refused those it cannot honour)."""
        tensors = []
        for logical, value in fields.items():
            if value is None or logical not in self.inputs:
                continue
            name, dtype, is_list = self.inputs[logical]
            values = list(value) if is_list else [value]
            if dtype == "BYTES":
                arr = np.array([v.encode("utf-8") if isinstance(v, str) else v for v in values], dtype=np.object_)
            else:
                arr = np.array(values, dtype=_NUMPY[dtype])
            if self.batched:
                arr = arr.reshape(1, -1)
            tensor = InferInput(name, list(arr.shape), dtype)
            tensor.set_data_from_numpy(arr)
            tensors.append(tensor)
        return tensors


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


def _decode_piece(result) -> Piece:
    response = result.get_response()
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
                ids = [int(v) for v in result.as_numpy(name).reshape(-1)]
            continue
        if raw is not None:
            values = _bytes_elements(raw)
        else:
            # A server that fills typed contents instead of raw ones: the client library's own reader.
            values = [v if isinstance(v, bytes) else str(v).encode() for v in result.as_numpy(name).reshape(-1)]
        if name == "text_output":
            text = b"".join(values).decode("utf-8", errors="replace")
        elif values:
            finish = values[0].decode("utf-8", errors="replace") or None
    return Piece(text, ids, finish)


async def _one_request(model, inputs, request_id):
    # One request per stream; the stream half-closes after it and Triton ends it after the final response.
    yield {"model_name": model, "inputs": inputs, "request_id": request_id}


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


def _client(url):
    return grpcclient.InferenceServerClient(url=url, channel_args=CHANNEL_ARGS)


class NodeError(Exception):
    """The node could not be reached or broke the stream (as opposed to a refused request)."""


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
        self.client = None
        self.interface: Optional[Interface] = None

    def healthy(self, now: float) -> bool:
        return now >= self.down_until


_UNREACHABLE = (
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNKNOWN,
)


def _is_node_failure(exc: Exception) -> bool:
    if isinstance(exc, grpc.aio.AioRpcError):
        return exc.code() in _UNREACHABLE
    if isinstance(exc, InferenceServerException):
        status = (exc.status() or "").upper()
        return any(s in status for s in ("UNAVAILABLE", "DEADLINE_EXCEEDED", "StatusCode.CANCELLED".upper()))
    return isinstance(exc, (OSError, ConnectionError))


class Pool:
    def __init__(self, urls: list[str], model: str, fail_timeout: float = 10.0, connect_timeout: float = 5.0):
        if not urls:
            raise ValueError("no Triton nodes configured (triton_nodes is empty)")
        self.nodes = [Node(u) for u in urls]
        self.model = model
        self.fail_timeout = fail_timeout
        self.connect_timeout = connect_timeout
        self._rr = itertools.count()
        # Called with the pool after each change of its state (shared.SharedNodes.publish, several workers).
        self.on_change = None

    def set_drained(self, addresses) -> list[str]:
        """Take the nodes at these addresses (or host:port URLs) out of rotation, put every other one back;
        the drained nodes' URLs."""
        wanted = set(addresses)
        for node in self.nodes:
            node.drained = node.address in wanted or node.url in wanted
        self._changed()
        return [n.url for n in self.nodes if n.drained]

    def snapshot(self) -> list[dict]:
        """Per node: drained or not, and the requests running on it (for a drain to wait on)."""
        return merge_snapshots([node_states(self)])

    def _changed(self):
        if self.on_change is not None:
            self.on_change(self)

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
        if node.client is None:
            node.client = _client(node.url)
        if node.interface is None:
            resp = await node.client.get_model_config(self.model, client_timeout=self.connect_timeout)
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
        raise APIError(503, f"no Triton node answered for model {self.model!r}: {last}", code="upstream_unavailable")

    async def ready(self) -> dict[str, bool]:
        out = {}
        for node in self.nodes:
            try:
                if node.client is None:
                    node.client = _client(node.url)
                out[node.url] = bool(await node.client.is_model_ready(self.model, client_timeout=self.connect_timeout))
            except Exception:
                out[node.url] = False
        return out

    async def generate(self, fields: dict, request_id: str = "") -> AsyncIterator[Piece]:
        """Stream pieces from one node; failover to the next while nothing has been produced yet."""
        attempts = self._order()
        if not attempts:
            raise APIError(503, "every Triton node is drained (a rolling change is under way)", code="upstream_unavailable")
        last_error = None
        for node in attempts:
            produced = False
            node.inflight += 1
            key = request_id or f"anonymous-{id(fields)}"
            node.active[key] = (time.monotonic(), time.time())
            self._changed()
            call = None
            try:
                iface = await self._interface(node)
                inputs = iface.build(fields)

                call = node.client.stream_infer(_one_request(self.model, inputs, request_id))
                async for result, error in call:
                    if error is not None:
                        # Before any token it is this request's fault (the runtime validates each request);
                        # after, the generation broke.
                        status = 502 if produced else 400
                        raise APIError(status, f"Triton: {error.message()}", code="upstream_error")
                    piece = _decode_piece(result)
                    produced = True
                    yield piece
                node.failures = 0
                return
            except APIError:
                raise
            except (asyncio.CancelledError, GeneratorExit):
                raise
            except Exception as exc:
                if not _is_node_failure(exc) and not isinstance(exc, InferenceServerException):
                    raise
                self.mark_failed(node)
                last_error = exc
                if produced:
                    raise APIError(
                        502, f"Triton node {node.url} failed mid-stream: {exc}", code="upstream_failed"
                    ) from exc
            finally:
                node.inflight -= 1
                node.active.pop(key, None)
                self._changed()
                if call is not None:
                    call.cancel()  # no-op once the stream is complete; frees the slot when the client left
        raise APIError(503, f"no Triton node could take the request: {last_error}", code="upstream_unavailable")

    async def close(self):
        for node in self.nodes:
            if node.client is not None:
                await node.client.close()


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
