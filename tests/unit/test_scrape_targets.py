"""Scrape targets from the inventory (module_utils/triton_fleet/scrape_targets.py)."""

import importlib.util
from pathlib import Path

import pytest
from triton_fleet import scrape_targets as st

ROOT = Path(__file__).resolve().parents[2]

JOBS = [
    {"job": "triton", "group": "gpu_nodes", "port": 8002},
    {"job": "dcgm", "group": "gpu_nodes", "port": 9400, "gpu_only": True},
    {"job": "node", "group": "all", "port": 9100},
    {"job": "nginx", "group": "gateways", "port": 9113},
]

LAB_GROUPS = {
    "all": ["gw1", "node1", "node2", "mon1"],
    "ungrouped": [],
    "gpu_nodes": ["node1", "node2"],
    "lab_cpu": ["node1", "node2"],
    "gateways": ["gw1"],
    "monitoring": ["mon1"],
}
LAB_VARS = {
    "gw1": {"triton_fleet_service_address": "10.213.0.10"},
    "node1": {
        "triton_fleet_service_address": "10.213.0.11",
        "triton_fleet_device": "cpu",
        "triton_fleet_profile": {"device": "cpu", "gpu": {"sku": "cpu"}},
    },
    "node2": {"triton_fleet_service_address": "10.213.0.12", "triton_fleet_device": "cpu"},
    "mon1": {"triton_fleet_service_address": "10.213.0.13"},
}

PROD_GROUPS = {
    "all": ["gw-a", "a10-1", "a100-1", "a100-2", "prom"],
    "gpu_nodes": ["a10-1", "a100-1", "a100-2"],
    "gpu_a10": ["a10-1"],
    "gpu_a100": ["a100-1", "a100-2"],
    "gateways": ["gw-a"],
    "monitoring": ["prom"],
}
PROD_VARS = {
    "gw-a": {"triton_fleet_service_address": "192.0.2.10"},
    "a10-1": {"triton_fleet_service_address": "192.0.2.21"},
    "a100-1": {
        "triton_fleet_service_address": "192.0.2.31",
        "triton_fleet_profile": {"device": "gpu", "gpu": {"sku": "a100-80gb-sxm"}},
    },
    "a100-2": {"triton_fleet_service_address": "2001:db8::32", "triton_fleet_gpu_sku": "a100-40gb-pcie"},
    "prom": {"triton_fleet_service_address": "192.0.2.40"},
}


def _by_host(entries):
    return {e["labels"]["host"]: e for e in entries}


def test_lab_targets_labels_and_no_dcgm_on_cpu_hosts():
    out = st.build_targets(LAB_GROUPS, LAB_VARS, JOBS)
    assert set(out) == {"triton", "dcgm", "node", "nginx"}
    assert out["dcgm"] == []  # no GPU anywhere in the lab
    triton = _by_host(out["triton"])
    assert triton["node1"] == {
        "targets": ["10.213.0.11:8002"],
        "labels": {"host": "node1", "group": "lab_cpu", "gpu_sku": "cpu"},
    }
    assert triton["node2"]["labels"]["gpu_sku"] == "cpu"  # from triton_fleet_device, no profile
    node = _by_host(out["node"])
    assert sorted(node) == ["gw1", "mon1", "node1", "node2"]
    assert node["gw1"]["labels"] == {"host": "gw1", "group": "gateways", "gpu_sku": "none"}
    assert node["mon1"]["labels"]["group"] == "monitoring"
    assert node["mon1"]["targets"] == ["10.213.0.13:9100"]
    assert [e["targets"] for e in out["nginx"]] == [["10.213.0.10:9113"]]


def test_prod_gpu_sku_precedence_and_ipv6():
    out = st.build_targets(PROD_GROUPS, PROD_VARS, JOBS)
    dcgm = _by_host(out["dcgm"])
    assert sorted(dcgm) == ["a10-1", "a100-1", "a100-2"]
    assert dcgm["a10-1"]["labels"] == {"host": "a10-1", "group": "gpu_a10", "gpu_sku": "a10"}  # from group name
    assert dcgm["a100-1"]["labels"]["gpu_sku"] == "a100-80gb-sxm"  # from the profile
    assert dcgm["a100-2"]["labels"]["gpu_sku"] == "a100-40gb-pcie"  # from the host var
    assert dcgm["a100-2"]["targets"] == ["[2001:db8::32]:9400"]
    assert dcgm["a100-2"]["labels"]["group"] == "gpu_a100"


