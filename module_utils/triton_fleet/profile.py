"""The serving profile's schema, in one place (docs/profile.md).

Every reader of a profile goes through this module: ``get`` for one field, ``validate`` for the whole
document, and the ``served_name`` / ``runtime`` / ``checkpoint`` / ``checkpoint_dir`` / ``engine_dir`` helpers for
the values that roles and playbooks derive from it (so no role computes ``<model.key>@<model.revision>``, picks
between the base and a pre-quantized checkpoint, or computes an engine path on its own). Pure Python, no Ansible import; runs on the controller and on managed hosts (Python 3.11+: Debian 12's python3, docs/compatibility.md).
"""

import posixpath
import re

from . import checkpoints

SCHEMA_VERSION = 1
RUNTIMES = ("trtllm-engine", "trtllm-llmapi", "transformers")
DEVICES = ("gpu", "cpu")
SCHEDULER_POLICIES = ("guaranteed_no_evict", "max_utilization")
# model.thinking.mode: what the model's chat template does with reasoning (docs/profile.md).
THINKING_MODES = ("switchable", "never", "always")
# Model names the trtllm-engine layout uses for its own models; a served name must not clash with them.
LAYOUT_MODEL_NAMES = ("preprocessing", "postprocessing", "tensorrt_llm", "tensorrt_llm_bls")

# The roots the roles default to (roles/model_artifacts, roles/trtllm_engine, roles/triton_server).
DEFAULT_MODELS_DIR = "/var/lib/triton-fleet/models"
DEFAULT_ENGINES_DIR = "/var/lib/triton-fleet/engines"

WHAT_TO_DO = "re-run the preflight stage (ansible-playbook site.yml --tags preflight) so the planner writes a full profile"

_NUMBER = (int, float)

# (dotted path, type) of every field a consumer reads. A tuple of types accepts any of them.
SCHEMA = (
    ("schema_version", int),
    ("name", str),
    ("group", str),
    ("model.key", str),
    ("model.revision", str),
    ("model.served_name", str),
    ("model.architecture", str),
    ("runtime", str),
    ("device", str),
    ("gpu.sku", str),
    ("precision.dtype", str),
    ("precision.weights", str),
    ("precision.kv_cache", str),
    ("parallel.tp", int),
    ("parallel.pp", int),
    ("parallel.gpu_device_ids", list),
    ("limits.max_batch_size", int),
    ("limits.max_input_len", int),
    ("limits.max_seq_len", int),
    ("limits.max_num_tokens", int),
    ("limits.max_output_len", int),
    ("limits.max_beam_width", int),
    ("kv_cache.free_gpu_mem_fraction", _NUMBER),
    ("kv_cache.enable_block_reuse", bool),
    ("kv_cache.tokens_per_block", int),
    ("scheduler.batch_scheduler_policy", str),
    ("scheduler.enable_chunked_context", bool),
    ("scheduler.max_queue_delay_microseconds", int),
    ("scheduler.max_queue_size", int),
    ("image.ref", str),
    ("fingerprint", str),
)

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_FINGERPRINT = re.compile(r"^[0-9a-f]{64}$")


class ProfileError(ValueError):
    """A profile that cannot be used. ``field`` is the dotted path of the offending field."""

    def __init__(self, field, message):
        self.field = field
        super().__init__(f"profile field {field}: {message}")


def get(profile, dotted, required=True):
    """The value at ``dotted`` (``"model.served_name"``); ``None`` when absent and not ``required``."""
    node = profile
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            if required:
                raise ProfileError(dotted, f"is missing; the profile must follow docs/profile.md ({WHAT_TO_DO})")
            return None
        node = node[part]
    return node


def _kind_name(kind):
    return kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)


