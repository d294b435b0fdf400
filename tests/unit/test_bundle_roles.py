"""Every package a role installs is in the offline bundle: each apt/package task's request is named in the
role's tasks/bundle.yml, and playbooks/tasks/bundle-needs.yml asks every such role."""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
MODULES = ("ansible.builtin.apt", "ansible.builtin.package", "apt", "package")


def _tasks(items):
    for task in items or []:
        if not isinstance(task, dict):
            continue
        yield task
        for key in ("block", "rescue", "always"):
            yield from _tasks(task.get(key))


def _package_requests():
    """(role, file, request) of every task that installs packages by name."""
    for path in sorted(ROOT.glob("roles/*/tasks/*.yml")):
        if path.name == "bundle.yml":
            continue
        for task in _tasks(yaml.safe_load(path.read_text())):
            for module in MODULES:
                args = task.get(module)
                if isinstance(args, dict) and args.get("name") and args.get("state", "present") == "present":
                    yield path.parts[-3], path.name, args["name"]


def _words(request):
    """The variables (or literal package names) a request is made of."""
    text = request if isinstance(request, str) else " ".join(map(str, request))
    if "{{" not in text:
        return set(re.findall(r"[A-Za-z0-9.+-]+", text))
    names = set()
    for expr in re.findall(r"{{(.*?)}}", text, re.S):
        bare = re.sub(r"'[^']*'", "", expr)
        names |= {w for w in re.findall(r"[a-z_][a-z0-9_]*", bare) if "_" in w and not w.startswith("_")}
    return names


def test_every_installed_package_is_in_the_roles_bundle_tasks():
    found = list(_package_requests())
    assert len(found) >= 12, found
    missing = []
    for role, name, request in found:
        bundle = ROOT / "roles" / role / "tasks" / "bundle.yml"
        text = bundle.read_text() if bundle.exists() else ""
        for word in sorted(_words(request)):
            if word not in text:
                missing.append(f"roles/{role}/tasks/{name}: {word!r} is installed but roles/{role}/tasks/bundle.yml does not name it")
    assert not missing, "\n".join(missing)


def test_the_bundle_playbook_asks_every_role_that_installs_packages():
    roles = {role for role, _, _ in _package_requests()}
    text = (ROOT / "playbooks" / "tasks" / "bundle-needs.yml").read_text()
    asked = set(re.findall(r"name: ([a-z_]+)\n\s+tasks_from: bundle.yml", text))
    for line in re.findall(r"loop: \[([a-z_, ]+)\]", text):
        asked |= {r.strip() for r in line.split(",")}
    assert roles <= asked, f"playbooks/tasks/bundle-needs.yml does not ask {sorted(roles - asked)}"
