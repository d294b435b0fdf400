"""Serving profile -> the exact TensorRT-LLM 1.2.1 engine-build command lines.

The legacy engine workflow (``convert_checkpoint.py`` or ModelOpt ``quantize.py``, then
``trtllm-build``) exists only in TRT-LLM <= 1.2.1 / 1.3.0rc20. The flag lists below are the subset of
upstream's argparse definitions this module may emit, each with its upstream file
(NVIDIA/TensorRT-LLM ``examples/models/core/qwen/convert_checkpoint.py``,
``examples/quantization/quantize.py``, ``tensorrt_llm/commands/build.py`` and
``tensorrt_llm/plugin/plugin.py``). tests/unit/test_upstream_conformance.py holds every name, kind and
choice here, and every emitted command line, against the upstream facts recorded in
tests/conformance/upstream-trtllm-1.2.1/ (docs/compatibility.md names the revisions read). No
TRT-LLM runs here, so those facts are the check.

Pure Python; no Ansible import. ``build_steps(profile, ...)`` is the entry point.
"""

import re

from . import profile as profile_schema

TRTLLM_VERSION = "1.2.1"
# The only TRT-LLM versions whose flag lists this file carries. Anything else is refused rather
# than guessed: the engine path was removed after 1.3.0rc20 and flags moved between releases.
SUPPORTED_TRTLLM_VERSIONS = ("1.2.1",)

SRC_CONVERT = "NVIDIA/TensorRT-LLM:examples/models/core/qwen/convert_checkpoint.py (parse_arguments)"
SRC_QUANTIZE = "NVIDIA/TensorRT-LLM:examples/quantization/quantize.py (argparse block)"
SRC_BUILD = "NVIDIA/TensorRT-LLM:tensorrt_llm/commands/build.py (parse_arguments)"
SRC_PLUGIN = "NVIDIA/TensorRT-LLM:tensorrt_llm/plugin/plugin.py (cli_plugin_args, add_plugin_argument)"

PLUGIN_VALUES = ("auto", "float16", "float32", "bfloat16", "disable")
FEATURE_VALUES = ("enable", "disable")
DTYPE_VALUES = ("auto", "float16", "bfloat16", "float32")


def _f(kind, choices=None, source=None):
    return {"kind": kind, "choices": tuple(choices) if choices else None, "source": source}


# kind: "flag" (store_true, no value) | "int" | "float" | "str" | "choice" (value in choices)
CONVERT_CHECKPOINT_FLAGS = {
    name: _f(kind, choices, SRC_CONVERT) for name, kind, choices in (
        ("--model_dir", "str", None), ("--output_dir", "str", None), ("--tp_size", "int", None),
        ("--pp_size", "int", None), ("--cp_size", "int", None), ("--moe_tp_size", "int", None),
        ("--moe_ep_size", "int", None), ("--dtype", "choice", DTYPE_VALUES), ("--use_weight_only", "flag", None),
        ("--weight_only_precision", "choice", ("int8", "int4", "int4_gptq", "int8_gptq")),
        ("--disable_weight_only_quant_plugin", "flag", None), ("--smoothquant", "float", None),
        ("--per_channel", "flag", None), ("--per_token", "flag", None), ("--int8_kv_cache", "flag", None),
        ("--per_group", "flag", None), ("--group_size", "int", None), ("--calib_dataset", "str", None),
        ("--load_model_on_cpu", "flag", None), ("--use_parallel_embedding", "flag", None),
        ("--embedding_sharding_dim", "choice", ("0", "1")), ("--workers", "int", None),
    )
}

