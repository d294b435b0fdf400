"""Memory and speed model of a decoder-only transformer (pure functions, no I/O).

Formulas (docs/planner.md explains each):

- parameters: V*H (embedding) + L*[q: H*nq*d, k/v: 2*H*nkv*d, o: nq*d*H, QK-norm 2*d, MLP 3*H*I, 2 norms 2*H]
  + H (final norm) + V*H if the LM head is not tied; MoE layers have E experts of 3*H*I_e plus a router H*E.
  Reproduces the exact counts measured on an H200 (tests/fixtures/measured-h200-qwen3.json).
- weight bytes: every decoder linear layer is stored in the chosen precision; the embedding, the LM head,
  norms, biases and MoE routers stay 16-bit (what TRT-LLM / ModelOpt keep unquantized by default).
  fp8: 1 B/weight + one fp32 scale per tensor; int8 weight-only: 1 B + one fp16 scale per output channel;
  int4 AWQ: 0.5 B + one fp16 scale per group of 128 inputs + an fp16 pre-quant scale per input channel;
  int4 GPTQ: 0.5 B + fp16 scale and fp16 zero per group of 128.
- per GPU: linear layers split by TP (when TP exceeds the KV heads, TP must be a multiple of them and each
  GPU holds one replicated KV head: its K/V projections and its KV cache), MoE experts spread over EP GPUs
  and each split TP/EP ways (EP=1: every GPU holds every expert, split TP ways), the LM head split by TP
  (vocab-parallel), the embedding and norms replicated; PP splits the layers, embedding on the first stage,
  LM head on the last (the largest stage counts).
- KV cache per token: 2 (K and V) * layers * KV heads * head_dim * bytes of the KV dtype.
- runtime reserve: CUDA context and libraries (per runtime), NCCL buffers when TP > 1, activations of one
  forward over `max_num_tokens` tokens ((3*I/TP + 4*H) * activation bytes per token, matching the transient
  peak measured on the H200 within 3 %) and fp32 logits for `max_batch_size` rows.
- KV pool (TensorRT-LLM): `free_gpu_memory_fraction` of the memory left after weights and reserve, in whole
  blocks of `tokens_per_block` tokens; a sequence of S tokens takes ceil(S / tokens_per_block) blocks.
- CUDA graphs (trtllm-llmapi): TensorRT-LLM 1.2's TorchLlmArgs captures one graph per batch size of
  `cuda_graph_config.batch_sizes` for decode-only batches, "each CUDA graph can use up to 200 MB of extra
  memory"; the graphs are captured after the KV pool is allocated, so they live in the (1 - fraction) headroom.
- decode roofline at batch 1: memory bandwidth / bytes read per generated token (weights of one GPU, active
  experts only for MoE, plus the KV cache of the sequence), times an efficiency factor per runtime.
"""

import math

GIB = 1024 ** 3
MIB = 1024 ** 2

