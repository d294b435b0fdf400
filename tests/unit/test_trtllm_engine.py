"""Engine store and trtllm_engine module, driven end to end through the STAND-IN builder (tests/standin/trtllm)."""

import json
import os
import sys
from pathlib import Path

import pytest
import trtllm_engine
import trtllm_engine_plan
from engine_modhelper import run_module
from engine_profiles import lab, make
from triton_fleet import artifact_manifest as am
from triton_fleet import engine_store as es

STANDIN = Path(__file__).resolve().parents[1] / "standin" / "trtllm"


@pytest.fixture
def env(tmp_path, monkeypatch):
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("TRTLLM_STANDIN_LOG", str(log))
    models = tmp_path / "models"
    ckpt = models / "qwen3-14b@main"
    ckpt.mkdir(parents=True)
    (ckpt / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"]}))
    (ckpt / "model.safetensors").write_bytes(b"w" * 100)
    return {"engines": str(tmp_path / "engines"), "models": str(models), "ckpt": str(ckpt), "log": log,
            "tmp": tmp_path}


def host_args(env, **extra):
    args = {"engines_dir": env["engines"], "models_dir": env["models"], "launcher": "host",
            "examples_dir": str(STANDIN / "examples"), "python": sys.executable,
            "trtllm_build": str(STANDIN / "bin" / "trtllm-build")}
    args.update(extra)
    return args


def calls(env):
    if not env["log"].exists():
        return []
    return [json.loads(line) for line in env["log"].read_text().splitlines()]


def test_build_once_then_idempotent(env):
    prof = make()
    res = run_module(trtllm_engine, host_args(env, state="built", profile=prof))
    assert res.get("failed") is not True, res
    assert res["changed"] and res["built"]
    fp = prof["fingerprint"]
    path = Path(env["engines"]) / fp
    assert sorted(os.listdir(path)) == ["config.json", "manifest.json", "rank0.engine"]
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["fingerprint"] == fp and manifest["trtllm_version"] == "1.2.1"
    assert manifest["image"]["ref"] == prof["image"]["ref"]
    assert [s["tool"] for s in manifest["steps"]] == ["convert_checkpoint.py", "trtllm-build"]
    assert all(isinstance(s["wall_s"], float) for s in manifest["steps"])
    assert manifest["files"]["rank0.engine"]["sha256"] == am.sha256_file(str(path / "rank0.engine"))
    assert [c["tool"] for c in calls(env)] == ["convert_checkpoint.py", "trtllm-build"]
    # the stand-in received exactly the recorded argv
    assert calls(env)[1]["argv"] == manifest["commands"][1][1:]
    assert not [n for n in os.listdir(env["engines"]) if n.startswith(".build")]

    again = run_module(trtllm_engine, host_args(env, state="built", profile=prof))
    assert not again["changed"] and not again["built"] and len(calls(env)) == 2


def test_check_mode_reports_would_build(env):
    res = run_module(trtllm_engine, host_args(env, state="built", profile=make()), check_mode=True)
    assert res["changed"] and "would build" in res["msg"]
    assert calls(env) == [] and not os.path.exists(env["engines"])


def test_corrupt_artifact_is_rebuilt_on_builder(env):
    prof = make()
    run_module(trtllm_engine, host_args(env, state="built", profile=prof))
    engine = Path(env["engines"]) / prof["fingerprint"] / "rank0.engine"
    data = engine.read_bytes()
    # flipped, not overwritten: the stand-in's engine ends in random bytes, and a fixed byte would sometimes match
    engine.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))
    state = run_module(trtllm_engine, host_args(env, state="verified", profile=prof))
    assert not state["valid"] and "corrupt" in state["msg"] and state["problems"]["bad"] == ["rank0.engine"]
    res = run_module(trtllm_engine, host_args(env, state="built", profile=prof))
    assert res["built"] and len(calls(env)) == 4
    assert run_module(trtllm_engine, host_args(env, state="verified", profile=prof))["valid"]


def test_failed_build_leaves_nothing_and_keeps_previous(env):
    good = make()
    run_module(trtllm_engine, host_args(env, state="built", profile=good))
    run_module(trtllm_engine, host_args(env, state="active", profile=good))
    oom = make(**{"limits.max_batch_size": 4096, "limits.max_seq_len": 32768, "limits.max_num_tokens": 16384})
    res = run_module(trtllm_engine, host_args(env, state="built", profile=oom))
    assert res["failed"]
    assert "out of GPU memory" in res["msg"] and "max_num_tokens (now 16384)" in res["msg"]
    assert "CUDA out of memory" in res["output_tail"]
    assert sorted(os.listdir(env["engines"])) == sorted([good["fingerprint"], "current", ".lock-" + good["fingerprint"],
                                                        ".lock-" + oom["fingerprint"]])
    assert os.readlink(os.path.join(env["engines"], "current")) == good["fingerprint"]
    assert es.verify_engine(env["engines"], good["fingerprint"])["valid"]


