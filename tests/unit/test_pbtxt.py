"""pbtxt rendering and validation against Triton's ModelConfig schema."""

import pytest
from triton_fleet.pbtxt import Enum, PbtxtError, parse, render, render_validated, validate


def _python_model(**extra):
    cfg = {
        "name": "m",
        "backend": "python",
        "max_batch_size": 0,
        "model_transaction_policy": {"decoupled": True},
        "input": [{"name": "text_input", "data_type": Enum("TYPE_STRING"), "dims": [1]}],
        "output": [{"name": "text_output", "data_type": Enum("TYPE_STRING"), "dims": [-1]}],
        "instance_group": [{"count": 2, "kind": Enum("KIND_CPU")}],
        "parameters": {"model_dir": "/checkpoint", "flag": True},
    }
    cfg.update(extra)
    return cfg


def test_render_round_trips_through_model_config():
    text = render_validated(_python_model(), header="line one\nline two")
    assert text.startswith("# line one\n# line two\n")
    msg = parse(text)
    assert msg.name == "m"
    assert msg.backend == "python"
    assert msg.model_transaction_policy.decoupled is True
    assert msg.input[0].data_type == 13  # TYPE_STRING
    assert list(msg.output[0].dims) == [-1]
    assert msg.instance_group[0].count == 2
    assert msg.parameters["model_dir"].string_value == "/checkpoint"
    assert msg.parameters["flag"].string_value == "true"


def test_strings_are_escaped():
    text = render({"name": 'a "quoted"\\ name\n', "backend": "python"})
    assert parse(text).name == 'a "quoted"\\ name\n'


def test_empty_list_and_nested_reshape():
    cfg = _python_model()
    cfg["input"][0]["reshape"] = {"shape": []}
    msg = parse(render(cfg))
    assert msg.input[0].HasField("reshape")
    assert list(msg.input[0].reshape.shape) == []


def test_seed_mistake_top_level_default_timeout_is_caught():
    cfg = _python_model(default_timeout_microseconds=5000)
    with pytest.raises(PbtxtError) as exc:
        render_validated(cfg)
    assert exc.value.field == "default_timeout_microseconds"
    assert "default_timeout_microseconds" in str(exc.value)


def test_seed_mistake_tensorrt_plan_with_plan_parameter_is_caught():
    cfg = {
        "name": "qwen3",
        "platform": "tensorrt_plan",
        "max_batch_size": 8,
        "input": [{"name": "input_ids", "data_type": Enum("TYPE_INT32"), "dims": [-1]}],
        "output": [{"name": "logits", "data_type": Enum("TYPE_FP32"), "dims": [-1]}],
        "parameters": {"plan": "/engines/rank0.engine"},
    }
    with pytest.raises(PbtxtError) as exc:
        render_validated(cfg)
    assert exc.value.field == "platform"
    assert "tensorrtllm" in str(exc.value)


def test_tensorrt_plan_rejects_unknown_parameters():
    text = 'name: "x"\nplatform: "tensorrt_plan"\nparameters { key: "foo" value { string_value: "1" } }\n'
    with pytest.raises(PbtxtError) as exc:
        validate(text)
    assert exc.value.field == "parameters"


def test_pytorch_libtorch_is_refused():
    with pytest.raises(PbtxtError) as exc:
        validate('name: "x"\nplatform: "pytorch_libtorch"\n')
    assert "TorchScript" in str(exc.value)


def test_unknown_enum_names_field():
    cfg = _python_model()
    cfg["instance_group"][0]["kind"] = Enum("KIND_TPU")
    with pytest.raises(PbtxtError) as exc:
        render_validated(cfg)
    assert exc.value.field == "kind"
    assert exc.value.line is not None


def test_quoted_enum_is_a_parse_error():
    cfg = _python_model()
    cfg["instance_group"][0]["kind"] = "KIND_CPU"  # a str, not Enum: quoted -> invalid
    with pytest.raises(PbtxtError) as exc:
        render_validated(cfg)
    assert exc.value.field == "kind"


def test_name_must_match_directory():
    with pytest.raises(PbtxtError) as exc:
        render_validated(_python_model(), expect_name="other")
    assert exc.value.field == "name"


def test_backend_or_platform_required():
    cfg = _python_model()
    del cfg["backend"]
    with pytest.raises(PbtxtError) as exc:
        render_validated(cfg)
    assert exc.value.field == "backend"


def test_unsupported_value_type():
    with pytest.raises(PbtxtError) as exc:
        render({"name": object()})
    assert exc.value.field == "name"


def test_duplicate_inputs_refused():
    cfg = _python_model()
    cfg["input"].append(dict(cfg["input"][0]))
    with pytest.raises(PbtxtError) as exc:
        render_validated(cfg)
    assert exc.value.field == "input"


def test_embedded_schema_matches_tritonclient(monkeypatch):
    """Nodes without tritonclient use the embedded descriptor: same schema, same errors."""
    import builtins

    from triton_fleet import model_config_schema

    real_import = builtins.__import__

    def no_tritonclient(name, *args, **kwargs):
        if name.startswith("tritonclient"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tritonclient)
    cls = model_config_schema.model_config_class()
    assert cls.DESCRIPTOR.full_name == "inference.ModelConfig"
    text = render_validated(_python_model())
    assert "backend" in text
    with pytest.raises(PbtxtError) as exc:
        render_validated(_python_model(default_timeout_microseconds=1))
    assert exc.value.field == "default_timeout_microseconds"