def test_output_is_deterministic():
    a = st.build_targets(PROD_GROUPS, PROD_VARS, JOBS)
    b = st.build_targets(dict(reversed(list(PROD_GROUPS.items()))), PROD_VARS, list(JOBS))
    assert a == b
    assert [e["labels"]["host"] for e in a["node"]] == sorted(PROD_GROUPS["all"])


def test_missing_group_gives_empty_job():
    groups = {k: v for k, v in LAB_GROUPS.items() if k != "gateways"}
    assert st.build_targets(groups, LAB_VARS, JOBS)["nginx"] == []


@pytest.mark.parametrize(
    ("hostvars", "message"),
    [
        ({"gw1": {}}, "has no triton_fleet_service_address"),
        ({"gw1": {"triton_fleet_service_address": "0.0.0.0"}}, "wildcard"),
        ({"gw1": {"triton_fleet_service_address": "10.0.0.0/24"}}, "not an IP address"),
    ],
)
def test_bad_addresses_are_refused(hostvars, message):
    groups = {"all": ["gw1"], "gateways": ["gw1"]}
    with pytest.raises(st.ScrapeTargetError, match=message):
        st.build_targets(groups, hostvars, [{"job": "nginx", "group": "gateways", "port": 9113}])


def test_bad_device_is_refused():
    with pytest.raises(st.ScrapeTargetError, match="must be 'gpu' or 'cpu'"):
        st.build_targets(
            {"all": ["n"], "gpu_nodes": ["n"]},
            {"n": {"triton_fleet_service_address": "10.0.0.1", "triton_fleet_device": "tpu"}},
            [{"job": "dcgm", "group": "gpu_nodes", "port": 9400, "gpu_only": True}],
        )


@pytest.mark.parametrize(
    ("jobs", "message"),
    [
        ([], "non-empty list"),
        ([{"job": "x", "group": "all"}], "lacks port"),
        ([{"job": "x", "group": "all", "port": 70000}], "outside 1-65535"),
        ([{"job": "x", "group": "all", "port": "http"}], "not a number"),
        ([{"job": "a-b", "group": "all", "port": 1}], "letters, digits"),
        ([{"job": "x", "group": "all", "port": 1}, {"job": "x", "group": "all", "port": 2}], "appears twice"),
    ],
)
def test_bad_jobs_are_refused(jobs, message):
    with pytest.raises(st.ScrapeTargetError, match=message):
        st.build_targets(LAB_GROUPS, LAB_VARS, jobs)


def test_hostname_address_is_accepted():
    out = st.build_targets(
        {"all": ["gw1"], "gateways": ["gw1"]},
        {"gw1": {"triton_fleet_service_address": "gw1.example.internal"}},
        [{"job": "nginx", "group": "gateways", "port": 9113}],
    )
    assert out["nginx"][0]["targets"] == ["gw1.example.internal:9113"]


def _load_filter():
    path = ROOT / "filter_plugins/prometheus_targets.py"
    spec = importlib.util.spec_from_file_location("prometheus_targets_filter", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# The filter plugin runs on the controller (ansible.errors): not under the target Pythons.
@pytest.mark.controller
def test_filter_plugin_wraps_errors_and_registers():
    from ansible.errors import AnsibleFilterError

    mod = _load_filter()
    f = mod.FilterModule().filters()["triton_fleet_scrape_targets"]
    assert f(LAB_VARS, LAB_GROUPS, JOBS)["nginx"][0]["labels"]["host"] == "gw1"
    with pytest.raises(AnsibleFilterError, match="has no triton_fleet_service_address"):
        f({"gw1": {}}, {"all": ["gw1"], "gateways": ["gw1"]}, JOBS)
