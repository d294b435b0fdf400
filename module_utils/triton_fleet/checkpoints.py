"""Pre-quantized checkpoints: the one a quantized plan loads, and whether the runtime can load it at all.

TensorRT-LLM's PyTorch backend (runtime `trtllm-llmapi`) does not quantize at load: "TensorRT LLM can directly run
pre-quantized models generated with the NVIDIA TensorRT Model Optimizer" (`docs/source/features/quantization.md`,
"Running Pre-quantized Models"). It reads a checkpoint's quantization from Model Optimizer's `hf_quant_config.json`,
or from config.json's `quantization_config` for `quant_method: fp8` with `weight_block_size` (FP8 block scales)
and `mxfp4`; any other `quant_method` stops the load with "Unsupported quantization_config"
(`tensorrt_llm/llmapi/llm_utils.py`, `ModelLoader._update_from_hf_quant_config`, which `CachedModelLoader` runs for
the pytorch backend). So Qwen's own `-FP8` checkpoints load (as FP8_BLOCK_SCALES) and its `-AWQ` (AutoAWQ) and
`-GPTQ` checkpoints do not. Which GPUs run each recipe is upstream's hardware support matrix (same file): FP8
block scaling on Hopper and Blackwell SM100/SM103 only, FP8 per tensor on Ada, Hopper and Blackwell, W4A16 AWQ on
Ampere, Ada and Hopper. Sources in docs/sources.md.

The operator names checkpoints by precision in `triton_fleet_quantized_checkpoints`
(`{precision: {repo, revision, format}}`): `revision` pins one of the catalog's (model_catalog.QUANTIZED), `repo`
and `format` name another one (a Model Optimizer export of one's own). Pure Python, no Ansible import; runs on the
controller and on managed hosts (Python 3.11+).
"""

import re

from . import gpu_catalog, model_catalog

# The planner's precisions that a pre-quantized checkpoint carries (memory_model.WEIGHT_PRECISIONS).
QUANTIZED_PRECISIONS = ("fp8", "int4_awq", "int4_gptq")

# GPU families of upstream's hardware support matrix, by compute capability [low, high).
_FAMILIES = {
    "Ampere": ((8, 0), (8, 9)),
    "Ada": ((8, 9), (9, 0)),
    "Hopper": ((9, 0), (10, 0)),
    "Blackwell SM100/SM103": ((10, 0), (11, 0)),
    "Blackwell SM120": ((12, 0), (13, 0)),
}

# On-disk formats: the precision each carries, how a reader recognises it, and the GPU families TensorRT-LLM's
# PyTorch backend loads it on (None: it refuses the format).
FORMATS = {
    "fp8-block128": {
        "precision": "fp8",
        "what": "FP8 (E4M3) weights with a scale per 128x128 block (config.json quantization_config: quant_method "
                "fp8, weight_block_size [128, 128])",
        "llmapi": "FP8_BLOCK_SCALES",
        "families": ("Hopper", "Blackwell SM100/SM103"),
    },
    "modelopt-fp8": {
        "precision": "fp8",
        "what": "a TensorRT Model Optimizer export with hf_quant_config.json quant_algo FP8 (per-tensor scales)",
        "llmapi": "FP8",
        "families": ("Ada", "Hopper", "Blackwell SM100/SM103", "Blackwell SM120"),
    },
    "modelopt-w4a16-awq": {
        "precision": "int4_awq",
        "what": "a TensorRT Model Optimizer export with hf_quant_config.json quant_algo W4A16_AWQ",
        "llmapi": "W4A16_AWQ",
        "families": ("Ampere", "Ada", "Hopper"),
    },
    "autoawq-gemm": {
        "precision": "int4_awq",
        "what": "AutoAWQ (config.json quantization_config: quant_method awq, version gemm)",
        "llmapi": None,
        "families": (),
    },
    "gptq": {
        "precision": None,  # int4_gptq or int8_gptq, by its bits
        "what": "GPTQ (config.json quantization_config: quant_method gptq)",
        "llmapi": None,
        "families": (),
    },
}

VARIABLE = "triton_fleet_quantized_checkpoints"
ENTRY_KEYS = ("repo", "revision", "format")
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


class CheckpointError(ValueError):
    """An operator-facing error in the checkpoint settings: says what is wrong and what to do."""


def pinned(revision):
    """Whether `revision` pins one state of a repository: a full commit hash (a branch or a tag can move)."""
    return isinstance(revision, str) and bool(_COMMIT.match(revision))


