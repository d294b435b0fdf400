"""Model catalog: architecture facts of decoder-only LLMs, built in or read from a local HF config.json.

Built-in Qwen3 facts are those of the models' Hugging Face config.json
(e.g. https://huggingface.co/Qwen/Qwen3-32B/blob/main/config.json, .../Qwen3-30B-A3B/..., .../Qwen3-235B-A22B/...);
the parameter totals they give match the model cards (1.7B, 30.5B / 3.3B active, 235B / 22B active).

Qwen3-2507 (QwenLM/Qwen3 README "Qwen3-2507"; model cards huggingface.co/Qwen/Qwen3-30B-A3B-Instruct-2507,
.../Qwen3-4B-Thinking-2507): Instruct-2507 and Thinking-2507 of 4B, 30B-A3B and 235B-A22B, 262,144 tokens of
native context. The model cards give the same layers, attention / KV heads, experts and parameter totals as the
2504 models of the same size (4.0B / 3.6B non-embedding; 30.5B / 3.3B active / 29.9B non-embedding; 235B / 22B
active), so the other dimensions are those of the 2504 config.json; the memory model reproduces those totals from
them (tests/unit/test_model_catalog.py). Their official config.json files were not in the index read.

`thinking` is what the model's chat template does with reasoning (docs/profile.md, `model.thinking`):
`switchable` (original Qwen3: thinks unless `enable_thinking=False`), `never` (Instruct-2507: "supports only
non-thinking mode and does not generate <think></think> blocks"), `always` with `template_opens_think`
(Thinking-2507: "the default chat template automatically includes <think>", so the output holds only </think>).

`qwen3-tiny` is the lab's model: random weights, Qwen3 architecture, made by the lab image build; it has no
built-in facts and is always read from its local config.json.

`QUANTIZED` lists the pre-quantized checkpoints Qwen publishes itself (Hugging Face organisation `Qwen`), per
model, with the precision and the on-disk format each carries, as their config.json `quantization_config` says:
FP8 `quant_method: fp8`, `fmt: e4m3`, `activation_scheme: dynamic`, `weight_block_size: [128, 128]` (block-scaled);
AWQ `quant_method: awq`, 4 bits, `group_size: 128`, `version: gemm`, `zero_point: true` (AutoAWQ); GPTQ
`quant_method: gptq` (Int4 for the MoE models, Int8 for 0.6B / 1.7B). Sources: the Qwen3 docs ("Qwen3 comes with
two types of pre-quantized models, FP8 and AWQ", QwenLM/Qwen3 `docs/source/deployment/vllm.md` at `7a2f61f`) and
the checkpoints' own config.json files (docs/sources.md). Qwen publishes no AWQ of 0.6B, 1.7B or the MoE models
and no quantized 2507 model other than FP8. Which of these formats a runtime loads is not a model fact: see
checkpoints.py.
"""

import json
import os

# Facts shared by all Qwen3 models (their config.json): rope_theta 1e6, no attention bias, QK-norm,
# native context 32,768, max_position_embeddings 40,960, YaRN x4 -> 131,072.
_QWEN3 = {
    "model_type": "qwen3", "architecture": "Qwen3ForCausalLM", "vocab_size": 151936, "head_dim": 128,
    "max_position_embeddings": 40960, "original_max_position_embeddings": 32768, "qk_norm": True,
    "qkv_bias": False, "rope_scaling": None, "moe": None, "torch_dtype": "bfloat16",
}

_BUILTIN = {
    #             layers hidden heads kv  intermediate tied
    "qwen3-0.6b": (28, 1024, 16, 8, 3072, True),
    "qwen3-1.7b": (28, 2048, 16, 8, 6144, True),   # https://huggingface.co/Qwen/Qwen3-1.7B/blob/main/config.json
    "qwen3-4b": (36, 2560, 32, 8, 9728, True),
    "qwen3-8b": (36, 4096, 32, 8, 12288, False),
    "qwen3-14b": (40, 5120, 40, 8, 17408, False),
    "qwen3-32b": (64, 5120, 64, 8, 25600, False),
}

# Reasoning behaviour of a chat template: mode and whether the generation prompt already opens <think>.
THINKING_MODES = ("switchable", "never", "always")
SWITCHABLE = {"mode": "switchable", "template_opens_think": False}
NEVER = {"mode": "never", "template_opens_think": False}
ALWAYS_OPENED = {"mode": "always", "template_opens_think": True}
# Qwen3-2507: native context 262,144 tokens (model cards); YaRN beyond it, as for Qwen3 beyond 32,768.
CONTEXT_2507 = 262144