def test_flag_rejected_by_builder_is_explained(env, monkeypatch):
    monkeypatch.setenv("TRTLLM_STANDIN_FAIL", "convert_checkpoint.py")
    res = run_module(trtllm_engine, host_args(env, state="built", profile=make()))
    assert res["failed"] and "convert_checkpoint.py" in res["msg"] and "No artifact was published" in res["msg"]


def test_no_build_runtimes_return_the_checkpoint(env):
    prof = lab()
    res = run_module(trtllm_engine, host_args(env, state="built", profile=prof))
    assert not res["changed"] and res["build_required"] is False
    assert res["path"] == os.path.join(env["models"], "qwen3-tiny@local")
    assert "no engine build step" in res["msg"]
    llmapi = make(runtime="trtllm-llmapi")
    assert run_module(trtllm_engine, host_args(env, state="built", profile=llmapi))["build_required"] is False
    assert calls(env) == []


def test_edited_profile_is_refused(env):
    prof = make()
    prof["limits"]["max_batch_size"] = 64  # fingerprint not recomputed
    res = run_module(trtllm_engine, host_args(env, state="built", profile=prof))
    assert res["failed"] and "edited after planning" in res["msg"]


def test_missing_checkpoint_is_explained(env, tmp_path):
    res = run_module(trtllm_engine, host_args(env, state="built", profile=make(), models_dir=str(tmp_path / "no")))
    assert res["failed"] and "model_artifacts" in res["msg"]


def test_install_copy_verifies_and_repairs(env, tmp_path):
    prof = make()
    fp = prof["fingerprint"]
    built = run_module(trtllm_engine, host_args(env, state="built", profile=prof))
    other = str(tmp_path / "node2")
    src = os.path.join(env["engines"], fp)
    args = {"state": "present", "engines_dir": other, "fingerprint": fp, "manifest": built["manifest"],
            "sources": [src]}
    res = run_module(trtllm_engine, args)
    assert res["changed"] and sorted(res["copied"]) == ["config.json", "rank0.engine"]
    for name in ("config.json", "rank0.engine", "manifest.json"):
        assert am.sha256_file(os.path.join(other, fp, name)) == am.sha256_file(os.path.join(src, name))
    assert not run_module(trtllm_engine, args)["changed"]
    with open(os.path.join(other, fp, "rank0.engine"), "r+b") as handle:
        handle.write(b"X")
    repaired = run_module(trtllm_engine, args)
    assert repaired["copied"] == ["rank0.engine"]
    wrong = dict(args, fingerprint="0" * 64)
    assert "manifest is for fingerprint" in run_module(trtllm_engine, wrong)["msg"]


def test_activate_and_prune(env):
    fps = []
    for mbs in (8, 16, 32, 64):
        prof = make(**{"limits.max_batch_size": mbs})
        run_module(trtllm_engine, host_args(env, state="built", profile=prof))
        fps.append(prof["fingerprint"])
    assert run_module(trtllm_engine, host_args(env, state="active", fingerprint=fps[0]))["changed"]
    assert not run_module(trtllm_engine, host_args(env, state="active", fingerprint=fps[0]))["changed"]
    os.makedirs(os.path.join(env["engines"], ".build-stale"))
    res = run_module(trtllm_engine, {"state": "pruned", "engines_dir": env["engines"], "keep": 2})
    assert res["changed"]
    # current (oldest) is kept and counts; the newest one fills the other slot
    assert set(res["kept"]) == {fps[0], fps[3]} and set(res["removed"]) == {fps[1], fps[2]}
    assert not os.path.exists(os.path.join(env["engines"], ".build-stale"))
    assert not run_module(trtllm_engine, {"state": "pruned", "engines_dir": env["engines"], "keep": 2})["changed"]
    bad = run_module(trtllm_engine, host_args(env, state="active", fingerprint=fps[1]))
    assert bad["failed"] and "refusing to activate" in bad["msg"]


def test_docker_launcher_argv():
    argv = es.launcher_argv("trtllm-build", None, ["--checkpoint_dir", "/c"], "docker", image="img:1",
                            gpu_ids="0,1", mounts=["/e:/e"])
    assert argv[:3] == ["docker", "run", "--rm"]
    assert argv[argv.index("--gpus") + 1] == '"device=0,1"'
    assert argv[argv.index("-v") + 1] == "/e:/e"
    assert argv[-4:] == ["img:1", "trtllm-build", "--checkpoint_dir", "/c"]
    conv = es.launcher_argv("convert_checkpoint.py", "models/core/qwen/convert_checkpoint.py", ["--model_dir", "m"],
                            "host", examples_dir="/opt/x/examples/")
    assert conv == ["python3", "/opt/x/examples/models/core/qwen/convert_checkpoint.py", "--model_dir", "m"]


