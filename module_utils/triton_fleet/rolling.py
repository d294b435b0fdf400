"""How many serving nodes a rolling change may take out of rotation at once.

Inputs: each node's capacity (requests it runs at once: the profile's ``limits.max_batch_size`` times
``parallel.replicas_per_host``, as planned; never re-derived), the load measured at the gateways
(the peak of the mean number of requests in flight over a recent window, from Prometheus), the batch
size the operator asked for (a count or a percentage of the nodes) and the margin (the share of the
remaining capacity the load may use while a batch is out).

The batch is the one asked for, cut down to the largest size whose worst case (the batch takes the
nodes with the most capacity) still carries the load; when not even one node can go, the roll is
refused unless forced. Controller-side (Python 3.12+ there), kept to the managed hosts' 3.11 floor like the rest of module_utils.
"""

import math
import re

_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


class RollError(ValueError):
    pass


def batch_request(value, node_count):
    """The number of nodes the operator asked for per batch: an int >= 1 or 'N%' of the nodes (at least 1)."""
    if node_count < 1:
        raise RollError("there is no serving node to roll (gpu_nodes is empty or limited away)")
    if isinstance(value, bool):
        raise RollError(f"rolling_batch_size must be a count or a percentage such as '25%', got {value!r}")
    if isinstance(value, int):
        n = value
    else:
        text = str(value).strip()
        m = _PERCENT.match(text)
        if m:
            pct = float(m.group(1))
            if not 0 < pct <= 100:
                raise RollError(f"rolling_batch_size {text} must be a percentage in (0, 100]")
            n = max(1, int(math.floor(node_count * pct / 100.0)))
        elif text.isdigit():
            n = int(text)
        else:
            raise RollError(f"rolling_batch_size must be a count or a percentage such as '25%', got {value!r}")
    if n < 1:
        raise RollError(f"rolling_batch_size must be at least 1, got {value!r}")
    return min(n, node_count)


def node_capacity(profile):
    """Requests a node runs at once, from its serving profile."""
    try:
        per_replica = int(profile["limits"]["max_batch_size"])
        replicas = int(profile.get("parallel", {}).get("replicas_per_host", 1))
    except (KeyError, TypeError, ValueError) as exc:
        raise RollError(f"the serving profile has no limits.max_batch_size ({exc}); run the preflight stage") from exc
    if per_replica < 1 or replicas < 1:
        raise RollError("the serving profile's max_batch_size and replicas_per_host must be at least 1")
    return per_replica * replicas


def plan(capacities, measured_load, batch_size, *, margin=0.8, force=False, roll=None):
    """The roll's batches and the reasoning behind their size.

    ``capacities``: every serving node -> requests it runs at once. ``roll``: the nodes to change, in
    order (default all; nodes left out still carry load). ``measured_load``: peak mean
    requests in flight at the gateways (None: no measurement). Returns ``{"batch_size", "batches",
    "asked", "capacity_total", "measured_load", "allowed", "forced", "reason"}``; raises RollError when
    the roll must not start.
    """
    nodes = list(capacities) if roll is None else list(roll)
    unknown = [n for n in nodes if n not in capacities]
    if unknown:
        raise RollError(f"no serving profile for {', '.join(unknown)}: run the preflight stage")
    asked = batch_request(batch_size, len(nodes))
    if not 0 < margin <= 1:
        raise RollError(f"rolling_capacity_margin must be in (0, 1], got {margin}")
    total = sum(capacities.values())
    largest_first = sorted((capacities[n] for n in nodes), reverse=True)

    def remaining(b):
        return total - sum(largest_first[:b])

    allowed = 0
    if measured_load is not None:
        if measured_load < 0:
            raise RollError(f"the measured load cannot be negative ({measured_load})")
        for b in range(1, len(nodes) + 1):
            if remaining(b) > 0 and measured_load <= margin * remaining(b):
                allowed = b
            else:
                break
    out = {"asked": asked, "capacity_total": total, "measured_load": measured_load, "allowed": allowed,
           "margin": margin, "forced": False}
    if measured_load is None:
        if not force:
            raise RollError(
                "no measured load: Prometheus gave no gateway request figures for the window, so the roll cannot "
                "tell whether the other nodes carry the traffic. Check that monitoring scrapes the gateways "
                "(job gateway-mtail), or set rolling_force=true to roll without the capacity check")
        size, reason = asked, f"forced without a load measurement: {asked} node(s) per batch as asked"
        out["forced"] = True
    elif allowed == 0:
        if not force:
            b1 = remaining(1)
            raise RollError(
                f"the remaining nodes cannot carry the measured load: {measured_load:.2f} requests in flight at peak, "
                f"and with one node out the others run {b1} at once ({margin:.0%} of it is {margin * b1:.2f}). "
                "Add serving nodes, roll when the load is lower, or set rolling_force=true (requests will queue "
                "or fail while a node is out)")
        size, reason = asked, f"forced: {asked} node(s) per batch although the others cannot carry the load"
        out["forced"] = True
    elif asked > allowed:
        size = allowed
        reason = (f"{asked} node(s) per batch asked, {allowed} allowed: with {allowed} out the others run "
                  f"{remaining(allowed)} at once, {margin:.0%} of it carries the peak load of {measured_load:.2f}")
    else:
        size = asked
        reason = (f"{asked} node(s) per batch: with them out the others run {remaining(asked)} at once, "
                  f"{margin:.0%} of it carries the peak load of {measured_load:.2f}")
    out["batch_size"] = size
    out["batches"] = [nodes[i:i + size] for i in range(0, len(nodes), size)]
    out["reason"] = reason
    return out


def concurrency_from_prometheus(response):
    """The single value of an instant-query answer (``/api/v1/query``), or None when there is none."""
    data = (response or {}).get("data", {})
    if (response or {}).get("status") != "success":
        raise RollError(f"Prometheus answered {(response or {}).get('status')}: {(response or {}).get('error', '')}")
    result = data.get("result") or []
    if data.get("resultType") == "scalar":
        value = float(result[1])
        return None if math.isnan(value) else value
    values = [float(r["value"][1]) for r in result if "value" in r]
    values = [v for v in values if not math.isnan(v)]
    return sum(values) if values else None