_HF_IDS = {
    "qwen3-0.6b": "Qwen/Qwen3-0.6B", "qwen3-1.7b": "Qwen/Qwen3-1.7B", "qwen3-4b": "Qwen/Qwen3-4B",
    "qwen3-8b": "Qwen/Qwen3-8B", "qwen3-14b": "Qwen/Qwen3-14B", "qwen3-32b": "Qwen/Qwen3-32B",
    "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B", "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B",
}

MODELS = {}
for _key, (_l, _h, _q, _kv, _i, _tied) in _BUILTIN.items():
    MODELS[_key] = dict(_QWEN3, key=_key, hf_id=_HF_IDS[_key], num_layers=_l, hidden_size=_h,
                        num_attention_heads=_q, num_kv_heads=_kv, intermediate_size=_i,
                        tie_word_embeddings=_tied, thinking=dict(SWITCHABLE))
# MoE (config.json of Qwen/Qwen3-30B-A3B and Qwen/Qwen3-235B-A22B; every layer sparse).
MODELS["qwen3-30b-a3b"] = dict(
    _QWEN3, key="qwen3-30b-a3b", hf_id=_HF_IDS["qwen3-30b-a3b"], model_type="qwen3_moe",
    architecture="Qwen3MoeForCausalLM", num_layers=48, hidden_size=2048, num_attention_heads=32,
    num_kv_heads=4, intermediate_size=6144, tie_word_embeddings=False,
    moe={"num_experts": 128, "experts_per_token": 8, "expert_intermediate_size": 768})
MODELS["qwen3-235b-a22b"] = dict(
    _QWEN3, key="qwen3-235b-a22b", hf_id=_HF_IDS["qwen3-235b-a22b"], model_type="qwen3_moe",
    architecture="Qwen3MoeForCausalLM", num_layers=94, hidden_size=4096, num_attention_heads=64,
    num_kv_heads=4, intermediate_size=12288, tie_word_embeddings=False,
    moe={"num_experts": 128, "experts_per_token": 8, "expert_intermediate_size": 1536})
MODELS["qwen3-30b-a3b"]["thinking"] = dict(SWITCHABLE)
MODELS["qwen3-235b-a22b"]["thinking"] = dict(SWITCHABLE)

# Qwen3-2507: the architecture of the same-size 2504 model, 262,144 tokens native (no YaRN in config.json).
_2507 = {"4b": ("qwen3-4b", "Qwen/Qwen3-4B-{}-2507"), "30b-a3b": ("qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B-{}-2507"),
         "235b-a22b": ("qwen3-235b-a22b", "Qwen/Qwen3-235B-A22B-{}-2507")}
for _size, (_base, _hf) in _2507.items():
    for _variant, _thinking in (("Instruct", NEVER), ("Thinking", ALWAYS_OPENED)):
        _key = f"qwen3-{_size}-{_variant.lower()}-2507"
        MODELS[_key] = dict(MODELS[_base], key=_key, hf_id=_hf.format(_variant), max_position_embeddings=CONTEXT_2507,
                            original_max_position_embeddings=CONTEXT_2507, thinking=dict(_thinking))

# Qwen's own pre-quantized checkpoints: model key -> [(repository, precision, format)]. The precision is the
# planner's name for the weights (memory_model.WEIGHT_PRECISIONS; int8_gptq has none: never planned); the format is
# how they are stored (checkpoints.FORMATS). Revisions are the operator's to pin (triton_fleet_quantized_checkpoints).
_FP8, _AWQ, _GPTQ = "fp8-block128", "autoawq-gemm", "gptq"
QUANTIZED = {
    "qwen3-0.6b": [("Qwen/Qwen3-0.6B-FP8", "fp8", _FP8), ("Qwen/Qwen3-0.6B-GPTQ-Int8", "int8_gptq", _GPTQ)],
    "qwen3-1.7b": [("Qwen/Qwen3-1.7B-FP8", "fp8", _FP8), ("Qwen/Qwen3-1.7B-GPTQ-Int8", "int8_gptq", _GPTQ)],
    "qwen3-4b": [("Qwen/Qwen3-4B-FP8", "fp8", _FP8), ("Qwen/Qwen3-4B-AWQ", "int4_awq", _AWQ)],
    "qwen3-8b": [("Qwen/Qwen3-8B-FP8", "fp8", _FP8), ("Qwen/Qwen3-8B-AWQ", "int4_awq", _AWQ)],
    "qwen3-14b": [("Qwen/Qwen3-14B-FP8", "fp8", _FP8), ("Qwen/Qwen3-14B-AWQ", "int4_awq", _AWQ)],
    "qwen3-32b": [("Qwen/Qwen3-32B-FP8", "fp8", _FP8), ("Qwen/Qwen3-32B-AWQ", "int4_awq", _AWQ)],
    "qwen3-30b-a3b": [("Qwen/Qwen3-30B-A3B-FP8", "fp8", _FP8), ("Qwen/Qwen3-30B-A3B-GPTQ-Int4", "int4_gptq", _GPTQ)],
    "qwen3-235b-a22b": [("Qwen/Qwen3-235B-A22B-FP8", "fp8", _FP8),
                        ("Qwen/Qwen3-235B-A22B-GPTQ-Int4", "int4_gptq", _GPTQ)],
}
for _size, (_base, _hf) in _2507.items():
    for _variant in ("Instruct", "Thinking"):
        QUANTIZED[f"qwen3-{_size}-{_variant.lower()}-2507"] = [(_hf.format(_variant) + "-FP8", "fp8", _FP8)]


