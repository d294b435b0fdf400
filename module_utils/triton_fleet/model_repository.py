"""The Triton model repository for one serving profile (docs/profile.md), rendered in Python.

``render_repository(profile, options)`` returns a :class:`Repository`: every file of the repository
as ``{relative path: text}``, the entry model (the served name, the one clients call through
``/v2/models/<name>/generate``) and the models to load with ``--model-control-mode=explicit``.
Every ``config.pbtxt`` is validated against Triton's ``ModelConfig`` schema before it is returned.

Runtimes (DESIGN.md "Serving runtimes"):

- ``trtllm-engine``: the ``inflight_batcher_llm`` layout: ``<served>`` (the ensemble),
  ``preprocessing``, ``tensorrt_llm`` (``backend: "tensorrtllm"``), ``postprocessing`` and, when
  asked, ``tensorrt_llm_bls``. The python models' code (``1/model.py`` of preprocessing,
  postprocessing, BLS) comes from TensorRT-LLM's ``triton_backend/all_models/inflight_batcher_llm``
  at the tag that matches the image, passed in ``options["model_files"]``.
- ``trtllm-llmapi``: ``<served>/config.pbtxt`` + ``<served>/1/model.yaml`` (LLM API arguments);
  ``1/model.py`` is TRT-LLM's ``all_models/llmapi/tensorrt_llm/1/model.py``, passed in ``model_files``.
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

    def __init__(self, files, entry_model, load_models, runtime):
        super().__init__(files)
        self.entry_model = entry_model
        self.load_models = list(load_models)
        self.runtime = runtime

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
    return HEADER % (profile["name"], profile["fingerprint"])


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

# Request tensors of the ensemble (decoder-only text subset of the upstream template).
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
    ("random_seed", "TYPE_UINT64", [1], True),
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
    ("random_seed", "seed"),
    ("return_log_probs", "return_log_probs"),
    ("return_perf_metrics", "return_perf_metrics"),
    ("beam_width", "beam_width"),
    ("stream", "streaming"),
)

_TRTLLM_INPUTS = (
    # name, dtype, dims, optional, reshape-to-scalar, ragged
    ("input_ids", "TYPE_INT32", [-1], False, False, True),
    ("input_lengths", "TYPE_INT32", [1], False, True, False),
    ("request_output_len", "TYPE_INT32", [1], False, True, False),
    ("end_id", "TYPE_INT32", [1], True, True, False),
    ("pad_id", "TYPE_INT32", [1], True, True, False),
    ("stop_words_list", "TYPE_INT32", [2, -1], True, False, True),
    ("bad_words_list", "TYPE_INT32", [2, -1], True, False, True),
    ("embedding_bias", "TYPE_FP32", [-1], True, False, True),
    ("beam_width", "TYPE_INT32", [1], True, True, False),
    ("temperature", "TYPE_FP32", [1], True, True, False),
    ("runtime_top_k", "TYPE_INT32", [1], True, True, False),
    ("runtime_top_p", "TYPE_FP32", [1], True, True, False),
    ("len_penalty", "TYPE_FP32", [1], True, True, False),
    ("repetition_penalty", "TYPE_FP32", [1], True, True, False),
    ("min_tokens", "TYPE_INT32", [1], True, True, False),
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
)

_TRTLLM_OUTPUTS = (
    ("output_ids", "TYPE_INT32", [-1, -1]),
    ("sequence_length", "TYPE_INT32", [-1]),
    ("cum_log_probs", "TYPE_FP32", [-1]),
    ("output_log_probs", "TYPE_FP32", [-1, -1]),
    ("context_logits", "TYPE_FP32", [-1, -1]),
    ("generation_logits", "TYPE_FP32", [-1, -1, -1]),
    ("batch_index", "TYPE_INT32", [1]),
    ("sequence_index", "TYPE_INT32", [1]),
)

# Upstream template parameters this project leaves unset on purpose (backend default applies):
# encoder_model_path / cross_kv_cache_fraction (encoder-decoder only), max_tokens_in_paged_kv_cache
# (unset = bounded by kv_cache_free_gpu_mem_fraction), kv_cache_host_memory_bytes (no host offload),
# participant_ids (orchestrator mode only), lora_* (no LoRA), medusa/eagle/lookahead (no speculative
# decoding), xgrammar_tokenizer_info_path (no guided decoding), enable_trt_overlap (removed upstream).


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
        "input": [_tensor(n, d, dims, o, r, g) for n, d, dims, o, r, g in _TRTLLM_INPUTS],
        "output": [_tensor(n, d, dims) for n, d, dims in _TRTLLM_OUTPUTS],
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
        "input": [
            _tensor("QUERY", "TYPE_STRING", [1]),
            _tensor("REQUEST_OUTPUT_LEN", "TYPE_INT32", [1]),
            _tensor("BAD_WORDS_DICT", "TYPE_STRING", [-1], optional=True),
            _tensor("STOP_WORDS_DICT", "TYPE_STRING", [-1], optional=True),
            _tensor("EMBEDDING_BIAS_WORDS", "TYPE_STRING", [-1], optional=True),
            _tensor("EMBEDDING_BIAS_WEIGHTS", "TYPE_FP32", [-1], optional=True),
            _tensor("END_ID", "TYPE_INT32", [1], optional=True),
            _tensor("PAD_ID", "TYPE_INT32", [1], optional=True),
        ],
        "output": [
            _tensor("INPUT_ID", "TYPE_INT32", [-1]),
            _tensor("REQUEST_INPUT_LEN", "TYPE_INT32", [1]),
            _tensor("BAD_WORDS_IDS", "TYPE_INT32", [2, -1]),
            _tensor("STOP_WORDS_IDS", "TYPE_INT32", [2, -1]),
            _tensor("EMBEDDING_BIAS", "TYPE_FP32", [-1]),
            _tensor("REQUEST_OUTPUT_LEN", "TYPE_INT32", [-1]),
            _tensor("OUT_END_ID", "TYPE_INT32", [1]),
            _tensor("OUT_PAD_ID", "TYPE_INT32", [1]),
        ],
        "instance_group": [{"count": opts["preprocessing_instance_count"], "kind": Enum("KIND_CPU")}],
        "parameters": {
            "tokenizer_dir": opts["tokenizer_dir"],
            "add_special_tokens": False,
            "max_input_len": lim["max_input_len"],
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
        "model_transaction_policy": {"decoupled": True},
        "input": [_tensor(n, d, dims, o) for n, d, dims, o in _ENSEMBLE_INPUTS],
        "output": [_tensor("text_output", "TYPE_STRING", [-1])],
        "instance_group": [{"count": opts["bls_instance_count"], "kind": Enum("KIND_CPU")}],
        "parameters": {
            "accumulate_tokens": False,
            "tensorrt_llm_model_name": "tensorrt_llm",
            "tensorrt_llm_draft_model_name": "",
            "logits_datatype": "TYPE_FP32",
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
    needed = ["preprocessing/1/model.py", "postprocessing/1/model.py"]
    if opts["bls"]:
        files["tensorrt_llm_bls/config.pbtxt"] = render_validated(
            _bls_config(profile, opts), header, "tensorrt_llm_bls"
        )
        needed.append("tensorrt_llm_bls/1/model.py")
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
        "max_batch_size": lim["max_batch_size"],
        "max_num_tokens": lim["max_num_tokens"],
        "max_seq_len": lim["max_seq_len"],
        "max_beam_width": lim["max_beam_width"],
        "enable_chunked_prefill": profile["scheduler"]["enable_chunked_context"],
        "kv_cache_config": kv_cfg,
        "scheduler_config": {"capacity_scheduler_policy": profile["scheduler"]["batch_scheduler_policy"].upper()},
        "triton_config": {"max_batch_size": 0, "decoupled": True},
    }
    if profile["precision"].get("dtype") in ("bfloat16", "float16"):
        data["dtype"] = profile["precision"]["dtype"]
    return "# " + _header(profile).replace("\n", "\n# ") + "\n" + to_yaml(data)


def _llmapi_config(profile, opts):
    ins = [_tensor("text_input", "TYPE_STRING", [1])]
    for name, dtype in (
        ("streaming", "TYPE_BOOL"),
        ("sampling_param_temperature", "TYPE_FP32"),
        ("sampling_param_top_k", "TYPE_INT32"),
        ("sampling_param_top_p", "TYPE_FP32"),
        ("sampling_param_frequency_penalty", "TYPE_FP32"),
        ("sampling_param_presence_penalty", "TYPE_FP32"),
        ("sampling_param_max_tokens", "TYPE_INT32"),
        ("sampling_param_seed", "TYPE_UINT64"),
        ("sampling_param_exclude_input_from_output", "TYPE_BOOL"),
        ("return_finish_reason", "TYPE_BOOL"),
        ("return_stop_reason", "TYPE_BOOL"),
    ):
        ins.append(_tensor(name, dtype, [1], optional=True))
    ins.append(_tensor("sampling_param_stop", "TYPE_STRING", [-1], optional=True))
    ins.append(_tensor("stop", "TYPE_BOOL", [1], optional=True))
    groups = [{"count": len(profile["parallel"]["gpu_device_ids"]), "kind": Enum("KIND_CPU")}]
    params = {}
    if len(profile["parallel"]["gpu_device_ids"]) > 1:
        params["gpu_device_ids"] = ";".join(profile["parallel"]["gpu_device_ids"])
    return {
        "name": profile["model"]["served_name"],
        "backend": "python",
        "input": ins,
        "output": [
            _tensor("text_output", "TYPE_STRING", [-1]),
            _tensor("finish_reason", "TYPE_STRING", [-1]),
            _tensor("stop_reason", "TYPE_STRING", [-1]),
        ],
        "instance_group": groups,
        "parameters": params or None,
    }


def _render_llmapi(profile, opts):
    served = profile["model"]["served_name"]
    files = {
        f"{served}/config.pbtxt": render_validated(_llmapi_config(profile, opts), _header(profile), served),
        f"{served}/1/model.yaml": _llmapi_model_yaml(profile, opts),
    }
    return files, [served], [f"{served}/1/model.py"]


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
    return Repository(files, served, load, profile["runtime"])


__all__ = [
    "RUNTIMES",
    "ProfileError",
    "PbtxtError",
    "Repository",
    "check_profile",
    "content_hash",
    "render_repository",
    "to_yaml",
]
