#!/usr/bin/env python3
"""Where a decode step's time goes in the transformers runtime's batch engine, without Triton.

One decode step of B rows at a context of T tokens, timed as the engine runs it (the step, then the
sampled tokens read back on the host), in four ways on the same model:

- ``dynamic-eager``: the engine before the slot cache: transformers' DynamicCache, a 2D mask that grows a
  column a step, eager;
- ``slots-eager-sdpa``: the slot cache, eager, transformers' sdpa attention (K/V expanded per query head);
- ``slots-eager``: the slot cache, eager, the engine's grouped decode attention;
- ``slots-graphs``: what the engine runs on CUDA: the slot cache step replayed as a CUDA graph.

``launch`` is the time until the step's Python returns (for a graph: the replay call), ``step`` the time
until its tokens are on the host. The model is the catalog architecture with random weights built on the
device, nothing downloaded. GPU:  python3 bench/gpu/decode_step.py --model qwen3-14b --batch 1 16 64
CPU rehearsal (the lab's tiny architecture):  python3 bench/gpu/decode_step.py --device cpu --tiny
"""

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "module_utils"))
sys.path.insert(0, str(ROOT / "roles" / "triton_server" / "files" / "transformers"))

import torch  # noqa: E402
from batching import BatchEngine, Sequence, Sink  # noqa: E402
from generation_request import GenerationRequest, Limits  # noqa: E402
from memory_model import hf_config  # noqa: E402  (bench/gpu/memory_model.py, this directory)
from transformers import DynamicCache, Qwen3Config, Qwen3ForCausalLM  # noqa: E402
from triton_fleet import model_catalog  # noqa: E402


class Drop(Sink):
    def send(self, text, ids, finish=None, final=False):
        pass

    def fail(self, message):
        pass


class NoTok:
    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": [1]}

    def decode(self, ids, skip_special_tokens=True):
        return ""


def config(a):
    if a.tiny:
        return Qwen3Config(
            vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, max_position_embeddings=4096,
        )  # fmt: skip
    # The same catalog-built architecture as the memory benchmark measures.
    return hf_config(model_catalog.get(a.model))

def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


PROFILE = {"on": False}


def time_steps(step, device, steps, warmup=3):
    for _ in range(warmup):
        step()
    if PROFILE["on"]:
        from torch.profiler import ProfilerActivity, profile

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
        with profile(activities=acts) as prof:
            for _ in range(3):
                step()
        events = prof.key_averages()
        print(f"profile (3 steps): {sum(e.count for e in events if not e.key.startswith('cuda'))} op calls")
        print(events.table(sort_by="self_cpu_time_total", row_limit=14, max_name_column_width=48))
    launch = total = 0.0
    for _ in range(steps):
        t0 = time.perf_counter()
        tokens = step(launch_only=True)
        t1 = time.perf_counter()
        tokens.tolist()
        t2 = time.perf_counter()
        launch += t1 - t0
        total += t2 - t0
    return {"launch_ms": round(1000 * launch / steps, 2), "step_ms": round(1000 * total / steps, 2)}


def dynamic_eager(model, device, batch, context, steps):
    """The step of the engine before the slot cache (batching.py at commit fcffd20)."""
    ids = torch.ones((batch, context), dtype=torch.long, device=device)
    mask = torch.ones((batch, context), dtype=torch.long, device=device)
    pos = torch.arange(context, device=device).expand(batch, -1)
    cache = DynamicCache()
    out = model(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache, use_cache=True,
                logits_to_keep=1)  # fmt: skip
    state = {"mask": mask, "pos": torch.full((batch,), context, device=device), "last": out.logits[:, -1].argmax(-1)}

    def step(launch_only=False):
        m = torch.cat([state["mask"], torch.ones((batch, 1), dtype=torch.long, device=device)], 1)
        o = model(input_ids=state["last"][:, None], attention_mask=m, position_ids=state["pos"][:, None],
                  past_key_values=cache, use_cache=True, logits_to_keep=1)  # fmt: skip
        state["mask"], state["pos"] = m, state["pos"] + 1
        tokens = o.logits[:, -1, :].float().argmax(-1)
        state["last"] = tokens
        return tokens if launch_only else tokens.tolist()

    return time_steps(step, device, steps)


