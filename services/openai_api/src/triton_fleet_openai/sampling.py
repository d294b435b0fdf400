"""Sampling defaults: what a request that leaves a sampling parameter out is decoded with, on every runtime.

The runtimes' own defaults differ (the ``transformers`` runtime decodes greedily without a temperature; the
TRT-LLM runtimes have defaults of their own), and Qwen3 must not be decoded greedily in thinking mode (its
model card: endless repetitions). So the service fills every sampling parameter a request leaves out, as vLLM
does (``--generation-config auto``, its default), from three layers, the later winning:

1. OpenAI's defaults: ``temperature`` 1, ``top_p`` 1 (what the API promises a request that sets neither);
2. the served checkpoint's ``generation_config.json``: the values vLLM reads from it (``temperature``,
   ``top_p``, ``top_k``, ``min_p``, ``repetition_penalty``; Qwen3 ships 0.6, 0.95 and 20), taken as written
   (``do_sample`` is not read, as vLLM does not);
3. on a ``switchable`` model (thinking.py) whose request turns thinking off: Qwen3's values for non-thinking
   mode (its model card, "Best Practices": temperature 0.7, top_p 0.8, top_k 20; the checkpoint ships the thinking
   ones, 0.6 / 0.95 / 20), as the 2507 Instruct checkpoints' generation_config.json ship them for their only mode;
4. the operator's ``sampling_defaults`` (role variable ``openai_api_sampling_defaults``), per parameter, in either
   mode; a null there removes the parameter, so that the runtime's own default applies.

A default reaches Triton only where the runtime has the input (:meth:`backend.Interface.build` leaves out the
others): ``repetition_penalty`` on the ``transformers`` runtime and the TRT-LLM ensemble, ``presence_penalty``
and ``frequency_penalty`` on TRT-LLM, ``min_p`` on none of the runtimes here.
"""

import math
from typing import Any, Optional

# name -> (lowest, highest, lowest excluded, integer): the ranges the request fields take (schemas.py).
RANGES = {
    "temperature": (0.0, 2.0, False, False),
    "top_p": (0.0, 1.0, True, False),
    "top_k": (-1, 2**31 - 1, False, True),
    "min_p": (0.0, 1.0, False, False),
    "repetition_penalty": (0.0, 2.0, True, False),
    "presence_penalty": (-2.0, 2.0, False, False),
    "frequency_penalty": (-2.0, 2.0, False, False),
}
OPENAI_DEFAULTS = {"temperature": 1.0, "top_p": 1.0}
# What vLLM takes from a checkpoint's generation_config.json (vllm/config: get_diff_sampling_param), bar
# max_new_tokens (this service's default output length is the profile's, openai_api_default_max_tokens).
FROM_CHECKPOINT = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")
# Qwen3's recommendation for non-thinking mode (model card, "Best Practices"; MinP 0 is the runtimes' off anyway).
NON_THINKING = {"temperature": 0.7, "top_p": 0.8, "top_k": 20}


class SamplingConfigError(ValueError):
    pass


def _checked(name: str, value: Any, where: str, hint: str = ""):
    low, high, open_low, integer = RANGES[name]
    kind = "an integer" if integer else "a number"
    problem = None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
        problem = f"it must be {kind}"
    elif isinstance(value, float) and not math.isfinite(value):
        problem = "it must be finite"
    elif value < low or value > high or (open_low and value == low):
        problem = f"it must be above {low} and at most {high}" if open_low else f"it must be from {low} to {high}"
    if problem:
        raise SamplingConfigError(f"{where} sets {name} to {value!r}: {problem}{hint}")
    return value if integer else float(value)


def resolve(generation_config: Optional[dict], overrides: Optional[dict], thinking_off: bool = False) -> dict:
    """The defaults filled into requests (name -> value), or SamplingConfigError naming the bad value;
    ``thinking_off``: those of a switchable model's request with thinking turned off."""
    out = dict(OPENAI_DEFAULTS)
    where = "the checkpoint's generation_config.json"
    for name in FROM_CHECKPOINT:
        value = (generation_config or {}).get(name)
        if value is not None:
            out[name] = _checked(name, value, where, " (override it with openai_api_sampling_defaults)")
    if thinking_off:
        out.update(NON_THINKING)
    for name, value in (overrides or {}).items():
        if name not in RANGES:
            raise SamplingConfigError(
                f"sampling_defaults has {name!r}: the parameters with defaults are {', '.join(RANGES)}"
            )
        if value is None:
            out.pop(name, None)
        else:
            out[name] = _checked(name, value, "sampling_defaults")
    return out


def request_fields(req, defaults: dict) -> dict:
    """The request's sampling fields for Triton (logical names, backend.LOGICAL): each from the request, else
    from ``defaults``. ``top_k`` -1 (vLLM's "off") is sent as 0, the runtimes' "off"; a temperature of 0 with no
    ``top_k`` of the request's own is sent with ``top_k`` 1, which every runtime reads as greedy (one that
    reads temperature 0 as "no scaling" too)."""
    fields = {"seed": req.seed}
    for name in RANGES:
        value = getattr(req, name)
        fields[name] = value if value is not None else defaults.get(name)
    if fields["top_k"] == -1:
        fields["top_k"] = 0
    if fields["temperature"] == 0 and req.top_k is None:
        fields["top_k"] = 1
    return fields
