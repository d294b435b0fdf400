"""Per-host nftables allow-list computed from the inventory.

The firewall owns one table (``inet triton_fleet``) and never touches the rest of the ruleset:
Docker's iptables-nft tables live beside it on serving nodes. It filters in ``prerouting`` at a
priority before Docker's DNAT (-100), so a port that Docker publishes for a container (Triton on
the serving nodes) is filtered by its original destination port, exactly like a host service.
Only packets addressed to this host are filtered (``fib daddr type local``); traffic that the host
merely forwards (containers talking out) is not this table's business.
"""

import ipaddress
import re

TABLE_FAMILY = "inet"
TABLE_NAME = "triton_fleet"
PRIORITY = -160  # before conntrack-based DNAT (-100), after conntrack itself (-200)
_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,30}$")


class FirewallError(ValueError):
    """Input that cannot produce a safe ruleset; the message says what to fix."""


def parse_network(value, where):
    """A CIDR or a bare address; anything else is an error naming where it came from."""
    if not isinstance(value, str) or not value.strip():
        raise FirewallError(f"{where}: {value!r} is not an address or CIDR (e.g. 10.0.0.0/24)")
    try:
        return ipaddress.ip_network(value.strip(), strict=True)
    except ValueError as exc:
        raise FirewallError(
            f"{where}: {value!r} is not a valid CIDR ({exc}); write it as network/prefix, e.g. 10.0.0.0/24, "
            "with no host bits set"
        ) from None


def _ports(service, where):
    ports = service.get("ports")
    if not isinstance(ports, list) or not ports:
        raise FirewallError(f"{where}: 'ports' must be a non-empty list of TCP port numbers")
    out = []
    for port in ports:
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise FirewallError(f"{where}: port {port!r} is not a TCP port number (1-65535)")
        out.append(port)
    return sorted(set(out))


def plan(host, groups, addresses, services, admin_networks, ssh_port=22):  # noqa: PLR0917 - mirrors the module options
    """Compute the allow-list of ``host``.

    groups: inventory groups (name -> list of hosts), as Ansible's ``groups`` variable.
    addresses: host -> service address ('' or None when the host has none).
    services: [{name, ports, on_groups, from_groups, from_networks}].
    Returns {"ssh": {port, sources}, "services": [{name, ports, sources}]} with sources as sorted
    network strings. Raises FirewallError before anything is rendered when any input is wrong,
    so a bad inventory never half-applies.
    """
    if host not in groups.get("all", []):
        raise FirewallError(f"host {host!r} is not in the inventory group 'all'")
    errors = []
    admin = []
    for i, net in enumerate(admin_networks or []):
        try:
            admin.append(parse_network(net, f"admin_networks[{i}]"))
        except FirewallError as exc:
            errors.append(str(exc))
    if not admin_networks:
        errors.append(
            "admin_networks is empty: SSH would be closed to everyone and the next run could not reach this host; "
            "set triton_fleet_admin_networks to the CIDRs your operators and controller connect from"
        )
    host_groups = {g for g, members in groups.items() if host in members}
    planned = []
    seen = set()
    for i, svc in enumerate(services or []):
        name = svc.get("name", "")
        where = f"service {name or i!r}"
        if not isinstance(name, str) or not _NAME_RE.match(name):
            errors.append(f"{where}: name must match {_NAME_RE.pattern}")
            continue
        if name in seen:
            errors.append(f"{where}: defined twice; service names must be unique")
            continue
        seen.add(name)
        try:
            ports = _ports(svc, where)
        except FirewallError as exc:
            errors.append(str(exc))
            continue
        unknown = [
            g for key in ("on_groups", "from_groups") for g in svc.get(key, []) or [] if g not in groups
        ]
        if unknown:
            errors.append(
                f"{where}: unknown inventory group(s) {', '.join(sorted(set(unknown)))}; "
                f"known groups: {', '.join(sorted(groups))}"
            )
            continue
        if not svc.get("on_groups"):
            errors.append(f"{where}: 'on_groups' is empty; name the groups whose hosts run this service")
            continue
        sources = set()
        for g in svc.get("from_groups", []) or []:
            for member in groups[g]:
                addr = addresses.get(member)
                if not addr:
                    errors.append(
                        f"{where}: host {member!r} of group {g!r} has no triton_fleet_service_address; "
                        "set it in the inventory"
                    )
                    continue
                try:
                    sources.add(parse_network(addr, f"{member}.triton_fleet_service_address"))
                except FirewallError as exc:
                    errors.append(str(exc))
        for j, net in enumerate(svc.get("from_networks", []) or []):
            try:
                sources.add(parse_network(net, f"{where}.from_networks[{j}]"))
            except FirewallError as exc:
                errors.append(str(exc))
        if not host_groups.intersection(svc["on_groups"]):
            continue
        planned.append({"name": name, "ports": ports, "sources": _sorted_nets(sources)})
    if errors:
        raise FirewallError("; ".join(errors))
    return {
        "ssh": {"port": ssh_port, "sources": _sorted_nets(admin)},
        "services": planned,
    }


def _sorted_nets(nets):
    return [str(n) for n in sorted(set(nets), key=lambda n: (n.version, n.network_address, n.prefixlen))]


def _split(sources):
    v4 = [s for s in sources if ipaddress.ip_network(s).version == 4]
    v6 = [s for s in sources if ipaddress.ip_network(s).version == 6]
    return v4, v6


def _allow_lines(ports, sources, comment):
    port_expr = str(ports[0]) if len(ports) == 1 else "{ " + ", ".join(str(p) for p in ports) + " }"
    v4, v6 = _split(sources)
    lines = []
    if v4:
        lines.append(f'ip saddr {{ {", ".join(v4)} }} tcp dport {port_expr} accept comment "{comment}"')
    if v6:
        lines.append(f'ip6 saddr {{ {", ".join(v6)} }} tcp dport {port_expr} accept comment "{comment}"')
    return lines


def render(plan_result, trusted_interfaces=("lo",), default_policy="drop"):
    """The nft script that atomically replaces this project's table (and only it)."""
    if default_policy not in ("drop", "accept"):
        raise FirewallError(f"default_policy must be 'drop' or 'accept', not {default_policy!r}")
    for iface in trusted_interfaces:
        if not re.match(r"^[A-Za-z0-9_.*+-]{1,15}$", iface):
            raise FirewallError(f"trusted interface {iface!r} is not an interface name")
    body = [
        f"type filter hook prerouting priority {PRIORITY}; policy accept;",
        "fib daddr type != local accept",
    ]
    body += [f'iifname "{i}" accept' for i in trusted_interfaces]
    body += [
        "ct state established,related accept",
        "ct state invalid drop",
        "meta l4proto { icmp, icmpv6 } accept",
    ]
    body += _allow_lines([plan_result["ssh"]["port"]], plan_result["ssh"]["sources"], "ssh from admin networks")
    for svc in plan_result["services"]:
        body += _allow_lines(svc["ports"], svc["sources"], svc["name"])
    if default_policy == "drop":
        body.append('meta l4proto { tcp, udp } counter drop comment "not in the allow-list"')
    lines = [
        "#!/usr/sbin/nft -f",
        "# Managed by triton-fleet (role host_baseline). Replaces table inet triton_fleet only.",
        f"table {TABLE_FAMILY} {TABLE_NAME}",
        f"delete table {TABLE_FAMILY} {TABLE_NAME}",
        f"table {TABLE_FAMILY} {TABLE_NAME} {{",
        "\tchain ingress {",
    ]
    lines += [f"\t\t{b}" for b in body]
    lines += ["\t}", "}", ""]
    return "\n".join(lines)
