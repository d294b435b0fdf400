"""Stand-in for a Triton node's gRPC service (tests, bench/openai and the whole-fleet scenario's scripted-model
check only, never part of a deployment).

It serves one decoupled model whose ``ModelConfig`` is a real rendered ``config.pbtxt`` (e.g. the
golden transformers repository), and answers ``ModelStreamInfer`` from a script: a callable
``script(inputs) -> [(text, [ids]), ...]`` whose pieces are streamed ``interval`` seconds apart (a string instead:
the request's error message, as a backend's refusal),
the last one with ``finish_reason``. It records every request's inputs, how many are in flight and
how many the client cancelled, which is what the OpenAI service's tests need to see.

As Triton does, it runs the requests of one stream at once, marks each response with
``triton_final_response`` and puts the request's id on an error. The final flag comes with the last piece
(as the transformers runtime sends it), or with ``final_alone`` on its own after it, as a decoupled model
may send it; Triton passes such a flag on as an empty response only to a request that asked for it
(``triton_enable_empty_final_response``), so the stand-in does the same. ``flags`` false leaves the flag
out, as a Triton older than it would.
"""

import asyncio
import json
import threading

import grpc
import numpy as np
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2, service_pb2, service_pb2_grpc
from tritonclient.utils import deserialize_bytes_tensor, serialize_byte_tensor, triton_to_np_dtype


def load_config(path):
    with open(path, encoding="utf-8") as fh:
        return text_format.Parse(fh.read(), model_config_pb2.ModelConfig())


def decode_inputs(request):
    out = {}
    for i, tensor in enumerate(request.inputs):
        raw = request.raw_input_contents[i]
        if tensor.datatype == "BYTES":
            arr = deserialize_bytes_tensor(raw)
            out[tensor.name] = [v.decode("utf-8") for v in arr.reshape(-1)]
        else:
            arr = np.frombuffer(raw, dtype=triton_to_np_dtype(tensor.datatype))
            out[tensor.name] = arr.reshape(-1).tolist()
        if len(out[tensor.name]) == 1 and tensor.name not in ("stop_words", "sampling_param_stop"):
            out[tensor.name] = out[tensor.name][0]
    return out


_FINAL = "triton_final_response"
_EMPTY_FINAL = "triton_enable_empty_final_response"


def _empty_final(model, request_id):
    resp = service_pb2.ModelInferResponse(model_name=model, id=request_id)
    resp.parameters[_FINAL].bool_param = True
    return service_pb2.ModelStreamInferResponse(infer_response=resp)


def _response(model, request_id, text, ids, finish, *, with_ids=True, final=False):
    resp = service_pb2.ModelInferResponse(model_name=model, id=request_id)
    if final is not None:  # None: a Triton too old to flag a request's end
        resp.parameters[_FINAL].bool_param = final
    tensors = [("text_output", "BYTES", serialize_byte_tensor(np.array([text.encode("utf-8")], dtype=np.object_)), [1])]
    if with_ids:
        tensors.append(("output_ids", "INT32", np.array(ids, dtype=np.int32).tobytes(), [len(ids)]))
    if finish is not None:
        tensors.append(("finish_reason", "BYTES", serialize_byte_tensor(np.array([finish.encode()], dtype=np.object_)), [1]))
    for name, dtype, raw, shape in tensors:
        out = resp.outputs.add()
        out.name, out.datatype = name, dtype
        out.shape.extend(shape)
        if isinstance(raw, np.ndarray):  # serialize_byte_tensor gives a 0-d object array holding bytes
            resp.raw_output_contents.append(bytes(raw.item() if raw.dtype == np.object_ else raw.tobytes()))
        else:
            resp.raw_output_contents.append(bytes(raw))
    return service_pb2.ModelStreamInferResponse(infer_response=resp)


