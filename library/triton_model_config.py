#!/usr/bin/python
"""Ansible module: render, validate and atomically write a Triton model repository."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: triton_model_config
short_description: Render a Triton model repository for a serving profile and write it atomically
description:
  - Renders every file of the Triton model repository for one serving profile (docs/profile.md) and
    runtime (C(trtllm-engine), C(trtllm-llmapi), C(transformers)).
  - Every C(config.pbtxt) is parsed into Triton's C(ModelConfig) protobuf before anything is written;
    a config that does not parse fails the module and names the field.
  - The repository is staged in a temporary directory beside O(path) and renamed into place, so the
    server never sees a half-written repository. Nothing is written when the content is unchanged.
  - Supports check mode and diff mode.
options:
  path:
    description: Directory of the model repository (created or replaced as a whole).
    type: path
    required: true
  profile:
    description: The serving profile (the JSON of docs/profile.md, host var C(triton_fleet_profile)).
    type: dict
    required: true
  runtime:
    description: Override of the profile's runtime.
    type: str
    choices: [trtllm-engine, trtllm-llmapi, transformers]
  checkpoint_dir:
    description: Path of the checkpoint (HF model directory) inside the Triton container.
    type: str
    default: /checkpoint
  engine_dir:
    description: Path of the TensorRT-LLM engine directory inside the Triton container (trtllm-engine).
    type: str
    default: /engine
  tokenizer_dir:
    description: Tokenizer directory inside the container; defaults to O(checkpoint_dir).
    type: str
  bls:
    description: Also render the C(tensorrt_llm_bls) model (trtllm-engine).
    type: bool
    default: false
  preprocessing_instance_count:
    description: Instances of the preprocessing model (trtllm-engine).
    type: int
    default: 5
  postprocessing_instance_count:
    description: Instances of the postprocessing model (trtllm-engine).
    type: int
    default: 5
  model_files:
    description:
      - "Python model code to place in the repository, C({relative path: content}). Paths starting
        with C(1/) go to the served model's directory; others are relative to the repository."
      - C(transformers) needs C(1/model.py) (this project's model); C(trtllm-llmapi) needs C(1/model.py)
        from TensorRT-LLM; C(trtllm-engine) needs C(preprocessing/1/model.py) and C(postprocessing/1/model.py).
    type: dict
    default: {}
  mode:
    description: Mode of the files written (directories get the matching execute bits).
    type: str
    default: "0644"
attributes:
  check_mode:
    description: Can run in check mode and return the changed status without modifying the target.
    support: full
    details: Check mode renders and validates the repository and reports C(changed_files) without writing.
  diff_mode:
    description: Returns details on what has changed (or would change in check mode) when run with C(--diff).
    support: full
    details: One diff per added, changed or removed file.
author: triton-fleet
"""

EXAMPLES = r"""
- name: Render the model repository
  triton_model_config:
    path: /var/lib/triton-fleet/repository
    profile: "{{ triton_fleet_profile }}"
    model_files:
      1/model.py: "{{ lookup('ansible.builtin.file', 'transformers/model.py') }}"
  register: repo
"""

RETURN = r"""
changed_files:
  description: Files that were (or in check mode would be) added, changed or removed, relative to O(path).
  type: list
  elements: str
  returned: always
  sample: [qwen3-tiny/config.pbtxt, qwen3-tiny/1/model.py]
content_hash:
  description: sha256 over the repository's paths and contents; changes whenever any file changes.
  type: str
  returned: always
  sample: 7d2f0c3b9e8a41f6b5c4d3e2a1f09e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a29
entry_model:
  description: The model clients call (the served name).
  type: str
  returned: always
  sample: qwen3-tiny
load_models:
  description: The models to load with C(--model-control-mode=explicit).
  type: list
  elements: str
  returned: always
  sample: [qwen3-tiny]
runtime:
  description: The runtime rendered.
  type: str
  returned: always
  sample: transformers
launch:
  description:
    - How Triton must be started for this repository, as upstream TensorRT-LLM documents for the release
      (orchestrator mode under C(mpirun -n 1) for multi-GPU or multi-instance C(trtllm-engine), C(mpirun -n 1)
      for one LLM-API instance over several GPUs, a plain C(tritonserver) otherwise).
    - C(entrypoint) replaces the container's entrypoint, C(args) are extra C(tritonserver) arguments, C(env)
      extra environment variables.
  type: dict
  returned: always
  sample: {"mode": "orchestrator", "entrypoint": ["mpirun", "--allow-run-as-root", "-n", "1", "tritonserver"],
           "args": ["--pinned-memory-pool-byte-size=0", "--enable-peer-access=false",
                    "--cuda-memory-pool-byte-size=0:0", "--cuda-memory-pool-byte-size=1:0"],
           "env": {"TRTLLM_ORCHESTRATOR": "1", "TRTLLM_ORCHESTRATOR_SPAWN_PROCESSES": "1"}}
"""

