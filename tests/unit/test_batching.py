"""In-flight batching of the transformers runtime (roles/triton_server/files/transformers/batching.py).

The Sequence tests need neither torch nor Triton. The engine tests need torch and transformers (the
lab image and the GPU bench have them; they are skipped where they are not installed): a small
random Qwen3 with a byte-level test tokenizer, requests that arrive while others generate, each
checked token for token against transformers' own greedy ``generate``.
"""

import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "roles/triton_server/files/transformers"))

from batching import Sequence, Sink  # noqa: E402
from generation_request import GenerationRequest, Limits  # noqa: E402

LIMITS = Limits(max_input_len=200, max_output_len=64, max_seq_len=256)


class Collect(Sink):
    def __init__(self, cancel_after=None):
        self.events = []
        self.errors = []
        self.done = threading.Event()
        self.cancel_after = cancel_after  # cancelled() turns true at its n-th call
        self.asked = 0

    def send(self, text, ids, finish=None, final=False):
        self.events.append((text, list(ids), finish))
        if final:
            self.done.set()

    def fail(self, message):
        self.errors.append(message)
        self.done.set()

    def cancelled(self):
        self.asked += 1
        return self.cancel_after is not None and self.asked >= self.cancel_after

    @property
    def ids(self):
        return [i for e in self.events for i in e[1]]

    @property
    def finish(self):
        return self.events[-1][2] if self.events else None


def chars(ids):
    return "".join(chr(97 + (i % 26)) for i in ids)


def seq(req, eos=(99,)):
    return Sequence(req, Collect(), [1, 2, 3], eos, chars, [], 0.0)


def step(s, tok):
    """What the scheduler and the emitter do with one token, in order."""
    s.publish(*s.add(tok))
    return s.finish or ("stop" if s.stop_word else None)


# ------------------------------------------------------------------------------ Sequence (no torch)


def test_sequence_stops_at_max_tokens():
    s = seq(GenerationRequest(prompt="p", max_tokens=3))
    for tok in (5, 6, 7):
        step(s, tok)
    assert s.finish == "length"
    assert s.sink.events == [("fgh", [5, 6, 7], "length")]


def test_sequence_stops_at_eos_and_keeps_it_in_the_ids():
    s = seq(GenerationRequest(prompt="p", max_tokens=10))
    for tok in (5, 99):
        step(s, tok)
    assert s.finish == "stop" and s.sink.ids == [5, 99] and s.sink.finish == "stop"


def test_sequence_min_tokens_overrides_eos():
    s = seq(GenerationRequest(prompt="p", max_tokens=10, min_tokens=3))
    step(s, 99)
    assert s.finish is None


def test_sequence_stop_word_cuts_the_text():
    # ids 0..: a b c ...; stop word "cd"
    s = seq(GenerationRequest(prompt="p", max_tokens=10, stop_words=["cd"], stream=True))
    for tok in (0, 1, 2, 3, 4):
        if step(s, tok):
            break
    assert s.stop_word and s.sink.finish == "stop"
    assert "".join(e[0] for e in s.sink.events) == "ab"


def test_sequence_streams_deltas_that_add_up():
    s = seq(GenerationRequest(prompt="p", max_tokens=4, stream=True))
    for tok in (0, 1, 2, 3):
        step(s, tok)
    assert len(s.sink.events) >= 3
    assert "".join(e[0] for e in s.sink.events) == "abcd"
    assert s.sink.ids == [0, 1, 2, 3] and s.sink.finish == "length"


def test_sequence_non_streamed_includes_prompt_when_asked():
    s = seq(GenerationRequest(prompt="P:", max_tokens=2, exclude_input_in_output=False))
    for tok in (0, 1):
        step(s, tok)
    assert s.sink.events == [("P:ab", [0, 1], "length")]


# ------------------------------------------------------------------------------ engine (torch)


class ByteTokenizer:
    """Test tokenizer: one token per byte (+3), 0 = pad, 2 = EOS."""

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": [b + 3 for b in text.encode()]}

    def decode(self, ids, skip_special_tokens=True):
        return bytes(i - 3 for i in ids if 3 <= i < 259).decode("utf-8", "replace")


@pytest.fixture(scope="module")
def tiny():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(1234)
    cfg = transformers.Qwen3Config(
        vocab_size=259,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=512,
        tie_word_embeddings=False,
        initializer_range=0.5,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    model = transformers.Qwen3ForCausalLM(cfg).to(torch.float32).eval()
    return torch, model


def reference(torch, model, tok, prompt, n):
    ids = torch.tensor([tok(prompt)["input_ids"]], device=next(model.parameters()).device)
    with torch.inference_mode():
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=n,
            do_sample=False,
            pad_token_id=0,
            eos_token_id=[2],
        )
    return out[0, ids.shape[1] :].tolist()


