"""Every rendered model repository and every engine-build command line, held against upstream's facts.

TensorRT-LLM cannot run here, so the check is reading: tests/conformance/upstream-trtllm-1.2.1/*.json
record what TensorRT-LLM's own model configs define, what its python models (preprocessing,
postprocessing, BLS with its lib/, llmapi with helpers.py) read and request, the argparse flags and
choices of trtllm-build, convert_checkpoint.py and quantize.py, and the LLM-API argument fields, each
with its upstream file and revision. They were written from upstream's files, not from this project's
tables. A tensor or parameter upstream's code needs and the repository lacks fails here, as does a
flag, choice or model.yaml key that upstream does not have.
"""

import json
from pathlib import Path

import jinja2
import pytest
import yaml
from triton_fleet import planner
from triton_fleet import trtllm_commands as tc
from triton_fleet.model_repository import render_repository, server_launch
from triton_fleet.pbtxt import validate

# Controller-side: it also needs the controller's own libraries (see tests/conftest.py).
pytestmark = pytest.mark.controller

ROOT = Path(__file__).resolve().parents[2]
FACTS = ROOT / "tests" / "conformance" / "upstream-trtllm-1.2.1"


def facts(name):
    return json.loads((FACTS / name).read_text())


CONFIGS = facts("model-configs.json")
CODE = facts("model-code.json")
LLM_ARGS = facts("llm-args.json")
LAUNCH = facts("launch.json")
TOOLS = {"convert_checkpoint.py": facts("convert_checkpoint.json"), "quantize.py": facts("quantize.json"),
         "trtllm-build": facts("trtllm-build.json")}

ENGINE_FILES = {
    "preprocessing/1/model.py": "# stand-in for upstream's file\n",
    "postprocessing/1/model.py": "# stand-in\n",
    "tensorrt_llm_bls/1/model.py": "# stand-in\n",
    "tensorrt_llm_bls/1/lib/decode.py": "# stand-in\n",
    "tensorrt_llm_bls/1/lib/triton_decoder.py": "# stand-in\n",
}
LLMAPI_FILES = {"1/model.py": "# stand-in\n", "1/helpers.py": "# stand-in\n"}
TRANSFORMERS_FILES = {"1/model.py": "# stand-in\n", "1/generation_request.py": "# stand-in\n"}


# ------------------------------------------------------------------------------------------ profiles

def _plan(**req):
    base = {"context_length": 4096, "concurrency": 4, "max_output_len": 512}
    base.update(req)
    return planner.plan(base)


# fp8 / int4 weights on the LLM API path load from a pre-quantized checkpoint pinned to a commit (test value): Qwen's
# own -FP8 (fp8-block128), or for int4 a Model Optimizer export an operator names (Qwen's -AWQ is AutoAWQ).
PIN = "0123456789abcdef0123456789abcdef01234567"
QWEN_FP8 = {"fp8": {"revision": PIN}}
MODELOPT_32B_AWQ = {"int4_awq": {"repo": "example-org/Qwen3-32B-W4A16-AWQ", "revision": PIN,
                                 "format": "modelopt-w4a16-awq"}}
# (id, request): every runtime, TP 1/2/4/8, dense and MoE, one and several instances per host.
PLANS = {}
for _tp in (1, 2, 4, 8):
    PLANS[f"engine-dense-tp{_tp}"] = dict(model="qwen3-32b", gpu_sku="a100-80gb", gpu_count=8, tp=_tp,
                                          runtime="trtllm-engine", precision="int4_awq" if _tp == 1 else "bf16")
    PLANS[f"llmapi-dense-tp{_tp}"] = dict(model="qwen3-32b", gpu_sku="h100-sxm", gpu_count=8, tp=_tp,
                                          precision="fp8", quantized_checkpoints=QWEN_FP8)
    PLANS[f"llmapi-moe30b-tp{_tp}"] = dict(model="qwen3-30b-a3b", gpu_sku="a100-80gb", gpu_count=8, tp=_tp)
PLANS["engine-dense-1gpu"] = dict(model="qwen3-14b", gpu_sku="a100-80gb", gpu_count=1, runtime="trtllm-engine")
PLANS["engine-int8kv-tp2"] = dict(model="qwen3-14b", gpu_sku="a100-80gb", gpu_count=2, tp=2,
                                  runtime="trtllm-engine", kv_cache_dtype="int8", precision="int8_wo")