def family(compute_capability):
    """The hardware-matrix family of a compute capability ("8.6" -> "Ampere"), or None below Ampere."""
    cc = gpu_catalog.compute_capability_tuple(compute_capability)
    return next((name for name, (low, high) in _FAMILIES.items() if low <= cc < high), None)


def key_of(repo):
    """The checkpoint's name in every model cache: the repository's name, lower case (Qwen/Qwen3-14B-FP8 -> qwen3-14b-fp8)."""
    return repo.rsplit("/", 1)[-1].lower()


def parse(value):
    """The operator's map, checked: {precision: {"repo", "revision", "format"}} (keys it lacks are absent).

    Raises CheckpointError naming the bad entry. A revision that is given must be pinned (a commit): `main` would
    let the checkpoint change under a fleet that believes it runs one state.
    """
    if value in (None, "", {}):
        return {}
    if not isinstance(value, dict):
        raise CheckpointError(f"{VARIABLE} must be a mapping of precision -> {{repo, revision, format}}, got {value!r}")
    out = {}
    for precision, entry in value.items():
        where = f"{VARIABLE}.{precision}"
        if precision not in QUANTIZED_PRECISIONS:
            raise CheckpointError(f"{where}: {precision!r} is not a precision a pre-quantized checkpoint carries; use "
                                  "one of " + ", ".join(QUANTIZED_PRECISIONS))
        if not isinstance(entry, dict):
            raise CheckpointError(f"{where} must be a mapping with revision (and repo, format for a repository the "
                                  f"catalog does not know), got {entry!r}")
        unknown = sorted(set(entry) - set(ENTRY_KEYS))
        if unknown:
            raise CheckpointError(f"{where}: unknown key(s) {', '.join(map(str, unknown))}; known: {', '.join(ENTRY_KEYS)}")
        clean = {k: entry[k] for k in ENTRY_KEYS if entry.get(k) not in (None, "")}
        repo = clean.get("repo")
        if repo is not None and (not isinstance(repo, str) or not _REPO.match(repo)):
            raise CheckpointError(f"{where}.repo must be a repository id owner/name (as on Hugging Face), got {repo!r}")
        rev = clean.get("revision")
        if rev is not None and not pinned(rev):
            raise CheckpointError(f"{where}.revision {rev!r} is not pinned: give the full commit hash (40 hex "
                                  "characters) of the checkpoint's repository; a branch or a tag can move")
        fmt = clean.get("format")
        if fmt is not None:
            if fmt not in FORMATS:
                raise CheckpointError(f"{where}.format {fmt!r} is unknown; known: {', '.join(sorted(FORMATS))}")
            if FORMATS[fmt]["precision"] not in (None, precision):
                raise CheckpointError(f"{where}.format {fmt} carries {FORMATS[fmt]['precision']} weights, not {precision}")
        out[precision] = clean
    return out


def check(model, operator):
    """Raise CheckpointError for an operator entry that names a checkpoint wrongly, whatever the plan picks.

    A repository the catalog knows under another format, one it does not know given without its format, or one
    whose format this runtime never loads: each is a mistake in the inventory even for a group that plans no
    quantized weights. An entry that only pins a revision of Qwen's own checkpoint is checked when it is used.
    """
    by_repo = {c["hf_id"]: c for c in official(model)}
    for precision, entry in sorted((operator or {}).items()):
        where = f"{VARIABLE}.{precision}"
        repo, fmt = entry.get("repo"), entry.get("format")
        known = by_repo.get(repo) if repo else None
        if known and fmt and fmt != known["format"]:
            raise CheckpointError(f"{where}.format is {fmt} but {repo} is {known['format']} ({FORMATS[known['format']]['what']})")
        if repo and not known and not fmt:
            raise CheckpointError(f"{where}.repo {repo} is not a checkpoint the catalog knows: give its format too "
                                  f"(one of {', '.join(sorted(k for k, f in FORMATS.items() if f['llmapi']))})")
        if repo and not FORMATS[fmt or known["format"]]["llmapi"]:
            raise CheckpointError("{}: {} is {}, which TensorRT-LLM's PyTorch backend refuses (\"Unsupported "
                                  "quantization_config\"): name a TensorRT Model Optimizer export instead (format {})"
                                  .format(where, repo, FORMATS[fmt or known["format"]]["what"],
                                          "modelopt-w4a16-awq" if precision == "int4_awq" else "modelopt-fp8"))


