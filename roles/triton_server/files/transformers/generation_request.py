"""Request handling of the triton-fleet ``transformers`` runtime, free of Triton and torch.

``model.py`` (the python-backend model) imports this module from its own directory; unit tests
import it directly (tests/unit/test_generation_request.py). It turns the TRT-LLM ensemble's
request tensors into :class:`GenerationRequest`, refuses bad requests with :class:`RequestError`
(sent back to that one client as an INVALID_ARG error, the model stays up), and turns growing
lists of token ids into text deltas with stop words applied (:class:`TextStream`).
"""

from dataclasses import dataclass, field


class RequestError(ValueError):
    """A bad request: reported to the client (HTTP 400), never raised out of the model."""


@dataclass
class Limits:
    max_input_len: int
    max_output_len: int
    max_seq_len: int


@dataclass
class GenerationRequest:
    prompt: str
    max_tokens: int
    stream: bool = False
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    stop_words: list = field(default_factory=list)
    bad_words: list = field(default_factory=list)
    seed: int = None
    repetition_penalty: float = 1.0
    min_tokens: int = 0
    end_id: int = None
    pad_id: int = None
    exclude_input_in_output: bool = True

    @property
    def greedy(self):
        return self.temperature <= 0.0 or self.top_k == 1


def _scalar(value):
    """First element of a numpy array / list / scalar (Triton gives shape [1] arrays)."""
    while hasattr(value, "tolist") and not isinstance(value, (bytes, str)):
        value = value.tolist()
    while isinstance(value, (list, tuple)):
        if not value:
            return None
        value = value[0]
    return value


def _text(value, name):
    v = _scalar(value)
    if isinstance(v, bytes):
        try:
            v = v.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RequestError(f"{name} is not valid UTF-8 ({exc})") from None
    if v is not None and not isinstance(v, str):
        raise RequestError(f"{name} must be a string, got {v!r}")
    return v


def _strings(value, name):
    if value is None:
        return []
    while hasattr(value, "tolist"):
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        value = [value]
    out = []
    stack = list(value)
    while stack:
        item = stack.pop(0)
        if isinstance(item, (list, tuple)):
            stack[0:0] = list(item)
            continue
        if isinstance(item, bytes):
            item = item.decode("utf-8", "replace")
        if not isinstance(item, str):
            raise RequestError(f"{name} must be strings, got {item!r}")
        if item:
            out.append(item)
    return out


def _number(value, name, kind):
    v = _scalar(value)
    if v is None:
        return None
    if isinstance(v, bool) and kind is not bool:
        raise RequestError(f"{name} must be a number, got {v!r}")
    try:
        return kind(v)
    except (TypeError, ValueError):
        raise RequestError(f"{name} must be {kind.__name__}, got {v!r}") from None


