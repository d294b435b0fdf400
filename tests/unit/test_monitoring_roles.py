"""Conventions of the monitoring roles: defaults match meta/argument_specs.yml, prefixes, no wildcard binds."""

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLES = ["prometheus", "alertmanager", "node_exporter", "nginx_exporter", "dcgm_exporter", "grafana"]


@pytest.mark.parametrize("role", ROLES)
def test_defaults_match_argument_specs(role):
    base = ROOT / "roles" / role
    defaults = yaml.safe_load((base / "defaults" / "main.yml").read_text())
    specs = yaml.safe_load((base / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    assert set(defaults) == set(specs), f"{role}: defaults and argument_specs differ"
    for name, value in defaults.items():
        assert name.startswith(role + "_"), f"{role}: {name} lacks the role prefix"
        spec = specs[name]
        if "default" in spec:
            assert spec["default"] == value, f"{role}: {name} default differs"
        else:
            assert isinstance(value, str) and "{{" in value, f"{role}: {name} needs a default in argument_specs"
        assert spec.get("description"), f"{role}: {name} has no description"


@pytest.mark.parametrize("role", ROLES)
def test_role_layout(role):
    base = ROOT / "roles" / role
    for part in (
        "defaults/main.yml",
        "meta/main.yml",
        "meta/argument_specs.yml",
        "tasks/main.yml",
        "handlers/main.yml",
        "README.md",
        "molecule/default/molecule.yml",
    ):
        assert (base / part).is_file(), f"{role}: missing {part}"


@pytest.mark.parametrize(
    "role", ["prometheus", "alertmanager", "node_exporter", "nginx_exporter", "dcgm_exporter", "grafana"]
)
def test_listen_address_defaults_to_the_service_address(role):
    defaults = yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text())
    assert defaults[f"{role}_listen_address"] == "{{ triton_fleet_service_address }}"
