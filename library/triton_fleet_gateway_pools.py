#!/usr/bin/python
# Copyright: triton-fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
---
module: triton_fleet_gateway_pools
short_description: Write the gateway's upstream pool files from its pools description and the drain file
description:
  - Reads the pools description the nginx_gateway role writes (C(pools.json) in I(dir)) and the drain file,
    and writes one file per pool (the C(server) lines that gateway.conf includes in its C(upstream) blocks),
    drained serving nodes marked C(down).
  - With I(nginx_conf) set, tests the whole configuration with C(nginx -t) after writing and puts the previous
    pool files back when the test fails, so a running NGINX is never left with a configuration it rejects.
  - It does not reload NGINX; the caller does (a graceful reload lets running requests finish).
version_added: "1.0.0"
options:
  dir:
    description: The directory with C(pools.json), where the pool files are written.
    type: path
    required: true
  spec:
    description: The pools description itself (the role passes it); default read from C(pools.json) in I(dir).
    type: dict
  drain_file:
    description: The drain file (serving nodes out of rotation; see M(triton_fleet_drain)). A missing one drains nothing.
    type: path
    default: /etc/triton-fleet/drained-nodes.json
  nginx_conf:
    description: NGINX configuration to test with C(nginx -t) after writing; empty for no test.
    type: path
    default: ""
attributes:
  check_mode:
    description: Can run in check mode and return the changed status without modifying the target.
    support: full
  diff_mode:
    description: Returns details on what has changed (or would change in check mode) when run with C(--diff).
    support: full
    details: The diff is the pool files before and after, one after the other.
author:
  - triton-fleet contributors
"""

EXAMPLES = r"""
- name: Write the pool files (drained nodes down) and test the configuration
  triton_fleet_gateway_pools:
    dir: /etc/nginx/triton-fleet
    nginx_conf: /etc/nginx/nginx.conf
  notify: nginx_gateway reload
"""

RETURN = r"""
files:
  description: The pool files written or checked.
  returned: success
  type: list
  elements: str
  sample: ["/etc/nginx/triton-fleet/pool-triton-http.conf"]
drained:
  description: The addresses marked down.
  returned: success
  type: list
  elements: str
  sample: ["10.0.0.11"]
ports:
  description: The Triton ports the pools proxy to (what a drain waits on).
  returned: success
  type: list
  elements: int
  sample: [8000, 8001]
service_url:
  description: The loopback URL of the OpenAI-compatible service on this gateway ('' where none runs).
  returned: success
  type: str
  sample: http://127.0.0.1:8090
"""

import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.triton_fleet.drain import (
    DrainError,
    drained_addresses,
    parse_pools,
    parse_state,
    pool_ports,
    render_pools,
)


def _read(path):
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def _write(path, text):
    fd, tmp = tempfile.mkstemp(prefix=".pool.", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        tmp = None
    finally:
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)


def main():
    module = AnsibleModule(
        argument_spec={
            "dir": {"type": "path", "required": True},
            "spec": {"type": "dict"},
            "drain_file": {"type": "path", "default": "/etc/triton-fleet/drained-nodes.json"},
            "nginx_conf": {"type": "path", "default": ""},
        },
        supports_check_mode=True,
    )
    p = module.params
    spec_path = os.path.join(p["dir"], "pools.json")
    try:
        if p["spec"] is not None:
            spec = parse_pools(json.dumps(p["spec"]), "the pools description")
        else:
            spec_text = _read(spec_path)
            if spec_text is None:
                raise DrainError(f"{spec_path} does not exist; converge the gateway first (site.yml --tags gateway)")
            spec = parse_pools(spec_text, spec_path)
        drained = drained_addresses(parse_state(_read(p["drain_file"]) or "", p["drain_file"]))
    except DrainError as exc:
        module.fail_json(msg=f"pool files not changed: {exc}")
    wanted = render_pools(spec, drained)
    before = {name: _read(os.path.join(p["dir"], name)) for name in wanted}
    changed_files = [name for name, text in wanted.items() if before[name] != text]
    out = {"changed": bool(changed_files), "files": [os.path.join(p["dir"], n) for n in sorted(wanted)],
           "drained": [a for a in drained if a in spec["servers"]], "ports": pool_ports(spec),
           "service_url": str(spec.get("service_url", ""))}
    if module._diff:
        out["diff"] = [{"before": before[n] or "", "after": wanted[n], "before_header": os.path.join(p["dir"], n),
                        "after_header": os.path.join(p["dir"], n)} for n in changed_files]
    if not changed_files or module.check_mode:
        module.exit_json(**out)
    if not os.path.isdir(p["dir"]):
        os.makedirs(p["dir"], mode=0o755)
    for name in changed_files:
        _write(os.path.join(p["dir"], name), wanted[name])
    if p["nginx_conf"]:
        nginx = module.get_bin_path("nginx", required=True)
        rc, _, err = module.run_command([nginx, "-t", "-q", "-c", p["nginx_conf"]])
        if rc != 0:
            for name in changed_files:
                path = os.path.join(p["dir"], name)
                if before[name] is None:
                    os.unlink(path)
                else:
                    _write(path, before[name])
            module.fail_json(msg=f"nginx -t rejected the new pool files, the previous ones are back: {err.strip()}")
    module.exit_json(**out)


if __name__ == "__main__":
    main()
