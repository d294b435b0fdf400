"""Profile -> TRT-LLM 1.2.1 command lines, checked flag by flag against upstream's argparse facts.

The facts (tests/conformance/upstream-trtllm-1.2.1/*.json) were recorded from TensorRT-LLM's own files;
test_upstream_conformance.py holds the module's tables against them, these tests hold the emitted lines.
"""

import json
from pathlib import Path

import pytest
from engine_profiles import H100, make
from triton_fleet import trtllm_commands as tc

ROOT = Path(__file__).resolve().parents[2]
FACTS = ROOT / "tests" / "conformance" / "upstream-trtllm-1.2.1"


def _upstream(name):
    facts = json.loads((FACTS / name).read_text())["flags"]
    out = set(facts)
    for meta in facts.values():
        out.update(meta.get("aliases", []))
    return out


REFERENCE_CONVERT = _upstream("convert_checkpoint.json")
REFERENCE_QUANTIZE = _upstream("quantize.json")
REFERENCE_BUILD = _upstream("trtllm-build.json")


def flags_of(args):
    return [a for a in args if a.startswith("--")]


def opt(args, name):
    i = args.index(name)
    return args[i + 1]


def steps(profile):
    return tc.build_steps(profile, "/m/ckpt", "/e/.build/work", "/e/.build/engine")


def test_flag_lists_are_upstream_flags():
    assert set(tc.CONVERT_CHECKPOINT_FLAGS) <= REFERENCE_CONVERT
    assert set(tc.QUANTIZE_FLAGS) <= REFERENCE_QUANTIZE
    assert set(tc.TRTLLM_BUILD_FLAGS) <= REFERENCE_BUILD
    for table in (tc.CONVERT_CHECKPOINT_FLAGS, tc.QUANTIZE_FLAGS, tc.TRTLLM_BUILD_FLAGS):
        for name, spec in table.items():
            assert spec["source"], name
            assert name.startswith("--") and name == name.lower()
    # pre-0.8 flags are not in the 1.2.1 lists
    for removed in tc.REMOVED_FLAGS:
        assert removed not in tc.TRTLLM_BUILD_FLAGS


def test_bf16_tp1_matches_reference_example():
    convert, build = steps(make())
    assert convert["tool"] == "convert_checkpoint.py"
    assert convert["script"] == "models/core/qwen/convert_checkpoint.py"
    assert convert["args"][:2] == ["--model_dir", "/m/ckpt"]
    assert opt(convert["args"], "--dtype") == "bfloat16"
    assert opt(convert["args"], "--tp_size") == "1" and opt(convert["args"], "--pp_size") == "1"
    assert "--use_weight_only" not in convert["args"]
    assert set(flags_of(convert["args"])) <= REFERENCE_CONVERT
    a = build["args"]
    assert build["tool"] == "trtllm-build" and build["script"] is None
    assert opt(a, "--checkpoint_dir") == opt(convert["args"], "--output_dir")
    assert opt(a, "--output_dir") == "/e/.build/engine"
    assert (opt(a, "--max_batch_size"), opt(a, "--max_input_len"), opt(a, "--max_seq_len"),
            opt(a, "--max_num_tokens"), opt(a, "--max_beam_width")) == ("16", "7168", "8192", "8192", "1")
    assert opt(a, "--kv_cache_type") == "paged"
    assert opt(a, "--use_paged_context_fmha") == "enable"
    assert opt(a, "--gemm_plugin") == "auto"
    assert opt(a, "--tokens_per_block") == "32"
    assert "--paged_kv_cache" not in a and "--tp_size" not in a
    assert set(flags_of(a)) <= REFERENCE_BUILD


@pytest.mark.parametrize("tp,pp", [(2, 1), (4, 1), (2, 2), (1, 2)])
def test_parallelism_is_fixed_at_conversion(tp, pp):
    convert, build = steps(make(**{"parallel.tp": tp, "parallel.pp": pp,
                                   "parallel.gpu_device_ids": [",".join(str(i) for i in range(tp * pp))]}))
    assert opt(convert["args"], "--tp_size") == str(tp)
    assert opt(convert["args"], "--pp_size") == str(pp)
    assert opt(build["args"], "--workers") == str(tp * pp)
    assert "--tp_size" not in build["args"] and "--pp_size" not in build["args"]


@pytest.mark.parametrize("dtype,weights", [("float16", "fp16"), ("float32", "fp32"), ("bfloat16", "bf16")])
def test_unquantized_dtypes(dtype, weights):
    convert, _ = steps(make(**{"precision": {"dtype": dtype, "weights": weights, "kv_cache": weights}}))
    assert opt(convert["args"], "--dtype") == dtype


def test_int8_weight_only():
    convert, _ = steps(make(**{"precision.weights": "int8_wo"}))
    assert "--use_weight_only" in convert["args"]
    assert opt(convert["args"], "--weight_only_precision") == "int8"


def test_int4_gptq_weight_only():
    convert, _ = steps(make(**{"precision.weights": "int4_gptq"}))
    assert opt(convert["args"], "--weight_only_precision") == "int4_gptq"
    assert tc.CONVERT_CHECKPOINT_FLAGS["--weight_only_precision"]["choices"] == ("int8", "int4", "int4_gptq",
                                                                                "int8_gptq")