QUANTIZE_FLAGS = {
    name: _f(kind, choices, SRC_QUANTIZE) for name, kind, choices in (
        ("--model_dir", "str", None), ("--output_dir", "str", None), ("--dtype", "choice", DTYPE_VALUES),
        ("--qformat", "choice", ("nvfp4", "fp8", "int8_sq", "int4_awq", "w4a8_awq", "int8_wo", "int4_wo", "full_prec")),
        ("--kv_cache_dtype", "choice", ("int8", "fp8")), ("--calib_size", "int", None),
        ("--awq_block_size", "int", None), ("--tp_size", "int", None), ("--pp_size", "int", None),
        ("--calib_dataset", "str", None), ("--batch_size", "int", None), ("--calib_max_seq_length", "int", None),
        ("--device", "choice", ("cuda", "cpu")),
    )
}

_PLUGINS = ("--gpt_attention_plugin", "--gemm_plugin", "--moe_plugin", "--nccl_plugin", "--lora_plugin")
_FEATURES = (
    "--remove_input_padding", "--context_fmha", "--use_fused_mlp", "--use_paged_context_fmha",
    "--use_fp8_context_fmha", "--multiple_profiles", "--reduce_fusion", "--norm_quant_fusion",
)

TRTLLM_BUILD_FLAGS = {
    name: _f(kind, choices, SRC_BUILD) for name, kind, choices in (
        ("--checkpoint_dir", "str", None), ("--output_dir", "str", None), ("--workers", "int", None),
        ("--max_batch_size", "int", None), ("--max_input_len", "int", None), ("--max_seq_len", "int", None),
        ("--max_num_tokens", "int", None), ("--max_beam_width", "int", None), ("--opt_num_tokens", "int", None),
        ("--kv_cache_type", "choice", ("continuous", "paged", "disabled")),
        ("--logits_dtype", "choice", ("float16", "float32")), ("--gather_context_logits", "flag", None),
        ("--gather_generation_logits", "flag", None), ("--gather_all_token_logits", "flag", None),
        ("--max_draft_len", "int", None),
        ("--speculative_decoding_mode", "choice",
         ("draft_tokens_external", "lookahead_decoding", "medusa", "explicit_draft_tokens", "eagle")),
        ("--weight_streaming", "flag", None), ("--strip_plan", "flag", None), ("--fast_build", "flag", None),
        ("--monitor_memory", "flag", None), ("--input_timing_cache", "str", None),
        ("--output_timing_cache", "str", None),
    )
}
TRTLLM_BUILD_FLAGS["--tokens_per_block"] = _f("int", source=SRC_PLUGIN)
TRTLLM_BUILD_FLAGS.update({name: _f("choice", PLUGIN_VALUES, SRC_PLUGIN) for name in _PLUGINS})
TRTLLM_BUILD_FLAGS.update({name: _f("choice", FEATURE_VALUES, SRC_PLUGIN) for name in _FEATURES})

# Tool name -> (flag table, path relative to the TRT-LLM examples dir or None for a console script)
TOOLS = {
    "convert_checkpoint.py": {"flags": CONVERT_CHECKPOINT_FLAGS, "script": "models/core/qwen/convert_checkpoint.py",
                              "required": ("--model_dir",)},
    "quantize.py": {"flags": QUANTIZE_FLAGS, "script": "quantization/quantize.py", "required": ("--model_dir",)},
    "trtllm-build": {"flags": TRTLLM_BUILD_FLAGS, "script": None, "required": ("--checkpoint_dir",)},
}

# Flags that existed before TRT-LLM 0.8 (examples/<model>/build.py) and must never be emitted.
REMOVED_FLAGS = ("--use_gpt_attention_plugin", "--use_gemm_plugin", "--use_inflight_batching", "--max_output_len")

# Profile vocabulary (docs/profile.md) -> TRT-LLM vocabulary
DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
WEIGHTS = ("bf16", "fp16", "fp32", "fp8", "int8_wo", "int4_awq", "int4_gptq", "int8_sq")
KV_CACHE = ("bf16", "fp16", "fp32", "fp8", "int8")
FP8_MIN_COMPUTE_CAPABILITY = (8, 9)
AWQ_BLOCK_SIZE = 128
AWQ_CALIB_SIZE = 32
FP8_CALIB_SIZE = 512
SMOOTHQUANT_ALPHA = 0.5


