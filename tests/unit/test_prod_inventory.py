"""inventories/prod is a tested artefact: every host, every role it runs, against the role's argument spec.

The inventory is loaded with Ansible's own InventoryManager and VariableManager (group_vars, host_vars, the vault
variables given as extra vars with stand-in values, as `-e @vault-standin.yml` would). Which roles a host runs is
read from site.yml's playbooks (each play's `hosts:` pattern and its roles / include_role tasks), not listed here.
Each role's variables are the host's merged variables over the role's defaults, templated with Ansible's Templar,
and validated with ArgumentSpecValidator, as the role's own argument validation does at run time. The serving
profile that some defaults read is planned from the inventory with the planner, as the preflight stage does.
"""

import datetime
import json
import os
import re
from pathlib import Path

import pytest
import yaml
from ansible import context
from ansible.inventory.manager import InventoryManager
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.common.collections import ImmutableDict
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar
from ansible.vars.manager import VariableManager
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID
from triton_fleet import variables as tv
from triton_fleet.planner import plan_fleet

# Controller-side: it also needs the controller's own libraries (see tests/conftest.py).
pytestmark = pytest.mark.controller

ROOT = Path(__file__).resolve().parents[2]
PROD = ROOT / "inventories" / "prod"
# The profiles of prod's groups, kept as fixtures: tests/unit/test_model_repository.py renders them into goldens
# and tests/unit/test_upstream_conformance.py holds those against upstream. Regenerate after an intended planner
# change with TRITON_FLEET_UPDATE_GOLDEN=1 (as the goldens).
PROFILES = ROOT / "tests" / "fixtures" / "profiles"
UPDATE = os.environ.get("TRITON_FLEET_UPDATE_GOLDEN") == "1"


def _pem_public(key):
    return key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def vault_standins():
    """Stand-in values for every vault_* variable README.md documents (real PEM material, made here)."""
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    tls_key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "llm.example.internal")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(tls_key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(tls_key, hashes.SHA256()))
    return {
        "vault_jwt_idp_2026_11_public_pem": _pem_public(rsa_key),
        "vault_jwt_fleet_verify_1_public_pem": _pem_public(ec_key),
        "vault_gateway_tls_certificate": cert.public_bytes(serialization.Encoding.PEM).decode(),
        "vault_gateway_tls_private_key": tls_key.private_bytes(serialization.Encoding.PEM,
                                                               serialization.PrivateFormat.PKCS8,
                                                               serialization.NoEncryption()).decode(),
        "vault_grafana_admin_password": "stand-in-password-0123456789",
    }


def documented_vault_variables():
    text = (PROD / "README.md").read_text()
    return set(re.findall(r"`(vault_[a-z0-9_]+)`", text))


@pytest.fixture(scope="module")
def fleet():
    init_plugin_loader()
    saved = context.CLIARGS
    standins = vault_standins()
    context.CLIARGS = ImmutableDict(extra_vars=[json.dumps(standins)])
    try:
        loader = DataLoader()
        inventory = InventoryManager(loader=loader, sources=[str(PROD)])
        manager = VariableManager(loader=loader, inventory=inventory)
        hostvars = {h.name: manager.get_vars(host=h, include_hostvars=False) for h in inventory.get_hosts("all")}
    finally:
        context.CLIARGS = saved
    return {"loader": loader, "inventory": inventory, "hostvars": hostvars, "standins": standins}


def stage_roles():
    """[(hosts pattern, role)] for every play of site.yml's playbooks, in order."""
    out = []
    site = yaml.safe_load((ROOT / "site.yml").read_text())
    for item in site:
        book = ROOT / item["ansible.builtin.import_playbook"]
        for play in yaml.safe_load(book.read_text()):
            roles = [r["role"] if isinstance(r, dict) else r for r in play.get("roles") or []]
            for task in play.get("tasks") or []:
                for key in ("ansible.builtin.include_role", "ansible.builtin.import_role"):
                    if key in task:
                        roles.append(task[key]["name"])
            out.extend((play["hosts"], role) for role in roles)
    return out


def role_spec(role):
    spec = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
    return spec["argument_specs"]["main"]["options"]


