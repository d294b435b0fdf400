"""GPU catalog: the facts the planner needs about each NVIDIA data-center GPU.

Sources (per field):
- memory_mib: the total that `nvidia-smi --query-gpu=memory.total` reports for the board (what the driver
  exposes, smaller than the marketing "GB"). H200: the real capture in tests/fixtures/nvidia-smi/h200/
  (143771 MiB). Others: commonly reported nvidia-smi totals for the SKU (A10 23028, A100-40GB 40960,
  A100-80GB 81920, H100 80GB 81559, H100 NVL 95830, L4 23034, L40S 46068, B200 183359); verify with
  gpu_facts on the real host, which always wins over this table.
- bandwidth_gbs: peak memory bandwidth, GB/s, from NVIDIA's product data sheets (A10, A10G, L4, L40S,
  A100 PCIe/SXM 40/80 GB, H100 PCIe/SXM/NVL, H200 SXM, B200 HGX).
- compute_capability: developer.nvidia.com/cuda-gpus (A100 8.0, A10/A10G 8.6, L4/L40S 8.9, H100/H200 9.0,
  B200 10.0); H200 confirmed by the capture (compute_cap 9.0).
- fp8: FP8 tensor cores, compute capability >= 8.9 (TRT-LLM docs/source/reference/support-matrix.md,
  reference/trtllm-triton.md §1 and §3). fp4 (NVFP4): Blackwell only (same sources).
- nvlink / nvswitch: data sheets. PCIe boards of A100/H100 take an optional NVLink bridge between pairs
  ("bridge"); SXM boards sit on an NVSwitch baseboard (HGX).
- pci_device_ids: vendor 0x10de device ids from the PCI ID Repository (pci-ids.ucw.cz); H200 0x2335 is
  confirmed by the capture (pci_device_id 233510DE). They identify a GPU from `lspci -nn` before a driver
  is installed.
"""

MIB = 1024 * 1024
GIB = 1024 * MIB
GB = 1000 ** 3

NVIDIA_PCI_VENDOR = "10de"

