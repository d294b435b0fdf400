"""Supported managed-host platforms: a host runs on the releases that every role it runs implements.

Each role lists the releases it implements in its ``meta/main.yml`` (``galaxy_info.platforms``, Galaxy's
names: Debian and Ubuntu by codename). A host runs the roles of its groups (``FLEET_ROLES``, the plays of
site.yml; tests/unit/test_platforms.py holds the two together), so its distribution must be listed by all of
them. The preflight (library/triton_fleet_platforms.py) refuses any other host before anything is changed,
naming its release, the roles that lack it and the releases its roles share. Pure Python, no Ansible import.
"""

# Galaxy's (platform name, version) in meta/main.yml -> the release as Ansible's facts name it.
RELEASES = {
    ("Debian", "bookworm"): ("Debian", "12"),
    ("Debian", "trixie"): ("Debian", "13"),
    ("Ubuntu", "jammy"): ("Ubuntu", "22.04"),
    ("Ubuntu", "noble"): ("Ubuntu", "24.04"),
}

# The interpreter Ansible finds on each release (its python3). The node-side code's Python floor is the oldest
# of the releases the fleet accepts (tests/unit/test_platforms.py checks the Makefile's vermin target, the
# interpreters of tools/run-node-tests and the service's requires-python against it).
PLATFORM_PYTHON = {
    ("Debian", "12"): "3.11",
    ("Debian", "13"): "3.13",
    ("Ubuntu", "22.04"): "3.10",
    ("Ubuntu", "24.04"): "3.12",
}

# The roles each group's plays run in site.yml (with the roles those roles include). "all" is every host.
# The plays may skip a role on some hosts (no GPU, grafana_install false, ...); the check does not: a
# release is supported where every role a host may run implements it.
FLEET_ROLES = {
    "all": ("host_baseline", "node_exporter"),
    "bundle_servers": ("bundle_server",),
    "gpu_nodes": ("nvidia_driver", "container_runtime", "model_artifacts", "trtllm_engine", "triton_server",
                  "dcgm_exporter", "container_image"),
    "gateways": ("openai_api", "nginx_gateway", "nginx_exporter"),
    "monitoring": ("prometheus", "alertmanager", "grafana"),
}


class PlatformsError(ValueError):
    """A role's platform declaration is unusable (unknown name or codename, no platforms at all)."""


def release(distribution, version, major):
    """A host's release from its facts: Ubuntu by version (22.04), every other distribution by major (Debian 12)."""
    return (distribution, version if distribution == "Ubuntu" else major)


def label(rel):
    return f"{rel[0]} {rel[1]}"


def labels(releases):
    return ", ".join(label(r) for r in sorted(releases, key=lambda r: (r[0], _version_key(r[1]))))


def _version_key(version):
    return tuple(int(p) if p.isdigit() else 0 for p in str(version).split("."))


def role_releases(role, meta):
    """The releases one role's meta/main.yml lists, as ``{(distribution, version)}``."""
    info = meta.get("galaxy_info") if isinstance(meta, dict) else None
    platforms = info.get("platforms") if isinstance(info, dict) else None
    if not isinstance(platforms, list) or not platforms:
        raise PlatformsError(f"roles/{role}/meta/main.yml lists no galaxy_info.platforms")
    out = set()
    for entry in platforms:
        name = entry.get("name") if isinstance(entry, dict) else None
        versions = entry.get("versions") if isinstance(entry, dict) else None
        if not isinstance(versions, list) or not versions:
            raise PlatformsError(f"roles/{role}/meta/main.yml: platform {name!r} has no versions list")
        for version in versions:
            key = (name, str(version))
            if key not in RELEASES:
                known = ", ".join(f"{n} {v}" for n, v in RELEASES)
                raise PlatformsError(f"roles/{role}/meta/main.yml: platform {name} {version} is not one this "
                                     f"project knows ({known}); add it to RELEASES in "
                                     "module_utils/triton_fleet/platforms.py with the release it names")
            out.add(RELEASES[key])
    return out


def role_platform(role, meta, distribution, version, major):
    """Whether one role implements a host's release: ``{release, supported, releases}`` (labels).

    The roles whose tasks differ by release (nvidia_driver, container_runtime) check it first, from the same
    meta/main.yml the preflight reads, so that a role run on its own (Molecule, an operator's playbook) refuses
    what it does not implement as the fleet's preflight would, naming what it does implement.
    """
    if not distribution:
        raise PlatformsError(f"{role}: no distribution facts were gathered")
    releases = role_releases(role, meta)
    rel = release(distribution, str(version or ""), str(major or ""))
    return {"release": label(rel), "supported": rel in releases, "releases": labels(releases)}


def host_roles(groups):
    """The roles a host in ``groups`` runs, in FLEET_ROLES order."""
    out = []
    for group, roles in FLEET_ROLES.items():
        if group == "all" or group in groups:
            out += [r for r in roles if r not in out]
    return out


def supported(roles, by_role):
    """The releases every one of ``roles`` implements (``by_role``: role -> releases)."""
    missing = [r for r in roles if r not in by_role]
    if missing:
        raise PlatformsError(f"no meta/main.yml for the roles {', '.join(missing)}")
    common = set.intersection(*(set(by_role[r]) for r in roles)) if roles else set()
    if not common:
        raise PlatformsError(f"the roles {', '.join(roles)} share no platform in their meta/main.yml")
    return common


def check(hosts, by_role):
    """``(problems, platforms)`` for ``hosts``: host -> {groups, distribution, version, major}.

    ``platforms`` maps every host to its release label; ``problems`` holds one message per set of hosts that
    share a refused release and the reason (empty when every host is supported).
    """
    refused, platforms = {}, {}
    for host in sorted(hosts):
        item = hosts[host] or {}
        distribution = item.get("distribution") or ""
        if not distribution:
            raise PlatformsError(f"{host}: no distribution facts were gathered")
        rel = release(distribution, str(item.get("version") or ""), str(item.get("major") or ""))
        platforms[host] = label(rel)
        roles = host_roles(item.get("groups") or [])
        ok = supported(roles, by_role)
        if rel in ok:
            continue
        lacking = tuple(r for r in roles if rel not in by_role[r])
        refused.setdefault((rel, lacking, tuple(sorted(ok))), []).append(host)
    problems = []
    for (rel, lacking, ok), names in refused.items():
        problems.append(
            f"{', '.join(names)} {'runs' if len(names) == 1 else 'run'} {label(rel)}, which "
            f"{', '.join(lacking)} {'does' if len(lacking) == 1 else 'do'} not support (roles/<role>/meta/main.yml): "
            f"the roles of {'this host' if len(names) == 1 else 'these hosts'} support {labels(ok)}. "
            "Install a supported release or leave the host out of the inventory (docs/compatibility.md)")
    return problems, platforms