def test_build_uses_docker_with_profile_image_and_gpus(env):
    prof = make(**{"parallel.tp": 2, "parallel.gpu_device_ids": ["2,3"]})
    res = run_module(trtllm_engine, {"state": "built", "profile": prof, "engines_dir": env["engines"],
                                     "models_dir": env["models"]}, check_mode=True)
    for argv in res["commands"]:
        assert argv[0] == "docker" and prof["image"]["ref"] in argv
        assert argv[argv.index("--gpus") + 1] == '"device=2,3"'
        assert "{}:{}:ro".format(env["ckpt"], env["ckpt"]) in argv
    assert res["commands"][0][argv.index(prof["image"]["ref"]) + 1:][:2] == [
        "python3", "/app/examples/models/core/qwen/convert_checkpoint.py"]


# --- fleet plan -------------------------------------------------------------------------------

def states(**valid):
    return {h: {"valid": bool(d), "digest": d or None} for h, d in valid.items()}


def test_plan_two_identical_hosts_one_build():
    prof = make()
    plan = es.plan_fleet({"n1": prof, "n2": prof}, states(n1=None, n2=None), order=["n1", "n2"])
    g = plan["groups"][prof["fingerprint"]]
    assert plan["builds"] == ["n1"] and g["copy_to"] == ["n2"] and g["source"] == "n1"
    assert plan["hosts"]["n2"] == {"fingerprint": prof["fingerprint"], "build_required": True, "build": False,
                                   "copy": True, "source": "n1", "serve_source": False}


def test_plan_prefers_engine_builders_member_in_group():
    prof = make()
    plan = es.plan_fleet({"n1": prof, "n2": prof, "n3": prof}, states(n1=None, n2=None, n3=None),
                         builders=["other", "n3"], order=["n1", "n2", "n3"])
    assert plan["builds"] == ["n3"] and plan["groups"][prof["fingerprint"]]["copy_to"] == ["n1", "n2"]


def test_plan_nothing_when_all_hold_the_same_artifact():
    prof = make()
    plan = es.plan_fleet({"n1": prof, "n2": prof}, states(n1="d1", n2="d1"))
    assert plan["builds"] == [] and plan["sources"] == []
    assert not plan["hosts"]["n1"]["copy"] and not plan["hosts"]["n2"]["copy"]


def test_plan_repairs_from_a_valid_host_without_rebuilding():
    prof = make()
    plan = es.plan_fleet({"n1": prof, "n2": prof, "n3": prof}, states(n1=None, n2="d1", n3="d2"),
                         order=["n1", "n2", "n3"])
    g = plan["groups"][prof["fingerprint"]]
    assert plan["builds"] == [] and g["source"] == "n2" and g["copy_to"] == ["n1", "n3"]


def test_plan_groups_by_fingerprint_and_skips_no_build_runtimes():
    a, b, c = make(), make(**{"limits.max_batch_size": 32}), lab()
    plan = es.plan_fleet({"n1": a, "n2": b, "n3": c}, states(n1=None, n2=None, n3=None), order=["n1", "n2", "n3"])
    assert plan["builds"] == ["n1", "n2"] and len(plan["groups"]) == 3
    assert plan["hosts"]["n3"]["build_required"] is False


def test_plan_module_rejects_missing_or_edited_profiles():
    prof = make()
    edited = make()
    edited["precision"]["weights"] = "int8_wo"
    res = run_module(trtllm_engine_plan, {"profiles": {"n1": prof, "n2": edited}, "states": {}})
    assert res["failed"] and "n2:" in res["msg"] and "edited after planning" in res["msg"]
    res = run_module(trtllm_engine_plan, {"profiles": {"n1": prof, "n2": None}, "states": {}})
    assert res["failed"] and "preflight" in res["msg"]
    ok = run_module(trtllm_engine_plan, {"profiles": {"n1": prof, "n2": prof}, "states": {},
                                         "order": ["n1", "n2"]})
    assert ok["builds"] == ["n1"] and "build on n1" in ok["msg"]


def test_molecule_profiles_carry_their_real_fingerprints():
    """The Molecule scenario's hand-written profiles must hash to the fingerprints they state."""
    import yaml
    from triton_fleet.fingerprint import fingerprint

    scen = Path(__file__).resolve().parents[2] / "roles" / "trtllm_engine" / "molecule" / "default"
    mol = yaml.safe_load((scen / "molecule.yml").read_text())
    profiles = [hv["triton_fleet_profile"] for hv in mol["provisioner"]["inventory"]["host_vars"].values()]
    profiles += list(yaml.safe_load((scen / "vars" / "profiles.yml").read_text()).values())
    assert len(profiles) == 4
    for prof in profiles:
        assert prof["fingerprint"] == fingerprint(prof), prof["name"]
    assert len({p["fingerprint"] for p in profiles}) == 3