def planned_profiles(fleet):
    """The profile of every serving host, planned from the inventory like playbooks/preflight.yml."""
    inv = fleet["inventory"]
    groups = {g: [h.name for h in inv.get_hosts(g)] for g in inv.groups}
    hosts = {}
    for name in groups["gpu_nodes"]:
        hv = fleet["hostvars"][name]
        request = {key: hv.get("triton_fleet_" + key) for key in
                   ("model", "model_revision", "model_config", "served_name", "context_length", "concurrency",
                    "runtime", "precision", "kv_cache_dtype", "tp", "image", "yarn_factor", "quantized_checkpoints")}
        request["device"] = hv.get("triton_fleet_device", "gpu")
        request["model_revision"] = request["model_revision"] or "main"
        hosts[name] = {"group_names": hv["group_names"], "gpu_facts": hv["triton_fleet_gpu_facts"],
                       "host_memory_bytes": None, "request": {k: v for k, v in request.items() if v is not None}}
    profiles, host_groups, errors = plan_fleet(hosts, groups)
    assert errors == []
    return {h: profiles[host_groups[h]] for h in hosts}


def _role_context(fleet, host, role, profiles):
    loader = fleet["loader"]
    ctx = {}
    defaults = ROOT / "roles" / role / "defaults" / "main.yml"
    if defaults.is_file():
        ctx.update(loader.load_from_file(str(defaults), trusted_as_template=True) or {})
    ctx.update(fleet["hostvars"][host])
    role_vars = ROOT / "roles" / role / "vars" / "main.yml"
    if role_vars.is_file():
        ctx.update(loader.load_from_file(str(role_vars), trusted_as_template=True) or {})
    ctx.update({
        "hostvars": fleet["hostvars"],
        "playbook_dir": str(ROOT / "playbooks"),
        "role_path": str(ROOT / "roles" / role),
        # Facts are gathered at run time; none of the prod inventory's values depends on them.
        "ansible_facts": {},
    })
    if host in profiles:
        ctx["triton_fleet_profile"] = profiles[host]
    return ctx


def test_vault_variables_are_documented_and_are_all_the_inventory_needs(fleet):
    assert documented_vault_variables() == set(fleet["standins"])


def test_every_host_runs_roles(fleet):
    pairs = stage_roles()
    inv = fleet["inventory"]
    for host in inv.get_hosts("all"):
        roles = {role for pattern, role in pairs if host in inv.get_hosts(pattern)}
        assert "host_baseline" in roles and "node_exporter" in roles, host.name
    assert {"nginx_gateway", "nginx_exporter"} <= {r for p, r in pairs if inv.get_host("gw-02") in inv.get_hosts(p)}
    assert len(inv.get_hosts("gateways")) == 2
    assert {g for g in inv.groups if g.startswith("gpu_")} >= {"gpu_a10", "gpu_a100"}


def test_prod_plans(fleet):
    profiles = planned_profiles(fleet)
    assert {p["gpu"]["sku"] for p in profiles.values()} == {"a10", "a100-80gb-sxm"}
    assert {p["model"]["served_name"] for p in profiles.values()} == {"qwen3-14b"}
    by_group = {p["group"]: p for p in profiles.values()}
    assert set(by_group) == {"gpu_a10", "gpu_a100"}
    for group, p in sorted(by_group.items()):
        # Ampere on the PyTorch (LLM API) path with the pinned image, not the legacy engine path
        assert (p["runtime"], p["image"]["ref"], p["image"]["trtllm"]) == \
            ("trtllm-llmapi", "nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3", "1.2.1"), group
        assert p["cuda_graphs"]["batch_sizes"][-1] == p["limits"]["max_batch_size"]
        fixture = PROFILES / f"prod-{group}.json"
        if UPDATE:
            fixture.write_text(json.dumps(p, indent=2, sort_keys=True) + "\n")
        assert json.loads(fixture.read_text()) == p, (
            f"{fixture.relative_to(ROOT)} is not what the planner plans for {group}: after an intended planner change "
            "re-run with TRITON_FLEET_UPDATE_GOLDEN=1 and re-check the goldens")
    # A10: no FP8, int8 weight-only not on the LLM API path, and no int4 checkpoint it reads (Qwen's -AWQ is
    # AutoAWQ): bf16 over both GPUs, from the base checkpoint at the pinned revision
    a10, a100 = by_group["gpu_a10"], by_group["gpu_a100"]
    assert (a10["precision"]["weights"], a10["parallel"]["tp"], a10["parallel"]["replicas_per_host"]) == ("bf16", 2, 1)
    assert a10["limits"]["max_batch_size"] == 8 and a10["predicted"]["max_concurrency_at_max_seq_len"] >= 8
    rejected = {a["name"]: a["rejected_because"] for a in a10["alternatives"]}
    assert "Qwen/Qwen3-14B-AWQ is AutoAWQ" in rejected["int4_awq (any TP)"]
    assert a100["precision"]["weights"] == "bf16"
    for p in (a10, a100):
        # no profile names a checkpoint the runtime cannot load: both load the base checkpoint, pinned
        assert "checkpoint" not in p["model"]
        assert (p["model"]["hf_id"], p["model"]["revision"]) == ("Qwen/Qwen3-14B", "40c069824f4251a91eefaf281ebe4c544efd3e18")