def engine(torch, model, **kw):
    from batching import BatchEngine

    args = {"max_batch": 8, "kv_tokens": 8 * 256, "prefill_tokens": 256, "eos_ids": [2], "pad_id": 0}
    args.update(kw)
    return BatchEngine(model, ByteTokenizer(), torch.device("cpu"), LIMITS, **args)


PROMPTS = [
    "The quick brown fox",
    "hello",
    "Tell me a story about a dragon who",
    "x",
    "0123456789 0123456789 0123456789",
    "Once upon a time",
    "Why?",
    "In-flight batching joins requests at the next step",
]


def test_alone_equals_generate(tiny):
    torch, model = tiny
    eng = engine(torch, model)
    try:
        sink = Collect()
        eng.submit(GenerationRequest(prompt=PROMPTS[0], max_tokens=24), sink)
        assert sink.done.wait(60)
        assert sink.ids == reference(torch, model, ByteTokenizer(), PROMPTS[0], 24)
    finally:
        eng.stop()


def test_eight_concurrent_staggered_equal_generate(tiny):
    torch, model = tiny
    tok = ByteTokenizer()
    want = [reference(torch, model, tok, p, 12 + 3 * i) for i, p in enumerate(PROMPTS)]
    eng = engine(torch, model)
    seen_batches = []
    orig = eng.stats.decode

    def spy(rows, *a):
        seen_batches.append(rows)
        orig(rows, *a)

    eng.stats.decode = spy
    try:
        sinks = []
        for i, p in enumerate(PROMPTS):
            sink = Collect()
            sinks.append(sink)
            eng.submit(GenerationRequest(prompt=p, max_tokens=12 + 3 * i, stream=(i % 2 == 0)), sink)
            time.sleep(0.01 * (i % 3))  # some arrive together, some while others decode
        for sink in sinks:
            assert sink.done.wait(60)
        for i, sink in enumerate(sinks):
            assert not sink.errors
            assert sink.ids == want[i], f"request {i}"
        assert max(seen_batches) >= 4  # they really shared the batch
    finally:
        eng.stop()


def test_cancelled_request_leaves_the_batch(tiny):
    torch, model = tiny
    eng = engine(torch, model, max_batch=2)
    eng.cancel_check_s = 0.0
    try:
        gone = Collect(cancel_after=5)
        stays = Collect()
        eng.submit(GenerationRequest(prompt="hello", max_tokens=60, stream=True), gone)
        eng.submit(GenerationRequest(prompt="hello there", max_tokens=30), stays)
        assert gone.done.wait(60) and stays.done.wait(60)
        assert gone.finish == "cancelled" and not gone.errors
        assert gone.asked == 5  # asked once at admission, then once per step until it left
        assert stays.ids == reference(torch, model, ByteTokenizer(), "hello there", 30)
    finally:
        eng.stop()


def test_kv_budget_holds_back_what_does_not_fit(tiny):
    torch, model = tiny
    # budget of one sequence: the second request waits until the first has left the batch
    eng = engine(torch, model, kv_tokens=LIMITS.max_seq_len)
    seen = []
    orig = eng.stats.decode
    eng.stats.decode = lambda rows, *a: (seen.append(rows), orig(rows, *a))
    try:
        a, b = Collect(), Collect()
        eng.submit(GenerationRequest(prompt="a" * 100, max_tokens=64), a)
        eng.submit(GenerationRequest(prompt="b" * 100, max_tokens=64), b)
        assert a.done.wait(60) and b.done.wait(60)
        assert max(seen) == 1
        assert b.ids == reference(torch, model, ByteTokenizer(), "b" * 100, 64)
    finally:
        eng.stop()


def test_stop_words_and_seeded_sampling_per_row(tiny):
    torch, model = tiny
    eng = engine(torch, model)
    try:
        runs = []
        for _ in range(2):
            s1, s2 = Collect(), Collect()
            eng.submit(
                GenerationRequest(prompt="hello", max_tokens=20, temperature=1.0, top_p=0.9, top_k=50, seed=42), s1
            )
            eng.submit(GenerationRequest(prompt="hello", max_tokens=20), s2)
            assert s1.done.wait(60) and s2.done.wait(60)
            runs.append((s1.ids, s2.ids))
        assert runs[0][0] == runs[1][0]  # same seed, same tokens, whatever else is in the batch
        greedy = runs[0][1]
        text = ByteTokenizer().decode(greedy)
        stop = text[3:5]
        if stop:
            s3 = Collect()
            eng.submit(GenerationRequest(prompt="hello", max_tokens=20, stop_words=[stop]), s3)
            assert s3.done.wait(60)
            assert s3.finish == "stop" and stop not in s3.events[-1][0]
    finally:
        eng.stop()


