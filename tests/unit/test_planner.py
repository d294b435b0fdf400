"""Planner decision table (issue 3) and the profile contract of docs/profile.md."""

import re
from pathlib import Path

import pytest
from triton_fleet import gpu_catalog, memory_model
from triton_fleet.fingerprint import fingerprint
from triton_fleet.planner import PlanError, format_table, plan, plan_fleet

FIX = Path(__file__).resolve().parent.parent / "fixtures"
TINY = str(FIX / "qwen3-tiny" / "config.json")
PROFILE_KEYS = {"schema_version", "name", "group", "model", "runtime", "device", "gpu", "precision", "parallel",
                "limits", "kv_cache", "scheduler", "image", "predicted", "reasons", "alternatives", "fingerprint"}


def req(**kw):
    base = {"model": "qwen3-14b", "gpu_sku": "a10", "gpu_count": 1, "context_length": 8192, "concurrency": 4}
    base.update(kw)
    return base


# Test input: a TensorRT Model Optimizer W4A16-AWQ export an operator made of the model and names in
# triton_fleet_quantized_checkpoints. Qwen publishes no int4 checkpoint TensorRT-LLM's PyTorch backend reads (its
# -AWQ is AutoAWQ), so without one the PyTorch path plans no int4 weights.
REV = "0123456789abcdef0123456789abcdef01234567"


def modelopt_awq(size="14B"):
    return {"int4_awq": {"repo": f"example-org/Qwen3-{size}-W4A16-AWQ", "revision": REV, "format": "modelopt-w4a16-awq"}}


def check_contract(p):
    # cuda_graphs: trtllm-llmapi only (TorchLlmArgs.cuda_graph_config)
    assert set(p) == PROFILE_KEYS | ({"cuda_graphs"} if p["runtime"] == "trtllm-llmapi" else set())
    assert set(p["limits"]) == {"max_batch_size", "max_input_len", "max_seq_len", "max_num_tokens", "max_output_len",
                                "max_beam_width"}
    assert set(p["predicted"]) == {"weights_bytes_per_gpu", "kv_bytes_per_gpu", "reserve_bytes_per_gpu",
                                   "cuda_graph_bytes_per_gpu", "total_bytes_per_gpu", "kv_tokens_capacity",
                                   "max_concurrency_at_max_seq_len", "decode_tokens_per_s_bs1", "efficiency_factor"}
    assert p["model"]["thinking"]["mode"] in ("switchable", "never", "always")
    assert p["fingerprint"] == fingerprint(p)
    assert p["limits"]["max_input_len"] + p["limits"]["max_output_len"] == p["limits"]["max_seq_len"]
    if p["device"] == "gpu":
        assert p["predicted"]["total_bytes_per_gpu"] <= p["gpu"]["memory_bytes"]
        assert len(p["parallel"]["gpu_device_ids"]) == p["parallel"]["replicas_per_host"]
        assert p["parallel"]["tp"] * p["parallel"]["replicas_per_host"] <= p["gpu"]["count_per_host"]
        # the KV pool holds what the request needs (TensorRT-LLM: in whole blocks)
        tpb = p["kv_cache"]["tokens_per_block"] if p["runtime"].startswith("trtllm") else None
        assert p["predicted"]["kv_tokens_capacity"] >= memory_model.kv_tokens_needed(
            p["limits"]["max_batch_size"], p["limits"]["max_seq_len"], tpb)
    if p["runtime"] == "trtllm-llmapi":
        sizes = p["cuda_graphs"]["batch_sizes"]
        assert sizes == memory_model.cuda_graph_batch_sizes(p["limits"]["max_batch_size"])
        assert p["predicted"]["cuda_graph_bytes_per_gpu"] == len(sizes) * 200 * 10 ** 6
    assert all(isinstance(a["rejected_because"], str) and a["rejected_because"] for a in p["alternatives"])


