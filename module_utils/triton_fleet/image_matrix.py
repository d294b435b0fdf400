"""Triton container tag -> TensorRT-LLM / CUDA / minimum driver branch, and which releases ship a TRT-LLM container.

Sources (docs/compatibility.md, docs/sources.md):
- TRT-LLM / TensorRT / CUDA per trtllm container: triton-inference-server/server docs/introduction/compatibility.md
  ("Container Name: trtllm-python-py3", rows 24.04-26.07 at 0f963c9); driver minimums from
  https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html (CUDA 13.x needs >= R580,
  CUDA 12.x >= R525) and the 25.06-25.10 release notes ("requires NVIDIA Driver release 575 or later").
- Which releases ship a `-trtllm-python-py3` container: the first was 23.10 (server release v2.39.0 notes: "A new
  container with TensorRT-LLM backend is available on NGC for 23.10"); Triton's 26.09 LLM guide serves
  TensorRT-LLM from `26.09-trtllm-python-py3`; the 26.11 release notes say the TensorRT-LLM backend container is
  not part of that release. The TRT-LLM version inside 26.08+ trtllm images is not in the compatibility matrix
  read, so those tags are refused until confirmed (or given with trtllm_version).
- The TensorRT engine backend: TensorRT-LLM removed it after v1.3.0rc20 (PyTorch is its sole execution backend
  since; nvidia.github.io/TensorRT-LLM/legacy/tensorrt-backend-removal.html), and the Triton backend's
  `inflight_batcher_llm` / ensemble templates went with TensorRT-LLM PR #15907 (only `all_models/llmapi` remains).
"""

import re

# (first, last) Triton release, inclusive -> facts of its trtllm-python-py3 container.
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

# The first Triton release with a -trtllm-python-py3 container (server v2.39.0 release notes).
FIRST_TRTLLM_CONTAINER = "23.10"
# Releases known to ship no TensorRT-LLM container -> the public statement that says so.
NO_TRTLLM_CONTAINER = {
    "26.11": "the Triton 26.11 release notes say the TensorRT-LLM backend container is not part of that release",
}
# The newest release known here to ship one, and the public source that shows it.
LAST_TRTLLM_CONTAINER = ("26.09", "Triton's 26.09 LLM guide serves TensorRT-LLM from 26.09-trtllm-python-py3")

# The TensorRT engine workflow (trtllm-engine): this project builds engines with TRT-LLM 1.2.x; upstream's last
# release with the TensorRT backend was 1.3.0rc20, and the Triton templates that load engines are gone.
ENGINE_MAX_TRTLLM = (1, 2, 99)
ENGINE_LAST_RELEASE = "1.3.0rc20"
ENGINE_LEGACY_WHY = (f"TensorRT-LLM removed the TensorRT engine backend after v{ENGINE_LAST_RELEASE} (PyTorch is its sole execution "
                     "backend since) and the Triton backend's inflight_batcher_llm/ensemble templates with PR #15907"
                     )
# Qwen3: PyTorch backend since 0.20.0, engine (convert_checkpoint) since 1.0 (TRT-LLM release notes; Qwen README in examples/models/core/qwen).
QWEN3_MIN_TRTLLM = {"trtllm-llmapi": (0, 20, 0), "trtllm-engine": (1, 0, 0)}
# GPU generations the PyTorch backend (LLM API) supports: TensorRT-LLM's support matrix for 1.1.0 and for the
# 26.04-container main branch both list Ampere (SM80, SM86), Ada (SM89), Hopper (SM90) and Blackwell; 1.2.x's
# release notes add Ampere enablement. Below SM80 the matrix lists nothing ("community support" only).
LLMAPI_MIN_COMPUTE_CAPABILITY = (8, 0)

_TAG = re.compile(r"^(?P<repo>.+?/tritonserver):(?P<rel>\d{2}\.\d{2})-(?P<flavour>[a-z0-9.-]+)$")


class ImageError(ValueError):
    pass


class NoTrtllmContainer(ImageError):
    """A -trtllm tag of a Triton release that ships no TensorRT-LLM container: no trtllm_version can help."""


def version_tuple(v):
    if v is None:
        return None
    nums = re.findall(r"\d+", str(v))[:3]
    return tuple(int(n) for n in nums) + (0,) * (3 - len(nums))


def _key(rel):
    y, m = rel.split(".")
    return int(y) * 100 + int(m)


def _no_container(image_ref, rel, why):
    last, source = LAST_TRTLLM_CONTAINER
    return NoTrtllmContainer(
        f"{image_ref} does not exist: {why}. The newest release known to ship a TensorRT-LLM container is {last} "
        f"({source}); the newest whose TensorRT-LLM version is confirmed here is {MATRIX[0][0][1]} "
        f"(TRT-LLM {MATRIX[0][1]['trtllm']}): pin {PINNED}")


def lookup(image_ref):
    """Facts of an image reference: {ref, triton, flavour, trtllm, cuda, min_driver_branch, tensorrt, nvidia}.

    Non-NVIDIA images (the lab's `triton-fleet/tritonserver-lab:<hash>`) return trtllm/cuda None: they can
    only serve the `transformers` runtime. A trtllm tag of a release without a TensorRT-LLM container raises
    NoTrtllmContainer; one whose TRT-LLM version is not confirmed raises ImageError.
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
    if rel in NO_TRTLLM_CONTAINER:
        raise _no_container(image_ref, rel, NO_TRTLLM_CONTAINER[rel])
    k = _key(rel)
    if k < _key(FIRST_TRTLLM_CONTAINER):
        raise _no_container(image_ref, rel, f"the first Triton release with a TensorRT-LLM container was "
                                            f"{FIRST_TRTLLM_CONTAINER}")
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


def llmapi_supports(compute_capability):
    """Whether TensorRT-LLM's PyTorch backend lists this GPU generation (compute capability "8.6" or a tuple)."""
    cc = compute_capability
    if not isinstance(cc, tuple):
        major, _, minor = str(cc or "0").partition(".")
        cc = (int(major), int(minor or 0))
    return cc >= LLMAPI_MIN_COMPUTE_CAPABILITY