PLANS["engine-fp8-h100-tp2"] = dict(model="qwen3-14b", gpu_sku="h100-sxm", gpu_count=2, tp=2,
                                    runtime="trtllm-engine", precision="fp8")
PLANS["llmapi-moe235b-tp8"] = dict(model="qwen3-235b-a22b", gpu_sku="h100-sxm", gpu_count=8, tp=8, precision="fp8",
                                   quantized_checkpoints=QWEN_FP8)
PLANS["llmapi-moe235b-tp8-ep4"] = dict(model="qwen3-235b-a22b", gpu_sku="h100-sxm", gpu_count=8, tp=8, ep=4,
                                       precision="fp8", quantized_checkpoints=QWEN_FP8)
PLANS["llmapi-moe30b-1gpu"] = dict(model="qwen3-30b-a3b", gpu_sku="a100-80gb", gpu_count=1)
PLANS["transformers-gpu"] = dict(model="qwen3-8b", gpu_sku="a100-80gb", gpu_count=2, runtime="transformers")
# Ampere on the planner's default path (no runtime given): inventories/prod's groups (with the A10 memory its
# group_vars give) and the A10 at TP 2 with int4 weights from a pre-quantized checkpoint.
AMPERE_PLANS = {
    "llmapi-a10-prod": dict(model="qwen3-14b", gpu_sku="a10", gpu_count=2, context_length=8192, concurrency=8,
                            max_output_len=1024, gpu_memory_bytes=25757220864),
    "llmapi-a100-prod": dict(model="qwen3-14b", gpu_sku="a100-80gb", gpu_count=1, context_length=8192, concurrency=16,
                             max_output_len=1024),
    "llmapi-a10-32b-tp2": dict(model="qwen3-32b", gpu_sku="a10", gpu_count=2, context_length=4096, concurrency=2,
                               quantized_checkpoints=MODELOPT_32B_AWQ),
    "llmapi-a100-40gb-2507": dict(model="qwen3-30b-a3b-thinking-2507", gpu_sku="a100-40gb", gpu_count=2,
                                  context_length=32768, concurrency=2),
}
PLANS.update(AMPERE_PLANS)


@pytest.fixture(scope="module")
def profiles():
    return {name: _plan(**req) for name, req in PLANS.items()}


def _render(profile, bls=True):
    files = {"trtllm-engine": ENGINE_FILES, "trtllm-llmapi": LLMAPI_FILES,
             "transformers": TRANSFORMERS_FILES}[profile["runtime"]]
    opts = {"model_files": files}
    if profile["runtime"] == "trtllm-engine":
        opts["bls"] = bls
    return render_repository(profile, opts)


def _cfg(repo, model):
    return validate(repo[f"{model}/config.pbtxt"])


def _tensors(tensors):
    return {t.name: t for t in tensors}


def _dtype(t):
    from triton_fleet.model_config_schema import model_config_class

    cls = model_config_class()
    return cls.DESCRIPTOR.fields_by_name["input"].message_type.fields_by_name["data_type"].enum_type \
        .values_by_number[t.data_type].name


def _upstream_tensors(model):
    up = CONFIGS[model]
    return {t["name"]: t for t in up["inputs"]}, {t["name"]: t for t in up["outputs"]}


def _check_against_upstream_config(msg, model):
    """Every tensor we declare that upstream's config declares has upstream's data type and dims."""
    up_in, up_out = _upstream_tensors(model)
    for ours, theirs, kind in ((msg.input, up_in, "input"), (msg.output, up_out, "output")):
        for t in ours:
            if t.name not in theirs:
                continue
            u = theirs[t.name]
            if u["data_type"] != "templated":
                assert _dtype(t) == u["data_type"], f"{model} {kind} {t.name}: {_dtype(t)} != upstream {u['data_type']}"
            assert list(t.dims) == u["dims"], f"{model} {kind} {t.name}: dims {list(t.dims)} != upstream {u['dims']}"


