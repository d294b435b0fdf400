#!/usr/bin/env python3
"""STAND-IN for TensorRT-LLM 1.2.1 examples/quantization/quantize.py (see tests/standin/trtllm/README.md)."""
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
import standin_common as sc  # noqa: E402

values = sc.parse("quantize.py", sys.argv[1:])
quant = {"qformat": values.get("--qformat", "full_prec"), "kv_cache_dtype": values.get("--kv_cache_dtype")}
sc.write_checkpoint("quantize.py", values, quant)
