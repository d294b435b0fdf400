"""tools/check-dashboard-queries against a real Prometheus (Debian's binary) on 127.0.0.1.

Prometheus scrapes a loopback HTTP server that serves the real Triton metrics page captured on an H200
(tests/fixtures), so Triton panels must have data and DCGM / gateway panels must be listed with a reason.
"""

import http.server
import importlib.machinery
import importlib.util
import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "triton-metrics-h200-python-backend.txt"


def load_tool():
    path = ROOT / "tools" / "check-dashboard-queries"
    loader = importlib.machinery.SourceFileLoader("check_dashboard_queries", str(path))
    spec = importlib.util.spec_from_loader("check_dashboard_queries", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


tool = load_tool()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_metric_names_ignore_functions_labels_and_numbers():
    expr = (
        'sum by (model) (rate(nv_inference_queue_duration_us{host=~".*"}[5m])) / clamp_min(sum by (model) '
        "(rate(nv_inference_request_success[5m])), 1e-9) / 1e6 or vector(0)"
    )
    assert tool.metric_names(expr) == ["nv_inference_queue_duration_us", "nv_inference_request_success"]
    assert tool.metric_names("gateway:http_5xx:ratio_rate5m > 0.05") == ["gateway:http_5xx:ratio_rate5m"]


def test_substitute_expands_variables_like_all():
    assert tool.substitute('rate(x{host=~"$host",gpu=~"${gpu}"}[$__rate_interval])', "2m") == (
        'rate(x{host=~".*",gpu=~".*"}[2m])'
    )


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("http://127.0.0.1:9090", True),
        ("http://localhost:1", True),
        ("http://[::1]:9090", True),
        ("http://10.213.0.13:9090", False),
        ("http://example.com", False),
    ],
)
def test_only_loopback_urls(url, ok):
    assert tool.is_loopback(url) is ok


def test_refuses_remote_url(capsys):
    with pytest.raises(SystemExit) as exc:
        tool.main(["--url", "http://10.213.0.13:9090"])
    assert exc.value.code == 2
    assert "not a loopback address" in capsys.readouterr().err


def test_unreachable_prometheus_exits_2(capsys):
    assert tool.main(["--url", f"http://127.0.0.1:{free_port()}", "--timeout", "2"]) == 2
    assert "cannot reach Prometheus" in capsys.readouterr().err


@pytest.fixture(scope="module")
def live_prometheus(tmp_path_factory):
    binary = shutil.which("prometheus")
    if not binary:
        pytest.fail("prometheus not found: install Debian's `prometheus` package (tools/host-packages.txt)")
    body = FIXTURE.read_bytes()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    tmp = tmp_path_factory.mktemp("prom")
    port = free_port()
    (tmp / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: triton\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{server.server_address[1]}'], "
        "labels: {host: node1, group: lab_cpu, gpu_sku: h200}}]\n"
    )
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={tmp / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                q = urllib.request.urlopen(f"{url}/api/v1/query?query=count(nv_inference_request_success)", timeout=2)
                if json.load(q)["data"]["result"]:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        else:
            pytest.fail("Prometheus did not scrape the Triton fixture within 30 s")
        time.sleep(2)  # a second scrape so rate() has two samples
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        server.shutdown()


def test_live_panels_with_and_without_data(live_prometheus, capsys):
    assert tool.main(["--url", live_prometheus, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    by_panel = {}
    for r in rows:
        by_panel.setdefault((r["dashboard"], r["panel"]), []).append(r)

    def status(dash, panel, ref="A"):
        return next(r for r in by_panel[(dash, panel)] if r["refId"] == ref)

    # Real Triton metrics -> data.
    assert status("Triton fleet / Overview", "Serving nodes exporting Triton metrics")["status"] == "data"
    assert status("Triton fleet / Overview", "Failures by reason")["status"] == "data"
    assert status("Triton fleet / GPUs", "GPU utilisation (Triton)")["status"] == "data"
    # No DCGM exporter, no histogram, no gateway: empty with the reason.
    dcgm = status("Triton fleet / GPUs", "Temperature")
    assert dcgm["status"] == "no data" and "no NVIDIA GPU" in dcgm["reason"] and dcgm["known"]
    ttft = status("Triton fleet / Overview", "Time to first token p50 / p99")
    assert "histogram_latencies=true" in ttft["reason"]
    assert "nginx exporter" in status("Triton fleet / Gateway", "NGINX up")["reason"]
    assert all(r["status"] != "error" for r in rows)


def test_strict_fails_on_unexplained_gaps(live_prometheus, capsys, tmp_path):
    # A dashboard whose metric has no known reason to be missing.
    dash = {"title": "t", "panels": [{"title": "p", "targets": [{"refId": "A", "expr": "made_up_metric_total"}]}]}
    f = tmp_path / "dash.json"
    f.write_text(json.dumps(dash))
    assert tool.main(["--url", live_prometheus, "--dashboards", str(f)]) == 0
    assert tool.main(["--url", live_prometheus, "--dashboards", str(f), "--strict"]) == 1
    assert "made_up_metric_total absent" in capsys.readouterr().out
