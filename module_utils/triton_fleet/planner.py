"""The preflight planner: model + GPUs of one host group + request -> serving profile (docs/profile.md).

Choice order (docs/planner.md): keep 16-bit weights if they fit with the KV cache the request needs;
else FP8 where the GPU has it; else int8 weight-only; else int4 (AWQ); else more GPUs of the host by TP
(TP divides the attention heads and divides the KV heads or is a multiple of them, which replicates
KV heads); else fail, naming what would fit. MoE models on the LLM-API runtime spread their experts
over the TP GPUs (EP). Runtime by docs/planner.md; operator overrides (runtime, precision, KV dtype,
TP, EP) are honoured and still checked. On trtllm-llmapi a quantized precision is only tried when a pre-quantized
checkpoint that TensorRT-LLM's PyTorch backend loads on the GPU exists for it (checkpoints.py): the profile then
names that checkpoint (model.checkpoint), the one to fetch and load.
"""

import math

from . import checkpoints, gpu_catalog, image_matrix, memory_model, model_catalog
from .fingerprint import fingerprint
from .model_repository import launch_mode
from .trtllm_commands import QWEN3_MOE_ARCHITECTURES, QWEN3_MOE_ENGINE_REFUSAL

GIB = memory_model.GIB
SCHEMA_VERSION = 1
RUNTIMES = ("trtllm-engine", "trtllm-llmapi", "transformers")
AUTO_PRECISIONS = ("bf16", "fp8", "int8_wo", "int4_awq")
# What each runtime can load (TRT-LLM docs/source/features/quantization.md: PyTorch backend Qwen-3 row has FP8, W4A16 AWQ/GPTQ, no
# int8 weight-only; the engine path converts int8/int4 weight-only; transformers serves unquantized).
RUNTIME_PRECISIONS = {
    "trtllm-engine": ("bf16", "fp16", "fp8", "int8_wo", "int4_awq", "int4_gptq"),
    "trtllm-llmapi": ("bf16", "fp16", "fp8", "int4_awq", "int4_gptq"),
    "transformers": ("fp32", "bf16", "fp16"),
}
TP_CHOICES = (1, 2, 4, 8)
DEFAULTS = {
    "context_length": 8192, "concurrency": 8, "max_output_len": 1024, "kv_cache_free_gpu_mem_fraction": 0.9,
    "tokens_per_block": 32, "max_num_tokens": 8192, "model_revision": "main", "image": image_matrix.PINNED,
    "group": "adhoc", "device": "gpu",
}
ACT_DTYPE = {"fp32": "float32", "fp16": "float16"}
# The smallest KV fraction the planner accepts (asked for, or left after making room for CUDA graphs).
MIN_KV_FRACTION = 0.05


class PlanError(ValueError):
    """An operator-facing planning failure: says what is wrong and what to do."""

    def __init__(self, message, alternatives=None, options=None, reasons=None):
        super().__init__(message)
        self.alternatives = alternatives or []
        self.options = options or []
        self.reasons = reasons or []  # the choices made before nothing fitted (runtime, image)


def gib(n):
    return "%.1f" % (n / float(GIB))


def _int(req, key, minimum, what):
    val = req.get(key)
    if val is None:
        val = DEFAULTS[key]
    try:
        val = int(val)
    except (TypeError, ValueError):
        raise PlanError(f"{what} must be a whole number, got {req.get(key)!r}") from None
    if val < minimum:
        raise PlanError(f"{what} must be >= {minimum}, got {val}")
    return val


# --------------------------------------------------------------------------------------------- inputs

def gpu_from_facts(facts):
    """gpu request fields from gpu_facts' `triton_fleet_gpus` dict (count, sku, memory, nvlink)."""
    gpus = facts.get("gpus") or []
    count = int(facts.get("count", len(gpus)))
    if count == 0 or not gpus:
        return {"gpu_count": 0}
    first = gpus[0]
    return {
        "gpu_sku": first.get("sku") or first.get("name"), "gpu_count": count, "gpu_name": first.get("name"),
        "gpu_memory_bytes": first.get("memory_bytes"),
        "gpu_compute_capability": first.get("compute_capability"),
        "nvlink": bool(facts.get("nvlink")) or bool(facts.get("nvswitch")),
    }


def _gpu_spec(req, device):
    if device == "cpu":
        mem = req.get("host_memory_bytes")
        return {"sku": "cpu", "name": "cpu", "count_per_host": 0, "memory_bytes": int(mem) if mem else None,
                "compute_capability": None, "nvlink": False, "bandwidth_gbs": memory_model.CPU_BANDWIDTH_GBS,
                "fp8": False, "label": "CPU host"}
    count = req.get("gpu_count")
    try:
        count = int(count)
    except (TypeError, ValueError):
        raise PlanError(f"the GPU count must be a whole number >= 1, got {count!r}") from None
    if count < 1:
        raise PlanError(
            f"GPU count is {count}: the planner needs at least one GPU per host. Check that gpu_facts found the "
            "GPUs (driver loaded, passthrough), fix --gpus, or set triton_fleet_device: cpu for a CPU host")
    sku = req.get("gpu_sku")
    if not sku:
        raise PlanError("no GPU SKU given: pass --gpu (tools/plan --list-gpus) or GPU facts from gpu_facts")
    try:
        cat = gpu_catalog.get(sku)
    except gpu_catalog.UnknownGPU as exc:
        raise PlanError(str(exc)) from None
    mem = int(req.get("gpu_memory_bytes") or cat["memory_mib"] * gpu_catalog.MIB)
    cc = req.get("gpu_compute_capability") or cat["compute_capability"]
    nvlink = req.get("nvlink")
    if nvlink is None:
        nvlink = cat["nvlink"] == "nvswitch"
    return {"sku": cat["sku"], "name": req.get("gpu_name") or cat["name"], "count_per_host": count,
            "memory_bytes": mem, "compute_capability": str(cc), "nvlink": bool(nvlink),
            "bandwidth_gbs": cat["bandwidth_gbs"], "fp8": gpu_catalog.has_fp8(cc),
            "label": "{} ({}, {} GiB usable)".format(cat["name"].replace("NVIDIA ", ""), cat["marketing_memory"],
                                                  gib(mem))}


def _model(req):
    key = req.get("model")
    if not key or not isinstance(key, str):
        raise PlanError("no model given: set triton_fleet_model (tools/plan --model, see --list-models)")
    try:
        return model_catalog.resolve(key, config_path=req.get("model_config"), hf_id=req.get("hf_id"))
    except model_catalog.ModelError as exc:
        raise PlanError(str(exc)) from None


def _image(req):
    ref = req.get("image") or DEFAULTS["image"]
    try:
        img = image_matrix.lookup(ref)
    except image_matrix.NoTrtllmContainer as exc:
        raise PlanError(str(exc)) from None
    except image_matrix.ImageError as exc:
        if not req.get("trtllm_version"):
            raise PlanError(str(exc)) from None
        img = {"ref": ref, "triton": ref.rsplit(":", 1)[-1][:5], "trtllm": None, "cuda": None,
               "min_driver_branch": None, "nvidia": True}
    if req.get("trtllm_version"):
        img["trtllm"] = str(req["trtllm_version"])
        img["trtllm_source"] = "operator (trtllm_version)"
    return img


