"""library/triton_model_config.py: atomic write, idempotence, check mode, diff, failures change nothing."""

import json
import os
from pathlib import Path

import pytest
import triton_model_config as mod
from ansible.module_utils.triton_fleet.model_repository import ProfileError
from ansible.module_utils.triton_fleet.pbtxt import PbtxtError

ROOT = Path(__file__).resolve().parents[2]
PROFILE = json.loads((ROOT / "tests/fixtures/profiles/lab-cpu-transformers.json").read_text())
FILES = {"1/model.py": "# model v1\n", "1/generation_request.py": "# logic\n"}


def params(path, **over):
    p = {"path": str(path), "profile": PROFILE, "model_files": dict(FILES), "mode": "0644"}
    p.update(over)
    return p


def snapshot(path):
    return {str(p.relative_to(path)): p.read_bytes() for p in Path(path).rglob("*") if p.is_file()}


def test_first_run_writes_everything_then_idempotent(tmp_path):
    repo = tmp_path / "repository"
    first = mod.run(params(repo))
    assert first["changed"]
    assert "qwen3-tiny/config.pbtxt" in first["changed_files"]
    assert first["entry_model"] == "qwen3-tiny"
    assert first["load_models"] == ["qwen3-tiny"]
    assert (repo / "qwen3-tiny/1/model.py").read_text() == "# model v1\n"
    assert (repo / mod.HASH_FILE).read_text().strip() == first["content_hash"]
    assert oct((repo / "qwen3-tiny/config.pbtxt").stat().st_mode & 0o777) == "0o644"
    second = mod.run(params(repo))
    assert not second["changed"]
    assert second["changed_files"] == []
    assert second["content_hash"] == first["content_hash"]


def test_check_mode_reports_but_writes_nothing(tmp_path):
    repo = tmp_path / "repository"
    res = mod.run(params(repo), check_mode=True)
    assert res["changed"] and res["diff"]
    assert not repo.exists()
    assert not list(tmp_path.iterdir())


def test_change_is_detected_with_diff_and_hash(tmp_path):
    repo = tmp_path / "repository"
    first = mod.run(params(repo))
    files = dict(FILES, **{"1/model.py": "# model v2\n"})
    res = mod.run(params(repo, model_files=files))
    assert res["changed_files"] == ["qwen3-tiny/1/model.py"]
    assert res["content_hash"] != first["content_hash"]
    (d,) = res["diff"]
    assert d["before"] == "# model v1\n" and d["after"] == "# model v2\n"
    # no staging or old directories left beside the target
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repository"]


def test_stray_files_are_removed(tmp_path):
    repo = tmp_path / "repository"
    mod.run(params(repo))
    (repo / "stray").mkdir()
    (repo / "stray/config.pbtxt").write_text("x")
    res = mod.run(params(repo))
    assert res["changed_files"] == ["stray/config.pbtxt"]
    assert not (repo / "stray").exists()


def test_hand_edit_is_repaired(tmp_path):
    repo = tmp_path / "repository"
    mod.run(params(repo))
    (repo / "qwen3-tiny/config.pbtxt").write_text("edited")
    res = mod.run(params(repo))
    assert res["changed_files"] == ["qwen3-tiny/config.pbtxt"]


def test_bad_profile_changes_nothing(tmp_path):
    repo = tmp_path / "repository"
    mod.run(params(repo))
    before = snapshot(repo)
    bad = json.loads(json.dumps(PROFILE))
    bad["limits"]["max_output_len"] = 0
    with pytest.raises(ProfileError) as exc:
        mod.run(params(repo, profile=bad))
    assert exc.value.field == "limits.max_output_len"
    assert snapshot(repo) == before


def test_invalid_config_changes_nothing(tmp_path, monkeypatch):
    import ansible.module_utils.triton_fleet.model_repository as mr

    repo = tmp_path / "repository"
    mod.run(params(repo))
    before = snapshot(repo)
    orig = mr._transformers_config
    monkeypatch.setattr(mr, "_transformers_config", lambda p, o: dict(orig(p, o), default_timeout_microseconds=1))
    with pytest.raises(PbtxtError) as exc:
        mod.run(params(repo))
    assert exc.value.field == "default_timeout_microseconds"
    assert snapshot(repo) == before


def test_path_that_is_a_file_is_refused(tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(ValueError, match="not a directory"):
        mod.run(params(target))


def test_bad_mode_refused(tmp_path):
    with pytest.raises(ValueError, match="octal"):
        mod.run(params(tmp_path / "r", mode="rw"))


def test_module_documents_its_options():
    import yaml

    doc = yaml.safe_load(mod.DOCUMENTATION)
    assert set(doc["options"]) == {
        "path",
        "profile",
        "runtime",
        "checkpoint_dir",
        "engine_dir",
        "tokenizer_dir",
        "bls",
        "preprocessing_instance_count",
        "postprocessing_instance_count",
        "model_files",
        "mode",
    }
    assert os.path.basename(mod.__file__) == "triton_model_config.py"
