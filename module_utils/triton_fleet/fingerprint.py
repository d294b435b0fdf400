"""Profile fingerprints: the identity of a built serving artifact.

A fingerprint is the sha256 of the canonical JSON of the profile fields that change
what gets built (weights layout, engine, limits baked into an engine). Fields that only
change how a server runs (log level, KV fraction, served name, ports) are left out, so
changing them never triggers a rebuild.
"""

import hashlib
import json

from .profile import get

# Dotted paths into the profile. Order does not matter: output is canonicalised.
BUILD_FIELDS = (
    "schema_version",
    "model.key",
    "model.hf_id",
    "model.revision",
    "model.architecture",
    "runtime",
    "device",
    "gpu.sku",
    "gpu.compute_capability",
    "precision.dtype",
    "precision.weights",
    "precision.kv_cache",
    "parallel.tp",
    "parallel.pp",
    "limits.max_batch_size",
    "limits.max_input_len",
    "limits.max_seq_len",
    "limits.max_num_tokens",
    "limits.max_beam_width",
    "kv_cache.tokens_per_block",
    "image.ref",
    "image.trtllm",
)

# Build-relevant fields that most profiles lack. They join the fingerprint only when set, so adding
# one here never changes the fingerprint of a profile that does not use it (no needless rebuilds).
OPTIONAL_BUILD_FIELDS = (
    "model.rope_scaling",  # YaRN changes the positions baked into an engine
    "parallel.ep",  # MoE only: expert parallelism changes how the checkpoint is split
    # trtllm-llmapi with quantized weights: the pre-quantized checkpoint loaded instead of the base one
    "model.checkpoint.hf_id",
    "model.checkpoint.revision",
    "model.checkpoint.format",
)


def build_view(profile):
    """The subset of a profile that the fingerprint covers, as a flat dict."""
    view = {path: get(profile, path, required=False) for path in BUILD_FIELDS}
    for path in OPTIONAL_BUILD_FIELDS:
        value = get(profile, path, required=False)
        if value is not None:
            view[path] = value
    return view


def canonical_json(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def fingerprint(profile):
    """sha256 hex digest of the build-relevant fields of ``profile``."""
    return hashlib.sha256(canonical_json(build_view(profile)).encode("ascii")).hexdigest()
