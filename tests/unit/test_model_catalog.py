"""Model catalog: built-in Qwen3 facts (reference §10) and reading local HF config.json files."""

import json
from pathlib import Path

import pytest
from triton_fleet import memory_model as mm
from triton_fleet import model_catalog as mc

FIX = Path(__file__).resolve().parent.parent / "fixtures"

# reference §10 table: layers hidden heads kv head_dim intermediate tied
REF10 = {
    "qwen3-0.6b": (28, 1024, 16, 8, 128, 3072, True),
    "qwen3-4b": (36, 2560, 32, 8, 128, 9728, True),
    "qwen3-8b": (36, 4096, 32, 8, 128, 12288, False),
    "qwen3-14b": (40, 5120, 40, 8, 128, 17408, False),
    "qwen3-32b": (64, 5120, 64, 8, 128, 25600, False),
}


@pytest.mark.parametrize("key", sorted(REF10))
def test_builtin_qwen3_match_reference(key):
    m = mc.get(key)
    got = (m["num_layers"], m["hidden_size"], m["num_attention_heads"], m["num_kv_heads"], m["head_dim"],
           m["intermediate_size"], m["tie_word_embeddings"])
    assert got == REF10[key]
    assert m["vocab_size"] == 151936 and m["max_position_embeddings"] == 40960
    assert m["architecture"] == "Qwen3ForCausalLM"


def test_family_is_complete():
    for key in ("qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b", "qwen3-14b", "qwen3-32b", "qwen3-30b-a3b",
                "qwen3-235b-a22b"):
        assert key in mc.MODELS


def test_unknown_model_error_names_the_known_ones_and_the_way_out():
    with pytest.raises(mc.ModelError) as e:
        mc.get("qwen3-15b")
    msg = str(e.value)
    assert "qwen3-15b" in msg and "qwen3-14b" in msg and "config.json" in msg


def test_qwen3_tiny_needs_its_config():
    with pytest.raises(mc.ModelError) as e:
        mc.get("qwen3-tiny")
    assert "config.json" in str(e.value)
    m = mc.resolve("qwen3-tiny", FIX / "qwen3-tiny" / "config.json")
    assert (m["key"], m["num_layers"], m["hidden_size"], m["num_kv_heads"], m["head_dim"]) == ("qwen3-tiny", 4, 256, 2, 64)
    assert m["hf_id"] is None and m["tie_word_embeddings"] is False
    # directory form works too
    assert mc.resolve("qwen3-tiny", FIX / "qwen3-tiny")["num_layers"] == 4


def _write(tmp_path, cfg):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    return p


def test_reading_qwen3_config_reproduces_the_builtin(tmp_path):
    cfg = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 5120,
           "intermediate_size": 17408, "num_hidden_layers": 40, "num_attention_heads": 40, "num_key_value_heads": 8,
           "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960, "tie_word_embeddings": False,
           "attention_bias": False, "rope_scaling": None}
    m = mc.resolve("qwen3-14b", _write(tmp_path, cfg))
    assert mm.param_count(m) == mm.param_count(mc.get("qwen3-14b")) == 14768307200
    assert m["hf_id"] == "Qwen/Qwen3-14B"


# Published parameter counts of other decoder families (model cards / safetensors metadata).
@pytest.mark.parametrize("cfg,params", [
    ({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
      "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
      "max_position_embeddings": 131072, "tie_word_embeddings": False}, 8030261248),      # Llama-3.1-8B
    ({"model_type": "mistral", "architectures": ["MistralForCausalLM"], "hidden_size": 4096,
      "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
      "vocab_size": 32000, "max_position_embeddings": 32768, "tie_word_embeddings": False}, 7241732096),  # Mistral-7B
    ({"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_size": 3584, "intermediate_size": 18944,
      "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064,
      "max_position_embeddings": 131072, "tie_word_embeddings": False}, 7615616512),     # Qwen2.5-7B (qkv bias)
])
def test_other_families_from_config(tmp_path, cfg, params):
    m = mc.resolve("x", _write(tmp_path, cfg))
    assert mm.param_count(m) == params


