"""Shared code of the STAND-IN TensorRT-LLM tools (see README.md). Not TensorRT-LLM."""

import json
import os
import re
import sys
import time

ROOT = os.path.dirname(os.path.abspath(__file__))
LOG = os.environ.get("TRTLLM_STANDIN_LOG", "/var/lib/trtllm-standin/calls.jsonl")


def load_flags(tool):
    with open(os.path.join(ROOT, "flags-1.2.1.json")) as handle:
        return json.load(handle)["tools"][tool]


def parse(tool, argv):
    """argparse-like parsing against the 1.2.1 flag list; exits 2 with argparse's wording on error."""
    spec = load_flags(tool)
    flags, values, unknown, i = spec["flags"], {}, [], 0
    while i < len(argv):
        name, has_eq, inline = argv[i].partition("=")
        meta = flags.get(name)
        if meta is None:
            unknown.append(argv[i])
            i += 1
            continue
        if meta["kind"] == "flag":
            values[name] = True
            i += 1
            continue
        if has_eq:
            value, i = inline, i + 1
        elif i + 1 < len(argv):
            value, i = argv[i + 1], i + 2
        else:
            die(tool, f"argument {name}: expected one argument")
        if meta["kind"] == "choice" and value not in meta["choices"]:
            die(tool, "argument {}: invalid choice: '{}' (choose from {})".format(name, value, ", ".join(f"'{c}'" for c in meta["choices"])))
        if meta["kind"] == "int" and not re.fullmatch(r"-?\d+", value):
            die(tool, f"argument {name}: invalid int value: '{value}'")
        values[name] = value
    if unknown:
        die(tool, "unrecognized arguments: {}".format(" ".join(unknown)))
    for name in spec["required"]:
        if name not in values:
            die(tool, f"the following arguments are required: {name}")
    record(tool, argv)
    if os.environ.get("TRTLLM_STANDIN_FAIL") == tool:
        print("[TensorRT-LLM][ERROR] stand-in failure requested by TRTLLM_STANDIN_FAIL", file=sys.stderr)
        sys.exit(1)
    return values


def die(tool, msg):
    print(f"usage: {tool} [-h] ...\n{tool}: error: {msg}", file=sys.stderr)
    sys.exit(2)


def record(tool, argv):
    os.makedirs(os.path.dirname(LOG), exist_ok=True)
    with open(LOG, "a") as handle:
        handle.write(json.dumps({"tool": tool, "argv": argv, "time": time.time(), "pid": os.getpid()}) + "\n")


def write_json(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        json.dump(data, handle, indent=2, sort_keys=True)


def write_checkpoint(tool, values, quant):
    model_dir = values["--model_dir"]
    try:
        with open(os.path.join(model_dir, "config.json")) as handle:
            hf = json.load(handle)
    except (OSError, ValueError) as exc:
        print(f"[TensorRT-LLM][ERROR] cannot read {model_dir}/config.json: {exc}", file=sys.stderr)
        sys.exit(1)
    out = values.get("--output_dir", "tllm_checkpoint")
    tp, pp = int(values.get("--tp_size", 1)), int(values.get("--pp_size", 1))
    write_json(os.path.join(out, "config.json"), {
        "stand_in": f"STAND-IN checkpoint written by {tool} (not TensorRT-LLM)",
        "architecture": (hf.get("architectures") or ["Qwen3ForCausalLM"])[0],
        "dtype": values.get("--dtype", "auto"),
        "mapping": {"world_size": tp * pp, "tp_size": tp, "pp_size": pp},
        "quantization": quant,
    })
    for rank in range(tp * pp):
        with open(os.path.join(out, f"rank{rank}.safetensors"), "wb") as handle:
            handle.write(b"STAND-IN weights rank %d\n" % rank + os.urandom(64))
    print("Total time of converting checkpoints: 00:00:00")
