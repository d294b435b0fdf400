"""Model repository rendering for the three runtimes, against golden files.

Regenerate the goldens after an intended change with:
    TRITON_FLEET_UPDATE_GOLDEN=1 pytest tests/unit/test_model_repository.py
"""

import copy
import json
import os
from pathlib import Path

import pytest
from triton_fleet.model_repository import ProfileError, content_hash, render_repository
from triton_fleet.pbtxt import PbtxtError, validate

ROOT = Path(__file__).resolve().parents[2]
PROFILES = ROOT / "tests" / "fixtures" / "profiles"
GOLDEN = ROOT / "tests" / "golden" / "model_repository"
UPDATE = os.environ.get("TRITON_FLEET_UPDATE_GOLDEN") == "1"

# Stand-ins for the python model code the role passes in (their content is not rendered here).
MODEL_FILES = {
    "transformers": {"1/model.py": "# model\n", "1/generation_request.py": "# logic\n"},
    "trtllm-llmapi": {"1/model.py": "# llmapi model.py from TRT-LLM\n", "1/helpers.py": "# llmapi helpers.py\n"},
    "trtllm-engine": {
        "preprocessing/1/model.py": "# pre\n",
        "postprocessing/1/model.py": "# post\n",
        "tensorrt_llm_bls/1/model.py": "# bls\n",
        "tensorrt_llm_bls/1/lib/decode.py": "# bls lib decode\n",
        "tensorrt_llm_bls/1/lib/triton_decoder.py": "# bls lib triton_decoder\n",
    },
}
# golden directory -> (profile fixture, options). prod-gpu_*: the planner's profiles of inventories/prod's groups
# (tests/unit/test_prod_inventory.py keeps them current; test_upstream_conformance.py checks these goldens).
CASES = {
    "transformers": ("lab-cpu-transformers", {}),
    "trtllm-engine": ("a100-trtllm-engine", {"bls": True, "engine_dir": "/engine"}),
    "trtllm-llmapi": ("h100-trtllm-llmapi", {}),
    "trtllm-llmapi-prod-gpu_a10": ("prod-gpu_a10", {}),
    "trtllm-llmapi-prod-gpu_a100": ("prod-gpu_a100", {}),
    # fp8 weights from Qwen's own pre-quantized checkpoint (model.checkpoint): mounted at /checkpoint, named in the header
    "trtllm-llmapi-prequantized-fp8": ("h100-prequantized-fp8", {}),
}


def load(name):
    return json.loads((PROFILES / (name + ".json")).read_text())


def render(case, **over):
    name, opts = CASES[case]
    profile = load(name)
    opts = dict(opts, model_files=MODEL_FILES[profile["runtime"]], **over)
    return render_repository(profile, opts)


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_golden(case):
    repo = render(case)
    gdir = GOLDEN / case
    if UPDATE:
        for path, text in repo.items():
            (gdir / path).parent.mkdir(parents=True, exist_ok=True)
            (gdir / path).write_text(text)
    golden = {str(p.relative_to(gdir)): p.read_text() for p in gdir.rglob("*") if p.is_file()}
    assert sorted(golden) == sorted(repo)
    for path, text in repo.items():
        assert text == golden[path], path


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_config_parses_and_names_match_directories(case):
    repo = render(case)
    configs = [p for p in repo if p.endswith("config.pbtxt")]
    assert configs
    for path in configs:
        msg = validate(repo[path], expect_name=path.split("/")[0])
        assert msg.name == path.split("/")[0]