def _check_python_model(msg, model):
    """What upstream's model.py reads from its config at load time and per request."""
    code = CODE[model]
    params = set(msg.parameters.keys())
    ins, outs = _tensors(msg.input), _tensors(msg.output)
    missing = [p for p in code["parameters_required"] if p not in params]
    assert not missing, f"{model}: upstream model.py reads parameters {missing} unconditionally (KeyError)"
    for name in code["input_configs"]:
        assert name in ins, f"{model}: upstream model.py looks up input {name}'s data type at load"
    for name in code["output_configs"]:
        assert name in outs, f"{model}: upstream model.py looks up output {name}'s data type at load"
    for name in code.get("inputs_required", []):
        assert name in ins and not ins[name].optional, f"{model}: upstream reads {name} without a None check"
    for name in code.get("inputs_optional", []):
        assert name in ins, f"{model}: upstream reads input {name}; declare it (optional)"
    sent = code["outputs_sent"]["names"] if isinstance(code["outputs_sent"], dict) else code["outputs_sent"]
    for name in sent:
        assert name in outs, f"{model}: upstream model.py sends output {name}; it must be declared"
    if "inputs_only" in code:
        assert set(ins) == set(code["inputs_only"]), f"{model}: upstream raises on any input but {code['inputs_only']}"
    allowed = set(CONFIGS[model]["parameters"]) | set(code.get("parameters_documented", {}))
    extra = sorted(params - allowed)
    assert not extra, f"{model}: parameters {extra} are not in upstream's config (nothing upstream reads them)"


# ------------------------------------------------------------------------------- engine repositories

ENGINE_PLANS = sorted(n for n in PLANS if n.startswith("engine"))
LLMAPI_PLANS = sorted(n for n in PLANS if n.startswith("llmapi"))


@pytest.mark.parametrize("name", ENGINE_PLANS)
def test_engine_repository_loads_with_upstream_model_code(profiles, name):
    profile = profiles[name]
    assert profile["runtime"] == "trtllm-engine"
    repo = _render(profile, bls=True)
    models = {m: _cfg(repo, m) for m in ("preprocessing", "postprocessing", "tensorrt_llm", "tensorrt_llm_bls")}
    for model in ("preprocessing", "postprocessing", "tensorrt_llm_bls"):
        _check_python_model(models[model], model)
    for model, msg in models.items():
        _check_against_upstream_config(msg, model)
    # the preprocessing model only loads text-only when multimodal_model_path is '' (or unfilled)
    mm = models["preprocessing"].parameters["multimodal_model_path"].string_value
    assert mm in CODE["preprocessing"]["parameter_values"]["multimodal_model_path"]["disabled_by"]
    # tensorrt_llm: only parameters upstream's template defines
    extra = sorted(set(models["tensorrt_llm"].parameters.keys()) - set(CONFIGS["tensorrt_llm"]["parameters"]))
    assert not extra, f"tensorrt_llm parameters not in upstream's template: {extra}"
    # every file upstream's python models import is in the repository
    for path in CODE["tensorrt_llm_bls"]["files"]:
        assert f"tensorrt_llm_bls/{path}" in repo, path


@pytest.mark.parametrize("name", ENGINE_PLANS)
def test_bls_requests_only_what_the_other_models_declare(profiles, name):
    repo = _render(profiles[name], bls=True)
    bls = CODE["tensorrt_llm_bls"]
    ours = _tensors(_cfg(repo, "tensorrt_llm_bls").input)
    for n in bls["inputs_read"]["names"]:
        assert n in ours, f"the BLS's TritonDecoder reads request tensor {n}; declare it"
    assert "seed" in ours and "random_seed" not in ours
    assert _cfg(repo, "tensorrt_llm_bls").model_transaction_policy.decoupled
    for req in bls["requests"]:
        target = _cfg(repo, req["model"])
        t_in, t_out = _tensors(target.input), _tensors(target.output)
        missing_out = [o for o in req["requested_outputs"] if o not in t_out]
        assert not missing_out, f"BLS requests outputs {missing_out} that {req['model']} does not declare"
        missing_in = [i for i in req["inputs_sent"] if i not in t_in]
        assert not missing_in, f"BLS sends inputs {missing_in} that {req['model']} does not declare"