def slots(model, device, batch, context, steps, *, graphs, grouped):
    limits = Limits(max_input_len=context, max_output_len=2048, max_seq_len=2048)
    eng = BatchEngine(model, NoTok(), device, limits, max_batch=64, kv_tokens=64 * 2048, prefill_tokens=2048,
                      eos_ids=[-1], pad_id=0, cuda_graphs=graphs, grouped_attention=grouped)  # fmt: skip
    try:
        req = GenerationRequest(prompt="x", max_tokens=2048 - context)
        # rows as if prefilled (the cache holds what a random model would: the step costs the same)
        eng.rows = [Sequence(req, Drop(), [1] * context, [-1], NoTok().decode, [], 0.0) for _ in range(batch)]
        for s in eng.rows:
            s.ids.append(1)

        def step(launch_only=False):
            n = len(eng.rows)
            pos = [len(s.prompt_ids) + len(s.ids) - 1 for s in eng.rows]
            rows, span = n, max(pos) + 1
            if eng.buckets:
                from batching import ROW_BUCKETS, SPAN_STEP

                rows = min(max(next((b for b in ROW_BUCKETS if b >= n), eng.slots), n), eng.slots)
                span = min(-(-span // SPAN_STEP) * SPAN_STEP, eng.length - 1)
            eng.ids_in[:rows, 0].copy_(torch.tensor([1] * rows))
            eng.pos_in[:rows, 0].copy_(torch.tensor(pos + [0] * (rows - n)))
            eng._run_step(rows, span)
            for s in eng.rows:
                s.ids.append(1)
            tokens = eng.tokens_out[:n]
            return tokens if launch_only else tokens.tolist()

        with torch.inference_mode():
            r = time_steps(step, device, steps)
        r["graphs"] = len(eng.graphs)
        return r
    finally:
        eng.stop()
        eng.kv.keys.clear()
        eng.kv.values.clear()
        if device.type == "cuda":
            torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen3-14b")
    ap.add_argument("--tiny", action="store_true", help="a 2-layer toy architecture (rehearsal)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 16, 64])
    ap.add_argument("--context", type=int, default=576, help="tokens in the cache (512 prompt + half of 128)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--modes", nargs="+", default=["dynamic-eager", "slots-eager-sdpa", "slots-eager", "slots-graphs"])
    ap.add_argument("--json")
    ap.add_argument("--profile", action="store_true", help="print torch.profiler's op table for 3 steps of each")
    a = ap.parse_args()
    PROFILE["on"] = a.profile
    device = torch.device(a.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    torch.set_default_dtype(dtype)
    torch.manual_seed(0)
    t0 = time.time()
    with torch.device(device):
        model = Qwen3ForCausalLM(config(a))
    model.eval()
    sync(device)
    print(f"model built in {time.time() - t0:.1f}s on {device} ({dtype}), torch {torch.__version__}", flush=True)
    results = []
    for b in a.batch:
        for mode in a.modes:
            if mode == "slots-graphs" and device.type != "cuda":
                continue
            with torch.inference_mode():
                if mode == "dynamic-eager":
                    r = dynamic_eager(model, device, b, a.context, a.steps)
                else:
                    r = slots(model, device, b, a.context, a.steps, graphs=mode == "slots-graphs",
                              grouped=mode != "slots-eager-sdpa")  # fmt: skip
            # an sdpa model again for the next mode (the grouped attention is installed on the config)
            model.config._attn_implementation = "sdpa"
            r.update(mode=mode, batch=b, context=a.context, tokens_per_s=round(1000 * b / r["step_ms"], 1))
            results.append(r)
            print(json.dumps(r), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