def test_trtllm_engine_layout_and_parameters_from_profile():
    profile = load("a100-trtllm-engine")
    repo = render("trtllm-engine")
    assert repo.entry_model == "qwen3-14b"
    assert repo.load_models == ["qwen3-14b", "tensorrt_llm_bls"]
    llm = validate(repo["tensorrt_llm/config.pbtxt"])
    assert llm.backend == "tensorrtllm"
    assert not llm.platform
    p = {k: v.string_value for k, v in llm.parameters.items()}
    assert p["gpt_model_type"] == "inflight_fused_batching"
    assert p["gpt_model_path"] == "/engine"
    assert p["kv_cache_free_gpu_mem_fraction"] == str(profile["kv_cache"]["free_gpu_mem_fraction"])
    assert p["enable_kv_cache_reuse"] == "true"
    assert p["enable_chunked_context"] == "true"
    assert p["batch_scheduler_policy"] == "guaranteed_no_evict"
    assert p["exclude_input_in_output"] == "true"
    assert p["tokenizer_dir"] == "/checkpoint"
    assert p["gpu_device_ids"] == "0"
    assert llm.model_transaction_policy.decoupled
    assert llm.max_batch_size == profile["limits"]["max_batch_size"]
    ens = validate(repo["qwen3-14b/config.pbtxt"])
    assert ens.platform == "ensemble"
    assert [s.model_name for s in ens.ensemble_scheduling.step] == ["preprocessing", "tensorrt_llm", "postprocessing"]
    names = {t.name for t in ens.input}
    assert {"text_input", "max_tokens", "stream", "temperature", "top_p", "top_k", "stop_words", "seed"} <= names
    assert [t.name for t in ens.output] == ["text_output"]
    pre = validate(repo["preprocessing/config.pbtxt"])
    assert pre.instance_group[0].count == 5


def test_trtllm_engine_follows_profile_changes():
    profile = load("a100-trtllm-engine")
    profile["kv_cache"]["free_gpu_mem_fraction"] = 0.75
    profile["kv_cache"]["enable_block_reuse"] = False
    profile["scheduler"]["batch_scheduler_policy"] = "max_utilization"
    profile["scheduler"]["max_queue_delay_microseconds"] = 500
    profile["limits"]["max_batch_size"] = 32
    repo = render_repository(profile, {"model_files": MODEL_FILES["trtllm-engine"]})
    llm = validate(repo["tensorrt_llm/config.pbtxt"])
    p = {k: v.string_value for k, v in llm.parameters.items()}
    assert p["kv_cache_free_gpu_mem_fraction"] == "0.75"
    assert p["enable_kv_cache_reuse"] == "false"
    assert p["batch_scheduler_policy"] == "max_utilization"
    assert llm.dynamic_batching.max_queue_delay_microseconds == 500
    assert llm.max_batch_size == 32
    assert "tensorrt_llm_bls/config.pbtxt" not in repo  # bls off by default


def test_llmapi_model_yaml():
    repo = render("trtllm-llmapi")
    text = repo["qwen3-32b/1/model.yaml"]
    assert "tensor_parallel_size: 2\n" in text
    assert 'backend: "pytorch"' in text
    assert "triton_config:\n  max_batch_size: 0\n  decoupled: true\n" in text
    assert "free_gpu_memory_fraction: 0.85" in text
    assert 'dtype: "fp8"' in text  # profile kv_cache fp8
    msg = validate(repo["qwen3-32b/config.pbtxt"])
    assert msg.backend == "python"
    assert repo.load_models == ["qwen3-32b"]


def test_transformers_cpu_and_gpu_instances():
    repo = render("transformers")
    msg = validate(repo["qwen3-tiny/config.pbtxt"])
    assert msg.instance_group[0].kind == 2  # KIND_CPU
    assert msg.model_transaction_policy.decoupled
    assert msg.parameters["dtype"].string_value == "float32"
    assert msg.parameters["max_output_len"].string_value == "256"
    assert {"text_input", "max_tokens", "stream", "temperature", "top_p", "top_k", "stop_words", "random_seed", "seed"} <= {
        t.name for t in msg.input
    }
    assert repo["qwen3-tiny/1/model.py"] == "# model\n"
    gpu = load("a100-trtllm-engine")
    repo = render_repository(gpu, {"model_files": MODEL_FILES["transformers"]}, runtime="transformers")
    msg = validate(repo["qwen3-14b/config.pbtxt"])
    assert msg.instance_group[0].kind == 1  # KIND_GPU
    assert list(msg.instance_group[0].gpus) == [0]
    assert msg.parameters["dtype"].string_value == "bfloat16"


