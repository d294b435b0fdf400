"""Exact token counts with the model's own tokenizer (tokenizer.json, Hugging Face ``tokenizers``)."""

import os

from tokenizers import Tokenizer


class TokenCounter:
    def __init__(self, path: str):
        file = os.path.join(path, "tokenizer.json") if os.path.isdir(path) else path
        try:
            self.tokenizer = Tokenizer.from_file(file)
        except Exception as exc:
            raise ValueError(f"cannot load the tokenizer {file}: {exc}") from exc

    def count(self, text: str) -> int:
        # The chat template already wrote the special tokens as text; Triton tokenizes the same string
        # without adding more (Qwen3 has no BOS token).
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def encode(self, text: str):
        return self.tokenizer.encode(text, add_special_tokens=False).ids
