"""playbooks/tasks/bundle-install.yml, run by Ansible: every image a host runs is pointed at the bundle's archive
of it (the variable of the role that runs it), and a bundle that lacks one stops the run naming it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from triton_fleet import bundle

# It runs ansible-playbook: the controller's, not a target Python's.
pytestmark = pytest.mark.controller

ROOT = Path(__file__).resolve().parents[2]
IMAGES = {
    "triton_server_image": "nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3",
    "dcgm_exporter_image": "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless",
    "container_runtime_gpu_check_image": "nvcr.io/nvidia/cuda:13.0.0-base-ubuntu24.04",
    "trtllm_engine_image": "nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3",
}
OS = {"distribution": "Ubuntu", "version": "24.04", "major": "24", "machine": "x86_64"}


def _need(refs):
    return {"os": OS, "packages": [], "repos": [], "wheels": [], "models": [],
            "images": [{"ref": r, "archive": ""} for r in dict.fromkeys(refs)]}


def _bundle(root, refs):
    """A bundle holding an archive (a few bytes) of each image, with its manifest, as playbooks/bundle.yml writes it."""
    import triton_fleet_bundle

    planned = bundle.plan(root, {"a100-01": _need(refs)})
    (root / "images").mkdir(parents=True)
    for image in planned["images"]:
        (root / image["path"]).write_text(f"docker save of {image['ref']}")
    err, _, _ = triton_fleet_bundle.run({"action": "manifest", "dir": str(root), "plan": planned, "inventory": "prod",
                                         "image_ids": {}, "needs": None, "build_images": {}, "refresh": False,
                                         "full": True})
    assert err is None, err
    return planned


def _install(tmp_path, bundle_dir, needed_refs):
    playbook = tmp_path / "install.yml"
    playbook.write_text(json.dumps([{
        "hosts": "a100-01", "gather_facts": False,
        "vars": {"triton_fleet_bundle": str(bundle_dir), "triton_fleet_sources": IMAGES},
        "tasks": [
            # As tasks/bundle-need.yml leaves it: a host fact the play's other hosts read through hostvars.
            {"name": "What the host needs", "ansible.builtin.set_fact": {"triton_fleet_bundle_need": _need(needed_refs)}},
            {"name": "Install from the bundle", "ansible.builtin.import_tasks": str(ROOT / "playbooks" / "tasks" / "bundle-install.yml")},
            {"name": "Archives", "ansible.builtin.debug": {"msg": "ARCHIVES {{ {'t': triton_server_image_archive, "
                                                               "'d': dcgm_exporter_image_archive, "
                                                               "'c': container_runtime_gpu_check_image_archive, "
                                                               "'e': trtllm_engine_image_archive} | to_json }}"}},
        ],
    }]))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="default",
               ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    exe = Path(sys.executable).with_name("ansible-playbook")
    return subprocess.run([str(exe), "-i", "a100-01,", "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}",
                           str(playbook)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_each_role_loads_its_image_from_the_bundle(tmp_path):
    planned = _bundle(tmp_path / "bundle", IMAGES.values())
    r = _install(tmp_path, tmp_path / "bundle", IMAGES.values())
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    line = next(line for line in r.stdout.splitlines() if "ARCHIVES " in line)
    archives = json.loads(line.split("ARCHIVES ", 1)[1].rstrip('"').replace('\\"', '"'))
    paths = {i["ref"]: str(tmp_path / "bundle" / i["path"]) for i in planned["images"]}
    assert archives == {"t": paths[IMAGES["triton_server_image"]], "d": paths[IMAGES["dcgm_exporter_image"]],
                        "c": paths[IMAGES["container_runtime_gpu_check_image"]],
                        "e": paths[IMAGES["trtllm_engine_image"]]}
    assert all(Path(p).is_file() for p in archives.values())


def test_a_bundle_without_an_image_a_host_runs_stops_the_run_naming_it(tmp_path):
    _bundle(tmp_path / "bundle", [IMAGES["triton_server_image"]])
    r = _install(tmp_path, tmp_path / "bundle", IMAGES.values())
    assert r.returncode != 0
    assert f"image {IMAGES['dcgm_exporter_image']} (needed by a100-01)" in r.stdout, r.stdout[-3000:]
    assert "ARCHIVES" not in r.stdout
