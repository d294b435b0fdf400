"""Taking a serving node out of rotation at a gateway, and telling when its requests have finished.

The drain file (one per gateway host, ``/etc/triton-fleet/drained-nodes.json`` by default) is the one
record of which serving nodes are out of rotation: ``{"version": 1, "drained": {"<address>": {"host":
..., "since": <unix time>, "reason": ...}}}``. NGINX's upstream pools mark those addresses ``down``
(the nginx_gateway role reads the file on every run, so a converge in the middle of a roll keeps the
drain) and the OpenAI-compatible service re-reads it on SIGHUP.

A node is idle at a gateway when nothing that gateway sent it is still running:

* NGINX: after the reload that marked the node ``down``, new workers never open a connection to it;
  the old workers finish their requests and exit. So the node is idle for NGINX when no ``nginx``
  process holds an established TCP connection to one of the node's Triton ports (an old worker's idle
  keepalive connection also counts, conservatively, until the worker exits or the upstream keepalive
  timeout closes it).
* The OpenAI-compatible service: its ``/internal/nodes`` list of requests running on each node.

Python 3.11+ (runs on gateway hosts: Debian 12's python3, docs/compatibility.md).
"""

import json
import re

DRAIN_VERSION = 1

_SS_USERS = re.compile(r'\("(?P<name>[^"]+)",pid=(?P<pid>\d+)')


class DrainError(ValueError):
    pass


def empty_state():
    return {"version": DRAIN_VERSION, "drained": {}}


def parse_state(text, path="drain file"):
    """The drain state from the file's text ('' = no file yet). Raises DrainError on anything else."""
    if not text.strip():
        return empty_state()
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise DrainError(f"{path} is not JSON ({exc}); fix or remove it (it lists the drained serving nodes)") from None
    if not isinstance(data, dict) or data.get("version") != DRAIN_VERSION or not isinstance(data.get("drained"), dict):
        raise DrainError(f"{path} is not a version {DRAIN_VERSION} drain file ({{'version': 1, 'drained': {{...}}}})")
    for address, entry in data["drained"].items():
        if not isinstance(entry, dict) or not isinstance(entry.get("host", ""), str):
            raise DrainError(f"{path}: the entry of {address!r} must be an object with 'host', 'since', 'reason'")
    return data


def dump_state(state):
    return json.dumps(state, indent=2, sort_keys=True) + "\n"


def apply(state, address, host, drained, *, now, reason=""):
    """A new state with ``address`` drained (or back in rotation), and whether anything changed.

    Draining a node that is already drained keeps its first 'since' (the drain began then)."""
    if not address:
        raise DrainError("a node address is required")
    new = {"version": DRAIN_VERSION, "drained": dict(state.get("drained", {}))}
    if drained:
        if address in new["drained"]:
            return new, False
        new["drained"][address] = {"host": host, "since": int(now), "reason": reason}
        return new, True
    if address not in new["drained"]:
        return new, False
    del new["drained"][address]
    return new, True


def drained_addresses(state):
    return sorted(state.get("drained", {}))


def _split_hostport(text):
    if text.startswith("["):
        host, _, port = text[1:].partition("]:")
        return host, port
    host, _, port = text.rpartition(":")
    return host, port


def nginx_connections(ss_text, address, ports):
    """The established connections from nginx processes to ``address`` on any of ``ports``.

    ``ss_text`` is the output of ``ss -Htnp state established`` (columns: Recv-Q Send-Q Local Peer
    Process). Connections of other processes (the OpenAI-compatible service's gRPC channels) are left
    out: the service reports its own requests."""
    wanted = {str(p) for p in ports}
    out = []
    for line in ss_text.splitlines():
        cols = line.split()
        if len(cols) < 4:
            continue
        # With a state filter ss leaves the State column out; without, it is first.
        if not cols[0].isdigit():
            cols = cols[1:]
        if len(cols) < 4:
            continue
        local, peer = cols[2], cols[3]
        host, port = _split_hostport(peer)
        if host != address or port not in wanted:
            continue
        users = " ".join(cols[4:])
        procs = [(m.group("name"), int(m.group("pid"))) for m in _SS_USERS.finditer(users)]
        if not any(name == "nginx" for name, _ in procs):
            continue
        out.append({"local": local, "peer": peer, "pids": sorted({pid for name, pid in procs if name == "nginx"}),
                    "recv_q": int(cols[0]), "send_q": int(cols[1])})
    return out