class Servicer(service_pb2_grpc.GRPCInferenceServiceServicer):
    def __init__(self, config, script, interval=0.0, with_ids=True, final_alone=False):
        self.config = config
        self.final_alone = final_alone
        self.flags = True  # False: no triton_final_response on responses (a Triton older than the flag)
        self.script = script
        self.interval = interval
        self.with_ids = with_ids
        self.requests = []
        self.inflight = 0
        self.cancelled = 0
        self.completed = 0
        self.streams = 0  # ModelStreamInfer calls opened
        self.ready = True

    async def ServerReady(self, request, context):
        return service_pb2.ServerReadyResponse(ready=self.ready)

    async def ModelReady(self, request, context):
        return service_pb2.ModelReadyResponse(ready=self.ready and request.name == self.config.name)

    async def ModelConfig(self, request, context):
        if request.name != self.config.name:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"Request for unknown model: '{request.name}'")
        return service_pb2.ModelConfigResponse(config=self.config)

    async def ModelStreamInfer(self, request_iterator, context):
        self.streams += 1
        out = asyncio.Queue()
        running = {}  # request id -> its task
        model = self.config.name

        async def generate(request, inputs, pieces):
            self.inflight += 1
            try:
                for i, (text, ids) in enumerate(pieces):
                    if self.interval:
                        await asyncio.sleep(self.interval)
                    finish = None
                    last = i == len(pieces) - 1
                    if last:
                        finish = "length" if sum(len(p[1]) for p in pieces) >= int(inputs.get("max_tokens", 1 << 30)) else "stop"
                    final = (last and not self.final_alone) if self.flags else None
                    out.put_nowait(_response(model, request.id, text, ids, finish, with_ids=self.with_ids, final=final))
                if self.final_alone and request.parameters[_EMPTY_FINAL].bool_param:
                    out.put_nowait(_empty_final(model, request.id))
                self.completed += 1
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
            finally:
                self.inflight -= 1
                if running.get(request.id) is asyncio.current_task():
                    del running[request.id]

        async def consume():
            try:
                await read_requests()
            finally:
                out.put_nowait(None)

        async def read_requests():
            async for request in request_iterator:
                inputs = decode_inputs(request)
                self.requests.append(inputs)
                pieces = self.script(inputs)
                if isinstance(pieces, str):  # the script refuses the request, as Triton's backends do
                    error = service_pb2.ModelStreamInferResponse(error_message=pieces)
                    error.infer_response.id = request.id
                    out.put_nowait(error)
                    continue
                running[request.id] = asyncio.ensure_future(generate(request, inputs, pieces))
            while running:  # the client half-closed: the stream ends after its requests
                await asyncio.gather(*running.values(), return_exceptions=True)

        consumer = asyncio.ensure_future(consume())
        try:
            while True:
                item = await out.get()
                if item is None:
                    return
                yield item
        finally:  # the stream was cancelled or broke: so are its requests
            consumer.cancel()
            for task in list(running.values()):
                task.cancel()
            await asyncio.gather(consumer, *running.values(), return_exceptions=True)


class StandinNode:
    """A stand-in Triton node on 127.0.0.1:<port> (a free one by default), in its own event loop thread."""

    def __init__(self, config, script, interval=0.0, with_ids=True, port=0):
        self.servicer = Servicer(config, script, interval, with_ids)
        self.loop = asyncio.new_event_loop()
        self.server = None
        self.port = port
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def start(self):
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(10)
        return self

    async def _start(self):
        self.server = grpc.aio.server()
        service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(self.servicer, self.server)
        self.port = self.server.add_insecure_port(f"127.0.0.1:{self.port}")
        await self.server.start()

    @property
    def url(self):
        return f"127.0.0.1:{self.port}"

    def stop(self, grace=None):
        """Stops the node (in-flight streams are aborted, as when Triton's process dies)."""
        asyncio.run_coroutine_threadsafe(self.server.stop(grace), self.loop).result(10)

    def close(self):
        try:
            self.stop()
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(5)


def pieces_from_text(tokenizer, text, per_piece=1):
    """Split ``text`` into streamed pieces of ``per_piece`` tokens with the real tokenizer."""
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    out, sent = [], ""
    for i in range(0, len(ids), per_piece):
        so_far = tokenizer.decode(ids[: i + per_piece], skip_special_tokens=False)
        out.append((so_far[len(sent) :], ids[i : i + per_piece]))
        sent = so_far
    return out


def main(argv=None):
    """Serve a stand-in node until killed: ``--text`` streamed token by token (real tokenizer) and
    ended with finish reason "stop", cut at the request's max_tokens ("length"); with ``--repeat`` the
    text is repeated up to max_tokens, for a load of a known length."""
    import argparse

    from tokenizers import Tokenizer

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--config", required=True, help="config.pbtxt of the model to pose as")
    ap.add_argument("--tokenizer", required=True, help="tokenizer.json")
    ap.add_argument("--listen", default="127.0.0.1:8001")
    ap.add_argument("--text", default="Hello from the stand-in Triton node.")
    ap.add_argument("--interval", type=float, default=0.0, help="seconds between streamed pieces")
    ap.add_argument("--repeat", action="store_true", help="repeat the text up to each request's max_tokens")
    ap.add_argument("--turns", help="JSON file {marker: [turn0, turn1, ...]}: a prompt holding the marker and i tool "
                                    "results is answered with turn i (a scripted Qwen3-format model); other prompts "
                                    "get --text")
    args = ap.parse_args(argv)
    tok = Tokenizer.from_file(args.tokenizer)
    pieces = pieces_from_text(tok, args.text)
    turns = {}
    if args.turns:
        with open(args.turns, encoding="utf-8") as fh:
            turns = json.load(fh)

    def script(inputs):
        n = int(inputs.get("max_tokens") or inputs.get("sampling_param_max_tokens") or len(pieces))
        prompt = str(inputs.get("text_input", ""))
        for marker, texts in turns.items():
            if marker in prompt:
                text = texts[min(prompt.count("<tool_response>"), len(texts) - 1)]
                return pieces_from_text(tok, text)[:n]
        if args.repeat and n > len(pieces):
            return [pieces[i % len(pieces)] for i in range(n)]
        return pieces[:n]

    servicer = Servicer(load_config(args.config), script, args.interval)

    async def serve():
        server = grpc.aio.server()
        service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(servicer, server)
        server.add_insecure_port(args.listen)
        await server.start()
        print(f"stand-in Triton node for {servicer.config.name} on {args.listen}", flush=True)
        await server.wait_for_termination()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
