"""The service's sandboxed rendering of Qwen3's chat template equals transformers' apply_chat_template."""

import json

import pytest
from triton_fleet_openai.schemas import ChatRequest, template_messages
from triton_fleet_openai.template import ChatTemplate, TemplateError
from triton_fleet_openai.tokenizer import TokenCounter

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "Name, e.g. Zürich"}},
            "required": ["city"],
        },
    },
}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}

CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Zürich"}'}}

CONVERSATIONS = {
    "user": [{"role": "user", "content": "Hello"}],
    "system": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"}],
    "developer": [{"role": "developer", "content": "Answer in French."}, {"role": "user", "content": "Hi"}],
    "multi_turn": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "<think>\nsimple\n</think>\n\n4"},
        {"role": "user", "content": "and 3+3?"},
    ],
    "assistant_reasoning_field": [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4", "reasoning_content": "add them"},
        {"role": "user", "content": "thanks"},
    ],
    "text_parts": [{"role": "user", "content": [{"type": "text", "text": "one "}, {"type": "text", "text": "two"}]}],
    "tools": [{"role": "user", "content": "Weather in Zürich?"}],
    "tool_round_trip": [
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "Weather in Zürich?"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c": 21}'},
    ],
    "two_tool_results": [
        {"role": "user", "content": "Weather and time?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [CALL, {**CALL, "id": "call_2", "function": {"name": "get_time", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "21 C"},
        {"role": "tool", "tool_call_id": "call_2", "content": "12:00"},
        {"role": "assistant", "content": "21 C at noon."},
        {"role": "user", "content": "Thanks"},
    ],
}
WITH_TOOLS = {"tools", "tool_round_trip", "two_tool_results"}


@pytest.fixture(scope="module")
def hf(tokenizer_dir):
    transformers = pytest.importorskip("transformers", reason="transformers is pinned in requirements.txt")
    return transformers.AutoTokenizer.from_pretrained(tokenizer_dir)


@pytest.fixture(scope="module")
def template(tokenizer_dir):
    return ChatTemplate.from_tokenizer_dir(tokenizer_dir)


@pytest.mark.parametrize("thinking", [None, True, False])
@pytest.mark.parametrize("name", sorted(CONVERSATIONS))
def test_prompt_equals_transformers(name, thinking, hf, template):
    body = {"model": "m", "messages": CONVERSATIONS[name]}
    if name in WITH_TOOLS:
        body["tools"] = [WEATHER, TIME]
    kwargs = {} if thinking is None else {"enable_thinking": thinking}
    req = ChatRequest.model_validate(body)
    messages = template_messages(req)
    tools = [t.model_dump(exclude_none=True) for t in req.tools] if req.tools else None
    ours = template.render(messages, tools=tools, add_generation_prompt=True, **kwargs)
    theirs = hf.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True, **kwargs)
    assert ours == theirs
    if thinking is False:
        assert ours.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    if name in WITH_TOOLS:
        assert json.dumps(WEATHER, ensure_ascii=False) in ours  # non-ASCII kept, as transformers' tojson does


def test_prompt_tokens_match_transformers(hf, template, tokenizer_dir):
    counter = TokenCounter(tokenizer_dir)
    for name, conv in CONVERSATIONS.items():
        req = ChatRequest.model_validate({"model": "m", "messages": conv})
        prompt = template.render(template_messages(req))
        assert counter.count(prompt) == len(hf(prompt)["input_ids"]), name


def test_the_token_bound_is_never_below_the_count(template, tokenizer_dir):
    counter = TokenCounter(tokenizer_dir)
    assert counter.bytes_bound  # Qwen3: byte-level BPE behind NFC
    texts = [
        "", "a", "Hello, world!", "word " * 300, "\n\n\n", "  \t  x", "<|im_start|>user\nHi<|im_end|>",
        "日本語のテキストです。", "emoji 🙂🚀👩‍👩‍👧", "e\u0301 composed", "\u212b angstrom sign",
        "\u0958\u0959\u095a composition exclusions (NFC makes them longer)", "\ufb01 ligature", "\x00\x7f control",
    ]
    for conv in CONVERSATIONS.values():
        req = ChatRequest.model_validate({"model": "m", "messages": conv})
        texts.append(template.render(template_messages(req)))
    for text in texts:
        assert counter.upper_bound(text) >= counter.count(text), repr(text[:40])
    assert counter.upper_bound("\u0958") == 6 > len("\u0958".encode())  # the NFC form's bytes, not the input's


def test_no_bound_for_other_tokenizers():
    from triton_fleet_openai.tokenizer import _bytes_bound_holds

    byte_bpe = {"normalizer": None, "pre_tokenizer": {"type": "ByteLevel"}, "model": {"type": "BPE"}}
    assert _bytes_bound_holds(byte_bpe)
    # SentencePiece-style (NFKC, metaspace) and WordPiece tokenizers: counted exactly, never bounded.
    assert not _bytes_bound_holds({**byte_bpe, "normalizer": {"type": "NFKC"}})
    assert not _bytes_bound_holds({**byte_bpe, "pre_tokenizer": {"type": "Metaspace"}})
    assert not _bytes_bound_holds({**byte_bpe, "model": {"type": "WordPiece"}})


def test_template_errors_are_400(tmp_path):
    tpl = ChatTemplate("{{ raise_exception('roles must alternate') }}")
    with pytest.raises(TemplateError) as err:
        tpl.render([{"role": "user", "content": "x"}])
    assert err.value.status == 400 and "roles must alternate" in err.value.message


def test_sandbox_refuses_attribute_access():
    tpl = ChatTemplate("{{ messages.__class__.__mro__ }}")
    with pytest.raises(Exception) as err:
        tpl.render([{"role": "user", "content": "x"}])
    assert "unsafe" in str(err.value).lower() or "attribute" in str(err.value).lower()


def test_missing_tokenizer_config(tmp_path):
    with pytest.raises(ValueError, match="tokenizer_config.json"):
        ChatTemplate.from_tokenizer_dir(str(tmp_path))
