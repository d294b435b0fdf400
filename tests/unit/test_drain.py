"""Drain file and drain wait (module_utils/triton_fleet/drain.py, library/triton_fleet_drain*.py)."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import triton_fleet_drain
import triton_fleet_drain_wait
import triton_fleet_gateway_pools
from engine_modhelper import run_module
from triton_fleet.drain import (
    DrainError,
    apply,
    describe_busy,
    drained_addresses,
    dump_state,
    empty_state,
    nginx_connections,
    parse_pools,
    parse_state,
    pool_ports,
    render_pools,
    service_knows,
    service_requests,
)

SS = """\
0      0      10.215.0.10:45678 10.215.0.11:8001 users:(("nginx",pid=4242,fd=17))
0      0      10.215.0.10:45680 10.215.0.11:8000 users:(("nginx",pid=4243,fd=9))
0      0      10.215.0.10:45690 10.215.0.12:8001 users:(("nginx",pid=4242,fd=18))
0      0      10.215.0.10:50000 10.215.0.11:8001 users:(("triton-fleet-op",pid=77,fd=12))
0      0      10.215.0.10:22 10.215.0.1:50123 users:(("sshd",pid=12,fd=4))
0      0      10.215.0.10:45700 10.215.0.11:8002 users:(("nginx",pid=4242,fd=19))
"""


def test_apply_drain_and_back():
    state, changed = apply(empty_state(), "10.0.0.11", "node1", True, now=1000.0, reason="roll")
    assert changed and drained_addresses(state) == ["10.0.0.11"]
    assert state["drained"]["10.0.0.11"] == {"host": "node1", "since": 1000, "reason": "roll"}
    again, changed = apply(state, "10.0.0.11", "node1", True, now=2000.0, reason="roll")
    assert not changed and again["drained"]["10.0.0.11"]["since"] == 1000  # the drain began then
    back, changed = apply(again, "10.0.0.11", "node1", False, now=3000.0)
    assert changed and drained_addresses(back) == []
    _, changed = apply(back, "10.0.0.11", "node1", False, now=3000.0)
    assert not changed


def test_apply_leaves_the_input_alone_and_needs_an_address():
    state, _ = apply(empty_state(), "a", "", True, now=1.0)
    apply(state, "b", "", True, now=1.0)
    assert drained_addresses(state) == ["a"]
    with pytest.raises(DrainError, match="address is required"):
        apply(state, "", "", True, now=1.0)


def test_parse_state_round_trip_and_errors():
    state, _ = apply(empty_state(), "10.0.0.11", "node1", True, now=5.0)
    assert parse_state(dump_state(state)) == state
    assert parse_state("") == empty_state()
    with pytest.raises(DrainError, match="not JSON"):
        parse_state("{", "/etc/x.json")
    with pytest.raises(DrainError, match="version 1"):
        parse_state('{"drained": []}')
    with pytest.raises(DrainError, match="must be an object"):
        parse_state('{"version": 1, "drained": {"a": 3}}')


def test_nginx_connections_only_nginx_to_the_node_ports():
    conns = nginx_connections(SS, "10.215.0.11", [8000, 8001])
    assert [c["peer"] for c in conns] == ["10.215.0.11:8001", "10.215.0.11:8000"]
    assert conns[0]["pids"] == [4242]
    assert nginx_connections(SS, "10.215.0.13", [8000, 8001]) == []


def test_nginx_connections_with_the_state_column_and_ipv6():
    text = 'ESTAB 0 0 [fd00::10]:41000 [fd00::11]:8001 users:(("nginx",pid=9,fd=3))\n'
    assert nginx_connections(text, "fd00::11", [8001])[0]["pids"] == [9]


def test_service_requests_and_drained_flag():
    doc = {"nodes": [
        {"url": "10.0.0.11:8001", "address": "10.0.0.11", "drained": True,
         "requests": [{"id": "r1", "running_s": 2.5}]},
        {"url": "10.0.0.12:8001", "address": "10.0.0.12", "drained": False, "requests": []},
    ]}
    assert service_requests(doc, "10.0.0.11") == [{"id": "r1", "running_s": 2.5}]
    assert service_knows(doc, "10.0.0.11") is True
    assert service_knows(doc, "10.0.0.12") is False
    assert service_knows(doc, "10.0.0.99") is None
    assert service_requests(None, "10.0.0.11") == []


def test_describe_busy_names_connections_and_requests():
    text = describe_busy("10.0.0.11", nginx_connections(SS, "10.215.0.11", [8001]), [{"id": "r1", "running_s": 9}])
    assert "1 NGINX upstream connection(s)" in text and "nginx pid 4242" in text
    assert "r1 (running 9 s)" in text
    assert describe_busy("a", [], []) == "a: nothing running"


# ---------------------------------------------------------------- the modules


def test_drain_module_writes_checks_and_diffs(tmp_path):
    path = tmp_path / "tf" / "drained-nodes.json"
    res = run_module(triton_fleet_drain, {"path": str(path), "address": "10.0.0.11", "host": "node1"}, check_mode=True)
    assert res["changed"] and res["drained"] == ["10.0.0.11"] and not path.exists()
    res = run_module(triton_fleet_drain, {"path": str(path), "address": "10.0.0.11", "host": "node1"})
    assert res["changed"] and json.loads(path.read_text())["drained"]["10.0.0.11"]["host"] == "node1"
    assert '"10.0.0.11"' in res["diff"]["after"] and res["diff"]["before"] == ""
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    res = run_module(triton_fleet_drain, {"path": str(path), "address": "10.0.0.11"})
    assert not res["changed"]
    res = run_module(triton_fleet_drain, {"path": str(path), "address": "10.0.0.11", "state": "active"})
    assert res["changed"] and res["drained"] == [] and json.loads(path.read_text())["drained"] == {}


def test_drain_module_refuses_a_broken_file_and_leaves_it(tmp_path):
    path = tmp_path / "drained-nodes.json"
    path.write_text("not json")
    res = run_module(triton_fleet_drain, {"path": str(path), "address": "10.0.0.11"})
    assert res["failed"] and "drain file not changed" in res["msg"] and "not JSON" in res["msg"]
    assert path.read_text() == "not json"


class _Service(BaseHTTPRequestHandler):
    doc = {"nodes": []}

    def do_GET(self):  # noqa: N802 (http.server's name)
        body = json.dumps(type(self).doc).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture()
def service():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Service)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()


def _fake_ss(monkeypatch, outputs):
    """ss answers the given outputs one after another (the last one from then on)."""
    calls = []

    def run_command(self, argv, **kwargs):
        calls.append(argv)
        return 0, outputs[min(len(calls), len(outputs)) - 1], ""

    monkeypatch.setattr(triton_fleet_drain_wait.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(triton_fleet_drain_wait.AnsibleModule, "get_bin_path", lambda self, *a, **k: "/usr/bin/ss")
    return calls


def test_drain_wait_returns_once_the_connections_are_gone(monkeypatch, service):
    _Service.doc = {"nodes": [{"address": "10.215.0.11", "drained": True, "requests": []}]}
    calls = _fake_ss(monkeypatch, [SS, SS, ""])
    url = f"http://127.0.0.1:{service.server_address[1]}"
    res = run_module(triton_fleet_drain_wait, {"address": "10.215.0.11", "service_url": url, "interval": 0.01})
    assert not res.get("failed"), res
    assert res["peak"] == {"nginx_connections": 2, "service_requests": 0}
    assert len(calls) == 4  # two busy polls, then two quiet ones (settle)


def test_drain_wait_times_out_naming_what_runs(monkeypatch, service):
    _Service.doc = {"nodes": [{"address": "10.215.0.11", "drained": True,
                               "requests": [{"id": "chatcmpl-1", "running_s": 31.0}]}]}
    _fake_ss(monkeypatch, [""])
    url = f"http://127.0.0.1:{service.server_address[1]}"
    res = run_module(triton_fleet_drain_wait,
                     {"address": "10.215.0.11", "service_url": url, "timeout": 0, "interval": 0.01})
    assert res["failed"] and "did not finish in 0 s" in res["msg"]
    assert "chatcmpl-1 (running 31.0 s)" in res["msg"] and "the node is not changed" in res["msg"]


def test_drain_wait_refuses_a_service_that_was_not_reloaded(monkeypatch, service):
    _Service.doc = {"nodes": [{"address": "10.215.0.11", "drained": False, "requests": []}]}
    _fake_ss(monkeypatch, [""])
    url = f"http://127.0.0.1:{service.server_address[1]}"
    res = run_module(triton_fleet_drain_wait, {"address": "10.215.0.11", "service_url": url})
    assert res["failed"] and "does not see 10.215.0.11 as drained" in res["msg"]


def test_drain_wait_without_a_service(monkeypatch):
    _fake_ss(monkeypatch, [""])
    res = run_module(triton_fleet_drain_wait, {"address": "10.215.0.11", "interval": 0.01})
    assert not res.get("failed") and res["peak"]["nginx_connections"] == 0


# ---------------------------------------------------------------- pool files

SPEC = {"pools": [{"name": "ngw_triton_http", "file": "pool-triton-http.conf", "port": "8000",
                   "params": "max_fails=3 fail_timeout=10s"},
                  {"name": "ngw_triton_grpc", "file": "pool-triton-grpc.conf", "port": 8001, "params": ""}],
        "servers": ["10.0.0.11", "10.0.0.12", "fd00::13"], "service_url": "http://127.0.0.1:8090"}


def test_render_pools_marks_the_drained_down():
    files = render_pools(SPEC, ["10.0.0.12", "10.9.9.9"])
    http = files["pool-triton-http.conf"].splitlines()
    assert http[1:] == ["server 10.0.0.11:8000 max_fails=3 fail_timeout=10s;",
                        "server 10.0.0.12:8000 max_fails=3 fail_timeout=10s down;",
                        "server [fd00::13]:8000 max_fails=3 fail_timeout=10s;"]
    assert files["pool-triton-grpc.conf"].splitlines()[2] == "server 10.0.0.12:8001 down;"
    assert pool_ports(SPEC) == [8000, 8001]


def test_parse_pools_refuses_what_nginx_could_not_include():
    with pytest.raises(DrainError, match="site.yml --tags gateway"):
        parse_pools("{")
    with pytest.raises(DrainError, match="no serving node"):
        parse_pools(json.dumps({**SPEC, "servers": []}))
    with pytest.raises(DrainError, match="plain 'file' name"):
        parse_pools(json.dumps({**SPEC, "pools": [{"file": "../x.conf", "port": 1}]}))


def test_pools_module_writes_tests_and_puts_back(tmp_path, monkeypatch):
    (tmp_path / "pools.json").write_text(json.dumps(SPEC))
    drain = tmp_path / "drained-nodes.json"
    res = run_module(triton_fleet_gateway_pools, {"dir": str(tmp_path), "drain_file": str(drain)})
    assert res["changed"] and res["drained"] == [] and res["ports"] == [8000, 8001]
    assert res["service_url"] == "http://127.0.0.1:8090"
    assert "down" not in (tmp_path / "pool-triton-http.conf").read_text()
    assert not run_module(triton_fleet_gateway_pools, {"dir": str(tmp_path), "drain_file": str(drain)})["changed"]
    run_module(triton_fleet_drain, {"path": str(drain), "address": "10.0.0.11"})
    # nginx -t refuses: the previous files come back
    monkeypatch.setattr(triton_fleet_gateway_pools.AnsibleModule, "get_bin_path", lambda self, *a, **k: "/usr/sbin/nginx")
    monkeypatch.setattr(triton_fleet_gateway_pools.AnsibleModule, "run_command",
                        lambda self, argv, **k: (1, "", "nginx: [emerg] host not found"))
    res = run_module(triton_fleet_gateway_pools, {"dir": str(tmp_path), "drain_file": str(drain),
                                                  "nginx_conf": "/etc/nginx/nginx.conf"})
    assert res["failed"] and "previous ones are back" in res["msg"] and "host not found" in res["msg"]
    assert "down" not in (tmp_path / "pool-triton-http.conf").read_text()
    monkeypatch.setattr(triton_fleet_gateway_pools.AnsibleModule, "run_command", lambda self, argv, **k: (0, "", ""))
    res = run_module(triton_fleet_gateway_pools, {"dir": str(tmp_path), "drain_file": str(drain),
                                                  "nginx_conf": "/etc/nginx/nginx.conf"})
    assert res["changed"] and res["drained"] == ["10.0.0.11"]
    assert "10.0.0.11:8000 max_fails=3 fail_timeout=10s down;" in (tmp_path / "pool-triton-http.conf").read_text()


def test_pools_module_with_the_spec_given_and_no_file(tmp_path):
    res = run_module(triton_fleet_gateway_pools, {"dir": str(tmp_path / "new"), "spec": SPEC,
                                                  "drain_file": str(tmp_path / "none.json")}, check_mode=True)
    assert res["changed"] and not (tmp_path / "new").exists()
    res = run_module(triton_fleet_gateway_pools, {"dir": str(tmp_path / "other")})
    assert res["failed"] and "converge the gateway first" in res["msg"]