@pytest.mark.parametrize("name", ENGINE_PLANS)
def test_ensemble_steps_match_the_step_models(profiles, name):
    repo = _render(profiles[name], bls=False)
    served = profiles[name]["model"]["served_name"]
    ens = _cfg(repo, served)
    ens_in = _tensors(ens.input)
    assert "seed" in ens_in and "random_seed" not in ens_in, "upstream's ensemble calls the seed input seed"
    up_ens = {t["name"] for t in CONFIGS["ensemble"]["inputs"]}
    assert set(ens_in) <= up_ens, f"client inputs upstream's ensemble lacks: {sorted(set(ens_in) - up_ens)}"
    produced = dict(ens_in)
    for step in ens.ensemble_scheduling.step:
        model = _cfg(repo, step.model_name)
        m_in, m_out = _tensors(model.input), _tensors(model.output)
        for inner, outer in step.input_map.items():
            assert inner in m_in, f"{step.model_name} has no input {inner}"
            assert outer in produced, f"ensemble tensor {outer} is not produced before {step.model_name}"
            assert _dtype(m_in[inner]) == _dtype(produced[outer]), (step.model_name, inner)
        for name_ in m_in:
            if not m_in[name_].optional:
                assert name_ in step.input_map, f"{step.model_name} needs {name_}; the ensemble does not map it"
        for inner, outer in step.output_map.items():
            assert inner in m_out, f"{step.model_name} has no output {inner}"
            produced[outer] = m_out[inner]
    trt = next(s for s in ens.ensemble_scheduling.step if s.model_name == "tensorrt_llm")
    assert trt.input_map["seed"] == "seed"


@pytest.mark.parametrize("name", ENGINE_PLANS)
def test_engine_multi_gpu_starts_in_orchestrator_mode(profiles, name):
    profile = profiles[name]
    repo = _render(profile)
    llm = _cfg(repo, "tensorrt_llm")
    ids = profile["parallel"]["gpu_device_ids"]
    world = profile["parallel"]["tp"] * profile["parallel"]["pp"]
    entries = llm.parameters["gpu_device_ids"].string_value.split(";")
    assert entries == ids and all(len(e.split(",")) == world for e in entries)
    assert llm.instance_group[0].count == len(entries), "instance count must equal the ';'-separated GPU sets"
    launch = server_launch(profile)
    assert launch == repo.launch and launch["mode"] == profile["parallel"]["launch_mode"]
    if world == 1 and len(ids) == 1:
        assert launch["mode"] == "single" and launch["entrypoint"] == ["tritonserver"] and not launch["env"]
    else:
        orch = LAUNCH["orchestrator"]
        assert launch["mode"] == "orchestrator"
        assert launch["env"] == orch["env"]
        assert launch["entrypoint"] == orch["mpirun"] + ["tritonserver"]
        assert orch["server_args"][0] in launch["args"] and orch["server_args"][1] in launch["args"]
        gpus = sorted({int(g) for e in entries for g in e.split(",")})
        assert [a for a in launch["args"] if a.startswith("--cuda-memory-pool-byte-size=")] == [
            f"--cuda-memory-pool-byte-size={g}:0" for g in gpus]
        # spawned workers: participant_ids belongs to --disable-spawn-processes only
        assert "participant_ids" not in llm.parameters


def test_engine_repository_without_bls_lib_is_refused(profiles):
    files = {k: v for k, v in ENGINE_FILES.items() if "/lib/" not in k}
    with pytest.raises(Exception, match="lib/triton_decoder.py"):
        render_repository(profiles["engine-dense-tp2"], {"bls": True, "model_files": files})


# ------------------------------------------------------------------------------- llmapi repositories

def _llm_args_errors(data):
    """What in a model.yaml (triton_config removed) LLM(**args) of TensorRT-LLM 1.2 would not take."""
    errors = [f"model.yaml key {k!r}: LLM() does not take it (extra='forbid')"
              for k in sorted(set(data) - set(LLM_ARGS["top_level"]) - set(LLM_ARGS["torch_fields"]))]
    for key, sub in LLM_ARGS["nested"].items():
        if isinstance(data.get(key), dict):
            errors += [f"{key}.{f}: upstream's {key} has no such field" for f in sorted(set(data[key]) - set(sub))]
    for dotted, choices in LLM_ARGS["choices"].items():
        top, field = dotted.split(".")
        if field in (data.get(top) or {}) and data[top][field] not in choices:
            errors.append(f"{dotted}: {data[top][field]!r} is not one of {choices}")
    return errors


