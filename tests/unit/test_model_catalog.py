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
