"""Parsers for nvidia-smi and lspci output, and the GPU facts collected from them (no Ansible import).

Formats checked against the real H200 captures in tests/fixtures/nvidia-smi/h200/ (driver 580.159.04):
`--query-gpu=... --format=csv,noheader,nounits`, `-q -x` (nvsmi_device_v13.dtd), `topo -m`.
`lspci -nn` lines: `17:00.0 3D controller [0302]: NVIDIA Corporation GA102GL [A10] [10de:2236] (rev a1)`.
"""

import re
import xml.etree.ElementTree as ET

from . import gpu_catalog

# The field list of the real capture (tests/fixtures/README.md); gpu_facts queries exactly these.
QUERY_FIELDS = (
    "index", "uuid", "name", "pci.bus_id", "memory.total", "memory.used", "memory.free", "utilization.gpu",
    "temperature.gpu", "power.draw", "power.limit", "driver_version", "compute_cap", "persistence_mode",
    "mig.mode.current", "clocks.max.sm", "clocks.max.memory", "ecc.mode.current",
)
QUERY_ARGS = ["--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader,nounits"]

_NA = {"", "n/a", "[n/a]", "[not supported]", "not supported", "[unknown error]", "[insufficient permissions]"}
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_LSPCI = re.compile(
    r"^(?P<slot>(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(?P<cls>.+?)\s+\[(?P<clsid>[0-9a-fA-F]{4})\]:"
    r"\s+(?P<desc>.*?)\s+\[(?P<vendor>[0-9a-fA-F]{4}):(?P<device>[0-9a-fA-F]{4})\]")


class GpuFactsError(Exception):
    pass


def _val(s):
    s = (s or "").strip()
    return None if s.lower() in _NA else s


def parse_query_gpu_csv(text, fields=QUERY_FIELDS):
    """Rows of `nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits` as dicts (N/A -> None)."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != len(fields):
            raise GpuFactsError(f"nvidia-smi --query-gpu printed {len(parts)} values where {len(fields)} fields "
                                f"were asked: {line!r}")
        rows.append({f: _val(v) for f, v in zip(fields, parts)})
    return rows


def _text(node, path):
    el = node.find(path)
    return _val(el.text) if el is not None and el.text else None


def _mib(s):
    m = re.match(r"^\s*(\d+)\s*MiB", s or "")
    return int(m.group(1)) if m else None


def parse_query_xml(text):
    """`nvidia-smi -q -x`: driver, CUDA and per-GPU facts."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise GpuFactsError(f"nvidia-smi -q -x did not print valid XML ({exc})") from None
    gpus = []
    for g in root.findall("gpu"):
        gpus.append({
            "pci_bus_id": g.get("id") or _text(g, "pci/pci_bus_id"),
            "name": _text(g, "product_name"),
            "architecture": _text(g, "product_architecture"),
            "uuid": _text(g, "uuid"),
            "persistence_mode": _text(g, "persistence_mode"),
            "mig_mode": _text(g, "mig_mode/current_mig"),
            "ecc_mode": _text(g, "ecc_mode/current_ecc"),
            "memory_mib": _mib(_text(g, "fb_memory_usage/total")),
            "pci_device_id": _text(g, "pci/pci_device_id"),
            "fabric_state": _text(g, "fabric/state"),
            "minor_number": _text(g, "minor_number"),
        })
    return {"driver_version": _text(root, "driver_version"), "cuda_version": _text(root, "cuda_version"),
            "attached_gpus": int(_text(root, "attached_gpus") or len(gpus)), "gpus": gpus}


