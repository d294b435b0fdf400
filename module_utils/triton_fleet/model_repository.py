"""The Triton model repository for one serving profile (docs/profile.md), rendered in Python.

``render_repository(profile, options)`` returns a :class:`Repository`: every file of the repository
as ``{relative path: text}``, the entry model (the served name, the one clients call through
``/v2/models/<name>/generate``) and the models to load with ``--model-control-mode=explicit``.
Every ``config.pbtxt`` is validated against Triton's ``ModelConfig`` schema before it is returned.

Runtimes (docs/architecture.md):

- ``trtllm-engine`` (legacy, only when the operator asks for it: TensorRT-LLM removed the engine backend after
  v1.3.0rc20 and these templates with PR #15907): the ``inflight_batcher_llm`` layout: ``<served>`` (the ensemble),
  ``preprocessing``, ``tensorrt_llm`` (``backend: "tensorrtllm"``), ``postprocessing`` and, when
  asked, ``tensorrt_llm_bls``. The python models' code (``1/model.py`` of preprocessing,
  postprocessing, BLS) comes from TensorRT-LLM's ``triton_backend/all_models/inflight_batcher_llm``
  at the tag that matches the image, passed in ``options["model_files"]``.
- ``trtllm-llmapi`` (the default on every GPU): ``<served>/config.pbtxt`` + ``<served>/1/model.yaml`` (LLM API
  arguments, checked against upstream's in tests/unit/test_upstream_conformance.py); ``1/model.py`` is TRT-LLM's
  ``all_models/llmapi/tensorrt_llm/1/model.py``, passed in ``model_files``. ``model:`` is the checkpoint
  directory inside the container: the role mounts the profile's checkpoint there, the pre-quantized one
  (``model.checkpoint``, named in the header) when the weights are fp8 / int4.
- ``transformers``: ``<served>/config.pbtxt`` + this project's python model (``model_files``).
"""

import hashlib
import json

from .pbtxt import Enum, PbtxtError, render_validated
from .profile import RUNTIMES, ProfileError, get, validate

# Where the role mounts things inside the Triton container.
DEFAULT_CHECKPOINT_DIR = "/checkpoint"
DEFAULT_ENGINE_DIR = "/engine"

HEADER = "Rendered by triton-fleet (module_utils/triton_fleet/model_repository.py). Do not edit.\nprofile: %s\nfingerprint: %s"


class Repository(dict):
    """``{relative path: text}`` plus ``entry_model`` and ``load_models``."""

    def __init__(self, files, entry_model, load_models, runtime, launch=None):
        super().__init__(files)
        self.entry_model = entry_model
        self.load_models = list(load_models)
        self.runtime = runtime
        self.launch = launch or {"mode": "single", "entrypoint": ["tritonserver"], "args": [], "env": {}}

    def content_hash(self):
        return content_hash(self)


def content_hash(files):
    """sha256 over the sorted (path, content) pairs of a repository."""
    h = hashlib.sha256()
    for path in sorted(files):
        data = files[path]
        if isinstance(data, str):
            data = data.encode("utf-8")
        h.update(path.encode("utf-8") + b"\0" + str(len(data)).encode() + b"\0" + data)
    return h.hexdigest()


# --------------------------------------------------------------------------------------------
# profile access

def _get(profile, dotted):
    """One profile field (profile.get): missing fields raise ProfileError naming them."""
    return get(profile, dotted)


def check_profile(profile):
    """Raise :class:`ProfileError` naming the first field that is missing or wrong (profile.validate)."""
    validate(profile)


# --------------------------------------------------------------------------------------------
# small helpers


def _tensor(name, dtype, dims, optional=False, reshape_scalar=False, ragged=False):  # noqa: PLR0917
    t = {"name": name, "data_type": Enum(dtype), "dims": list(dims)}
    if reshape_scalar:
        t["reshape"] = {"shape": []}
    if optional:
        t["optional"] = True
    if ragged:
        t["allow_ragged_batch"] = True
    return t


def _bool(value):
    return "true" if value else "false"


def _dtype_enum(profile):
    return {"bfloat16": "TYPE_BF16", "float16": "TYPE_FP16", "float32": "TYPE_FP32"}.get(
        profile["precision"]["dtype"], "TYPE_FP32"
    )


def _header(profile):
    header = HEADER % (profile["name"], profile["fingerprint"])
    c = profile["model"].get("checkpoint")
    if c:
        # the checkpoint mounted at checkpoint_dir is a pre-quantized one, not the base model's
        header += "\ncheckpoint: {}@{} (pre-quantized {}, {})".format(c["hf_id"], c["revision"], c["precision"], c["format"])
    return header


def _instance_group_python(profile, count=1):
    if profile["device"] == "gpu":
        groups = []
        for ids in profile["parallel"]["gpu_device_ids"]:
            groups.append({"count": count, "kind": Enum("KIND_GPU"), "gpus": [int(ids.split(",")[0])]})
        return groups
    return [{"count": count, "kind": Enum("KIND_CPU")}]


def _yaml_scalar(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value))


