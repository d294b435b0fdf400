"""module_utils/triton_fleet/profile.py and library/triton_fleet_profile.py: one schema, one set of derived values."""

import copy
import json
from pathlib import Path

import pytest
import triton_fleet_profile as mod
from ansible.module_utils.triton_fleet import profile as schema
from ansible.module_utils.triton_fleet.fingerprint import fingerprint
from ansible.module_utils.triton_fleet.planner import plan

ROOT = Path(__file__).resolve().parents[2]
PROFILES = ROOT / "tests" / "fixtures" / "profiles"


def load(name):
    return json.loads((PROFILES / f"{name}.json").read_text())


@pytest.mark.parametrize("name", ["a100-trtllm-engine", "h100-trtllm-llmapi", "lab-cpu-transformers",
                                  "h100-prequantized-fp8"])
def test_fixtures_are_valid(name):
    assert schema.validate(load(name))["name"]


# What tests/fixtures/profiles/h100-prequantized-fp8.json was planned from (model_artifacts' Molecule scenario
# fetches its checkpoint): Qwen3-32B and its own FP8 checkpoint at commits of their repositories.
PREQUANTIZED_REQUEST = {"model": "qwen3-32b", "model_revision": "9216db5781bf21249d130ec9da846c4624c16137",
                        "gpu_sku": "h100-sxm", "gpu_count": 1, "context_length": 8192, "concurrency": 8,
                        "group": "gpu_h100",
                        "quantized_checkpoints": {"fp8": {"revision": "aa55da1ecc13d006e8b8e4f54579b1ea8c3db2df"}}}


def test_the_pre_quantized_fixture_is_the_planners_output():
    assert load("h100-prequantized-fp8") == plan(PREQUANTIZED_REQUEST)


def test_a_pre_quantized_checkpoint_replaces_the_base_one_on_disk():
    p = load("h100-prequantized-fp8")
    assert schema.checkpoint(p) == {"key": "qwen3-32b-fp8", "hf_id": "Qwen/Qwen3-32B-FP8",
                                    "revision": "aa55da1ecc13d006e8b8e4f54579b1ea8c3db2df", "pre_quantized": True}
    d = schema.derived(p, "/m", "/e")
    assert d["checkpoint_name"] == "qwen3-32b-fp8@aa55da1ecc13d006e8b8e4f54579b1ea8c3db2df"
    assert d["checkpoint_dir"] == "/m/qwen3-32b-fp8@aa55da1ecc13d006e8b8e4f54579b1ea8c3db2df"
    assert (d["checkpoint_key"], d["checkpoint_hf_id"], d["pre_quantized"]) == ("qwen3-32b-fp8", "Qwen/Qwen3-32B-FP8", True)
    # the served model is still the base model
    assert (d["served_name"], p["model"]["key"], p["model"]["hf_id"]) == ("qwen3-32b", "qwen3-32b", "Qwen/Qwen3-32B")
    base = schema.derived(load("lab-cpu-transformers"), "/m", "/e")
    assert (base["checkpoint_key"], base["checkpoint_hf_id"], base["pre_quantized"]) == ("qwen3-tiny", "triton-fleet/qwen3-tiny", False)


@pytest.mark.parametrize(
    ("mutate", "field", "words"),
    [
        (lambda c: c.update(revision=None), "model.checkpoint.revision",
         ["has no pinned revision", "triton_fleet_quantized_checkpoints.fp8.revision", "preflight"]),
        (lambda c: c.update(revision="main"), "model.checkpoint.revision", ["has no pinned revision"]),
        (lambda c: c.update(precision="int4_awq"), "model.checkpoint.precision", ["precision.weights is fp8"]),
        (lambda c: c.update(format="safetensors"), "model.checkpoint.format", ["known:"]),
        (lambda c: c.update(key="a/b"), "model.checkpoint.key", ["cannot name a directory"]),
        (lambda c: c.pop("hf_id"), "model.checkpoint.hf_id", ["non-empty string"]),
    ],
)
def test_the_checkpoint_is_checked(mutate, field, words):
    p = load("h100-prequantized-fp8")
    mutate(p["model"]["checkpoint"])
    with pytest.raises(schema.ProfileError) as exc:
        schema.validate(p)
    assert exc.value.field == field
    for w in words:
        assert w in str(exc.value)


