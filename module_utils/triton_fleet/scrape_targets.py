"""Prometheus file_sd targets generated from the Ansible inventory.

Pure logic (no Ansible import): the `prometheus` role's filter plugin feeds it the inventory's
`groups` and a per-host view of `hostvars`, and renders the result as one file_sd JSON file per job.

Every target carries three labels besides the ones Prometheus adds (`job`, `instance`):
  host     inventory hostname (stable across IP changes; dashboards and alerts group by it)
  group    the host's most specific fleet group: the GPU child group of `gpu_nodes` (e.g. `gpu_a100`,
           `lab_cpu`) for serving hosts, else `gateways` / `monitoring` / `engine_builders`
  gpu_sku  the profile's `gpu.sku` (e.g. `a100-80gb-sxm`, `cpu` in the lab) for serving hosts,
           `none` for hosts that serve nothing
"""

import ipaddress

FLEET_GROUPS = ("gpu_nodes", "gateways", "monitoring", "engine_builders")
SERVING_GROUP = "gpu_nodes"
ADDRESS_VAR = "triton_fleet_service_address"


class ScrapeTargetError(ValueError):
    """The inventory or the job list cannot produce a valid scrape configuration."""


def _hosts_of(groups, name):
    hosts = groups.get(name) or []
    if isinstance(hosts, str):
        hosts = [hosts]
    return list(hosts)


def gpu_child_groups(groups):
    """Child groups of gpu_nodes: every group whose hosts are all in gpu_nodes, except gpu_nodes itself.

    Ansible's `groups` is flat, so children are recognised by name (`gpu_*`, `lab_*`) or, failing
    that, by being a non-empty proper subset of gpu_nodes that is not one of the fleet groups.
    """
    serving = set(_hosts_of(groups, SERVING_GROUP))
    children = []
    for name in sorted(groups):
        if name in FLEET_GROUPS or name in ("all", "ungrouped"):
            continue
        members = set(_hosts_of(groups, name))
        if members and members <= serving:
            children.append(name)
    # Prefer conventional names first so a host in two subsets gets the GPU-kind group.
    children.sort(key=lambda n: (not (n.startswith("gpu_") or n.startswith("lab_")), n))
    return children


def host_group(host, groups, children=None):
    """The `group` label of a host: its GPU child group, else its first fleet group."""
    if children is None:
        children = gpu_child_groups(groups)
    for name in children:
        if host in _hosts_of(groups, name):
            return name
    for name in FLEET_GROUPS:
        if host in _hosts_of(groups, name):
            return name
    return "ungrouped"


def host_device(hvars):
    """`gpu` or `cpu`: the host var `triton_fleet_device`, else the profile's `device`, else `gpu`."""
    device = hvars.get("triton_fleet_device")
    if not device:
        profile = hvars.get("triton_fleet_profile") or {}
        device = profile.get("device") if isinstance(profile, dict) else None
    device = str(device or "gpu").lower()
    if device not in ("gpu", "cpu"):
        raise ScrapeTargetError(
            f"triton_fleet_device is {device!r}; it must be 'gpu' or 'cpu'. Fix the host var (or the profile)."
        )
    return device


def host_gpu_sku(host, hvars, groups, children=None):
    """The `gpu_sku` label: profile gpu.sku > host var triton_fleet_gpu_sku > child group name > cpu/unknown."""
    if host not in _hosts_of(groups, SERVING_GROUP):
        return "none"
    profile = hvars.get("triton_fleet_profile") or {}
    if isinstance(profile, dict):
        sku = (profile.get("gpu") or {}).get("sku")
        if sku:
            return str(sku)
    if hvars.get("triton_fleet_gpu_sku"):
        return str(hvars["triton_fleet_gpu_sku"])
    if host_device(hvars) == "cpu":
        return "cpu"
    group = host_group(host, groups, children)
    if group.startswith("gpu_"):
        return group[len("gpu_") :]
    return "unknown"


