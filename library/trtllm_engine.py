#!/usr/bin/python
"""Ansible module: build, verify, install, activate and prune TensorRT-LLM engines for a serving profile."""

DOCUMENTATION = r"""
---
module: trtllm_engine
short_description: Build a TensorRT-LLM 1.2.1 engine once per profile fingerprint and manage the engine store
description:
  - For C(runtime=trtllm-engine) runs C(convert_checkpoint.py) (Qwen, C(examples/models/core/qwen/)) or ModelOpt
    C(quantize.py), then C(trtllm-build), with the exact TRT-LLM 1.2.1 flags derived from the profile, inside the
    pinned Triton TRT-LLM image (docker, GPU request) or with TRT-LLM installed on the host (C(launcher=host)).
  - Writes into C(<engines_dir>/.build-<fingerprint>/) and renames to C(<engines_dir>/<fingerprint>/) only on
    success; the result carries C(manifest.json) (fingerprint, TRT-LLM and image versions, exact commands, wall
    times, file sizes and sha256). A valid artifact whose manifest fingerprint matches is never rebuilt.
  - For C(trtllm-llmapi) and C(transformers) there is no build step; the module says so and returns the
    checkpoint directory as the artifact.
  - Other states verify an artifact (sha256), install a copy from a staging/shared directory (verified on
    arrival, staged then renamed), point C(<engines_dir>/current) at a fingerprint, and prune old fingerprints.
options:
  state:
    description:
      - C(built) builds when needed (needs I(profile)); C(verified) reports the local artifact state;
        C(present) installs I(manifest)'s artifact from I(sources); C(active) points C(current) at the
        fingerprint; C(pruned) keeps I(keep) fingerprints.
    type: str
    choices: [built, verified, present, active, pruned]
    default: built
  profile:
    description: The serving profile (docs/profile.md). Required for C(built) and C(verified) unless I(fingerprint) is given.
    type: dict
  fingerprint:
    description: Fingerprint to act on; defaults to I(profile)'s (which is checked against its build fields).
    type: str
  engines_dir:
    description: Root of the engine store.
    type: path
    default: /var/lib/triton-fleet/engines
  models_dir:
    description: Root of the model cache (the checkpoint is C(<models_dir>/<model.key>@<model.revision>)).
    type: path
    default: /var/lib/triton-fleet/models
  checkpoint_dir:
    description: Override the checkpoint directory.
    type: path
  manifest:
    description: For C(present) the reference manifest (from the builder's C(manifest.json)).
    type: dict
  sources:
    description: For C(present) local directories searched for the artifact's files (staging area, shared path).
    type: list
    elements: path
    default: []
  keep:
    description: For C(pruned) how many fingerprints to keep (the current one always stays).
    type: int
    default: 3
  launcher:
    description: C(docker) runs the tools in I(image) with a GPU request; C(host) runs them directly (TRT-LLM installed on the host).
    type: str
    choices: [docker, host]
    default: docker
  image:
    description: Image for C(launcher=docker); defaults to the profile's C(image.ref).
    type: str
  docker_bin:
    description: docker client executable.
    type: str
    default: docker
  examples_dir:
    description: TRT-LLM examples directory (inside the image for C(docker), on the host for C(host)).
    type: str
    default: /app/examples
  python:
    description: Python interpreter that runs the example scripts.
    type: str
    default: python3
  trtllm_build:
    description: The C(trtllm-build) executable.
    type: str
    default: trtllm-build
  gpu_ids:
    description: GPU ids requested for the build (C(0,1)); defaults to the profile's first replica's devices.
    type: str
  step_timeout:
    description: Seconds one build step may take before it is killed.
    type: int
    default: 7200
  quick:
    description: For C(verified) compare sizes only instead of sha256.
    type: bool
    default: false
attributes:
  check_mode:
    description: Can run in check mode and return the changed status without modifying the target.
    support: full
    details: Check mode reports whether a build, copy, prune or switch would happen; it runs no build step.
  diff_mode:
    description: Returns details on what has changed (or would change in check mode) when run with C(--diff).
    support: full
    details: The diff describes the artifact's state before and after.
author: triton-fleet
"""