# Qwen3-MoE through the engine workflow: docs/compatibility.md "Qwen3-MoE" gives the upstream facts.
QWEN3_MOE_ARCHITECTURES = ("Qwen3MoeForCausalLM",)
QWEN3_MOE_ENGINE_REFUSAL = (
    "Qwen3-MoE is not built as a TensorRT-LLM 1.2.1 engine here: the engine converter accepts qwen3_moe but routes "
    "with normalization NONE while Qwen3-MoE renormalises its top-k weights (norm_topk_prob), and TensorRT-LLM's "
    "Qwen README lists Qwen3 MoE engines for Hopper+ only and runs Qwen3 MoE with the PyTorch backend. Use runtime "
    "trtllm-llmapi (the planner chooses it for Qwen3-MoE)")


class CommandError(ValueError):
    """The profile cannot be turned into TRT-LLM 1.2.1 commands; the message says what to change."""


def flag_table():
    """JSON-able dump of the flag lists (the stand-in builder checks argv against this)."""
    return {
        "trtllm_version": TRTLLM_VERSION,
        "tools": {
            tool: {
                "required": list(spec["required"]),
                "flags": {name: {"kind": f["kind"], "choices": list(f["choices"]) if f["choices"] else None,
                                 "source": f["source"]} for name, f in sorted(spec["flags"].items())},
            }
            for tool, spec in TOOLS.items()
        },
    }


def check_args(tool, args):
    """Errors (list of str) for ``args`` (argv after the program) against ``tool``'s 1.2.1 flags."""
    if tool not in TOOLS:
        return [f"unknown tool {tool!r}"]
    flags = TOOLS[tool]["flags"]
    errors, seen, i = [], set(), 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--"):
            errors.append(f"unexpected positional argument {arg!r}")
            i += 1
            continue
        name, has_eq, inline = arg.partition("=")
        spec = flags.get(name)
        if spec is None:
            errors.append(f"{name} is not a {tool} flag in TRT-LLM {TRTLLM_VERSION}")
            # skip its value too, so one wrong name gives one error
            i += 2 if (not has_eq and i + 1 < len(args) and not args[i + 1].startswith("--")) else 1
            continue
        if name in seen:
            errors.append(f"{name} given twice")
        seen.add(name)
        if spec["kind"] == "flag":
            if has_eq:
                errors.append(f"{name} takes no value")
            i += 1
            continue
        if has_eq:
            value = inline
            i += 1
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            value = args[i + 1]
            i += 2
        else:
            errors.append(f"{name} needs a value")
            i += 1
            continue
        errors.extend(_check_value(name, spec, value))
    for name in TOOLS[tool]["required"]:
        if name not in seen:
            errors.append(f"{name} is required by {tool}")
    return errors


def _check_value(name, spec, value):
    kind = spec["kind"]
    if kind == "int" and not re.fullmatch(r"-?\d+", value):
        return [f"{name} expects an integer, got {value!r}"]
    if kind == "float":
        try:
            float(value)
        except ValueError:
            return [f"{name} expects a number, got {value!r}"]
    if kind == "choice" and value not in spec["choices"]:
        return ["{} value {!r} is not one of {}".format(name, value, ", ".join(spec["choices"]))]
    return []


def _get(profile, dotted, required=True):
    try:
        return profile_schema.get(profile, dotted, required)
    except profile_schema.ProfileError as exc:
        raise CommandError(str(exc)) from exc


def _pos_int(profile, dotted):
    value = _get(profile, dotted)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise CommandError(f"profile {dotted} must be a positive integer, got {value!r}")
    return value


def compute_capability(profile):
    raw = str(_get(profile, "gpu.compute_capability", required=False) or "")
    match = re.fullmatch(r"(\d+)\.(\d+)", raw)
    return (int(match.group(1)), int(match.group(2))) if match else None


