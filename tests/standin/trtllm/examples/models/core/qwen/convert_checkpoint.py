#!/usr/bin/env python3
"""STAND-IN for TensorRT-LLM 1.2.1 examples/models/core/qwen/convert_checkpoint.py (see tests/standin/trtllm/README.md)."""
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")))
import standin_common as sc  # noqa: E402

values = sc.parse("convert_checkpoint.py", sys.argv[1:])
quant = {"weight_only": values.get("--weight_only_precision") if values.get("--use_weight_only") else None,
         "smoothquant": values.get("--smoothquant"), "int8_kv_cache": bool(values.get("--int8_kv_cache"))}
sc.write_checkpoint("convert_checkpoint.py", values, quant)