def test_prod_groups_would_not_plan_an_int4_checkpoint_the_runtime_cannot_load(fleet):
    """Naming Qwen's own AWQ for the A10s stops the plan (the runtime refuses AutoAWQ) instead of serving it."""
    inv = fleet["inventory"]
    groups = {g: [h.name for h in inv.get_hosts(g)] for g in inv.groups}
    hv = fleet["hostvars"]["a10-01"]
    request = {"model": hv["triton_fleet_model"], "model_revision": hv["triton_fleet_model_revision"],
               "context_length": hv["triton_fleet_context_length"], "concurrency": hv["triton_fleet_concurrency"],
               "quantized_checkpoints": {"int4_awq": {"repo": "Qwen/Qwen3-14B-AWQ",
                                                      "revision": "31c69efc29464b6bb0aee1398b5a7b50a99340c3"}}}
    hosts = {h: {"group_names": fleet["hostvars"][h]["group_names"], "gpu_facts": fleet["hostvars"][h]["triton_fleet_gpu_facts"],
                 "request": request} for h in groups["gpu_a10"]}
    _, _, errors = plan_fleet(hosts, groups)
    assert len(errors) == 1 and "Qwen/Qwen3-14B-AWQ is AutoAWQ" in errors[0] and "refuses" in errors[0]


def test_every_role_of_every_host_passes_its_argument_spec(fleet):
    profiles = planned_profiles(fleet)
    inv = fleet["inventory"]
    failures = []
    validated = 0
    for pattern, role in stage_roles():
        spec = role_spec(role)
        for host in inv.get_hosts(pattern):
            ctx = _role_context(fleet, host.name, role, profiles)
            templar = Templar(loader=fleet["loader"], variables=ctx)
            params = {name: templar.template(ctx[name]) for name in spec if name in ctx}
            result = ArgumentSpecValidator(spec).validate(params)
            failures.extend(f"{host.name} {role}: {err}" for err in result.error_messages)
            validated += 1
    assert failures == []
    assert validated >= 40


def test_prod_has_no_unknown_variables(fleet):
    shared = yaml.safe_load((ROOT / "meta" / "shared_variables.yml").read_text())
    specs = {p.parent.parent.name: yaml.safe_load(p.read_text()) for p in (ROOT / "roles").glob("*/meta/argument_specs.yml")}
    decl = tv.declarations(specs, shared)
    hosts = {h: list(v) for h, v in fleet["hostvars"].items()}
    assert tv.check(hosts, decl) == []


def test_a_typo_in_prod_would_be_caught(fleet):
    shared = yaml.safe_load((ROOT / "meta" / "shared_variables.yml").read_text())
    specs = {p.parent.parent.name: yaml.safe_load(p.read_text()) for p in (ROOT / "roles").glob("*/meta/argument_specs.yml")}
    decl = tv.declarations(specs, shared)
    hosts = {h: list(v) + ["model_artifacts_source"] for h, v in fleet["hostvars"].items()}
    (problem,) = tv.check(hosts, decl)
    assert problem["suggestion"] == "model_artifacts_source_type"


def test_the_old_wrong_key_name_fails_the_spec():
    """The validation above really checks list-of-dict options (public_key_pem was the prod inventory's bug)."""
    spec = role_spec("nginx_gateway")
    bad = {"nginx_gateway_jwt_keys": [{"kid": "k", "alg": "RS256", "public_key_pem": "x"}]}
    errors = ArgumentSpecValidator(spec).validate(bad).error_messages
    assert any("public_key_pem" in e for e in errors)