def check_profile(profile):
    """Refuse profiles the engine workflow cannot build; return a normalised view."""
    if not isinstance(profile, dict):
        raise CommandError("profile must be a dict (docs/profile.md)")
    runtime = _get(profile, "runtime")
    if runtime != "trtllm-engine":
        raise CommandError(f"runtime {runtime!r} has no engine build step; only trtllm-engine is built")
    version = _get(profile, "image.trtllm", required=False)
    if version not in SUPPORTED_TRTLLM_VERSIONS:
        raise CommandError(
            "image.trtllm is {!r} but the trtllm-engine workflow is only wired for TRT-LLM {} (Triton 26.04-26.07 "
            "trtllm images); TRT-LLM removed the engine path after 1.3.0rc20. Pin image "
            "nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3 or choose runtime trtllm-llmapi".format(version, ", ".join(SUPPORTED_TRTLLM_VERSIONS))
        )
    dtype = _get(profile, "precision.dtype")
    if dtype not in DTYPES:
        raise CommandError("precision.dtype {!r} is not one of {}".format(dtype, ", ".join(DTYPES)))
    weights = _get(profile, "precision.weights")
    if weights not in WEIGHTS:
        raise CommandError("precision.weights {!r} is not one of {}".format(weights, ", ".join(WEIGHTS)))
    kv = _get(profile, "precision.kv_cache")
    if kv not in KV_CACHE:
        raise CommandError("precision.kv_cache {!r} is not one of {}".format(kv, ", ".join(KV_CACHE)))
    if weights in ("bf16", "fp16", "fp32") and weights != DTYPES[dtype]:
        raise CommandError(f"precision.weights {weights!r} contradicts precision.dtype {dtype!r}; unquantized weights use the dtype")
    if kv not in ("fp8", "int8") and kv != DTYPES[dtype]:
        raise CommandError(f"precision.kv_cache {kv!r} must equal the dtype ({DTYPES[dtype]}) unless it is fp8 or int8")
    if "fp8" in (weights, kv):
        cc = compute_capability(profile)
        if cc is None or cc < FP8_MIN_COMPUTE_CAPABILITY:
            raise CommandError(
                "FP8 ({}) needs compute capability >= 8.9 (Ada/Hopper); gpu {} has {}. The planner should have "
                "refused this: use bf16/fp16 or int4_awq weights and a bf16/int8 KV cache on this GPU".format("weights" if weights == "fp8" else "KV cache", _get(profile, "gpu.sku", required=False),
                   _get(profile, "gpu.compute_capability", required=False))
            )
    if weights == "int4_gptq" and kv == "fp8":
        raise CommandError("int4_gptq weights come pre-quantized through convert_checkpoint.py, which has no FP8 "
                           "KV cache; use int4_awq (quantize.py) for an FP8 KV cache")
    tp, pp = _pos_int(profile, "parallel.tp"), _pos_int(profile, "parallel.pp")
    arch = _get(profile, "model.architecture", required=False)
    if arch in QWEN3_MOE_ARCHITECTURES:
        raise CommandError(QWEN3_MOE_ENGINE_REFUSAL)
    ep = _get(profile, "parallel.ep", required=False) or 1
    if not isinstance(ep, int) or isinstance(ep, bool) or ep < 1 or tp % ep:
        raise CommandError(f"parallel.ep must be a whole number that divides parallel.tp ({tp}), got {ep!r}")
    if ep > 1 and not _get(profile, "model.moe", required=False):
        raise CommandError(f"parallel.ep is {ep} but the model has no experts; set it to 1")
    if ep > 1 and uses_quantize({"weights": weights, "kv": kv}):
        raise CommandError("quantize.py (FP8 / INT4-AWQ / FP8 KV) has no expert-parallel flag (--moe_ep_size is a "
                           "convert_checkpoint.py flag): use parallel.ep 1, or bf16/int8 weight-only weights")
    limits = {k: _pos_int(profile, "limits." + k) for k in
              ("max_batch_size", "max_input_len", "max_seq_len", "max_num_tokens", "max_beam_width")}
    if limits["max_input_len"] > limits["max_seq_len"]:
        raise CommandError("limits.max_input_len ({}) exceeds limits.max_seq_len ({}); lower max_input_len".format(
            limits["max_input_len"], limits["max_seq_len"]))
    tokens_per_block = _pos_int(profile, "kv_cache.tokens_per_block")
    if tokens_per_block & (tokens_per_block - 1):
        raise CommandError(f"kv_cache.tokens_per_block must be a power of two, got {tokens_per_block}")
    return {"dtype": dtype, "weights": weights, "kv": kv, "tp": tp, "pp": pp, "ep": ep,
            "moe": bool(_get(profile, "model.moe", required=False)), "limits": limits,
            "tokens_per_block": tokens_per_block, "trtllm": version}


