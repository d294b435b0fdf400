"""The role's side of the sampling defaults, the model card's time and the model's reasoning behaviour: the model
part of openai_api_config (roles/openai_api/vars/main.yml), templated with Ansible's Templar as Ansible would, from a
checkpoint directory with and without generation_config.json and from profiles with and without model.thinking,
reaches the service as the defaults, the time and the thinking mode it uses."""

import json
from pathlib import Path

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar
from triton_fleet_openai.config import ModelInfo

ROOT = Path(__file__).resolve().parents[3]
ROLE = ROOT / "roles" / "openai_api"
PROFILE = {"model": {"served_name": "qwen3-tiny"}, "runtime": "transformers", "fingerprint": "f" * 64,
           "limits": {"max_seq_len": 1024, "max_input_len": 512, "max_output_len": 256}}
QWEN3 = {"bos_token_id": 151643, "do_sample": True, "eos_token_id": [151645, 151643], "pad_token_id": 151643,
         "temperature": 0.6, "top_k": 20, "top_p": 0.95, "transformers_version": "4.51.0"}


@pytest.fixture(scope="module", autouse=True)
def _plugins():
    init_plugin_loader()  # the file lookup, as ansible-playbook loads it


def render_model(checkpoint: Path, overrides=None, operator_dir=False, remote_mtime=1714521600.7, profile=None):
    """openai_api_config.model as the role renders it; the tokenizer files fetched into ``checkpoint`` from a
    serving host whose tokenizer.json has ``remote_mtime`` (or, ``operator_dir``, found there on the controller)."""
    loader = DataLoader()
    role_vars = loader.load_from_file(str(ROLE / "vars" / "main.yml"), trusted_as_template=True)
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    # a stat of a file that is not there has no mtime (check mode before the engines stage)
    remote = {"exists": True, "mtime": remote_mtime} if remote_mtime is not None else {"exists": False}
    stat = {"stat": remote, "item": "tokenizer.json"}
    local = {"stat": {"exists": True, "mtime": (checkpoint / "tokenizer.json").stat().st_mtime}, "item": "tokenizer.json"}
    variables = {
        **role_vars,
        "openai_api_profile": PROFILE if profile is None else profile,
        "openai_api_sampling_defaults": defaults["openai_api_sampling_defaults"] if overrides is None else overrides,
        "openai_api_tokenizer_dir": str(checkpoint) if operator_dir else "",
        "openai_api__tokenizer_dir": str(checkpoint),
        "openai_api_tokenizer_stat": {"results": [local]},
    }
    if not operator_dir:
        variables["openai_api__tokenizer_remote"] = {"results": [stat]}
    return Templar(loader=loader, variables=variables).template(role_vars["openai_api_config"]["model"])


@pytest.fixture
def checkpoint(tmp_path):
    (tmp_path / "tokenizer.json").write_text("{}")
    return tmp_path


def test_the_checkpoints_generation_config_reaches_the_service(checkpoint):
    (checkpoint / "generation_config.json").write_text(json.dumps(QWEN3, indent=2))
    model = ModelInfo.model_validate(render_model(checkpoint))
    assert model.sampling == {"temperature": 0.6, "top_p": 0.95, "top_k": 20}
    assert model.created == 1714521600  # the serving host's tokenizer.json, not the fetched copy's time


def test_without_generation_config_the_defaults_are_openais(checkpoint):
    model = ModelInfo.model_validate(render_model(checkpoint))
    assert model.generation_config == {} and model.sampling == {"temperature": 1.0, "top_p": 1.0}


def test_the_operators_overrides_win_per_parameter(checkpoint):
    (checkpoint / "generation_config.json").write_text(json.dumps(QWEN3))
    model = ModelInfo.model_validate(render_model(checkpoint, {"temperature": 0.7, "top_k": None}))
    assert model.sampling == {"temperature": 0.7, "top_p": 0.95}


def test_an_operator_directory_gives_its_own_time(checkpoint):
    model = ModelInfo.model_validate(render_model(checkpoint, operator_dir=True))
    assert model.created == int((checkpoint / "tokenizer.json").stat().st_mtime)


def test_check_mode_before_the_engines_stage_has_no_time(checkpoint):
    assert ModelInfo.model_validate(render_model(checkpoint, remote_mtime=None)).created == 0


def test_the_spec_takes_the_overrides_as_a_dict():
    spec = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    entry = {"openai_api_sampling_defaults": spec["openai_api_sampling_defaults"]}
    ok = ArgumentSpecValidator(entry).validate({"openai_api_sampling_defaults": {"temperature": 0.7}})
    assert ok.error_messages == []
    bad = ArgumentSpecValidator(entry).validate({"openai_api_sampling_defaults": "hot"})
    assert bad.error_messages


def with_thinking(thinking):
    return {**PROFILE, "model": {**PROFILE["model"], "thinking": thinking}}


@pytest.mark.parametrize("thinking", [
    {"mode": "always", "template_opens_think": True},  # Qwen3-*-Thinking-2507
    {"mode": "never", "template_opens_think": False},  # Qwen3-*-Instruct-2507
    {"mode": "switchable", "template_opens_think": False},  # Qwen3
])
def test_the_profiles_thinking_reaches_the_service(checkpoint, thinking):
    model = ModelInfo.model_validate(render_model(checkpoint, profile=with_thinking(thinking)))
    assert model.thinking.model_dump() == thinking


def test_a_profile_planned_before_thinking_existed_is_switchable(checkpoint):
    rendered = render_model(checkpoint)  # PROFILE has no model.thinking
    assert rendered["thinking"] == {"mode": "switchable", "template_opens_think": False}
    assert ModelInfo.model_validate(rendered).thinking.mode == "switchable"


def test_a_planned_profile_renders_a_configuration_the_service_takes(checkpoint):
    profile = json.loads((ROOT / "tests" / "fixtures" / "profiles" / "prod-gpu_a10.json").read_text())
    model = ModelInfo.model_validate(render_model(checkpoint, profile=profile))
    assert model.thinking.model_dump() == profile["model"]["thinking"]
    assert model.served_name == profile["model"]["served_name"] and model.runtime == profile["runtime"]
