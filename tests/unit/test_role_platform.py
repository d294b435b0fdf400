"""The roles whose tasks differ by release refuse, on their own, a release their meta/main.yml does not list.

nvidia_driver and container_runtime read the releases they implement from their meta/main.yml (the list the
fleet's preflight reads, module_utils/triton_fleet/platforms.py) through the filter
filter_plugins/platforms.py, in their tasks/platform.yml, before their first change. No release list is
written in their tasks or vars, and no RHEL path is left in them (no role implements RHEL).
"""

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import triton_fleet_platforms as platforms_module
import yaml
from ansible.module_utils.triton_fleet import platforms as pf

# It runs ansible-playbook and the controller's filter plugin: the controller's Python, not a target's.
pytestmark = pytest.mark.controller

ROOT = Path(__file__).resolve().parents[2]
ROLES = ("nvidia_driver", "container_runtime")
FACTS = {
    "Debian 12": {"distribution": "Debian", "distribution_version": "12.8", "distribution_major_version": "12",
                  "os_family": "Debian"},
    "Debian 13": {"distribution": "Debian", "distribution_version": "13.1", "distribution_major_version": "13",
                  "os_family": "Debian"},
    "Ubuntu 24.04": {"distribution": "Ubuntu", "distribution_version": "24.04", "distribution_major_version": "24",
                     "os_family": "Debian"},
    "RedHat 9": {"distribution": "RedHat", "distribution_version": "9.4", "distribution_major_version": "9",
                 "os_family": "RedHat"},
}


def _meta(role):
    return yaml.safe_load((ROOT / "roles" / role / "meta" / "main.yml").read_text())


def _releases(role):
    return pf.labels(platforms_module.load_role_releases(str(ROOT / "roles"))[role])


# The logic.

@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("name", list(FACTS))
def test_role_platform_follows_the_role_meta(role, name):
    f = FACTS[name]
    got = pf.role_platform(role, _meta(role), f["distribution"], f["distribution_version"],
                           f["distribution_major_version"])
    releases = pf.role_releases(role, _meta(role))
    assert got == {"release": name, "supported": pf.release(f["distribution"], f["distribution_version"],
                                                            f["distribution_major_version"]) in releases,
                   "releases": pf.labels(releases)}


def test_role_platform_on_made_up_metas_and_missing_facts():
    meta = {"galaxy_info": {"platforms": [{"name": "Debian", "versions": ["bookworm", "trixie"]}]}}
    assert pf.role_platform("r", meta, "Debian", "13.1", "13") == {
        "release": "Debian 13", "supported": True, "releases": "Debian 12, Debian 13"}
    assert pf.role_platform("r", meta, "Ubuntu", "22.04", "22")["supported"] is False
    with pytest.raises(pf.PlatformsError, match="r: no distribution facts were gathered"):
        pf.role_platform("r", meta, "", "", "")
    with pytest.raises(pf.PlatformsError, match="roles/r/meta/main.yml lists no galaxy_info.platforms"):
        pf.role_platform("r", {"galaxy_info": {}}, "Debian", "12.8", "12")


def _filter():
    spec = importlib.util.spec_from_file_location("platforms_filter", ROOT / "filter_plugins" / "platforms.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FilterModule().filters()["triton_fleet_role_platform"]


def test_filter_reads_ansible_facts_and_wraps_errors():
    from ansible.errors import AnsibleFilterError

    f = _filter()
    got = f(_meta("nvidia_driver"), "nvidia_driver", FACTS["RedHat 9"])
    assert got == {"release": "RedHat 9", "supported": False, "releases": _releases("nvidia_driver")}
    with pytest.raises(AnsibleFilterError, match="nvidia_driver: no distribution facts were gathered"):
        f(_meta("nvidia_driver"), "nvidia_driver", {})


# The roles, run by Ansible.

def _run(tmp_path, role, facts, tasks_from=None):
    """Run ``role`` (or one task file of it) in check mode on a local host whose facts are ``facts``."""
    library = tmp_path / "library"
    library.mkdir(exist_ok=True)
    # Facts as gathering would leave them: a module's ansible_facts become the host's facts.
    (library / "given_facts.py").write_text(
        "#!/usr/bin/python\nfrom ansible.module_utils.basic import AnsibleModule\n"
        "m = AnsibleModule(argument_spec={'facts': {'type': 'dict', 'required': True}}, supports_check_mode=True)\n"
        "m.exit_json(changed=False, ansible_facts=m.params['facts'])\n")
    include = {"name": role, **({"tasks_from": tasks_from} if tasks_from else {})}
    playbook = tmp_path / "play.yml"
    playbook.write_text(json.dumps([{
        "hosts": "h1", "gather_facts": False,
        "tasks": [
            {"name": "Facts", "given_facts": {"facts": dict(facts, virtualization_type="none",
                                                            virtualization_role="host")}},
            {"name": "Role", "ansible.builtin.include_role": include},
            {"name": "Passed", "ansible.builtin.debug": {"msg": "PLATFORM PASSED"}},
        ],
    }]))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LIBRARY=f"{library}:{ROOT / 'library'}", ANSIBLE_CACHE_PLUGIN="memory",
               ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    exe = Path(sys.executable).with_name("ansible-playbook")
    return subprocess.run([str(exe), "--check", "-i", "h1,", "-c", "local", "-e",
                           f"ansible_python_interpreter={sys.executable}", str(playbook)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("name", ["Debian 13", "RedHat 9"])
def test_the_role_refuses_a_release_its_meta_does_not_list_before_anything_else(tmp_path, role, name):
    r = _run(tmp_path, role, FACTS[name])
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "PLATFORM PASSED" not in out, out[-3000:]
    message = (f"{name} is not supported by {role}, which implements {_releases(role)} "
               f"(roles/{role}/meta/main.yml); the fleet runs a host only on a release that every role of the "
               "host implements (docs/compatibility.md). Nothing was changed.")
    failures = [json.loads(line.split("=> ", 1)[1]) for line in out.splitlines()
                if line.startswith("fatal: [h1]: FAILED! => ")]
    assert [" ".join(f["msg"].split()) for f in failures] == [message], out[-3000:]
    # The refusal is the role's first decision: only its argument check and its fact gathering come before it.
    ran = [t.split(" : ", 1)[1] for t in re.findall(r"^TASK \[(.*?)\]", r.stdout, re.M) if t.startswith(f"{role} : ")]
    assert ran[-1] == "Refuse a release this role does not implement (meta/main.yml)", ran
    assert all(t.startswith("Validating arguments against arg spec") or t == "Gather the facts the role needs"
               for t in ran[:-1]), ran


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("name", ["Debian 12", "Ubuntu 24.04"])
def test_the_role_accepts_the_releases_its_meta_lists(tmp_path, role, name):
    r = _run(tmp_path, role, FACTS[name], tasks_from="platform")
    assert r.returncode == 0 and "PLATFORM PASSED" in r.stdout, (r.stdout + r.stderr)[-3000:]


@pytest.mark.parametrize("role", ROLES)
def test_no_release_is_written_in_the_role_and_no_rhel_path_is_left(role):
    base = ROOT / "roles" / role
    assert not list(base.rglob("*RedHat*")), "no role implements RHEL (meta/main.yml)"
    for path in [*base.glob("tasks/*.yml"), *base.glob("vars/*.yml")]:
        text = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("#"))
        assert not re.search(r"RHEL|RedHat|\bdnf\b|\byum\b|22\.04|24\.04|'12'|'9'", text), path
