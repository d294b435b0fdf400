#!/usr/bin/python
"""Ansible module: place a model checkpoint in the node's model cache, verified by sha256 manifest."""

DOCUMENTATION = r"""
---
module: model_cache
short_description: Place a checkpoint under /var/lib/triton-fleet/models/<model>@<revision>/ by sha256 manifest
description:
  - C(state=manifest) hashes a checkpoint directory (run it where the directory is, e.g. on the controller)
    and returns the manifest (every file with size and sha256).
  - C(state=verified) compares I(dest) with I(manifest) and returns the files that still have to come from
    the source (not valid at I(dest) nor already in the staging area) - use it to copy only those.
  - C(state=present) assembles the checkpoint in a staging directory next to I(dest) from valid files already
    at I(dest), files already staged (an interrupted copy resumes), local I(sources) (a shared/NFS path or a
    staging area filled from the controller) and I(url) (HTTP artifact server, resumed with Range requests);
    every file is sha256-verified, the manifest is written last, then the staging directory is renamed over
    I(dest). A partial or corrupt copy is never visible at I(dest) and is repaired on the next run.
options:
  state:
    description: What to do.
    type: str
    choices: [manifest, verified, present]
    default: present
  path:
    description: For C(manifest) the checkpoint directory to hash.
    type: path
  dest:
    description: Cache directory of this checkpoint, C(/var/lib/triton-fleet/models/<model>@<revision>).
    type: path
  manifest:
    description:
      - The checkpoint manifest (from C(state=manifest)). When omitted it is read from I(manifest_url), from
        C(<url>/.triton-fleet-manifest.json), or from C(.triton-fleet-manifest.json) in the first of I(sources).
    type: dict
  sources:
    description: Local directories holding the checkpoint's files (searched in order).
    type: list
    elements: path
    default: []
  url:
    description: Base URL of the checkpoint on an HTTP artifact server (file C(<url>/<relative path>)).
    type: str
  manifest_url:
    description: URL of the manifest JSON; default C(<url>/.triton-fleet-manifest.json).
    type: str
  validate_certs:
    description: Verify TLS certificates of I(url).
    type: bool
    default: true
  timeout:
    description: HTTP timeout in seconds.
    type: int
    default: 60
  quick:
    description: For C(verified) compare file sizes only (skip sha256 of files already at I(dest)).
    type: bool
    default: false
  write:
    description: For C(manifest) also write C(.triton-fleet-manifest.json) into I(path) (to publish a shared or HTTP source).
    type: bool
    default: false
attributes:
  check_mode:
    description: Can run in check mode and return the changed status without modifying the target.
    support: full
    details: Check mode verifies I(dest) and reports the files it would copy.
  diff_mode:
    description: Returns details on what has changed (or would change in check mode) when run with C(--diff).
    support: full
    details: The diff names the files missing or corrupt before, and the verified file count after.
author: triton-fleet
"""

EXAMPLES = r"""
- name: Hash the exported checkpoint on the controller
  model_cache:
    state: manifest
    path: /srv/triton-fleet/models/qwen3-tiny
  delegate_to: localhost
  run_once: true
  register: ckpt

- name: Install from an HTTP artifact server (air-gapped site)
  model_cache:
    dest: /var/lib/triton-fleet/models/qwen3-14b@main
    url: http://artifacts.internal/models/qwen3-14b@main
"""

RETURN = r"""
manifest: {description: The checkpoint manifest., returned: always, type: dict, sample: {schema_version: 1, files: {config.json: {size: 726, sha256: 5f2c...}}}}
digest: {description: sha256 of the manifest's file map., returned: always, type: str, sample: 3f6a2e9b0c1d4e5f60718293a4b5c6d7e8f90123456789abcdef0123456789ab}
valid: {description: I(dest) holds exactly the manifest's files, sha256-verified., returned: when state is verified, type: bool, sample: true}
need: {description: Files that must still come from the source., returned: when state is verified, type: list, sample: [model.safetensors]}
copied: {description: Files copied or downloaded., returned: when state is present, type: list, sample: [config.json, model.safetensors]}
bytes_copied: {description: Bytes copied or downloaded., returned: when state is present, type: int, sample: 1048576}"""

import json
import os
import shutil
from urllib.parse import quote

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url
from ansible.module_utils.triton_fleet.artifact_manifest import (ManifestError, build_manifest, content_digest,
                                                                 describe_problems, dump_manifest, install, missing_for_install,
                                                                 staging_path, validate_manifest, verify_tree)

MANIFEST_NAME = ".triton-fleet-manifest.json"


def _http_fetcher(base, validate_certs, timeout):
    def fetch(rel, part):
        start = os.path.getsize(part) if os.path.exists(part) else 0
        headers = {"Range": f"bytes={start}-"} if start else {}
        resp = open_url(base.rstrip("/") + "/" + quote(rel), headers=headers, validate_certs=validate_certs,
                        timeout=timeout)
        status = resp.getcode()
        mode = "ab" if (start and status == 206) else "wb"
        with open(part, mode) as handle:
            shutil.copyfileobj(resp, handle, 4 * 1024 * 1024)
    return fetch