# ------------------------------------------------------------------------------------------- choices

ARCH_NAMES = ((10, 0, "Blackwell"), (9, 0, "Hopper"), (8, 9, "Ada"), (8, 0, "Ampere"), (7, 5, "Turing"))


def _arch(cc):
    ccv = gpu_catalog.compute_capability_tuple(cc)
    return next((name for major, minor, name in ARCH_NAMES if ccv >= (major, minor)), "pre-Turing")




def default_runtime(gpu, img):
    """(runtime, why) the planner picks for a GPU and an image when the operator names none.

    The one decision used for the plan and for every option a failure names (so advice never names a runtime,
    or a precision, the plan itself would not use). The TRT-LLM PyTorch backend (LLM API) on every GPU generation
    its support matrix lists; the TensorRT engine path is only taken when asked for (legacy).
    """
    trt = img.get("trtllm")
    if not trt:
        return "transformers", "runtime transformers: image {} has no TensorRT-LLM".format(img["ref"])
    cc = gpu["compute_capability"]
    if not image_matrix.llmapi_supports(cc):
        return "transformers", (f"runtime transformers: compute capability {cc} ({_arch(cc)}) is below 8.0; TensorRT-LLM's support "
                                "matrix lists Ampere (SM80/SM86) and newer for its PyTorch backend (docs/compatibility.md)"
                                )
    why = ("runtime trtllm-llmapi: TensorRT-LLM {}'s PyTorch backend (LLM API), its default and only maintained path, "
           "supports {} (compute capability {}; support matrix: Ampere SM80/SM86, Ada, Hopper, Blackwell); image {}"
           .format(trt, _arch(cc), cc, img["ref"]))
    return "trtllm-llmapi", why


def _check_qwen3_version(m, runtime, img):
    trt = img.get("trtllm")
    floor = image_matrix.QWEN3_MIN_TRTLLM.get(runtime)
    if m["model_type"].startswith("qwen3") and floor and image_matrix.version_tuple(trt) < floor:
        raise PlanError("{} cannot serve {} with TensorRT-LLM {} (Qwen3 needs >= {} for this runtime); pin {}".format(
            runtime, m["key"], trt, ".".join(map(str, floor)), image_matrix.PINNED))


def _choose_runtime(req, device, gpu, img, m, *, reasons):
    want = req.get("runtime") or None
    trt = img.get("trtllm")
    if want and want not in RUNTIMES:
        raise PlanError("unknown runtime {!r}; choose one of {}".format(want, ", ".join(RUNTIMES)))
    qwen3_moe = m.get("architecture") in QWEN3_MOE_ARCHITECTURES
    if device == "cpu":
        if want and want != "transformers":
            raise PlanError(f"runtime {want} needs an NVIDIA GPU; a CPU host (triton_fleet_device: cpu) serves only "
                            "the transformers runtime: drop the runtime override")
        reasons.append("runtime transformers: CPU host (the lab); TensorRT-LLM needs an NVIDIA GPU")
        return "transformers"
    if want:
        if want == "trtllm-engine" and qwen3_moe:
            raise PlanError("runtime trtllm-engine for {}: {}".format(m["key"], QWEN3_MOE_ENGINE_REFUSAL))
        if want.startswith("trtllm") and not trt:
            raise PlanError("runtime {} needs a Triton image with TensorRT-LLM (a -trtllm-python-py3 tag); {} has "
                            "none: use {} or runtime transformers".format(want, img["ref"], image_matrix.PINNED))
        if want == "trtllm-engine" and not image_matrix.engine_allowed(trt):
            raise PlanError("runtime trtllm-engine (legacy) is built only with TensorRT-LLM 1.2.x: {}; {} has "
                            "TensorRT-LLM {}: drop the runtime override (the planner picks trtllm-llmapi), or pin {} "
                            "(TRT-LLM 1.2.1)".format(image_matrix.ENGINE_LEGACY_WHY, img["ref"], trt, image_matrix.PINNED))
        if want == "trtllm-llmapi" and not image_matrix.llmapi_supports(gpu["compute_capability"]):
            raise PlanError("runtime trtllm-llmapi on compute capability {}: TensorRT-LLM's support matrix lists "
                            "Ampere (SM80/SM86) and newer only; drop the runtime override".format(gpu["compute_capability"]))
        _check_qwen3_version(m, want, img)
        if want == "trtllm-engine":
            reasons.append("runtime trtllm-engine: operator override; LEGACY: {} (image {} has TensorRT-LLM {}, the "
                           "1.2.x this project builds engines with)".format(image_matrix.ENGINE_LEGACY_WHY, img["ref"], trt))
        elif want == "trtllm-llmapi":
            reasons.append("runtime trtllm-llmapi: operator override (checked: image {} has TensorRT-LLM {}, {} is "
                           "supported)".format(img["ref"], trt, _arch(gpu["compute_capability"])))
        else:
            reasons.append("runtime transformers: operator override")
        return want
    rt, why = default_runtime(gpu, img)
    _check_qwen3_version(m, rt, img)
    reasons.append(why)
    return rt


def _quantized_map(req, m=None):
    """The operator's pre-quantized checkpoints (triton_fleet_quantized_checkpoints), checked (against `m`'s catalog
    entries when given)."""
    try:
        parsed = checkpoints.parse(req.get("quantized_checkpoints"))
        if m is not None:
            checkpoints.check(m, parsed)
        return parsed
    except checkpoints.CheckpointError as exc:
        raise PlanError(str(exc)) from None


def _prequantized(m, precision, gpu, req):
    """(checkpoint or None, why) for a quantized precision on trtllm-llmapi (checkpoints.resolve)."""
    try:
        return checkpoints.resolve(m, precision, gpu["compute_capability"], _quantized_map(req))
    except checkpoints.CheckpointError as exc:
        raise PlanError(str(exc)) from None


def _needs_checkpoint(runtime, precision):
    return runtime == "trtllm-llmapi" and precision in checkpoints.QUANTIZED_PRECISIONS


