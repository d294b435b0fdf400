"""OpenAI-compatible API for a triton-fleet Triton pool (Qwen3: chat template, tool calls, reasoning)."""

__version__ = "0.1.0"
