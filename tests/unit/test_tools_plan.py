"""tools/plan as an operator runs it (subprocess)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
PLAN = ROOT / "tools" / "plan"
TINY = ROOT / "tests" / "fixtures" / "qwen3-tiny" / "config.json"


def run(*args):
    return subprocess.run([sys.executable, str(PLAN), *args], capture_output=True, text=True, check=False, cwd="/")


def test_is_an_executable_python_script():
    assert PLAN.read_text().startswith("#!/usr/bin/env python3\n")
    assert PLAN.stat().st_mode & 0o111


def test_table():
    r = run("--model", "qwen3-14b", "--gpu", "a100-80gb", "--gpus", "1", "--context", "8192", "--concurrency", "16")
    assert r.returncode == 0, r.stderr
    assert "qwen3-14b_a100-80gb-sxm-x1_bf16_tp1_trtllm-engine" in r.stdout and "why:" in r.stdout


def test_json_is_the_profile():
    r = run("--model", "qwen3-32b", "--gpu", "h100", "--context", "32768", "--concurrency", "4", "--json")
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)
    assert p["precision"]["weights"] == "fp8" and p["runtime"] == "trtllm-llmapi" and len(p["fingerprint"]) == 64


def test_issue_example_prints_failure_with_options():
    r = run("--model", "qwen3-14b", "--gpu", "a10", "--gpus", "1", "--context", "8192", "--concurrency", "16")
    assert r.returncode == 2
    assert "does not fit 1x A10" in r.stderr and "options:" in r.stderr and "considered:" in r.stderr


def test_lab_profile():
    r = run("--model", "qwen3-tiny", "--model-config", str(TINY), "--gpu", "cpu", "--context", "2048",
            "--image", "triton-fleet/tritonserver-lab:abc", "--json")
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)
    assert (p["device"], p["runtime"], p["precision"]["weights"]) == ("cpu", "transformers", "fp32")


def test_lists():
    r = run("--list-gpus")
    assert r.returncode == 0 and "h200" in r.stdout and "2335" in r.stdout and "aliases:" in r.stdout
    r = run("--list-models")
    assert r.returncode == 0 and "qwen3-32b" in r.stdout and "32.762 B" in r.stdout and "qwen3-tiny" in r.stdout


def test_errors():
    r = run("--model", "qwen3-15b", "--gpu", "a10")
    assert r.returncode == 2 and "unknown model 'qwen3-15b'" in r.stderr
    r = run("--model", "qwen3-14b")
    assert r.returncode == 2 and "--gpu" in r.stderr
    r = run("--model", "qwen3-14b", "--gpu", "a10", "--gpus", "0")
    assert r.returncode == 2 and "GPU count is 0" in r.stderr


def test_moe_plan_shows_tp_ep_and_why():
    r = run("--model", "qwen3-235b-a22b", "--gpu", "h100-sxm", "--gpus", "8", "--context", "8192", "--concurrency", "4",
            "--precision", "fp8", "--tp", "8")
    assert r.returncode == 0, r.stderr
    assert "TP 8 x PP 1 x EP 8" in r.stdout and "memory/GPU   weights 28.7" in r.stdout
    assert "EP=8: the 128 experts spread over the 8 GPUs" in r.stdout
    assert "KV heads: TP=8 over 4 KV heads replicates each KV head on 2 GPUs" in r.stdout