def test_int8_kv_cache_on_convert_path():
    convert, _ = steps(make(**{"precision.kv_cache": "int8"}))
    assert "--int8_kv_cache" in convert["args"]


def test_smoothquant():
    convert, _ = steps(make(**{"precision.weights": "int8_sq"}))
    assert opt(convert["args"], "--smoothquant") == "0.5"
    assert "--per_channel" in convert["args"] and "--per_token" in convert["args"]


def test_int4_awq_uses_modelopt_quantize():
    q, build = steps(make(**{"precision.weights": "int4_awq", "parallel.tp": 2}))
    assert q["tool"] == "quantize.py" and q["script"] == "quantization/quantize.py"
    assert opt(q["args"], "--qformat") == "int4_awq"
    assert opt(q["args"], "--awq_block_size") == "128"
    assert opt(q["args"], "--calib_size") == "32"
    assert opt(q["args"], "--tp_size") == "2"
    assert "--kv_cache_dtype" not in q["args"]
    assert opt(build["args"], "--checkpoint_dir") == opt(q["args"], "--output_dir")


def test_fp8_on_hopper():
    q, build = steps(make(**{"gpu": H100, "precision": {"dtype": "bfloat16", "weights": "fp8", "kv_cache": "fp8"}}))
    assert opt(q["args"], "--qformat") == "fp8"
    assert opt(q["args"], "--kv_cache_dtype") == "fp8"
    assert opt(q["args"], "--calib_size") == "512"
    assert opt(build["args"], "--use_fp8_context_fmha") == "enable"


def test_fp8_kv_with_bf16_weights_on_hopper():
    q, build = steps(make(**{"gpu": H100, "precision.kv_cache": "fp8"}))
    assert opt(q["args"], "--qformat") == "full_prec"
    assert opt(q["args"], "--kv_cache_dtype") == "fp8"
    assert "--use_fp8_context_fmha" not in build["args"]


@pytest.mark.parametrize("field", ["precision.weights", "precision.kv_cache"])
def test_fp8_on_ampere_is_refused(field):
    with pytest.raises(tc.CommandError, match="compute capability >= 8.9"):
        steps(make(**{field: "fp8"}))


def test_other_runtimes_and_versions_are_refused():
    with pytest.raises(tc.CommandError, match="no engine build step"):
        steps(make(runtime="trtllm-llmapi"))
    with pytest.raises(tc.CommandError, match="removed the engine path"):
        steps(make(**{"image.trtllm": "1.3.0rc26"}))


@pytest.mark.parametrize("changes,match", [
    ({"precision.weights": "bf16", "precision.dtype": "float16"}, "contradicts"),
    ({"precision.kv_cache": "fp16"}, "must equal the dtype"),
    ({"limits.max_input_len": 9000}, "exceeds limits.max_seq_len"),
    ({"limits.max_batch_size": 0}, "positive integer"),
    ({"kv_cache.tokens_per_block": 48}, "power of two"),
    ({"precision.weights": "nvfp4"}, "not one of"),
])
def test_bad_profiles_say_what_to_change(changes, match):
    with pytest.raises(tc.CommandError, match=match):
        steps(make(**changes))


def test_check_args_catches_wrong_names_and_values():
    assert tc.check_args("trtllm-build", ["--checkpoint_dir", "c", "--max_seq_length", "1"]) == [
        "--max_seq_length is not a trtllm-build flag in TRT-LLM 1.2.1"]
    assert any("invalid" in e or "not one of" in e
               for e in tc.check_args("trtllm-build", ["--checkpoint_dir", "c", "--kv_cache_type", "pagd"]))
    assert tc.check_args("trtllm-build", ["--max_batch_size", "x"]) == [
        "--max_batch_size expects an integer, got 'x'", "--checkpoint_dir is required by trtllm-build"]
    assert tc.check_args("convert_checkpoint.py", ["--model_dir", "m", "--use_weight_only=1"]) == [
        "--use_weight_only takes no value"]


def test_every_generated_command_passes_the_flag_check():
    for prof in (make(), make(**{"precision.weights": "int4_awq"}), make(**{"precision.weights": "int8_wo"}),
                 make(**{"gpu": H100, "precision.weights": "fp8"})):
        for step in steps(prof):
            assert tc.check_args(step["tool"], step["args"]) == []


def test_failure_explanations():
    prof = make()
    oom = tc.explain_failure("trtllm-build", "[TensorRT-LLM][ERROR] CUDA out of memory", prof)
    assert "max_num_tokens (now 8192)" in oom and "max_batch_size (now 16)" in oom
    ver = tc.explain_failure("trtllm-build", "The engine plan file is not compatible with this version", prof)
    assert "version mismatch" in ver and "1.2.1" in ver
    flag = tc.explain_failure("trtllm-build", "error: unrecognized arguments: --foo", prof)
    assert "--foo" in flag
    assert "last output" in tc.explain_failure("quantize.py", "Segmentation fault", prof)


def test_standin_checks_against_upstream_facts_not_our_table():
    """The stand-in builder reads upstream's facts; a flag only in our table would be refused by it."""
    text = (ROOT / "tests/standin/trtllm/standin_common.py").read_text()
    assert "conformance" in text and "trtllm_commands" not in text
    assert not (ROOT / "tests/standin/trtllm/flags-1.2.1.json").exists()