def test_only_the_llmapi_runtime_loads_a_pre_quantized_checkpoint():
    p = load("h100-prequantized-fp8")
    p["runtime"] = "trtllm-engine"
    with pytest.raises(schema.ProfileError, match="only trtllm-llmapi loads a pre-quantized checkpoint") as exc:
        schema.validate(p)
    assert exc.value.field == "model.checkpoint"


def test_planner_output_is_valid():
    p = plan({"model": "qwen3-14b", "gpu_sku": "a100-80gb-sxm", "gpu_count": 1, "context_length": 8192,
              "concurrency": 16})
    assert schema.validate(p) is p
    assert p["fingerprint"] == fingerprint(p)


def test_get_walks_dotted_paths():
    p = load("a100-trtllm-engine")
    assert schema.get(p, "model.served_name") == p["model"]["served_name"]
    assert schema.get(p, "model.nope", required=False) is None
    with pytest.raises(schema.ProfileError) as exc:
        schema.get(p, "limits.nope")
    assert exc.value.field == "limits.nope"
    assert "preflight" in str(exc.value)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda p: p["model"].pop("served_name"), "model.served_name"),
        (lambda p: p["model"].update(key=""), "model.key"),
        (lambda p: p["model"].update(revision="a/b"), "model.revision"),
        (lambda p: p.update(runtime="vllm"), "runtime"),
        (lambda p: p.update(device="tpu"), "device"),
        (lambda p: p["parallel"].update(tp=True), "parallel.tp"),
        (lambda p: p["parallel"].update(gpu_device_ids=["0,1"]), "parallel.gpu_device_ids"),
        (lambda p: p["limits"].update(max_input_len=99999), "limits.max_input_len"),
        (lambda p: p["kv_cache"].update(free_gpu_mem_fraction=1.5), "kv_cache.free_gpu_mem_fraction"),
        (lambda p: p.update(fingerprint="abc"), "fingerprint"),
        (lambda p: p["image"].pop("ref"), "image.ref"),
        (lambda p: p.update(schema_version=2), "schema_version"),
        (lambda p: p["model"].update(thinking={"mode": "sometimes", "template_opens_think": False}), "model.thinking"),
        (lambda p: p["model"].update(thinking={"mode": "never", "template_opens_think": True}),
         "model.thinking.template_opens_think"),
        (lambda p: p.update(cuda_graphs={"batch_sizes": [1], "enable_padding": True}), "cuda_graphs"),
    ],
)
def test_validate_names_the_bad_field(mutate, field):
    p = copy.deepcopy(load("a100-trtllm-engine"))
    mutate(p)
    with pytest.raises(schema.ProfileError) as exc:
        schema.validate(p)
    assert exc.value.field == field
    assert field in str(exc.value)


@pytest.mark.parametrize(
    ("graphs", "field"),
    [
        ({"batch_sizes": [4, 2], "enable_padding": True}, "cuda_graphs.batch_sizes"),
        ({"batch_sizes": [1, 2, 16], "enable_padding": True}, "cuda_graphs.batch_sizes"),  # past max_batch_size 8
        ({"batch_sizes": [], "enable_padding": True}, "cuda_graphs.batch_sizes"),
        ({"batch_sizes": [1], "enable_padding": "yes"}, "cuda_graphs.enable_padding"),
    ],
)
def test_cuda_graphs_are_checked(graphs, field):
    p = load("prod-gpu_a10")
    assert schema.validate(p)["cuda_graphs"]["batch_sizes"] == [1, 2, 4, 8]
    p["cuda_graphs"] = graphs
    with pytest.raises(schema.ProfileError) as exc:
        schema.validate(p)
    assert exc.value.field == field


