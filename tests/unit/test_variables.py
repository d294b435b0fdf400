"""Unknown variables with a role's prefix or triton_fleet_ are errors with a suggestion (library/triton_fleet_variables.py)."""

from pathlib import Path

import pytest
import triton_fleet_variables as mod
import yaml
from ansible.module_utils.triton_fleet import variables as tv

ROOT = Path(__file__).resolve().parents[2]
PARAMS = {"roles_dir": str(ROOT / "roles"), "shared_spec": str(ROOT / "meta" / "shared_variables.yml")}


@pytest.fixture(scope="module")
def decl():
    return mod.load_declarations(PARAMS["roles_dir"], PARAMS["shared_spec"])


def test_every_role_is_a_prefix(decl):
    roles = sorted(p.parent.parent.name for p in (ROOT / "roles").glob("*/meta/argument_specs.yml"))
    assert roles
    for role in roles:
        assert role + "_" in decl
    assert "model_artifacts_source_type" in decl["model_artifacts_"]


def test_the_issue_example(decl):
    problems = tv.check({"a10-01": ["model_artifacts_source", "model_artifacts_source_type"]}, decl)
    assert len(problems) == 1
    assert problems[0]["message"].startswith(
        "unknown variable model_artifacts_source (did you mean model_artifacts_source_type?)")
    assert problems[0]["hosts"] == ["a10-01"]


def test_shared_prefix_and_longest_prefix(decl):
    problems = tv.check({"h": ["triton_fleet_modle", "triton_server_imag", "nginx_gateway_rate_limit_per_ip"]}, decl)
    by = {p["variable"]: p for p in problems}
    assert by["triton_fleet_modle"]["suggestion"] == "triton_fleet_model"
    assert "meta/shared_variables.yml" in by["triton_fleet_modle"]["message"]
    assert by["triton_server_imag"]["suggestion"] == "triton_server_image"
    # shared words win over raw similarity
    assert by["nginx_gateway_rate_limit_per_ip"]["suggestion"] == "nginx_gateway_ip_rate"


def test_declared_foreign_and_facts_pass(decl):
    hosts = {"h": ["triton_fleet_model", "nginx_gateway_jwt_keys", "ansible_host", "vault_x", "inventory_hostname",
                   "triton_fleet_gpus", "my_own_var"]}
    assert tv.check(hosts, decl, ignore={"h": ["triton_fleet_gpus"]}) == []


def test_internal_and_fact_names_are_refused_from_inventory(decl):
    problems = tv.check({"h": ["triton_fleet_profile", "triton_fleet_gpus"]}, decl)
    assert [p["variable"] for p in problems] == ["triton_fleet_gpus", "triton_fleet_profile"]
    assert all("not by an inventory" in p["message"] for p in problems)


def test_no_suggestion_when_nothing_is_close(decl):
    (p,) = tv.check({"h": ["grafana_zzzzzzzzzzzzzzzzzz"]}, decl)
    assert p["suggestion"] is None
    assert "did you mean" not in p["message"]


def test_every_host_is_summarised(decl):
    (p,) = tv.check({"a": ["triton_fleet_modle"], "b": ["triton_fleet_modle"]}, decl)
    assert "every host" in p["message"]
    assert p["hosts"] == ["a", "b"]


def test_bad_declarations():
    with pytest.raises(tv.VariablesError, match="argument_specs mapping"):
        tv.declarations({"r": {"nope": 1}}, {"shared_variables": {}})
    with pytest.raises(tv.VariablesError, match="does not start with"):
        tv.shared_options({"shared_variables": {"other_x": {}}})
    with pytest.raises(tv.VariablesError, match="kind"):
        tv.shared_options({"shared_variables": {"triton_fleet_x": {"kind": "weird"}}})


def test_module_run_fails_with_all_messages():
    failed, result = mod.run(dict(PARAMS, hosts={"h": ["model_artifacts_source", "nginx_gateway_rate_limit_per_ip"]},
                                  ignore={}))
    assert failed
    assert "unknown variable model_artifacts_source (did you mean model_artifacts_source_type?)" in result["msg"]
    assert "nginx_gateway_rate_limit_per_ip" in result["msg"]
    assert result["msg"].endswith("Nothing was changed.")
    ok, result = mod.run(dict(PARAMS, hosts={"h": ["triton_fleet_model"]}, ignore={}))
    assert not ok and result["problems"] == [] and result["checked"] == 1


def test_module_missing_declarations(tmp_path):
    with pytest.raises(tv.VariablesError, match="not a directory"):
        mod.run(dict(PARAMS, roles_dir=str(tmp_path / "none"), hosts={}, ignore={}))


def test_shared_list_covers_what_the_playbooks_read():
    """Every triton_fleet_ variable a playbook, role or inventory reads is declared (metric names aside)."""
    import re

    shared = yaml.safe_load((ROOT / "meta" / "shared_variables.yml").read_text())["shared_variables"]
    used = set()
    files = list((ROOT / "playbooks").rglob("*.yml")) + list((ROOT / "inventories").rglob("*.yml"))
    files += [p for p in (ROOT / "roles").rglob("*.yml") if "molecule" not in p.parts]
    for path in files:
        used.update(re.findall(r"\btriton_fleet_[a-z0-9_]+", path.read_text()))
    # Module names (library/triton_fleet_*.py) and module_utils names are not variables.
    not_variables = {"triton_fleet_scrape_targets", "triton_fleet_alertmanager_config"}
    not_variables |= {p.stem for p in (ROOT / "library").glob("triton_fleet_*.py")}
    # Nor are the project's Jinja filters (filter_plugins/*.py).
    for path in (ROOT / "filter_plugins").glob("*.py"):
        not_variables |= set(re.findall(r"^def (triton_fleet_[a-z0-9_]+)\(", path.read_text(), re.M))
    missing = sorted(n for n in used - set(shared) - not_variables if not n.startswith("triton_fleet_gateway_"))
    assert missing == []