# key -> facts. `names` are the product names nvidia-smi prints (matched case-insensitively).
GPUS = {
    "a10": {
        "name": "NVIDIA A10", "names": ["NVIDIA A10"], "arch": "Ampere", "form": "PCIe",
        "marketing_memory": "24 GB", "memory_mib": 23028, "bandwidth_gbs": 600,
        "compute_capability": "8.6", "fp8": False, "fp4": False, "nvlink": "none", "nvswitch": False,
        "pci_device_ids": ["2236"],
    },
    "a10g": {
        "name": "NVIDIA A10G", "names": ["NVIDIA A10G"], "arch": "Ampere", "form": "PCIe (AWS)",
        "marketing_memory": "24 GB", "memory_mib": 23028, "bandwidth_gbs": 600,
        "compute_capability": "8.6", "fp8": False, "fp4": False, "nvlink": "none", "nvswitch": False,
        "pci_device_ids": ["2237"],
    },
    "l4": {
        "name": "NVIDIA L4", "names": ["NVIDIA L4"], "arch": "Ada", "form": "PCIe",
        "marketing_memory": "24 GB", "memory_mib": 23034, "bandwidth_gbs": 300,
        "compute_capability": "8.9", "fp8": True, "fp4": False, "nvlink": "none", "nvswitch": False,
        "pci_device_ids": ["27b8"],
    },
    "l40s": {
        "name": "NVIDIA L40S", "names": ["NVIDIA L40S"], "arch": "Ada", "form": "PCIe",
        "marketing_memory": "48 GB", "memory_mib": 46068, "bandwidth_gbs": 864,
        "compute_capability": "8.9", "fp8": True, "fp4": False, "nvlink": "none", "nvswitch": False,
        "pci_device_ids": ["26b9"],
    },
    "a100-40gb-pcie": {
        "name": "NVIDIA A100-PCIE-40GB", "names": ["NVIDIA A100-PCIE-40GB"], "arch": "Ampere",
        "form": "PCIe", "marketing_memory": "40 GB", "memory_mib": 40960, "bandwidth_gbs": 1555,
        "compute_capability": "8.0", "fp8": False, "fp4": False, "nvlink": "bridge", "nvswitch": False,
        "pci_device_ids": ["20f1"],
    },
    "a100-40gb-sxm": {
        "name": "NVIDIA A100-SXM4-40GB", "names": ["NVIDIA A100-SXM4-40GB"], "arch": "Ampere",
        "form": "SXM4", "marketing_memory": "40 GB", "memory_mib": 40960, "bandwidth_gbs": 1555,
        "compute_capability": "8.0", "fp8": False, "fp4": False, "nvlink": "nvswitch", "nvswitch": True,
        "pci_device_ids": ["20b0"],
    },
    "a100-80gb-pcie": {
        "name": "NVIDIA A100 80GB PCIe", "names": ["NVIDIA A100 80GB PCIe", "NVIDIA A100-PCIE-80GB"],
        "arch": "Ampere", "form": "PCIe", "marketing_memory": "80 GB", "memory_mib": 81920,
        "bandwidth_gbs": 1935, "compute_capability": "8.0", "fp8": False, "fp4": False,
        "nvlink": "bridge", "nvswitch": False, "pci_device_ids": ["20b5"],
    },
    "a100-80gb-sxm": {
        "name": "NVIDIA A100-SXM4-80GB", "names": ["NVIDIA A100-SXM4-80GB"], "arch": "Ampere",
        "form": "SXM4", "marketing_memory": "80 GB", "memory_mib": 81920, "bandwidth_gbs": 2039,
        "compute_capability": "8.0", "fp8": False, "fp4": False, "nvlink": "nvswitch", "nvswitch": True,
        "pci_device_ids": ["20b2"],
    },
    "h100-pcie": {
        "name": "NVIDIA H100 PCIe", "names": ["NVIDIA H100 PCIe"], "arch": "Hopper", "form": "PCIe",
        "marketing_memory": "80 GB", "memory_mib": 81559, "bandwidth_gbs": 2000,
        "compute_capability": "9.0", "fp8": True, "fp4": False, "nvlink": "bridge", "nvswitch": False,
        "pci_device_ids": ["2331"],
    },
    "h100-sxm": {
        "name": "NVIDIA H100 80GB HBM3", "names": ["NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM5 80GB"],
        "arch": "Hopper", "form": "SXM5", "marketing_memory": "80 GB", "memory_mib": 81559,
        "bandwidth_gbs": 3350, "compute_capability": "9.0", "fp8": True, "fp4": False,
        "nvlink": "nvswitch", "nvswitch": True, "pci_device_ids": ["2330"],
    },
    "h100-nvl": {
        "name": "NVIDIA H100 NVL", "names": ["NVIDIA H100 NVL"], "arch": "Hopper", "form": "PCIe (NVL)",
        "marketing_memory": "94 GB", "memory_mib": 95830, "bandwidth_gbs": 3900,
        "compute_capability": "9.0", "fp8": True, "fp4": False, "nvlink": "bridge", "nvswitch": False,
        "pci_device_ids": ["2321"],
    },
    "h200": {
        "name": "NVIDIA H200", "names": ["NVIDIA H200"], "arch": "Hopper", "form": "SXM5",
        "marketing_memory": "141 GB", "memory_mib": 143771, "bandwidth_gbs": 4800,
        "compute_capability": "9.0", "fp8": True, "fp4": False, "nvlink": "nvswitch", "nvswitch": True,
        "pci_device_ids": ["2335"],
    },
    "b200": {
        "name": "NVIDIA B200", "names": ["NVIDIA B200"], "arch": "Blackwell", "form": "SXM6",
        "marketing_memory": "180 GB", "memory_mib": 183359, "bandwidth_gbs": 8000,
        "compute_capability": "10.0", "fp8": True, "fp4": True, "nvlink": "nvswitch", "nvswitch": True,
        "pci_device_ids": ["2901"],
    },
}