def _upstream_graph_sizes(max_batch_size):
    """CudaGraphConfig's padded list as the fixture records upstream's rule (not the planner's code)."""
    rule = LLM_ARGS["cuda_graph_config"]["generated_with_padding"]
    sizes = list(rule["start"]) + list(range(rule["multiples_of"], rule["multiples_up_to"] + 1, rule["multiples_of"]))
    power = rule["powers_of_two_from"]
    while power < max_batch_size:
        sizes.append(power)
        power *= 2
    sizes = sorted(x for x in sizes if x <= max_batch_size)
    return sizes if sizes and sizes[-1] == max_batch_size else sizes + [max_batch_size]


@pytest.mark.parametrize("name", LLMAPI_PLANS)
def test_llmapi_repository_matches_upstream(profiles, name):
    profile = profiles[name]
    assert profile["runtime"] == "trtllm-llmapi"
    repo = _render(profile)
    served = profile["model"]["served_name"]
    msg = _cfg(repo, served)
    _check_python_model(msg, "llmapi")
    _check_against_upstream_config(msg, "llmapi")
    for path in CODE["llmapi"]["files"]:
        assert f"{served}/{path}" in repo, path
    data = yaml.safe_load(repo[f"{served}/1/model.yaml"])
    triton = data.pop("triton_config")
    for key in CODE["llmapi"]["triton_config_required"]:
        assert key in triton, f"upstream model.py reads triton_config[{key!r}]"
    assert set(triton) <= set(LLM_ARGS["triton_keys"]["triton_config"]["keys"])
    assert _llm_args_errors(data) == []
    # CUDA graphs: the planned sizes are exactly the ones upstream would generate for the planned batch, given as
    # batch_sizes alone (the validator then keeps them; both with max_batch_size must match its own list)
    graphs = data["cuda_graph_config"]
    assert "max_batch_size" not in graphs and graphs["enable_padding"] is True
    assert graphs["batch_sizes"] == _upstream_graph_sizes(data["max_batch_size"])
    assert profile["predicted"]["cuda_graph_bytes_per_gpu"] == \
        len(graphs["batch_sizes"]) * LLM_ARGS["cuda_graph_config"]["bytes_per_graph_bound"]
    # chunked prefill (off upstream by default) is on whenever a prompt can be longer than one step's tokens
    if data["max_num_tokens"] < profile["limits"]["max_input_len"]:
        assert data["enable_chunked_prefill"] is True
    assert data["max_num_tokens"] <= LLM_ARGS["defaults"]["max_num_tokens"]
    lo, hi = LLM_ARGS["ranges"]["kv_cache_config.free_gpu_memory_fraction"]
    assert lo <= data["kv_cache_config"]["free_gpu_memory_fraction"] <= hi
    par = profile["parallel"]
    assert data["tensor_parallel_size"] == par["tp"]
    if profile["model"].get("moe"):
        assert data["moe_expert_parallel_size"] * data["moe_tensor_parallel_size"] == par["tp"]
        assert data["moe_expert_parallel_size"] == par["ep"]
    else:
        assert "moe_expert_parallel_size" not in data and "ep" not in par


def _dotted_keys(data, prefix=""):
    out = set()
    for key, value in data.items():
        out.add(prefix + key)
        if isinstance(value, dict):
            out |= _dotted_keys(value, prefix + key + ".")
    return out


def test_every_model_yaml_key_for_ampere_is_in_the_fixtures(profiles):
    """inventories/prod's A10/A100 groups and the other Ampere plans: each key they emit is one upstream declares."""
    covered = set(LLM_ARGS["top_level"]) | set(LLM_ARGS["torch_fields"]) | {"triton_config"}
    covered |= {f"{k}.{f}" for k, fields in LLM_ARGS["nested"].items() for f in fields}
    covered |= {f"triton_config.{k}" for k in LLM_ARGS["triton_keys"]["triton_config"]["keys"]}
    emitted = set()
    for name in AMPERE_PLANS:
        profile = profiles[name]
        assert profile["runtime"] == "trtllm-llmapi" and profile["gpu"]["compute_capability"] in ("8.0", "8.6")
        emitted |= _dotted_keys(yaml.safe_load(_render(profile)[f"{profile['model']['served_name']}/1/model.yaml"]))
    assert emitted - covered == set()
    assert {"cuda_graph_config.batch_sizes", "enable_chunked_prefill", "max_num_tokens",
            "kv_cache_config.free_gpu_memory_fraction"} <= emitted


