"""library/llm_plan.py run in-process: single and fleet mode, failures with options."""

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import llm_plan
import pytest
from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

FIX = Path(__file__).resolve().parent.parent / "fixtures"


def run_module(args, monkeypatch, check_mode=False):
    payload = dict(args, _ansible_check_mode=check_mode)
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": payload})))
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    buf = io.StringIO()
    with redirect_stdout(buf), pytest.raises(SystemExit):
        llm_plan.main()
    out = buf.getvalue()
    return json.loads(out[out.index("{"):])


def h200_facts():
    from triton_fleet import nvidia_smi
    d = FIX / "nvidia-smi" / "h200"
    return nvidia_smi.facts_from_nvidia_smi((d / "nvidia-smi-query-gpu.csv").read_text(),
                                            (d / "nvidia-smi-q.xml").read_text())


@pytest.mark.parametrize("check_mode", [False, True])
def test_single_mode_from_real_h200_facts(monkeypatch, check_mode):
    res = run_module({"model": "qwen3-32b", "gpu_facts": h200_facts(), "context_length": 32768, "concurrency": 8,
                      "group": "gpu_h200"}, monkeypatch, check_mode)
    assert res["changed"] is False and not res.get("failed")
    p = res["profile"]
    assert p["gpu"]["sku"] == "h200" and p["gpu"]["memory_bytes"] == 143771 * 1024 ** 2
    assert (p["runtime"], p["precision"]["weights"]) == ("trtllm-llmapi", "bf16")
    assert res["fingerprint"] == p["fingerprint"] and any("fingerprint" in line for line in res["table"])


def test_single_mode_failure_has_options(monkeypatch):
    res = run_module({"model": "qwen3-32b", "gpu_sku": "a10", "gpu_count": 1, "context_length": 32768,
                      "concurrency": 4}, monkeypatch)
    assert res["failed"] and res["msg"].startswith("qwen3-32b does not fit 1x A10")
    assert res["options"] and res["alternatives"]


def test_argument_spec_rejects_bad_choice(monkeypatch):
    res = run_module({"model": "qwen3-14b", "gpu_sku": "a10", "gpu_count": 1, "precision": "int3"}, monkeypatch)
    assert res["failed"] and "precision" in res["msg"]


def _host(groups, facts=None, **request):
    r = {"model": "qwen3-14b", "context_length": 8192, "concurrency": 4}
    r.update(request)
    return {"group_names": groups, "gpu_facts": facts, "request": r}


def test_fleet_mode(monkeypatch):
    a100 = {"count": 1, "gpus": [{"index": 0, "sku": "a100-80gb-sxm", "name": "NVIDIA A100-SXM4-80GB",
                                   "memory_bytes": 85899345920, "compute_capability": "8.0"}], "nvlink": False}
    hosts = {"g1": _host(["gpu_nodes", "gpu_h200"], h200_facts()), "g2": _host(["gpu_nodes", "gpu_a100"], a100),
             "lab": {"group_names": ["gpu_nodes", "lab_cpu"], "host_memory_bytes": 4 * 1024 ** 3,
                     "request": {"model": "qwen3-tiny", "model_config": str(FIX / "qwen3-tiny"), "device": "cpu",
                                 "context_length": 2048, "concurrency": 2,
                                 "image": "triton-fleet/tritonserver-lab:t"}}}
    groups = {"gpu_nodes": ["g1", "g2", "lab"], "gpu_h200": ["g1"], "gpu_a100": ["g2"], "lab_cpu": ["lab"]}
    res = run_module({"hosts": hosts, "groups": groups}, monkeypatch)
    assert not res.get("failed"), res.get("msg")
    assert res["host_groups"] == {"g1": "gpu_h200", "g2": "gpu_a100", "lab": "lab_cpu"}
    assert res["profiles"]["lab_cpu"]["runtime"] == "transformers"
    assert res["profiles"]["gpu_a100"]["runtime"] == "trtllm-llmapi"
    assert any(line.startswith("=== group gpu_h200") for line in res["table"])


def test_fleet_mode_fails_listing_all(monkeypatch):
    hosts = {"a": _host(["gpu_nodes", "gpu_x"], {"count": 0, "gpus": []}), "b": _host(["gpu_nodes", "gpu_y"],
                                                                                     h200_facts(), model="nope")}
    res = run_module({"hosts": hosts, "groups": {"gpu_nodes": ["a", "b"], "gpu_x": ["a"], "gpu_y": ["b"]}}, monkeypatch)
    assert res["failed"] and "nothing was changed" in res["msg"] and len(res["errors"]) == 2
    assert "GPU count is 0" in res["errors"][0] and "unknown model 'nope'" in res["errors"][1]