# Short names an operator may type; each resolves to exactly one SKU (the common data-center form).
ALIASES = {
    "a100": "a100-80gb-sxm",
    "a100-80gb": "a100-80gb-sxm",
    "a100-40gb": "a100-40gb-sxm",
    "h100": "h100-sxm",
    "h100-80gb": "h100-sxm",
    "h100-sxm5": "h100-sxm",
    "h200-141gb": "h200",
}

# Larger single GPUs, smallest first: what the planner suggests when a request needs a bigger board.
UPGRADE_ORDER = ["l40s", "a100-80gb-sxm", "h100-sxm", "h200", "b200"]


class UnknownGPU(ValueError):
    pass


def resolve(key):
    """The catalog key for an operator-typed GPU name (case and '_' / ' ' tolerant)."""
    k = str(key).strip().lower().replace("_", "-").replace(" ", "-")
    if k.startswith("nvidia-"):
        k = k[len("nvidia-"):]
    k = ALIASES.get(k, k)
    if k not in GPUS:
        raise UnknownGPU(
            "unknown GPU {!r}; known: {} (aliases: {}). Run tools/plan --list-gpus.".format(key, ", ".join(GPUS), ", ".join("{}={}".format(*a) for a in sorted(ALIASES.items())))
        )
    return k


def get(key):
    return dict(GPUS[resolve(key)], sku=resolve(key))


def memory_bytes(key):
    return GPUS[resolve(key)]["memory_mib"] * MIB


def compute_capability_tuple(cc):
    if cc is None:
        return (0, 0)
    major, _, minor = str(cc).partition(".")
    return (int(major), int(minor or 0))


def has_fp8(cc):
    return compute_capability_tuple(cc) >= (8, 9)


def has_fp4(cc):
    return compute_capability_tuple(cc) >= (10, 0)


def identify(name=None, pci_device_id=None, memory_mib=None):
    """The catalog key of a GPU from what a host reports, or None when unknown.

    name: nvidia-smi product name; pci_device_id: 4 hex digits ("2335") or nvidia-smi's "233510DE"
    form; memory_mib: nvidia-smi memory.total, used to split boards that share a name pattern.
    """
    if name:
        n = name.strip().lower()
        for key, gpu in GPUS.items():
            if any(n == x.lower() for x in gpu["names"]):
                return key
    if pci_device_id:
        dev = str(pci_device_id).strip().lower()
        if dev.startswith("0x"):
            dev = dev[2:]
        if len(dev) == 8 and dev.endswith(NVIDIA_PCI_VENDOR):  # nvidia-smi -q: DDDDVVVV
            dev = dev[:4]
        for key, gpu in GPUS.items():
            if dev in gpu["pci_device_ids"]:
                return key
    if name:
        n = name.lower()
        mem = memory_mib or 0
        if "a100" in n:
            size = "80gb" if mem > 60000 or "80gb" in n else "40gb"
            form = "pcie" if "pcie" in n else "sxm"
            return f"a100-{size}-{form}"
        if "h100" in n:
            if "nvl" in n:
                return "h100-nvl"
            return "h100-pcie" if "pcie" in n else "h100-sxm"
        if "h200" in n:
            return "h200"
        if "b200" in n:
            return "b200"
        if "l40s" in n:
            return "l40s"
    return None


def rows():
    """Catalog rows for display."""
    out = []
    for key, g in GPUS.items():
        out.append({
            "sku": key, "name": g["name"], "arch": g["arch"], "memory": g["marketing_memory"],
            "usable_gib": round(g["memory_mib"] / 1024.0, 1), "bandwidth_gbs": g["bandwidth_gbs"],
            "cc": g["compute_capability"], "fp8": g["fp8"], "fp4": g["fp4"], "nvlink": g["nvlink"],
            "pci_ids": ",".join(g["pci_device_ids"]),
        })
    return out
