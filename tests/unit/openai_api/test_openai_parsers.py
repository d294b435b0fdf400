"""Streaming parsers fed real Qwen3 output shapes, split at every position (and token by token)."""

import json

import pytest
from triton_fleet_openai.parsers import OutputParser, StopMatcher, parse_all, parse_tool_block

THINK_ANSWER = "<think>\nThe user greets me.\nI greet back.\n</think>\n\nHello! How can I help?"
EMPTY_THINK = "<think>\n\n</think>\n\nHello!"
TOOL_ONE = (
    "<think>\nI need the weather.\n</think>\n\n"
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich", "unit": "c"}}\n</tool_call>'
)
TOOL_TWO = (
    'Let me check both.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
)
MALFORMED = 'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": }\n</tool_call>\nDone.'
UNCLOSED = 'Sure.\n<tool_call>\n{"name": "get_weather", "argu'
NEAR_TAGS = "a < b and <thin client> <tool_cal> </think stays"


def collect(events):
    content, reasoning, calls = "", "", []
    for kind, value in events:
        if kind == "content":
            content += value
        elif kind == "reasoning":
            reasoning += value
        else:
            calls.append(value)
    return content, reasoning, calls


def run_split(text, split, **kw):
    p = OutputParser(**kw)
    events = p.feed(text[:split]) + p.feed(text[split:]) + p.finish()
    return collect(events)


def run_chars(text, **kw):
    p = OutputParser(**kw)
    events = []
    for ch in text:
        events += p.feed(ch)
    return collect(events + p.finish())


CASES = [
    (THINK_ANSWER, {"tools": False}, ("Hello! How can I help?", "The user greets me.\nI greet back.", [])),
    (EMPTY_THINK, {"tools": False}, ("Hello!", "", [])),
    (TOOL_ONE, {"tools": True}, ("", "I need the weather.", [{"name": "get_weather", "arguments": json.dumps({"city": "Zürich", "unit": "c"}, ensure_ascii=False)}])),
    (TOOL_TWO, {"tools": True}, ("Let me check both.\n", "", [{"name": "get_weather", "arguments": '{"city": "Paris"}'}, {"name": "get_time", "arguments": "{}"}])),
    (MALFORMED, {"tools": True}, (MALFORMED, "", [])),
    (UNCLOSED, {"tools": True}, (UNCLOSED, "", [])),
    (NEAR_TAGS, {"tools": True}, (NEAR_TAGS, "", [])),
    (TOOL_TWO, {"tools": False}, (TOOL_TWO, "", [])),  # tool_choice none / no tools: the text is content
    ("Hi <think>not at start</think>", {"tools": False}, ("Hi <think>not at start</think>", "", [])),
]


@pytest.mark.parametrize(("text", "kw", "expected"), CASES, ids=[str(i) for i in range(len(CASES))])
def test_every_split_gives_the_same_result(text, kw, expected):
    assert collect(parse_all(text, **kw)) == expected
    for split in range(len(text) + 1):
        assert run_split(text, split, **kw) == expected, split
    assert run_chars(text, **kw) == expected


@pytest.mark.parametrize("text", [THINK_ANSWER, TOOL_ONE, TOOL_TWO, MALFORMED])
def test_tags_never_leak_partially(text):
    """No emitted content piece ends in the middle of a tag that is later completed."""
    p = OutputParser(tools=True)
    for ch in text:
        for kind, value in p.feed(ch):
            if kind == "content" and text is not MALFORMED:
                assert "<tool_call" not in value and "<think" not in value and "</think" not in value


def test_reasoning_off_keeps_think_tags_as_content():
    assert collect(parse_all(THINK_ANSWER, reasoning=False)) == (THINK_ANSWER, "", [])


def test_thinking_cut_by_length_stays_reasoning():
    assert collect(parse_all("<think>\nlong thoughts", tools=True)) == ("", "long thoughts", [])


def test_tool_block_shapes():
    assert parse_tool_block('{"name": "f", "arguments": "{\\"a\\": 1}"}') == {"name": "f", "arguments": '{"a": 1}'}
    assert parse_tool_block('{"name": "f"}') == {"name": "f", "arguments": "{}"}
    assert parse_tool_block('{"arguments": {}}') is None
    assert parse_tool_block('["f"]') is None
    assert parse_tool_block('{"name": "f", "arguments": 3}') is None
    assert parse_tool_block('{"name": "f", "arguments": "not json"}') is None


@pytest.mark.parametrize("stops", [["\n\n"], ["STOP", "END"], ["Hello"]])
def test_stop_matcher_every_split(stops):
    text = "Hi there.\n\nSTOP and END Hello"
    cut = min(text.find(s) for s in stops if s in text)
    for split in range(len(text) + 1):
        m = StopMatcher(stops)
        out = m.feed(text[:split]) + m.feed(text[split:]) + m.finish()
        assert out == text[:cut], split
        assert m.stopped


def test_stop_matcher_releases_held_text_at_the_end():
    m = StopMatcher(["STOP"])
    assert m.feed("abc ST") == "abc "
    assert m.finish() == "ST"
    assert not m.stopped
