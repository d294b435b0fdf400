"""In-flight batching for the triton-fleet ``transformers`` runtime (torch + transformers, no Triton).

One scheduler thread owns the model and a preallocated KV cache of ``slots`` rows, each
``max_seq_len`` tokens long (the profile's KV budget: ``kv_tokens // max_seq_len`` rows, at most
``max_batch``). Each iteration it

1. admits waiting requests into free slots and prefills them together (left-padded, at most
   ``prefill_tokens`` prompt tokens per prefill, at least one request), writing their K/V into their
   slots; their first token is sampled from that prefill;
2. runs one decode step over every occupied slot: each row writes its new K/V at its own position
   and attends to its own columns only (a per-row 4D mask), samples with its own settings, and hands
   the token to its :class:`Sequence`, which applies its stop conditions (EOS, ``max_tokens``, stop
   words) and streams text;
3. frees the slots of finished and cancelled rows, moving the last rows into the holes so that the
   occupied slots stay ``0..n-1`` (the decode reads a plain slice of the cache, no gather).

So a request that arrives while others generate joins at the next step and leaves as soon as it is
done, and nothing is allocated per step: the cache is what the planner budgets, allocated once at
load. On CUDA the decode step has static shapes per (rows rounded up to a bucket, columns rounded up
to ``SPAN_STEP``), so each such step is captured once as a CUDA graph and replayed: eager
transformers spends ~50 ms of Python per step launching the kernels of 40 layers, a replay a few
hundred microseconds (docs/benchmarks.md).

The cache is duck-typed (``update`` / ``get_seq_length``, what the model's attention layers call) and
the mask is passed 4D, which transformers 4.57 and 5.x both use as given; so the model is
transformers' own forward, unchanged. Greedy rows take ``argmax`` of float32 logits, as ``generate``
does, so a request alone gets ``generate``'s tokens; in a batch the same up to the rounding of batched
kernels (exact on the lab's fp32 CPU model; tests/unit/test_batching.py checks concurrent requests
against ``generate``).
"""

import queue
import threading
import time
from collections import deque

from generation_request import RequestError, TextStream, check_prompt_length


class Sink:
    """Where a sequence's output goes (model.py wraps Triton's response sender)."""

    def send(self, text, ids, finish=None, final=False):  # pragma: no cover - interface
        raise NotImplementedError

    def fail(self, message):  # pragma: no cover - interface
        raise NotImplementedError

    def cancelled(self):
        return False


class Sequence:
    """One request in the batch: its tokens, sampling settings and stop conditions."""

    def __init__(self, req, sink, prompt_ids, eos_ids, decode, bad_words_ids, now):  # noqa: PLR0917
        self.req = req
        self.sink = sink
        self.prompt_ids = list(prompt_ids)
        self.ids = []
        self.eos = set(eos_ids)
        self.text = TextStream(decode, req.stop_words)
        self.bad_words_ids = [b for b in bad_words_ids if b]
        self.sent = 0
        self.finish = None
        self.arrived = now
        self.first_token_at = None
        self.last_cancel_check = now
        self.generator = None
        self.closed = False  # final response sent (emitter thread)
        self.stop_word = False  # a stop word ended it (set by the emitter, read by the scheduler)

    @property
    def need_tokens(self):
        return len(self.prompt_ids) + self.req.max_tokens

    @property
    def remaining(self):
        return self.req.max_tokens - len(self.ids)

    @property
    def needs_processing(self):
        r = self.req
        return (
            (not r.greedy)
            or r.repetition_penalty != 1.0
            or bool(self.bad_words_ids)
            or (r.min_tokens > 0 and len(self.ids) < r.min_tokens)
        )

    def add(self, token):
        """Record one new token (scheduler thread); EOS and ``max_tokens`` end the sequence here.

        Returns ``(token count, finish)`` for :meth:`publish`.
        """
        self.ids.append(token)
        if self.finish is None:
            if token in self.eos and len(self.ids) >= self.req.min_tokens:
                self.finish = "stop"
            elif len(self.ids) >= self.req.max_tokens:
                self.finish = "length"
        return len(self.ids), self.finish

    def publish(self, count, finish):
        """Detokenize the first ``count`` tokens and send what the client should see (emitter thread).

        Stop words end the sequence here (``stop_word`` tells the scheduler to drop the row); the final
        response goes out once ``finish`` is set.
        """
        if self.closed:
            return
        if finish == "cancelled":
            self.closed = True
            self.sink.send("", [], "cancelled", True)
            return
        ids = self.ids[:count]
        delta = self.text.update(ids)
        if self.text.stopped:
            finish = "stop"
            self.stop_word = True
        if finish is None:
            if self.req.stream and delta:
                self.sink.send(delta, ids[self.sent :])
                self.sent = count
            return
        self.closed = True
        if self.req.stream:
            rest = delta + ("" if self.text.stopped else self.text.update(ids, final=True))
            self.sink.send(rest, ids[self.sent :], finish, final=True)
        else:
            if not self.text.stopped:
                self.text.update(ids, final=True)
            body = self.text.text if self.req.exclude_input_in_output else self.req.prompt + self.text.text
            self.sink.send(body, ids, finish, final=True)

    def failed(self, message):
        if not self.closed:
            self.closed = True
            self.sink.fail(message)