def uses_quantize(view):
    """ModelOpt quantize.py for FP8, INT4-AWQ and any FP8 KV cache; convert_checkpoint.py otherwise."""
    return view["weights"] in ("fp8", "int4_awq") or view["kv"] == "fp8"


def convert_args(view, model_dir, output_dir, workers=1):
    args = ["--model_dir", model_dir, "--output_dir", output_dir, "--dtype", view["dtype"],
            "--tp_size", str(view["tp"]), "--pp_size", str(view["pp"])]
    weights = view["weights"]
    if weights == "int8_wo":
        args += ["--use_weight_only", "--weight_only_precision", "int8"]
    elif weights == "int4_gptq":
        args += ["--use_weight_only", "--weight_only_precision", "int4_gptq", "--per_group"]
    elif weights == "int8_sq":
        args += ["--smoothquant", str(SMOOTHQUANT_ALPHA), "--per_channel", "--per_token"]
    if view["kv"] == "int8":
        args += ["--int8_kv_cache"]
    if view.get("moe"):
        # convert_checkpoint.py requires moe_tp_size * moe_ep_size == tp_size
        args += ["--moe_tp_size", str(view["tp"] // view["ep"]), "--moe_ep_size", str(view["ep"])]
    if workers > 1:
        args += ["--workers", str(workers)]
    return args


QFORMAT = {"fp8": "fp8", "int4_awq": "int4_awq", "int8_wo": "int8_wo", "int8_sq": "int8_sq",
           "bf16": "full_prec", "fp16": "full_prec", "fp32": "full_prec"}


def quantize_args(view, model_dir, output_dir):
    qformat = QFORMAT[view["weights"]]
    args = ["--model_dir", model_dir, "--output_dir", output_dir, "--dtype", view["dtype"],
            "--qformat", qformat, "--tp_size", str(view["tp"]), "--pp_size", str(view["pp"])]
    if view["kv"] in ("fp8", "int8"):
        args += ["--kv_cache_dtype", view["kv"]]
    if qformat == "int4_awq":
        args += ["--awq_block_size", str(AWQ_BLOCK_SIZE), "--calib_size", str(AWQ_CALIB_SIZE)]
    elif qformat in ("fp8", "int8_sq") or view["kv"] in ("fp8", "int8"):
        args += ["--calib_size", str(FP8_CALIB_SIZE)]
    return args


def build_args(view, checkpoint_dir, output_dir, workers):
    lim = view["limits"]
    args = [
        "--checkpoint_dir", checkpoint_dir,
        "--output_dir", output_dir,
        "--max_batch_size", str(lim["max_batch_size"]),
        "--max_input_len", str(lim["max_input_len"]),
        "--max_seq_len", str(lim["max_seq_len"]),
        "--max_num_tokens", str(lim["max_num_tokens"]),
        "--max_beam_width", str(lim["max_beam_width"]),
        "--gemm_plugin", "auto",
        "--gpt_attention_plugin", "auto",
        "--remove_input_padding", "enable",
        "--context_fmha", "enable",
        # paged KV + paged context FMHA: needed for KV-cache reuse and chunked context in the executor
        "--kv_cache_type", "paged",
        "--use_paged_context_fmha", "enable",
        "--tokens_per_block", str(view["tokens_per_block"]),
        "--workers", str(workers),
    ]
    if view["weights"] == "fp8" and view["kv"] == "fp8":
        args += ["--use_fp8_context_fmha", "enable"]
    return args


def build_steps(profile, model_dir, work_dir, output_dir):
    """The ordered steps to turn ``model_dir`` (HF checkpoint) into an engine in ``output_dir``.

    Returns a list of dicts {tool, script, args}; ``script`` is the path relative to the TRT-LLM
    examples directory (None for the ``trtllm-build`` console script). Every step's args are
    checked against the 1.2.1 flag lists before they are returned.
    """
    view = check_profile(profile)
    ckpt = work_dir.rstrip("/") + "/tllm_checkpoint"
    world = view["tp"] * view["pp"]
    if uses_quantize(view):
        first = {"tool": "quantize.py", "args": quantize_args(view, model_dir, ckpt)}
    else:
        first = {"tool": "convert_checkpoint.py", "args": convert_args(view, model_dir, ckpt, workers=1)}
    steps = [first, {"tool": "trtllm-build", "args": build_args(view, ckpt, output_dir, workers=world)}]
    for step in steps:
        step["script"] = TOOLS[step["tool"]]["script"]
        errors = check_args(step["tool"], step["args"])
        bad = [a for a in step["args"] if a in REMOVED_FLAGS]
        if errors or bad:
            raise CommandError("internal: generated {} args fail the TRT-LLM {} flag check: {}".format(step["tool"], TRTLLM_VERSION, "; ".join(errors + bad)))
    return steps


def world_size(profile):
    return _pos_int(profile, "parallel.tp") * _pos_int(profile, "parallel.pp")


# --- failure explanations -------------------------------------------------------------------

_OOM = re.compile(r"out of memory|outofmemory|cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY|"
                  r"Requested amount of GPU memory|failed to allocate|std::bad_alloc", re.I)
_VERSION = re.compile(r"version mismatch|not compatible with|serialized engine.*version|"
                      r"engine plan file is (generated|not compatible)|magic tag", re.I)
_UNKNOWN_FLAG = re.compile(r"unrecognized arguments: (.*)|invalid choice: '([^']*)'", re.I)
_NO_GPU = re.compile(r"could not select device driver|no CUDA-capable device|CUDA driver version is insufficient|"
                     r"nvidia-container-cli", re.I)


def explain_failure(step, output, profile):
    """One operator-facing sentence for a failed build step, from its combined output."""
    text = output or ""
    lim = profile.get("limits", {}) if isinstance(profile, dict) else {}
    if _OOM.search(text):
        return (
            "{} ran out of GPU memory. Lower the limits that size the engine's activation buffers: "
            "limits.max_num_tokens (now {}) first, then limits.max_batch_size (now {}) and limits.max_seq_len "
            "(now {}); or raise parallel.tp. Re-plan the profile with the new limits and run again.".format(step, lim.get("max_num_tokens"), lim.get("max_batch_size"), lim.get("max_seq_len"))
        )
    if _VERSION.search(text):
        return (
            "{} reports an engine/runtime version mismatch: engines only load in the exact TRT-LLM that built "
            "them (profile image.trtllm={}, image {}). Rebuild with the pinned image and serve with the same "
            "image.".format(step, _get(profile, "image.trtllm", False), _get(profile, "image.ref", False))
        )
    match = _UNKNOWN_FLAG.search(text)
    if match:
        return (
            "{} rejected a flag or value ({}): the image does not carry TRT-LLM {}'s command line. Check that "
            "image {} really has TRT-LLM {}.".format(step, (match.group(1) or match.group(2) or "").strip(),
                                                  TRTLLM_VERSION, _get(profile, "image.ref", False), TRTLLM_VERSION)
        )
    if _NO_GPU.search(text):
        return (f"{step} could not get a GPU: check the NVIDIA driver and the container toolkit on the builder "
                "(nvidia_driver and container_runtime roles)")
    return f"{step} failed; its last output lines are below"