def service_requests(nodes_doc, address):
    """The requests the OpenAI-compatible service has running on ``address`` (from /internal/nodes)."""
    out = []
    for node in (nodes_doc or {}).get("nodes", []):
        if node.get("address") == address:
            out.extend(node.get("requests", []))
    return out


def service_knows(nodes_doc, address):
    """Whether the service has ``address`` in its pool and sees it drained (after the SIGHUP)."""
    for node in (nodes_doc or {}).get("nodes", []):
        if node.get("address") == address:
            return bool(node.get("drained"))
    return None


def describe_busy(address, connections, requests):
    """A sentence naming what still runs on the node: for the timeout message."""
    parts = []
    if connections:
        shown = ", ".join(f"{c['local']} -> {c['peer']} (nginx pid {','.join(map(str, c['pids']))})"
                          for c in connections[:8])
        more = f" and {len(connections) - 8} more" if len(connections) > 8 else ""
        parts.append(f"{len(connections)} NGINX upstream connection(s) still open: {shown}{more}")
    if requests:
        shown = ", ".join(f"{r.get('id')} (running {r.get('running_s')} s)" for r in requests[:8])
        more = f" and {len(requests) - 8} more" if len(requests) > 8 else ""
        parts.append(f"{len(requests)} OpenAI API request(s) still running: {shown}{more}")
    return f"{address}: " + ("; ".join(parts) if parts else "nothing running")


# ---------------------------------------------------------------- the gateway's pool files
#
# The nginx_gateway role writes the pools' description (pools.json: each pool's file, port and server
# parameters, the serving nodes' addresses, the local OpenAI-compatible service); the pool files that
# gateway.conf includes in its upstream blocks are made from it and the drain file, by the role on
# every run and by the rolling playbook at each drain, so both give the same lines.

_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


def parse_pools(text, path="pools.json"):
    try:
        spec = json.loads(text)
    except ValueError as exc:
        raise DrainError(f"{path} is not JSON ({exc}); converge the gateway (site.yml --tags gateway)") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("pools"), list) or not isinstance(spec.get("servers"), list):
        raise DrainError(f"{path} has no 'pools' and 'servers' lists; converge the gateway (site.yml --tags gateway)")
    if not spec["servers"]:
        raise DrainError(f"{path} lists no serving node")
    for pool in spec["pools"]:
        if not isinstance(pool, dict) or not _NAME.match(str(pool.get("file", ""))) or not str(pool.get("port", "")).isdigit():
            raise DrainError(f"{path}: every pool needs a plain 'file' name and a numeric 'port', got {pool!r}")
    return spec


def render_pools(spec, drained):
    """Pool file name -> its text: one ``server`` line per serving node, ``down`` for the drained ones."""
    out = {}
    drained = set(drained)
    for pool in spec["pools"]:
        lines = [f"# {pool.get('name', pool['file'])}: written by triton-fleet from pools.json and the drain file"]
        for address in spec["servers"]:
            host = f"[{address}]" if ":" in address else address
            params = str(pool.get("params", "")).strip()
            down = " down" if address in drained else ""
            lines.append(f"server {host}:{int(pool['port'])}{' ' + params if params else ''}{down};")
        out[pool["file"]] = "\n".join(lines) + "\n"
    return out


def pool_ports(spec):
    return sorted({int(p["port"]) for p in spec["pools"]})
