"""Fingerprints: stable, order-independent, sensitive to build fields only."""

import copy
import json
import random

import pytest
from triton_fleet.fingerprint import BUILD_FIELDS, fingerprint
from triton_fleet.planner import plan


@pytest.fixture(scope="module")
def profile():
    return plan({"model": "qwen3-14b", "gpu_sku": "a100-80gb-sxm", "gpu_count": 1, "context_length": 8192,
                 "concurrency": 16})


def _shuffled(obj, rng):
    if isinstance(obj, dict):
        items = list(obj.items())
        rng.shuffle(items)
        return {k: _shuffled(v, rng) for k, v in items}
    return obj


def _set(p, dotted, value):
    node = p
    parts = dotted.split(".")
    for part in parts[:-1]:
        node = node[part]
    node[parts[-1]] = value


def _get(p, dotted):
    for part in dotted.split("."):
        p = p[part]
    return p


def test_stable_across_runs_and_orderings(profile):
    again = plan({"concurrency": 16, "context_length": 8192, "gpu_count": 1, "gpu_sku": "a100-80gb-sxm",
                  "model": "qwen3-14b"})
    assert again["fingerprint"] == profile["fingerprint"] == fingerprint(profile)
    rng = random.Random(7)
    for _ in range(5):
        assert fingerprint(_shuffled(copy.deepcopy(profile), rng)) == profile["fingerprint"]
    assert fingerprint(json.loads(json.dumps(profile))) == profile["fingerprint"]
    assert len(profile["fingerprint"]) == 64 and int(profile["fingerprint"], 16) >= 0


@pytest.mark.parametrize("field", BUILD_FIELDS)
def test_changes_with_every_build_field(profile, field):
    p = copy.deepcopy(profile)
    old = _get(p, field)
    new = old + 1 if isinstance(old, int) else (None if old is not None else "x")
    if isinstance(old, str):
        new = old + "-changed"
    _set(p, field, new)
    assert fingerprint(p) != profile["fingerprint"], field


@pytest.mark.parametrize("field,value", [
    ("kv_cache.free_gpu_mem_fraction", 0.5), ("model.served_name", "other"), ("group", "gpu_x"),
    ("log_level", "debug"), ("scheduler.max_queue_delay_microseconds", 100), ("reasons", []),
    ("predicted.decode_tokens_per_s_bs1", 1.0), ("name", "renamed"),
])
def test_unchanged_by_run_only_fields(profile, field, value):
    p = copy.deepcopy(profile)
    if "." in field:
        _set(p, field, value)
    else:
        p[field] = value
    assert fingerprint(p) == profile["fingerprint"]


def test_planner_output_changes_fingerprint_when_the_build_changes(profile):
    longer = plan({"model": "qwen3-14b", "gpu_sku": "a100-80gb-sxm", "gpu_count": 1, "context_length": 16384,
                   "concurrency": 16})
    assert longer["fingerprint"] != profile["fingerprint"]
    frac = plan({"model": "qwen3-14b", "gpu_sku": "a100-80gb-sxm", "gpu_count": 1, "context_length": 8192,
                 "concurrency": 16, "kv_cache_free_gpu_mem_fraction": 0.85})
    assert frac["fingerprint"] == profile["fingerprint"]


def test_rope_scaling_changes_fingerprint_only_when_set():
    import copy

    from triton_fleet.fingerprint import fingerprint

    base = {"schema_version": 1, "model": {"key": "qwen3-14b"}, "limits": {"max_seq_len": 131072}}
    yarn2 = copy.deepcopy(base)
    yarn2["model"]["rope_scaling"] = {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 32768}
    yarn4 = copy.deepcopy(yarn2)
    yarn4["model"]["rope_scaling"]["factor"] = 4.0
    explicit_none = copy.deepcopy(base)
    explicit_none["model"]["rope_scaling"] = None
    assert fingerprint(base) == fingerprint(explicit_none)
    assert len({fingerprint(base), fingerprint(yarn2), fingerprint(yarn4)}) == 3


@pytest.mark.parametrize("field", ["hf_id", "revision", "format"])
def test_the_pre_quantized_checkpoint_is_part_of_the_fingerprint(field):
    """Another pre-quantized checkpoint (repository, commit or format) is another served artifact."""
    p = json.loads((__import__("pathlib").Path(__file__).resolve().parents[1] / "fixtures" / "profiles" /
                    "h100-prequantized-fp8.json").read_text())
    assert fingerprint(p) == p["fingerprint"]
    other = copy.deepcopy(p)
    other["model"]["checkpoint"][field] += "-changed"
    assert fingerprint(other) != p["fingerprint"]


def test_profiles_without_a_pre_quantized_checkpoint_keep_their_fingerprint(profile):
    """model.checkpoint joins the fingerprint only when set: the fingerprint of a bf16 profile is what it was."""
    from triton_fleet.fingerprint import build_view
    assert not any(k.startswith("model.checkpoint") for k in build_view(profile))
    assert any(k.startswith("model.checkpoint") for k in build_view(json.loads(
        (__import__("pathlib").Path(__file__).resolve().parents[1] / "fixtures" / "profiles" /
         "h100-prequantized-fp8.json").read_text())))
