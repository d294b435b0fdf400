"""Tensor interfaces read from the real rendered model configs, budgets, configuration, metrics."""

import json

import pytest
from conftest import GOLDEN
from triton_fleet_openai.backend import Interface, Pool
from triton_fleet_openai.budgets import Budgets
from triton_fleet_openai.config import load
from triton_grpc_standin import load_config


def iface(runtime, model):
    return Interface.from_config(load_config(GOLDEN / runtime / model / "config.pbtxt"))


def tensors(request):
    """name -> (datatype, shape, raw contents) of a ModelInferRequest's inputs."""
    return {t.name: (t.datatype, list(t.shape), request.raw_input_contents[i]) for i, t in enumerate(request.inputs)}


def tritonclient_request(i, fields):
    """What tritonclient itself sends for the same fields: InferInputs from numpy arrays of each tensor's
    datatype, through the client library's own request builder (its stream_infer's)."""
    import numpy as np
    from tritonclient.grpc import InferInput
    from tritonclient.grpc._utils import _get_inference_request
    from tritonclient.utils import triton_to_np_dtype

    inputs = []
    for logical, value in fields.items():
        if value is None or logical not in i.inputs:
            continue
        name, dtype, is_list = i.inputs[logical]
        values = list(value) if is_list else [value]
        if dtype == "BYTES":
            arr = np.array([v.encode() if isinstance(v, str) else v for v in values], dtype=np.object_)
        else:
            arr = np.array(values, dtype=triton_to_np_dtype(dtype))
        if i.batched:
            arr = arr.reshape(1, -1)
        tensor = InferInput(name, list(arr.shape), dtype)
        tensor.set_data_from_numpy(arr)
        inputs.append(tensor)
    return _get_inference_request(model_name=i.model, inputs=inputs, model_version="", request_id="", outputs=None,
                                  sequence_id=0, sequence_start=False, sequence_end=False, priority=0, timeout=None,
                                  parameters=None)


def test_transformers_runtime_interface():
    i = iface("transformers", "qwen3-tiny")
    assert i.inputs["seed"][0] == "seed" and i.inputs["stop"] == ("stop_words", "BYTES", True)
    assert "output_ids" in i.outputs and not i.batched
    assert "presence_penalty" not in i.params  # -> 400 when a request sets it
    fields = {"prompt": "hé", "max_tokens": 5, "stream": True, "stop": ["a", "b"], "seed": 7, "temperature": None,
              "presence_penalty": 0.5}
    t = tensors(i.build(fields))
    assert set(t) == {"text_input", "max_tokens", "stream", "stop_words", "seed"}
    assert t["stop_words"][:2] == ("BYTES", [2]) and t["max_tokens"][0] == "INT32"
    assert t["seed"][0] == "UINT64" and t["text_input"] == ("BYTES", [1], b"\x03\x00\x00\x00h\xc3\xa9")
    assert i.build(fields) == tritonclient_request(i, fields)


def test_trtllm_engine_ensemble_interface():
    i = iface("trtllm-engine", "qwen3-14b")
    assert i.batched and i.inputs["seed"][0] in ("seed", "random_seed")
    assert {"presence_penalty", "frequency_penalty", "top_k", "stop"} <= i.params
    assert "output_ids" not in i.outputs  # completion tokens are then counted from the text
    t = tensors(i.build({"prompt": "x", "max_tokens": 3, "stream": True, "stop": ["\n"]}))
    assert t["text_input"][1] == [1, 1] and t["stop_words"][1] == [1, 1]


def test_llmapi_interface():
    path = next((GOLDEN / "trtllm-llmapi").glob("*/config.pbtxt"))
    i = Interface.from_config(load_config(path))
    assert i.inputs["max_tokens"][0] == "sampling_param_max_tokens" and i.inputs["stream"][0] == "streaming"
    assert i.inputs["stop"][0] == "sampling_param_stop" and "return_finish_reason" in i.params


