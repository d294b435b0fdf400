"""bench/openai/run's own parts that its figures depend on: the client processes' one least-conn view of the
service's workers, and the lean HTTP client of the /v1 path."""

import asyncio
import importlib.machinery
import importlib.util
import json
import multiprocessing
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    loader = importlib.machinery.SourceFileLoader("bench_openai_run", str(ROOT / "bench" / "openai" / "run"))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module


@pytest.mark.parametrize("concurrency", [16, 64])
def test_client_processes_share_one_least_conn_view(bench, concurrency):
    # 7 client processes, 8 workers, every request of the round started at once (the stand-in's bursts): one
    # shared view spreads them evenly, as NGINX's least_conn with its shared zone does.
    counts = multiprocessing.get_context("spawn").Array("i", 9)
    workers = [f"http://127.0.0.1:{9000 + i}/v1/chat/completions" for i in range(8)]
    processes = [bench.LeastConn(workers, shared=counts) for _ in range(7)]
    sent = dict.fromkeys(workers, 0)
    for i, balancer in enumerate(processes):
        for _ in range(concurrency // 7 + (i < concurrency % 7)):
            sent[balancer.acquire()] += 1
    assert sorted(sent.values()) == [concurrency // 8] * 8
    for url, n in sent.items():
        for _ in range(n):
            processes[-1].release(url)
    assert list(counts[:8]) == [0] * 8


def test_least_conn_takes_the_fewest_in_flight_ties_in_turn(bench):
    balancer = bench.LeastConn(["a", "b", "c"])
    assert [balancer.acquire() for _ in range(3)] == ["b", "c", "a"]
    balancer.release("a")
    assert balancer.acquire() == "a"  # the fewest in flight, though the turn is at "b"


def _event(text):
    return b"data: " + json.dumps({"choices": [{"delta": {"content": text}}]}).encode() + b"\n\n"


async def _sse_server(accepted, requests):
    """A keep-alive HTTP/1.1 server: 200 and three SSE events for a body holding "ok", else 400; every event is
    split over two chunks, as a server's writes may split it."""

    async def handle(reader, writer):
        accepted.append(writer.get_extra_info("peername"))
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            body = await reader.readexactly(int(re.search(rb"Content-Length: (\d+)", head).group(1)))
            requests.append((head, body))
            ok = b"ok" in body
            writer.write(b"HTTP/1.1 " + (b"200 OK" if ok else b"400 Bad Request") +
                         b"\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            for event in (_event("Hello"), _event(" world"), b"data: [DONE]\n\n") if ok else (b'{"error": {}}',):
                for part in (event[:7], event[7:]):
                    writer.write(b"%x\r\n%s\r\n" % (len(part), part))
                await writer.drain()
            writer.write(b"0\r\n\r\n")
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


def test_lean_client_streams_events_over_one_kept_connection(bench):
    async def main():
        accepted, requests, events = [], [], []
        server = await _sse_server(accepted, requests)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/chat/completions"
        client = bench.LeanClient()
        try:
            first = await client.post(url, b'{"ok": 1}', {"X-Auth-Sub": "bench"}, events.append)
            second = await client.post(url, b'{"ok": 2}', {}, events.append)
            refused = await client.post(url, b'{"no": 3}', {}, events.append)
        finally:
            await client.aclose()
            server.close()
            await server.wait_closed()
        return accepted, requests, events, (first, second, refused)

    accepted, requests, events, statuses = asyncio.run(main())
    assert statuses == (200, 200, 400)
    assert len(accepted) == 1, "the client opened a connection per request"
    assert events == [_event("Hello")[:-2], _event(" world")[:-2], b"data: [DONE]"] * 2
    head, body = requests[0]
    assert head.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert b"X-Auth-Sub: bench\r\n" in head and b"Content-Type: application/json\r\n" in head
    assert body == b'{"ok": 1}'


def test_lean_sse_stream_counts_tokens_and_times(bench):
    async def main():
        server = await _sse_server([], [])
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/chat/completions"
        client, run, refused = bench.LeanClient(), bench.Run(), bench.Run()
        try:
            await bench.lean_sse_stream(client, url, {"ok": True}, {}, run, count_tokens=bench.openai_tokens)
            await bench.lean_sse_stream(client, url, {"no": True}, {}, refused, count_tokens=bench.openai_tokens)
        finally:
            await client.aclose()
            server.close()
            await server.wait_closed()
        return run, refused

    run, refused = asyncio.run(main())
    assert (run.tokens, len(run.ttft), len(run.itl), run.errors) == (2, 1, 1, 0)
    assert (refused.tokens, refused.errors) == (0, 1)


@pytest.mark.parametrize("keep,final_alone", [(True, False), (True, True), (False, False)])
def test_direct_client_follows_the_services_stream_policy(bench, keep, final_alone):
    """The direct path keeps its streams as the service does (--stream-per-request: a stream per request for both),
    so that the two paths differ only by the service; each request's end is Triton's final flag, sent on the last
    response or alone after it."""
    from triton_grpc_standin import StandinNode, load_config  # on sys.path: the bench puts it there

    config = load_config(ROOT / "tests" / "golden" / "model_repository" / "transformers" / "qwen3-tiny" / "config.pbtxt")
    pieces = [("a", [1]), ("b", [2]), ("c", [3])]
    node = StandinNode(config, lambda inputs: pieces[: int(inputs["max_tokens"])])
    node.servicer.final_alone = final_alone
    node.start()

    async def main():
        client, run = bench.DirectClient(node.url, keep), bench.Run()
        request = client.request(3)
        for _ in range(3):
            await client.stream(request, run)
        await asyncio.gather(*(client.stream(request, run) for _ in range(2)))
        idle = len(client.idle)
        await client.close()
        return run, idle

    try:
        run, idle = asyncio.run(main())
    finally:
        node.close()
    assert (run.errors, run.tokens, len(run.ttft), len(run.itl)) == (0, 15, 5, 10)
    assert node.servicer.completed == 5
    assert (node.servicer.streams, idle) == ((2, 2) if keep else (5, 0))