def _precisions(req, device, runtime, gpu, m):
    """(ordered precisions to try, rejected [(precision, why)], [precisions rejected for lack of a checkpoint])."""
    want = req.get("precision") or None
    if want and want not in memory_model.WEIGHT_PRECISIONS:
        raise PlanError("unknown precision {!r}; choose one of {}".format(want, ", ".join(memory_model.WEIGHT_PRECISIONS)))
    allowed = RUNTIME_PRECISIONS[runtime]
    if want:
        if want not in allowed:
            raise PlanError("precision {} is not available with runtime {} (it loads {}){}".format(want, runtime, ", ".join(allowed),
                               "; int8 weight-only needs the legacy runtime trtllm-engine" if want == "int8_wo" else ""))
        if want == "fp8" and not gpu["fp8"]:
            raise PlanError("precision fp8 needs FP8 tensor cores (compute capability >= 8.9: L4, L40S, H100, H200, "
                            "B200); {} is {}: use int8_wo or int4_awq, or bf16 with more GPUs".format(gpu["name"], gpu["compute_capability"]))
        if want == "fp32" and device == "gpu" and runtime != "transformers":
            raise PlanError("fp32 weights are only planned for the transformers runtime")
        if _needs_checkpoint(runtime, want):
            ckpt, why = _prequantized(m, want, gpu, req)
            if ckpt is None:
                raise PlanError(f"precision {want} on runtime trtllm-llmapi loads a pre-quantized checkpoint, and there is "
                                f"none it can load here: {why}; or drop the precision override")
        return [want], [], []
    if device == "cpu":
        return ["fp32"], [], []
    if runtime == "transformers":
        return ["bf16"], [("int8_wo/int4", "the transformers runtime serves unquantized weights only")], []
    order, rejected, no_checkpoint = [], [], []
    for p in AUTO_PRECISIONS:
        if p == "fp8" and not gpu["fp8"]:
            rejected.append((p, "{} has no FP8 tensor cores (compute capability {} < 8.9)".format(gpu["name"], gpu["compute_capability"])))
        elif p not in allowed:
            rejected.append((p, f"runtime {runtime} cannot load {p} for this model (TRT-LLM quantization table)"))
        elif _needs_checkpoint(runtime, p) and _prequantized(m, p, gpu, req)[0] is None:
            rejected.append((p, _prequantized(m, p, gpu, req)[1]))
            no_checkpoint.append(p)
        else:
            order.append(p)
    return order, rejected, no_checkpoint


def _kv_dtype(req, precision, device, gpu):
    want = req.get("kv_cache_dtype")
    if want:
        if want not in memory_model.KV_DTYPES:
            raise PlanError("unknown KV-cache dtype {!r}; choose one of {}".format(want, ", ".join(memory_model.KV_DTYPES)))
        if want == "fp8" and not gpu["fp8"]:
            raise PlanError("an fp8 KV cache is planned only on GPUs with FP8 (compute capability >= 8.9); "
                            "{} is {}: use bf16 or int8".format(gpu["name"], gpu["compute_capability"]))
        return want
    if precision == "fp32":
        return "fp32"
    if precision == "fp8":
        return "fp8"
    return "fp16" if precision == "fp16" else "bf16"


def _tp_choices(req, m, gpu, runtime, device):
    """(TP values to try, rejected [(tp, why)])."""
    count = gpu["count_per_host"]
    heads, kvh = m["num_attention_heads"], m["num_kv_heads"]

    def why_not(t):
        if t > count:
            return f"TP={t} needs {t} GPUs, the host has {count}"
        if count % t:
            return f"TP={t} does not divide the host's {count} GPUs"
        if heads % t:
            return f"TP={t} does not divide {heads} attention heads"
        if kvh % t and t % kvh:
            return f"TP={t} neither divides the {kvh} KV heads nor is a multiple of them (KV heads cannot be replicated evenly)"
        return None

    want = req.get("tp")
    if device == "cpu":
        if want and int(want) != 1:
            raise PlanError(f"TP={want} is impossible on a CPU host; drop the tp override")
        return [1], []
    if want:
        t = int(want)
        if t < 1:
            raise PlanError(f"TP must be >= 1, got {t}")
        if runtime == "transformers" and t != 1:
            raise PlanError("the transformers runtime serves one GPU per replica (TP=1); drop the tp override or "
                            "choose a TensorRT-LLM runtime")
        err = why_not(t)
        if err:
            raise PlanError("tp override: {}; choose TP from {}".format(
                err, ", ".join(str(x) for x in TP_CHOICES if not why_not(x)) or "1"))
        return [t], []
    if runtime == "transformers":
        return [1], []
    ok, rejected = [], []
    for t in TP_CHOICES:
        if t > count:
            break
        err = why_not(t)
        (rejected.append((t, err)) if err else ok.append(t))
    return ok, rejected