def parse_topo(text):
    """`nvidia-smi topo -m`: the GPU-to-GPU link matrix.

    Returns {"gpus": ["GPU0", ...], "links": {"GPU0-GPU1": "NV12", ...}, "nvlink": any NV# link,
    "all_nvlink": every GPU pair joined by NVLink}.
    """
    lines = [_ANSI.sub("", ln).rstrip() for ln in text.splitlines()]
    header = next((ln for ln in lines if re.match(r"^\s+GPU0\b", ln)), None)
    if header is None:
        raise GpuFactsError("nvidia-smi topo -m printed no GPU matrix header")
    cols = header.split("\t") if "\t" in header else header.split()
    cols = [c.strip() for c in cols if c.strip()]
    gpu_cols = [c for c in cols if re.match(r"^GPU\d+$", c)]
    links = {}
    for ln in lines:
        m = re.match(r"^(GPU\d+)\s", ln)
        if not m:
            continue
        cells = [c.strip() for c in re.split(r"\s+", ln.strip())]
        row = cells[0]
        for j, col in enumerate(gpu_cols):
            if 1 + j < len(cells) and col != row:
                links[f"{row}-{col}"] = cells[1 + j]
    nv = [v for v in links.values() if v.startswith("NV")]
    n = len(gpu_cols)
    return {"gpus": gpu_cols, "links": links, "nvlink": bool(nv),
            "all_nvlink": n > 1 and len(nv) == n * (n - 1)}


def parse_lspci(text):
    """NVIDIA devices of `lspci -nn`: GPUs (display / 3D controllers) and NVSwitches."""
    gpus, switches = [], []
    for line in text.splitlines():
        m = _LSPCI.match(line.strip())
        if not m or m.group("vendor").lower() != gpu_catalog.NVIDIA_PCI_VENDOR:
            continue
        dev = {"slot": m.group("slot"), "class_id": m.group("clsid").lower(), "description": m.group("desc"),
               "device_id": m.group("device").lower()}
        if dev["class_id"] in ("0300", "0302"):
            gpus.append(dev)
        elif "nvswitch" in dev["description"].lower():
            switches.append(dev)
    return {"gpus": gpus, "nvswitches": switches}


def _bus_id(slot):
    """lspci slot (`17:00.0` or `0000:17:00.0`) -> nvidia-smi form `00000000:17:00.0`."""
    parts = slot.split(":")
    if len(parts) == 2:
        parts = ["0000"] + parts
    return "{:08X}:{}".format(int(parts[0], 16), ":".join(parts[1:]).upper())


def _mode(s):
    if s is None:
        return None
    return s.strip().lower()


def facts_from_nvidia_smi(csv_text, xml_text=None, topo_text=None, lspci_text=None):
    """The `triton_fleet_gpus` facts from nvidia-smi outputs (xml, topo and lspci optional)."""
    rows = parse_query_gpu_csv(csv_text)
    if not rows:
        raise GpuFactsError("nvidia-smi ran but listed no GPU")
    xml = parse_query_xml(xml_text) if xml_text else {"driver_version": None, "cuda_version": None, "gpus": []}
    by_bus = {(g["pci_bus_id"] or "").upper(): g for g in xml["gpus"]}
    gpus = []
    for r in rows:
        x = by_bus.get((r.get("pci.bus_id") or "").upper(), {})
        mem_mib = int(float(r["memory.total"])) if r.get("memory.total") else x.get("memory_mib")
        sku = gpu_catalog.identify(r.get("name"), x.get("pci_device_id"), mem_mib)
        gpus.append({
            "index": int(r["index"]) if r.get("index") is not None else len(gpus),
            "name": r.get("name") or x.get("name"),
            "sku": sku,
            "uuid": r.get("uuid") or x.get("uuid"),
            "memory_bytes": mem_mib * gpu_catalog.MIB if mem_mib else None,
            "compute_capability": r.get("compute_cap"),
            "mig_mode": _mode(r.get("mig.mode.current") or x.get("mig_mode")),
            "persistence_mode": _mode(r.get("persistence_mode") or x.get("persistence_mode")),
            "ecc_mode": _mode(r.get("ecc.mode.current") or x.get("ecc_mode")),
            "pci_bus_id": r.get("pci.bus_id") or x.get("pci_bus_id"),
        })
    topo = parse_topo(topo_text) if topo_text else {"nvlink": False, "all_nvlink": False, "links": {}}
    fabric = any((g.get("fabric_state") or "").lower() not in ("", "n/a", "not supported") for g in xml["gpus"])
    lspci = parse_lspci(lspci_text) if lspci_text else {"nvswitches": []}
    nvswitch = bool(lspci["nvswitches"]) or fabric or (len(gpus) > 2 and topo["all_nvlink"])
    return {
        "driver_version": rows[0].get("driver_version") or xml.get("driver_version"),
        "cuda_version": xml.get("cuda_version"),
        "count": len(gpus),
        "gpus": gpus,
        "nvlink": topo["nvlink"],
        "nvlink_links": topo["links"],
        "nvswitch": nvswitch,
        "source": "nvidia-smi",
    }