EXAMPLES = r"""
- name: Build the engine for this host's profile (once; skipped when the manifest fingerprint matches)
  trtllm_engine:
    state: built
    profile: "{{ triton_fleet_profile }}"

- name: Install the builder's engine from the staging area, sha256-verified
  trtllm_engine:
    state: present
    fingerprint: "{{ triton_fleet_profile['fingerprint'] }}"
    manifest: "{{ hostvars[builder]['engine']['manifest'] }}"
    sources: ["/var/lib/triton-fleet/engines/.staging/{{ triton_fleet_profile['fingerprint'] }}"]

- name: Keep three fingerprints for rollback
  trtllm_engine:
    state: pruned
    keep: 3
"""

RETURN = r"""
fingerprint: {description: Fingerprint acted on., returned: always, type: str, sample: cbdc19e13624fab7f2735a48b0749bd534f7ce09d646c5fafa3f1f1a4c7a96f5}
path: {description: Artifact directory (engine dir, or the checkpoint dir for runtimes without a build step)., returned: always, type: str, sample: /var/lib/triton-fleet/engines/cbdc19e13624fab7f2735a48b0749bd534f7ce09d646c5fafa3f1f1a4c7a96f5}
build_required: {description: False for trtllm-llmapi / transformers., returned: when state is built or verified, type: bool, sample: true}
built: {description: True when an engine was (or in check mode would be) built., returned: when state is built, type: bool, sample: true}
valid: {description: The artifact is present and every file matches its sha256., returned: when state is verified, type: bool, sample: true}
digest: {description: sha256 of the manifest's file map (identical on hosts holding identical artifacts)., returned: when valid, type: str, sample: 3f6a2e9b0c1d4e5f60718293a4b5c6d7e8f90123456789abcdef0123456789ab}
manifest: {description: The artifact manifest., returned: when valid or built, type: dict, sample: {schema_version: 1, fingerprint: cbdc19e1..., files: {rank0.engine: {size: 29540000000, sha256: 9a0b...}}}}
commands: {description: The exact argv of every build step., returned: when state is built, type: list, sample: [[trtllm-build, --checkpoint_dir, /var/lib/triton-fleet/engines/.staging/cbdc19e1.../ckpt, --output_dir, /var/lib/triton-fleet/engines/.staging/cbdc19e1.../engine]]}
copied: {description: Files copied into place., returned: when state is present, type: list, sample: [config.json, rank0.engine]}
removed: {description: Fingerprints pruned., returned: when state is pruned, type: list, sample: [0d1c2b3a4f5e6d7c8b9a0f1e2d3c4b5a6f7e8d9c0b1a2f3e4d5c6b7a8f9e0d1c]}
output_tail: {description: Last output of a failed step., returned: on build failure, type: str, sample: "[TensorRT-LLM][ERROR] out of memory while building"}"""

import subprocess

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.triton_fleet.artifact_manifest import ManifestError
from ansible.module_utils.triton_fleet.engine_store import (EngineError, activate, build, check_fingerprint,
                                                            install_copy, model_dir, no_build_result, prune,
                                                            verify_engine, NO_BUILD_RUNTIMES)


def _runner(timeout):
    def run(argv):
        try:
            proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout,
                                  check=False)
        except subprocess.TimeoutExpired as exc:
            out = (exc.output or b"").decode("utf-8", "replace")
            return 124, out + f"\n[trtllm_engine] step killed after {timeout}s (step_timeout)"
        except OSError as exc:
            return 127, f"cannot run {argv[0]}: {exc}"
        return proc.returncode, proc.stdout.decode("utf-8", "replace")
    return run


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", default="built", choices=["built", "verified", "present", "active", "pruned"]),
            profile=dict(type="dict"),
            fingerprint=dict(type="str"),
            engines_dir=dict(type="path", default="/var/lib/triton-fleet/engines"),
            models_dir=dict(type="path", default="/var/lib/triton-fleet/models"),
            checkpoint_dir=dict(type="path"),
            manifest=dict(type="dict"),
            sources=dict(type="list", elements="path", default=[]),
            keep=dict(type="int", default=3),
            launcher=dict(type="str", default="docker", choices=["docker", "host"]),
            image=dict(type="str"),
            docker_bin=dict(type="str", default="docker"),
            examples_dir=dict(type="str", default="/app/examples"),
            python=dict(type="str", default="python3"),
            trtllm_build=dict(type="str", default="trtllm-build"),
            gpu_ids=dict(type="str"),
            step_timeout=dict(type="int", default=7200),
            quick=dict(type="bool", default=False),
        ),
        required_if=[("state", "built", ("profile",)), ("state", "present", ("manifest",))],
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = dispatch(module, p)
        if not module._diff:
            result.pop("diff", None)
        module.exit_json(**result)
    except (EngineError, ManifestError) as exc:
        details = getattr(exc, "details", {}) or {}
        module.fail_json(msg=str(exc), **details)


