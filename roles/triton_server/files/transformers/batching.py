"""In-flight batching for the triton-fleet ``transformers`` runtime (torch + transformers, no Triton).

One scheduler thread owns the model. Each iteration it

1. admits waiting requests that fit (rows <= ``max_batch``, projected KV tokens <= ``kv_tokens``) and
   prefills them together (left-padded, at most ``prefill_tokens`` prompt tokens per prefill, at
   least one request), their first token sampled from that prefill;
2. merges their KV cache into the running batch (left padding to a common length, per-row
   ``attention_mask`` and ``position_ids``: what ``generate`` does for a left-padded batch);
3. runs one decode step for every row, samples each row with its own settings, and hands the new
   token to that row's :class:`Sequence`, which applies its stop conditions (EOS, ``max_tokens``,
   stop words) and streams text;
4. drops finished and cancelled rows from the batch (and the padding columns nobody needs any more).

So a request that arrives while others generate joins at the next step, and leaves as soon as it is
done. The cache is transformers' own ``DynamicCache``; only its per-layer ``keys``/``values`` tensors
are re-indexed here (transformers >= 4.56 keeps them in ``cache.layers``).

Greedy rows take ``argmax`` of float32 logits, as ``generate`` does, so a request alone gets exactly
``generate``'s tokens; in a batch the same up to the rounding of batched kernels (exact on the lab's
fp32 CPU model; tests/unit/test_batching.py checks 8 concurrent requests against ``generate``).
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


class BatchEngine:
    """The scheduler thread and the batched KV cache. ``submit`` is thread-safe."""

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
    ):
        import torch
        from transformers import DynamicCache

        self.torch = torch
        self.DynamicCache = DynamicCache
        self.model = model
        self.tok = tokenizer
        self.device = device
        self.limits = limits
        self.max_batch = max(1, int(max_batch))
        self.kv_tokens = max(int(kv_tokens), limits.max_seq_len)
        self.prefill_tokens = max(1, int(prefill_tokens))
        self.eos_ids = list(eos_ids)
        self.pad_id = int(pad_id)
        self.log = log or (lambda msg: None)
        self.cancel_check_s = cancel_check_s
        self.stats_every_s = stats_every_s
        self.cond = threading.Condition()
        self.waiting = deque()
        self.rows = []  # Sequence per batch row
        self.cache = None
        self.mask = None  # [B, L] long, 0 = padding
        self.pos = None  # [B] next position of each row
        self.last = None  # [B] last sampled token, not yet in the cache
        self.stopping = False
        self.stats = _Stats()
        # Detokenizing and sending (an IPC round trip to the server per response) run on their own
        # thread, in order, while the scheduler runs the next step.
        self.outbox = queue.SimpleQueue()
        self.emitter = threading.Thread(target=self._emit_loop, name="batch-emitter", daemon=True)
        self.emitter.start()
        import inspect

        # transformers 4.x takes cache_position; where a version drops it, the cache's length (the same
        # number here: the padded batch length) is used instead.
        self._cache_position = "cache_position" in inspect.signature(model.forward).parameters
        self.thread = threading.Thread(target=self._loop, name="batch-engine", daemon=True)
        self.thread.start()

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
            f"; GPU memory allocated {cuda.memory_allocated(self.device) / gib:.2f} GiB "
            f"(peak {cuda.max_memory_allocated(self.device) / gib:.2f}), "
            f"reserved {cuda.memory_reserved(self.device) / gib:.2f} GiB "
            f"(peak {cuda.max_memory_reserved(self.device) / gib:.2f})"
        )

    def _cache_pos(self, start, stop):
        if not self._cache_position:
            return {}
        return {"cache_position": self.torch.arange(start, stop, device=self.device)}

    def _post(self, fn, *args):
        self.outbox.put((fn, args))

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
                    self._reset()
                self.stats.maybe_log(self.log, self.stats_every_s, len(self.rows), len(self.waiting), self._memory)
        for seq in pending:
            self._post(seq.failed, "the model was unloaded before this request finished")

    def _admit(self):
        """Waiting sequences for this step's prefill (called with the lock held)."""
        group = []
        tokens = 0
        cur_len = 0 if self.mask is None else int(self.mask.shape[1])
        while self.waiting and len(self.rows) + len(group) < self.max_batch:
            seq = self.waiting[0]
            if seq.sink.cancelled():
                self.waiting.popleft()
                seq.finish = "cancelled"
                self._post(seq.publish, 0, "cancelled")
                continue
            plen = len(seq.prompt_ids)
            if group and tokens + plen > self.prefill_tokens:
                break
            cand = group + [seq]
            if (self.rows or group) and self._projected_kv(cand, cur_len) > self.kv_tokens:
                break
            group.append(self.waiting.popleft())
            tokens += plen
        return group

    def _projected_kv(self, group, cur_len):
        """KV tokens the padded batch holds at its longest if ``group`` joins now."""
        glen = max(len(s.prompt_ids) for s in group)
        length = max(cur_len, glen)
        rows = self.rows + group
        grow = max(s.remaining for s in rows)
        return len(rows) * (length + grow)

    # ---------------------------------------------------------------------------- prefill

    def _prefill(self, group):
        torch = self.torch
        t0 = time.perf_counter()
        glen = max(len(s.prompt_ids) for s in group)
        ids = torch.full((len(group), glen), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(group), glen), dtype=torch.long)
        for i, s in enumerate(group):
            n = len(s.prompt_ids)
            ids[i, glen - n :] = torch.tensor(s.prompt_ids, dtype=torch.long)
            mask[i, glen - n :] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        pos = mask.cumsum(-1) - 1
        pos.masked_fill_(mask == 0, 1)
        cache = self.DynamicCache()
        out = self.model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=pos,
            past_key_values=cache,
            use_cache=True,
            **self._cache_pos(0, glen),
            logits_to_keep=1,
        )
        logits = out.logits[:, -1, :].to(dtype=torch.float32)
        tokens = self._sample(group, logits)
        now = time.monotonic()
        keep = []
        for i, s in enumerate(group):
            s.first_token_at = now
            self._post(s.publish, *s.add(tokens[i]))
            if s.finish is None:
                keep.append(i)
        self.stats.prefill(time.perf_counter() - t0, len(group), sum(len(s.prompt_ids) for s in group))
        if not keep:
            return
        layers = _layers(out.past_key_values)
        if len(keep) < len(group):
            idx = torch.tensor(keep, device=self.device)
            for layer in layers:
                layer.keys = layer.keys.index_select(0, idx)
                layer.values = layer.values.index_select(0, idx)
            mask = mask.index_select(0, idx)
        kept = [group[i] for i in keep]
        last = torch.tensor([s.ids[-1] for s in kept], dtype=torch.long, device=self.device)
        npos = torch.tensor([len(s.prompt_ids) for s in kept], dtype=torch.long, device=self.device)
        self._merge(out.past_key_values, mask, kept, last, npos)
        self._trim()

    def _merge(self, cache, mask, seqs, last, pos):
        torch = self.torch
        if self.cache is None:
            self.cache, self.mask, self.rows, self.last, self.pos = cache, mask, list(seqs), last, pos
            return
        cur, new = int(self.mask.shape[1]), int(mask.shape[1])
        if new < cur:
            _pad_left(torch, _layers(cache), cur - new)
            mask = torch.nn.functional.pad(mask, (cur - new, 0))
        elif new > cur:
            _pad_left(torch, _layers(self.cache), new - cur)
            self.mask = torch.nn.functional.pad(self.mask, (new - cur, 0))
        for mine, theirs in zip(_layers(self.cache), _layers(cache)):  # noqa: B905 - same model, same layers (3.9: no strict=)
            mine.keys = torch.cat([mine.keys, theirs.keys], dim=0)
            mine.values = torch.cat([mine.values, theirs.values], dim=0)
        self.mask = torch.cat([self.mask, mask], dim=0)
        self.last = torch.cat([self.last, last])
        self.pos = torch.cat([self.pos, pos])
        self.rows.extend(seqs)

    # ----------------------------------------------------------------------------- decode

    def _decode(self):
        torch = self.torch
        t0 = time.perf_counter()
        length = int(self.mask.shape[1])
        self.mask = torch.cat([self.mask, torch.ones((len(self.rows), 1), dtype=torch.long, device=self.device)], 1)
        out = self.model(
            input_ids=self.last[:, None],
            attention_mask=self.mask,
            position_ids=self.pos[:, None],
            past_key_values=self.cache,
            use_cache=True,
            **self._cache_pos(length, length + 1),
            logits_to_keep=1,
        )
        self.pos = self.pos + 1
        logits = out.logits[:, -1, :].to(dtype=torch.float32)
        t1 = time.perf_counter()
        tokens = self._sample(self.rows, logits)
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
        self.last = torch.tensor(tokens, dtype=torch.long, device=self.device)
        t3 = time.perf_counter()
        self.stats.decode(len(self.rows), t1 - t0, t2 - t1, t3 - t2)
        if len(keep) < len(self.rows):
            self._keep(keep)

    def _keep(self, keep):
        torch = self.torch
        if not keep:
            self._reset()
            return
        idx = torch.tensor(keep, device=self.device)
        for layer in _layers(self.cache):
            layer.keys = layer.keys.index_select(0, idx)
            layer.values = layer.values.index_select(0, idx)
        self.mask = self.mask.index_select(0, idx)
        self.last = self.last.index_select(0, idx)
        self.pos = self.pos.index_select(0, idx)
        self.rows = [self.rows[i] for i in keep]
        self._trim()

    def _trim(self):
        """Drop leading columns that are padding in every row (the cache shrinks with the batch)."""
        used = self.mask.sum(0) > 0
        first = int(used.to(self.torch.int8).argmax()) if bool(used.any()) else 0
        if first > 0:
            for layer in _layers(self.cache):
                layer.keys = layer.keys[:, :, first:, :]
                layer.values = layer.values[:, :, first:, :]
            self.mask = self.mask[:, first:]

    def _reset(self):
        self.cache = self.mask = self.pos = self.last = None
        self.rows = []

    # ----------------------------------------------------------------------------- sampling

    def _sample(self, seqs, logits):
        """One token per row: argmax for plain greedy rows (batched), per-row processing otherwise."""
        if not any(s.needs_processing for s in seqs):
            return logits.argmax(dim=-1).tolist()
        greedy = logits.argmax(dim=-1)
        out = []
        for i, s in enumerate(seqs):
            if not s.needs_processing:
                out.append(int(greedy[i]))
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


def _layers(cache):
    layers = getattr(cache, "layers", None)
    if layers is None:
        raise RuntimeError("this transformers' DynamicCache has no .layers (transformers >= 4.56 is needed)")
    return layers


def _pad_left(torch, layers, n):
    for layer in layers:
        layer.keys = torch.nn.functional.pad(layer.keys, (0, 0, n, 0))
        layer.values = torch.nn.functional.pad(layer.values, (0, 0, n, 0))


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
            f"{rows} running, {waiting} waiting{memory()}"
        )
        self.since = now
        self._zero()