import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.triton_fleet.model_repository import (
    ProfileError,
    content_hash,
    render_repository,
)
from ansible.module_utils.triton_fleet.pbtxt import PbtxtError

HASH_FILE = ".triton-fleet-repository.sha256"


def read_tree(path):
    """{relative path: text} of the files under ``path`` (the hash marker excluded)."""
    files = {}
    if not os.path.isdir(path):
        return files
    for root, _dirs, names in os.walk(path):
        for name in names:
            full = os.path.join(root, name)
            rel = os.path.relpath(full, path)
            if rel == HASH_FILE:
                continue
            try:
                with open(full, encoding="utf-8") as fh:
                    files[rel] = fh.read()
            except UnicodeDecodeError:
                with open(full, "rb") as fh:
                    files[rel] = fh.read().decode("latin-1")
    return files


def write_atomically(path, files, mode, digest):
    """Stage ``files`` beside ``path`` and swap the directory in with renames."""
    parent = os.path.dirname(os.path.abspath(path)) or "."
    os.makedirs(parent, exist_ok=True)
    stage = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.new-", dir=parent)
    dmode = mode | ((mode & 0o444) >> 2)
    try:
        os.chmod(stage, dmode)
        for rel, text in sorted(files.items()):
            full = os.path.join(stage, rel)
            os.makedirs(os.path.dirname(full), mode=dmode, exist_ok=True)
            with open(full, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.chmod(full, mode)
        with open(os.path.join(stage, HASH_FILE), "w") as fh:
            fh.write(digest + "\n")
        os.chmod(os.path.join(stage, HASH_FILE), mode)
        for root, dirs, _names in os.walk(stage):
            for d in dirs:
                os.chmod(os.path.join(root, d), dmode)
        old = None
        if os.path.lexists(path):
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.old-", dir=parent)
            os.rmdir(old)
            os.rename(path, old)
        os.rename(stage, path)
        stage = None
        if old:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if stage and os.path.isdir(stage):
            shutil.rmtree(stage, ignore_errors=True)


def run(params, check_mode=False):
    """Module logic without AnsibleModule: returns the result dict or raises ProfileError/PbtxtError/ValueError."""
    options = {
        "checkpoint_dir": params.get("checkpoint_dir") or "/checkpoint",
        "engine_dir": params.get("engine_dir") or "/engine",
        "tokenizer_dir": params.get("tokenizer_dir"),
        "bls": bool(params.get("bls")),
        "preprocessing_instance_count": params.get("preprocessing_instance_count") or 5,
        "postprocessing_instance_count": params.get("postprocessing_instance_count") or 5,
        "model_files": params.get("model_files") or {},
    }
    repo = render_repository(params["profile"], options, runtime=params.get("runtime"))
    try:
        mode = int(str(params.get("mode") or "0644"), 8)
    except ValueError:
        raise ValueError("mode {!r} is not an octal file mode such as 0644".format(params.get("mode"))) from None
    path = params["path"]
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"path {path} exists and is not a directory: remove it or choose another path")
    current = read_tree(path)
    wanted = dict(repo)
    changed = sorted(p for p in set(current) | set(wanted) if current.get(p) != wanted.get(p))
    digest = content_hash(wanted)
    result = {
        "changed": bool(changed),
        "changed_files": changed,
        "content_hash": digest,
        "entry_model": repo.entry_model,
        "load_models": repo.load_models,
        "runtime": repo.runtime,
        "launch": repo.launch,
        "path": path,
    }
    if changed:
        result["diff"] = [
            {
                "before_header": os.path.join(path, p),
                "after_header": os.path.join(path, p),
                "before": current.get(p, ""),
                "after": wanted.get(p, ""),
            }
            for p in changed
        ]
        if not check_mode:
            write_atomically(path, wanted, mode, digest)
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            profile=dict(type="dict", required=True),
            runtime=dict(type="str", choices=["trtllm-engine", "trtllm-llmapi", "transformers"]),
            checkpoint_dir=dict(type="str", default="/checkpoint"),
            engine_dir=dict(type="str", default="/engine"),
            tokenizer_dir=dict(type="str"),
            bls=dict(type="bool", default=False),
            preprocessing_instance_count=dict(type="int", default=5),
            postprocessing_instance_count=dict(type="int", default=5),
            model_files=dict(type="dict", default={}),
            mode=dict(type="str", default="0644"),
        ),
        supports_check_mode=True,
    )
    try:
        result = run(module.params, check_mode=module.check_mode)
    except ProfileError as exc:
        module.fail_json(
            msg=f"{exc}. Nothing was written. Fix the profile (docs/profile.md) or the module arguments.",
            field=exc.field,
        )
    except PbtxtError as exc:
        module.fail_json(msg=f"{exc}. Nothing was written.", field=exc.field, model=exc.model)
    except (OSError, ValueError) as exc:
        module.fail_json(msg=f"cannot write the model repository: {exc}")
    if not module._diff:
        result.pop("diff", None)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