def test_interface_refuses_a_model_without_text_input():
    cfg = load_config(GOLDEN / "trtllm-engine" / "tensorrt_llm" / "config.pbtxt")
    with pytest.raises(ValueError, match="no input for prompt"):
        Interface.from_config(cfg)


def test_pool_order_least_inflight_then_round_robin():
    pool = Pool(["a:1", "b:1", "c:1"], "m")
    firsts = [pool._order()[0].url for _ in range(6)]
    assert sorted(set(firsts)) == ["a:1", "b:1", "c:1"]
    pool.nodes[0].inflight = 0
    pool.nodes[1].inflight = 2
    pool.nodes[2].inflight = 1
    assert [n.url for n in pool._order()] == ["a:1", "c:1", "b:1"]
    pool.mark_failed(pool.nodes[0])
    assert pool._order()[-1].url == "a:1"  # a failed node is tried last, only when the others fail


def test_budget_window():
    now = [1000.0]
    b = Budgets({"free": 100}, clock=lambda: now[0])
    assert b.retry_after("u", "free") is None
    b.record("u", "free", 60)
    now[0] += 10
    b.record("u", "free", 50)
    assert b.retry_after("u", "free") == 50  # the first 60 leave the window at t0 + 60
    assert b.retry_after("v", "free") is None and b.retry_after("u", "paid") is None
    now[0] += 51
    assert b.retry_after("u", "free") is None
    b.record("u", "paid", 10**9)
    assert b.retry_after("u", "paid") is None


def test_config_errors_name_the_field(tmp_path):
    p = tmp_path / "c.json"
    p.write_text(json.dumps({"model": {"served_name": "m"}, "tokenizer_dir": "/x", "triton_nodes": []}))
    with pytest.raises(SystemExit) as err:
        load(str(p))
    assert "triton_nodes" in str(err.value) and "entry_model" in str(err.value)
    p.write_text("{")
    with pytest.raises(SystemExit, match="cannot read"):
        load(str(p))


def test_one_port_per_worker_clear_of_the_metrics_port(tmp_path):
    base = {"model": {"served_name": "m", "entry_model": "m", "runtime": "transformers", "context_length": 8,
                      "max_input_len": 4, "max_output_len": 4}, "tokenizer_dir": "/x", "triton_nodes": ["n:8001"]}
    p = tmp_path / "c.json"
    p.write_text(json.dumps({**base, "port": 8090, "workers": 3, "metrics_port": 9108}))
    assert load(str(p)).ports == [8090, 8091, 8092]
    p.write_text(json.dumps({**base, "port": 8090, "workers": 4, "metrics_port": 8092}))
    with pytest.raises(SystemExit, match="metrics_port 8092 is one of the workers' ports 8090-8093"):
        load(str(p))
    p.write_text(json.dumps({**base, "port": 65534, "workers": 4, "metrics_port": 0}))
    with pytest.raises(SystemExit, match="needs ports 65534-65537, past 65535"):
        load(str(p))


@pytest.mark.parametrize("runtime", ["transformers", "trtllm-engine", "trtllm-llmapi"])
def test_requests_are_what_tritonclient_sends(runtime):
    """The request built directly is byte for byte the one tritonclient builds from numpy InferInputs, for
    every entry model of the rendered repositories and every field (values of a real chat request)."""
    values = {"prompt": "Héllo <|im_start|>", "max_tokens": 77, "stream": True, "temperature": 0.7, "top_p": 0.95,
              "top_k": 20, "stop": ["\n\n", "</s>"], "seed": 2**40 + 3, "presence_penalty": 0.5,
              "frequency_penalty": -1.25, "exclude_input": True, "return_finish_reason": True}
    checked = 0
    for model_dir in sorted((GOLDEN / runtime).iterdir()):
        try:
            i = Interface.from_config(load_config(model_dir / "config.pbtxt"))
        except ValueError:
            continue  # not an entry model (a step of the ensemble)
        fields = {k: v for k, v in values.items() if k in i.inputs}
        request = i.build(fields)
        assert request == tritonclient_request(i, fields), model_dir.name
        assert {d for d, _, _ in tensors(request).values()} <= {"BYTES", "BOOL", "INT32", "UINT64", "FP32"}
        checked += 1
    assert checked >= 1


