"""roles/nginx_exporter/files/gateway.mtail run by Debian's mtail over gateway access-log lines.

The JSON lines use roles/nginx_gateway's ngw_json log_format; one line is NGINX's combined format.
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "roles" / "nginx_exporter" / "files" / "gateway.mtail"


def line(status, upstream_time=""):
    return (
        '{"time":"2026-12-02T12:00:00+00:00","request_id":"r","remote_addr":"10.0.0.1","method":"POST",'
        '"uri":"/v2/models/qwen3/generate","proto":"HTTP/1.1",'
        f'"status":{status},"bytes_sent":10,"request_length":30,"request_time":0.5,'
        f'"upstream_time":"{upstream_time}","upstream":"","sub":"","class":"","model":"qwen3","auth_error":"",'
        '"limit_req":"","ua":"curl"}'
    )


def run_mtail(tmp_path, lines):
    mtail = shutil.which("mtail")
    if not mtail:
        pytest.fail("mtail not found: install Debian's mtail package (listed in tools/host-packages.txt)")
    progs = tmp_path / "progs"
    progs.mkdir()
    shutil.copy(PROGRAM, progs / PROGRAM.name)
    log = tmp_path / "access.log"
    log.write_text("\n".join(lines) + "\n")
    res = subprocess.run(
        [
            mtail,
            "--one_shot",
            "--one_shot_format=prometheus",
            "--progs",
            str(progs),
            "--logs",
            str(log),
            "--address",
            "127.0.0.1",
            "--port",
            "0",
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    samples = {}
    for m in re.finditer(r"^(\w+)\{([^}]*)\} (\S+)$", res.stdout, re.M):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
        labels.pop("prog", None)
        samples[(m.group(1), tuple(sorted(labels.items())))] = float(m.group(3))
    return samples


def test_status_counts_and_upstream_histogram(tmp_path):
    s = run_mtail(
        tmp_path,
        [
            line(200, "0.410"),
            line(200, "0.090"),
            line(401),
            line(429),
            line(502, "3.001, 0.002"),
            '10.0.0.2 - - [02/Dec/2026:12:00:04 +0000] "GET /healthz HTTP/1.1" 503 2 "-" "curl/7.88"',
        ],
    )
    resp = "triton_fleet_gateway_http_responses_total"
    assert s[(resp, (("status", "200"),))] == 2
    assert s[(resp, (("status", "401"),))] == 1
    assert s[(resp, (("status", "429"),))] == 1
    assert s[(resp, (("status", "502"),))] == 1
    assert s[(resp, (("status", "503"),))] == 1  # combined format
    b = "triton_fleet_gateway_upstream_seconds_bucket"
    assert s[(b, (("le", "0.1"),))] == 1
    assert s[(b, (("le", "0.5"),))] == 2
    assert s[(b, (("le", "5"),))] == 3  # the first of "3.001, 0.002" (the failed-over attempt)
    assert s[(b, (("le", "+Inf"),))] == 3


def test_lines_without_status_count_nothing(tmp_path):
    s = run_mtail(tmp_path, ["garbage", '{"uri":"/x"}'])
    assert not [k for k in s if k[0] == "triton_fleet_gateway_http_responses_total"]