def test_qwen3_14b_on_1x_a10_at_8k_is_llmapi_int4_from_a_modelopt_export():
    """Ampere plans on the PyTorch (LLM API) path by default; int8 weight-only is not one it loads; int4 weights come
    from the pre-quantized checkpoint the profile names, not from the base one."""
    p = plan(req(concurrency=2, quantized_checkpoints=modelopt_awq()))
    check_contract(p)
    assert (p["precision"]["weights"], p["runtime"], p["parallel"]["tp"]) == ("int4_awq", "trtllm-llmapi", 1)
    assert p["image"]["ref"] == "nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3"
    assert p["model"]["checkpoint"] == {"key": "qwen3-14b-w4a16-awq", "hf_id": "example-org/Qwen3-14B-W4A16-AWQ",
                                        "revision": REV, "precision": "int4_awq", "format": "modelopt-w4a16-awq",
                                        "source": "operator"}
    # the model's identity stays the base model's
    assert (p["model"]["key"], p["model"]["hf_id"], p["model"]["served_name"]) == ("qwen3-14b", "Qwen/Qwen3-14B",
                                                                                   "qwen3-14b")
    names = {a["name"]: a["rejected_because"] for a in p["alternatives"]}
    assert "27.5 GiB" in names["bf16 tp1 trtllm-llmapi"]          # why not bf16: the weights alone
    assert "FP8" in names["fp8 (any TP)"] and "8.6" in names["fp8 (any TP)"]
    assert "cannot load int8_wo" in names["int8_wo (any TP)"]
    why = " ".join(p["reasons"])
    assert "runtime trtllm-llmapi" in why and "supports Ampere (compute capability 8.6" in why
    assert "first precision in the order bf16 > int4_awq" in why
    assert f"checkpoint example-org/Qwen3-14B-W4A16-AWQ@{REV}: int4_awq weights load only from a pre-quantized" in why
    assert "loaded as W4A16_AWQ on Ampere, Ada, Hopper" in why and "instead of Qwen/Qwen3-14B" in why
    table = "\n".join(format_table(p))
    assert f"checkpoint   example-org/Qwen3-14B-W4A16-AWQ@{REV}  pre-quantized int4_awq (modelopt-w4a16-awq, " \
           "named in triton_fleet_quantized_checkpoints), fetched and loaded instead of Qwen/Qwen3-14B@main" in table


def test_without_a_loadable_int4_checkpoint_the_a10_plan_says_why_and_what_fits():
    """Qwen's own Qwen3-14B-AWQ is AutoAWQ, which TensorRT-LLM's PyTorch backend refuses: int4 is not planned on
    one A10 (bf16 does not fit it), and the failure names why and options that plan as written."""
    with pytest.raises(PlanError) as e:
        plan(req(concurrency=2))
    msg = str(e.value)
    assert msg.startswith("qwen3-14b does not fit 1x A10")
    assert "(int4_awq not tried: no pre-quantized checkpoint TensorRT-LLM's PyTorch backend loads here; name one " \
           "in triton_fleet_quantized_checkpoints)" in msg
    names = {a["name"]: a["rejected_because"] for a in e.value.alternatives}
    why = names["int4_awq (any TP)"]
    assert "Qwen/Qwen3-14B-AWQ is AutoAWQ" in why and "Unsupported quantization_config" in why
    assert "format: modelopt-w4a16-awq" in why
    assert "2x A10 with TP=2 (bf16)" in e.value.options
    assert not any("int4" in o for o in e.value.options)
    ok = plan(req(concurrency=2, gpu_count=2))      # the option, as written
    assert (ok["precision"]["weights"], ok["parallel"]["tp"]) == ("bf16", 2) and "checkpoint" not in ok["model"]
    assert any("TP=2: no precision fits one GPU (int4_awq not tried" in r for r in ok["reasons"])


def test_an_fp8_plan_names_qwens_own_fp8_checkpoint_and_needs_its_revision():
    p = plan(req(model="qwen3-32b", gpu_sku="h100-sxm", concurrency=8))
    check_contract(p)
    c = p["model"]["checkpoint"]
    assert (c["hf_id"], c["key"], c["format"], c["source"], c["revision"]) == (
        "Qwen/Qwen3-32B-FP8", "qwen3-32b-fp8", "fp8-block128", "catalog", None)
    assert any("NOT PINNED" in r and "triton_fleet_quantized_checkpoints.fp8.revision" in r for r in p["reasons"])
    pinned = plan(req(model="qwen3-32b", gpu_sku="h100-sxm", concurrency=8,
                      quantized_checkpoints={"fp8": {"revision": REV}}))
    assert pinned["model"]["checkpoint"]["revision"] == REV
    assert any(r.startswith(f"checkpoint Qwen/Qwen3-32B-FP8@{REV}: fp8 weights load only") and
               "loaded as FP8_BLOCK_SCALES on Hopper, Blackwell SM100/SM103" in r for r in pinned["reasons"])
    # the checkpoint is part of what was built: another revision is another fingerprint
    other = plan(req(model="qwen3-32b", gpu_sku="h100-sxm", concurrency=8,
                     quantized_checkpoints={"fp8": {"revision": "f" * 40}}))
    assert len({p["fingerprint"], pinned["fingerprint"], other["fingerprint"]}) == 3