def facts_from_lspci(lspci_text):
    """The `triton_fleet_gpus` facts of a host without a working driver, from `lspci -nn`."""
    found = parse_lspci(lspci_text)
    gpus = []
    for i, dev in enumerate(found["gpus"]):
        sku = gpu_catalog.identify(pci_device_id=dev["device_id"])
        cat = gpu_catalog.GPUS.get(sku) if sku else None
        gpus.append({
            "index": i, "name": cat["name"] if cat else dev["description"], "sku": sku, "uuid": None,
            "memory_bytes": cat["memory_mib"] * gpu_catalog.MIB if cat else None,
            "compute_capability": cat["compute_capability"] if cat else None,
            "mig_mode": None, "persistence_mode": None, "ecc_mode": None, "pci_bus_id": _bus_id(dev["slot"]),
            "pci_device_id": dev["device_id"],
        })
    nvswitch = bool(found["nvswitches"])
    return {"driver_version": None, "cuda_version": None, "count": len(gpus), "gpus": gpus,
            "nvlink": nvswitch, "nvlink_links": {}, "nvswitch": nvswitch, "source": "lspci"}


def collect(run, allow_none=False, nvidia_smi="nvidia-smi", lspci="lspci"):
    """GPU facts of this host. `run(argv)` -> (rc, stdout, stderr); rc None when the binary is missing.

    nvidia-smi first; if it is missing or fails (no driver yet), `lspci -nn`. No NVIDIA GPU at all is an
    error unless allow_none, which returns count 0.
    """
    notes = []
    rc, out, err = run([nvidia_smi] + QUERY_ARGS)
    if rc == 0 and out.strip():
        xml_rc, xml_out, _ = run([nvidia_smi, "-q", "-x"])
        topo_rc, topo_out, _ = run([nvidia_smi, "topo", "-m"])
        l_rc, l_out, _ = run([lspci, "-nn"])
        facts = facts_from_nvidia_smi(out, xml_out if xml_rc == 0 else None, topo_out if topo_rc == 0 else None,
                                      l_out if l_rc == 0 else None)
        unknown = sorted({g["name"] for g in facts["gpus"] if not g["sku"]})
        facts["unknown_skus"] = unknown
        return facts
    notes.append("nvidia-smi %s" % ("not found" if rc is None else f"failed (rc {rc}): {(err or out).strip()[:200]}"))
    l_rc, l_out, l_err = run([lspci, "-nn"])
    if l_rc == 0:
        facts = facts_from_lspci(l_out)
        if facts["count"]:
            facts["unknown_skus"] = sorted({g["name"] for g in facts["gpus"] if not g["sku"]})
            facts["notes"] = notes + ["GPUs identified from PCI ids: no driver facts (install the NVIDIA driver)"]
            return facts
        notes.append("lspci -nn lists no NVIDIA (10de) display or 3D controller")
    else:
        notes.append("lspci %s" % ("not found (install pciutils)" if l_rc is None else f"failed (rc {l_rc})"))
    if allow_none:
        return {"driver_version": None, "cuda_version": None, "count": 0, "gpus": [], "nvlink": False,
                "nvlink_links": {}, "nvswitch": False, "source": "none", "notes": notes, "unknown_skus": []}
    raise GpuFactsError(
        "no NVIDIA GPU found on this host ({}). If it should have one, check that the GPU is attached (PCI "
        "passthrough, BIOS) and install pciutils/the driver; if the host serves on CPU set "
        "triton_fleet_device: cpu, or pass allow_none: true".format("; ".join(notes)))
