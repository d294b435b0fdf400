"""triton-fleet ``transformers`` runtime: a Hugging Face causal LM in Triton's python backend.

Decoupled model (``model_transaction_policy { decoupled: true }``): ``execute`` validates each
request and hands it to a worker thread, so the stub stays responsive (health checks, new
requests) while tokens are generated. Each worker runs ``transformers`` ``generate`` with a
streamer that sends every new piece of detokenized text as its own response when ``stream`` is
true (``/v2/models/<name>/generate_stream``), or one response with the whole text otherwise.

Inputs are the TRT-LLM ensemble's (``text_input``, ``max_tokens``, ``stream``, ``temperature``,
``top_p``, ``top_k``, ``stop_words``, ``bad_words``, ``random_seed``/``seed``, ...), outputs
``text_output`` (+ ``output_ids``, ``finish_reason``), so clients and probes are the same as for
``trtllm-engine``. Greedy when temperature is 0. A bad request gets an INVALID_ARG error (HTTP
400) for that request only. On a KIND_GPU instance the model runs on that GPU in the profile's
dtype (bf16); on KIND_CPU in float32.

Parameters (config.pbtxt, rendered from the serving profile): model_dir, device, dtype,
max_input_len, max_output_len, max_seq_len, max_concurrency.
"""