def test_fp8_block_scaled_checkpoints_are_not_planned_where_upstream_does_not_run_them():
    """FP8 block scaling runs on Hopper and Blackwell SM100/SM103 only: on an Ada L40S Qwen's -FP8 is no option,
    while a Model Optimizer (per-tensor) FP8 export is."""
    kw = dict(model="qwen3-32b", gpu_sku="l40s", gpu_count=1, context_length=8192, concurrency=2)
    with pytest.raises(PlanError) as e:
        plan(req(**kw))
    names = {a["name"]: a["rejected_because"] for a in e.value.alternatives}
    assert "Qwen/Qwen3-32B-FP8 (fp8-block128) loads on Hopper, Blackwell SM100/SM103 only" in names["fp8 (any TP)"]
    assert "compute capability 8.9 is Ada" in names["fp8 (any TP)"]
    p = plan(req(**kw, quantized_checkpoints={"fp8": {"repo": "example-org/Qwen3-32B-FP8-ModelOpt", "revision": REV,
                                                      "format": "modelopt-fp8"}}))
    assert (p["precision"]["weights"], p["model"]["checkpoint"]["format"]) == ("fp8", "modelopt-fp8")


@pytest.mark.parametrize("given,words", [
    ({"int4_awq": {"repo": "Qwen/Qwen3-14B-AWQ", "revision": REV}}, ["is AutoAWQ", "refuses", "modelopt-w4a16-awq"]),
    ({"fp8": {"revision": "main"}}, ["'main' is not pinned", "40 hex"]),
    ({"int8_wo": {"revision": REV}}, ["not a precision a pre-quantized checkpoint carries"]),
    ({"int4_awq": {"repo": "example-org/x", "revision": REV}}, ["not a checkpoint the catalog knows", "give its format"]),
    ({"fp8": {"repo": "Qwen/Qwen3-14B-FP8", "revision": REV, "format": "modelopt-fp8"}},
     ["format is modelopt-fp8 but Qwen/Qwen3-14B-FP8 is fp8-block128"]),
    ({"fp8": {"revision": REV, "format": "modelopt-w4a16-awq"}}, ["carries int4_awq weights, not fp8"]),
    ({"fp8": {"revision": REV, "tag": "v1"}}, ["unknown key(s) tag"]),
    ({"fp8": "abc"}, ["must be a mapping"]),
])
def test_bad_quantized_checkpoints_are_clear_errors(given, words):
    with pytest.raises(PlanError) as e:
        plan(req(model="qwen3-14b", gpu_sku="a10", gpu_count=2, quantized_checkpoints=given))
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_a_fine_tune_under_a_catalog_key_gets_none_of_qwens_checkpoints():
    """Qwen's -FP8 quantizes Qwen's weights: a model with another hf_id does not get it."""
    p = plan(req(model="qwen3-32b", hf_id="example-org/Qwen3-32B-finetune", gpu_sku="h100-sxm", gpu_count=2,
                 concurrency=16))
    assert (p["precision"]["weights"], p["parallel"]["tp"]) == ("bf16", 2) and "checkpoint" not in p["model"]
    qwen = plan(req(model="qwen3-32b", gpu_sku="h100-sxm", gpu_count=2, concurrency=16))
    assert (qwen["precision"]["weights"], qwen["parallel"]["tp"]) == ("fp8", 1)     # the same request, Qwen's weights
    assert "Qwen publishes none" in {a["name"]: a["rejected_because"] for a in p["alternatives"]}["fp8 (any TP)"]


def test_engine_path_only_when_asked_and_labelled_legacy():
    p = plan(req(concurrency=2, runtime="trtllm-engine"))
    check_contract(p)
    assert (p["precision"]["weights"], p["runtime"]) == ("int8_wo", "trtllm-engine")
    assert "cuda_graphs" not in p and p["predicted"]["cuda_graph_bytes_per_gpu"] == 0
    why = " ".join(p["reasons"])
    assert "operator override; LEGACY" in why and "after v1.3.0rc20" in why and "PR #15907" in why
    assert "[LEGACY: the TensorRT engine backend's last release was TensorRT-LLM 1.3.0rc20]" in \
        "\n".join(format_table(p))