def test_rows_join_slots_that_others_left(tiny):
    torch, model = tiny
    tok = ByteTokenizer()
    lengths = [30, 5, 18, 9, 25, 3, 14]
    want = [reference(torch, model, tok, PROMPTS[i], n) for i, n in enumerate(lengths)]
    # 3 slots for 7 requests: the later ones take the slots of the short ones, in the middle of the batch
    eng = engine(torch, model, max_batch=3)
    seen = []
    orig = eng.stats.decode
    eng.stats.decode = lambda rows, *a: (seen.append(rows), orig(rows, *a))
    try:
        sinks = [Collect() for _ in lengths]
        for i, n in enumerate(lengths):
            eng.submit(GenerationRequest(prompt=PROMPTS[i], max_tokens=n, stream=bool(i % 2)), sinks[i])
        for sink in sinks:
            assert sink.done.wait(60)
        for i, sink in enumerate(sinks):
            assert not sink.errors and sink.ids == want[i], f"request {i}"
        assert max(seen) == 3
    finally:
        eng.stop()


def test_padded_buckets_equal_generate(tiny):
    # what the CUDA graphs run: rows rounded up to a bucket (padding rows in free slots) and the
    # attended columns rounded up to SPAN_STEP, here on the CPU
    torch, model = tiny
    tok = ByteTokenizer()
    want = [reference(torch, model, tok, p, 10 + 2 * i) for i, p in enumerate(PROMPTS[:5])]
    eng = engine(torch, model, buckets=True)
    try:
        sinks = [Collect() for _ in want]
        for i, sink in enumerate(sinks):
            eng.submit(GenerationRequest(prompt=PROMPTS[i], max_tokens=10 + 2 * i), sink)
        for sink in sinks:
            assert sink.done.wait(60)
        for i, sink in enumerate(sinks):
            assert not sink.errors and sink.ids == want[i], f"request {i}"
    finally:
        eng.stop()


def test_kv_cache_is_allocated_once_at_load(tiny):
    torch, model = tiny
    eng = engine(torch, model, max_batch=4, kv_tokens=3 * LIMITS.max_seq_len)
    try:
        kv = eng.kv
        assert eng.slots == 3  # the KV budget, not max_batch, sets the rows
        cfg = model.config
        per_token = 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * cfg.head_dim * 4
        assert kv.nbytes() == 3 * (LIMITS.max_seq_len + 1) * per_token
        before = [t.data_ptr() for t in kv.keys + kv.values]
        sinks = [Collect() for _ in range(5)]
        for i, sink in enumerate(sinks):
            eng.submit(GenerationRequest(prompt=PROMPTS[i], max_tokens=20), sink)
        for sink in sinks:
            assert sink.done.wait(60) and not sink.errors
        assert [t.data_ptr() for t in kv.keys + kv.values] == before
    finally:
        eng.stop()


def test_cuda_graphs_equal_generate(tiny):
    torch, model = tiny
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    import copy

    gpu = copy.deepcopy(model).to("cuda")
    tok = ByteTokenizer()

    want = [reference(torch, gpu, tok, p, 12 + 3 * i) for i, p in enumerate(PROMPTS)]
    from batching import BatchEngine

    eng = BatchEngine(
        gpu,
        tok,
        torch.device("cuda"),
        LIMITS,
        max_batch=8,
        kv_tokens=8 * 256,
        prefill_tokens=256,
        eos_ids=[2],
        pad_id=0,
    )
    try:
        assert eng.use_graphs
        for _ in range(2):  # the second round replays the graphs the first one captured
            sinks = []
            for i, p in enumerate(PROMPTS):
                sinks.append(Collect())
                eng.submit(GenerationRequest(prompt=p, max_tokens=12 + 3 * i, stream=(i % 2 == 0)), sinks[-1])
                time.sleep(0.01 * (i % 3))
            for sink in sinks:
                assert sink.done.wait(60)
            for i, sink in enumerate(sinks):
                assert not sink.errors and sink.ids == want[i], f"request {i}"
        assert eng.use_graphs and eng.graphs
        s1, s2 = Collect(), Collect()
        for sink in (s1, s2):
            eng.submit(GenerationRequest(prompt="hello", max_tokens=20, temperature=1.0, top_k=50, seed=7), sink)
        assert s1.done.wait(60) and s2.done.wait(60)
        assert s1.ids == s2.ids
    finally:
        eng.stop()
