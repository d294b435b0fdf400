"""Run an Ansible module's main() in-process and return its JSON result (for the engine/model-cache tests)."""

import io
import json
import sys
from contextlib import redirect_stdout

from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes


def run_module(mod, args, check_mode=False, diff=True):
    payload = dict(args)
    payload["_ansible_check_mode"] = check_mode
    payload["_ansible_diff"] = diff
    basic._ANSIBLE_ARGS = to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": payload}))
    basic._ANSIBLE_PROFILE = "legacy"
    buf = io.StringIO()
    try:
        with redirect_stdout(buf):
            mod.main()
    except SystemExit:
        pass
    finally:
        basic._ANSIBLE_ARGS = None
        basic._ANSIBLE_PROFILE = None
    out = buf.getvalue()
    try:
        return json.loads(out[out.index("{"):])
    except ValueError:
        sys.stderr.write(out)
        raise