def test_qwen3_14b_on_1x_a100_80gb_bf16_llmapi():
    p = plan(req(gpu_sku="a100-80gb-sxm", concurrency=16))
    check_contract(p)
    assert (p["precision"]["weights"], p["precision"]["kv_cache"], p["runtime"]) == ("bf16", "bf16", "trtllm-llmapi")
    assert p["name"] == "qwen3-14b_a100-80gb-sxm-x1_bf16_tp1_trtllm-llmapi"
    assert p["model"]["params"] == 14768307200
    assert p["image"] == {"ref": "nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3", "triton": "26.07",
                          "trtllm": "1.2.1", "cuda": "13.1", "min_driver_branch": 580}
    assert p["predicted"]["weights_bytes_per_gpu"] == memory_model.weight_bytes(
        __import__("triton_fleet.model_catalog").model_catalog.get("qwen3-14b"), "bf16")
    assert p["predicted"]["decode_tokens_per_s_bs1"] > 0 and 0 < p["predicted"]["efficiency_factor"] <= 1
    assert p["cuda_graphs"] == {"batch_sizes": [1, 2, 4, 8, 16], "enable_padding": True}
    assert p["kv_cache"]["free_gpu_mem_fraction"] == 0.9
    assert any("supports Ampere (compute capability 8.0" in r for r in p["reasons"])


def test_cuda_graphs_lower_the_kv_fraction_when_the_headroom_is_short():
    """The graphs are captured after the KV pool: the (1 - fraction) headroom must hold them (200 MB each)."""
    p = plan(req(concurrency=2, kv_cache_free_gpu_mem_fraction=0.99, quantized_checkpoints=modelopt_awq()))
    check_contract(p)
    free = p["gpu"]["memory_bytes"] - p["predicted"]["weights_bytes_per_gpu"] - p["predicted"]["reserve_bytes_per_gpu"]
    frac = p["kv_cache"]["free_gpu_mem_fraction"]
    assert frac < 0.99 and (1 - frac) * free >= p["predicted"]["cuda_graph_bytes_per_gpu"]
    assert any(r.startswith(f"KV fraction {frac} instead of 0.99") for r in p["reasons"])


def test_qwen3_32b_on_2x_a100_40gb_at_32k_x8_says_what_fits():
    with pytest.raises(PlanError) as e:
        plan(req(model="qwen3-32b", gpu_sku="a100-40gb-sxm", gpu_count=2, context_length=32768, concurrency=8,
                 quantized_checkpoints=modelopt_awq("32B")))
    msg = str(e.value)
    assert msg.startswith("qwen3-32b does not fit 2x A100-SXM4-40GB")
    assert "32768 tokens x 8 concurrent" in msg and "TP=2" in msg and "options:" in msg
    # what fits on these two GPUs: less context at x8, or fewer sequences at 32K
    m1 = re.search(r"2x A100-SXM4-40GB with TP=2 at (\d+) tokens x 8", msg)
    m2 = re.search(r"with TP=2 at 32768 tokens x (\d+) concurrent", msg)
    assert m1 and 16384 <= int(m1.group(1)) < 32768
    assert m2 and 1 <= int(m2.group(1)) < 8
    # the option it names really fits
    ok = plan(req(model="qwen3-32b", gpu_sku="a100-40gb-sxm", gpu_count=2, context_length=int(m1.group(1)),
                  concurrency=8, quantized_checkpoints=modelopt_awq("32B")))
    check_contract(ok)
    assert ok["parallel"]["tp"] == 2
    assert len(e.value.alternatives) >= 6 and e.value.options


def test_qwen3_32b_on_1x_h100_fp8_llmapi():
    p = plan(req(model="qwen3-32b", gpu_sku="h100-sxm", context_length=32768, concurrency=4))
    check_contract(p)
    assert (p["precision"]["weights"], p["precision"]["kv_cache"], p["runtime"]) == ("fp8", "fp8", "trtllm-llmapi")
    assert any(a["name"] == "bf16 tp1 trtllm-llmapi" for a in p["alternatives"])


def test_qwen3_32b_on_1x_a10_at_32k_x4_fails_with_options():
    with pytest.raises(PlanError) as e:
        plan(req(model="qwen3-32b", context_length=32768, concurrency=4, quantized_checkpoints=modelopt_awq("32B")))
    msg = str(e.value)
    assert msg.startswith("qwen3-32b does not fit 1x A10 (24 GB, 22.5 GiB usable) at 32768 tokens x 4 concurrent: "
                          "int4 weights need 17.")
    assert "the KV cache 32.0 GiB" in msg
    assert "2x A10 with TP=2" in msg and "A100-SXM4-80GB" in msg
    assert e.value.options and all(isinstance(o, str) for o in e.value.options)


