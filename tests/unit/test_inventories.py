"""The example production inventory plans in check mode with the GPU facts it carries."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _playbook(*args):
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    exe = Path(sys.executable).with_name("ansible-playbook")
    # Every host is this machine (ansible_connection=local): the preflight reads each one's distribution with the
    # controller's own Python (interpreter discovery may find a pyenv shim that does not run).
    local = ["-e", f"ansible_python_interpreter={sys.executable}"]
    return subprocess.run([str(exe), *args, *local], check=False, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


def test_prod_inventory_passes_preflight_in_check_mode():
    r = _playbook("playbooks/preflight.yml", "-i", "inventories/prod", "--check",
                  "-e", "triton_fleet_preflight_write=false", "-e", "ansible_connection=local")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "=== group gpu_a10" in r.stdout and "=== group gpu_a100" in r.stdout
    assert "qwen3-14b_a100-80gb-sxm-x1_bf16_tp1_trtllm-llmapi" in r.stdout
    assert "qwen3-14b_a10-x2_bf16_tp2_trtllm-llmapi" in r.stdout
    assert "checkpoint   Qwen/Qwen3-14B@40c069824f4251a91eefaf281ebe4c544efd3e18, the base checkpoint" in r.stdout


def test_prod_preflight_refuses_a_pre_quantized_checkpoint_without_a_pinned_revision():
    """A Model Optimizer int4 export named for the A10s is planned (one replica per GPU); unpinned, nothing is written."""
    import json

    export = {"repo": "example-org/Qwen3-14B-W4A16-AWQ", "format": "modelopt-w4a16-awq"}
    common = ("playbooks/preflight.yml", "-i", "inventories/prod", "--check", "-e", "triton_fleet_preflight_write=false",
              "-e", "ansible_connection=local")
    r = _playbook(*common, "-e", json.dumps({"triton_fleet_quantized_checkpoints": {"int4_awq": export}}))
    assert r.returncode != 0
    assert ("group gpu_a10 (a10-01, a10-02, a10-03) planned int4_awq weights: the pre-quantized checkpoint "
            "example-org/Qwen3-14B-W4A16-AWQ (int4_awq weights) has no pinned revision: set "
            "triton_fleet_quantized_checkpoints.int4_awq.revision") in r.stdout
    pin = dict(export, revision="0123456789abcdef0123456789abcdef01234567")
    r = _playbook(*common, "-e", json.dumps({"triton_fleet_quantized_checkpoints": {"int4_awq": pin}}))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "qwen3-14b_a10-x2_int4_awq_tp1_trtllm-llmapi" in r.stdout
    assert ("checkpoint   example-org/Qwen3-14B-W4A16-AWQ@0123456789abcdef0123456789abcdef01234567  pre-quantized "
            "int4_awq (modelopt-w4a16-awq, named in triton_fleet_quantized_checkpoints), fetched and loaded instead "
            "of Qwen/Qwen3-14B@40c069824f4251a91eefaf281ebe4c544efd3e18") in r.stdout


def test_prod_preflight_fails_before_change_when_the_model_does_not_fit():
    r = _playbook("playbooks/preflight.yml", "-i", "inventories/prod", "--check",
                  "-e", "triton_fleet_preflight_write=false", "-e", "ansible_connection=local",
                  "-e", "triton_fleet_model=qwen3-32b", "-e", "triton_fleet_context_length=32768")
    assert r.returncode != 0
    assert "does not fit" in r.stdout
    assert "Write the serving profile" not in r.stdout.split("does not fit", 1)[1]


def test_host_keys_are_checked_everywhere_but_where_the_lab_records_its_own():
    """The project pushes TLS keys and JWT settings: SSH must not accept any host key on any inventory."""
    import configparser
    import re

    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(ROOT / "ansible.cfg")
    assert cfg.get("defaults", "host_key_checking", fallback="True").lower() not in ("false", "no", "0")
    assert "StrictHostKeyChecking=no" not in cfg.get("ssh_connection", "ssh_args", fallback="")
    for path in (ROOT / "inventories").rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            assert not re.search(r"StrictHostKeyChecking=(no|off)|host_key_checking\s*[:=]\s*(false|no)", text, re.I), path
    # The lab checks keys too, against a known_hosts it fills from the containers it starts.
    lab = (ROOT / "tools" / "lab").read_text()
    assert "-o UserKnownHostsFile=$ROOT/$KNOWN -o StrictHostKeyChecking=yes" in lab


def test_prod_preflight_prints_where_downloads_come_from_with_the_site_mirrors():
    import json

    mirrors = {"registries": {"nvcr.io": "harbor.example.internal/nvcr"},
               "apt": {"cuda": "https://mirror.example.internal/cuda/repos"},
               "python_index": "https://pypi.example.internal/simple"}
    r = _playbook("playbooks/preflight.yml", "-i", "inventories/prod", "--check",
                  "-e", "triton_fleet_preflight_write=false", "-e", "ansible_connection=local",
                  "-e", json.dumps({"triton_fleet_mirrors": mirrors, "nginx_gateway_openai_api_enabled": True}))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    out = r.stdout
    assert "harbor.example.internal/nvcr/nvidia/tritonserver:26.07-trtllm-python-py3  [mirror (registries.nvcr.io)]" in out
    assert "https://mirror.example.internal/cuda/repos  [mirror (apt.cuda)]" in out
    assert "https://pypi.example.internal/simple  [mirror (python_index)]" in out
    # gpu_nodes.yml names the artifact server itself: the inventory's variable wins, and says so.
    assert "[inventory (model_artifacts_http_url)]" in out


def test_prod_preflight_refuses_a_malformed_mirror_before_any_change():
    r = _playbook("playbooks/preflight.yml", "-i", "inventories/prod", "--check",
                  "-e", "triton_fleet_preflight_write=false", "-e", "ansible_connection=local",
                  "-e", '{"triton_fleet_mirrors": {"apt": {"nvidia-container-toolkit": "https://m.internal/x"}}}')
    assert r.returncode != 0
    assert "did you mean nvidia_container_toolkit?" in r.stdout and "Nothing was changed." in r.stdout
