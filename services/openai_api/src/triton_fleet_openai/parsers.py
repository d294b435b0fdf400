"""Streaming parsers for Qwen3 output: stop strings, ``<think>...</think>`` and ``<tool_call>{json}</tool_call>``.

Text arrives in arbitrary pieces (one Triton response each). Every parser holds back the shortest tail
that could still be the start of a marker, so a tag split across pieces never leaks as text, and
emits everything else at once. ``finish()`` flushes what is held back when the stream ends.

Qwen3's formats (from its chat template, tokenizer_config.json): a thinking turn is
``<think>\\n...\\n</think>\\n\\n`` followed by the answer; a tool call is
``<tool_call>\\n{"name": <function-name>, "arguments": <args-json-object>}\\n</tool_call>``, several per turn.
"""

import json
from collections.abc import Sequence
from typing import Optional

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
TOOL_OPEN = "<tool_call>"
TOOL_CLOSE = "</tool_call>"

Event = tuple[str, object]  # ("content", str) | ("reasoning", str) | ("tool_call", {"name", "arguments"})


def _partial_suffix(text: str, markers: Sequence[str]) -> int:
    """Length of the longest tail of ``text`` that is a proper prefix of one of ``markers``."""
    best = 0
    for marker in markers:
        for n in range(min(len(marker) - 1, len(text)), best, -1):
            if text.endswith(marker[:n]):
                best = n
                break
    return best


class StopMatcher:
    """Cuts the text at the first stop string, whatever the backend does with stop words."""

    def __init__(self, stops: Sequence[str]):
        self.stops = [s for s in stops if s]
        self.held = ""
        self.stopped = False

    def feed(self, text: str) -> str:
        if self.stopped or not self.stops:
            return "" if self.stopped else text
        buf = self.held + text
        cut = min((i for i in (buf.find(s) for s in self.stops) if i >= 0), default=-1)
        if cut >= 0:
            self.stopped = True
            self.held = ""
            return buf[:cut]
        keep = _partial_suffix(buf, self.stops)
        self.held = buf[len(buf) - keep :] if keep else ""
        return buf[: len(buf) - keep]

    def finish(self) -> str:
        out, self.held = self.held, ""
        return "" if self.stopped else out


def parse_tool_block(body: str) -> Optional[dict]:
    """The ``{"name", "arguments"}`` of one block, arguments as a JSON string; None when malformed."""
    try:
        data = json.loads(body.strip())
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not data["name"]:
        return None
    args = data.get("arguments", data.get("parameters", {}))
    if isinstance(args, str):
        try:
            json.loads(args)
        except ValueError:
            return None
        arguments = args
    elif isinstance(args, dict):
        arguments = json.dumps(args, ensure_ascii=False)
    else:
        return None
    return {"name": data["name"], "arguments": arguments}


class OutputParser:
    """Splits one assistant turn into content, reasoning and tool calls as it streams.

    ``reasoning``: the turn may open with ``<think>`` (thinking on); ``tools``: ``<tool_call>`` blocks
    are tool calls (the request had tools and tool_choice is not ``none``); ``in_think``: the prompt
    already opened the think block. A malformed tool-call block is given back as content, unchanged.
    """

    def __init__(self, reasoning: bool = True, tools: bool = False, in_think: bool = False):
        self.tools = tools
        self.buf = ""
        self.state = "think" if in_think else ("start" if reasoning else "content")
        self.skip_newlines = in_think  # the newline(s) right after an opening <think>
        self.skip_space = False  # whitespace after </think> or after a tool call
        self.tool_calls = 0

    # ------------------------------------------------------------------
    def feed(self, text: str) -> list[Event]:
        self.buf += text
        events: list[Event] = []
        while True:
            before = (self.state, len(self.buf))
            getattr(self, "_" + self.state)(events, final=False)
            if (self.state, len(self.buf)) == before:
                return events

    def finish(self) -> list[Event]:
        events: list[Event] = []
        for _ in range(8):
            getattr(self, "_" + self.state)(events, final=True)
            if not self.buf:
                break
        return events

    # ------------------------------------------------------------------ states
    def _start(self, events, final):
        if self.buf.startswith(THINK_OPEN):
            self.buf = self.buf[len(THINK_OPEN) :]
            self.state, self.skip_newlines = "think", True
        elif THINK_OPEN.startswith(self.buf) and not final:
            return  # "<thi": wait for more
        else:
            self.state = "content"

    def _think(self, events, final):
        if self.skip_newlines:
            stripped = self.buf.lstrip("\n")
            if not stripped and not final:
                self.buf = ""
                return
            self.buf, self.skip_newlines = stripped, False
        idx = self.buf.find(THINK_CLOSE)
        if idx >= 0:
            self._emit(events, "reasoning", self.buf[:idx].rstrip("\n"))
            self.buf = self.buf[idx + len(THINK_CLOSE) :]
            self.state, self.skip_space = "content", True
            return
        if final:
            self._emit(events, "reasoning", self.buf)  # the turn ended inside its thinking (e.g. length)
            self.buf = ""
            return
        keep = _partial_suffix(self.buf, [THINK_CLOSE])
        body = self.buf[: len(self.buf) - keep]
        newlines = len(body) - len(body.rstrip("\n"))  # may be the "\n" before </think>
        emit = body[: len(body) - newlines]
        self._emit(events, "reasoning", emit)
        self.buf = self.buf[len(emit) :]

    def _content(self, events, final):
        if self.skip_space:
            stripped = self.buf.lstrip()
            if not stripped and not final:
                self.buf = ""
                return
            self.buf, self.skip_space = stripped, False
        if not self.tools:
            self._emit(events, "content", self.buf)
            self.buf = ""
            return
        idx = self.buf.find(TOOL_OPEN)
        if idx >= 0:
            self._emit(events, "content", self.buf[:idx])
            self.buf = self.buf[idx:]
            self.state = "tool"
            return
        keep = 0 if final else _partial_suffix(self.buf, [TOOL_OPEN])
        self._emit(events, "content", self.buf[: len(self.buf) - keep])
        self.buf = self.buf[len(self.buf) - keep :]

    def _tool(self, events, final):
        end = self.buf.find(TOOL_CLOSE)
        if end < 0:
            if final:  # never closed: the text stays visible
                self._emit(events, "content", self.buf)
                self.buf = ""
                self.state = "content"
            return
        block = self.buf[: end + len(TOOL_CLOSE)]
        self.buf = self.buf[end + len(TOOL_CLOSE) :]
        call = parse_tool_block(block[len(TOOL_OPEN) : -len(TOOL_CLOSE)])
        if call is None:
            self._emit(events, "content", block)
        else:
            events.append(("tool_call", call))
            self.tool_calls += 1
            self.skip_space = True
        self.state = "content"

    @staticmethod
    def _emit(events, kind, text):
        if not text:
            return
        if events and events[-1][0] == kind and kind != "tool_call":
            events[-1] = (kind, events[-1][1] + text)
        else:
            events.append((kind, text))


def parse_all(text: str, reasoning: bool = True, tools: bool = False, in_think: bool = False) -> list[Event]:
    """The events of a whole turn at once (non-streaming answers): the same parser, one piece."""
    parser = OutputParser(reasoning=reasoning, tools=tools, in_think=in_think)
    events = parser.feed(text) + parser.finish()
    merged: list[Event] = []
    for kind, value in events:
        if merged and kind != "tool_call" and merged[-1][0] == kind:
            merged[-1] = (kind, merged[-1][1] + value)
        else:
            merged.append((kind, value))
    return merged
