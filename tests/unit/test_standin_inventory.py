"""tools/standin-inventory: a copy of inventories/prod where only addresses, hardware and secrets are stand-ins."""

import subprocess
import sys
from pathlib import Path

import yaml
from cryptography import x509

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "standin-inventory"
PROD = ROOT / "inventories" / "prod"
HOSTS = ["--host", "gw-01=tfm-gw1@10.215.0.10", "--host", "a10-01=tfm-node1@10.215.0.11",
         "--host", "a100-01=tfm-node2@10.215.0.12", "--host", "mon-01=tfm-mon1@10.215.0.13"]


def run(*args):
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, check=False)


def test_copy_keeps_groups_and_vars_changes_addresses(tmp_path):
    dest = tmp_path / "copy"
    r = run(str(PROD), str(dest), *HOSTS, "--var", 'triton_fleet_admin_networks=["10.215.0.1/32"]')
    assert r.returncode == 0, r.stderr
    assert "left out (no stand-in host): a10-02, a10-03, a100-02, gw-02" in r.stdout
    hosts = yaml.safe_load((dest / "inventory" / "hosts.yml").read_text())
    children = hosts["all"]["children"]
    assert set(children) == set(yaml.safe_load((PROD / "hosts.yml").read_text())["all"]["children"])
    a10 = children["gpu_nodes"]["children"]["gpu_a10"]["hosts"]
    assert a10 == {"a10-01": {"ansible_host": "tfm-node1", "triton_fleet_service_address": "10.215.0.11"}}
    assert "a100-01" in children["engine_builders"]["hosts"]
    # group_vars verbatim, except the planning-only GPU facts
    for rel in ("group_vars/all/main.yml", "group_vars/gateways.yml", "group_vars/gpu_nodes.yml"):
        assert (dest / "inventory" / rel).read_text() == (PROD / rel).read_text()
    a100 = yaml.safe_load((dest / "inventory" / "group_vars/gpu_a100.yml").read_text())
    assert "triton_fleet_gpu_facts" not in a100
    assert a100["triton_fleet_concurrency"] == yaml.safe_load((PROD / "group_vars/gpu_a100.yml").read_text())[
        "triton_fleet_concurrency"]
    standins = yaml.safe_load((dest / "standin-vars.yml").read_text())
    assert standins["triton_fleet_device"] == "cpu"
    assert standins["triton_fleet_admin_networks"] == ["10.215.0.1/32"]
    for name in ("vault_jwt_idp_2026_11_public_pem", "vault_jwt_fleet_verify_1_public_pem",
                 "vault_gateway_tls_certificate", "vault_gateway_tls_private_key", "vault_grafana_admin_password"):
        assert standins[name], name
    assert "BEGIN PUBLIC KEY" in standins["vault_jwt_fleet_verify_1_public_pem"]
    cert = x509.load_pem_x509_certificate(standins["vault_gateway_tls_certificate"].encode())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "llm.example.internal" in sans.get_values_for_type(x509.DNSName)
    key = Path(standins["triton_fleet_verify_jwt_key"])
    assert key.is_file() and oct(key.stat().st_mode & 0o777) == "0o600"


def test_unknown_host_and_bad_spec_are_refused(tmp_path):
    r = run(str(PROD), str(tmp_path / "c"), "--host", "nope=tfm-x@10.0.0.1")
    assert r.returncode == 2 and "does not have: nope" in r.stderr
    r = run(str(PROD), str(tmp_path / "c"), "--host", "gw-01=tfm-gw1")
    assert r.returncode == 2 and "NAME=CONNECT@ADDRESS" in r.stderr