GOLDEN_YAML = sorted((ROOT / "tests" / "golden" / "model_repository").glob("trtllm-llmapi*/*/1/model.yaml"))


@pytest.mark.parametrize("path", GOLDEN_YAML, ids=lambda p: p.parts[-4])
def test_golden_model_yaml_matches_upstream(path):
    """The goldens (inventories/prod's A10 and A100 groups among them) held against upstream's LLM arguments."""
    data = yaml.safe_load(path.read_text())
    assert set(data.pop("triton_config")) <= set(LLM_ARGS["triton_keys"]["triton_config"]["keys"])
    assert _llm_args_errors(data) == []
    if "cuda_graph_config" in data:
        assert data["cuda_graph_config"]["batch_sizes"] == _upstream_graph_sizes(data["max_batch_size"])


def test_prod_goldens_exist():
    assert {p.parts[-4] for p in GOLDEN_YAML} >= {"trtllm-llmapi-prod-gpu_a10", "trtllm-llmapi-prod-gpu_a100"}


def test_a_wrong_model_yaml_key_is_caught():
    """The check can fail: a key, a nested field and a choice upstream does not have."""
    errors = _llm_args_errors({"model": "/c", "cuda_graph_batch_sizes": [1],
                               "cuda_graph_config": {"padding": True},
                               "scheduler_config": {"capacity_scheduler_policy": "FIFO"}})
    assert len(errors) == 3 and "cuda_graph_batch_sizes" in errors[0]


@pytest.mark.parametrize("name", LLMAPI_PLANS)
def test_llmapi_starts_the_way_upstream_documents(profiles, name):
    profile = profiles[name]
    repo = _render(profile)
    msg = _cfg(repo, profile["model"]["served_name"])
    ids = profile["parallel"]["gpu_device_ids"]
    launch = repo.launch
    assert launch["mode"] == profile["parallel"]["launch_mode"]
    assert msg.instance_group[0].count == len(ids)
    if len(ids) > 1:
        # docs/llmapi.md: KIND_CPU instances, gpu_device_ids 'a;b', tritonserver without mpirun
        assert launch["mode"] == "llmapi-instances" and launch["entrypoint"] == ["tritonserver"]
        assert msg.parameters["gpu_device_ids"].string_value.split(";") == ids
        assert msg.instance_group[0].kind == 2  # KIND_CPU
    else:
        assert "gpu_device_ids" not in msg.parameters
        if profile["parallel"]["tp"] > 1:
            assert launch["entrypoint"] == ["mpirun", "--allow-run-as-root", "-n", "1", "tritonserver"]
    assert not launch["env"].get("TRTLLM_ORCHESTRATOR"), "orchestrator mode is the C++ backend's"


def test_transformers_accepts_seed_and_its_alias(profiles):
    repo = _render(profiles["transformers-gpu"])
    msg = _cfg(repo, profiles["transformers-gpu"]["model"]["served_name"])
    names = {t.name for t in msg.input}
    assert {"seed", "random_seed"} <= names


# ----------------------------------------------------------------------------------- command lines

def _parse_args(tool, args):
    """Upstream's argparse facts applied to argv: (values, errors)."""
    spec = TOOLS[tool]
    flags = dict(spec["flags"])
    for meta in spec["flags"].values():
        for alias in meta.get("aliases", []):
            flags[alias] = meta
    values, errors, i = {}, [], 0
    while i < len(args):
        name = args[i]
        meta = flags.get(name)
        if meta is None:
            errors.append(f"{tool}: upstream has no flag {name}")
            i += 1
            continue
        if meta["kind"] == "flag":
            values[name] = True
            i += 1
            continue
        value = args[i + 1] if i + 1 < len(args) else None
        if value is None or value.startswith("--"):
            errors.append(f"{tool}: {name} needs a value")
            i += 1
            continue
        if "choices" in meta and value not in meta["choices"]:
            errors.append(f"{tool}: {name} {value!r} is not one of upstream's choices {meta['choices']}")
        if meta["kind"] == "int":
            int(value)
        if meta["kind"] == "float":
            float(value)
        values[name] = value
        i += 2
    for name in spec.get("required", []):
        if name not in values:
            errors.append(f"{tool}: upstream requires {name}")
    for group in spec.get("required_one_of", []):
        if not any(g in values for g in group):
            errors.append(f"{tool}: upstream requires one of {group}")
    return values, errors


