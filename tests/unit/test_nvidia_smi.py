"""nvidia-smi / lspci parsers on the real H200 captures and on synthesized A10 / A100 / H100 inputs.

The a10/, a100/, h100/ fixtures under tests/fixtures/synth/ are SYNTHESIZED from NVIDIA's specifications
(see their README); only tests/fixtures/nvidia-smi/h200/ is a real capture.
"""

from pathlib import Path

import pytest
from triton_fleet import nvidia_smi as ns

FIX = Path(__file__).resolve().parent.parent / "fixtures"
H200 = FIX / "nvidia-smi" / "h200"
SYNTH = FIX / "synth"


def read(p):
    return Path(p).read_text()


def test_query_fields_are_valid_for_driver_580():
    """Every field gpu_facts asks for is listed by the real `nvidia-smi --help-query-gpu` of driver 580."""
    help_text = read(FIX / "nvidia-smi" / "nvidia-smi-help-query-gpu.txt")
    for f in ns.QUERY_FIELDS:
        assert f'"{f}"' in help_text, f


def test_real_h200_csv():
    rows = ns.parse_query_gpu_csv(read(H200 / "nvidia-smi-query-gpu.csv"))
    assert len(rows) == 1
    r = rows[0]
    assert r["name"] == "NVIDIA H200" and r["memory.total"] == "143771" and r["compute_cap"] == "9.0"
    assert r["mig.mode.current"] == "Disabled" and r["persistence_mode"] == "Enabled"


def test_real_h200_xml():
    x = ns.parse_query_xml(read(H200 / "nvidia-smi-q.xml"))
    assert (x["driver_version"], x["cuda_version"], x["attached_gpus"]) == ("580.159.04", "13.0", 1)
    g = x["gpus"][0]
    assert g["pci_bus_id"] == "00000000:00:06.0" and g["memory_mib"] == 143771
    assert g["pci_device_id"] == "233510DE" and g["ecc_mode"] == "Enabled" and g["mig_mode"] == "Disabled"
    assert g["uuid"] == "GPU-3190a514-9a5c-3254-d6ef-4a810cbfc82d"


def test_real_h200_topo_single_gpu_no_nvlink():
    t = ns.parse_topo(read(H200 / "nvidia-smi-topo.txt"))
    assert t["gpus"] == ["GPU0"] and t["links"] == {} and t["nvlink"] is False


def test_real_h200_facts():
    f = ns.facts_from_nvidia_smi(read(H200 / "nvidia-smi-query-gpu.csv"), read(H200 / "nvidia-smi-q.xml"),
                                 read(H200 / "nvidia-smi-topo.txt"))
    assert (f["driver_version"], f["cuda_version"], f["count"], f["source"]) == ("580.159.04", "13.0", 1,
                                                                                   "nvidia-smi")
    g = f["gpus"][0]
    assert g == {"index": 0, "name": "NVIDIA H200", "sku": "h200", "uuid": "GPU-3190a514-9a5c-3254-d6ef-4a810cbfc82d",
                 "memory_bytes": 143771 * 1024 * 1024, "compute_capability": "9.0", "mig_mode": "disabled",
                 "persistence_mode": "enabled", "ecc_mode": "enabled", "pci_bus_id": "00000000:00:06.0"}
    assert f["nvlink"] is False and f["nvswitch"] is False


@pytest.mark.parametrize("d,sku,count,nvlink,nvswitch,cc", [
    ("a10", "a10", 2, False, False, "8.6"),
    ("a100", "a100-80gb-sxm", 4, True, True, "8.0"),
    ("h100", "h100-sxm", 8, True, True, "9.0"),
])
def test_synthesized_hosts(d, sku, count, *, nvlink, nvswitch, cc):
    p = SYNTH / d
    f = ns.facts_from_nvidia_smi(read(p / "nvidia-smi-query-gpu.csv"), read(p / "nvidia-smi-q.xml"),
                                 read(p / "nvidia-smi-topo.txt"), read(p / "lspci-nn.txt"))
    assert f["count"] == count and {g["sku"] for g in f["gpus"]} == {sku}
    assert [g["index"] for g in f["gpus"]] == list(range(count))
    assert f["nvlink"] is nvlink and f["nvswitch"] is nvswitch
    assert {g["compute_capability"] for g in f["gpus"]} == {cc}
    if nvlink:
        assert len(f["nvlink_links"]) == count * (count - 1) and all(v.startswith("NV") for v in f["nvlink_links"].values())
    else:
        assert set(f["nvlink_links"].values()) <= {"PHB", "SYS"}