@pytest.mark.parametrize("kw,words", [
    ({"model": "qwen3-15b"}, ["unknown model 'qwen3-15b'", "qwen3-14b", "--model-config"]),
    ({"gpu_count": 0}, ["GPU count is 0", "triton_fleet_device: cpu"]),
    ({"context_length": 65536}, ["65536 exceeds qwen3-14b's maximum of 40960", "YaRN", "131072"]),
    ({"gpu_sku": "v100"}, ["unknown GPU 'v100'", "--list-gpus"]),
    ({"concurrency": 0}, ["concurrency must be >= 1"]),
    ({"precision": "fp8"}, ["fp8 needs FP8", "8.6", "int4_awq"]),
    ({"tp": 2}, ["TP=2 needs 2 GPUs, the host has 1"]),
    ({"runtime": "trtllm-llmapi", "precision": "int8_wo"}, ["int8_wo is not available with runtime trtllm-llmapi"]),
    ({"image": "nvcr.io/nvidia/tritonserver:26.10-trtllm-python-py3"}, ["not confirmed", "26.07"]),
    # a release without a TensorRT-LLM container: no trtllm_version makes the image exist
    ({"image": "nvcr.io/nvidia/tritonserver:26.11-trtllm-python-py3", "trtllm_version": "1.2.1"},
     ["does not exist", "26.11 release notes", "newest release known to ship a TensorRT-LLM container is 26.09",
      "26.07-trtllm-python-py3"]),
    ({"image": "nvcr.io/nvidia/tritonserver:23.09-trtllm-python-py3"}, ["does not exist", "23.10"]),
    ({"yarn_factor": 4.0}, ["without it", "remove yarn_factor"]),
])
def test_bad_input_is_a_clear_error(kw, words):
    with pytest.raises(PlanError) as e:
        plan(req(**kw))
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_yarn_allows_long_context():
    p = plan(req(gpu_sku="h200", context_length=131072, concurrency=1, yarn_factor=4.0))
    assert p["limits"]["max_seq_len"] == 131072
    assert p["model"]["rope_scaling"]["factor"] == 4.0


def test_engine_refused_with_trtllm_1_3():
    with pytest.raises(PlanError) as e:
        plan(req(gpu_sku="a100-80gb-sxm", runtime="trtllm-engine",
                 image="nvcr.io/nvidia/tritonserver:26.10-trtllm-python-py3", trtllm_version="1.3.0"))
    msg = str(e.value)
    assert "trtllm-engine (legacy) is built only with TensorRT-LLM 1.2.x" in msg
    assert "after v1.3.0rc20" in msg and "PR #15907" in msg and "the planner picks trtllm-llmapi" in msg
    # without the override: the PyTorch backend, as on every supported GPU
    p = plan(req(gpu_sku="a100-80gb-sxm", image="nvcr.io/nvidia/tritonserver:26.10-trtllm-python-py3",
                 trtllm_version="1.3.0"))
    assert p["runtime"] == "trtllm-llmapi"


def test_llmapi_refused_below_ampere():
    gpu = {"model": "qwen3-4b", "gpu_sku": "a10", "gpu_compute_capability": "7.5"}  # a Turing board (gpu_facts)
    p = plan(req(**gpu))
    assert p["runtime"] == "transformers" and any("below 8.0" in r for r in p["reasons"])
    with pytest.raises(PlanError, match="support matrix lists Ampere"):
        plan(req(runtime="trtllm-llmapi", **gpu))


def test_failure_says_which_runtime_it_tried():
    with pytest.raises(PlanError) as e:
        plan(req(concurrency=16))
    assert any(r.startswith("runtime trtllm-llmapi") for r in e.value.reasons)
    text = "\n".join(__import__("triton_fleet.planner").planner.format_failure(e.value))
    assert "why:\n  - runtime trtllm-llmapi" in text


def test_options_name_only_what_the_runtime_loads():
    """The L40S case advised "an A100 (int8_wo)", which the runtime chosen for an A100 cannot load."""
    with pytest.raises(PlanError) as e:
        plan(req(model="qwen3-30b-a3b", gpu_sku="l40s", context_length=8192, concurrency=48))
    assert e.value.options and not any("int8_wo" in o for o in e.value.options)
    # every option naming another GPU plans as written
    for opt in e.value.options:
        m = re.fullmatch(r"an (\S+) \((\w+)\)", opt)
        if m:
            sku = gpu_catalog.identify(name="NVIDIA " + m.group(1))
            ok = plan(req(model="qwen3-30b-a3b", gpu_sku=sku, context_length=8192, concurrency=48,
                          precision=m.group(2)))
            assert ok["precision"]["weights"] == m.group(2)