def _check_types(profile):
    for dotted, kind in SCHEMA:
        value = get(profile, dotted)
        if isinstance(value, bool) and kind is not bool:
            raise ProfileError(dotted, f"must be {_kind_name(kind)}, got {value!r} ({WHAT_TO_DO})")
        if not isinstance(value, kind):
            raise ProfileError(dotted, f"must be {_kind_name(kind)}, got {value!r} ({WHAT_TO_DO})")


def validate(profile):
    """Return ``profile`` when it follows docs/profile.md; raise :class:`ProfileError` naming the first bad field."""
    if not isinstance(profile, dict):
        raise ProfileError(
            "(profile)",
            f"must be a mapping (the JSON of docs/profile.md), got {type(profile).__name__}; {WHAT_TO_DO}",
        )
    _check_types(profile)
    if profile["schema_version"] != SCHEMA_VERSION:
        raise ProfileError(
            "schema_version",
            f"is {profile['schema_version']!r}; this project reads schema_version {SCHEMA_VERSION} ({WHAT_TO_DO})",
        )
    if profile["runtime"] not in RUNTIMES:
        raise ProfileError("runtime", "is {!r}; expected one of {}".format(profile["runtime"], ", ".join(RUNTIMES)))
    if profile["device"] not in DEVICES:
        raise ProfileError("device", "is {!r}; expected gpu or cpu".format(profile["device"]))
    if profile["device"] == "cpu" and profile["runtime"] != "transformers":
        raise ProfileError(
            "runtime", "{} needs a GPU; a cpu profile can only use the transformers runtime".format(profile["runtime"])
        )
    _check_checkpoint(profile)
    checkpoint_name(profile)
    served = profile["model"]["served_name"]
    if not _NAME.match(served) or served in LAYOUT_MODEL_NAMES:
        raise ProfileError(
            "model.served_name",
            f"{served!r} is not a usable model name (letters, digits, - _ . ; at most 128; not one of "
            f"{', '.join(LAYOUT_MODEL_NAMES)}): set triton_fleet_served_name",
        )
    lim = profile["limits"]
    for key in ("max_batch_size", "max_input_len", "max_seq_len", "max_num_tokens", "max_output_len", "max_beam_width"):
        if lim[key] < 1:
            raise ProfileError("limits." + key, f"must be >= 1, got {lim[key]!r}")
    if lim["max_input_len"] >= lim["max_seq_len"]:
        raise ProfileError(
            "limits.max_input_len", f"({lim['max_input_len']}) must be below limits.max_seq_len ({lim['max_seq_len']})"
        )
    frac = profile["kv_cache"]["free_gpu_mem_fraction"]
    if not 0 < frac <= 1:
        raise ProfileError("kv_cache.free_gpu_mem_fraction", f"must be in (0, 1], got {frac!r}")
    if profile["scheduler"]["batch_scheduler_policy"] not in SCHEDULER_POLICIES:
        raise ProfileError("scheduler.batch_scheduler_policy", "must be " + " or ".join(SCHEDULER_POLICIES))
    for key in ("tp", "pp"):
        if profile["parallel"][key] < 1:
            raise ProfileError("parallel." + key, f"must be >= 1, got {profile['parallel'][key]!r}")
    if profile["device"] == "gpu":
        ids = profile["parallel"]["gpu_device_ids"]
        if not ids or not all(isinstance(i, str) and i for i in ids):
            raise ProfileError(
                "parallel.gpu_device_ids", 'needs one non-empty string per replica (e.g. ["0"] or ["0,1"])'
            )
        per = profile["parallel"]["tp"] * profile["parallel"]["pp"]
        for i in ids:
            if len(i.split(",")) != per:
                raise ProfileError(
                    "parallel.gpu_device_ids", f"entry {i!r} has {len(i.split(','))} GPUs but tp x pp = {per}"
                )
    if profile["runtime"] == "trtllm-engine" and not get(profile, "image.trtllm", required=False):
        raise ProfileError(
            "image.trtllm", "trtllm-engine needs an image with TensorRT-LLM <= 1.2.x (image.trtllm is empty)"
        )
    _check_thinking(profile)
    _check_cuda_graphs(profile)
    if not _FINGERPRINT.match(profile["fingerprint"]):
        raise ProfileError("fingerprint", f"must be a sha256 hex digest, got {profile['fingerprint']!r} ({WHAT_TO_DO})")
    return profile