def _manifest(p):
    if p["manifest"] is not None:
        return validate_manifest(p["manifest"])
    murl = p["manifest_url"] or (p["url"].rstrip("/") + "/" + MANIFEST_NAME if p["url"] else None)
    if not murl:
        for src in p["sources"]:  # a shared path carries the manifest published with it
            path = os.path.join(src, MANIFEST_NAME)
            if os.path.isfile(path):
                with open(path, "rb") as handle:
                    try:
                        return validate_manifest(json.loads(handle.read().decode("utf-8")))
                    except ValueError as exc:
                        raise ManifestError(f"{path} is not a valid manifest: {exc}") from exc
        raise ManifestError(f"no manifest: pass manifest (from state=manifest on the source), publish {MANIFEST_NAME} in the "
                            "shared source (state=manifest write=true), or give url/manifest_url")
    try:
        data = json.loads(open_url(murl, validate_certs=p["validate_certs"], timeout=p["timeout"]).read())
    except Exception as exc:
        raise ManifestError(f"cannot read manifest {murl}: {exc}; publish the checkpoint's {MANIFEST_NAME} there") from exc
    return validate_manifest(data)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", default="present", choices=["manifest", "verified", "present"]),
            path=dict(type="path"),
            dest=dict(type="path"),
            manifest=dict(type="dict"),
            sources=dict(type="list", elements="path", default=[]),
            url=dict(type="str"),
            manifest_url=dict(type="str"),
            validate_certs=dict(type="bool", default=True),
            timeout=dict(type="int", default=60),
            quick=dict(type="bool", default=False),
            write=dict(type="bool", default=False),
        ),
        required_if=[("state", "manifest", ("path",)), ("state", "verified", ("dest",)),
                     ("state", "present", ("dest",))],
        supports_check_mode=True,
    )
    p = module.params
    try:
        if p["state"] == "manifest":
            if not os.path.isfile(os.path.join(p["path"], "config.json")):
                raise ManifestError("{} is not a Hugging Face checkpoint (no config.json); export the model there "
                                    "or point the source at the right directory".format(p["path"]))
            manifest = build_manifest(p["path"], "model", MANIFEST_NAME)
            target = os.path.join(p["path"], MANIFEST_NAME)
            changed = False
            if p["write"]:
                current = open(target, "rb").read() if os.path.isfile(target) else None
                changed = current != dump_manifest(manifest)
                if changed and not module.check_mode:
                    with open(target + ".part", "wb") as handle:
                        handle.write(dump_manifest(manifest))
                    os.replace(target + ".part", target)
            module.exit_json(changed=changed, manifest=manifest, digest=content_digest(manifest),
                             files=len(manifest["files"]),
                             bytes=sum(m["size"] for m in manifest["files"].values()))
        if p["state"] == "present" and p["manifest"] is None and not p["url"] and not p["manifest_url"]:
            # A missing shared mount is the usual cause: name it before looking for its manifest.
            for src in p["sources"]:
                if not os.path.isdir(src):
                    raise ManifestError(f"source {src} does not exist on {os.uname()[1]}; mount the shared path or fix the source")
        manifest = _manifest(p)
        if "config.json" not in manifest["files"]:
            raise ManifestError("the manifest lists no config.json: it does not describe a Hugging Face checkpoint")
        digest = content_digest(manifest)
        if p["state"] == "verified":
            report = verify_tree(p["dest"], manifest, manifest_name=MANIFEST_NAME, quick=p["quick"])
            need = [] if report["valid"] else missing_for_install(p["dest"], manifest, quick=p["quick"])
            module.exit_json(changed=False, valid=report["valid"], need=need, manifest=manifest, digest=digest,
                             staging=staging_path(p["dest"]), path=p["dest"],
                             msg="valid" if report["valid"] else describe_problems(report))
        for src in p["sources"]:
            if not os.path.isdir(src) and not module.check_mode:
                raise ManifestError(f"source {src} does not exist on {os.uname()[1]}; mount the shared path or fix the source")
        fetch = _http_fetcher(p["url"], p["validate_certs"], p["timeout"]) if p["url"] else None
        res = install(p["dest"], manifest, MANIFEST_NAME, sources=p["sources"], fetch=fetch,
                      check_mode=module.check_mode)
        before = res["before"]
        result = dict(changed=res["changed"], manifest=manifest, digest=digest, path=p["dest"],
                      copied=res["copied"], reused=res["reused"], bytes_copied=res["bytes_copied"])
        if res["changed"] and module._diff:
            result["diff"] = {"before": "{}: {}\n".format(p["dest"], describe_problems(before) if os.path.isdir(p["dest"])
                                                     else "absent"),
                              "after": "{}: {} files sha256-verified\n".format(p["dest"], len(manifest["files"]))}
        if res["changed"]:
            result["msg"] = "{} {} {} file(s), reused {}".format(p["dest"], "would copy" if module.check_mode else
                                                             "copied", len(res["copied"]), len(res["reused"]))
        else:
            result["msg"] = "{} already verified".format(p["dest"])
        module.exit_json(**result)
    except ManifestError as exc:
        module.fail_json(msg=str(exc))


if __name__ == "__main__":
    main()
