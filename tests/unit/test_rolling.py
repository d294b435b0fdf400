"""Batch sizing of a rolling change (module_utils/triton_fleet/rolling.py, library/triton_fleet_roll_plan.py)."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import triton_fleet_roll_plan
from engine_modhelper import run_module
from triton_fleet.rolling import RollError, batch_request, concurrency_from_prometheus, node_capacity, plan

FOUR = {"n1": 4, "n2": 4, "n3": 4, "n4": 4}


def profile(batch=4, replicas=1):
    return {"limits": {"max_batch_size": batch}, "parallel": {"replicas_per_host": replicas}}


def test_batch_request_counts_and_percentages():
    assert batch_request(1, 4) == 1
    assert batch_request("2", 4) == 2
    assert batch_request("50%", 4) == 2
    assert batch_request("10%", 4) == 1  # at least one
    assert batch_request(9, 4) == 4
    for bad in ("0", 0, "x", "150%", "0%", True, "-1"):
        with pytest.raises(RollError):
            batch_request(bad, 4)
    with pytest.raises(RollError, match="no serving node"):
        batch_request(1, 0)


def test_node_capacity_from_the_profile():
    assert node_capacity(profile(16, 2)) == 32
    assert node_capacity({"limits": {"max_batch_size": 8}}) == 8
    with pytest.raises(RollError, match="preflight"):
        node_capacity({})


def test_plan_keeps_the_asked_batch_when_the_others_carry_the_load():
    out = plan(FOUR, 5.0, 2)
    assert out["batch_size"] == 2 and out["batches"] == [["n1", "n2"], ["n3", "n4"]]
    assert out["allowed"] == 2 and "carries the peak load of 5.00" in out["reason"]


def test_plan_cuts_the_batch_to_what_the_margin_allows():
    out = plan(FOUR, 9.0, "75%")  # 3 asked; with 2 out 8 remain, 0.8*8 = 6.4 < 9; with 1 out 0.8*12 = 9.6
    assert out["asked"] == 3 and out["batch_size"] == 1 and len(out["batches"]) == 4
    assert "3 node(s) per batch asked, 1 allowed" in out["reason"]


def test_plan_takes_the_largest_nodes_as_the_worst_case():
    out = plan({"big": 16, "s1": 4, "s2": 4}, 6.0, 1)  # without big: 8, 0.8*8 = 6.4
    assert out["allowed"] == 1
    with pytest.raises(RollError, match="cannot carry the measured load"):
        plan({"big": 16, "s1": 4, "s2": 4}, 7.0, 1)


def test_plan_of_some_nodes_counts_the_others_as_capacity():
    out = plan(FOUR, 9.0, 2, roll=["n3", "n4"])
    assert out["batches"] == [["n3"], ["n4"]] and out["allowed"] == 1
    with pytest.raises(RollError, match="no serving profile for n9"):
        plan(FOUR, 1.0, 1, roll=["n9"])


def test_plan_refuses_or_is_forced():
    with pytest.raises(RollError, match="rolling_force=true"):
        plan({"only": 4}, 0.0, 1)  # one node: draining it leaves nothing
    out = plan({"only": 4}, 0.0, 1, force=True)
    assert out["forced"] and out["batches"] == [["only"]]
    with pytest.raises(RollError, match="no measured load"):
        plan(FOUR, None, 1)
    assert plan(FOUR, None, 2, force=True)["batch_size"] == 2
    with pytest.raises(RollError, match="margin"):
        plan(FOUR, 1.0, 1, margin=0)


def test_prometheus_answers():
    vec = {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "2.5"]}]}}
    assert concurrency_from_prometheus(vec) == 2.5
    assert concurrency_from_prometheus({"status": "success", "data": {"resultType": "vector", "result": []}}) is None
    assert concurrency_from_prometheus({"status": "success", "data": {"resultType": "scalar", "result": [1, "NaN"]}}) is None
    with pytest.raises(RollError, match="bad_data"):
        concurrency_from_prometheus({"status": "error", "errorType": "bad_data", "error": "bad_data: parse error"})


class _Prom(BaseHTTPRequestHandler):
    answer = {}
    queries = []

    def do_GET(self):  # noqa: N802
        type(self).queries.append(self.path)
        body = json.dumps(type(self).answer).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture()
def prom():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Prom)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def test_module_measures_and_plans(prom):
    _Prom.answer = {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "1.5"]}]}}
    res = run_module(triton_fleet_roll_plan, {"profiles": {"n1": profile(), "n2": profile()}, "prometheus_url": prom})
    assert not res.get("failed"), res
    assert res["batches"] == [["n1"], ["n2"]] and res["measured_load"] == 1.5 and res["capacities"] == {"n1": 4, "n2": 4}
    assert "triton_fleet_gateway_upstream_seconds_sum" in _Prom.queries[-1]


def test_module_refuses_with_the_figures(prom):
    _Prom.answer = {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "3.9"]}]}}
    res = run_module(triton_fleet_roll_plan, {"profiles": {"n1": profile(), "n2": profile()}, "prometheus_url": prom})
    assert res["failed"] and "nothing was changed" in res["msg"] and "3.90 requests in flight" in res["msg"]


def test_module_without_prometheus_needs_force():
    res = run_module(triton_fleet_roll_plan, {"profiles": {"n1": profile()}, "prometheus_url": "http://127.0.0.1:9"})
    assert res["failed"] and "cannot query Prometheus" in res["msg"]
    res = run_module(triton_fleet_roll_plan, {"profiles": {"n1": profile()}, "prometheus_url": "http://127.0.0.1:9",
                                              "force": True})
    assert not res.get("failed") and res["forced"] and res["batches"] == [["n1"]]
