"""Shared code of the STAND-IN TensorRT-LLM tools (see README.md). Not TensorRT-LLM."""

import json
import os
import re
import sys
import time

ROOT = os.path.dirname(os.path.abspath(__file__))
LOG = os.environ.get("TRTLLM_STANDIN_LOG", "/var/lib/trtllm-standin/calls.jsonl")


# Upstream's argparse facts for TRT-LLM 1.2.1 (tests/conformance/upstream-trtllm-1.2.1, read from
# TensorRT-LLM's own files, not from this project's tables). A copy next to the stand-in wins (the
# Molecule scenario copies it there); in a checkout the repository's copy is used.
FACT_FILES = {"convert_checkpoint.py": "convert_checkpoint.json", "quantize.py": "quantize.json",
              "trtllm-build": "trtllm-build.json"}


def _facts_dir():
    for cand in (os.path.join(ROOT, "conformance"),
                 os.path.join(ROOT, "..", "..", "conformance", "upstream-trtllm-1.2.1")):
        if os.path.isdir(cand):
            return cand
    print("[stand-in] upstream flag facts not found next to the stand-in or in tests/conformance", file=sys.stderr)
    sys.exit(1)


def load_flags(tool):
    with open(os.path.join(_facts_dir(), FACT_FILES[tool])) as handle:
        facts = json.load(handle)
    flags = dict(facts["flags"])
    for meta in facts["flags"].values():
        for alias in meta.get("aliases", []):
            flags[alias] = meta
    return {"flags": flags, "required": facts.get("required", []),
            "required_one_of": facts.get("required_one_of", [])}


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
        if meta["kind"] == "float" and not re.fullmatch(r"-?\d+(\.\d*)?", value):
            die(tool, f"argument {name}: invalid float value: '{value}'")
        if meta["kind"] == "int" and not re.fullmatch(r"-?\d+", value):
            die(tool, f"argument {name}: invalid int value: '{value}'")
        values[name] = value
    if unknown:
        die(tool, "unrecognized arguments: {}".format(" ".join(unknown)))
    for name in spec["required"]:
        if name not in values:
            die(tool, f"the following arguments are required: {name}")
    for group in spec["required_one_of"]:
        if not any(name in values for name in group):
            die(tool, "one of {} must be given".format(", ".join(group)))
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