# Decode rows are rounded up to one of these (then to ``slots``): one CUDA graph per bucket and span.
ROW_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 96, 128, 192, 256)
# Columns the decode attends to, rounded up to a multiple of this: attention reads at most this many
# padding columns per row, and a 2048-token profile needs at most 8 spans per row bucket.
SPAN_STEP = 256


ATTENTION = "triton_fleet_slots"


def _install_grouped_decode_attention(model):
    """Decode attention without copying K/V per query head (sdpa's ``repeat_kv``), for an sdpa model.

    transformers' sdpa path expands K/V to every query head whenever a mask is given: with GQA
    (Qwen3-14B: 40 query heads, 8 KV heads) that is a transient 5x copy of the attended cache per layer
    and step, 1 GB at 64 rows x 768 columns, which the planner's budget has no room for. A decode step
    has one query token, so the query heads of one KV head can be laid out as that head's query rows
    instead: the same dot products, no copy. Everything else (prefill, other shapes) is sdpa as before.
    """
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
    from transformers.modeling_utils import AttentionInterface

    def attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):  # noqa: PLR0917 - transformers' attention interface
        b, heads, q, dim = query.shape
        kv_heads = key.shape[1]
        if (
            q != 1
            or heads == kv_heads
            or heads % kv_heads
            or attention_mask is None
            or attention_mask.dim() != 4
            or attention_mask.shape[1] != 1
            or attention_mask.shape[2] != 1
        ):
            return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, **kwargs)
        # query head h reads KV head h // (heads / kv_heads), as repeat_kv lays them out
        grouped = query.reshape(b, kv_heads, heads // kv_heads, dim)
        out = torch.nn.functional.scaled_dot_product_attention(
            grouped, key, value, attn_mask=attention_mask[:, :, :, : key.shape[-2]], dropout_p=0.0, scale=scaling
        )
        return out.reshape(b, heads, 1, dim).transpose(1, 2).contiguous(), None

    AttentionInterface.register(ATTENTION, attention)
    AttentionMaskInterface.register(ATTENTION, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
    model.config._attn_implementation = ATTENTION


class SlotCache:
    """K/V of ``slots`` rows x ``length`` columns per layer, allocated on the first write.

    The model's attention layers call :meth:`update` with the new keys/values of the batch; the engine
    says beforehand where they go (``rows``: slot of each batch row, ``cols``: cache column of each new
    token) and which columns attention reads (``first`` slot, ``span`` columns). Column ``length - 1``
    is scratch: prefill padding writes there and no mask ever admits it.
    """

    def __init__(self, torch, slots, length):
        self.torch = torch
        self.slots = slots
        self.length = length
        self.keys = []
        self.values = []
        self.rows = self.cols = None
        self.first = 0
        self.span = 0
        self.seen = 0

    @property
    def scratch(self):
        return self.length - 1

    def nbytes(self):
        return sum(t.numel() * t.element_size() for t in self.keys + self.values)

    def update(self, key_states, value_states, layer_idx, cache_kwargs=None):
        torch = self.torch
        if layer_idx == len(self.keys):
            b, heads, t, dim = key_states.shape
            shape = (self.slots, self.length, heads, dim)
            self.keys.append(torch.zeros(shape, dtype=key_states.dtype, device=key_states.device))
            self.values.append(torch.zeros(shape, dtype=value_states.dtype, device=value_states.device))
        k, v = self.keys[layer_idx], self.values[layer_idx]
        heads, dim = k.shape[2], k.shape[3]
        # [S, L, H, D] viewed as [S*L, H, D]: one index_copy_ per tensor, graph-safe, no host sync.
        flat = (self.rows[:, None] * self.length + self.cols).reshape(-1)
        k.view(-1, heads, dim).index_copy_(0, flat, key_states.transpose(1, 2).reshape(-1, heads, dim))
        v.view(-1, heads, dim).index_copy_(0, flat, value_states.transpose(1, 2).reshape(-1, heads, dim))
        sl = slice(self.first, self.first + key_states.shape[0])
        return k[sl, : self.span].transpose(1, 2), v[sl, : self.span].transpose(1, 2)

    def get_seq_length(self, layer_idx=0):
        return self.seen

    def move(self, src, dst, columns):
        """Copy slots ``src`` to ``dst`` (lists of the same length), their first ``columns`` columns."""
        torch = self.torch
        if not src:
            return
        device = self.keys[0].device
        s = torch.tensor(src, dtype=torch.long, device=device)
        d = torch.tensor(dst, dtype=torch.long, device=device)
        for t in self.keys + self.values:
            view = t[:, :columns]
            view.index_copy_(0, d, view.index_select(0, s))


class BatchEngine:
    """The scheduler thread and the slot KV cache. ``submit`` is thread-safe."""

    def __init__(
        self,
        model,
        tokenizer,
        device,
        limits,
        *,
        max_batch,
        kv_tokens,
        prefill_tokens,  # noqa: PLR0913
        eos_ids,
        pad_id,
        log=None,
        cancel_check_s=0.2,
        stats_every_s=10.0,
        cuda_graphs=None,
        buckets=None,
        grouped_attention=True,
    ):
        import torch

        self.torch = torch
        self.model = model
        self.tok = tokenizer
        self.device = device
        self.limits = limits
        self.max_batch = max(1, int(max_batch))
        self.length = limits.max_seq_len + 1  # + the scratch column
        self.slots = max(1, min(self.max_batch, int(kv_tokens) // limits.max_seq_len))
        self.prefill_tokens = max(1, int(prefill_tokens))
        self.eos_ids = list(eos_ids)
        self.pad_id = int(pad_id)
        self.log = log or (lambda msg: None)
        self.cancel_check_s = cancel_check_s
        self.stats_every_s = stats_every_s
        cuda = device.type == "cuda"
        self.use_graphs = cuda if cuda_graphs is None else (bool(cuda_graphs) and cuda)
        # Padding rows and columns buy static shapes: graphs need them, and eager CUDA gains too, since
        # cuDNN's attention plans each new shape anew (~1 ms of host time per layer, measured on the
        # H200: bench/gpu/decode_step.py --profile). The CPU runs exact sizes.
        self.buckets = cuda if buckets is None else bool(buckets)
        self.grouped_attention = grouped_attention
        self._check_model(model)
        self.cond = threading.Condition()
        self.waiting = deque()
        self.rows = []  # Sequence per occupied slot, slot i = rows[i]
        self.stopping = False
        self.stats = _Stats()
        self.kv = SlotCache(torch, self.slots, self.length)
        import inspect

        # transformers 4.x takes cache_position (unused here beyond the mask, which is given 4D); 5.x
        # dropped it and asks the cache's get_seq_length instead.
        self._cache_position = "cache_position" in inspect.signature(model.forward).parameters
        with torch.inference_mode():
            self.ids_in = torch.zeros((self.slots, 1), dtype=torch.long, device=device)
            self.pos_in = torch.zeros((self.slots, 1), dtype=torch.long, device=device)
            self.slot_ids = torch.arange(self.slots, dtype=torch.long, device=device)
            self.col_ids = torch.arange(self.length, dtype=torch.long, device=device)
            self.tokens_out = torch.zeros((self.slots,), dtype=torch.long, device=device)
            self.graphs = {}
            self.graph_pool = torch.cuda.graph_pool_handle() if self.use_graphs else None
            vocab = self._warmup()
            self.logits_out = torch.zeros((self.slots, vocab), dtype=torch.float32, device=device)
        # Detokenizing and sending (an IPC round trip to the server per response) run on their own
        # thread, in order, while the scheduler runs the next step.
        self.outbox = queue.SimpleQueue()
        self.emitter = threading.Thread(target=self._emit_loop, name="batch-emitter", daemon=True)
        self.emitter.start()
        self.thread = threading.Thread(target=self._loop, name="batch-engine", daemon=True)
        self.thread.start()

    def _check_model(self, model):
        cfg = model.config
        kinds = set(getattr(cfg, "layer_types", None) or ["full_attention"])
        if kinds != {"full_attention"} or getattr(cfg, "use_sliding_window", False):
            raise RuntimeError(f"the slot KV cache serves full-attention models only (layer types {sorted(kinds)})")
        impl = getattr(cfg, "_attn_implementation", None) or "eager"
        if impl not in ("sdpa", "eager", ATTENTION):
            raise RuntimeError(f"attention implementation {impl!r}: the batch needs sdpa or eager (4D masks)")
        # sdpa takes a boolean mask (True = attend); eager adds the mask to the scores.
        self._bool_mask = impl != "eager"
        if impl == "sdpa" and self.grouped_attention:
            _install_grouped_decode_attention(model)

    def _warmup(self):
        """One token through slot 0: allocates the whole cache now, so a budget that does not fit fails at load."""
        torch = self.torch
        kv = self.kv
        kv.rows = self.slot_ids[:1]
        kv.cols = torch.zeros((1, 1), dtype=torch.long, device=self.device)
        kv.first, kv.span, kv.seen = 0, 1, 0
        ids = torch.full((1, 1), self.pad_id, dtype=torch.long, device=self.device)
        out = self.model(
            input_ids=ids,
            attention_mask=self._mask(torch.ones((1, 1, 1, 1), dtype=torch.bool, device=self.device)),
            position_ids=torch.zeros((1, 1), dtype=torch.long, device=self.device),
            past_key_values=kv,
            use_cache=True,
            logits_to_keep=1,
        )
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.log(
            f"slot KV cache: {self.slots} rows x {self.length - 1} tokens, {kv.nbytes():,} bytes; "
            f"CUDA graphs {'on' if self.use_graphs else 'off'}"
        )
        return int(out.logits.shape[-1])

    # ------------------------------------------------------------------------------------ API

    def submit(self, req, sink):
        """Tokenize and queue ``req``; raises :class:`RequestError` for a prompt that does not fit."""
        prompt_ids = self.tok(req.prompt)["input_ids"]
        check_prompt_length(len(prompt_ids), req, self.limits)
        eos = [req.end_id] if req.end_id is not None else self.eos_ids
        bad = [self.tok(w, add_special_tokens=False)["input_ids"] for w in req.bad_words]

        def decode(ids):
            return self.tok.decode(ids, skip_special_tokens=True)

        seq = Sequence(req, sink, prompt_ids, eos, decode, bad, time.monotonic())
        if req.seed is not None and not req.greedy:
            seq.generator = self.torch.Generator(device=self.device)
            seq.generator.manual_seed(int(req.seed) & 0xFFFFFFFFFFFFFFFF)
        with self.cond:
            if self.stopping:
                raise RequestError("the model is shutting down")
            self.waiting.append(seq)
            self.cond.notify()
        return seq

    def stop(self):
        with self.cond:
            self.stopping = True
            self.cond.notify()
        self.thread.join(timeout=30)
        self.outbox.put(None)
        self.emitter.join(timeout=30)
        self.graphs.clear()

    def _emit_loop(self):
        while True:
            item = self.outbox.get()
            if item is None:
                return
            fn, args = item
            _safe(fn, *args)

    def _memory(self):
        if self.device.type != "cuda":
            return ""
        cuda = self.torch.cuda
        gib = 1024.0**3
        return (
            f"; {len(self.graphs)} CUDA graphs; GPU memory allocated {cuda.memory_allocated(self.device) / gib:.2f} GiB "
            f"(peak {cuda.max_memory_allocated(self.device) / gib:.2f}), "
            f"reserved {cuda.memory_reserved(self.device) / gib:.2f} GiB "
            f"(peak {cuda.max_memory_reserved(self.device) / gib:.2f})"
        )

    def _post(self, fn, *args):
        self.outbox.put((fn, args))

    def _mask(self, allowed):
        if self._bool_mask:
            return allowed
        dtype = self.model.dtype
        zero = self.torch.zeros((), dtype=dtype, device=self.device)
        return zero.masked_fill(~allowed, self.torch.finfo(dtype).min)

    def _forward(self, ids, mask, pos, logits_to_keep=1):
        extra = {"cache_position": pos[0]} if self._cache_position else {}
        return self.model(
            input_ids=ids,
            attention_mask=self._mask(mask),
            position_ids=pos,
            past_key_values=self.kv,
            use_cache=True,
            logits_to_keep=logits_to_keep,
            **extra,
        )

    # ------------------------------------------------------------------------------- the loop

    def _loop(self):
        torch = self.torch
        with torch.inference_mode():
            while True:
                with self.cond:
                    while not self.stopping and not self.waiting and not self.rows:
                        self.cond.wait()
                    if self.stopping:
                        pending = list(self.waiting) + self.rows
                        self.waiting.clear()
                        break
                    group = self._admit()
                try:
                    if group:
                        self._prefill(group)
                    if self.rows:
                        self._decode()
                except Exception as exc:  # a failed step fails its rows, never the model
                    self.log(f"batch step failed: {exc!r}")
                    for seq in group + self.rows:
                        seq.finish = seq.finish or "error"
                        self._post(seq.failed, f"generation failed: {exc}")
                    self.rows = []
                self.stats.maybe_log(self.log, self.stats_every_s, len(self.rows), len(self.waiting), self._memory)
        for seq in pending:
            self._post(seq.failed, "the model was unloaded before this request finished")

    def _admit(self):
        """Waiting sequences for this step's prefill, one free slot each (called with the lock held)."""
        group = []
        tokens = 0
        while self.waiting and len(self.rows) + len(group) < self.slots:
            seq = self.waiting[0]
            if seq.sink.cancelled():
                self.waiting.popleft()
                seq.finish = "cancelled"
                self._post(seq.publish, 0, "cancelled")
                continue
            plen = len(seq.prompt_ids)
            if group and tokens + plen > self.prefill_tokens:
                break
            group.append(self.waiting.popleft())
            tokens += plen
        return group

    # ---------------------------------------------------------------------------- prefill

    def _prefill(self, group):
        torch = self.torch
        t0 = time.perf_counter()
        n, g = len(self.rows), len(group)
        glen = max(len(s.prompt_ids) for s in group)
        ids = torch.full((g, glen), self.pad_id, dtype=torch.long)
        pos = torch.ones((g, glen), dtype=torch.long)
        cols = torch.full((g, glen), self.kv.scratch, dtype=torch.long)
        for i, s in enumerate(group):
            plen = len(s.prompt_ids)
            ids[i, glen - plen :] = torch.tensor(s.prompt_ids, dtype=torch.long)
            pos[i, glen - plen :] = torch.arange(plen)
            cols[i, glen - plen :] = torch.arange(plen)
        ids, pos, cols = ids.to(self.device), pos.to(self.device), cols.to(self.device)
        # query token t of row i sees the row's columns up to its own; padding queries see column 0
        # (a real token of the row), so no query row is empty and nothing turns NaN.
        real = cols != self.kv.scratch
        mask = (self.col_ids[None, None, :glen] <= cols[:, :, None]) & real[:, :, None]
        mask[:, :, 0] = True
        kv = self.kv
        kv.rows, kv.cols, kv.first, kv.span, kv.seen = self.slot_ids[n : n + g], cols, n, glen, 0
        out = self._forward(ids, mask[:, None], pos)
        logits = out.logits[:, -1, :].to(dtype=torch.float32)
        tokens = self._sample(group, logits)
        now = time.monotonic()
        self.rows.extend(group)
        keep = list(range(n))
        for i, s in enumerate(group):
            s.first_token_at = now
            self._post(s.publish, *s.add(tokens[i]))
            if s.finish is None:
                keep.append(n + i)
        self.stats.prefill(time.perf_counter() - t0, g, sum(len(s.prompt_ids) for s in group))
        if len(keep) < len(self.rows):
            self._keep(keep)

    # ----------------------------------------------------------------------------- decode

    def _decode(self):
        torch = self.torch
        t0 = time.perf_counter()
        n = len(self.rows)
        # the last sampled token of each row goes into the cache at the row's next column
        pos = [len(s.prompt_ids) + len(s.ids) - 1 for s in self.rows]
        need = max(pos) + 1
        if self.buckets:
            rows = next((b for b in ROW_BUCKETS if b >= n), self.slots)
            rows = min(max(rows, n), self.slots)
            span = min(-(-need // SPAN_STEP) * SPAN_STEP, self.length - 1)
        else:
            rows, span = n, need
        pad = rows - n
        # padding rows: free slots, which write column 0 and attend to it (finite, never read by a real row)
        self.ids_in[:rows, 0].copy_(torch.tensor([s.ids[-1] for s in self.rows] + [self.pad_id] * pad))
        self.pos_in[:rows, 0].copy_(torch.tensor(pos + [0] * pad))
        self._run_step(rows, span)
        logits = self.logits_out[:n]
        t1 = time.perf_counter()
        if any(s.needs_processing for s in self.rows):
            tokens = self._sample(self.rows, logits)
        else:
            tokens = self.tokens_out[:n].tolist()
        t2 = time.perf_counter()
        now = time.monotonic()
        keep = []
        for i, s in enumerate(self.rows):
            if s.stop_word:  # the emitter saw a stop word in what was sent: this step's token is dropped
                s.finish = "stop"
                continue
            self._post(s.publish, *s.add(tokens[i]))
            if s.finish is None and now - s.last_cancel_check >= self.cancel_check_s:
                s.last_cancel_check = now
                if s.sink.cancelled():
                    s.finish = "cancelled"
                    self._post(s.publish, len(s.ids), "cancelled")
            if s.finish is None:
                keep.append(i)
        t3 = time.perf_counter()
        self.stats.decode(n, t1 - t0, t2 - t1, t3 - t2)
        if len(keep) < n:
            self._keep(keep)

    def _step(self, rows, span):
        """One decode step over slots ``0..rows-1`` reading ``span`` columns, from the static inputs into
        the static outputs: the same tensors every time, so it can be captured and replayed."""
        torch = self.torch
        pos = self.pos_in[:rows]
        kv = self.kv
        kv.rows, kv.cols, kv.first, kv.span, kv.seen = self.slot_ids[:rows], pos, 0, span, span - 1
        mask = self.col_ids[None, None, None, :span] <= pos[:, :, None, None]
        out = self._forward(self.ids_in[:rows], mask, pos)
        logits = out.logits[:, -1, :].to(dtype=torch.float32)
        self.logits_out[:rows].copy_(logits)
        self.tokens_out[:rows].copy_(logits.argmax(dim=-1))

    def _run_step(self, rows, span):
        if not self.use_graphs:
            self._step(rows, span)
            return
        graph = self.graphs.get((rows, span))
        if graph is not None:
            graph.replay()
            return
        torch = self.torch
        # First time at this shape: the step itself runs eagerly on a side stream (the warm-up that
        # capture needs), then the same step is captured; capture runs nothing, so the cache is
        # written once.
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            self._step(rows, span)
        torch.cuda.current_stream(self.device).wait_stream(side)
        t0 = time.perf_counter()
        try:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self.graph_pool, capture_error_mode="thread_local"):
                self._step(rows, span)
        except Exception as exc:  # noqa: BLE001 - eager still works; say why it is slower
            self.use_graphs = False
            self.graphs.clear()
            self.log(f"CUDA graph capture failed, decoding eagerly from now on: {exc!r}")
            return
        self.graphs[(rows, span)] = graph
        self.stats.captured(time.perf_counter() - t0)

    def _keep(self, keep):
        """Free the slots of the rows not in ``keep``; the last rows move into the holes."""
        rows = [self.rows[i] for i in keep]
        m = len(rows)
        kept = set(keep)
        src = [i for i in keep if i >= m]
        dst = [i for i in range(m) if i not in kept]
        if src:
            columns = max(len(self.rows[i].prompt_ids) + len(self.rows[i].ids) for i in src)
            self.kv.move(src, dst, min(columns, self.length))
            order = {i: i for i in keep if i < m}
            order.update(zip(dst, src))  # noqa: B905 - same length by construction
            rows = [self.rows[order[j]] for j in range(m)]
        self.rows = rows

    # ----------------------------------------------------------------------------- sampling

    def _sample(self, seqs, logits):
        """One token per row: argmax for plain greedy rows (batched), per-row processing otherwise."""
        if not any(s.needs_processing for s in seqs):
            return logits.argmax(dim=-1).tolist()
        greedy = logits.argmax(dim=-1).tolist()
        out = []
        for i, s in enumerate(seqs):
            if not s.needs_processing:
                out.append(greedy[i])
                continue
            out.append(self._sample_row(s, logits[i : i + 1]))
        return out

    def _sample_row(self, s, scores):
        torch = self.torch
        r = s.req
        scores = scores.clone()
        history = s.prompt_ids + s.ids
        if r.repetition_penalty != 1.0:
            # transformers' RepetitionPenaltyLogitsProcessor
            idx = torch.tensor([history], device=scores.device)
            score = torch.gather(scores, 1, idx)
            score = torch.where(score < 0, score * r.repetition_penalty, score / r.repetition_penalty)
            scores.scatter_(1, idx, score)
        for bw in s.bad_words_ids:
            # transformers' NoBadWordsLogitsProcessor: ban the last token once the prefix was generated
            if len(bw) == 1 or history[-(len(bw) - 1) :] == bw[:-1]:
                scores[0, bw[-1]] = -float("inf")
        if r.min_tokens > 0 and len(s.ids) < r.min_tokens:
            for e in s.eos:
                scores[0, e] = -float("inf")
        if r.greedy:
            return int(scores.argmax(dim=-1))
        scores = scores / r.temperature
        if r.top_k > 0:
            k = min(r.top_k, scores.shape[-1])
            kth = torch.topk(scores, k).values[..., -1, None]
            scores = scores.masked_fill(scores < kth, -float("inf"))
        if r.top_p < 1.0:
            # transformers' TopPLogitsWarper (keeps at least one token)
            sorted_logits, sorted_idx = torch.sort(scores, descending=False)
            cum = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
            remove = cum <= (1 - r.top_p)
            remove[..., -1:] = False
            scores = scores.masked_fill(remove.scatter(1, sorted_idx, remove), -float("inf"))
        probs = scores.softmax(dim=-1)
        return int(torch.multinomial(probs, 1, generator=s.generator))


def _safe(fn, *args):
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - a gone client must not stop the batch
        pass


class _Stats:
    """Where the engine's time goes, logged every ``stats_every_s``: the benchmark reads these lines."""

    def __init__(self):
        self.since = time.monotonic()
        self._zero()

    def _zero(self):
        self.steps = self.rows = 0
        self.fwd = self.sample = self.emit = 0.0
        self.prefills = self.prefill_seqs = self.prefill_toks = 0
        self.prefill_s = 0.0
        self.captures = 0
        self.capture_s = 0.0

    def decode(self, rows, fwd, sample, emit):
        self.steps += 1
        self.rows += rows
        self.fwd += fwd
        self.sample += sample
        self.emit += emit

    def prefill(self, seconds, seqs, toks):
        self.prefills += 1
        self.prefill_seqs += seqs
        self.prefill_toks += toks
        self.prefill_s += seconds

    def captured(self, seconds):
        self.captures += 1
        self.capture_s += seconds

    def maybe_log(self, log, every, rows, waiting, memory=lambda: ""):
        now = time.monotonic()
        if now - self.since < every or not (self.steps or self.prefills):
            return
        wall = now - self.since
        st = max(self.steps, 1)
        log(
            f"engine: {wall:.1f}s wall, {self.steps} decode steps (mean batch {self.rows / st:.1f}; per step "
            f"forward {1000 * self.fwd / st:.1f} ms, sample+sync {1000 * self.sample / st:.1f} ms, "
            f"bookkeeping {1000 * self.emit / st:.1f} ms), {self.prefills} prefills ({self.prefill_seqs} seqs, "
            f"{self.prefill_toks} tokens, {self.prefill_s:.2f}s), decode {self.fwd + self.sample + self.emit:.2f}s, "
            f"{self.captures} graphs captured ({self.capture_s:.2f}s), "
            f"{rows} running, {waiting} waiting{memory()}"
        )
        self.since = now
        self._zero()
