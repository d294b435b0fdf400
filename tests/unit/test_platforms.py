"""Supported platforms: the preflight refuses a release a host's roles do not implement, and the claims follow.

The logic is module_utils/triton_fleet/platforms.py (library/triton_fleet_platforms.py runs it in the
preflight). The releases come from the roles' meta/main.yml; the Python floor of the node-side code (vermin's
target, tools/run-node-tests, the service's requires-python, the openai_api role's host check) follows the
releases the fleet accepts.
"""

import re
from pathlib import Path

import pytest
import triton_fleet_platforms as mod
import yaml
from ansible.module_utils.triton_fleet import platforms as pf

ROOT = Path(__file__).resolve().parents[2]
ROLES = ROOT / "roles"
DEBIAN12 = {"distribution": "Debian", "version": "12.8", "major": "12"}
UBUNTU24 = {"distribution": "Ubuntu", "version": "24.04", "major": "24"}
RHEL9 = {"distribution": "RedHat", "version": "9.4", "major": "9"}


def _meta(*platforms):
    return {"galaxy_info": {"platforms": [{"name": n, "versions": list(v)} for n, v in platforms]}}


@pytest.fixture(scope="module")
def by_role():
    return mod.load_role_releases(str(ROLES))


def _host(groups, release):
    return {"groups": groups, **release}


# The declarations.

def test_meta_platforms_become_releases():
    meta = _meta(("Debian", ["bookworm"]), ("Ubuntu", ["jammy", "noble"]))
    assert pf.role_releases("r", meta) == {("Debian", "12"), ("Ubuntu", "22.04"), ("Ubuntu", "24.04")}


@pytest.mark.parametrize("meta, message", [
    ({"galaxy_info": {}}, "roles/r/meta/main.yml lists no galaxy_info.platforms"),
    (_meta(("EL", ["9"])), "platform EL 9 is not one this project knows (Debian bookworm, "),
    (_meta(("Debian", ["sid"])), "platform Debian sid is not one this project knows"),
    ({"galaxy_info": {"platforms": [{"name": "Debian"}]}}, "platform 'Debian' has no versions list"),
])
def test_unusable_declarations_are_errors(meta, message):
    with pytest.raises(pf.PlatformsError, match=re.escape(message)):
        pf.role_releases("r", meta)


def test_release_of_a_host():
    assert pf.release("Debian", "12.8", "12") == ("Debian", "12")
    assert pf.release("Ubuntu", "22.04", "22") == ("Ubuntu", "22.04")
    assert pf.release("RedHat", "9.4", "9") == ("RedHat", "9")


# The check, on made-up declarations.

BY_ROLE = {r: {("Debian", "12"), ("Ubuntu", "24.04")} for roles in pf.FLEET_ROLES.values() for r in roles}


def test_a_host_runs_every_role_of_its_groups_and_of_all():
    assert pf.host_roles(["gateways"]) == ["host_baseline", "node_exporter", "openai_api", "nginx_gateway",
                                            "nginx_exporter"]
    assert pf.host_roles(["lab_cpu", "clients"]) == ["host_baseline", "node_exporter"]


def test_supported_releases_pass():
    problems, platforms = pf.check({"n1": _host(["gpu_nodes"], DEBIAN12), "g1": _host(["gateways"], UBUNTU24)},
                                   BY_ROLE)
    assert problems == []
    assert platforms == {"g1": "Ubuntu 24.04", "n1": "Debian 12"}


def test_a_release_one_role_lacks_is_refused_naming_the_role_and_what_is_supported():
    by_role = dict(BY_ROLE, nginx_gateway={("Debian", "12")})
    problems, _ = pf.check({"g1": _host(["gateways"], UBUNTU24), "g2": _host(["gateways"], UBUNTU24),
                            "n1": _host(["gpu_nodes"], UBUNTU24)}, by_role)
    assert problems == [
        "g1, g2 run Ubuntu 24.04, which nginx_gateway does not support (roles/<role>/meta/main.yml): the roles of "
        "these hosts support Debian 12. Install a supported release or leave the host out of the inventory "
        "(docs/compatibility.md)"]