def _ep_choice(req, m, runtime, tp):
    """(EP, why) for one TP size: the expert-parallel degree and the reason for it."""
    want = req.get("ep")
    moe = m.get("moe")
    if want is not None and want != "":
        try:
            ep = int(want)
        except (TypeError, ValueError):
            raise PlanError(f"EP must be a whole number, got {want!r}") from None
        if ep != 1 and not moe:
            raise PlanError(f"ep override {ep}: {m['key']} is dense (no experts); drop the ep override")
        # Before the TP check: transformers always has TP=1, and this is the reason that helps.
        if ep > 1 and runtime == "transformers":
            raise PlanError("the transformers runtime has no expert parallelism; drop the ep override")
        if ep < 1 or tp % ep:
            raise PlanError(f"ep override {ep}: EP must divide TP={tp} (experts are spread over EP of the TP GPUs)")
        if moe and moe["num_experts"] % ep:
            raise PlanError(f"ep override {ep}: EP must divide the {moe['num_experts']} experts")
        return ep, "operator override"
    if not moe:
        return 1, None
    if tp == 1:
        return 1, "EP=1: one GPU holds every expert"
    if runtime == "trtllm-llmapi":
        ep = tp
        while moe["num_experts"] % ep:
            ep //= 2
        return ep, ("EP={}: the {} experts spread over the {} GPUs (moe_expert_parallel_size; each GPU holds {} "
                    "whole experts instead of a 1/{} slice of each)".format(ep, moe["num_experts"], tp,
                                                                           moe["num_experts"] // ep, tp))
    return 1, ("EP=1: experts split TP ways (the engine workflow's default; quantize.py has no expert-parallel "
               "flag)")


# ----------------------------------------------------------------------------------------- evaluation

def _limits(context, concurrency, replicas, runtime, req):
    out_len = min(int(req.get("max_output_len") or DEFAULTS["max_output_len"]), context // 2)
    per_replica = int(math.ceil(concurrency / float(replicas)))
    if runtime == "transformers":
        mnt = context
    else:
        mnt = min(int(req.get("max_num_tokens") or DEFAULTS["max_num_tokens"]), per_replica * context)
    return {"max_batch_size": per_replica, "max_input_len": context - out_len, "max_seq_len": context,
            "max_num_tokens": mnt, "max_output_len": out_len, "max_beam_width": 1}


def evaluate(m, gpu, runtime, precision, kv_dtype, *, tp, context, concurrency, fraction, req, device="gpu", ep=1):
    """Memory of one candidate on one GPU (or the CPU host) and whether the request fits.

    TensorRT-LLM runtimes hold KV in whole blocks of tokens_per_block tokens. trtllm-llmapi also captures CUDA
    graphs for the decode batch sizes up to max_batch_size after the KV pool is allocated: they must fit in the
    headroom the KV fraction leaves, so the fraction is lowered to make room when it would not (memory_model).
    """
    replicas = 1 if device == "cpu" else gpu["count_per_host"] // tp
    limits = _limits(context, concurrency, replicas, runtime, req)
    act = "float32" if precision == "fp32" else ("float16" if precision == "fp16" else "bfloat16")
    w = memory_model.weight_bytes(m, precision, tp, ep=ep)
    reserve = memory_model.runtime_reserve(m, "cpu" if device == "cpu" else runtime, limits["max_num_tokens"],
                                           limits["max_batch_size"], act_dtype=act, tp=tp)
    kv_tok = memory_model.kv_bytes_per_token(m, kv_dtype, tp)
    paged = runtime.startswith("trtllm")
    tpb = int(req.get("tokens_per_block") or DEFAULTS["tokens_per_block"]) if paged else None
    need_tokens = memory_model.kv_tokens_needed(limits["max_batch_size"], context, tpb)
    mem = gpu["memory_bytes"]
    res = {"precision": precision, "kv_dtype": kv_dtype, "tp": tp, "ep": ep, "replicas": replicas, "limits": limits,
           "weights": w, "reserve": reserve["total"], "reserve_detail": reserve, "kv_per_token": kv_tok,
           "need_tokens": need_tokens, "need_kv_bytes": need_tokens * kv_tok, "memory": mem, "act_dtype": act,
           "fraction": fraction, "cuda_graphs": None, "graph_bytes": 0}
    if mem is None:  # CPU host whose memory is not known: no fit check
        res.update(fits=True, capacity=need_tokens, kv_pool=need_tokens * kv_tok, unchecked=True)
        return res
    free = max(0, mem - w - reserve["total"])
    if runtime == "trtllm-llmapi":
        sizes = memory_model.cuda_graph_batch_sizes(limits["max_batch_size"])
        graphs = memory_model.cuda_graph_bytes(sizes)
        # the largest fraction (3 decimals, rounded down) whose headroom holds the graphs
        room = math.floor((1.0 - graphs / float(free)) * 1000) / 1000.0 if free else 0.0
        res.update(cuda_graphs=sizes, graph_bytes=graphs, fraction=min(fraction, room), asked_fraction=fraction)
    frac = res["fraction"]
    if frac < MIN_KV_FRACTION:
        res.update(fits=False, capacity=0, kv_pool=0, available_kv=0, graphs_crowd_out=True)
        return res
    cap = memory_model.kv_capacity_tokens(mem, w, reserve["total"], kv_tok, frac, tokens_per_block=tpb)
    pool = int(frac * free) if paged else need_tokens * kv_tok
    res.update(fits=cap >= need_tokens, capacity=cap, kv_pool=pool, available_kv=int(frac * free))
    return res


def _where(gpu, tp, device):
    if device == "cpu":
        return "the CPU host"
    return "one {}".format(gpu["name"].replace("NVIDIA ", "")) + (f" (TP={tp})" if tp > 1 else "")


def _reject_reason(r, gpu, device):
    where = _where(gpu, r["tp"], device)
    per = " per GPU" if device == "gpu" else ""
    if r["weights"] + r["reserve"] >= r["memory"]:
        return ("{} weights need {} GiB{} plus {} GiB runtime reserve: more than the {} GiB of {}".format(r["precision"], gib(r["weights"]), per, gib(r["reserve"]), gib(r["memory"]), where))
    if r.get("graphs_crowd_out"):
        return ("{} weights need {} GiB{} + {} GiB reserve; the CUDA graphs of batch sizes {} (up to {} GiB) leave "
                "no room for a KV pool on {}".format(r["precision"], gib(r["weights"]), per, gib(r["reserve"]),
                                                    r["cuda_graphs"], gib(r["graph_bytes"]), where))
    return ("{} weights need {} GiB{} + {} GiB reserve; the KV cache for {} x {} tokens needs {} GiB{} but only "
            "{} GiB is left on {} ({} tokens, {} sequences at {})".format(r["precision"], gib(r["weights"]), per, gib(r["reserve"]), r["limits"]["max_batch_size"],
               r["limits"]["max_seq_len"], gib(r["need_kv_bytes"]), per, gib(r["available_kv"]), where,
               r["capacity"], r["capacity"] // r["limits"]["max_seq_len"], r["limits"]["max_seq_len"]))


def _candidate_name(precision, tp, runtime, ep=1):
    return f"{precision} tp{tp}{f' ep{ep}' if ep > 1 else ''} {runtime}"


def _search(m, gpu, runtime, precisions, kv_req, *, tps, context, concurrency, fraction, req, device):
    """Try candidates in the choice order: precision first, then TP. Returns (chosen, tried)."""
    tried = []
    for tp in tps:
        ep, ep_why = _ep_choice(kv_req, m, runtime, tp)
        for p in precisions:
            kv = _kv_dtype(kv_req, p, device, gpu)
            r = evaluate(m, gpu, runtime, p, kv, tp=tp, context=context, concurrency=concurrency, fraction=fraction,
                         req=req, device=device, ep=ep)
            r["ep_why"] = ep_why
            if r["fits"]:
                return r, tried
            tried.append(r)
    return None, tried


# -------------------------------------------------------------------------------------- failure help

def _auto_fit(m, gpu, runtime, count, *, context, concurrency, fraction, req, tps=None):
    g = dict(gpu, count_per_host=count)
    # the operator's pre-quantized checkpoints hold for every option, so an option never names a precision that
    # has no checkpoint the runtime loads on that GPU
    precs, _, _ = _precisions({"quantized_checkpoints": req.get("quantized_checkpoints")}, "gpu", runtime, g, m)
    tp_list, _ = _tp_choices({}, m, g, runtime, "gpu")
    if tps is not None:
        tp_list = [t for t in tp_list if t in tps]
    chosen, tried = _search(m, g, runtime, precs, {}, tps=tp_list, context=context, concurrency=concurrency,
                            fraction=fraction, req=req, device="gpu")
    return chosen, tried


def _round_ctx(tokens):
    return (tokens // 1024) * 1024


def _options(m, gpu, runtime, img, *, context, concurrency, fraction, req, tried):
    """What would fit: less context or concurrency here, more GPUs of this SKU, or a larger GPU."""
    opts = []
    count = gpu["count_per_host"]
    label = gpu["name"].replace("NVIDIA ", "")
    best = max(tried, key=lambda r: r["capacity"] * r["replicas"]) if tried else None
    if best and best["capacity"] > 0:
        per_rep = best["limits"]["max_batch_size"]
        ctx = min(context, _round_ctx(best["capacity"] // per_rep))
        if ctx >= 2048:
            opts.append("{}x {}{} at {} tokens x {} ({})".format(
                count, label, " with TP={}".format(best["tp"]) if best["tp"] > 1 else "", ctx, concurrency,
                best["precision"]))
        conc = (best["capacity"] // context) * best["replicas"]
        if conc >= 1:
            opts.append("{}x {}{} at {} tokens x {} concurrent ({})".format(
                count, label, " with TP={}".format(best["tp"]) if best["tp"] > 1 else "", context, conc,
                best["precision"]))
    # more GPUs of the same SKU: the next size with what it holds, then the first size that fits it all
    for n in TP_CHOICES:
        if n <= count:
            continue
        chosen, tried_n = _auto_fit(m, gpu, runtime, n, context=context, concurrency=concurrency, fraction=fraction,
                                    req=req, tps=[n])
        if chosen:
            opts.append("{}x {} with TP={} ({})".format(n, label, n, chosen["precision"]))
            break
        r = max(tried_n, key=lambda x: x["capacity"]) if tried_n else None
        if r and n == min(t for t in TP_CHOICES if t > count):
            ctx = min(context, _round_ctx(r["capacity"] // r["limits"]["max_batch_size"]))
            if ctx >= 2048:
                opts.append("{}x {} with TP={} and {} tokens ({})".format(n, label, n, ctx, r["precision"]))
    # a larger GPU: one board if any fits, else the fewest boards of the smallest kind that fits
    found = None
    for n in TP_CHOICES:
        for sku in gpu_catalog.UPGRADE_ORDER:
            cat = gpu_catalog.get(sku)
            if cat["memory_mib"] * gpu_catalog.MIB <= gpu["memory_bytes"]:
                continue
            big = {"sku": sku, "name": cat["name"], "count_per_host": n,
                   "memory_bytes": cat["memory_mib"] * gpu_catalog.MIB,
                   "compute_capability": cat["compute_capability"], "nvlink": cat["nvswitch"],
                   "bandwidth_gbs": cat["bandwidth_gbs"], "fp8": gpu_catalog.has_fp8(cat["compute_capability"])}
            # the runtime the plan itself would use on that GPU (an override only where it could run there)
            rt = req.get("runtime") or default_runtime(big, img)[0]
            if rt == "trtllm-llmapi" and not image_matrix.llmapi_supports(big["compute_capability"]):
                continue
            chosen, _ = _auto_fit(m, big, rt, n, context=context, concurrency=concurrency, fraction=fraction,
                                  req=req, tps=[n])
            if chosen:
                found = (n, cat["name"].replace("NVIDIA ", ""), chosen)
                break
        if found:
            break
    if found:
        n, name, chosen = found
        opts.append(("an {} ({})".format(name, chosen["precision"])) if n == 1 else
                    "{}x {} with TP={} ({})".format(n, name, n, chosen["precision"]))
    return opts


def _no_checkpoint_note(missing):
    """Which quantized precisions were not tried for lack of a pre-quantized checkpoint the runtime loads."""
    if not missing:
        return ""
    return (" ({} not tried: no pre-quantized checkpoint TensorRT-LLM's PyTorch backend loads here; name one in {})"
            .format(", ".join(missing), checkpoints.VARIABLE))


def _join_options(opts):
    if not opts:
        return "no catalog GPU fits this request; lower the context length or concurrency"
    if len(opts) == 1:
        return opts[0]
    return ", ".join(opts[:-1]) + ", or " + opts[-1]


def _trtllm_limit_reasons(r, runtime, context, req):
    """Why the TensorRT-LLM limits are what they are (upstream defaults: docs/compatibility.md, LLM API arguments)."""
    lim = r["limits"]
    chunks = ("a prompt longer than that ({} tokens at most) is prefilled in chunks of it".format(lim["max_input_len"])
              if lim["max_num_tokens"] < lim["max_input_len"] else
              "new prompts and running decodes share each step's budget")
    out = ["max_num_tokens {}: tokens one forward step takes ({}); chunked prefill on (enable_chunked_prefill, off by "
           "default upstream): {}".format(
               lim["max_num_tokens"], "override" if req.get("max_num_tokens") else
               "TensorRT-LLM's default 8192, or the batch's whole sequences when fewer", chunks)]
    if runtime == "trtllm-llmapi":
        asked = r.get("asked_fraction", r["fraction"])
        out.append("CUDA graphs for decode batch sizes {} (cuda_graph_config, padded to the next size; TensorRT-LLM's "
                   "own list for max_batch_size {}); up to 200 MB each = {} GiB, captured after the KV pool, in the "
                   "headroom the KV fraction leaves".format(r["cuda_graphs"], lim["max_batch_size"],
                                                            gib(r["graph_bytes"])))
        if r["fraction"] < asked:
            out.append("KV fraction {} instead of {}: the headroom ({:.0%} of the {} GiB left after weights and "
                       "reserve) must hold the CUDA graphs".format(r["fraction"], asked, 1 - r["fraction"],
                                                                   gib(r["memory"] - r["weights"] - r["reserve"])))
        else:
            out.append("KV fraction {}: free_gpu_memory_fraction of the memory left after weights and the profiled "
                       "forward (TensorRT-LLM's default 0.9); the rest holds the CUDA graphs".format(r["fraction"]))
    return out


# ------------------------------------------------------------------------------------------- the plan

def plan(req):
    """The serving profile (docs/profile.md) for one host group, or PlanError."""
    req = dict(req or {})
    device = req.get("device") or DEFAULTS["device"]
    if device not in ("gpu", "cpu"):
        raise PlanError(f"device must be gpu or cpu, got {device!r} (triton_fleet_device)")
    m = _model(req)
    context = _int(req, "context_length", 2, "context length")
    concurrency = _int(req, "concurrency", 1, "concurrency")
    fraction = float(req.get("kv_cache_free_gpu_mem_fraction") or DEFAULTS["kv_cache_free_gpu_mem_fraction"])
    if not MIN_KV_FRACTION <= fraction <= 0.99:
        raise PlanError(f"kv_cache_free_gpu_mem_fraction must be between 0.05 and 0.99, got {fraction}")
    yarn = req.get("yarn_factor")
    if yarn:
        yarn = float(yarn)
        if not m["model_type"].startswith("qwen"):
            raise PlanError("YaRN (yarn_factor) is planned for Qwen models only; {} is {}".format(m["key"], m["model_type"]))
        if context <= m["max_position_embeddings"]:
            raise PlanError("yarn_factor {} is set but {} tokens fit {} without it (max_position_embeddings {}); "
                            "static YaRN hurts short texts (Qwen docs): remove yarn_factor".format(yarn, context, m["key"], m["max_position_embeddings"]))
    limit = model_catalog.max_context(m, yarn)
    if context > limit:
        native = m.get("original_max_position_embeddings") or m["max_position_embeddings"]
        hint = (f"; Qwen models reach {native * 4} tokens with YaRN: set triton_fleet_yarn_factor {4.0:.1f} (tools/plan --yarn "
                f"{4.0:.1f}), recommended only when most prompts exceed {native} tokens") if m["model_type"].startswith("qwen") and not yarn else \
            "; lower the context length"
        raise PlanError("context length {} exceeds {}'s maximum of {} tokens ({}){}".format(context, m["key"], limit, f"YaRN x{yarn}" if yarn else "max_position_embeddings", hint))
    gpu = _gpu_spec(req, device)
    img = _image(req)
    _quantized_map(req, m)   # a wrong triton_fleet_quantized_checkpoints entry fails every plan, not only a quantized one
    reasons = []
    runtime = _choose_runtime(req, device, gpu, img, m, reasons=reasons)
    precisions, prec_rejected, no_checkpoint = _precisions(req, device, runtime, gpu, m)
    tps, tp_rejected = _tp_choices(req, m, gpu, runtime, device)
    alternatives = [{"name": f"{p} (any TP)", "rejected_because": why} for p, why in prec_rejected]
    alternatives += [{"name": f"tp{t}", "rejected_because": why} for t, why in tp_rejected]
    if not tps:
        raise PlanError("no tensor-parallel size divides {}'s {} heads / {} KV heads within {} GPUs".format(m["key"], m["num_attention_heads"], m["num_kv_heads"], gpu["count_per_host"]),
                        alternatives)
    chosen, tried = _search(m, gpu, runtime, precisions, req, tps=tps, context=context, concurrency=concurrency,
                            fraction=fraction, req=req, device=device)
    for r in tried:
        alternatives.append({"name": _candidate_name(r["precision"], r["tp"], runtime, r["ep"]),
                             "rejected_because": _reject_reason(r, gpu, device)})
    where = "{}x {}".format(gpu["count_per_host"], gpu["label"]) if device == "gpu" else gpu["label"]
    if not chosen:
        best = max(tried, key=lambda r: r["capacity"] * r["replicas"])
        per = " per GPU" if best["tp"] > 1 else ""
        tp_txt = "with TP={}, ".format(best["tp"]) if best["tp"] > 1 else ""
        if best["weights"] + best["reserve"] >= best["memory"]:
            why = "{}{} weights need {} GiB{} (+ {} GiB runtime reserve)".format(
                tp_txt, best["precision"].split("_")[0], gib(best["weights"]), per, gib(best["reserve"]))
        else:
            why = "{}{} weights need {} GiB{} and the KV cache {} GiB{} ({} GiB left for it)".format(
                tp_txt, best["precision"].split("_")[0], gib(best["weights"]), per, gib(best["need_kv_bytes"]), per,
                gib(best["available_kv"]))
        overrides = [k for k in ("runtime", "precision", "tp", "kv_cache_dtype") if req.get(k)]
        opts = [] if device == "cpu" else _options(m, gpu, runtime, img, context=context,
                                                   concurrency=concurrency, fraction=fraction, req=req,
                                                   tried=tried)
        msg = "{} does not fit {} at {} tokens x {} concurrent{}: {}{}; options: {}".format(
            m["key"], where, context, concurrency,
            " with the override {}".format(", ".join(f"{k}={req[k]}" for k in overrides)) if overrides else "",
            why, _no_checkpoint_note(no_checkpoint), _join_options(opts))
        raise PlanError(msg, alternatives, opts, reasons)

    # ---- the chosen candidate becomes the profile
    r = chosen
    precision, kv_dtype, tp, ep = r["precision"], r["kv_dtype"], r["tp"], r["ep"]
    if req.get("precision"):
        reasons.append("weights {}: operator override; fits ({} GiB per GPU)".format(precision, gib(r["weights"])))
    elif device == "cpu":
        reasons.append("weights fp32: CPU host, transformers runtime computes in float32")
    elif tried:
        reasons.append("weights {}: first precision in the order {} that fits {} x {} tokens ({} GiB per GPU)".format(
            precision, " > ".join(precisions), r["limits"]["max_batch_size"], context, gib(r["weights"])))
    else:
        reasons.append("weights {}: 16-bit weights fit with the KV cache the request needs ({} GiB per GPU)".format(precision, gib(r["weights"])))
    ckpt = None
    if _needs_checkpoint(runtime, precision):
        ckpt, ckpt_why = _prequantized(m, precision, gpu, req)
        reasons.append("checkpoint {}@{}: {} weights load only from a pre-quantized checkpoint (TensorRT-LLM's "
                       "PyTorch backend does not quantize at load): {}. Fetched and loaded instead of {}, it serves "
                       "the same model{}".format(
                           ckpt["hf_id"], ckpt["revision"] or "NOT PINNED", precision, ckpt_why,
                           m.get("hf_id") or m["key"],
                           "" if ckpt["revision"] else "; " + checkpoints.unpinned_message(ckpt)
                           + " (the preflight refuses this plan until then)"))
    reasons.append("KV cache {}: {}".format(kv_dtype, "follows fp8 weights (Hopper recipe: FP8 weights + FP8 KV)"
                                        if kv_dtype == "fp8" and not req.get("kv_cache_dtype") else
                                        "operator override" if req.get("kv_cache_dtype") else
                                        "same dtype as the activations"))
    if device == "gpu":
        if tp > 1:
            reasons.append("TP={}: {}; {}".format(tp, "operator override" if req.get("tp") else
                                              "no precision fits one GPU" + _no_checkpoint_note(no_checkpoint),
                                              "NVLink between the GPUs" if gpu["nvlink"]
                                              else "no NVLink: all-reduce over PCIe slows decode"))
        else:
            reasons.append("TP=1: one GPU per replica fits, {} replica(s) per host".format(r["replicas"]))
        kvh = m["num_kv_heads"]
        if tp > kvh:
            reasons.append("KV heads: TP={} over {} KV heads replicates each KV head on {} GPUs (one per GPU); the "
                           "KV cache per GPU holds that one head: {} bytes per token".format(
                               tp, kvh, tp // kvh, r["kv_per_token"]))
        if r.get("ep_why"):
            reasons.append(r["ep_why"] if r["ep_why"] != "operator override" else f"EP={ep}: operator override")
        reasons.append("PP=1: pipeline parallelism only pays across nodes; within a host TP is used")
    if r.get("unchecked"):
        reasons.append("host memory not given: no memory fit check (pass host_memory_bytes)")
    if runtime.startswith("trtllm"):
        reasons.extend(_trtllm_limit_reasons(r, runtime, context, req))
    reasons.append("KV pool holds {} tokens per replica: {} concurrent sequences of {} tokens per host".format(r["capacity"], (r["capacity"] // context) * r["replicas"], context))
    if device == "gpu" and tp < gpu["count_per_host"]:
        for t in tps:
            if t > tp:
                alternatives.append({"name": _candidate_name(precision, t, runtime),
                                     "rejected_because": f"not needed: TP={tp} fits, and more replicas per host serve "
                                                         "more requests than a wider TP"})

    tps_s, eff, roof = memory_model.decode_tokens_per_s_bs1(
        m, runtime, precision, kv_dtype, gpu["bandwidth_gbs"], context_tokens=context // 2, tp=tp, nvlink=gpu["nvlink"],
        device=device, ep=ep)
    params = memory_model.param_count(m)
    if device == "cpu":
        device_ids = []
    else:
        device_ids = [",".join(str(i * tp + j) for j in range(tp)) for i in range(r["replicas"])]
    model = {
        "key": m["key"], "hf_id": m.get("hf_id"), "revision": req.get("model_revision") or DEFAULTS["model_revision"],
        "served_name": req.get("served_name") or m["key"], "architecture": m["architecture"],
        "num_layers": m["num_layers"], "hidden_size": m["hidden_size"],
        "num_attention_heads": m["num_attention_heads"], "num_kv_heads": m["num_kv_heads"],
        "head_dim": m["head_dim"], "intermediate_size": m["intermediate_size"], "vocab_size": m["vocab_size"],
        "max_position_embeddings": m["max_position_embeddings"],
        "tie_word_embeddings": m["tie_word_embeddings"], "params": params,
    }
    if m.get("moe"):
        model["moe"] = m["moe"]
    if ckpt:
        # the checkpoint to fetch and load when it is not the base one (a pre-quantized checkpoint of the same model)
        model["checkpoint"] = ckpt
    # the chat template's reasoning behaviour, for the OpenAI service (docs/profile.md): never re-derived there
    model["thinking"] = dict(m.get("thinking") or model_catalog.thinking_of(m["key"], m.get("hf_id"), m["model_type"]))
    if yarn:
        model["rope_scaling"] = {"rope_type": "yarn", "factor": yarn,
                                 "original_max_position_embeddings": m.get("original_max_position_embeddings")}
    sku_part = "cpu" if device == "cpu" else "{}-x{}".format(gpu["sku"], gpu["count_per_host"])
    profile = {
        "schema_version": SCHEMA_VERSION,
        "name": "{}_{}_{}_tp{}_{}".format(m["key"], sku_part, precision, tp, runtime),
        "group": req.get("group") or DEFAULTS["group"],
        "model": model,
        "runtime": runtime,
        "device": device,
        "gpu": {"sku": gpu["sku"], "name": gpu["name"], "count_per_host": gpu["count_per_host"],
                "memory_bytes": gpu["memory_bytes"], "compute_capability": gpu["compute_capability"],
                "nvlink": gpu["nvlink"]},
        "precision": {"dtype": r["act_dtype"], "weights": precision, "kv_cache": kv_dtype},
        "parallel": {"tp": tp, "pp": 1, "gpus_per_replica": 0 if device == "cpu" else tp,
                     "replicas_per_host": r["replicas"], "gpu_device_ids": device_ids,
                     "launch_mode": launch_mode(runtime, tp, max(1, len(device_ids)))},
        "limits": r["limits"],
        "kv_cache": {"free_gpu_mem_fraction": r["fraction"], "enable_block_reuse": True,
                     "tokens_per_block": int(req.get("tokens_per_block") or DEFAULTS["tokens_per_block"])},
        "scheduler": {"batch_scheduler_policy": "guaranteed_no_evict", "enable_chunked_context": True,
                      "max_queue_delay_microseconds": 0, "max_queue_size": 0},
        "image": {"ref": img["ref"], "triton": img.get("triton"), "trtllm": img.get("trtllm"),
                  "cuda": img.get("cuda"), "min_driver_branch": img.get("min_driver_branch")},
        "predicted": {
            "weights_bytes_per_gpu": r["weights"], "kv_bytes_per_gpu": r["kv_pool"],
            "reserve_bytes_per_gpu": r["reserve"], "cuda_graph_bytes_per_gpu": r["graph_bytes"],
            "total_bytes_per_gpu": r["weights"] + r["reserve"] + r["kv_pool"] + r["graph_bytes"],
            "kv_tokens_capacity": r["capacity"],
            "max_concurrency_at_max_seq_len": (r["capacity"] // context) * r["replicas"],
            "decode_tokens_per_s_bs1": round(tps_s, 1), "efficiency_factor": round(eff, 3),
        },
        "reasons": reasons,
        "alternatives": alternatives,
    }
    if m.get("moe"):
        profile["parallel"]["ep"] = ep
    if r["cuda_graphs"]:
        # TorchLlmArgs.cuda_graph_config: graphs for these decode batch sizes, a batch padded up to the next one
        profile["cuda_graphs"] = {"batch_sizes": r["cuda_graphs"], "enable_padding": True}
    profile["fingerprint"] = fingerprint(profile)
    return profile


# ------------------------------------------------------------------------------------------- display

def _thinking_text(thinking):
    if not thinking:
        return "unknown (profile planned before model.thinking existed)"
    return {"switchable": "switchable (thinks unless the request sets enable_thinking=false)",
            "never": "never (the template has no reasoning turn)",
            "always": "always" + (" (the template opens <think>; the output holds only </think>)"
                                  if thinking.get("template_opens_think") else "")}[thinking["mode"]]


def _checkpoint_text(p):
    """Which checkpoint the hosts fetch and load: the base one, or a pre-quantized one of the same model."""
    c = p["model"].get("checkpoint")
    base = "{}@{}".format(p["model"]["hf_id"] or p["model"]["key"], p["model"]["revision"])
    if not c:
        built = " (the engine build quantizes it)" if p["runtime"] == "trtllm-engine" and \
            p["precision"]["weights"] not in ("bf16", "fp16", "fp32") else ""
        return f"{base}, the base checkpoint{built}"
    rev = c["revision"] or "NOT PINNED (the preflight refuses this plan: set {}.{}.revision)".format(
        checkpoints.VARIABLE, c["precision"])
    return "{}@{}  pre-quantized {} ({}, {}), fetched and loaded instead of {}".format(
        c["hf_id"], rev, c["precision"], c["format"],
        "Qwen's own" if c.get("source") == "catalog" else "named in " + checkpoints.VARIABLE, base)


def format_table(profile):
    """A readable multi-line summary of a profile (what preflight and tools/plan print)."""
    p = profile
    g, lim, pr, par, img = p["gpu"], p["limits"], p["predicted"], p["parallel"], p["image"]
    if p["device"] == "cpu":
        hw = "CPU host" + (" ({} GiB)".format(gib(g["memory_bytes"])) if g.get("memory_bytes") else "")
    else:
        hw = "{}x {} [{}], {} GiB each, cc {}, NVLink {}".format(
            g["count_per_host"], g["name"], g["sku"], gib(g["memory_bytes"]), g["compute_capability"],
            "yes" if g["nvlink"] else "no")
    trt = "TRT-LLM {}, CUDA {}, driver >= R{}".format(img["trtllm"], img["cuda"], img["min_driver_branch"]) \
        if img.get("trtllm") else "no TensorRT-LLM"
    mem = "{} GiB".format(gib(g["memory_bytes"])) if g.get("memory_bytes") else "unknown"
    rows = [
        ("profile", "{}  (group {})".format(p["name"], p["group"])),
        ("model", "{}  {}@{}, {:.2f} B params, served as {}".format(
            p["model"]["key"], p["model"]["hf_id"] or "local config.json", p["model"]["revision"],
            p["model"]["params"] / 1e9, p["model"]["served_name"])),
        ("checkpoint", _checkpoint_text(p)),
        ("thinking", _thinking_text(p["model"].get("thinking"))),
        ("hardware", hw),
        ("runtime", "{}{}  image {} ({})".format(
            p["runtime"], f" [LEGACY: the TensorRT engine backend's last release was TensorRT-LLM {image_matrix.ENGINE_LAST_RELEASE}]" if p["runtime"] == "trtllm-engine" else "", img["ref"], trt)),
        ("precision", "weights {}, KV cache {}, compute {}".format(
            p["precision"]["weights"], p["precision"]["kv_cache"], p["precision"]["dtype"])),
        ("parallel", "TP {} x PP {}{}, {} replica(s) per host, devices {}, Triton start: {}".format(
            par["tp"], par["pp"], " x EP {}".format(par["ep"]) if "ep" in par else "", par["replicas_per_host"],
            "; ".join(par["gpu_device_ids"]) or "cpu", par.get("launch_mode", "single"))),
        ("limits", "max_seq_len {}, max_input_len {}, max_output_len {}, max_batch_size {}, max_num_tokens {}".format(
            lim["max_seq_len"], lim["max_input_len"], lim["max_output_len"], lim["max_batch_size"],
            lim["max_num_tokens"])),
        ("memory/GPU" if p["device"] == "gpu" else "memory", "weights {} + reserve {} + KV {}{} = {} GiB of {}".format(
            gib(pr["weights_bytes_per_gpu"]), gib(pr["reserve_bytes_per_gpu"]), gib(pr["kv_bytes_per_gpu"]),
            " + CUDA graphs {}".format(gib(pr["cuda_graph_bytes_per_gpu"])) if pr.get("cuda_graph_bytes_per_gpu") else "",
            gib(pr["total_bytes_per_gpu"]), mem)),
        ("KV capacity", "{} tokens per replica; {} concurrent at {} tokens per host (KV fraction {})".format(
            pr["kv_tokens_capacity"], pr["max_concurrency_at_max_seq_len"], lim["max_seq_len"],
            p["kv_cache"]["free_gpu_mem_fraction"])),
        ("decode bs=1", "~{:.1f} tokens/s (roofline x efficiency {:.3f})".format(
            pr["decode_tokens_per_s_bs1"], pr["efficiency_factor"])),
        ("fingerprint", p["fingerprint"]),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    lines.append("why:")
    lines += [f"  - {r}" for r in p["reasons"]]
    if p["alternatives"]:
        lines.append("rejected:")
        lines += ["  - {}: {}".format(a["name"], a["rejected_because"]) for a in p["alternatives"]]
    return lines


def format_failure(err):
    lines = [f"PLAN FAILED: {err}"]
    if getattr(err, "reasons", None):
        lines.append("why:")
        lines += [f"  - {r}" for r in err.reasons]
    if getattr(err, "alternatives", None):
        lines.append("considered:")
        lines += ["  - {}: {}".format(a["name"], a["rejected_because"]) for a in err.alternatives]
    return lines


# ------------------------------------------------------------------------------------------ the fleet

NOT_GPU_GROUPS = {"all", "ungrouped", "gpu_nodes", "gateways", "monitoring", "engine_builders"}
REQUEST_KEYS = ("model", "model_config", "model_revision", "hf_id", "served_name", "context_length", "concurrency",
                "max_output_len", "max_num_tokens", "runtime", "precision", "kv_cache_dtype", "tp", "ep", "image",
                "trtllm_version", "yarn_factor", "kv_cache_free_gpu_mem_fraction", "device", "quantized_checkpoints")


def host_group(host, info, groups, parent="gpu_nodes"):
    """The child group of `parent` that gives `host` its profile (explicit `gpu_group` wins)."""
    explicit = (info.get("request") or {}).get("gpu_group") or info.get("gpu_group")
    if explicit:
        return explicit
    members = set(groups.get(parent) or [])
    cands = sorted(g for g in info.get("group_names") or [] if g not in NOT_GPU_GROUPS and g != parent
                   and set(groups.get(g) or []) <= members)
    if len(cands) > 1:
        raise PlanError(f"{host} is in several child groups of {parent} ({', '.join(cands)}); a host gets one "
                        f"profile: keep it in one GPU group or set triton_fleet_gpu_group for it")
    return cands[0] if cands else parent


def _hardware(info):
    req = info.get("request") or {}
    if (req.get("device") or "gpu") == "cpu":
        return ("cpu", 0)
    facts = info.get("gpu_facts") or {}
    g = gpu_from_facts(facts)
    return (g.get("gpu_sku") or (facts.get("gpus") or [{}])[0].get("name"), g.get("gpu_count", 0))


def _describe_hw(hw):
    return "a CPU host" if hw[0] == "cpu" else f"{hw[1]}x {hw[0]}"


def plan_fleet(hosts, groups, parent="gpu_nodes"):
    """Profiles for every GPU group of the fleet: ({group: profile}, {host: group}, [errors]).

    hosts: {name: {"group_names": [...], "gpu_facts": triton_fleet_gpus dict, "host_memory_bytes": int,
    "request": {model, context_length, ...}}}. A group whose hosts differ in GPU SKU / count or in the
    request is an error naming the host that differs; so is a plan whose pre-quantized checkpoint has no pinned
    revision (checkpoints.unpinned_message). Every group is planned before any error is returned.
    """
    by_group, host_groups, errors = {}, {}, []
    for host in sorted(hosts):
        try:
            grp = host_group(host, hosts[host], groups, parent)
        except PlanError as exc:
            errors.append(str(exc))
            continue
        host_groups[host] = grp
        by_group.setdefault(grp, []).append(host)
    profiles = {}
    for grp, members in sorted(by_group.items()):
        sigs = {h: (_hardware(hosts[h]), tuple((k, str((hosts[h].get("request") or {}).get(k))) for k in REQUEST_KEYS))
                for h in members}
        counts = {}
        for s in sigs.values():
            counts[s] = counts.get(s, 0) + 1
        major = max(counts, key=lambda s: (counts[s], -min(members.index(h) for h in members if sigs[h] == s)))
        odd = [h for h in members if sigs[h] != major]
        if odd:
            same = [h for h in members if sigs[h] == major]
            for h in odd:
                if sigs[h][0] != major[0]:
                    what = f"{_describe_hw(sigs[h][0])} where {', '.join(same)} {'has' if len(same) == 1 else 'have'} " \
                           f"{_describe_hw(major[0])}"
                else:
                    diff = [k for (k, v), (_, w) in zip(sigs[h][1], major[1]) if v != w]
                    what = f"different planning variables ({', '.join(diff)}) from {', '.join(same)}"
                errors.append(f"group {grp} is not homogeneous: {h} has {what}. A GPU group gets one profile: move "
                              f"{h} to its own child group of {parent} (or fix its variables)")
            continue
        first = hosts[members[0]]
        req = dict(first.get("request") or {})
        req["group"] = grp
        if (req.get("device") or "gpu") == "cpu":
            req.setdefault("host_memory_bytes", first.get("host_memory_bytes"))
        else:
            req.update(gpu_from_facts(first.get("gpu_facts") or {}))
        try:
            profile = plan(req)
        except PlanError as exc:
            errors.append(f"group {grp} ({', '.join(members)}): {exc}")
            continue
        ckpt = profile["model"].get("checkpoint")
        if ckpt and not checkpoints.pinned(ckpt.get("revision")):
            # tools/plan shows such a plan (NOT PINNED); the preflight plans none: a fleet serves one state of it
            errors.append(f"group {grp} ({', '.join(members)}) planned {ckpt['precision']} weights: "
                          + checkpoints.unpinned_message(ckpt))
            continue
        profiles[grp] = profile
    return profiles, host_groups, errors