def _check_thinking(profile):
    """model.thinking (absent in profiles planned before it existed): {mode, template_opens_think}."""
    t = get(profile, "model.thinking", required=False)
    if t is None:
        return
    if not isinstance(t, dict) or t.get("mode") not in THINKING_MODES:
        raise ProfileError("model.thinking", "must be {{\"mode\": {}, \"template_opens_think\": bool}}, got {!r} ({})"
                           .format(" | ".join(THINKING_MODES), t, WHAT_TO_DO))
    opens = t.get("template_opens_think")
    if not isinstance(opens, bool) or (opens and t["mode"] != "always"):
        raise ProfileError("model.thinking.template_opens_think",
                           f"must be a bool, true only with mode always, got {opens!r} ({WHAT_TO_DO})")


def _check_checkpoint(profile):
    """model.checkpoint (only when the weights come from a pre-quantized checkpoint, not the base one)."""
    c = get(profile, "model.checkpoint", required=False)
    if c is None:
        return
    if not isinstance(c, dict):
        raise ProfileError("model.checkpoint", f"must be a mapping (key, hf_id, revision, precision, format), got {c!r} ({WHAT_TO_DO})")
    if profile["runtime"] != "trtllm-llmapi":
        raise ProfileError("model.checkpoint", f"is set for runtime {profile['runtime']}; only trtllm-llmapi loads a "
                                               "pre-quantized checkpoint (the other runtimes load the base one)")
    for key in ("key", "hf_id", "precision", "format"):
        if not isinstance(c.get(key), str) or not c[key]:
            raise ProfileError("model.checkpoint." + key, f"must be a non-empty string, got {c.get(key)!r} ({WHAT_TO_DO})")
    if c["format"] not in checkpoints.FORMATS:
        raise ProfileError("model.checkpoint.format", "is {!r}; known: {}".format(c["format"], ", ".join(sorted(checkpoints.FORMATS))))
    if c["precision"] != profile["precision"]["weights"]:
        raise ProfileError("model.checkpoint.precision", "is {} but precision.weights is {}: the checkpoint must carry "
                                                         "the planned weights ({})".format(c["precision"], profile["precision"]["weights"], WHAT_TO_DO))
    if not checkpoints.pinned(c.get("revision")):
        raise ProfileError("model.checkpoint.revision", checkpoints.unpinned_message(c) + ", then " + WHAT_TO_DO)


def _check_cuda_graphs(profile):
    """cuda_graphs (trtllm-llmapi only): the decode batch sizes TensorRT-LLM captures, ascending, up to max_batch_size."""
    cg = get(profile, "cuda_graphs", required=False)
    if cg is None:
        return
    if profile["runtime"] != "trtllm-llmapi":
        raise ProfileError("cuda_graphs", f"is set for runtime {profile['runtime']}; only trtllm-llmapi captures them")
    sizes = cg.get("batch_sizes") if isinstance(cg, dict) else None
    if (not isinstance(sizes, list) or not sizes or not all(isinstance(b, int) and not isinstance(b, bool) and b >= 1
                                                             for b in sizes) or sizes != sorted(set(sizes))):
        raise ProfileError("cuda_graphs.batch_sizes", f"must be ascending whole numbers >= 1, got {sizes!r} ({WHAT_TO_DO})")
    if sizes[-1] > profile["limits"]["max_batch_size"]:
        raise ProfileError("cuda_graphs.batch_sizes", "go up to {} but limits.max_batch_size is {}".format(
            sizes[-1], profile["limits"]["max_batch_size"]))
    if not isinstance(cg.get("enable_padding"), bool):
        raise ProfileError("cuda_graphs.enable_padding", f"must be a bool, got {cg.get('enable_padding')!r}")


