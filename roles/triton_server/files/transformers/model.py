"""triton-fleet ``transformers`` runtime: a Hugging Face causal LM in Triton's python backend.

Decoupled model (``model_transaction_policy { decoupled: true }``): ``execute`` validates each
request and queues it on the in-flight batching engine (``batching.py``): one scheduler thread
runs the model over every running request at once, a request that arrives while others generate
joins the batch at the next step, and each leaves it as soon as its own stop conditions are met
(``max_tokens``, EOS or ``end_id``, stop words) or its client cancelled. With ``stream`` true
(``/v2/models/<name>/generate_stream``) every new piece of detokenized text is its own response,
otherwise one response carries the whole text.

Inputs are the TRT-LLM ensemble's (``text_input``, ``max_tokens``, ``stream``, ``temperature``,
``top_p``, ``top_k``, ``stop_words``, ``bad_words``, ``seed`` (``random_seed`` is read as an alias), ...),
outputs ``text_output`` (+ ``output_ids``, ``finish_reason``), so clients and probes are the same as for
``trtllm-engine``. Greedy when temperature is 0. A bad request gets an INVALID_ARG error (HTTP
400) for that request only. On a KIND_GPU instance the model runs on that GPU in the profile's
dtype (bf16); on KIND_CPU in float32.

Before loading, the model checks that the numpy of the stub's interpreter suits the stub binary
(``stub_env.py``): a mismatch corrupts every received tensor, so the model refuses to load and
says what to install.

Parameters (config.pbtxt, rendered from the serving profile): model_dir, device, dtype,
max_input_len, max_output_len, max_seq_len, max_concurrency (rows in the batch); optional
kv_tokens (KV budget in tokens, default max_concurrency x max_seq_len: the planner's tokens in
flight; the preallocated cache holds kv_tokens // max_seq_len rows of max_seq_len tokens) and
prefill_tokens (prompt tokens per prefill, default max_seq_len). TRITON_FLEET_CUDA_GRAPHS=0 in the
server's environment turns the decode step's CUDA graphs off.
"""

import json
import os
import sys
import time

import numpy as np
import triton_python_backend_utils as pb_utils

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stub_env  # noqa: E402
from batching import BatchEngine, Sink  # noqa: E402
from generation_request import (  # noqa: E402
    Limits,
    RequestError,
    parse_request,
)

INPUT_NAMES = (
    "text_input",
    "max_tokens",
    "stream",
    "temperature",
    "top_p",
    "top_k",
    "stop_words",
    "bad_words",
    "random_seed",
    "seed",
    "repetition_penalty",
    "min_tokens",
    "end_id",
    "pad_id",
    "exclude_input_in_output",
    "beam_width",
)

_DTYPES = {"bfloat16": "bfloat16", "float16": "float16", "float32": "float32"}


def _error(message, internal=False):
    code = None
    if hasattr(pb_utils, "TritonError"):
        code = getattr(pb_utils.TritonError, "INTERNAL" if internal else "INVALID_ARG", None)
    if code is not None:
        return pb_utils.TritonError(message, code)
    return pb_utils.TritonError(message)


class _TritonSink(Sink):
    """A batch row's output to its Triton response sender."""

    def __init__(self, sender):
        self.sender = sender
        self._cancelled = getattr(sender, "is_cancelled", None)

    def send(self, text, ids, finish=None, final=False):
        if finish == "cancelled":
            self.sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            return
        tensors = [
            pb_utils.Tensor("text_output", np.array([text.encode("utf-8")], dtype=np.object_)),
            pb_utils.Tensor("output_ids", np.array(ids, dtype=np.int32).reshape(-1)),
        ]
        if finish is not None:
            tensors.append(pb_utils.Tensor("finish_reason", np.array([finish.encode()], dtype=np.object_)))
        response = pb_utils.InferenceResponse(output_tensors=tensors)
        if final:
            self.sender.send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        else:
            self.sender.send(response)

    def fail(self, message):
        _fail(self.sender, message, internal=True)

    def cancelled(self):
        return bool(self._cancelled()) if self._cancelled is not None else False


def _fail(sender, message, internal=False):
    sender.send(
        pb_utils.InferenceResponse(output_tensors=[], error=_error(message, internal)),
        flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
    )