def official(model):
    """Qwen's own pre-quantized checkpoints of `model` (planner facts): only when its weights are the catalog's.

    A model whose hf_id differs from the catalog's (a fine-tune recorded under a catalog key) has none: Qwen's
    quantized checkpoints are quantizations of Qwen's weights.
    """
    base = model_catalog.MODELS.get(str(model.get("key") or "").lower(), {}).get("hf_id")
    if not base or model.get("hf_id") != base:
        return []
    return model_catalog.quantized_checkpoints(model["key"])


def _where_loads(fmt):
    return ", ".join(FORMATS[fmt]["families"])


def resolve(model, precision, compute_capability, operator=None):
    """(checkpoint, why): the pre-quantized checkpoint trtllm-llmapi would load for `precision` on this GPU.

    checkpoint: {"key", "hf_id", "revision" (None until pinned), "precision", "format", "source": catalog |
    operator}, or None when there is none it can load here; `why` says which and why (for the plan's reasons, or
    for the precision's rejection). `operator` is the parsed map (parse()). Raises CheckpointError when the operator
    named a checkpoint that this runtime can never load, or one whose format the catalog contradicts.
    """
    entry = (operator or {}).get(precision, {})
    mine = [c for c in official(model) if c["precision"] == precision]
    by_repo = {c["hf_id"]: c for c in official(model)}
    where = f"{VARIABLE}.{precision}"
    repo = entry.get("repo") or (mine[0]["hf_id"] if mine else None)
    if repo is None:
        return None, ("no pre-quantized {} checkpoint of {}: Qwen publishes none and {} names none (TensorRT-LLM's "
                      "PyTorch backend does not quantize at load)".format(precision, model["key"], where))
    fmt = entry.get("format")
    known = by_repo.get(repo)
    if known and fmt and fmt != known["format"]:
        raise CheckpointError(f"{where}.format is {fmt} but {repo} is {known['format']} ({FORMATS[known['format']]['what']})")
    fmt = fmt or (known or {}).get("format")
    if fmt is None:
        raise CheckpointError(f"{where}.repo {repo} is not a checkpoint the catalog knows: give its format too "
                              f"(one of {', '.join(sorted(k for k, f in FORMATS.items() if f['llmapi']))})")
    if FORMATS[fmt]["precision"] is not None and FORMATS[fmt]["precision"] != precision:
        raise CheckpointError(f"{where}: {repo} carries {FORMATS[fmt]['precision']} weights, not {precision}")
    source = "operator" if entry.get("repo") else "catalog"
    if not FORMATS[fmt]["llmapi"]:
        why = ("{} is {}, which TensorRT-LLM's PyTorch backend refuses (\"Unsupported quantization_config\"; it reads "
               "Model Optimizer exports and FP8 block-scaled checkpoints): export {} with TensorRT Model Optimizer "
               "and name it in {} (repo, revision, format: {})".format(
                   repo, FORMATS[fmt]["what"], model.get("hf_id") or model["key"], where,
                   "modelopt-w4a16-awq" if precision == "int4_awq" else "modelopt-fp8"))
        if source == "operator":
            raise CheckpointError(where + ": " + why)
        return None, why
    fam = family(compute_capability)
    if fam not in FORMATS[fmt]["families"]:
        return None, "{} ({}) loads on {} only (TensorRT-LLM hardware support matrix: {}); compute capability {} is {}".format(
            repo, fmt, _where_loads(fmt), FORMATS[fmt]["llmapi"], compute_capability, fam or "below Ampere")
    ckpt = {"key": key_of(repo), "hf_id": repo, "revision": entry.get("revision"), "precision": precision,
            "format": fmt, "source": source}
    why = "{} ({}: {}), {}, loaded as {} on {}".format(
        repo, fmt, FORMATS[fmt]["what"], "Qwen's own {} of {}".format(precision, model["hf_id"]) if source == "catalog"
        else f"named in {where}", FORMATS[fmt]["llmapi"], _where_loads(fmt))
    return ckpt, why


def unpinned_message(profile_checkpoint):
    """What to do when a plan's checkpoint has no pinned revision (the preflight refuses such a plan)."""
    c = profile_checkpoint
    return ("the pre-quantized checkpoint {} ({} weights) has no pinned revision: set {}.{}.revision to the commit "
            "of {} to serve (its full hash, 40 hex characters)".format(c["hf_id"], c["precision"], VARIABLE,
                                                                       c["precision"], c["hf_id"]))
