"""Request validation and streaming detokenization of the transformers runtime's python model.

roles/triton_server/files/transformers/generation_request.py has no Triton or torch imports, so it
is tested here directly.
"""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "roles/triton_server/files/transformers"))

from generation_request import (  # noqa: E402
    Limits,
    RequestError,
    TextStream,
    check_prompt_length,
    parse_request,
)

LIMITS = Limits(max_input_len=100, max_output_len=64, max_seq_len=128)


def t(value, dtype=None):
    """A Triton-style [1] tensor."""
    if isinstance(value, str):
        return np.array([value.encode()], dtype=np.object_)
    return np.array([value], dtype=dtype)


def test_minimal_request_is_greedy_and_not_streaming():
    req = parse_request({"text_input": t("hello"), "max_tokens": t(8, np.int32)}, LIMITS)
    assert req.prompt == "hello" and req.max_tokens == 8
    assert req.greedy and not req.stream
    assert req.exclude_input_in_output


def test_sampling_and_stream_fields():
    req = parse_request(
        {
            "text_input": t("hi"),
            "max_tokens": t(4, np.int32),
            "stream": t(True, np.bool_),
            "temperature": t(0.7, np.float32),
            "top_p": t(0.9, np.float32),
            "top_k": t(20, np.int32),
            "random_seed": t(7, np.uint64),
            "stop_words": np.array([b"</s>", b"END"], dtype=np.object_),
        },
        LIMITS,
    )
    assert req.stream and not req.greedy
    assert req.temperature == pytest.approx(0.7)
    assert req.top_k == 20 and req.seed == 7
    assert req.stop_words == ["</s>", "END"]


def test_seed_alias():
    req = parse_request({"text_input": t("hi"), "max_tokens": t(4, np.int32), "seed": t(3, np.uint64)}, LIMITS)
    assert req.seed == 3


@pytest.mark.parametrize(
    "inputs, needle",
    [
        ({"text_input": t(""), "max_tokens": t(4, np.int32)}, "text_input is empty"),
        ({"text_input": t("   "), "max_tokens": t(4, np.int32)}, "text_input is empty"),
        ({"max_tokens": t(4, np.int32)}, "text_input is empty"),
        ({"text_input": t("x")}, "max_tokens is required"),
        ({"text_input": t("x"), "max_tokens": t(0, np.int32)}, "max_tokens must be > 0"),
        ({"text_input": t("x"), "max_tokens": t(-3, np.int32)}, "max_tokens must be > 0"),
        ({"text_input": t("x"), "max_tokens": t(65, np.int32)}, "beyond this deployment's limit of 64"),
        ({"text_input": t("x"), "max_tokens": t(4, np.int32), "temperature": t(-1.0, np.float32)}, "temperature"),
        ({"text_input": t("x"), "max_tokens": t(4, np.int32), "top_p": t(0.0, np.float32)}, "top_p"),
        ({"text_input": t("x"), "max_tokens": t(4, np.int32), "top_k": t(-1, np.int32)}, "top_k"),
        ({"text_input": t("x"), "max_tokens": t(4, np.int32), "beam_width": t(2, np.int32)}, "beam_width"),
        ({"text_input": np.array([b"\xff\xfe"], dtype=np.object_), "max_tokens": t(4, np.int32)}, "UTF-8"),
    ],
)
def test_bad_requests(inputs, needle):
    with pytest.raises(RequestError, match=needle):
        parse_request(inputs, LIMITS)


def test_prompt_length_limits():
    req = parse_request({"text_input": t("x"), "max_tokens": t(30, np.int32)}, LIMITS)
    check_prompt_length(90, req, LIMITS)
    with pytest.raises(RequestError, match="max_input_len of 100"):
        check_prompt_length(101, req, LIMITS)
    with pytest.raises(RequestError, match="exceeds max_seq_len 128"):
        check_prompt_length(100, req, LIMITS)
    with pytest.raises(RequestError, match="no tokens"):
        check_prompt_length(0, req, LIMITS)


# A toy tokenizer: id n -> VOCAB[n]; id 9 is half of a multibyte character.
VOCAB = {1: "Hel", 2: "lo", 3: " wor", 4: "ld", 5: " ST", 6: "OP", 7: " more", 9: "\ufffd"}


def decode(ids):
    return "".join(VOCAB[i] for i in ids)


def test_text_stream_concatenates_to_full_text():
    s = TextStream(decode)
    ids, pieces = [], []
    for i in (1, 2, 3, 4):
        ids.append(i)
        pieces.append(s.update(ids))
    pieces.append(s.update(ids, final=True))
    assert "".join(pieces) == "Hello world"
    assert len([p for p in pieces if p]) >= 3


def test_text_stream_holds_partial_characters():
    s = TextStream(decode)
    assert s.update([1, 9]) == "Hel"
    assert s.update([1, 9], final=True) == "\ufffd"


def test_stop_word_stops_and_is_not_emitted():
    s = TextStream(decode, ["STOP"])
    out = ""
    ids = []
    for i in (1, 2, 5, 6, 7):
        ids.append(i)
        out += s.update(ids)
        if s.stopped:
            break
    assert s.stopped
    assert out == "Hello "
    assert "ST" not in out
    assert s.update(ids + [7]) == ""