def test_thinking_is_read_from_the_profile():
    assert schema.thinking(load("prod-gpu_a100")) == {"mode": "switchable", "template_opens_think": False}
    p = plan({"model": "qwen3-4b-thinking-2507", "gpu_sku": "l4", "gpu_count": 1, "context_length": 32768,
              "concurrency": 1})
    assert schema.thinking(schema.validate(p)) == {"mode": "always", "template_opens_think": True}
    with pytest.raises(schema.ProfileError, match="model.thinking") as exc:
        schema.thinking(load("a100-trtllm-engine"))   # planned before the field existed: re-run the preflight
    assert "preflight" in str(exc.value)


def test_not_a_mapping():
    with pytest.raises(schema.ProfileError, match="must be a mapping"):
        schema.validate(["x"])


def test_derived_values_come_from_the_profile():
    p = load("lab-cpu-transformers")
    d = schema.derived(p, "/m", "/e")
    assert d["served_name"] == "qwen3-tiny"
    assert d["runtime"] == "transformers"
    assert d["checkpoint_name"] == "qwen3-tiny@seed-1234"
    assert d["checkpoint_dir"] == "/m/qwen3-tiny@seed-1234"
    assert d["engine_dir"] == "/e/" + p["fingerprint"]
    assert d["build_required"] is False
    assert schema.checkpoint_dir(p) == schema.DEFAULT_MODELS_DIR + "/qwen3-tiny@seed-1234"


def test_differences_lists_leaves_and_ignores_explanations():
    a = load("lab-cpu-transformers")
    b = copy.deepcopy(a)
    b["reasons"] = ["other"]
    b["predicted"]["kv_bytes_per_gpu"] = 7
    assert schema.differences(a, b) == []
    b["model"]["served_name"] = "other"
    b["limits"]["max_batch_size"] = 9
    assert schema.differences(a, b) == ["limits.max_batch_size", "model.served_name"]


# ---- the module


def test_module_returns_the_derived_values():
    p = load("a100-trtllm-engine")
    r = mod.run({"profile": p, "models_dir": "/m", "engines_dir": "/e", "stage": "triton"})
    assert r["checkpoint_dir"] == "/m/{}@{}".format(p["model"]["key"], p["model"]["revision"])
    assert r["engine_dir"] == "/e/" + p["fingerprint"]
    assert r["build_required"] is True
    assert r["profile"] is p


@pytest.mark.parametrize("given", [None, {}])
def test_module_without_profile_names_preflight(given):
    with pytest.raises(mod.StageError, match="preflight") as exc:
        mod.run({"profile": given, "stage": "the triton stage"})
    assert "the triton stage" in str(exc.value)


def test_module_bad_profile_names_field_and_stage():
    p = load("lab-cpu-transformers")
    p["runtime"] = "trtllm-engine"
    with pytest.raises(mod.StageError, match=r"profile field runtime: .*asked by engines"):
        mod.run({"profile": p, "stage": "engines"})


def test_module_reads_back_and_compares(tmp_path):
    p = load("lab-cpu-transformers")
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(p))
    assert mod.run({"path": str(path), "expected": p})["served_name"] == "qwen3-tiny"
    fresh = copy.deepcopy(p)
    fresh["limits"]["max_batch_size"] = 8
    with pytest.raises(mod.StageError, match=r"differs from a fresh plan in limits.max_batch_size.*--tags preflight"):
        mod.run({"path": str(path), "expected": fresh, "stage": "triton"})


def test_module_missing_or_broken_file(tmp_path):
    with pytest.raises(mod.StageError, match="has not run on this host.*--tags preflight"):
        mod.run({"path": str(tmp_path / "none.json"), "stage": "triton"})
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(mod.StageError, match="cannot be read"):
        mod.run({"path": str(bad)})