def test_overrides_are_honoured_and_checked():
    p = plan(req(gpu_sku="a100-80gb-sxm", gpu_count=2, precision="int4_awq", tp=2, quantized_checkpoints=modelopt_awq()))
    assert (p["precision"]["weights"], p["parallel"]["tp"], p["parallel"]["gpu_device_ids"]) == ("int4_awq", 2, ["0,1"])
    with pytest.raises(PlanError) as e:      # an override is checked too: no checkpoint the runtime loads
        plan(req(gpu_sku="a100-80gb-sxm", precision="int4_awq"))
    assert "precision int4_awq on runtime trtllm-llmapi loads a pre-quantized checkpoint" in str(e.value)
    assert "Qwen/Qwen3-14B-AWQ is AutoAWQ" in str(e.value)
    with pytest.raises(PlanError) as e:
        plan(req(precision="bf16"))
    assert "with the override precision=bf16" in str(e.value) and "bf16 weights need 27.5 GiB" in str(e.value)


def test_more_gpus_by_tp_when_no_precision_fits_one():
    p = plan(req(model="qwen3-32b", gpu_count=4, context_length=32768, concurrency=4,
                 quantized_checkpoints=modelopt_awq("32B")))
    check_contract(p)
    assert p["parallel"]["tp"] in (2, 4)
    assert any(a["name"].endswith("tp1 trtllm-llmapi") for a in p["alternatives"])
    assert any("TP=" in r and "no NVLink" in r for r in p["reasons"])


def test_replicas_when_one_gpu_suffices():
    p = plan(req(gpu_sku="h100-sxm", gpu_count=4, concurrency=8))
    assert p["parallel"]["tp"] == 1 and p["parallel"]["replicas_per_host"] == 4
    assert p["parallel"]["gpu_device_ids"] == ["0", "1", "2", "3"]
    assert p["limits"]["max_batch_size"] == 2


def test_lab_profile_cpu_transformers_fp32():
    p = plan({"model": "qwen3-tiny", "model_config": TINY, "device": "cpu", "context_length": 2048,
              "concurrency": 4, "image": "triton-fleet/tritonserver-lab:abc", "group": "lab_cpu",
              "host_memory_bytes": 2 * memory_model.GIB})
    check_contract(p)
    assert (p["runtime"], p["device"], p["gpu"]["sku"], p["gpu"]["count_per_host"]) == ("transformers", "cpu", "cpu", 0)
    assert p["precision"] == {"dtype": "float32", "weights": "fp32", "kv_cache": "fp32"}
    assert p["image"]["trtllm"] is None and p["model"]["key"] == "qwen3-tiny"
    assert p["name"] == "qwen3-tiny_cpu_fp32_tp1_transformers"
    with pytest.raises(PlanError, match="needs an NVIDIA GPU"):
        plan({"model": "qwen3-tiny", "model_config": TINY, "device": "cpu", "runtime": "trtllm-llmapi"})


def test_lab_context_is_limited_by_the_checkpoint(tmp_path):
    import json
    cfg = json.loads(Path(TINY).read_text())
    cfg["max_position_embeddings"] = 2048   # what tools/lab-image/make_tiny_model.py writes
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(PlanError, match="maximum of 2048"):
        plan({"model": "qwen3-tiny", "model_config": str(tmp_path), "device": "cpu", "context_length": 4096})


def test_table_is_readable():
    lines = format_table(plan(req(concurrency=2, quantized_checkpoints=modelopt_awq())))
    text = "\n".join(lines)
    for word in ("profile", "runtime", "precision", "memory/GPU", "decode bs=1", "fingerprint", "why:", "rejected:"):
        assert word in text


def test_gpu_facts_memory_wins_over_catalog():
    mem = 23028 * gpu_catalog.MIB - 2 * memory_model.GIB
    a = plan(req(concurrency=1, precision="int4_awq", quantized_checkpoints=modelopt_awq()))
    b = plan(req(concurrency=1, precision="int4_awq", gpu_memory_bytes=mem, quantized_checkpoints=modelopt_awq()))
    assert b["predicted"]["kv_tokens_capacity"] < a["predicted"]["kv_tokens_capacity"]


# ----------------------------------------------------------------------------------- fleet mode

def host(groups, sku="a10", count=1, **request):
    gpus = [{"index": i, "sku": sku, "name": gpu_catalog.GPUS[sku]["name"],
             "memory_bytes": gpu_catalog.memory_bytes(sku), "compute_capability": gpu_catalog.GPUS[sku]["compute_capability"]}
            for i in range(count)]
    r = {"model": "qwen3-14b", "context_length": 8192, "concurrency": 2}
    r.update(request)
    return {"group_names": groups, "gpu_facts": {"count": count, "gpus": gpus, "nvlink": False}, "request": r}


GROUPS = {"gpu_nodes": ["n1", "n2", "n3"], "gpu_a10": ["n1", "n2"], "gpu_a100": ["n3"], "all": ["n1", "n2", "n3"]}