def test_content_hash_changes_with_content():
    a = render("transformers")
    b = render("transformers")
    assert content_hash(a) == content_hash(b)
    c = dict(a)
    c["qwen3-tiny/1/model.py"] = "# changed\n"
    assert content_hash(c) != content_hash(a)


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda p: p.pop("runtime"), "runtime"),
        (lambda p: p.update(runtime="vllm"), "runtime"),
        (lambda p: p["limits"].update(max_batch_size=0), "limits.max_batch_size"),
        (lambda p: p["limits"].update(max_input_len=9000), "limits.max_input_len"),
        (lambda p: p["kv_cache"].update(free_gpu_mem_fraction=1.5), "kv_cache.free_gpu_mem_fraction"),
        (lambda p: p["parallel"].update(gpu_device_ids=["0,1"]), "parallel.gpu_device_ids"),
        (lambda p: p["image"].update(trtllm=None), "image.trtllm"),
        (lambda p: p["model"].update(served_name="tensorrt_llm"), "model.served_name"),
        (lambda p: p["limits"].update(max_seq_len="8192"), "limits.max_seq_len"),
        (lambda p: p.update(schema_version=2), "schema_version"),
    ],
)
def test_bad_profiles_name_the_field(mutate, field):
    profile = copy.deepcopy(load("a100-trtllm-engine"))
    mutate(profile)
    with pytest.raises(ProfileError) as exc:
        render_repository(profile, {"model_files": MODEL_FILES["trtllm-engine"]})
    assert exc.value.field == field


def test_cpu_profile_cannot_use_trtllm():
    with pytest.raises(ProfileError) as exc:
        render_repository(load("lab-cpu-transformers"), runtime="trtllm-llmapi")
    assert exc.value.field == "runtime"


def test_missing_model_code_is_reported():
    with pytest.raises(ProfileError) as exc:
        render_repository(load("lab-cpu-transformers"))
    assert "model.py" in str(exc.value)


def test_model_files_cannot_escape_or_override_configs():
    with pytest.raises(ProfileError):
        render_repository(load("lab-cpu-transformers"), {"model_files": {"../x": ""}})
    with pytest.raises(ProfileError):
        render_repository(
            load("lab-cpu-transformers"), {"model_files": {"1/model.py": "", "qwen3-tiny/config.pbtxt": ""}}
        )


def test_unknown_option_refused():
    with pytest.raises(ProfileError) as exc:
        render_repository(load("lab-cpu-transformers"), {"checkpoint": "/x"})
    assert "checkpoint" in str(exc.value)


def test_invalid_rendered_config_is_a_pbtxt_error(monkeypatch):
    import triton_fleet.model_repository as mr

    orig = mr._transformers_config

    def broken(profile, opts):
        cfg = orig(profile, opts)
        cfg["default_timeout_microseconds"] = 1
        return cfg

    monkeypatch.setattr(mr, "_transformers_config", broken)
    with pytest.raises(PbtxtError) as exc:
        render("transformers")
    assert exc.value.field == "default_timeout_microseconds"


def test_a_pre_quantized_checkpoint_is_what_model_yaml_loads_and_the_header_names():
    repo = render("trtllm-llmapi-prequantized-fp8")
    yaml_text = repo["qwen3-32b/1/model.yaml"]
    assert "\n# checkpoint: Qwen/Qwen3-32B-FP8@aa55da1ecc13d006e8b8e4f54579b1ea8c3db2df (pre-quantized fp8, fp8-block128)\n" \
        in yaml_text
    assert '\nmodel: "/checkpoint"\n' in yaml_text and '  dtype: "fp8"\n' in yaml_text
    assert "checkpoint: Qwen/Qwen3-32B-FP8@" in repo["qwen3-32b/config.pbtxt"]
    # a profile without one names none
    assert "checkpoint:" not in render("trtllm-llmapi-prod-gpu_a100")["qwen3-14b/1/model.yaml"]