DTYPE_BYTES = {"fp32": 4, "float32": 4, "bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2, "fp8": 1, "int8": 1}

WEIGHT_PRECISIONS = ("fp32", "bf16", "fp16", "fp8", "int8_wo", "int4_awq", "int4_gptq")
KV_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8")
INT4_GROUP = 128

# CUDA context + cuBLAS/cuDNN/TRT workspaces per GPU, by runtime (assumptions; docs/planner.md).
CUDA_CONTEXT_BYTES = {"trtllm-engine": 1 * GIB, "trtllm-llmapi": int(1.5 * GIB), "transformers": 2 * GIB,
                      "cpu": 512 * MIB}
NCCL_BYTES = 512 * MIB

# Efficiency of bs=1 decode against the memory-bandwidth roofline (assumed for TRT-LLM, see docs/planner.md).
EFFICIENCY = {"trtllm-engine": 0.75, "trtllm-llmapi": 0.70}
# Eager transformers decode is launch-bound: time/token = bytes/bandwidth + layers * this. Calibrated on the
# H200 measurement (qwen3-14b 17.2 tok/s -> 1.30 ms/layer, qwen3-32b 11.7 tok/s -> 1.12 ms/layer; mean).
TRANSFORMERS_LAYER_OVERHEAD_S = 1.2e-3
# TP all-reduce cost per decode step, as a factor on tokens/s (assumed): NVLink / PCIe.
TP_EFFICIENCY = {"nvlink": 0.85, "pcie": 0.65}
# CPU hosts (the lab): assumed DRAM bandwidth of a small VM, GB/s; eager overhead per layer on CPU.
CPU_BANDWIDTH_GBS = 20.0
CPU_LAYER_OVERHEAD_S = 0.3e-3


def kv_heads_per_gpu(m, tp=1):
    """KV heads one GPU holds: split by TP, or one replicated head per GPU when TP exceeds the KV heads."""
    return max(1, math.ceil(m["num_kv_heads"] / tp))


def _experts_split(m, tp, ep):
    """(experts on one GPU, intermediate size of each on that GPU): EP spreads experts, TP/EP splits each."""
    moe = m["moe"]
    ep = max(1, ep or 1)
    return math.ceil(moe["num_experts"] / ep), max(1, moe["expert_intermediate_size"] // max(1, tp // ep))


def _layer_linears(m, tp=1, ep=1):
    """(out_features, in_features) of the quantizable linear layers of one decoder layer, per GPU."""
    h, d = m["hidden_size"], m["head_dim"]
    nq = m["num_attention_heads"] // tp
    nkv = kv_heads_per_gpu(m, tp)
    mats = [(nq * d, h), (nkv * d, h), (nkv * d, h), (h, nq * d)]
    moe = m.get("moe")
    if moe:
        # EP=1: every GPU holds all experts, split along the intermediate dimension (TRT-LLM's tp-only MoE
        # default); EP>1: each GPU holds num_experts/EP experts, each split TP/EP ways
        n_exp, per = _experts_split(m, tp, ep)
        mats += [(per, h), (per, h), (h, per)] * n_exp
    else:
        inter = m["intermediate_size"] // tp
        mats += [(inter, h), (inter, h), (h, inter)]
    return mats


def _layer_small_params(m, tp=1):
    """Parameters of one layer that stay 16-bit: norms, QK-norm, q/k/v biases, MoE router."""
    h, d = m["hidden_size"], m["head_dim"]
    n = 2 * h
    if m.get("qk_norm"):
        n += 2 * d
    if m.get("qkv_bias"):
        n += (m["num_attention_heads"] // tp) * d + 2 * kv_heads_per_gpu(m, tp) * d
    if m.get("moe"):
        n += h * m["moe"]["num_experts"]
    return n


def param_breakdown(m):
    """Exact parameter counts of the architecture `m` (model_catalog facts)."""
    v, h = m["vocab_size"], m["hidden_size"]
    linear = sum(o * i for o, i in _layer_linears(m))
    small = _layer_small_params(m)
    layers = m["num_layers"] * (linear + small)
    embed = v * h
    lm_head = 0 if m.get("tie_word_embeddings") else v * h
    total = embed + layers + h + lm_head
    out = {"embedding": embed, "lm_head": lm_head, "per_layer_linear": linear, "per_layer_other": small,
           "layers": layers, "final_norm": h, "total": total, "non_embedding": total - embed - lm_head}
    moe = m.get("moe")
    if moe:
        ie, h2 = moe["expert_intermediate_size"], h
        inactive = (moe["num_experts"] - moe["experts_per_token"]) * 3 * h2 * ie * m["num_layers"]
        out["active"] = total - inactive
    else:
        out["active"] = total
    return out


def param_count(m):
    return param_breakdown(m)["total"]


def _linear_bytes(out_f, in_f, precision):
    n = out_f * in_f
    if precision in ("bf16", "fp16"):
        return 2 * n
    if precision == "fp32":
        return 4 * n
    if precision == "fp8":
        return n + 4
    if precision == "int8_wo":
        return n + 2 * out_f
    groups = math.ceil(in_f / INT4_GROUP) * out_f
    if precision == "int4_awq":
        return n // 2 + 2 * groups + 2 * in_f
    if precision == "int4_gptq":
        return n // 2 + 4 * groups
    raise ValueError("unknown weight precision {!r} (one of {})".format(precision, ", ".join(WEIGHT_PRECISIONS)))


def base_bytes(precision):
    """Bytes of the parts that are never quantized (embedding, LM head, norms): fp32 stays fp32, else 16-bit."""
    return 4 if precision == "fp32" else 2


def weight_bytes(m, precision, tp=1, pp=1, ep=1):
    """Weight bytes on the most loaded GPU of one replica (tp=pp=1: the whole model)."""
    if precision not in WEIGHT_PRECISIONS:
        raise ValueError("unknown weight precision {!r} (one of {})".format(precision, ", ".join(WEIGHT_PRECISIONS)))
    b16 = base_bytes(precision)
    per_layer = sum(_linear_bytes(o, i, precision) for o, i in _layer_linears(m, tp, ep)) \
        + b16 * _layer_small_params(m, tp)
    v, h = m["vocab_size"], m["hidden_size"]
    embed = b16 * v * h
    head = b16 * math.ceil(v / tp) * h  # LM head (tied or not, TRT-LLM keeps a vocab-parallel head)
    if m.get("tie_word_embeddings") and tp == 1 and pp == 1:
        head = 0
    layers_per_stage = math.ceil(m["num_layers"] / pp)
    if pp == 1:
        return layers_per_stage * per_layer + embed + head + b16 * h
    first = layers_per_stage * per_layer + embed
    last = (m["num_layers"] - layers_per_stage * (pp - 1)) * per_layer + head + b16 * h
    return max(first, last)


def active_weight_bytes(m, precision, tp=1, ep=1):
    """Weight bytes read per decode step on one GPU: all of them for dense models, active experts for MoE."""
    total = weight_bytes(m, precision, tp, ep=ep)
    moe = m.get("moe")
    if not moe:
        return total
    h = m["hidden_size"]
    n_exp, per = _experts_split(m, tp, ep)
    one_expert = _linear_bytes(per, h, precision) * 2 + _linear_bytes(h, per, precision)
    # at batch 1 the top-k experts of a token land on one GPU at worst
    active = min(n_exp, moe["experts_per_token"])
    idle = (n_exp - active) * one_expert * m["num_layers"]
    return total - idle


def kv_bytes_per_token(m, kv_dtype="bf16", tp=1, pp=1):
    """KV-cache bytes per token on one GPU: 2 x layers x KV heads x head_dim x dtype bytes."""
    if kv_dtype not in DTYPE_BYTES:
        raise ValueError("unknown KV dtype {!r} (one of {})".format(kv_dtype, ", ".join(KV_DTYPES)))
    layers = math.ceil(m["num_layers"] / pp)
    return 2 * layers * kv_heads_per_gpu(m, tp) * m["head_dim"] * DTYPE_BYTES[kv_dtype]


def activation_bytes_per_token(m, act_dtype="bf16", tp=1):
    """Transient activation bytes per token of one forward: (3*I/TP + 4*H) * bytes."""
    moe = m.get("moe")
    inter = moe["expert_intermediate_size"] * moe["experts_per_token"] if moe else m["intermediate_size"]
    return (3 * inter // tp + 4 * m["hidden_size"]) * DTYPE_BYTES[act_dtype]


def runtime_reserve(m, runtime, max_num_tokens, max_batch_size, *, act_dtype="bf16", tp=1):
    """Bytes per GPU that are neither weights nor KV cache: context, NCCL, activations, logits."""
    ctx = CUDA_CONTEXT_BYTES.get(runtime, 1 * GIB)
    nccl = NCCL_BYTES if tp > 1 else 0
    acts = max_num_tokens * activation_bytes_per_token(m, act_dtype, tp)
    logits = max_batch_size * math.ceil(m["vocab_size"] / tp) * 4
    return {"cuda_context": ctx, "nccl": nccl, "activations": acts, "logits": logits,
            "total": ctx + nccl + acts + logits}


def kv_capacity_tokens(memory_bytes, weights, reserve, kv_per_token, fraction=0.9, *, tokens_per_block=None):
    """Tokens of KV cache one GPU holds: `fraction` of the memory left after weights and reserve.

    With `tokens_per_block` (TensorRT-LLM's paged KV cache), whole blocks only.
    """
    free = memory_bytes - weights - reserve
    if free <= 0 or kv_per_token <= 0:
        return 0
    if tokens_per_block:
        return int(fraction * free) // (kv_per_token * tokens_per_block) * tokens_per_block
    return int(fraction * free) // kv_per_token


def kv_tokens_needed(sequences, seq_len, tokens_per_block=None):
    """KV tokens `sequences` sequences of `seq_len` tokens hold (whole blocks with `tokens_per_block`)."""
    if tokens_per_block:
        return sequences * (-(-seq_len // tokens_per_block)) * tokens_per_block
    return sequences * seq_len


# TorchLlmArgs.cuda_graph_config (TensorRT-LLM 1.2.0 llm_args.py): "each CUDA graph can use up to 200 MB of
# extra memory"; CudaGraphConfig._generate_cuda_graph_batch_sizes with enable_padding=True starts from
# [1, 2, 4] + multiples of 8 up to 128, adds powers of two from 256 below max_batch_size, keeps those
# <= max_batch_size and appends max_batch_size itself.
CUDA_GRAPH_BYTES_BOUND = 200 * 1000 * 1000
CUDA_GRAPH_PADDED_BASE = (1, 2, 4)
CUDA_GRAPH_PADDED_STEP = 8
CUDA_GRAPH_PADDED_STEP_UNTIL = 128


def cuda_graph_batch_sizes(max_batch_size):
    """The batch sizes TensorRT-LLM captures with enable_padding for this max_batch_size (its own rule)."""
    sizes = list(CUDA_GRAPH_PADDED_BASE) + list(range(CUDA_GRAPH_PADDED_STEP, CUDA_GRAPH_PADDED_STEP_UNTIL + 1,
                                                       CUDA_GRAPH_PADDED_STEP))
    sizes += [2 ** i for i in range(8, math.ceil(math.log(max_batch_size, 2)))] if max_batch_size > 1 else []
    sizes = sorted(s for s in sizes if s <= max_batch_size)
    if not sizes or sizes[-1] != max_batch_size:
        sizes.append(max_batch_size)
    return sizes


def cuda_graph_bytes(batch_sizes):
    """Upper bound of the memory the CUDA graphs of `batch_sizes` take (upstream's 200 MB per graph)."""
    return len(batch_sizes) * CUDA_GRAPH_BYTES_BOUND


def max_concurrency(kv_tokens, seq_len):
    return kv_tokens // seq_len if seq_len > 0 else 0


def decode_roofline_tokens_per_s(bandwidth_bytes_s, bytes_per_token):
    return bandwidth_bytes_s / float(bytes_per_token) if bytes_per_token > 0 else 0.0


def decode_tokens_per_s_bs1(m, runtime, precision, kv_dtype, bandwidth_gbs, *, context_tokens, tp=1,
                            nvlink=True, device="gpu", ep=1):
    """Predicted bs=1 decode tokens/s and the efficiency factor applied to the roofline.

    Returns (tokens_per_s, efficiency_factor, roofline_tokens_per_s).
    """
    bytes_tok = active_weight_bytes(m, precision, tp, ep) + kv_bytes_per_token(m, kv_dtype, tp) * context_tokens
    if device == "cpu":
        bandwidth_gbs = CPU_BANDWIDTH_GBS
    bw = bandwidth_gbs * 1e9
    roof = decode_roofline_tokens_per_s(bw, bytes_tok)
    if runtime == "transformers":
        per_layer = CPU_LAYER_OVERHEAD_S if device == "cpu" else TRANSFORMERS_LAYER_OVERHEAD_S
        t = bytes_tok / bw + m["num_layers"] * per_layer
        tps = 1.0 / t
        return tps, tps / roof, roof
    eff = EFFICIENCY[runtime]
    if tp > 1:
        eff *= TP_EFFICIENCY["nvlink" if nvlink else "pcie"]
    return roof * eff, eff, roof