def test_a10_mig_not_supported_is_none():
    f = ns.facts_from_nvidia_smi(read(SYNTH / "a10" / "nvidia-smi-query-gpu.csv"))
    assert all(g["mig_mode"] is None for g in f["gpus"])


@pytest.mark.parametrize("d,sku,count,switch", [("a10", "a10", 2, False), ("a100", "a100-80gb-sxm", 4, False),
                                                 ("h100", "h100-sxm", 8, True)])
def test_lspci_fallback(d, sku, count, switch):
    f = ns.facts_from_lspci(read(SYNTH / d / "lspci-nn.txt"))
    assert f["source"] == "lspci" and f["count"] == count and f["driver_version"] is None
    assert {g["sku"] for g in f["gpus"]} == {sku}
    assert f["gpus"][0]["pci_bus_id"] == "00000000:17:00.0"
    assert f["gpus"][0]["memory_bytes"] > 0 and f["nvswitch"] is switch


def test_lspci_ignores_other_vendors_and_audio():
    text = ("00:02.0 VGA compatible controller [0300]: Intel Corporation UHD [8086:9bc8]\n"
            "01:00.1 Audio device [0403]: NVIDIA Corporation GA102 High Definition Audio [10de:1aef] (rev a1)\n"
            "0000:c1:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H200 SXM 141GB] [10de:2335] (rev a1)\n")
    f = ns.facts_from_lspci(text)
    assert f["count"] == 1 and f["gpus"][0]["sku"] == "h200" and f["gpus"][0]["pci_bus_id"] == "00000000:C1:00.0"


def test_bad_outputs_raise():
    with pytest.raises(ns.GpuFactsError, match="values where"):
        ns.parse_query_gpu_csv("0, GPU-x, NVIDIA A10\n")
    with pytest.raises(ns.GpuFactsError, match="valid XML"):
        ns.parse_query_xml("<nvidia_smi_log>")
    with pytest.raises(ns.GpuFactsError, match="matrix header"):
        ns.parse_topo("nothing here")


def fake_runner(files):
    """run(argv) serving fixture files; None rc for binaries that are 'missing'."""
    def run(argv):
        key = " ".join(argv[1:2]) if argv[0].endswith("nvidia-smi") else "lspci"
        key = {"--query-gpu=" + ",".join(ns.QUERY_FIELDS): "csv"}.get(key, key)
        if argv[0].endswith("nvidia-smi") and "nvidia-smi" not in files:
            return None, "", "not found"
        name = {"csv": "csv", "-q": "xml", "topo": "topo", "lspci": "lspci"}[key]
        if name not in files:
            return 1, "", "failed"
        return 0, files[name], ""
    return run


def test_collect_prefers_nvidia_smi():
    files = {"nvidia-smi": True, "csv": read(H200 / "nvidia-smi-query-gpu.csv"), "xml": read(H200 / "nvidia-smi-q.xml"),
             "topo": read(H200 / "nvidia-smi-topo.txt")}
    f = ns.collect(fake_runner(files))
    assert f["source"] == "nvidia-smi" and f["gpus"][0]["sku"] == "h200" and f["unknown_skus"] == []


def test_collect_falls_back_to_lspci_and_fails_without_gpu():
    f = ns.collect(fake_runner({"lspci": read(SYNTH / "a10" / "lspci-nn.txt")}))
    assert f["source"] == "lspci" and f["count"] == 2 and any("nvidia-smi not found" in n for n in f["notes"])
    with pytest.raises(ns.GpuFactsError) as e:
        ns.collect(fake_runner({"lspci": "00:00.0 Host bridge [0600]: Intel Corporation X [8086:09a2]\n"}))
    assert "no NVIDIA GPU found" in str(e.value) and "triton_fleet_device: cpu" in str(e.value)
    f = ns.collect(fake_runner({}), allow_none=True)
    assert f["count"] == 0 and f["gpus"] == [] and f["source"] == "none"