def test_an_unknown_distribution_names_every_role():
    problems, platforms = pf.check({"r1": _host([], RHEL9)}, BY_ROLE)
    assert platforms == {"r1": "RedHat 9"}
    assert problems == [
        "r1 runs RedHat 9, which host_baseline, node_exporter do not support (roles/<role>/meta/main.yml): the "
        "roles of this host support Debian 12, Ubuntu 24.04. Install a supported release or leave the host out of "
        "the inventory (docs/compatibility.md)"]


def test_roles_that_share_no_release_and_missing_facts_are_errors():
    with pytest.raises(pf.PlatformsError, match="the roles host_baseline, node_exporter share no platform"):
        pf.check({"h": _host([], DEBIAN12)}, dict(BY_ROLE, node_exporter={("Ubuntu", "24.04")},
                                                  host_baseline={("Debian", "12")}))
    with pytest.raises(pf.PlatformsError, match="h: no distribution facts were gathered"):
        pf.check({"h": {"groups": [], "distribution": ""}}, BY_ROLE)
    with pytest.raises(pf.PlatformsError, match="no meta/main.yml for the roles grafana"):
        pf.check({"h": _host(["monitoring"], DEBIAN12)}, {r: v for r, v in BY_ROLE.items() if r != "grafana"})


# The module on this repository's roles.

def test_module_passes_debian_12_everywhere_and_refuses_what_the_roles_do_not_implement():
    hosts = {"gw-01": _host(["gateways"], DEBIAN12), "a10-01": _host(["gpu_nodes", "gpu_a10"], DEBIAN12),
             "mon-01": _host(["monitoring"], DEBIAN12), "bundle": _host(["bundle_servers"], DEBIAN12)}
    failed, result = mod.run({"hosts": hosts, "roles_dir": str(ROLES)})
    assert not failed and result["problems"] == []
    assert set(result["platforms"].values()) == {"Debian 12"}

    failed, result = mod.run({"hosts": dict(hosts, **{"a10-02": _host(["gpu_nodes"], RHEL9),
                                                      "a10-03": _host(["gpu_nodes"], UBUNTU24)}),
                              "roles_dir": str(ROLES)})
    assert failed and result["msg"].endswith(". Nothing was changed.")
    assert "a10-02 runs RedHat 9, which host_baseline, node_exporter, nvidia_driver" in result["msg"]
    assert "a10-03 runs Ubuntu 24.04, which node_exporter does not support" in result["msg"]
    assert "the roles of this host support Debian 12." in result["msg"]


def test_module_refuses_a_missing_roles_dir(tmp_path):
    with pytest.raises(pf.PlatformsError, match="is not a directory"):
        mod.run({"hosts": {}, "roles_dir": str(tmp_path / "none")})


# The claims of this repository.

def test_no_role_claims_a_release_without_apt_or_that_no_test_exercises(by_role):
    """RHEL 9 (dnf) is exercised nowhere here: no role lists it; every role lists Debian 12 (Molecule, the lab)."""
    metas = {p.parent.parent.name: yaml.safe_load(p.read_text()) for p in ROLES.glob("*/meta/main.yml")}
    for role, meta in metas.items():
        names = {p["name"] for p in meta["galaxy_info"]["platforms"]}
        assert names <= {"Debian", "Ubuntu"}, (role, names)
        assert ("Debian", "12") in by_role[role], role


def test_fleet_roles_cover_every_role(by_role):
    listed = {r for roles in pf.FLEET_ROLES.values() for r in roles}
    assert listed == set(by_role)


def _site_plays():
    """[(hosts pattern, [roles])] of every play of site.yml's playbooks."""
    out = []
    for item in yaml.safe_load((ROOT / "site.yml").read_text()):
        for play in yaml.safe_load((ROOT / item["ansible.builtin.import_playbook"]).read_text()):
            roles = [r["role"] if isinstance(r, dict) else r for r in play.get("roles") or []]
            for task in play.get("tasks") or []:
                for key in ("ansible.builtin.include_role", "ansible.builtin.import_role"):
                    if key in task:
                        roles.append(task[key]["name"])
            if roles:
                out.append((play["hosts"], roles))
    return out


