#!/usr/bin/python
# Copyright: triton-fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
---
module: triton_fleet_drain_wait
short_description: Wait until a drained serving node has nothing left running from this gateway
description:
  - Polls, on a gateway host, the NGINX connections to the node's Triton ports (C(ss)) and the requests
    the OpenAI-compatible service has running on it (its loopback C(/internal/nodes)), until both have
    been empty for I(settle) consecutive polls.
  - NGINX opens no new connection to a server marked C(down) after the reload; the old workers keep theirs
    until their requests end. So an empty list means nothing this gateway sent the node is still running.
  - After I(timeout) seconds it fails and names every connection and request still running; nothing is
    changed either way.
version_added: "1.0.0"
options:
  address:
    description: The serving node's address (as in the gateway's pools).
    type: str
    required: true
  ports:
    description: The node's Triton ports the gateway proxies to (HTTP and gRPC).
    type: list
    elements: int
    default: [8000, 8001]
  service_url:
    description: The OpenAI-compatible service's loopback base URL; empty where the gateway runs none.
    type: str
    default: ""
  timeout:
    description: Seconds to wait at most.
    type: int
    default: 300
  interval:
    description: Seconds between polls.
    type: float
    default: 1.0
  settle:
    description: Consecutive empty polls needed (a request can be between NGINX and the node for a moment).
    type: int
    default: 2
attributes:
  check_mode:
    description: Can run in check mode and return the changed status without modifying the target.
    support: full
    details: It only reads; check mode polls once and reports what runs.
  diff_mode:
    description: Returns details on what has changed (or would change in check mode) when run with C(--diff).
    support: none
author:
  - triton-fleet contributors
"""

EXAMPLES = r"""
- name: Wait for node1's requests through this gateway to finish
  triton_fleet_drain_wait:
    address: 10.0.0.11
    service_url: http://127.0.0.1:8090
    timeout: 300
"""

RETURN = r"""
waited_s:
  description: Seconds until the node was idle at this gateway.
  returned: success
  type: float
  sample: 3.2
peak:
  description: The most NGINX connections and service requests seen on the node while waiting.
  returned: always
  type: dict
  sample: {"nginx_connections": 2, "service_requests": 1}
"""

import json
import time
from urllib.error import URLError
from urllib.request import urlopen

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.triton_fleet.drain import describe_busy, nginx_connections, service_knows, service_requests


def service_doc(module, url):
    if not url:
        return None
    try:
        with urlopen(url.rstrip("/") + "/internal/nodes", timeout=5) as resp:
            return json.loads(resp.read().decode("utf-8"))
    except (URLError, OSError, ValueError) as exc:
        module.fail_json(msg=f"cannot read the OpenAI-compatible service's node list at {url}/internal/nodes: {exc}")


def main():
    module = AnsibleModule(
        argument_spec={
            "address": {"type": "str", "required": True},
            "ports": {"type": "list", "elements": "int", "default": [8000, 8001]},
            "service_url": {"type": "str", "default": ""},
            "timeout": {"type": "int", "default": 300},
            "interval": {"type": "float", "default": 1.0},
            "settle": {"type": "int", "default": 2},
        },
        supports_check_mode=True,
    )
    p = module.params
    ss = module.get_bin_path("ss", required=True)
    start = time.monotonic()
    quiet = 0
    peak = {"nginx_connections": 0, "service_requests": 0}
    while True:
        rc, out, err = module.run_command([ss, "-Htnp", "state", "established"])
        if rc != 0:
            module.fail_json(msg=f"ss failed: {err.strip()}", peak=peak)
        conns = nginx_connections(out, p["address"], p["ports"])
        doc = service_doc(module, p["service_url"])
        # systemctl reload only sends the signal: give the service a moment to re-read the file.
        if doc is not None and service_knows(doc, p["address"]) is False and time.monotonic() - start > 10:
            module.fail_json(
                msg=f"the OpenAI-compatible service does not see {p['address']} as drained: reload it "
                "(systemctl reload triton-fleet-openai-api) after writing the drain file",
                peak=peak,
            )
        reqs = service_requests(doc, p["address"])
        if doc is not None and service_knows(doc, p["address"]) is False:
            reqs = reqs or [{"id": "(the service has not re-read the drain file yet)", "running_s": 0}]
        peak["nginx_connections"] = max(peak["nginx_connections"], len(conns))
        peak["service_requests"] = max(peak["service_requests"], len(reqs))
        quiet = quiet + 1 if not conns and not reqs else 0
        waited = round(time.monotonic() - start, 2)
        if quiet >= p["settle"]:
            module.exit_json(changed=False, waited_s=waited, peak=peak)
        if module.check_mode:
            module.exit_json(changed=False, waited_s=waited, peak=peak, busy=describe_busy(p["address"], conns, reqs))
        if waited >= p["timeout"]:
            module.fail_json(
                msg=f"the drain did not finish in {p['timeout']} s, so the node is not changed and the roll stops "
                f"here. Still running on {describe_busy(p['address'], conns, reqs)}. Wait for them or raise "
                "triton_fleet_rolling_drain_timeout, then run the roll again (it starts over with this node).",
                waited_s=waited,
                peak=peak,
            )
        time.sleep(p["interval"])


if __name__ == "__main__":
    main()
