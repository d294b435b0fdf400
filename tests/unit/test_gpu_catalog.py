"""GPU catalog: identification from nvidia-smi names, PCI ids and aliases; capability flags."""

import pytest
from triton_fleet import gpu_catalog as gc

REQUIRED = ["a10", "a10g", "l4", "l40s", "a100-40gb-pcie", "a100-40gb-sxm", "a100-80gb-pcie", "a100-80gb-sxm",
            "h100-pcie", "h100-sxm", "h100-nvl", "h200", "b200"]


def test_catalog_covers_the_required_skus_with_all_fields():
    for sku in REQUIRED:
        g = gc.GPUS[sku]
        for field in ("memory_mib", "bandwidth_gbs", "compute_capability", "fp8", "fp4", "nvlink", "nvswitch",
                      "pci_device_ids"):
            assert field in g, (sku, field)
        assert g["pci_device_ids"] and all(len(p) == 4 for p in g["pci_device_ids"])


def test_pci_ids_are_unique():
    seen = {}
    for sku, g in gc.GPUS.items():
        for pid in g["pci_device_ids"]:
            assert pid not in seen, (pid, sku, seen.get(pid))
            seen[pid] = sku


def test_fp8_and_fp4_follow_compute_capability():
    for sku, g in gc.GPUS.items():
        assert g["fp8"] == gc.has_fp8(g["compute_capability"]), sku
        assert g["fp4"] == gc.has_fp4(g["compute_capability"]), sku
    assert not gc.has_fp8("8.6") and gc.has_fp8("8.9") and gc.has_fp8("9.0") and not gc.has_fp4("9.0")


@pytest.mark.parametrize("name,pci,mem,sku", [
    ("NVIDIA H200", None, 143771, "h200"),                 # the real capture
    (None, "233510DE", None, "h200"),                     # nvidia-smi -q pci_device_id form
    ("NVIDIA A10", None, 23028, "a10"),
    ("NVIDIA A10G", None, 23028, "a10g"),
    ("NVIDIA A100-SXM4-80GB", None, 81920, "a100-80gb-sxm"),
    ("NVIDIA A100 80GB PCIe", None, 81920, "a100-80gb-pcie"),
    ("NVIDIA H100 80GB HBM3", None, 81559, "h100-sxm"),
    ("NVIDIA H100 NVL", None, 95830, "h100-nvl"),
    (None, "20f1", None, "a100-40gb-pcie"),
    (None, "0x2330", None, "h100-sxm"),
    ("NVIDIA A100-SXM4-64GB-weird", None, 40000, "a100-40gb-sxm"),   # heuristic by name + memory
    ("NVIDIA GeForce RTX 4090", "2684", 24564, None),
])
def test_identify(name, pci, mem, sku):
    assert gc.identify(name, pci, mem) == sku


def test_aliases_and_unknown():
    assert gc.resolve("A100-80GB") == "a100-80gb-sxm"
    assert gc.resolve("h100") == "h100-sxm"
    assert gc.resolve("NVIDIA_H200") == "h200"
    with pytest.raises(gc.UnknownGPU) as e:
        gc.resolve("v100")
    assert "list-gpus" in str(e.value) and "a10" in str(e.value)


def test_memory_bytes_is_the_nvidia_smi_total():
    assert gc.memory_bytes("h200") == 143771 * 1024 * 1024
    assert gc.memory_bytes("a100-80gb-sxm") == 80 * 1024 ** 3