def _wheelhouse_tool():
    import importlib.machinery
    import importlib.util

    path = str(GOLDEN.parents[2] / "tools" / "build-wheelhouse")
    loader = importlib.machinery.SourceFileLoader("build_wheelhouse", path)
    spec = importlib.util.spec_from_loader("build_wheelhouse", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def test_wheelhouse_markers_are_evaluated_for_the_target_python():
    tool = _wheelhouse_tool()
    lines = (GOLDEN.parents[2] / "services" / "openai_api" / "requirements.txt").read_text().splitlines()
    lines.append('oldpin==1.0; python_version < "3.12"  # the file has no marker now: one made up here')
    for version, numpy, old in (("3.11", "numpy==2.2.6", ["oldpin==1.0"]), ("3.12", "numpy==2.2.6", []),
                                ("3.13", "numpy==2.2.6", [])):
        reqs = tool.resolve_markers(lines, version, "x86_64")
        assert [r for r in reqs if r.startswith("numpy")] == [numpy]
        assert [r for r in reqs if r.startswith("oldpin")] == old
        assert all(";" not in r and "==" in r for r in reqs), reqs  # every pin exact, markers gone
        assert "tritonclient[grpc]==2.71.0" in reqs


def test_wheelhouse_key_follows_the_package_source(tmp_path):
    tool = _wheelhouse_tool()
    (tmp_path / "a.py").write_text("x = 1\n")
    first = tool.source_hash(tmp_path, "req")
    (tmp_path / "x.egg-info").mkdir()
    (tmp_path / "x.egg-info" / "PKG-INFO").write_text("noise")
    (tmp_path / ".ruff_cache" / "0.1").mkdir(parents=True)
    (tmp_path / ".ruff_cache" / "0.1" / "cache").write_text("noise")
    assert tool.source_hash(tmp_path, "req") == first
    (tmp_path / "a.py").write_text("x = 2\n")
    assert tool.source_hash(tmp_path, "req") != first
    assert tool.source_hash(tmp_path, "other") != tool.source_hash(tmp_path, "req")


def _complete_wheelhouse(target, monkeypatch):
    """The tool, a complete cp311 wheelhouse of the current sources under target, and the argv that finds it."""
    tool = _wheelhouse_tool()
    root = GOLDEN.parents[2]
    req = root / "services" / "openai_api" / "requirements.txt"
    pkg = root / "services" / "openai_api"
    key = tool.source_hash(pkg, req.read_text(encoding="utf-8"))
    done = target / f"cp311-x86_64-{key}"
    done.mkdir(parents=True)
    (done / ".complete").write_text("ok\n")
    monkeypatch.setattr(tool, "build", lambda *a: pytest.fail("built again"))
    argv = ["--requirements", str(req), "--package", str(pkg), "--python-version", "3.11", "--arch", "x86_64"]
    return tool, done, argv


def test_wheelhouse_from_a_bundle_is_found_per_target_and_left_untouched(tmp_path, monkeypatch, capsys):
    """A bundle's wheels/<tag>-<arch>/ is searched; a complete wheelhouse is only read (no lock file next to it)."""
    import json

    tool, done, argv = _complete_wheelhouse(tmp_path / "cp311-x86_64", monkeypatch)
    (done / "triton_fleet_openai-1.0-py3-none-any.whl").write_text("w")
    argv += ["--cache", str(tmp_path)]
    assert tool.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {"dir": str(done), "requirements": "requirements.txt",
                   "package_wheel": "triton_fleet_openai-1.0-py3-none-any.whl", "built": False, "pruned": []}
    assert sorted(p.name for p in (tmp_path / "cp311-x86_64").iterdir()) == [done.name]


def test_wheelhouse_prune_keeps_only_the_current_build(tmp_path, monkeypatch, capsys):
    """--prune (the bundle's per-target directory): earlier builds and lock files go, the current one stays."""
    import json

    target = tmp_path / "cp311-x86_64"
    tool, done, argv = _complete_wheelhouse(target, monkeypatch)
    (target / "cp311-x86_64-0123456789abcdef").mkdir()
    (target / "cp311-x86_64-0123456789abcdef" / "old.whl").write_text("w")
    (target / ".cp311-x86_64-0123456789abcdef.lock").write_text("")
    argv += ["--cache", str(target), "--prune"]
    assert tool.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["pruned"] == [".cp311-x86_64-0123456789abcdef.lock", "cp311-x86_64-0123456789abcdef"]
    assert [p.name for p in target.iterdir()] == [done.name]
    assert tool.main(argv) == 0
    assert json.loads(capsys.readouterr().out)["pruned"] == []


@pytest.mark.parametrize("id_type", ["INT32", "INT64"])
def test_piece_read_from_the_protobuf_equals_the_client_librarys_reading(id_type):
    """_decode_piece reads raw_output_contents itself; the result is what InferResult.as_numpy gives."""
    import numpy as np
    from triton_fleet_openai.backend import _decode_piece
    from tritonclient.grpc import InferResult, service_pb2
    from tritonclient.utils import serialize_byte_tensor

    def raw_bytes(arr):
        serialized = serialize_byte_tensor(arr)
        return serialized.item() if serialized.dtype == np.object_ else serialized.tobytes()

    def response(outputs):
        r = service_pb2.ModelInferResponse(model_name="qwen3-tiny")
        for name, datatype, arr in outputs:
            out = r.outputs.add(name=name, datatype=datatype)
            out.shape.extend(arr.shape)
            raw = raw_bytes(arr) if datatype == "BYTES" else arr.tobytes()
            r.raw_output_contents.append(raw)
        return r

    text = np.array(["héllo <tool_call>".encode(), b" world"], dtype=np.object_)
    ids = np.array([151657, 0, 2**31 - 1], dtype=np.int32 if id_type == "INT32" else np.int64)
    result = response([("text_output", "BYTES", text), ("output_ids", id_type, ids),
                       ("finish_reason", "BYTES", np.array([b"length"], dtype=np.object_))])
    piece = _decode_piece(result)
    library = InferResult(result)
    assert piece.text == b"".join(library.as_numpy("text_output").reshape(-1)).decode() == "héllo <tool_call> world"
    assert piece.ids == [int(i) for i in library.as_numpy("output_ids")] == [151657, 0, 2**31 - 1]
    assert piece.finish == "length"
    # A server that fills typed contents instead of raw ones reads the same.
    typed = service_pb2.ModelInferResponse(model_name="qwen3-tiny")
    typed.outputs.add(name="text_output", datatype="BYTES", shape=[2]).contents.bytes_contents.extend(list(text))
    ids_out = typed.outputs.add(name="output_ids", datatype=id_type, shape=[3])
    (ids_out.contents.int_contents if id_type == "INT32" else ids_out.contents.int64_contents).extend(ids.tolist())
    typed.outputs.add(name="finish_reason", datatype="BYTES", shape=[1]).contents.bytes_contents.append(b"length")
    again = _decode_piece(typed)
    assert (again.text, again.ids, again.finish) == (piece.text, piece.ids, piece.finish)
    # An empty finish reason is none; a response without ids has none (the runtime does not return them).
    empty = _decode_piece(response([("text_output", "BYTES", np.array([b""], dtype=np.object_)),
                                    ("finish_reason", "BYTES", np.array([b""], dtype=np.object_))]))
    assert (empty.text, empty.ids, empty.finish) == ("", None, None)