def _included(role, seen=None):
    """``role`` and every role its task files include, transitively."""
    seen = set() if seen is None else seen
    if role in seen:
        return seen
    seen.add(role)
    for path in (ROLES / role / "tasks").glob("*.yml"):
        for name in re.findall(r"(?:include|import)_role:\s*\n\s+name:\s*([a-z_]+)", path.read_text()):
            _included(name, seen)
    return seen


def test_fleet_roles_are_the_roles_site_yml_runs_on_each_group():
    derived = {}
    for pattern, roles in _site_plays():
        for group in pattern.split(":"):
            for role in roles:
                derived.setdefault(group, set()).update(_included(role))
    assert derived == {group: set(roles) for group, roles in pf.FLEET_ROLES.items()}


def _accepted(by_role, groups=None):
    """The releases some host of ``groups`` (default: any group) may run on."""
    out = set()
    for group in groups or pf.FLEET_ROLES:
        out |= pf.supported(pf.host_roles([group]), by_role)
    return out


def _pythons(releases):
    return sorted({pf.PLATFORM_PYTHON[r] for r in releases}, key=lambda v: tuple(map(int, v.split("."))))


def test_every_release_the_roles_know_has_its_python(by_role):
    assert set().union(*by_role.values()) <= set(pf.PLATFORM_PYTHON)


def test_the_node_side_python_floor_follows_the_accepted_releases(by_role):
    pythons = _pythons(_accepted(by_role))
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"vermin .*--target=(\S+)-", makefile).group(1) == pythons[0]
    versions = re.search(r"^VERSIONS=\((.*)\)$", (ROOT / "tools/run-node-tests").read_text(), re.M).group(1)
    assert versions.split() == pythons
    readme = (ROOT / "README.md").read_text()
    assert f"Managed hosts need Python {pythons[0]}" in readme


def test_the_service_python_follows_the_gateways_releases(by_role):
    pythons = _pythons(_accepted(by_role, ["gateways"]))
    pyproject = (ROOT / "services/openai_api/pyproject.toml").read_text()
    assert re.search(r'^requires-python = "(.*)"$', pyproject, re.M).group(1) == f">={pythons[0]}"
    tasks = yaml.safe_load((ROOT / "roles/openai_api/tasks/host-python.yml").read_text())
    check = next(t for t in tasks if "ansible.builtin.assert" in t)["ansible.builtin.assert"]
    allowed = re.search(r"version in (\[[^\]]*\])", " ".join(check["that"])).group(1)
    assert min(yaml.safe_load(allowed), key=lambda v: tuple(map(int, v.split(".")))) == pythons[0]
    requirements = (ROOT / "services/openai_api/requirements.txt").read_text()
    for marker in re.findall(r'python_version\s*[<>=]+\s*"([0-9.]+)"', requirements):
        assert tuple(map(int, marker.split("."))) > tuple(map(int, pythons[0].split("."))), marker


def test_the_preflight_checks_platforms_before_anything_runs_on_a_host():
    site = yaml.safe_load((ROOT / "site.yml").read_text())
    assert site[0]["ansible.builtin.import_playbook"] == "playbooks/preflight.yml"
    plays = yaml.safe_load((ROOT / "playbooks/preflight.yml").read_text())
    names = [p["name"] for p in plays]
    at = next(i for i, p in enumerate(plays) if any("triton_fleet_platforms" in t for t in p["tasks"]))
    play = plays[at]
    # Only the controller-side variables check comes first; the GPU facts, the plan and any write come after.
    assert all(t.get("delegate_to") == "localhost" for p in plays[:at] for t in p["tasks"]), names[:at]
    assert play["hosts"] == "all" and play["any_errors_fatal"] is True
    assert [list(t)[1] for t in play["tasks"]] == ["ansible.builtin.setup", "ansible.builtin.set_fact",
                                                   "triton_fleet_platforms"]
    assert all(t["tags"] == ["always"] for t in play["tasks"]), "it runs whatever --tags selects"