class TritonPythonModel:
    def initialize(self, args):
        stub = stub_env.running_stub_path()
        if stub is not None:
            problem = stub_env.check_stub(stub)
            if problem:
                raise pb_utils.TritonModelException(problem)
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        config = json.loads(args["model_config"])
        params = {k: v.get("string_value", "") for k, v in (config.get("parameters") or {}).items()}
        self.model_name = args.get("model_name", config.get("name"))
        model_dir = params.get("model_dir", "")
        if not model_dir or not os.path.isfile(os.path.join(model_dir, "config.json")):
            raise pb_utils.TritonModelException(
                f"model_dir {model_dir!r} has no config.json: mount the checkpoint directory there "
                "(role triton_server, variable triton_server_checkpoint_dir)"
            )
        self.limits = Limits(
            max_input_len=int(params.get("max_input_len", "2048")),
            max_output_len=int(params.get("max_output_len", "512")),
            max_seq_len=int(params.get("max_seq_len", "4096")),
        )
        kind = str(args.get("model_instance_kind", "CPU")).upper()
        # gpu_device_ids ("0;1": one entry per instance) places a KIND_CPU instance's model on a GPU, as
        # TRT-LLM's llmapi model does: Triton then hands the stub CPU tensors only, and the model owns its GPU.
        gpu_ids = [g for g in params.get("gpu_device_ids", "").split(";") if g.strip()]
        if kind == "GPU" or gpu_ids:
            if not torch.cuda.is_available():
                raise pb_utils.TritonModelException("a GPU instance was asked for but torch sees no CUDA device")
            if gpu_ids:
                index = int(str(args.get("model_instance_name", "_0")).rsplit("_", 1)[-1] or 0)
                device_id = gpu_ids[index % len(gpu_ids)].split(",")[0].strip()
            else:
                device_id = args.get("model_instance_device_id", "0")
            device = torch.device(f"cuda:{device_id}")
            torch.cuda.set_device(device)
            dtype = getattr(torch, _DTYPES.get(params.get("dtype", "bfloat16"), "bfloat16"))
        else:
            device = torch.device("cpu")
            dtype = torch.float32
        started = time.monotonic()
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
        model.to(device)
        model.eval()
        gen = model.generation_config
        eos = gen.eos_token_id if gen.eos_token_id is not None else tokenizer.eos_token_id
        eos_ids = list(eos) if isinstance(eos, (list, tuple)) else ([eos] if eos is not None else [])
        pad_id = gen.pad_token_id if gen.pad_token_id is not None else (eos_ids[0] if eos_ids else 0)
        max_batch = max(1, int(params.get("max_concurrency", "4")))
        kv_tokens = int(params.get("kv_tokens") or max_batch * self.limits.max_seq_len)
        prefill_tokens = int(params.get("prefill_tokens") or self.limits.max_seq_len)
        name = self.model_name
        self.engine = BatchEngine(
            model,
            tokenizer,
            device,
            self.limits,
            max_batch=max_batch,
            kv_tokens=kv_tokens,
            prefill_tokens=prefill_tokens,
            eos_ids=eos_ids,
            pad_id=pad_id,
            log=lambda msg: pb_utils.Logger.log_info(f"{name}: {msg}"),
            # an escape hatch for a torch/driver where capture misbehaves: eager decode, same tokens
            cuda_graphs=os.environ.get("TRITON_FLEET_CUDA_GRAPHS", "1") != "0",
        )
        import numpy

        pb_utils.Logger.log_info(
            f"{name}: loaded {model_dir} on {device} ({dtype}) in {time.monotonic() - started:.1f}s; "
            f"in-flight batching: {self.engine.slots} rows (max_concurrency {max_batch}, KV budget {kv_tokens} "
            f"tokens), {prefill_tokens} prefill tokens; stub interpreter {sys.executable} (numpy {numpy.__version__})"
        )

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            try:
                inputs = {}
                for name in INPUT_NAMES:
                    tensor = pb_utils.get_input_tensor_by_name(request, name)
                    inputs[name] = tensor.as_numpy() if tensor is not None else None
                req = parse_request(inputs, self.limits)
                self.engine.submit(req, _TritonSink(sender))
            except RequestError as exc:
                _fail(sender, str(exc))
            except Exception as exc:  # never let one request take the model down
                _fail(sender, f"could not read the request: {exc}")

    def finalize(self):
        engine = getattr(self, "engine", None)
        if engine is not None:
            engine.stop()
