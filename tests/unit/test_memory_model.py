"""Memory / speed model against the exact figures measured on a real H200 (tests/fixtures/measured-h200-qwen3.json)."""

import json
from pathlib import Path

import pytest
from triton_fleet import memory_model as mm
from triton_fleet import model_catalog as mc

MEASURED = json.loads((Path(__file__).resolve().parent.parent / "fixtures" / "measured-h200-qwen3.json").read_text())
H200_BW_GBS = 4800


@pytest.mark.parametrize("key", ["qwen3-14b", "qwen3-32b"])
def test_parameter_count_is_exact(key):
    assert mm.param_count(mc.get(key)) == MEASURED[key]["params"]


@pytest.mark.parametrize("key", ["qwen3-14b", "qwen3-32b"])
def test_bf16_weight_bytes_within_0_1_percent(key):
    pred = mm.weight_bytes(mc.get(key), "bf16")
    meas = MEASURED[key]["weights_bytes_allocated"]
    assert abs(pred - meas) / meas < 0.001


def test_kv_bytes_per_token_bf16():
    assert mm.kv_bytes_per_token(mc.get("qwen3-14b"), "bf16") == 163840
    assert mm.kv_bytes_per_token(mc.get("qwen3-32b"), "bf16") == 262144
    assert mm.kv_bytes_per_token(mc.get("qwen3-32b"), "fp8") == 131072
    # TP divides the KV heads; PP divides the layers
    assert mm.kv_bytes_per_token(mc.get("qwen3-14b"), "bf16", tp=2) == 81920
    assert mm.kv_bytes_per_token(mc.get("qwen3-14b"), "bf16", pp=2) == 81920
    # more TP than KV heads replicates them: 8 KV heads over TP=16 stays 1 head per GPU
    assert mm.kv_bytes_per_token(mc.get("qwen3-14b"), "bf16", tp=16) == 163840 // 8


@pytest.mark.parametrize("case,tol", [("B4_T2048", 0.001), ("B8_T8192", 0.001), ("B1_T4096", 0.06)])
def test_kv_cache_after_prefill_matches_measurement(case, tol):
    b, t = (int(x[1:]) for x in case.split("_"))
    meas = MEASURED["qwen3-14b"]["kv_cache_after_prefill"][case]
    pred = mm.kv_bytes_per_token(mc.get("qwen3-14b"), "bf16") * b * t
    assert pred == meas["pred"]
    # the smallest case also holds ~34 MB of non-KV allocations, hence the wider tolerance
    assert abs(pred - meas["delta_alloc"]) / meas["delta_alloc"] < tol


@pytest.mark.parametrize("case", ["B1_T4096", "B4_T2048", "B8_T8192"])
def test_activation_model_matches_prefill_transient(case):
    """peak_over_weights - KV = transient activations of one forward over B*T tokens."""
    b, t = (int(x[1:]) for x in case.split("_"))
    meas = MEASURED["qwen3-14b"]["kv_cache_after_prefill"][case]
    transient = meas["peak_over_weights"] - meas["delta_alloc"]
    pred = mm.activation_bytes_per_token(mc.get("qwen3-14b"), "bf16") * b * t
    assert abs(pred - transient) / transient < 0.03


def test_precision_ordering_and_16bit_parts():
    m = mc.get("qwen3-32b")
    b = {p: mm.weight_bytes(m, p) for p in mm.WEIGHT_PRECISIONS}
    assert b["fp32"] > b["bf16"] == b["fp16"] > b["int8_wo"] > b["fp8"] > b["int4_gptq"] > b["int4_awq"]
    emb = mm.param_breakdown(m)["embedding"] + mm.param_breakdown(m)["lm_head"]
    # int4: 0.5 B per linear weight + group scales, embedding and LM head stay 16-bit: 17.x GiB (issue 3)
    assert 17.0 < b["int4_awq"] / mm.GIB < 18.0
    assert b["int4_awq"] > 2 * emb + mm.param_breakdown(m)["layers"] // 2
    assert abs(b["int4_awq"] - (2 * emb + mm.param_breakdown(m)["layers"] * (0.5 + 2 / 128))) / b["int4_awq"] < 0.01


def test_tp_and_pp_split_weights():
    m = mc.get("qwen3-14b")
    full = mm.weight_bytes(m, "bf16")
    tp2 = mm.weight_bytes(m, "bf16", tp=2)
    emb = 2 * m["vocab_size"] * m["hidden_size"]
    # linear layers and LM head halve, the embedding is replicated
    assert abs(tp2 - (full - emb) / 2 - emb) / tp2 < 0.001
    pp2 = mm.weight_bytes(m, "bf16", pp=2)
    assert full / 2 < pp2 < full / 2 + emb