def _fp(p):
    if p["profile"] is not None:
        fp = check_fingerprint(p["profile"])
        if p["fingerprint"] and p["fingerprint"] != fp:
            raise EngineError("fingerprint {} differs from the profile's {}; pass one of them".format(p["fingerprint"], fp))
        return fp
    if not p["fingerprint"]:
        raise EngineError("state {} needs profile or fingerprint".format(p["state"]))
    return p["fingerprint"]


def dispatch(module, p):
    state = p["state"]
    if state == "pruned":
        protect = [p["fingerprint"]] if p["fingerprint"] else []
        res = prune(p["engines_dir"], p["keep"], protect=protect, check_mode=module.check_mode)
        return dict(res, msg="pruned %s" % (", ".join(res["removed"]) or "nothing"))
    fp = _fp(p)
    profile = p["profile"]
    ckpt = p["checkpoint_dir"] or (model_dir(p["models_dir"], profile) if profile else None)
    if profile and profile.get("runtime") in NO_BUILD_RUNTIMES:
        res = no_build_result(profile, ckpt)
        if state in ("verified",):
            res["valid"] = True
        return res
    if state == "built":
        opts = {"docker_bin": p["docker_bin"], "examples_dir": p["examples_dir"], "python": p["python"],
                "trtllm_build": p["trtllm_build"], "gpu_ids": p["gpu_ids"]}
        if p["image"]:
            profile = dict(profile, image=dict(profile.get("image") or {}, ref=p["image"]))
        res = build(profile, p["engines_dir"], ckpt, _runner(p["step_timeout"]), launcher=p["launcher"],
                    check_mode=module.check_mode, tool_opts=opts)
        if res["changed"]:
            res["diff"] = {"before": "engine {}: {}\n".format(fp, res["before"]["reason"] or "absent"),
                           "after": f"engine {fp}: built\n"}
        return res
    if state == "verified":
        res = verify_engine(p["engines_dir"], fp, quick=p["quick"])
        return dict(res, changed=False, fingerprint=fp, build_required=True,
                    msg="engine {}: {}".format(fp, "valid" if res["valid"] else res["reason"]))
    if state == "present":
        res = install_copy(p["engines_dir"], fp, p["manifest"], p["sources"], check_mode=module.check_mode)
        before = res["before"]
        out = {"changed": res["changed"], "fingerprint": fp, "path": res["dest"], "copied": res["copied"],
               "reused": res["reused"], "bytes_copied": res["bytes_copied"],
               "msg": (f"engine {fp} already verified; nothing copied") if not res["changed"] else
                      ("engine {} installed: {} file(s) copied, {} reused, all sha256-verified".format(
                           fp, len(res["copied"]), len(res["reused"])))}
        if res["changed"]:
            out["diff"] = {"before": "missing: {}\ncorrupt: {}\n".format(before["missing"], before["bad"]),
                           "after": "all {} files verified\n".format(len(p["manifest"]["files"]))}
        return out
    # active
    res = activate(p["engines_dir"], fp, check_mode=module.check_mode)
    return dict(res, fingerprint=fp, diff={"before": "current -> {}\n".format(res["before"]),
                                           "after": "current -> {}\n".format(res["after"])},
                msg=f"current engine: {fp}")


if __name__ == "__main__":
    main()