def thinking(profile):
    """model.thinking: {"mode": switchable | never | always, "template_opens_think": bool} (docs/profile.md)."""
    t = get(profile, "model.thinking")
    _check_thinking(profile)
    return dict(t)


# --------------------------------------------------------------------------------------------
# The values every role and playbook reads from a profile (validated first).


def served_name(profile):
    """The name clients and the gateway use for the model."""
    return get(profile, "model.served_name")


def runtime(profile):
    return get(profile, "runtime")


def checkpoint(profile):
    """The checkpoint a serving host fetches and loads: {"key", "hf_id", "revision", "pre_quantized"}.

    The base model's own (model.key, model.hf_id, model.revision) unless the weights come from a pre-quantized
    checkpoint of it (model.checkpoint: trtllm-llmapi with fp8 or int4 weights), which then replaces it on disk.
    """
    c = get(profile, "model.checkpoint", required=False)
    if c is not None:
        return {"key": c.get("key"), "hf_id": c.get("hf_id"), "revision": c.get("revision"), "pre_quantized": True}
    return {"key": get(profile, "model.key"), "hf_id": get(profile, "model.hf_id", required=False),
            "revision": get(profile, "model.revision"), "pre_quantized": False}


def checkpoint_name(profile):
    """``<key>@<revision>`` of checkpoint(): the checkpoint's directory name in every model cache."""
    ckpt = checkpoint(profile)
    base = not ckpt["pre_quantized"]
    parts = []
    for dotted, value in (("model.key" if base else "model.checkpoint.key", ckpt["key"]),
                          ("model.revision" if base else "model.checkpoint.revision", ckpt["revision"])):
        if not isinstance(value, str) or not value or "/" in value or "@" in value or value.startswith("."):
            raise ProfileError(dotted, f"{value!r} cannot name a directory (no '/', '@', leading '.'); {WHAT_TO_DO}")
        parts.append(value)
    return "@".join(parts)


def checkpoint_dir(profile, models_dir=DEFAULT_MODELS_DIR):
    return posixpath.join(models_dir, checkpoint_name(profile))


def engine_dir(profile, engines_dir=DEFAULT_ENGINES_DIR):
    """``<engines_dir>/<fingerprint>``: where the engine of this profile lives on a host."""
    return posixpath.join(engines_dir, get(profile, "fingerprint"))


def derived(profile, models_dir=DEFAULT_MODELS_DIR, engines_dir=DEFAULT_ENGINES_DIR):
    """Everything the roles read from a profile, as one dict (the triton_fleet_profile module returns it)."""
    validate(profile)
    return {
        "name": profile["name"],
        "served_name": served_name(profile),
        "runtime": runtime(profile),
        "device": profile["device"],
        "image": profile["image"]["ref"],
        "fingerprint": profile["fingerprint"],
        "checkpoint_name": checkpoint_name(profile),
        "checkpoint_dir": checkpoint_dir(profile, models_dir),
        # the controller source's directory name and the repository the checkpoint comes from
        "checkpoint_key": checkpoint(profile)["key"],
        "checkpoint_hf_id": checkpoint(profile)["hf_id"],
        "pre_quantized": checkpoint(profile)["pre_quantized"],
        "engine_dir": engine_dir(profile, engines_dir),
        "build_required": profile["runtime"] == "trtllm-engine",
    }


def differences(stored, fresh, ignore=("reasons", "alternatives", "predicted")):
    """Dotted paths where two profiles differ (leaves only), sorted; ``ignore`` lists top-level keys to skip."""
    out = []

    def walk(a, b, prefix):
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b)):
                if not prefix and key in ignore:
                    continue
                walk(a.get(key), b.get(key), f"{prefix}.{key}" if prefix else key)
        elif a != b:
            out.append(prefix or "(profile)")

    walk(stored, fresh, "")
    return out
