"""The served model's reasoning behaviour, applied to one chat turn.

The planner decides it from the model catalog and writes it into the serving profile (``model.thinking``,
docs/profile.md); the role renders it into this service's configuration, and the service never works it out from
the model's name or template itself:

- ``switchable`` (Qwen3 as first released, 2504): the model thinks unless the request turns it off
  (``enable_thinking: false`` / ``reasoning_effort`` ``none`` or ``minimal``); its turn opens with
  ``<think>`` when it thinks.
- ``never`` (Qwen3-*-Instruct-2507; families without reasoning): no reasoning. The output is all content, a
  literal ``<think>`` in it included; a request asking for reasoning is refused (below).
- ``always`` (Qwen3-*-Thinking-2507): the model always thinks; with ``template_opens_think`` its template ends the
  generation prompt with ``<think>\\n`` itself, so the output starts inside the reasoning and carries only the
  closing ``</think>``. A request turning thinking off is refused.

Why refuse rather than ignore a switch the model cannot follow: OpenAI answers a ``reasoning_effort`` a model does
not support with a 400 (``unsupported_value``), and an application that asks for no reasoning (to save tokens and
time) or for reasoning (to show it) would otherwise get silently the opposite. The switch that matches the model
(``enable_thinking: true`` on an ``always`` model, ``reasoning_effort: "none"`` on a ``never`` one) is accepted: it
asks for what the model does anyway, so a client that always sends it works with either.
"""

from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator

from .errors import APIError
from .parsers import THINK_OPEN, TOOL_OPEN, OutputParser
from .schemas import template_kwargs

# What a template writes for a turn without reasoning (Qwen3's with enable_thinking false).
EMPTY_THINK = THINK_OPEN + "\n\n</think>\n\n"


class Thinking(BaseModel):
    """``model.thinking`` of the configuration; a configuration without it (one rendered from a profile planned
    before the field existed) means ``switchable``, what the service did for every model before."""

    model_config = ConfigDict(extra="forbid", strict=True)
    mode: Literal["switchable", "never", "always"] = "switchable"
    template_opens_think: bool = False

    @model_validator(mode="after")
    def _opens_only_when_always(self):
        if self.template_opens_think and self.mode != "always":
            raise ValueError(
                f"thinking.template_opens_think is true with mode {self.mode!r}: a template that opens <think> "
                "makes every turn think, which is mode 'always' (re-run the preflight stage to re-plan the profile)"
            )
        return self


@dataclass(frozen=True)
class Turn:
    """How one chat turn is prompted and parsed."""

    thinks: bool  # the model reasons in this turn (unless a prefilled tool call closes it first)
    opened: bool  # the generation prompt itself ends inside <think>
    switched_off: bool  # a switchable model with thinking turned off (sampling.py's non-thinking defaults)
    kwargs: dict = field(default_factory=dict)  # the chat template's switches

    def think_prefill(self, prompt: str) -> str:
        """What a prefilled tool call starts with: the thinking closed empty (a forced call has no reasoning),
        as Qwen3's template writes it with thinking off; nothing where the turn has no thinking to close."""
        if not self.thinks or prompt.endswith("</think>\n\n"):
            return ""
        if self.opened:  # the prompt ends "<think>\n": close what it opened
            return "\n</think>\n\n"
        return EMPTY_THINK

    def parser(self, tools: bool, prefill: str = "") -> OutputParser:
        """The turn's output parser; with a prefilled call, one that has read the call's opening."""
        if prefill:
            parser = OutputParser(reasoning=False, tools=tools)
            parser.feed(prefill[prefill.index(TOOL_OPEN) :])  # the call's opening belongs to the parsed turn
            return parser
        return OutputParser(reasoning=self.thinks, tools=tools, in_think=self.thinks and self.opened)


def turn_of(behaviour: Thinking, req, model: str) -> Turn:
    """The request's turn on a model of ``behaviour``, or a 400 naming the switch the model cannot follow."""
    kwargs = template_kwargs(req)
    asked = kwargs.get("enable_thinking")
    if behaviour.mode == "switchable":
        thinks = asked is not False
        return Turn(thinks=thinks, opened=False, switched_off=not thinks, kwargs=kwargs)
    if behaviour.mode == "never":
        if asked is True:
            raise _cannot(req, model, "never thinks (it has no reasoning mode)", "'none' or leave it out",
                          "false or leave it out")
        return Turn(thinks=False, opened=False, switched_off=False, kwargs=kwargs)
    if asked is False:
        raise _cannot(req, model, "always thinks (its chat template opens the reasoning itself)" if
                      behaviour.template_opens_think else "always thinks", "'low', 'medium' or 'high', or leave it out",
                      "true or leave it out")
    return Turn(thinks=True, opened=behaviour.template_opens_think, switched_off=False, kwargs=kwargs)


def _cannot(req, model: str, what: str, efforts: str, switch: str) -> APIError:
    if req.reasoning_effort is not None:
        param, sent, send = "reasoning_effort", f"reasoning_effort {req.reasoning_effort!r}", efforts
    else:
        param = "chat_template_kwargs.enable_thinking"
        sent = f"enable_thinking {str(req.chat_template_kwargs['enable_thinking']).lower()}"
        send = switch
    return APIError(400, f"the model {model!r} {what}: {sent} is not supported with this model; send {send}",
                    param=param, code="unsupported_value")