def test_moe_active_parameters():
    b = mm.param_breakdown(mc.get("qwen3-30b-a3b"))
    assert 30.4e9 < b["total"] < 30.6e9 and 3.2e9 < b["active"] < 3.4e9
    b = mm.param_breakdown(mc.get("qwen3-235b-a22b"))
    assert 234e9 < b["total"] < 236e9 and 21.5e9 < b["active"] < 22.5e9


def test_kv_capacity_and_concurrency():
    cap = mm.kv_capacity_tokens(80 * mm.GIB, 30 * mm.GIB, 2 * mm.GIB, 163840, 0.9)
    assert cap == int(0.9 * 48 * mm.GIB) // 163840
    assert mm.max_concurrency(cap, 8192) == cap // 8192
    assert mm.kv_capacity_tokens(20 * mm.GIB, 30 * mm.GIB, 2 * mm.GIB, 163840) == 0


def test_kv_capacity_in_whole_blocks():
    """TensorRT-LLM's paged KV cache holds whole blocks of tokens_per_block tokens."""
    kv = 98304  # qwen3-30b-a3b bf16, one GPU
    pool = int(0.9 * 10 * mm.GIB)
    cap = mm.kv_capacity_tokens(12 * mm.GIB, 1 * mm.GIB, 1 * mm.GIB, kv, 0.9, tokens_per_block=32)
    assert cap == pool // (kv * 32) * 32 and cap % 32 == 0 and cap <= pool // kv
    assert mm.kv_tokens_needed(4, 262144, 32) == 4 * 262144        # exact at the 2507 models' native context
    assert mm.kv_tokens_needed(2, 1000, 32) == 2 * 1024            # a partial block is a whole block
    assert mm.kv_tokens_needed(2, 1000) == 2000


@pytest.mark.parametrize("max_batch_size,sizes", [
    # TensorRT-LLM 1.2.0 CudaGraphConfig._generate_cuda_graph_batch_sizes(max_batch_size, enable_padding=True):
    # [1, 2, 4] + 8..128 step 8, powers of two from 256 below max_batch_size, <= max_batch_size, + max_batch_size
    (1, [1]),
    (3, [1, 2, 3]),
    (4, [1, 2, 4]),
    (16, [1, 2, 4, 8, 16]),
    (20, [1, 2, 4, 8, 16, 20]),
    (48, [1, 2, 4, 8, 16, 24, 32, 40, 48]),
    (300, [1, 2, 4] + list(range(8, 129, 8)) + [256, 300]),
    (1024, [1, 2, 4] + list(range(8, 129, 8)) + [256, 512, 1024]),
])
def test_cuda_graph_batch_sizes_follow_upstream(max_batch_size, sizes):
    assert mm.cuda_graph_batch_sizes(max_batch_size) == sizes
    assert mm.cuda_graph_bytes(sizes) == len(sizes) * 200 * 10 ** 6   # "up to 200 MB of extra memory" each


@pytest.mark.parametrize("key", ["qwen3-14b", "qwen3-32b"])
def test_transformers_decode_speed_matches_h200_baseline(key):
    """Eager transformers bs=1 on the H200 (512-token prompt + 128 new): model within 10 %."""
    tps, eff, roof = mm.decode_tokens_per_s_bs1(mc.get(key), "transformers", "bf16", "bf16", H200_BW_GBS,
                                                context_tokens=576)
    meas = MEASURED[key]["naive_generate_tokens_per_s"]["bs1"]
    assert abs(tps - meas) / meas < 0.10
    assert roof > tps and eff == pytest.approx(tps / roof)


def test_trtllm_roofline_efficiency_is_stated():
    m = mc.get("qwen3-14b")
    tps, eff, roof = mm.decode_tokens_per_s_bs1(m, "trtllm-engine", "bf16", "bf16", 2039, context_tokens=0)
    assert eff == mm.EFFICIENCY["trtllm-engine"]
    assert roof == pytest.approx(2039e9 / mm.weight_bytes(m, "bf16"))
    tp2, eff2, _ = mm.decode_tokens_per_s_bs1(m, "trtllm-engine", "bf16", "bf16", 2039, context_tokens=0, tp=2,
                                              nvlink=False)
    assert eff2 < eff and tp2 > tps   # half the bytes per GPU, minus the all-reduce cost


def test_unknown_precision_rejected():
    with pytest.raises(ValueError, match="unknown weight precision"):
        mm.weight_bytes(mc.get("qwen3-14b"), "int3")
    with pytest.raises(ValueError, match="unknown KV dtype"):
        mm.kv_bytes_per_token(mc.get("qwen3-14b"), "int2")