def quantized_checkpoints(key):
    """Qwen's own pre-quantized checkpoints of model `key`: [{"hf_id", "precision", "format"}] (none: [])."""
    return [{"hf_id": repo, "precision": prec, "format": fmt}
            for repo, prec, fmt in QUANTIZED.get(str(key or "").lower(), [])]


# Models known by name whose facts come only from a local config.json.
CONFIG_ONLY = {
    "qwen3-tiny": "the lab's random-weight Qwen3 model; its config.json is made by tools/build-lab-image "
                  "(.cache/models/qwen3-tiny/config.json). Give its path: triton_fleet_model_config / tools/plan --model-config PATH",
}

# model_type -> (qkv bias default, QK-norm, MoE key names)
SUPPORTED_TYPES = {
    "qwen2": {"qkv_bias": True, "qk_norm": False},
    "qwen3": {"qkv_bias": False, "qk_norm": True},
    "qwen3_moe": {"qkv_bias": False, "qk_norm": True},
    "llama": {"qkv_bias": False, "qk_norm": False},
    "mistral": {"qkv_bias": False, "qk_norm": False},
    "mixtral": {"qkv_bias": False, "qk_norm": False},
}


class ModelError(ValueError):
    pass


def known_keys():
    return sorted(MODELS) + sorted(CONFIG_ONLY)


def get(key):
    """Built-in facts of a model key. Raises ModelError naming the known keys."""
    k = str(key).strip().lower()
    if k in MODELS:
        return dict(MODELS[k])
    if k in CONFIG_ONLY:
        raise ModelError(f"model {key!r} is read from its local config.json ({CONFIG_ONLY[k]})")
    raise ModelError(
        "unknown model {!r}; built-in models: {}. For another decoder-only Hugging Face model "
        "(Qwen2/2.5/3, Llama, Mistral) give its local config.json: triton_fleet_model_config "
        "(tools/plan --model-config PATH).".format(key, ", ".join(sorted(MODELS)))
    )


def load_config(path):
    """The dict of a local config.json (a file, or a checkpoint directory holding one)."""
    p = os.path.expanduser(str(path))
    if os.path.isdir(p):
        p = os.path.join(p, "config.json")
    if not os.path.isfile(p):
        raise ModelError(f"model config {p} does not exist; give the path of the checkpoint's config.json")
    try:
        with open(p, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError) as exc:
        raise ModelError(f"model config {p} is not readable JSON ({exc}); give the checkpoint's config.json") from None


