"""A stop (SIGTERM, as systemd sends it to the main process, or SIGINT) that arrives at any point of the
service's start-up stops the whole process tree well within the unit's stop timeout.

The service runs as its unit runs it, with a pause at one named point of its start-up (startup_points.py); the
test sends the signal while it is there and waits for the supervisor and every worker to be gone. Each point
once with one process (``workers: 1``) and with a supervisor and two workers, plus a worker being replaced.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from conftest import free_port

HERE = Path(__file__).resolve().parent
MODEL = "qwen3-tiny"
# Half the unit's TimeoutStopSec (openai_api_stop_timeout, 120 s): nothing runs yet that needs time to finish,
# so a stop at start-up is a matter of a second here; the margin is for a loaded 2-core test machine (one case
# went past 20 s there with a lab converge beside it). A swallowed stop never ends by itself, so the bound still
# tells the two apart.
STOP_BOUND_S = 60.0


def _free_ports(count):
    import socket

    for _ in range(50):
        port = free_port()
        try:
            for p in range(port + 1, port + count):
                with socket.create_server(("127.0.0.1", p)):
                    pass
            return port
        except OSError:
            continue
    raise AssertionError(f"no {count} consecutive free ports")


def _group(pgid):
    """The pids still in process group ``pgid`` (the service's session: the supervisor and its workers, which
    keep the group after the supervisor exits)."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.add(int(entry))
    return found


def _until(what, check, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _answers(url):
    try:
        return httpx.get(url + "/health", timeout=2).status_code in (200, 503)
    except httpx.HTTPError:
        return False


def _start(tmp_path, tokenizer_dir, workers, point, skip=0):
    port = _free_ports(workers)
    cfg = {"listen_address": "127.0.0.1", "port": port, "metrics_address": "127.0.0.1", "metrics_port": free_port(),
           "model": {"served_name": MODEL, "entry_model": MODEL, "runtime": "transformers", "context_length": 1024,
                     "max_input_len": 900, "max_output_len": 256},
           # No Triton node answers there: start-up and /health (503) do not need one.
           "tokenizer_dir": tokenizer_dir, "triton_nodes": [f"127.0.0.1:{free_port()}"],
           "drain_file": str(tmp_path / "drained-nodes.json"), "workers": workers,
           "state_dir": str(tmp_path / "state")}
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    log = tmp_path / "points.log"
    env = dict(os.environ, STARTUP_POINTS_LOG=str(log))
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    # Its own session: the test finds every process of the service by its process group.
    proc = subprocess.Popen([sys.executable, str(HERE / "startup_points.py"), point or "none", str(skip), "--", "--config", str(tmp_path / "cfg.json")],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    urls = [f"http://127.0.0.1:{port + i}" for i in range(workers)]
    return proc, log, urls


def _stops(proc, sig, out_of):
    """Send ``sig`` to the service's main process; its whole tree must be gone within STOP_BOUND_S."""
    start = time.monotonic()
    proc.send_signal(sig)
    try:
        proc.wait(STOP_BOUND_S)
        _until("the workers to exit", lambda: not _group(proc.pid), STOP_BOUND_S - (time.monotonic() - start))
    except (subprocess.TimeoutExpired, AssertionError):
        left = _group(proc.pid)
        os.killpg(proc.pid, signal.SIGKILL)
        out = proc.communicate(timeout=10)[0]
        pytest.fail(f"{out_of}: still running {STOP_BOUND_S:.0f} s after {signal.Signals(sig).name}: "
                    f"{'main process, ' if proc.poll() is None or proc.pid in left else ''}pids {sorted(left)}\n{out}")
    return time.monotonic() - start


SINGLE = ["before-app", "after-app", "uvicorn-startup", None]
SUPERVISED = ["supervisor-start", "fork-before", "fork-parent", "fork-child", "before-app", "after-app",
              "uvicorn-startup", None]


@pytest.mark.parametrize(
    "workers,point,sig",
    [(1, p, signal.SIGTERM) for p in SINGLE]
    + [(2, p, signal.SIGTERM) for p in SUPERVISED]
    + [(1, "after-app", signal.SIGINT), (2, "fork-parent", signal.SIGINT), (2, "fork-child", signal.SIGINT)],
    ids=lambda v: str(v) if not isinstance(v, signal.Signals) else v.name,
)
def test_a_stop_at_any_point_of_the_start_up_stops_every_process(tmp_path, tokenizer_dir, workers, point, sig):
    """``None``: once every worker serves (the stop the other tests make)."""
    proc, log, urls = _start(tmp_path, tokenizer_dir, workers, point)
    try:
        if point:
            _until(f"the service at {point}", lambda: log.exists() and log.read_text().strip(), 60)
        else:
            _until("the service to serve", lambda: all(_answers(u) for u in urls), 60)
        _stops(proc, sig, f"{workers} worker(s), {sig.name} at {point or 'serving'}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@pytest.mark.parametrize("point", ["fork-before", "fork-parent", "fork-child", "after-app"])
def test_a_stop_while_a_worker_is_replaced_stops_every_process(tmp_path, tokenizer_dir, point):
    # Skip the two workers' first start: the pause is in the replacement (or in the supervisor replacing it).
    proc, log, urls = _start(tmp_path, tokenizer_dir, 2, point, skip=2)
    try:
        _until("the service to serve", lambda: all(_answers(u) for u in urls), 60)
        assert not log.exists() or not log.read_text().strip()
        workers = _group(proc.pid) - {proc.pid}
        os.kill(min(workers), signal.SIGKILL)
        _until(f"the replacement at {point}", lambda: log.exists() and log.read_text().strip(), 60)
        _stops(proc, signal.SIGTERM, f"SIGTERM at {point} of a replacement worker")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