def to_yaml(data, indent=0):
    """Minimal YAML for nested dicts / lists of scalars (json strings are valid YAML scalars)."""
    lines = []
    pad = "  " * indent
    for key, value in data.items():
        if isinstance(value, dict):
            if value:
                lines.append(f"{pad}{key}:")
                lines.append(to_yaml(value, indent + 1).rstrip("\n"))
            else:
                lines.append(f"{pad}{key}: {{}}")
        elif isinstance(value, (list, tuple)):
            lines.append("{}{}: [{}]".format(pad, key, ", ".join(_yaml_scalar(v) for v in value)))
        else:
            lines.append(f"{pad}{key}: {_yaml_scalar(value)}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# trtllm-engine: inflight_batcher_llm
#
# The tensors below are those of TensorRT-LLM's own inflight_batcher_llm configs (docs/compatibility.md
# names the revision). Upstream's python models look up every output's data type when they load and
# the BLS asks the other models for fixed lists of outputs, so the layout models declare upstream's
# whole tensor set, not a text-only subset; tests/unit/test_upstream_conformance.py holds each rendered
# config against the upstream facts in tests/conformance/.

# Request tensors of the ensemble (the client API; names as upstream's ensemble calls them).
_ENSEMBLE_INPUTS = (
    ("text_input", "TYPE_STRING", [1], False),
    ("max_tokens", "TYPE_INT32", [1], False),
    ("bad_words", "TYPE_STRING", [-1], True),
    ("stop_words", "TYPE_STRING", [-1], True),
    ("exclude_input_in_output", "TYPE_BOOL", [1], True),
    ("end_id", "TYPE_INT32", [1], True),
    ("pad_id", "TYPE_INT32", [1], True),
    ("top_k", "TYPE_INT32", [1], True),
    ("top_p", "TYPE_FP32", [1], True),
    ("temperature", "TYPE_FP32", [1], True),
    ("length_penalty", "TYPE_FP32", [1], True),
    ("repetition_penalty", "TYPE_FP32", [1], True),
    ("min_tokens", "TYPE_INT32", [1], True),
    ("presence_penalty", "TYPE_FP32", [1], True),
    ("frequency_penalty", "TYPE_FP32", [1], True),
    ("seed", "TYPE_UINT64", [1], True),
    ("return_log_probs", "TYPE_BOOL", [1], True),
    ("return_perf_metrics", "TYPE_BOOL", [1], True),
    ("beam_width", "TYPE_INT32", [1], True),
    ("stream", "TYPE_BOOL", [1], True),
)

# ensemble request tensor -> tensorrt_llm tensor (sampling knobs passed straight through)
_ENSEMBLE_TO_TRTLLM = (
    ("exclude_input_in_output", "exclude_input_in_output"),
    ("top_k", "runtime_top_k"),
    ("top_p", "runtime_top_p"),
    ("temperature", "temperature"),
    ("length_penalty", "len_penalty"),
    ("repetition_penalty", "repetition_penalty"),
    ("min_tokens", "min_tokens"),
    ("presence_penalty", "presence_penalty"),
    ("frequency_penalty", "frequency_penalty"),
    ("seed", "seed"),
    ("return_log_probs", "return_log_probs"),
    ("return_perf_metrics", "return_perf_metrics"),
    ("beam_width", "beam_width"),
    ("stream", "streaming"),
)

# Data types upstream leaves to fill_template (${...}); this project fills them so.
LOGITS_DATATYPE = "TYPE_FP32"
_TEMPLATED = {"encoder_input_features": None}  # None: the profile's activation dtype

_TRTLLM_INPUTS = (
    # name, dtype, dims, optional, reshape-to-scalar, ragged
    ("input_ids", "TYPE_INT32", [-1], True, False, True),
    ("encoder_input_features", "TYPE_FP32", [-1, -1], True, False, True),
    ("encoder_output_lengths", "TYPE_INT32", [1], True, True, False),
    ("input_lengths", "TYPE_INT32", [1], False, True, False),
    ("request_output_len", "TYPE_INT32", [1], False, True, False),
    ("num_return_sequences", "TYPE_INT32", [1], True, True, False),
    ("draft_input_ids", "TYPE_INT32", [-1], True, False, True),
    ("decoder_input_ids", "TYPE_INT32", [-1], True, False, True),
    ("decoder_input_lengths", "TYPE_INT32", [1], True, True, False),
    ("draft_logits", "TYPE_FP32", [-1, -1], True, False, True),
    ("draft_acceptance_threshold", "TYPE_FP32", [1], True, True, False),
    ("end_id", "TYPE_INT32", [1], True, True, False),
    ("pad_id", "TYPE_INT32", [1], True, True, False),
    ("stop_words_list", "TYPE_INT32", [2, -1], True, False, True),
    ("bad_words_list", "TYPE_INT32", [2, -1], True, False, True),
    ("embedding_bias", "TYPE_FP32", [-1], True, False, True),
    ("beam_width", "TYPE_INT32", [1], True, True, False),
    ("temperature", "TYPE_FP32", [1], True, True, False),
    ("runtime_top_k", "TYPE_INT32", [1], True, True, False),
    ("runtime_top_p", "TYPE_FP32", [1], True, True, False),
    ("runtime_top_p_min", "TYPE_FP32", [1], True, True, False),
    ("runtime_top_p_decay", "TYPE_FP32", [1], True, True, False),
    ("runtime_top_p_reset_ids", "TYPE_INT32", [1], True, True, False),
    ("len_penalty", "TYPE_FP32", [1], True, True, False),
    ("early_stopping", "TYPE_BOOL", [1], True, True, False),
    ("repetition_penalty", "TYPE_FP32", [1], True, True, False),
    ("min_tokens", "TYPE_INT32", [1], True, True, False),
    ("beam_search_diversity_rate", "TYPE_FP32", [1], True, True, False),
    ("presence_penalty", "TYPE_FP32", [1], True, True, False),
    ("frequency_penalty", "TYPE_FP32", [1], True, True, False),
    ("seed", "TYPE_UINT64", [1], True, True, False),
    ("return_log_probs", "TYPE_BOOL", [1], True, True, False),
    ("return_context_logits", "TYPE_BOOL", [1], True, True, False),
    ("return_generation_logits", "TYPE_BOOL", [1], True, True, False),
    ("return_perf_metrics", "TYPE_BOOL", [1], True, True, False),
    ("exclude_input_in_output", "TYPE_BOOL", [1], True, True, False),
    ("stop", "TYPE_BOOL", [1], True, True, False),
    ("streaming", "TYPE_BOOL", [1], True, True, False),
    ("prompt_embedding_table", "TYPE_FP16", [-1, -1], True, False, True),
    ("prompt_table_extra_ids", "TYPE_UINT64", [-1], True, False, True),
    ("prompt_vocab_size", "TYPE_INT32", [1], True, True, False),
    ("cross_attention_mask", "TYPE_BOOL", [-1, -1], True, False, True),
    ("mrope_rotary_cos_sin", "TYPE_FP32", [-1], True, False, False),
    ("mrope_position_deltas", "TYPE_INT64", [1], True, False, False),
    ("lora_task_id", "TYPE_UINT64", [1], True, True, False),
    ("lora_weights", "TYPE_FP16", [-1, -1], True, False, True),
    ("lora_config", "TYPE_INT32", [-1, 3], True, False, True),
    ("context_phase_params", "TYPE_UINT8", [-1], True, False, True),
    ("skip_cross_attn_blocks", "TYPE_BOOL", [1], True, False, True),
    ("retention_token_range_starts", "TYPE_INT32", [-1], True, False, True),
    ("retention_token_range_ends", "TYPE_INT32", [-1], True, False, True),
    ("retention_token_range_priorities", "TYPE_INT32", [-1], True, False, True),
    ("retention_token_range_durations_ms", "TYPE_INT32", [-1], True, False, True),
    ("retention_decode_priority", "TYPE_INT32", [1], True, False, True),
    ("retention_decode_duration_ms", "TYPE_INT32", [1], True, False, True),
    ("guided_decoding_guide_type", "TYPE_STRING", [1], True, False, True),
    ("guided_decoding_guide", "TYPE_STRING", [1], True, False, True),
    ("lookahead_window_size", "TYPE_INT32", [1], True, False, True),
    ("lookahead_ngram_size", "TYPE_INT32", [1], True, False, True),
    ("lookahead_verification_set_size", "TYPE_INT32", [1], True, False, True),
)

_TRTLLM_OUTPUTS = (
    ("output_ids", "TYPE_INT32", [-1, -1]),
    ("sequence_length", "TYPE_INT32", [-1]),
    ("cum_log_probs", "TYPE_FP32", [-1]),
    ("output_log_probs", "TYPE_FP32", [-1, -1]),
    ("context_logits", LOGITS_DATATYPE, [-1, -1]),
    ("generation_logits", LOGITS_DATATYPE, [-1, -1, -1]),
    ("batch_index", "TYPE_INT32", [1]),
    ("sequence_index", "TYPE_INT32", [1]),
    ("context_phase_params", "TYPE_UINT8", [-1]),
    ("kv_cache_alloc_new_blocks", "TYPE_INT32", [1]),
    ("kv_cache_reused_blocks", "TYPE_INT32", [1]),
    ("kv_cache_alloc_total_blocks", "TYPE_INT32", [1]),
    ("arrival_time_ns", "TYPE_INT64", [1]),
    ("first_scheduled_time_ns", "TYPE_INT64", [1]),
    ("first_token_time_ns", "TYPE_INT64", [1]),
    ("last_token_time_ns", "TYPE_INT64", [1]),
    ("acceptance_rate", "TYPE_FP32", [1]),
    ("total_accepted_draft_tokens", "TYPE_INT32", [1]),
    ("total_draft_tokens", "TYPE_INT32", [1]),
)

_PRE_INPUTS = (
    ("QUERY", "TYPE_STRING", [1], False),
    ("DECODER_QUERY", "TYPE_STRING", [1], True),
    ("IMAGE_BYTES", "TYPE_UINT8", [-1, -1, -1, -1], True),
    ("IMAGE_URL", "TYPE_STRING", [1], True),
    ("VIDEO_BYTES", "TYPE_UINT8", [-1, -1, -1, -1], True),
    ("REQUEST_OUTPUT_LEN", "TYPE_INT32", [1], False),
    ("BAD_WORDS_DICT", "TYPE_STRING", [-1], True),
    ("STOP_WORDS_DICT", "TYPE_STRING", [-1], True),
    ("EMBEDDING_BIAS_WORDS", "TYPE_STRING", [-1], True),
    ("EMBEDDING_BIAS_WEIGHTS", "TYPE_FP32", [-1], True),
    ("END_ID", "TYPE_INT32", [1], True),
    ("PAD_ID", "TYPE_INT32", [1], True),
    ("PROMPT_TABLE_EXTRA_ID", "TYPE_UINT64", [1], True),
)

_PRE_OUTPUTS = (
    ("INPUT_ID", "TYPE_INT32", [-1]),
    ("REQUEST_INPUT_LEN", "TYPE_INT32", [1]),
    ("DECODER_INPUT_ID", "TYPE_INT32", [-1]),
    ("REQUEST_DECODER_INPUT_LEN", "TYPE_INT32", [1]),
    ("BAD_WORDS_IDS", "TYPE_INT32", [2, -1]),
    ("STOP_WORDS_IDS", "TYPE_INT32", [2, -1]),
    ("EMBEDDING_BIAS", "TYPE_FP32", [-1]),
    ("REQUEST_OUTPUT_LEN", "TYPE_INT32", [-1]),
    ("OUT_END_ID", "TYPE_INT32", [1]),
    ("OUT_PAD_ID", "TYPE_INT32", [1]),
    ("OUT_PROMPT_TABLE_EXTRA_IDS", "TYPE_UINT64", [-1]),
    ("PIXEL_VALUES", "TYPE_FP16", [-1, -1, -1, -1]),
    ("ASPECT_RATIO_IDS", "TYPE_INT64", [-1]),
    ("ASPECT_RATIO_MASK", "TYPE_INT64", [-1, -1]),
    ("CROSS_ATTENTION_MASK", "TYPE_INT64", [-1, -1, -1]),
    ("IMAGE_SIZES", "TYPE_INT64", [2]),
    ("IS_VIDEO_INPUT", "TYPE_BOOL", [1]),
    ("ATTENTION_MASK", "TYPE_INT64", [-1]),
    ("IMAGE_GRID_THW", "TYPE_INT64", [3]),
    ("VISION_INPUT_ID", "TYPE_INT32", [-1]),
)

# The BLS model's request tensors: every name its TritonDecoder reads (lib/triton_decoder.py).
_BLS_INPUTS = (
    ("text_input", "TYPE_STRING", [1], False),
    ("decoder_text_input", "TYPE_STRING", [1], True),
    ("image_input", "TYPE_FP16", [-1, 3, -1, -1], True),
    ("image_bytes_input", "TYPE_UINT8", [-1, -1, -1, -1], True),
    ("image_url_input", "TYPE_STRING", [1], True),
    ("video_bytes_input", "TYPE_UINT8", [-1, -1, -1, -1], True),
    ("max_tokens", "TYPE_INT32", [1], False),
    ("bad_words", "TYPE_STRING", [-1], True),
    ("stop_words", "TYPE_STRING", [-1], True),
    ("exclude_input_in_output", "TYPE_BOOL", [1], True),
    ("end_id", "TYPE_INT32", [1], True),
    ("pad_id", "TYPE_INT32", [1], True),
    ("top_k", "TYPE_INT32", [1], True),
    ("top_p", "TYPE_FP32", [1], True),
    ("temperature", "TYPE_FP32", [1], True),
    ("length_penalty", "TYPE_FP32", [1], True),
    ("repetition_penalty", "TYPE_FP32", [1], True),
    ("min_tokens", "TYPE_INT32", [1], True),
    ("presence_penalty", "TYPE_FP32", [1], True),
    ("frequency_penalty", "TYPE_FP32", [1], True),
    ("seed", "TYPE_UINT64", [1], True),
    ("return_log_probs", "TYPE_BOOL", [1], True),
    ("return_context_logits", "TYPE_BOOL", [1], True),
    ("return_generation_logits", "TYPE_BOOL", [1], True),
    ("num_return_sequences", "TYPE_INT32", [1], True),
    ("beam_width", "TYPE_INT32", [1], True),
    ("stream", "TYPE_BOOL", [1], True),
    ("prompt_embedding_table", "TYPE_FP16", [-1, -1], True),
    ("prompt_vocab_size", "TYPE_INT32", [1], True),
    ("prompt_table_extra_id", "TYPE_UINT64", [1], True),
    ("embedding_bias_words", "TYPE_STRING", [-1], True),
    ("embedding_bias_weights", "TYPE_FP32", [-1], True),
    ("num_draft_tokens", "TYPE_INT32", [1], True),
    ("use_draft_logits", "TYPE_BOOL", [1], True),
    ("lora_task_id", "TYPE_UINT64", [1], True),
    ("lora_weights", "TYPE_FP16", [-1, -1], True),
    ("lora_config", "TYPE_INT32", [-1, 3], True),
    ("return_perf_metrics", "TYPE_BOOL", [1], True),
    ("guided_decoding_guide_type", "TYPE_STRING", [1], True),
    ("guided_decoding_guide", "TYPE_STRING", [1], True),
)

# What the BLS puts in its responses (TritonDecoder.create_triton_response).
_BLS_OUTPUTS = (
    ("text_output", "TYPE_STRING", [-1]),
    ("cum_log_probs", "TYPE_FP32", [-1]),
    ("output_log_probs", "TYPE_FP32", [-1, -1]),
    ("context_logits", LOGITS_DATATYPE, [-1, -1]),
    ("generation_logits", LOGITS_DATATYPE, [-1, -1, -1]),
    ("batch_index", "TYPE_INT32", [1]),
    ("sequence_index", "TYPE_INT32", [1]),
    ("kv_cache_alloc_new_blocks", "TYPE_INT32", [1]),
    ("kv_cache_reused_blocks", "TYPE_INT32", [1]),
    ("kv_cache_alloc_total_blocks", "TYPE_INT32", [1]),
    ("arrival_time_ns", "TYPE_INT64", [1]),
    ("first_scheduled_time_ns", "TYPE_INT64", [1]),
    ("first_token_time_ns", "TYPE_INT64", [1]),
    ("last_token_time_ns", "TYPE_INT64", [1]),
    ("acceptance_rate", "TYPE_FP32", [1]),
    ("total_accepted_draft_tokens", "TYPE_INT32", [1]),
    ("total_draft_tokens", "TYPE_INT32", [1]),
)

# The python model code of each layout model: upstream's files, passed in ``model_files``. The BLS
# imports its ``lib`` package (``from lib.triton_decoder import TritonDecoder``).
TRTLLM_ENGINE_MODEL_FILES = {
    "preprocessing": ("preprocessing/1/model.py",),
    "postprocessing": ("postprocessing/1/model.py",),
    "tensorrt_llm_bls": ("tensorrt_llm_bls/1/model.py", "tensorrt_llm_bls/1/lib/decode.py",
                         "tensorrt_llm_bls/1/lib/triton_decoder.py"),
}
LLMAPI_MODEL_FILES = ("1/model.py", "1/helpers.py")

# Upstream template parameters this project leaves unset on purpose (backend default applies):
# encoder_model_path / cross_kv_cache_fraction (encoder-decoder only), max_tokens_in_paged_kv_cache
# (unset = bounded by kv_cache_free_gpu_mem_fraction), kv_cache_host_memory_bytes (no host offload),
# participant_ids (only for orchestrator mode with process spawning disabled; this project lets the
# orchestrator spawn its workers), lora_* (no LoRA), medusa/eagle/lookahead (no speculative decoding),
# xgrammar_tokenizer_info_path (no guided decoding), enable_trt_overlap (removed upstream).


def _trtllm_input_tensors(profile):
    out = []
    for n, d, dims, o, r, g in _TRTLLM_INPUTS:
        dtype = (_TEMPLATED[n] or _dtype_enum(profile)) if n in _TEMPLATED else d
        out.append(_tensor(n, dtype, dims, o, r, g))
    return out


# --------------------------------------------------------------------------------------------
# how Triton is started (upstream's launch_triton_server.py and its Leader/Orchestrator modes)

LAUNCH_MODES = ("single", "orchestrator", "llmapi-spawn", "llmapi-instances")


def launch_mode(runtime, world_size, instances):
    """How upstream starts Triton for ``instances`` model instances of ``world_size`` GPUs each.

    - trtllm-engine, one GPU, one instance: a plain ``tritonserver``.
    - trtllm-engine otherwise: orchestrator mode (``TRTLLM_ORCHESTRATOR=1``): one Triton process under
      ``mpirun -n 1`` that spawns one worker per GPU of each instance; instances and their GPUs come from
      ``instance_group`` count and ``gpu_device_ids`` (``,`` within, ``;`` between instances). Leader mode
      (``mpirun -n TP``) serves one instance per server and needs a load balancer for more, so it is not used.
    - trtllm-llmapi, one instance of TP > 1: ``mpirun -n 1 tritonserver`` (upstream's launcher at world
      size 1); the LLM API spawns its TP workers.
    - trtllm-llmapi, several instances: plain ``tritonserver`` (upstream's ``--no-mpi``), ``gpu_device_ids``.
    """
    if runtime == "trtllm-engine":
        return "single" if world_size == 1 and instances == 1 else "orchestrator"
    if runtime == "trtllm-llmapi":
        if instances > 1:
            return "llmapi-instances"
        return "llmapi-spawn" if world_size > 1 else "single"
    return "single"


def server_launch(profile):
    """``{mode, entrypoint, args, env}``: the container's entrypoint, extra tritonserver args and env."""
    par = profile["parallel"]
    ids = par["gpu_device_ids"] if profile["device"] == "gpu" else []
    world = par["tp"] * par["pp"]
    mode = launch_mode(profile["runtime"], world, max(1, len(ids)))
    want = par.get("launch_mode")
    if want is not None and want != mode:
        raise ProfileError("parallel.launch_mode", f"is {want!r} but {profile['runtime']} with TP x PP = {world} and "
                           f"{len(ids)} instance(s) starts as {mode!r}; re-run the planner")
    entry, args, env = ["tritonserver"], [], {}
    if mode in ("orchestrator", "llmapi-spawn"):
        entry = ["mpirun", "--allow-run-as-root", "-n", "1", "tritonserver"]
    if mode == "orchestrator":
        env = {"TRTLLM_ORCHESTRATOR": "1", "TRTLLM_ORCHESTRATOR_SPAWN_PROCESSES": "1"}
        gpus = sorted({int(g) for i in ids for g in i.split(",")})
        # what upstream's launcher adds for spawned workers (add_multi_model_config)
        args = ["--pinned-memory-pool-byte-size=0", "--enable-peer-access=false"] + [
            f"--cuda-memory-pool-byte-size={g}:0" for g in gpus]
    return {"mode": mode, "entrypoint": entry, "args": args, "env": env}


def _tensorrt_llm_config(profile, opts):
    lim = profile["limits"]
    sched = profile["scheduler"]
    kv = profile["kv_cache"]
    ids = profile["parallel"]["gpu_device_ids"]
    params = {
        "max_beam_width": lim["max_beam_width"],
        "FORCE_CPU_ONLY_INPUT_TENSORS": "no",
        "gpt_model_type": "inflight_fused_batching",
        "gpt_model_path": opts["engine_dir"],
        "max_attention_window_size": lim["max_seq_len"],
        "sink_token_length": 0,
        "batch_scheduler_policy": sched["batch_scheduler_policy"],
        "kv_cache_free_gpu_mem_fraction": kv["free_gpu_mem_fraction"],
        "kv_cache_onboard_blocks": True,
        "exclude_input_in_output": True,
        "cancellation_check_period_ms": 100,
        "stats_check_period_ms": 100,
        "iter_stats_max_iterations": 1000,
        "request_stats_max_iterations": 0,
        "enable_kv_cache_reuse": kv["enable_block_reuse"],
        "normalize_log_probs": True,
        "enable_chunked_context": sched["enable_chunked_context"],
        "gpu_device_ids": ";".join(ids),
        "num_nodes": 1,
        "decoding_mode": "top_k_top_p" if lim["max_beam_width"] == 1 else "beam_search",
        "executor_worker_path": "/opt/tritonserver/backends/tensorrtllm/trtllmExecutorWorker",
        "gpu_weights_percent": 1.0,
        "enable_context_fmha_fp32_acc": False,
        "multi_block_mode": True,
        "cuda_graph_mode": False,
        "cuda_graph_cache_size": 0,
        "tokenizer_dir": opts["tokenizer_dir"],
    }
    return {
        "name": "tensorrt_llm",
        "backend": "tensorrtllm",
        "max_batch_size": lim["max_batch_size"],
        "model_transaction_policy": {"decoupled": True},
        "dynamic_batching": {
            "preferred_batch_size": [lim["max_batch_size"]],
            "max_queue_delay_microseconds": sched["max_queue_delay_microseconds"],
            "default_queue_policy": {"max_queue_size": sched["max_queue_size"]},
        },
        "input": _trtllm_input_tensors(profile),
        "output": [_tensor(n, d, dims) for n, d, dims in _TRTLLM_OUTPUTS],
        # one instance per replica; in orchestrator mode the backend places instance i on the i-th
        # ';'-separated entry of gpu_device_ids
        "instance_group": [{"count": len(ids), "kind": Enum("KIND_CPU")}],
        "parameters": params,
    }


def _preprocessing_config(profile, opts):
    lim = profile["limits"]
    return {
        "name": "preprocessing",
        "backend": "python",
        "max_batch_size": lim["max_batch_size"],
        "dynamic_batching": {
            "max_queue_delay_microseconds": profile["scheduler"]["max_queue_delay_microseconds"],
            "default_queue_policy": {"max_queue_size": profile["scheduler"]["max_queue_size"]},
        },
        "input": [_tensor(n, d, dims, optional=o) for n, d, dims, o in _PRE_INPUTS],
        "output": [_tensor(n, d, dims) for n, d, dims in _PRE_OUTPUTS],
        "instance_group": [{"count": opts["preprocessing_instance_count"], "kind": Enum("KIND_CPU")}],
        "parameters": {
            "tokenizer_dir": opts["tokenizer_dir"],
            "add_special_tokens": False,
            # read unconditionally by upstream's model.py; "" means text only (no multimodal encoder)
            "multimodal_model_path": "",
        },
    }


def _postprocessing_config(profile, opts):
    return {
        "name": "postprocessing",
        "backend": "python",
        "max_batch_size": profile["limits"]["max_batch_size"],
        "dynamic_batching": {},
        "input": [
            _tensor("TOKENS_BATCH", "TYPE_INT32", [-1, -1]),
            _tensor("SEQUENCE_LENGTH", "TYPE_INT32", [-1]),
        ],
        "output": [_tensor("OUTPUT", "TYPE_STRING", [-1])],
        "instance_group": [{"count": opts["postprocessing_instance_count"], "kind": Enum("KIND_CPU")}],
        "parameters": {"tokenizer_dir": opts["tokenizer_dir"], "skip_special_tokens": True},
    }


def _ensemble_config(profile, opts):
    served = profile["model"]["served_name"]
    pre_in = {
        "QUERY": "text_input",
        "REQUEST_OUTPUT_LEN": "max_tokens",
        "BAD_WORDS_DICT": "bad_words",
        "STOP_WORDS_DICT": "stop_words",
        "END_ID": "end_id",
        "PAD_ID": "pad_id",
    }
    pre_out = {
        "REQUEST_INPUT_LEN": "_REQUEST_INPUT_LEN",
        "INPUT_ID": "_INPUT_ID",
        "REQUEST_OUTPUT_LEN": "_REQUEST_OUTPUT_LEN",
        "STOP_WORDS_IDS": "_STOP_WORDS_IDS",
        "BAD_WORDS_IDS": "_BAD_WORDS_IDS",
        "EMBEDDING_BIAS": "_EMBEDDING_BIAS",
        "OUT_END_ID": "_PREPROCESSOR_END_ID",
        "OUT_PAD_ID": "_PREPROCESSOR_PAD_ID",
    }
    llm_in = {
        "input_ids": "_INPUT_ID",
        "input_lengths": "_REQUEST_INPUT_LEN",
        "request_output_len": "_REQUEST_OUTPUT_LEN",
        "end_id": "_PREPROCESSOR_END_ID",
        "pad_id": "_PREPROCESSOR_PAD_ID",
        "embedding_bias": "_EMBEDDING_BIAS",
        "stop_words_list": "_STOP_WORDS_IDS",
        "bad_words_list": "_BAD_WORDS_IDS",
    }
    for outer, inner in _ENSEMBLE_TO_TRTLLM:
        llm_in[inner] = outer
    llm_out = {"output_ids": "_TOKENS_BATCH", "sequence_length": "_SEQUENCE_LENGTH"}

    def kv(m):
        return [{"key": k, "value": v} for k, v in m.items()]

    return {
        "name": served,
        "platform": "ensemble",
        "max_batch_size": profile["limits"]["max_batch_size"],
        "input": [_tensor(n, d, dims, o) for n, d, dims, o in _ENSEMBLE_INPUTS],
        "output": [_tensor("text_output", "TYPE_STRING", [-1])],
        "ensemble_scheduling": {
            "step": [
                {
                    "model_name": "preprocessing",
                    "model_version": -1,
                    "input_map": kv(pre_in),
                    "output_map": kv(pre_out),
                },
                {"model_name": "tensorrt_llm", "model_version": -1, "input_map": kv(llm_in), "output_map": kv(llm_out)},
                {
                    "model_name": "postprocessing",
                    "model_version": -1,
                    "input_map": kv({"TOKENS_BATCH": "_TOKENS_BATCH", "SEQUENCE_LENGTH": "_SEQUENCE_LENGTH"}),
                    "output_map": kv({"OUTPUT": "text_output"}),
                },
            ]
        },
    }


def _bls_config(profile, opts):
    return {
        "name": "tensorrt_llm_bls",
        "backend": "python",
        "max_batch_size": profile["limits"]["max_batch_size"],
        # decoupled: the BLS streams only in decoupled mode (pb_utils.using_decoupled_model_transaction_policy)
        "model_transaction_policy": {"decoupled": True},
        "input": [_tensor(n, d, dims, o) for n, d, dims, o in _BLS_INPUTS],
        "output": [_tensor(n, d, dims) for n, d, dims in _BLS_OUTPUTS],
        "instance_group": [{"count": opts["bls_instance_count"], "kind": Enum("KIND_CPU")}],
        "parameters": {
            "accumulate_tokens": False,
            "tensorrt_llm_model_name": "tensorrt_llm",
            "tensorrt_llm_draft_model_name": "",
        },
    }


def _render_trtllm_engine(profile, opts):
    served = profile["model"]["served_name"]
    header = _header(profile)
    files = {
        f"{served}/config.pbtxt": render_validated(_ensemble_config(profile, opts), header, expect_name=served),
        f"{served}/1/.keep": "",
        "tensorrt_llm/config.pbtxt": render_validated(_tensorrt_llm_config(profile, opts), header, "tensorrt_llm"),
        "tensorrt_llm/1/.keep": "",
        "preprocessing/config.pbtxt": render_validated(_preprocessing_config(profile, opts), header, "preprocessing"),
        "postprocessing/config.pbtxt": render_validated(
            _postprocessing_config(profile, opts), header, "postprocessing"
        ),
    }
    load = [served]
    needed = list(TRTLLM_ENGINE_MODEL_FILES["preprocessing"] + TRTLLM_ENGINE_MODEL_FILES["postprocessing"])
    if opts["bls"]:
        files["tensorrt_llm_bls/config.pbtxt"] = render_validated(
            _bls_config(profile, opts), header, "tensorrt_llm_bls"
        )
        needed += TRTLLM_ENGINE_MODEL_FILES["tensorrt_llm_bls"]
        load.append("tensorrt_llm_bls")
    return files, load, needed


# --------------------------------------------------------------------------------------------
# trtllm-llmapi


def _llmapi_model_yaml(profile, opts):
    lim = profile["limits"]
    kv = profile["kv_cache"]
    par = profile["parallel"]
    kv_cfg = {"free_gpu_memory_fraction": kv["free_gpu_mem_fraction"], "enable_block_reuse": kv["enable_block_reuse"]}
    if profile["precision"].get("kv_cache") == "fp8":
        kv_cfg["dtype"] = "fp8"
    data = {
        "model": opts["checkpoint_dir"],
        "backend": "pytorch",
        "tensor_parallel_size": par["tp"],
        "pipeline_parallel_size": par["pp"],
    }
    ep = par.get("ep") or 1
    if not isinstance(ep, int) or isinstance(ep, bool) or ep < 1 or par["tp"] % ep:
        raise ProfileError("parallel.ep", f"must be a whole number >= 1 that divides parallel.tp ({par['tp']}), got {ep!r}")
    if ep > 1 and not profile["model"].get("moe"):
        raise ProfileError("parallel.ep", f"is {ep} but {profile['model'].get('key')} has no experts; set it to 1")
    if profile["model"].get("moe"):
        # experts split EP ways, each expert's weights split TP/EP ways (llm_args: moe_expert_parallel_size,
        # moe_tensor_parallel_size; their product is the TP size)
        data["moe_expert_parallel_size"] = ep
        data["moe_tensor_parallel_size"] = par["tp"] // ep
    data.update({
        "max_batch_size": lim["max_batch_size"],
        "max_num_tokens": lim["max_num_tokens"],
        "max_seq_len": lim["max_seq_len"],
        "max_beam_width": lim["max_beam_width"],
        "enable_chunked_prefill": profile["scheduler"]["enable_chunked_context"],
        "kv_cache_config": kv_cfg,
        "scheduler_config": {"capacity_scheduler_policy": profile["scheduler"]["batch_scheduler_policy"].upper()},
    })
    graphs = profile.get("cuda_graphs")
    if graphs:
        # TorchLlmArgs.cuda_graph_config: the planned batch sizes as they are (max_batch_size left 0, so TensorRT-LLM
        # takes max(batch_sizes) and keeps this list instead of generating its default 1..128)
        data["cuda_graph_config"] = {"batch_sizes": list(graphs["batch_sizes"]),
                                     "enable_padding": graphs["enable_padding"]}
    data["triton_config"] = {"max_batch_size": 0, "decoupled": True}
    if profile["precision"].get("dtype") in ("bfloat16", "float16"):
        data["dtype"] = profile["precision"]["dtype"]
    return "# " + _header(profile).replace("\n", "\n# ") + "\n" + to_yaml(data)


# The llmapi model's tensors as upstream's llmapi config.pbtxt declares them: its model.py sends the
# perf-metric and cumulative_logprob outputs when a request asks for them.
_LLMAPI_INPUTS = (
    ("text_input", "TYPE_STRING", [-1], False),
    ("streaming", "TYPE_BOOL", [1], True),
    ("sampling_param_best_of", "TYPE_INT32", [1], True),
    ("sampling_param_temperature", "TYPE_FP32", [1], True),
    ("sampling_param_top_k", "TYPE_INT32", [1], True),
    ("sampling_param_top_p", "TYPE_FP32", [1], True),
    ("sampling_param_frequency_penalty", "TYPE_FP32", [1], True),
    ("sampling_param_presence_penalty", "TYPE_FP32", [1], True),
    ("sampling_param_max_tokens", "TYPE_INT32", [1], True),
    ("sampling_param_stop", "TYPE_STRING", [-1], True),
    ("sampling_param_seed", "TYPE_UINT64", [1], True),
    ("sampling_param_exclude_input_from_output", "TYPE_BOOL", [1], True),
    ("sampling_param_return_perf_metrics", "TYPE_BOOL", [1], True),
    ("return_finish_reason", "TYPE_BOOL", [1], True),
    ("return_stop_reason", "TYPE_BOOL", [1], True),
    ("return_cumulative_logprob", "TYPE_BOOL", [1], True),
    ("stop", "TYPE_BOOL", [1], True),
)
_LLMAPI_OUTPUTS = (
    ("text_output", "TYPE_STRING", [-1]),
    ("finish_reason", "TYPE_STRING", [-1]),
    ("stop_reason", "TYPE_STRING", [-1]),
    ("cumulative_logprob", "TYPE_FP32", [-1]),
    ("kv_cache_reused_block", "TYPE_INT32", [-1]),
    ("kv_cache_missed_block", "TYPE_INT32", [-1]),
    ("kv_cache_alloc_new_blocks", "TYPE_INT32", [-1]),
    ("kv_cache_alloc_total_blocks", "TYPE_INT32", [-1]),
    ("kv_cache_hit_rate", "TYPE_FP32", [-1]),
    ("arrival_time_ns", "TYPE_INT64", [1]),
    ("first_scheduled_time_ns", "TYPE_INT64", [1]),
    ("first_token_time_ns", "TYPE_INT64", [1]),
    ("last_token_time_ns", "TYPE_INT64", [1]),
    ("acceptance_rate", "TYPE_FP32", [1]),
    ("total_accepted_draft_tokens", "TYPE_INT32", [1]),
    ("total_draft_tokens", "TYPE_INT32", [1]),
)


def _llmapi_config(profile, opts):
    ids = profile["parallel"]["gpu_device_ids"]
    params = {}
    if len(ids) > 1:
        # several instances: upstream's docs/llmapi.md multi-instance form (gpu_device_ids, no mpirun)
        params["gpu_device_ids"] = ";".join(ids)
    return {
        "name": profile["model"]["served_name"],
        "backend": "python",
        "input": [_tensor(n, d, dims, optional=o) for n, d, dims, o in _LLMAPI_INPUTS],
        "output": [_tensor(n, d, dims) for n, d, dims in _LLMAPI_OUTPUTS],
        "instance_group": [{"count": len(ids), "kind": Enum("KIND_CPU")}],
        "parameters": params or None,
    }


def _render_llmapi(profile, opts):
    served = profile["model"]["served_name"]
    files = {
        f"{served}/config.pbtxt": render_validated(_llmapi_config(profile, opts), _header(profile), served),
        f"{served}/1/model.yaml": _llmapi_model_yaml(profile, opts),
    }
    return files, [served], [f"{served}/{name}" for name in LLMAPI_MODEL_FILES]


# --------------------------------------------------------------------------------------------
# transformers (this project's python model)

TRANSFORMERS_INPUTS = (
    ("text_input", "TYPE_STRING", [1], False),
    ("max_tokens", "TYPE_INT32", [1], False),
    ("stream", "TYPE_BOOL", [1], True),
    ("temperature", "TYPE_FP32", [1], True),
    ("top_p", "TYPE_FP32", [1], True),
    ("top_k", "TYPE_INT32", [1], True),
    ("stop_words", "TYPE_STRING", [-1], True),
    ("bad_words", "TYPE_STRING", [-1], True),
    ("random_seed", "TYPE_UINT64", [1], True),
    ("seed", "TYPE_UINT64", [1], True),
    ("repetition_penalty", "TYPE_FP32", [1], True),
    ("min_tokens", "TYPE_INT32", [1], True),
    ("end_id", "TYPE_INT32", [1], True),
    ("pad_id", "TYPE_INT32", [1], True),
    ("exclude_input_in_output", "TYPE_BOOL", [1], True),
    ("beam_width", "TYPE_INT32", [1], True),
)


def _transformers_config(profile, opts):
    lim = profile["limits"]
    return {
        "name": profile["model"]["served_name"],
        "backend": "python",
        "max_batch_size": 0,
        "model_transaction_policy": {"decoupled": True},
        "input": [_tensor(n, d, dims, o) for n, d, dims, o in TRANSFORMERS_INPUTS],
        "output": [
            _tensor("text_output", "TYPE_STRING", [-1]),
            _tensor("output_ids", "TYPE_INT32", [-1]),
            _tensor("finish_reason", "TYPE_STRING", [1]),
        ],
        "instance_group": _instance_group_python(profile),
        "parameters": {
            "model_dir": opts["checkpoint_dir"],
            "device": profile["device"],
            "dtype": profile["precision"]["dtype"] if profile["device"] == "gpu" else "float32",
            "max_input_len": lim["max_input_len"],
            "max_output_len": lim["max_output_len"],
            "max_seq_len": lim["max_seq_len"],
            "max_concurrency": lim["max_batch_size"],
            "profile_fingerprint": profile["fingerprint"],
        },
    }


def _render_transformers(profile, opts):
    served = profile["model"]["served_name"]
    files = {f"{served}/config.pbtxt": render_validated(_transformers_config(profile, opts), _header(profile), served)}
    return files, [served], [f"{served}/1/model.py"]


# --------------------------------------------------------------------------------------------

_RENDERERS = {
    "trtllm-engine": _render_trtllm_engine,
    "trtllm-llmapi": _render_llmapi,
    "transformers": _render_transformers,
}


def default_options(profile):
    return {
        "checkpoint_dir": DEFAULT_CHECKPOINT_DIR,
        "engine_dir": DEFAULT_ENGINE_DIR,
        "tokenizer_dir": None,
        "bls": False,
        "preprocessing_instance_count": 5,
        "postprocessing_instance_count": 5,
        "bls_instance_count": profile.get("limits", {}).get("max_batch_size", 1) if isinstance(profile, dict) else 1,
        "model_files": {},
    }


def render_repository(profile, options=None, runtime=None):
    """All files of the model repository for ``profile`` -> :class:`Repository`.

    ``options``: ``checkpoint_dir`` / ``engine_dir`` / ``tokenizer_dir`` (paths inside the
    container), ``bls``, instance counts, ``model_files`` ({path relative to the model's own
    directory ``1/...``, or to the repository: ``<model>/1/...``} -> text). ``runtime`` overrides
    the profile's runtime (it must still be a valid choice for the profile).
    Raises :class:`ProfileError` or :class:`~.pbtxt.PbtxtError`.
    """
    check_profile(profile)
    if runtime is not None:
        if runtime not in RUNTIMES:
            raise ProfileError("runtime", "override {!r} is not one of {}".format(runtime, ", ".join(RUNTIMES)))
        profile = dict(profile, runtime=runtime)
        check_profile(profile)
    opts = default_options(profile)
    unknown = sorted(set(options or {}) - set(opts))
    if unknown:
        raise ProfileError(
            "(options)", "unknown option(s) {}; known: {}".format(", ".join(unknown), ", ".join(sorted(opts)))
        )
    opts.update({k: v for k, v in (options or {}).items() if v is not None})
    if not opts["tokenizer_dir"]:
        opts["tokenizer_dir"] = opts["checkpoint_dir"]
    for key in ("preprocessing_instance_count", "postprocessing_instance_count", "bls_instance_count"):
        if not isinstance(opts[key], int) or isinstance(opts[key], bool) or opts[key] < 1:
            raise ProfileError("(options)." + key, f"must be an integer >= 1, got {opts[key]!r}")

    files, load, needed = _RENDERERS[profile["runtime"]](profile, opts)
    served = profile["model"]["served_name"]
    for given, text in sorted((opts["model_files"] or {}).items()):
        rel = given.lstrip("/")
        if ".." in rel.split("/"):
            raise ProfileError("(options).model_files", f"path {rel!r} leaves the repository")
        if rel.split("/")[0] == "1":
            path = f"{served}/{rel}"
        else:
            path = rel
        if path.endswith("config.pbtxt"):
            raise ProfileError(
                "(options).model_files", f"{path} is rendered from the profile and cannot be given as a file"
            )
        files[path] = text
    missing = [p for p in needed if p not in files]
    if missing:
        raise ProfileError(
            "runtime",
            "{} needs {} in model_files (the python model code for this runtime); pass them in".format(
                profile["runtime"], ", ".join(missing)
            ),
        )
    return Repository(files, served, load, profile["runtime"], server_launch(profile))


__all__ = [
    "RUNTIMES",
    "ProfileError",
    "PbtxtError",
    "Repository",
    "check_profile",
    "content_hash",
    "launch_mode",
    "server_launch",
    "render_repository",
    "to_yaml",
]
