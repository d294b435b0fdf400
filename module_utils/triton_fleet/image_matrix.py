"""Triton container tag -> TensorRT-LLM / CUDA / minimum driver branch.

Source: triton-inference-server/server docs/introduction/compatibility.md (the container /
TRT-LLM / CUDA matrix); driver minimums from
https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html: CUDA 13.x needs >= R580,
CUDA 12.x >= R525; 25.06-25.10 release notes: "requires NVIDIA Driver release 575 or later").
The TRT-LLM version inside 26.08+ trtllm images is unconfirmed, so those tags are refused until confirmed.
"""

import re

# (first, last) Triton release, inclusive -> facts.
MATRIX = [
    (("26.04", "26.07"), {"trtllm": "1.2.1", "tensorrt": "10.14.1.48", "cuda": "13.1", "min_driver_branch": 580}),
    (("26.03", "26.03"), {"trtllm": "1.2.0", "tensorrt": "10.14.1.48", "cuda": "13.1", "min_driver_branch": 580}),
    (("25.12", "26.02"), {"trtllm": "1.1.0", "tensorrt": "10.13.3.9", "cuda": "13.0", "min_driver_branch": 580}),
    (("25.11", "25.11"), {"trtllm": "1.0.3", "tensorrt": "10.13.3.9", "cuda": "13.0", "min_driver_branch": 580}),
    (("25.09", "25.10"), {"trtllm": "1.0.0", "tensorrt": "10.11.0.33", "cuda": "12.9", "min_driver_branch": 575}),
    (("25.08", "25.08"), {"trtllm": "0.21.0", "tensorrt": "10.11.0.33", "cuda": "12.9", "min_driver_branch": 575}),
    (("25.06", "25.07"), {"trtllm": "0.20.0", "tensorrt": "10.10.0.31", "cuda": "12.9", "min_driver_branch": 575}),
    (("25.05", "25.05"), {"trtllm": "0.19.0", "tensorrt": "10.9.0.34", "cuda": "12.8", "min_driver_branch": 525}),
    (("25.03", "25.04"), {"trtllm": "0.18.0", "tensorrt": "10.9.0.34", "cuda": "12.8", "min_driver_branch": 525}),
    (("25.01", "25.02"), {"trtllm": "0.17.0", "tensorrt": "10.8.0.43", "cuda": "12.8", "min_driver_branch": 525}),
    (("24.12", "24.12"), {"trtllm": "0.16.0", "tensorrt": "10.7.0", "cuda": "12.6", "min_driver_branch": 525}),
]

PINNED = "nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3"
# TRT-LLM removed the engine workflow after 1.3.0rc20: trtllm-engine needs TRT-LLM <= 1.2.x.
ENGINE_MAX_TRTLLM = (1, 2, 99)
# Qwen3: PyTorch backend since 0.20.0, engine (convert_checkpoint) since 1.0 (TRT-LLM release notes; Qwen README in examples/models/core/qwen).
QWEN3_MIN_TRTLLM = {"trtllm-llmapi": (0, 20, 0), "trtllm-engine": (1, 0, 0)}

_TAG = re.compile(r"^(?P<repo>.+?/tritonserver):(?P<rel>\d{2}\.\d{2})-(?P<flavour>[a-z0-9.-]+)$")


class ImageError(ValueError):
    pass


def version_tuple(v):
    if v is None:
        return None
    nums = re.findall(r"\d+", str(v))[:3]
    return tuple(int(n) for n in nums) + (0,) * (3 - len(nums))


def _key(rel):
    y, m = rel.split(".")
    return int(y) * 100 + int(m)


def lookup(image_ref):
    """Facts of an image reference: {ref, triton, flavour, trtllm, cuda, min_driver_branch, tensorrt, nvidia}.

    Non-NVIDIA images (the lab's `triton-fleet/tritonserver-lab:<hash>`) return trtllm/cuda None: they can
    only serve the `transformers` runtime.
    """
    if not image_ref or not isinstance(image_ref, str):
        raise ImageError(f"no Triton image given; set triton_fleet_image (e.g. {PINNED})")
    m = _TAG.match(image_ref.strip())
    if not m:
        return {"ref": image_ref, "triton": None, "flavour": None, "trtllm": None, "tensorrt": None,
                "cuda": None, "min_driver_branch": None, "nvidia": False}
    rel, flavour = m.group("rel"), m.group("flavour")
    facts = {"ref": image_ref, "triton": rel, "flavour": flavour, "trtllm": None, "tensorrt": None,
             "cuda": None, "min_driver_branch": None, "nvidia": True}
    if not flavour.startswith("trtllm"):
        return facts  # -py3, -vllm-python-py3: no TensorRT-LLM inside
    k = _key(rel)
    for (first, last), row in MATRIX:
        if _key(first) <= k <= _key(last):
            facts.update(row)
            return facts
    known = ", ".join(a if a == b else f"{a}-{b}" for (a, b), _ in MATRIX)
    if k > _key(MATRIX[0][0][1]):
        raise ImageError(
            f"the TensorRT-LLM version inside {image_ref} is not confirmed (the matrix knows trtllm images {known}); "
            f"pin {PINNED} or add the release to module_utils/triton_fleet/image_matrix.py with its source")
    raise ImageError(f"{image_ref} is older than every release in the matrix ({known}); Qwen3 needs 25.06+, use {PINNED}")


def engine_allowed(trtllm):
    """Whether the TensorRT engine workflow (trtllm-build + tensorrtllm backend) exists in this TRT-LLM."""
    v = version_tuple(trtllm)
    return v is not None and v <= ENGINE_MAX_TRTLLM