@pytest.mark.parametrize("name", ENGINE_PLANS)
def test_every_command_line_uses_upstream_flags_and_choices(profiles, name):
    steps = tc.build_steps(profiles[name], "/m", "/w", "/e")
    for step in steps:
        values, errors = _parse_args(step["tool"], step["args"])
        assert not errors, errors
        if step["tool"] == "trtllm-build":
            for removed in TOOLS["trtllm-build"]["removed"]:
                assert removed not in step["args"], removed
        if step["tool"] == "convert_checkpoint.py" and "--moe_ep_size" in values:
            tp = int(values["--tp_size"])
            assert int(values["--moe_tp_size"]) * int(values["--moe_ep_size"]) == tp


@pytest.mark.parametrize("tool,table", [("convert_checkpoint.py", tc.CONVERT_CHECKPOINT_FLAGS),
                                        ("quantize.py", tc.QUANTIZE_FLAGS),
                                        ("trtllm-build", tc.TRTLLM_BUILD_FLAGS)])
def test_module_flag_tables_are_upstream_flags(tool, table):
    upstream = TOOLS[tool]["flags"]
    for name, spec in table.items():
        assert name in upstream, f"{tool}: {name} is not an upstream flag"
        assert spec["kind"] == upstream[name]["kind"], f"{tool} {name}: kind {spec['kind']} != {upstream[name]['kind']}"
        if spec["choices"]:
            bad = sorted(set(spec["choices"]) - set(upstream[name]["choices"]))
            assert not bad, f"{tool} {name}: choices upstream lacks {bad}"


def test_a_wrong_flag_or_choice_is_caught():
    """The check can fail: a flag and a choice that upstream does not have."""
    _, errors = _parse_args("trtllm-build", ["--checkpoint_dir", "/c", "--use_gpt_attention_plugin", "float16"])
    assert any("no flag --use_gpt_attention_plugin" in e for e in errors)
    _, errors = _parse_args("trtllm-build", ["--checkpoint_dir", "/c", "--kv_cache_type", "paged_v2"])
    assert any("upstream's choices" in e for e in errors)
    _, errors = _parse_args("quantize.py", ["--qformat", "fp8"])
    assert any("one of" in e for e in errors)


def test_qwen3_moe_engine_is_refused_with_the_reason():
    with pytest.raises(planner.PlanError, match="norm_topk_prob"):
        _plan(model="qwen3-30b-a3b", gpu_sku="a100-80gb", gpu_count=1, runtime="trtllm-engine")
    moe = facts("qwen3-moe.json")["engine_flow"]
    assert moe["converts_qwen3_moe"] is True  # converts, but not the way Qwen3-MoE routes


# ------------------------------------------------------------------------------ role model files

def _render_model_files(tmp_path, runtime):
    """roles/triton_server/templates/model_files.j2 with Ansible's lookups replaced by plain Python."""
    src = tmp_path / runtime
    rels = ENGINE_FILES if runtime == "trtllm-engine" else ("1/model.py", "1/helpers.py", "1/model.yaml")
    for rel in rels:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text("# " + rel + "\n")
    import glob
    import os

    def lookup(kind, arg, wantlist=False):
        if kind == "ansible.builtin.fileglob":
            return sorted(glob.glob(arg))
        if kind == "ansible.builtin.file":
            return Path(arg).read_text()
        raise AssertionError(kind)

    env = jinja2.Environment()
    env.filters["relpath"] = os.path.relpath
    env.filters["to_json"] = json.dumps
    env.globals["lookup"] = lookup
    text = (ROOT / "roles/triton_server/templates/model_files.j2").read_text()
    out = env.from_string(text).render(
        triton_server_profile={"runtime": runtime},
        triton_server_trtllm_model_files_dir=str(src))
    return yaml.safe_load(out)


def test_role_collects_the_bls_lib_and_llmapi_helpers(tmp_path):
    engine = _render_model_files(tmp_path, "trtllm-engine")
    for rel in ENGINE_FILES:
        assert rel in engine, rel
    llmapi = _render_model_files(tmp_path, "trtllm-llmapi")
    assert {"1/model.py", "1/helpers.py"} <= set(llmapi)
    assert "1/model.yaml" not in llmapi  # rendered from the profile, never copied