def test_fleet_plans_each_group():
    awq = modelopt_awq()
    hosts = {"n1": host(["gpu_nodes", "gpu_a10"], quantized_checkpoints=awq),
             "n2": host(["gpu_nodes", "gpu_a10"], quantized_checkpoints=awq),
             "n3": host(["gpu_nodes", "gpu_a100"], sku="a100-80gb-sxm", quantized_checkpoints=awq)}
    profiles, host_groups, errors = plan_fleet(hosts, GROUPS)
    assert errors == []
    assert host_groups == {"n1": "gpu_a10", "n2": "gpu_a10", "n3": "gpu_a100"}
    assert (profiles["gpu_a10"]["precision"]["weights"], profiles["gpu_a10"]["runtime"]) == ("int4_awq", "trtllm-llmapi")
    assert profiles["gpu_a100"]["precision"]["weights"] == "bf16" and profiles["gpu_a100"]["group"] == "gpu_a100"


def test_fleet_refuses_a_pre_quantized_checkpoint_without_a_pinned_revision():
    """tools/plan shows such a plan (NOT PINNED); the preflight's fleet mode plans none, naming what to set."""
    groups = {"gpu_nodes": ["h1"], "gpu_h100": ["h1"]}
    unpinned = {"h1": host(["gpu_nodes", "gpu_h100"], sku="h100-sxm", model="qwen3-32b", concurrency=8)}
    profiles, _, errors = plan_fleet(unpinned, groups)
    assert profiles == {} and len(errors) == 1
    assert errors[0] == ("group gpu_h100 (h1) planned fp8 weights: the pre-quantized checkpoint Qwen/Qwen3-32B-FP8 "
                         "(fp8 weights) has no pinned revision: set triton_fleet_quantized_checkpoints.fp8.revision "
                         "to the commit of Qwen/Qwen3-32B-FP8 to serve (its full hash, 40 hex characters)")
    pinned = {"h1": host(["gpu_nodes", "gpu_h100"], sku="h100-sxm", model="qwen3-32b", concurrency=8,
                         quantized_checkpoints={"fp8": {"revision": REV}})}
    profiles, _, errors = plan_fleet(pinned, groups)
    assert errors == [] and profiles["gpu_h100"]["model"]["checkpoint"]["revision"] == REV


def test_fleet_names_the_odd_host():
    hosts = {"n1": host(["gpu_nodes", "gpu_a10"]), "n2": host(["gpu_nodes", "gpu_a10"], count=2),
             "n3": host(["gpu_nodes", "gpu_a100"], sku="a100-80gb-sxm")}
    profiles, _, errors = plan_fleet(hosts, GROUPS)
    assert len(errors) == 1 and "group gpu_a10 is not homogeneous: n2 has 2x a10 where n1 has 1x a10" in errors[0]
    assert "gpu_a10" not in profiles and "gpu_a100" in profiles


def test_fleet_reports_every_failing_group():
    hosts = {"n1": host(["gpu_nodes", "gpu_a10"], model="qwen3-32b", context_length=32768, concurrency=4),
             "n2": host(["gpu_nodes", "gpu_a10"], model="qwen3-32b", context_length=32768, concurrency=4),
             "n3": host(["gpu_nodes", "gpu_a100"], sku="a100-80gb-sxm", model="qwen3-99b")}
    _, _, errors = plan_fleet(hosts, GROUPS)
    assert len(errors) == 2
    assert errors[0].startswith("group gpu_a10 (n1, n2): qwen3-32b does not fit")
    assert "unknown model 'qwen3-99b'" in errors[1]


def test_fleet_differing_variables_named():
    hosts = {"n1": host(["gpu_nodes", "gpu_a10"]), "n2": host(["gpu_nodes", "gpu_a10"], context_length=4096)}
    _, _, errors = plan_fleet(hosts, {"gpu_nodes": ["n1", "n2"], "gpu_a10": ["n1", "n2"]})
    assert errors and "context_length" in errors[0] and "n2" in errors[0]


def test_qwen3_235b_moe_on_8x_h100_fp8_spreads_experts():
    p = plan(req(model="qwen3-235b-a22b", gpu_sku="h100-sxm", gpu_count=8, precision="fp8", tp=8))
    check_contract(p)
    assert p["runtime"] == "trtllm-llmapi"
    assert (p["parallel"]["tp"], p["parallel"]["ep"], p["parallel"]["launch_mode"]) == (8, 8, "llmapi-spawn")
    # ~235e9 parameters at one byte, an eighth per GPU, plus the replicated embeddings/norms: ~28-30 GiB.
    assert 27 * 2**30 < p["predicted"]["weights_bytes_per_gpu"] < 31 * 2**30
    why = " ".join(p["reasons"])
    assert "EP=8: the 128 experts spread over the 8 GPUs" in why
    assert "replicates each KV head on 2 GPUs" in why


