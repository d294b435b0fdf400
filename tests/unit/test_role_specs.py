"""Every role's argument spec matches its defaults, and every variable carries the role's prefix."""

from pathlib import Path

import pytest
import yaml

ROLES = sorted(p for p in (Path(__file__).resolve().parents[2] / "roles").iterdir() if p.is_dir())


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_argument_specs_match_defaults(role):
    defaults_file = role / "defaults" / "main.yml"
    spec_file = role / "meta" / "argument_specs.yml"
    assert spec_file.is_file(), f"{role.name}: meta/argument_specs.yml is missing"
    defaults = yaml.safe_load(defaults_file.read_text()) or {} if defaults_file.is_file() else {}
    spec = yaml.safe_load(spec_file.read_text())["argument_specs"]["main"].get("options") or {}
    missing_in_spec = sorted(set(defaults) - set(spec))
    missing_in_defaults = sorted(k for k, v in spec.items() if k not in defaults and not v.get("required"))
    assert not missing_in_spec, f"{role.name}: in defaults but not in argument_specs: {missing_in_spec}"
    assert not missing_in_defaults, f"{role.name}: optional in argument_specs but not in defaults: {missing_in_defaults}"


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_variables_are_prefixed(role):
    spec_file = role / "meta" / "argument_specs.yml"
    if not spec_file.is_file():
        pytest.fail(f"{role.name}: meta/argument_specs.yml is missing")
    spec = yaml.safe_load(spec_file.read_text())["argument_specs"]["main"].get("options") or {}
    bad = sorted(k for k in spec if not k.startswith(role.name + "_"))
    assert not bad, f"{role.name}: variables without the '{role.name}_' prefix: {bad}"


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_role_has_readme_and_molecule(role):
    assert (role / "README.md").is_file(), f"{role.name}: README.md is missing"
    assert (role / "molecule" / "default" / "molecule.yml").is_file(), f"{role.name}: molecule/default is missing"