def has_gpu(host, hvars, groups):
    """True when the host serves on a GPU (so a DCGM exporter runs there)."""
    return host in _hosts_of(groups, SERVING_GROUP) and host_device(hvars) == "gpu"


def _address(host, hvars):
    addr = hvars.get(ADDRESS_VAR)
    if not addr:
        raise ScrapeTargetError(
            f"host {host} has no {ADDRESS_VAR}; every host needs it (the IP its services bind to). "
            "Set it in the inventory."
        )
    addr = str(addr)
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        if "/" in addr or ":" in addr or " " in addr:
            raise ScrapeTargetError(
                f"host {host}: {ADDRESS_VAR}={addr!r} is not an IP address or host name. Set a plain address."
            ) from None
        return addr
    if ip.is_unspecified:
        raise ScrapeTargetError(
            f"host {host}: {ADDRESS_VAR}={addr} is the wildcard address; Prometheus cannot scrape it. "
            "Set the host's own IP on the service network."
        )
    return f"[{addr}]" if ip.version == 6 else addr


def validate_jobs(jobs):
    """Check the job list shape; returns it normalised (dicts with job, group, port, gpu_only)."""
    if not isinstance(jobs, list) or not jobs:
        raise ScrapeTargetError("prometheus_scrape_jobs must be a non-empty list of {job, group, port}.")
    seen = set()
    out = []
    for i, job in enumerate(jobs):
        if not isinstance(job, dict):
            raise ScrapeTargetError(f"prometheus_scrape_jobs[{i}] must be a dict with job, group and port.")
        missing = [k for k in ("job", "group", "port") if k not in job]
        if missing:
            raise ScrapeTargetError(f"prometheus_scrape_jobs[{i}] lacks {', '.join(missing)}.")
        name = str(job["job"])
        if not name.replace("_", "").isalnum():
            raise ScrapeTargetError(f"job name {name!r} must be letters, digits and underscores.")
        if name in seen:
            raise ScrapeTargetError(f"job {name!r} appears twice in prometheus_scrape_jobs; names must be unique.")
        seen.add(name)
        try:
            port = int(job["port"])
        except (TypeError, ValueError):
            raise ScrapeTargetError(f"job {name!r}: port {job['port']!r} is not a number.") from None
        if not 0 < port < 65536:
            raise ScrapeTargetError(f"job {name!r}: port {port} is outside 1-65535.")
        out.append({**job, "job": name, "port": port, "gpu_only": bool(job.get("gpu_only", False))})
    return out


def build_targets(groups, hostvars, jobs):
    """Return {job: [file_sd entry, ...]} with one entry per host (sorted by host).

    groups:   Ansible's `groups` (group name -> list of hosts)
    hostvars: host -> dict with at least triton_fleet_service_address for every host in a job's group
    jobs:     list of {job, group, port, gpu_only?}; group `all` means every host
    """
    jobs = validate_jobs(jobs)
    children = gpu_child_groups(groups)
    result = {}
    for job in jobs:
        members = _hosts_of(groups, job["group"])
        entries = []
        for host in sorted(set(members)):
            hvars = hostvars.get(host) or {}
            if job["gpu_only"] and not has_gpu(host, hvars, groups):
                continue
            entries.append(
                {
                    "targets": [f"{_address(host, hvars)}:{job['port']}"],
                    "labels": {
                        "host": host,
                        "group": host_group(host, groups, children),
                        "gpu_sku": host_gpu_sku(host, hvars, groups, children),
                    },
                }
            )
        result[job["job"]] = entries
    return result


def hostvars_subset(
    hostvars, hosts, keys=(ADDRESS_VAR, "triton_fleet_device", "triton_fleet_gpu_sku", "triton_fleet_profile")
):
    """Copy only the keys the generator reads (Ansible's HostVars is lazy and large)."""
    out = {}
    for host in hosts:
        hv = hostvars[host] if host in hostvars else {}
        out[host] = {k: hv[k] for k in keys if k in hv}
    return out
