"""library/gpu_facts.py run in-process with nvidia-smi / lspci answered from fixtures.

tests/fixtures/nvidia-smi/h200/ is a real capture; tests/fixtures/synth/ is synthesized (see its README).
"""

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import gpu_facts
import pytest
from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

FIX = Path(__file__).resolve().parent.parent / "fixtures"


def run_module(args, monkeypatch, outputs, present=("nvidia-smi", "lspci"), check_mode=False):
    calls = []

    def get_bin_path(self, name, *a, **kw):
        return "/usr/bin/" + name if name in present else None

    def run_command(self, argv, *a, **kw):
        calls.append(argv)
        tool = argv[0].rsplit("/", 1)[-1]
        key = "lspci" if tool == "lspci" else {"-q": "xml", "topo": "topo"}.get(argv[1], "csv")
        out = outputs.get(key)
        return (0, out, "") if out is not None else (9, "", "NVIDIA-SMI has failed because it couldn't communicate")

    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", get_bin_path)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    payload = dict(args, _ansible_check_mode=check_mode)
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": payload})))
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    # Tests that load controller code (filter plugins) flip this flag; a module reports its warnings
    # in its result only when it runs as a module.
    from ansible.module_utils import _internal

    monkeypatch.setattr(_internal, "is_controller", False)
    buf = io.StringIO()
    with redirect_stdout(buf), pytest.raises(SystemExit):
        gpu_facts.main()
    out = buf.getvalue()
    return json.loads(out[out.index("{"):]), calls


def h200():
    d = FIX / "nvidia-smi" / "h200"
    return {"csv": (d / "nvidia-smi-query-gpu.csv").read_text(), "xml": (d / "nvidia-smi-q.xml").read_text(),
            "topo": (d / "nvidia-smi-topo.txt").read_text()}


@pytest.mark.parametrize("check_mode", [False, True])
def test_real_h200(monkeypatch, check_mode):
    res, calls = run_module({}, monkeypatch, h200(), check_mode=check_mode)
    assert res["changed"] is False and not res.get("failed")
    f = res["ansible_facts"]["triton_fleet_gpus"]
    assert (f["count"], f["driver_version"], f["cuda_version"], f["source"]) == (1, "580.159.04", "13.0", "nvidia-smi")
    assert f["gpus"][0]["sku"] == "h200" and f["gpus"][0]["memory_bytes"] == 143771 * 1024 ** 2
    assert set(f["gpus"][0]) >= {"index", "name", "sku", "uuid", "memory_bytes", "compute_capability", "mig_mode",
                                 "persistence_mode", "ecc_mode", "pci_bus_id"}
    assert f["nvlink"] is False and f["nvswitch"] is False
    # read-only: only queries ran
    assert all(c[0].endswith(("nvidia-smi", "lspci")) for c in calls)
    assert ["/usr/bin/nvidia-smi", "-q", "-x"] in calls


def test_synth_h100_nvswitch(monkeypatch):
    d = FIX / "synth" / "h100"
    outs = {"csv": (d / "nvidia-smi-query-gpu.csv").read_text(), "xml": (d / "nvidia-smi-q.xml").read_text(),
            "topo": (d / "nvidia-smi-topo.txt").read_text(), "lspci": (d / "lspci-nn.txt").read_text()}
    f = run_module({}, monkeypatch, outs)[0]["ansible_facts"]["triton_fleet_gpus"]
    assert f["count"] == 8 and f["nvlink"] and f["nvswitch"]


def test_no_driver_uses_lspci(monkeypatch):
    outs = {"lspci": (FIX / "synth" / "a100" / "lspci-nn.txt").read_text()}
    res, _ = run_module({}, monkeypatch, outs)           # nvidia-smi present but failing (no driver loaded)
    f = res["ansible_facts"]["triton_fleet_gpus"]
    assert f["source"] == "lspci" and f["count"] == 4 and f["gpus"][0]["sku"] == "a100-80gb-sxm"


def test_no_gpu_fails_clearly(monkeypatch):
    res, _ = run_module({}, monkeypatch, {"lspci": "00:1f.0 ISA bridge [0601]: Intel [8086:a3c8]\n"},
                        present=("lspci",))
    assert res["failed"] and "no NVIDIA GPU found" in res["msg"] and "allow_none" in res["msg"]


def test_no_gpu_allowed(monkeypatch):
    res, _ = run_module({"allow_none": True}, monkeypatch, {}, present=())
    assert not res.get("failed") and res["ansible_facts"]["triton_fleet_gpus"]["count"] == 0


def test_unknown_gpu_warns(monkeypatch):
    outs = h200()
    outs["csv"] = outs["csv"].replace("NVIDIA H200", "NVIDIA Future X1")
    outs["xml"] = outs["xml"].replace("233510DE", "FFFF10DE")
    res, _ = run_module({}, monkeypatch, outs)
    assert res["ansible_facts"]["triton_fleet_gpus"]["gpus"][0]["sku"] is None
    assert "not in the GPU catalog" in json.dumps(res.get("warnings"))
