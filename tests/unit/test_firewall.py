import subprocess

import pytest
from triton_fleet.firewall import FirewallError, parse_network, plan, render

GROUPS = {
    "all": ["gw1", "node1", "node2", "mon1"],
    "ungrouped": [],
    "gateways": ["gw1"],
    "gpu_nodes": ["node1", "node2"],
    "lab_cpu": ["node1", "node2"],
    "monitoring": ["mon1"],
}
ADDR = {"gw1": "10.213.0.10", "node1": "10.213.0.11", "node2": "10.213.0.12", "mon1": "10.213.0.13"}
SERVICES = [
    {"name": "triton", "ports": [8000, 8001, 8002], "on_groups": ["gpu_nodes"], "from_groups": ["gateways", "monitoring"]},
    {"name": "node-exporter", "ports": [9100], "on_groups": ["all"], "from_groups": ["monitoring"]},
    {"name": "gateway", "ports": [443, 80], "on_groups": ["gateways"], "from_networks": ["0.0.0.0/0", "::/0"]},
]


def test_serving_node_opens_triton_to_gateways_and_monitoring_only():
    result = plan("node1", GROUPS, ADDR, SERVICES, ["10.213.0.1/32"])
    by_name = {s["name"]: s for s in result["services"]}
    assert set(by_name) == {"triton", "node-exporter"}
    assert by_name["triton"]["sources"] == ["10.213.0.10/32", "10.213.0.13/32"]
    assert by_name["triton"]["ports"] == [8000, 8001, 8002]
    assert by_name["node-exporter"]["sources"] == ["10.213.0.13/32"]
    assert result["ssh"]["sources"] == ["10.213.0.1/32"]


def test_gateway_gets_client_port_from_anywhere_and_no_triton():
    result = plan("gw1", GROUPS, ADDR, SERVICES, ["10.213.0.1/32"])
    names = [s["name"] for s in result["services"]]
    assert "triton" not in names
    gw = next(s for s in result["services"] if s["name"] == "gateway")
    assert gw["ports"] == [80, 443]
    assert gw["sources"] == ["0.0.0.0/0", "::/0"]


def test_unknown_group_fails_naming_it():
    bad = SERVICES + [{"name": "x", "ports": [1], "on_groups": ["gpu_nodes"], "from_groups": ["gatways"]}]
    with pytest.raises(FirewallError, match="unknown inventory group.*gatways"):
        plan("node1", GROUPS, ADDR, bad, ["10.0.0.0/8"])


@pytest.mark.parametrize("cidr", ["10.0.0.1/33", "10.0.0.0/8x", "300.1.1.1", "", "10.0.0.5/24"])
def test_malformed_cidr_fails(cidr):
    with pytest.raises(FirewallError, match="not a valid CIDR|not an address"):
        plan("node1", GROUPS, ADDR, SERVICES, [cidr])


def test_host_without_address_is_named():
    addr = dict(ADDR)
    addr["mon1"] = ""
    with pytest.raises(FirewallError, match="'mon1'.*no triton_fleet_service_address"):
        plan("node1", GROUPS, addr, SERVICES, ["10.0.0.0/8"])


def test_empty_admin_networks_refused():
    with pytest.raises(FirewallError, match="admin_networks is empty"):
        plan("node1", GROUPS, ADDR, SERVICES, [])


def test_bad_port_and_duplicate_name():
    with pytest.raises(FirewallError, match="port 70000"):
        plan("node1", GROUPS, ADDR, [{"name": "a", "ports": [70000], "on_groups": ["all"]}], ["10.0.0.0/8"])
    dup = [{"name": "a", "ports": [1], "on_groups": ["all"]}] * 2
    with pytest.raises(FirewallError, match="defined twice"):
        plan("node1", GROUPS, ADDR, dup, ["10.0.0.0/8"])


def test_parse_network_accepts_bare_address_and_v6():
    assert str(parse_network("10.1.2.3", "x")) == "10.1.2.3/32"
    assert str(parse_network("fd00::/64", "x")) == "fd00::/64"


def test_render_replaces_only_own_table_and_splits_families():
    text = render(plan("gw1", GROUPS, ADDR, SERVICES, ["10.213.0.1/32", "fd00::/64"]))
    assert "flush ruleset" not in text
    assert text.count("delete table inet triton_fleet") == 1
    assert 'ip saddr { 0.0.0.0/0 } tcp dport { 80, 443 } accept comment "gateway"' in text
    assert 'ip6 saddr { ::/0 } tcp dport { 80, 443 } accept comment "gateway"' in text
    assert 'ip6 saddr { fd00::/64 } tcp dport 22 accept' in text
    assert text.rstrip().endswith("}")
    assert "priority -160" in text  # before Docker's DNAT, so published container ports are filtered


def test_render_accept_policy_has_no_drop():
    text = render(plan("node1", GROUPS, ADDR, SERVICES, ["10.0.0.0/8"]), default_policy="accept")
    assert "drop comment" not in text


def test_render_rejects_bad_interface_and_policy():
    p = plan("node1", GROUPS, ADDR, SERVICES, ["10.0.0.0/8"])
    with pytest.raises(FirewallError):
        render(p, trusted_interfaces=['lo"; flush ruleset; "'])
    with pytest.raises(FirewallError):
        render(p, default_policy="reject")


# nft comes from tools/host-packages.txt (nftables) on CI hosts.
def test_rendered_script_parses_with_nft(tmp_path):
    f = tmp_path / "fw.nft"
    f.write_text(render(plan("node1", GROUPS, ADDR, SERVICES, ["10.0.0.0/8", "fd00::/8"])))
    subprocess.run(["nft", "-c", "-f", str(f)], check=True)


# ------------------------------------------------------------------ the module (library/triton_fleet_firewall.py)
def _module_args(path):
    return {"path": str(path), "host": "node1", "groups": GROUPS, "addresses": ADDR, "services": SERVICES,
            "admin_networks": ["10.213.0.1/32"], "validate": False}


def test_module_check_mode_writes_nothing_then_writes_once(tmp_path):
    import triton_fleet_firewall
    from engine_modhelper import run_module

    path = tmp_path / "etc" / "firewall.nft"
    check = run_module(triton_fleet_firewall, _module_args(path), check_mode=True)
    assert check["changed"] is True and not path.exists()
    assert check["diff"]["before"] == "" and "10.213.0.10" in check["diff"]["after"]
    first = run_module(triton_fleet_firewall, _module_args(path), diff=False)
    assert first["changed"] is True and path.read_text() == check["diff"]["after"]
    assert "diff" not in first, "diff only when asked"
    again = run_module(triton_fleet_firewall, _module_args(path))
    assert again["changed"] is False


def test_module_bad_input_changes_nothing(tmp_path):
    import triton_fleet_firewall
    from engine_modhelper import run_module

    path = tmp_path / "firewall.nft"
    out = run_module(triton_fleet_firewall, {**_module_args(path), "host": "nohost"})
    assert out.get("failed") is True and "firewall not changed" in out["msg"] and not path.exists()
