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


PINNED = "nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3"


def test_table():
    r = run("--model", "qwen3-14b", "--gpu", "a100-80gb", "--gpus", "1", "--context", "8192", "--concurrency", "16")
    assert r.returncode == 0, r.stderr
    assert "qwen3-14b_a100-80gb-sxm-x1_bf16_tp1_trtllm-llmapi" in r.stdout and "why:" in r.stdout


def test_qwen3_14b_on_a100_and_a10_prints_the_llmapi_runtime_with_the_pinned_image():
    # two A10s: bf16 does not fit one, and the PyTorch path reads no int4 checkpoint Qwen publishes
    for gpu, gpus, concurrency in (("a100", "1", "8"), ("a10", "2", "4")):
        r = run("--model", "qwen3-14b", "--gpu", gpu, "--gpus", gpus, "--concurrency", concurrency)
        assert r.returncode == 0, r.stderr
        assert f"runtime      trtllm-llmapi  image {PINNED} (TRT-LLM 1.2.1" in r.stdout, r.stdout
        assert "runtime trtllm-llmapi: TensorRT-LLM 1.2.1's PyTorch backend (LLM API)" in r.stdout
        assert "supports Ampere" in r.stdout and "CUDA graphs for decode batch sizes" in r.stdout
        assert "KV fraction" in r.stdout and "max_num_tokens 8192" in r.stdout and "chunked prefill on" in r.stdout


def test_engine_path_on_an_image_without_it_fails_with_the_reason():
    r = run("--model", "qwen3-14b", "--gpu", "a100", "--runtime", "trtllm-engine",
            "--image", "nvcr.io/nvidia/tritonserver:26.10-trtllm-python-py3", "--trtllm-version", "1.3.0")
    assert r.returncode == 2
    assert "trtllm-engine (legacy) is built only with TensorRT-LLM 1.2.x" in r.stderr
    assert "after v1.3.0rc20" in r.stderr and "PR #15907" in r.stderr
    r = run("--model", "qwen3-14b", "--gpu", "a100", "--image", "nvcr.io/nvidia/tritonserver:26.11-trtllm-python-py3")
    assert r.returncode == 2 and "26.11 release notes" in r.stderr and "26.09" in r.stderr
    r = run("--model", "qwen3-14b", "--gpu", "a100", "--runtime", "trtllm-engine", "--concurrency", "16")
    assert r.returncode == 0, r.stderr
    assert "trtllm-engine [LEGACY: the TensorRT engine backend's last release was TensorRT-LLM 1.3.0rc20]" in r.stdout


def test_qwen3_2507_plans_at_its_native_context():
    r = run("--model", "qwen3-30b-a3b-instruct-2507", "--gpu", "h100-sxm", "--gpus", "2", "--context", "262144",
            "--concurrency", "4", "--json")
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)
    assert p["limits"]["max_seq_len"] == 262144 and "rope_scaling" not in p["model"]
    assert p["model"]["thinking"] == {"mode": "never", "template_opens_think": False}
    assert p["predicted"]["max_concurrency_at_max_seq_len"] >= 4


def test_options_name_only_loadable_precisions():
    """It used to advise "an A100 (int8_wo)", which its own list said the runtime cannot load."""
    r = run("--model", "qwen3-30b-a3b", "--gpu", "l40s", "--gpus", "1", "--context", "8192", "--concurrency", "48")
    assert r.returncode == 2 and "options:" in r.stderr
    options = r.stderr.split("options:", 1)[1].split("\n", 1)[0]
    # nor a precision without a pre-quantized checkpoint the runtime loads there: fp8 on the H100 (Qwen's own -FP8,
    # block-scaled), never int4 (Qwen's -AWQ is AutoAWQ) nor fp8 on Ada
    assert "int8_wo" not in options and "int4" not in options and "H100 80GB HBM3 (fp8)" in options
    assert "(fp8, int4_awq not tried: no pre-quantized checkpoint TensorRT-LLM's PyTorch backend loads here" in r.stderr


def test_a_pre_quantized_plan_names_its_checkpoint_and_its_pin():
    args = ("--model", "qwen3-32b", "--gpu", "h100", "--context", "8192", "--concurrency", "8")
    r = run(*args)
    assert r.returncode == 0, r.stderr
    assert ("checkpoint   Qwen/Qwen3-32B-FP8@NOT PINNED (the preflight refuses this plan: set "
            "triton_fleet_quantized_checkpoints.fp8.revision)  pre-quantized fp8 (fp8-block128, Qwen's own), fetched "
            "and loaded instead of Qwen/Qwen3-32B@main") in r.stdout
    rev = "aa55da1ecc13d006e8b8e4f54579b1ea8c3db2df"
    r = run(*args, "--json", "--quantized-checkpoints", json.dumps({"fp8": {"revision": rev}}))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["model"]["checkpoint"]["revision"] == rev
    r = run(*args, "--quantized-checkpoints", "fp8=abc")
    assert r.returncode == 2 and "not JSON" in r.stderr
    r = run(*args, "--quantized-checkpoints", '{"fp8": {"revision": "main"}}')
    assert r.returncode == 2 and "'main' is not pinned" in r.stderr


def test_json_is_the_profile():
    r = run("--model", "qwen3-32b", "--gpu", "h100", "--context", "32768", "--concurrency", "4", "--json")
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)
    assert p["precision"]["weights"] == "fp8" and p["runtime"] == "trtllm-llmapi" and len(p["fingerprint"]) == 64


def test_issue_example_prints_failure_with_options():
    r = run("--model", "qwen3-14b", "--gpu", "a10", "--gpus", "1", "--context", "8192", "--concurrency", "16")
    assert r.returncode == 2
    assert "does not fit 1x A10" in r.stderr and "options:" in r.stderr and "considered:" in r.stderr
    assert "why:\n  - runtime trtllm-llmapi" in r.stderr


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
    assert "qwen3-30b-a3b-thinking-2507" in r.stdout and "always (template opens <think>)" in r.stdout
    assert "qwen3-14b: Qwen/Qwen3-14B-FP8 (fp8, fp8-block128), Qwen/Qwen3-14B-AWQ (int4_awq, autoawq-gemm)" in r.stdout


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