def test_qwen3_30b_moe_on_1x_a100_goes_llmapi_bf16():
    p = plan(req(model="qwen3-30b-a3b", gpu_sku="a100-80gb-sxm", concurrency=4))
    check_contract(p)
    assert (p["runtime"], p["precision"]["weights"], p["parallel"]["tp"], p["parallel"]["ep"]) == \
        ("trtllm-llmapi", "bf16", 1, 1)


@pytest.mark.parametrize("kw, words", [
    ({"gpu_sku": "h100-sxm", "gpu_count": 2, "tp": 2, "ep": 2}, ["qwen3-14b is dense", "drop the ep override"]),
    ({"model": "qwen3-235b-a22b", "gpu_sku": "h100-sxm", "gpu_count": 8, "tp": 8, "ep": 3, "precision": "fp8"},
     ["EP must divide TP=8"]),
    ({"model": "qwen3-30b-a3b", "gpu_sku": "h100-sxm", "runtime": "trtllm-engine"}, ["norm_topk_prob", "trtllm-llmapi"]),
    ({"model": "qwen3-30b-a3b", "gpu_sku": "h100-sxm", "runtime": "transformers", "ep": 2},
     ["the transformers runtime has no expert parallelism"]),
    # 40 heads, 8 KV heads: TP=5 divides the heads but not the KV heads, and is no multiple of them.
    ({"gpu_sku": "h100-sxm", "gpu_count": 5, "tp": 5}, ["TP=5 neither divides the 8 KV heads nor is a multiple"]),
])
def test_moe_and_tp_refusals_say_why(kw, words):
    with pytest.raises(PlanError) as e:
        plan(req(**kw))
    for w in words:
        assert w in str(e.value), (w, str(e.value))


# ------------------------------------------------------------------------------------ Qwen3-2507

def test_qwen3_2507_plans_up_to_its_native_context():
    p = plan(req(model="qwen3-30b-a3b-instruct-2507", gpu_sku="h100-sxm", gpu_count=2, context_length=262144,
                 concurrency=4))
    check_contract(p)
    assert p["limits"]["max_seq_len"] == 262144 and "rope_scaling" not in p["model"]
    assert p["model"]["max_position_embeddings"] == 262144
    assert p["model"]["thinking"] == {"mode": "never", "template_opens_think": False}
    # fp8 on H100, one GPU per replica: the KV of 2 sequences of 262,144 tokens, 2 x 48 layers x 4 KV heads x 128
    # x 1 byte per token = 48 GiB, fits 79.6 GiB beside 29 GiB of weights; bf16 would need 48 GiB of KV beside 57
    assert (p["precision"]["kv_cache"], p["parallel"]["tp"], p["limits"]["max_batch_size"]) == ("fp8", 1, 2)
    assert p["predicted"]["kv_tokens_capacity"] >= 2 * 262144
    assert p["predicted"]["kv_tokens_capacity"] * 2 * 48 * 4 * 128 <= p["predicted"]["kv_bytes_per_gpu"]
    assert p["predicted"]["max_concurrency_at_max_seq_len"] >= 4


def test_qwen3_2507_thinking_variant_in_the_profile():
    p = plan(req(model="qwen3-4b-thinking-2507", gpu_sku="l4", context_length=32768, concurrency=1))
    assert p["model"]["thinking"] == {"mode": "always", "template_opens_think": True}
    assert "the template opens <think>" in "\n".join(format_table(p))


def test_qwen3_2507_beyond_native_context_needs_yarn():
    big = {"model": "qwen3-235b-a22b-thinking-2507", "gpu_sku": "b200", "gpu_count": 8, "concurrency": 1,
           "precision": "fp8"}
    with pytest.raises(PlanError) as e:
        plan(req(context_length=524288, **big))
    assert "maximum of 262144" in str(e.value) and "1048576 tokens with YaRN" in str(e.value)
    p = plan(req(context_length=524288, yarn_factor=2.0, **big))
    check_contract(p)
    assert p["model"]["rope_scaling"] == {"rope_type": "yarn", "factor": 2.0,
                                          "original_max_position_embeddings": 262144}
    with pytest.raises(PlanError, match="fit qwen3-235b-a22b-thinking-2507 without it"):
        plan(req(context_length=262144, yarn_factor=2.0, **big))