def from_hf_config(cfg, key=None, hf_id=None):
    """Architecture facts from a Hugging Face config.json dict."""
    if not isinstance(cfg, dict):
        raise ModelError("a model config must be a JSON object (the checkpoint's config.json)")
    mtype = cfg.get("model_type")
    if mtype not in SUPPORTED_TYPES:
        raise ModelError(
            "model_type {!r} is not supported by the planner (supported decoder-only types: {})".format(mtype, ", ".join(sorted(SUPPORTED_TYPES))))
    missing = [f for f in ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size",
                           "max_position_embeddings") if f not in cfg]
    if "intermediate_size" not in cfg and "moe_intermediate_size" not in cfg:
        missing.append("intermediate_size")
    if missing:
        raise ModelError("model config lacks {}; is it a decoder-only causal LM config.json?".format(", ".join(missing)))
    kind = SUPPORTED_TYPES[mtype]
    heads = int(cfg["num_attention_heads"])
    hidden = int(cfg["hidden_size"])
    head_dim = cfg.get("head_dim") or hidden // heads
    arch = (cfg.get("architectures") or [None])[0]
    moe = None
    if mtype == "qwen3_moe":
        moe = {"num_experts": int(cfg["num_experts"]), "experts_per_token": int(cfg["num_experts_per_tok"]),
               "expert_intermediate_size": int(cfg["moe_intermediate_size"])}
    elif mtype == "mixtral":
        moe = {"num_experts": int(cfg["num_local_experts"]), "experts_per_token": int(cfg["num_experts_per_tok"]),
               "expert_intermediate_size": int(cfg["intermediate_size"])}
    rope = cfg.get("rope_scaling")
    orig = (rope or {}).get("original_max_position_embeddings") if isinstance(rope, dict) else None
    if mtype in ("qwen3", "qwen3_moe") and not orig:
        # Qwen3 (2504) trains 32,768 tokens and sets max_position_embeddings 40,960 (room for the output);
        # Qwen3-2507 sets 262,144, its native length (model cards).
        mpe = int(cfg["max_position_embeddings"])
        orig = min(32768, mpe) if mpe <= 40960 else mpe
    qkv_bias = bool(cfg.get("attention_bias", kind["qkv_bias"])) if mtype != "qwen2" else True
    tied_default = False
    facts = {
        "key": (key or cfg.get("_name_or_path") or mtype).lower(),
        "hf_id": hf_id,
        "model_type": mtype,
        "architecture": arch or {"qwen3": "Qwen3ForCausalLM", "qwen2": "Qwen2ForCausalLM",
                                 "llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
                                 "qwen3_moe": "Qwen3MoeForCausalLM", "mixtral": "MixtralForCausalLM"}[mtype],
        "num_layers": int(cfg["num_hidden_layers"]),
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_kv_heads": int(cfg.get("num_key_value_heads") or heads),
        "head_dim": int(head_dim),
        "intermediate_size": int(cfg.get("intermediate_size") or 0),
        "vocab_size": int(cfg["vocab_size"]),
        "max_position_embeddings": int(cfg["max_position_embeddings"]),
        "original_max_position_embeddings": int(orig) if orig else None,
        "tie_word_embeddings": bool(cfg.get("tie_word_embeddings", tied_default)),
        "qk_norm": kind["qk_norm"],
        "qkv_bias": qkv_bias,
        "rope_scaling": rope if isinstance(rope, dict) else None,
        "moe": moe,
        "torch_dtype": cfg.get("torch_dtype") or cfg.get("dtype"),
    }
    facts["thinking"] = thinking_of(facts["key"], hf_id, mtype)
    return facts


def thinking_of(key, hf_id, model_type):
    """The chat template's reasoning behaviour of a model known only by name and config.json (no built-in facts).

    Qwen3-2507 names say it (`-instruct-2507`: never, `-thinking-2507`: always, opened by the template); other
    Qwen3 / Qwen3-MoE checkpoints have the switchable template of the original Qwen3; other families never think.
    """
    names = " ".join(str(n).lower() for n in (key, hf_id) if n)
    if "thinking-2507" in names:
        return dict(ALWAYS_OPENED)
    if "instruct-2507" in names:
        return dict(NEVER)
    if model_type in ("qwen3", "qwen3_moe"):
        return dict(SWITCHABLE)
    return dict(NEVER)


def resolve(key, config_path=None, hf_id=None):
    """Facts for `key`: from `config_path` when given (local config.json wins), else built in."""
    if config_path:
        cfg = load_config(config_path)
        builtin = MODELS.get(str(key).lower(), {}) if key else {}
        facts = from_hf_config(cfg, key=key or None, hf_id=hf_id or builtin.get("hf_id"))
        if builtin.get("thinking"):
            facts["thinking"] = dict(builtin["thinking"])  # a built-in model's template is known
        return facts
    facts = get(key)
    if hf_id:
        facts["hf_id"] = hf_id
    return facts


def max_context(facts, yarn_factor=None):
    """Longest sequence the model serves: max_position_embeddings, or YaRN factor x native length."""
    native = facts.get("original_max_position_embeddings") or facts["max_position_embeddings"]
    rope = facts.get("rope_scaling") or {}
    if yarn_factor:
        return int(native * float(yarn_factor))
    if rope.get("rope_type", rope.get("type")) == "yarn" and rope.get("factor"):
        return int(native * float(rope["factor"]))
    return facts["max_position_embeddings"]