def parse_request(inputs, limits):
    """``inputs``: {tensor name: value or None}. Returns :class:`GenerationRequest`.

    Raises :class:`RequestError` with a message for the client.
    """
    prompt = _text(inputs.get("text_input"), "text_input")
    if prompt is None or not prompt.strip():
        raise RequestError("text_input is empty: send the prompt text in text_input")
    max_tokens = _number(inputs.get("max_tokens"), "max_tokens", int)
    if max_tokens is None:
        raise RequestError("max_tokens is required (the number of tokens to generate)")
    if max_tokens <= 0:
        raise RequestError(f"max_tokens must be > 0, got {max_tokens}")
    if max_tokens > limits.max_output_len:
        raise RequestError(
            f"max_tokens {max_tokens} is beyond this deployment's limit of {limits.max_output_len} "
            "(profile limits.max_output_len)"
        )
    req = GenerationRequest(prompt=prompt, max_tokens=max_tokens)
    stream = _scalar(inputs.get("stream"))
    req.stream = bool(stream) if stream is not None else False
    t = _number(inputs.get("temperature"), "temperature", float)
    if t is not None:
        if t < 0:
            raise RequestError(f"temperature must be >= 0 (0 = greedy), got {t!r}")
        req.temperature = t
    p = _number(inputs.get("top_p"), "top_p", float)
    if p is not None:
        if not 0 < p <= 1:
            raise RequestError(f"top_p must be in (0, 1], got {p!r}")
        req.top_p = p
    k = _number(inputs.get("top_k"), "top_k", int)
    if k is not None:
        if k < 0:
            raise RequestError(f"top_k must be >= 0 (0 = no limit), got {k!r}")
        req.top_k = k
    rp = _number(inputs.get("repetition_penalty"), "repetition_penalty", float)
    if rp is not None:
        if rp <= 0:
            raise RequestError(f"repetition_penalty must be > 0, got {rp!r}")
        req.repetition_penalty = rp
    mt = _number(inputs.get("min_tokens"), "min_tokens", int)
    if mt is not None:
        if mt < 0 or mt > max_tokens:
            raise RequestError(f"min_tokens must be between 0 and max_tokens ({max_tokens}), got {mt!r}")
        req.min_tokens = mt
    seed = _number(inputs.get("seed"), "seed", int)
    if seed is None:  # TRT-LLM's name for it, accepted as an alias
        seed = _number(inputs.get("random_seed"), "random_seed", int)
    req.seed = seed
    req.end_id = _number(inputs.get("end_id"), "end_id", int)
    req.pad_id = _number(inputs.get("pad_id"), "pad_id", int)
    ex = _scalar(inputs.get("exclude_input_in_output"))
    if ex is not None:
        req.exclude_input_in_output = bool(ex)
    bw = _number(inputs.get("beam_width"), "beam_width", int)
    if bw is not None and bw != 1:
        raise RequestError(f"beam_width {bw} is not supported by the transformers runtime (only 1)")
    req.stop_words = _strings(inputs.get("stop_words"), "stop_words")
    req.bad_words = _strings(inputs.get("bad_words"), "bad_words")
    return req


def check_prompt_length(n_prompt_tokens, req, limits):
    """Raise :class:`RequestError` when the tokenized prompt does not fit the profile."""
    if n_prompt_tokens == 0:
        raise RequestError("text_input tokenizes to no tokens")
    if n_prompt_tokens > limits.max_input_len:
        raise RequestError(
            f"the prompt is {n_prompt_tokens} tokens, longer than this deployment's max_input_len of "
            f"{limits.max_input_len}: shorten it"
        )
    if n_prompt_tokens + req.max_tokens > limits.max_seq_len:
        raise RequestError(
            f"prompt ({n_prompt_tokens} tokens) + max_tokens ({req.max_tokens}) exceeds max_seq_len "
            f"{limits.max_seq_len}: lower max_tokens to {limits.max_seq_len - n_prompt_tokens} or less"
        )


class TextStream:
    """Incremental detokenization with stop words.

    ``decode`` maps a list of token ids to text (e.g. ``tokenizer.decode(ids, skip_special_tokens=True)``).
    Feed the growing list of generated ids to :meth:`update`; it returns the new text that is safe
    to send (never a partial UTF-8 character, never part of a possible stop word) and sets
    :attr:`stopped` when a stop word appeared (the stop word itself is not emitted).
    """

    def __init__(self, decode, stop_words=()):
        self.decode = decode
        self.stop_words = [w for w in stop_words if w]
        self.emitted = ""
        self.stopped = False
        self._text = ""

    def _safe_len(self, text):
        n = len(text.rstrip("\ufffd"))
        hold = 0
        for w in self.stop_words:
            for k in range(min(len(w) - 1, n), 0, -1):
                if text[:n].endswith(w[:k]):
                    hold = max(hold, k)
                    break
        return max(n - hold, len(self.emitted))

    def update(self, ids, final=False):
        if self.stopped:
            return ""
        text = self.decode(list(ids))
        self._text = text
        cut = None
        for w in self.stop_words:
            i = text.find(w)
            if i != -1 and (cut is None or i < cut):
                cut = i
        if cut is not None:
            self.stopped = True
            final_text = text[:cut]
        elif final:
            final_text = text
        else:
            final_text = text[: self._safe_len(text)]
        if not final_text.startswith(self.emitted):
            # the decoder rewrote earlier text (rare with byte-level BPE): send nothing new
            return ""
        delta = final_text[len(self.emitted) :]
        self.emitted = final_text
        return delta

    @property
    def text(self):
        return self.emitted