import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import triton_python_backend_utils as pb_utils

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from generation_request import (  # noqa: E402
    Limits,
    RequestError,
    TextStream,
    check_prompt_length,
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


class _Stop:
    """StoppingCriteria: stop words seen, or the client cancelled."""

    def __init__(self, state, sender):
        self.state = state
        self.sender = sender

    def __call__(self, input_ids, scores, **kwargs):
        if self.state["stop"]:
            return True
        cancelled = getattr(self.sender, "is_cancelled", None)
        if cancelled is not None and cancelled():
            self.state["stop"] = True
            self.state["finish"] = "cancelled"
            return True
        return False


class _Streamer:
    """transformers BaseStreamer interface: put() gets the prompt first, then each new token."""

    def __init__(self, on_tokens):
        self.on_tokens = on_tokens
        self.prompt_seen = False

    def put(self, value):
        if not self.prompt_seen:
            self.prompt_seen = True
            return
        self.on_tokens([int(t) for t in value.reshape(-1).tolist()])

    def end(self):
        pass


class TritonPythonModel:
    def initialize(self, args):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.torch = torch
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
            self.device = torch.device(f"cuda:{device_id}")
            dtype = getattr(torch, _DTYPES.get(params.get("dtype", "bfloat16"), "bfloat16"))
        else:
            self.device = torch.device("cpu")
            dtype = torch.float32
        started = time.monotonic()
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
        self.model.to(self.device)
        self.model.eval()
        gen = self.model.generation_config
        eos = gen.eos_token_id if gen.eos_token_id is not None else self.tokenizer.eos_token_id
        self.eos_ids = list(eos) if isinstance(eos, (list, tuple)) else ([eos] if eos is not None else [])
        self.pad_id = gen.pad_token_id if gen.pad_token_id is not None else (self.eos_ids[0] if self.eos_ids else 0)
        self.seed_lock = threading.Lock()
        workers = max(1, int(params.get("max_concurrency", "4")))
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="generate")
        pb_utils.Logger.log_info(
            f"{self.model_name}: loaded {model_dir} on {self.device} ({dtype}) in "
            f"{time.monotonic() - started:.1f}s, {workers} worker(s)"
        )

    # ------------------------------------------------------------------ requests

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            try:
                inputs = {}
                for name in INPUT_NAMES:
                    tensor = pb_utils.get_input_tensor_by_name(request, name)
                    inputs[name] = tensor.as_numpy() if tensor is not None else None
                req = parse_request(inputs, self.limits)
            except RequestError as exc:
                self._fail(sender, str(exc))
                continue
            except Exception as exc:  # never let one request take the model down
                self._fail(sender, f"could not read the request: {exc}")
                continue
            self.pool.submit(self._run, req, sender)

    def _fail(self, sender, message, internal=False):
        sender.send(
            pb_utils.InferenceResponse(output_tensors=[], error=_error(message, internal)),
            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
        )

    @staticmethod
    def _response(text, ids, finish=None):
        tensors = [
            pb_utils.Tensor("text_output", np.array([text.encode("utf-8")], dtype=np.object_)),
            pb_utils.Tensor("output_ids", np.array(ids, dtype=np.int32).reshape(-1)),
        ]
        if finish is not None:
            tensors.append(pb_utils.Tensor("finish_reason", np.array([finish.encode()], dtype=np.object_)))
        return pb_utils.InferenceResponse(output_tensors=tensors)

    def _run(self, req, sender):
        try:
            self._generate(req, sender)
        except RequestError as exc:
            self._fail(sender, str(exc))
        except Exception as exc:
            pb_utils.Logger.log_error(f"{self.model_name}: generation failed: {exc!r}")
            self._fail(sender, f"generation failed: {exc}", internal=True)

    def _generate(self, req, sender):
        torch = self.torch
        tok = self.tokenizer
        enc = tok(req.prompt, return_tensors="pt")
        input_ids = enc["input_ids"]
        check_prompt_length(int(input_ids.shape[1]), req, self.limits)

        text = TextStream(lambda ids: tok.decode(ids, skip_special_tokens=True), req.stop_words)
        state = {"stop": False, "finish": None, "ids": [], "sent": 0}

        def on_tokens(new_ids):
            state["ids"].extend(new_ids)
            delta = text.update(state["ids"])
            if text.stopped:
                state["stop"] = True
                state["finish"] = "stop"
            if req.stream and (delta or text.stopped):
                sender.send(self._response(delta, state["ids"][state["sent"] :]))
                state["sent"] = len(state["ids"])

        kwargs = {
            "max_new_tokens": req.max_tokens,
            "min_new_tokens": req.min_tokens or None,
            "do_sample": not req.greedy,
            "pad_token_id": req.pad_id if req.pad_id is not None else self.pad_id,
            "eos_token_id": [req.end_id] if req.end_id is not None else self.eos_ids,
            "repetition_penalty": req.repetition_penalty if req.repetition_penalty != 1.0 else None,
            "streamer": _Streamer(on_tokens),
            "stopping_criteria": [_Stop(state, sender)],
        }
        if req.greedy:
            kwargs.update(temperature=None, top_p=None, top_k=None)
        else:
            kwargs.update(temperature=req.temperature, top_p=req.top_p, top_k=req.top_k or None)
        if req.bad_words:
            kwargs["bad_words_ids"] = [tok(w, add_special_tokens=False)["input_ids"] for w in req.bad_words]
        kwargs = {k: v for k, v in kwargs.items() if v is not None or k in ("temperature", "top_p", "top_k")}

        from transformers import StoppingCriteriaList

        kwargs["stopping_criteria"] = StoppingCriteriaList(kwargs["stopping_criteria"])
        with torch.inference_mode():
            if req.seed is not None and not req.greedy:
                with self.seed_lock:
                    torch.manual_seed(req.seed)
            self.model.generate(
                input_ids=input_ids.to(self.device),
                attention_mask=enc["attention_mask"].to(self.device),
                **kwargs,
            )
        if state["finish"] == "cancelled":
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            return
        rest = text.update(state["ids"], final=True)
        finish = state["finish"] or (
            "stop" if state["ids"] and state["ids"][-1] in (kwargs["eos_token_id"] or []) else "length"
        )
        if req.stream:
            final = self._response(rest, state["ids"][state["sent"] :], finish)
        else:
            body = text.text if req.exclude_input_in_output else req.prompt + text.text
            final = self._response(body, state["ids"], finish)
        sender.send(final, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def finalize(self):
        self.pool.shutdown(wait=True)