def test_bad_configs_are_clear(tmp_path):
    with pytest.raises(mc.ModelError, match="does not exist"):
        mc.resolve("x", tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(mc.ModelError, match="not readable JSON"):
        mc.resolve("x", tmp_path / "bad.json")
    with pytest.raises(mc.ModelError, match="not supported"):
        mc.resolve("x", _write(tmp_path, {"model_type": "t5"}))
    with pytest.raises(mc.ModelError, match="lacks"):
        mc.resolve("x", _write(tmp_path, {"model_type": "llama", "hidden_size": 8}))


def test_max_context_and_yarn():
    m = mc.get("qwen3-14b")
    assert mc.max_context(m) == 40960
    assert mc.max_context(m, 4.0) == 131072
    assert mc.max_context(m, 2.0) == 65536


# Qwen3-2507 (QwenLM/Qwen3 README; model cards of Qwen3-30B-A3B-Instruct-2507 and Qwen3-4B-Thinking-2507):
# parameters in total / non-embedding / active, and 262,144 tokens of native context.
CARDS_2507 = {
    "4b": ("Qwen3-4B", 4.0e9, 3.6e9, None),
    "30b-a3b": ("Qwen3-30B-A3B", 30.5e9, 29.9e9, 3.3e9),
    "235b-a22b": ("Qwen3-235B-A22B", 235e9, None, 22e9),
}


def _close(ours, card):
    """The cards round to the figure they print (4.0B, 30.5B, 3.3B, 22B): within 2 %."""
    return abs(ours - card) / card < 0.02


@pytest.mark.parametrize("size", sorted(CARDS_2507))
@pytest.mark.parametrize("variant", ["Instruct", "Thinking"])
def test_qwen3_2507_models_match_their_cards(size, variant):
    name, total, non_embedding, active = CARDS_2507[size]
    m = mc.get(f"qwen3-{size}-{variant.lower()}-2507")
    assert m["hf_id"] == f"Qwen/{name}-{variant}-2507"
    assert m["max_position_embeddings"] == m["original_max_position_embeddings"] == 262144
    assert mc.max_context(m) == 262144 and mc.max_context(m, 4.0) == 1048576
    b = mm.param_breakdown(m)
    assert _close(b["total"], total)
    if non_embedding:
        assert _close(b["total"] - b["embedding"] - b["lm_head"], non_embedding)
    if active:
        assert _close(b["active"], active)


@pytest.mark.parametrize("key,thinking", [
    ("qwen3-14b", {"mode": "switchable", "template_opens_think": False}),
    ("qwen3-30b-a3b", {"mode": "switchable", "template_opens_think": False}),
    ("qwen3-4b-instruct-2507", {"mode": "never", "template_opens_think": False}),
    ("qwen3-235b-a22b-instruct-2507", {"mode": "never", "template_opens_think": False}),
    ("qwen3-30b-a3b-thinking-2507", {"mode": "always", "template_opens_think": True}),
    ("qwen3-4b-thinking-2507", {"mode": "always", "template_opens_think": True}),
])
def test_thinking_behaviour_of_the_template(key, thinking):
    assert mc.get(key)["thinking"] == thinking


def test_thinking_of_a_local_config(tmp_path):
    cfg = {"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 2048,
           "moe_intermediate_size": 768, "intermediate_size": 6144, "num_hidden_layers": 48, "num_attention_heads": 32,
           "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 262144,
           "num_experts": 128, "num_experts_per_tok": 8, "tie_word_embeddings": False}
    path = _write(tmp_path, cfg)
    # a built-in key keeps its template's behaviour; other names are read from the name, else the model type
    assert mc.resolve("qwen3-30b-a3b-thinking-2507", path)["thinking"]["mode"] == "always"
    assert mc.resolve("my-qwen3-30b-a3b-instruct-2507", path)["thinking"]["mode"] == "never"
    assert mc.resolve("x", path, hf_id="Org/Qwen3-30B-A3B-Thinking-2507-FP8")["thinking"]["template_opens_think"]
    assert mc.resolve("my-moe", path)["thinking"]["mode"] == "switchable"
    # 262,144 in config.json is the native length (Qwen3-2507), not 32,768 + room for the output (Qwen3)
    assert mc.resolve("my-moe", path)["original_max_position_embeddings"] == 262144
    llama = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
             "num_attention_heads": 4, "vocab_size": 100, "max_position_embeddings": 4096}
    assert mc.resolve("l", _write(tmp_path, llama))["thinking"]["mode"] == "never"


# The pre-quantized checkpoints Qwen publishes for Qwen3 (their config.json files; docs/sources.md).
QWEN_QUANTIZED = {
    "Qwen/Qwen3-0.6B-FP8", "Qwen/Qwen3-1.7B-FP8", "Qwen/Qwen3-4B-FP8", "Qwen/Qwen3-8B-FP8", "Qwen/Qwen3-14B-FP8",
    "Qwen/Qwen3-32B-FP8", "Qwen/Qwen3-30B-A3B-FP8", "Qwen/Qwen3-235B-A22B-FP8",
    "Qwen/Qwen3-4B-Instruct-2507-FP8", "Qwen/Qwen3-4B-Thinking-2507-FP8", "Qwen/Qwen3-30B-A3B-Instruct-2507-FP8",
    "Qwen/Qwen3-30B-A3B-Thinking-2507-FP8", "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
    "Qwen/Qwen3-235B-A22B-Thinking-2507-FP8",
    "Qwen/Qwen3-4B-AWQ", "Qwen/Qwen3-8B-AWQ", "Qwen/Qwen3-14B-AWQ", "Qwen/Qwen3-32B-AWQ",
    "Qwen/Qwen3-0.6B-GPTQ-Int8", "Qwen/Qwen3-1.7B-GPTQ-Int8", "Qwen/Qwen3-30B-A3B-GPTQ-Int4",
    "Qwen/Qwen3-235B-A22B-GPTQ-Int4",
}


def test_every_builtin_model_knows_qwens_own_pre_quantized_checkpoints():
    assert set(mc.QUANTIZED) == set(mc.MODELS)
    assert {c["hf_id"] for k in mc.QUANTIZED for c in mc.quantized_checkpoints(k)} == QWEN_QUANTIZED
    assert mc.quantized_checkpoints("qwen3-14b") == [
        {"hf_id": "Qwen/Qwen3-14B-FP8", "precision": "fp8", "format": "fp8-block128"},
        {"hf_id": "Qwen/Qwen3-14B-AWQ", "precision": "int4_awq", "format": "autoawq-gemm"}]
    # a quantized checkpoint is one of the model it is listed under (the base repository's name, suffixed)
    for key in mc.QUANTIZED:
        for c in mc.quantized_checkpoints(key):
            assert c["hf_id"].startswith(mc.MODELS[key]["hf_id"] + "-"), (key, c)
    # 2507: FP8 only; no AWQ below 4B nor for the MoE models
    assert [c["precision"] for c in mc.quantized_checkpoints("qwen3-4b-thinking-2507")] == ["fp8"]
    assert "int4_awq" not in {c["precision"] for k in ("qwen3-0.6b", "qwen3-1.7b", "qwen3-30b-a3b", "qwen3-235b-a22b")
                              for c in mc.quantized_checkpoints(k)}
    assert mc.quantized_checkpoints("qwen3-tiny") == [] and mc.quantized_checkpoints(None) == []
