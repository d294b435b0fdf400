"""NVIDIA driver policy: the decisions the `nvidia_driver` role makes, as pure functions.

- which driver branch an image needs, and whether the pinned branch satisfies it;
- open or proprietary kernel modules, from the GPUs' compute capability / architecture;
- the package names per OS family, distribution, source, branch and flavour;
- whether kernel-level steps (module load, initramfs, reboot) can run at all (not in a container);
- whether a reboot is needed after a change, and why;
- whether Fabric Manager is needed (NVSwitch systems);
- what differs between the GPU facts and what the inventory expects (verification).

No Ansible import here: `roles/nvidia_driver/library/nvidia_driver_policy.py` wraps these functions and
`tests/unit/test_driver_policy.py` tests them. Every error is a `PolicyError` whose message says what is
wrong and what to do.

Sources (restated with more detail in docs/sources.md, "NVIDIA driver policy"):
- Triton image -> CUDA -> minimum driver: triton-inference-server/server docs/introduction/compatibility.md
  and https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html (CUDA 13.x needs
  R580+, CUDA 12.x R525+; 25.06-25.10 release notes say R575+).
- Open kernel modules: supported on Turing (sm_75) and newer only; required on Blackwell and Grace Hopper;
  the default from R560 (https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/, "Kernel
  Modules"). First release with open modules: R515.
"""

import re

__all__ = [
    "PolicyError",
    "architecture_of",
    "check_branch_for_image",
    "choose_kernel_modules",
    "driver_packages",
    "fabric_manager_needed",
    "image_requirement",
    "is_container",
    "kernel_steps",
    "parse_branch",
    "parse_compute_capability",
    "parse_driver_version",
    "plan",
    "reboot_decision",
    "triton_release",
    "verify",
]


class PolicyError(ValueError):
    """Bad input or an impossible combination; the message says what to change."""


# --------------------------------------------------------------------------- versions

_BRANCH_RE = re.compile(r"^\s*[rR]?(\d{3})(?:\.\d+(?:\.\d+)?)?\s*$")
_VERSION_RE = re.compile(r"^\s*(\d{3})\.(\d{1,3})(?:\.(\d{1,3}))?\s*$")


def parse_branch(value):
    """'580', 580, 'R580' or a full version '580.159.04' -> 580."""
    if isinstance(value, bool):
        raise PolicyError(f"driver branch {value!r} is not a branch: use a number such as 580")
    if isinstance(value, int):
        text = str(value)
    elif isinstance(value, str):
        text = value
    else:
        raise PolicyError(f"driver branch {value!r} is not a branch: use a number such as 580")
    m = _BRANCH_RE.match(text)
    if not m:
        raise PolicyError(
            f"driver branch {value!r} is not a branch: use the three-digit branch number (e.g. 580) "
            "or a full driver version (e.g. 580.159.04)")
    return int(m.group(1))


def parse_driver_version(value):
    """'580.159.04' -> (580, 159, 4); '580.65' -> (580, 65, 0)."""
    if not isinstance(value, str):
        raise PolicyError(f"driver version {value!r} is not a version: use e.g. 580.159.04")
    m = _VERSION_RE.match(value)
    if not m:
        raise PolicyError(f"driver version {value!r} is not a version: use e.g. 580.159.04")
    return (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))


# --------------------------------------------------------------------------- image requirement

# (first Triton release yy.mm, CUDA in the trtllm image, minimum driver branch, why)
_IMAGE_MATRIX = (
    ((25, 11), "13.0/13.1", 580, "CUDA 13.x needs R580 or newer"),
    ((25, 6), "12.9", 575, "the 25.06-25.10 release notes require R575 or newer"),
    ((24, 7), "12.4-12.8", 525, "CUDA 12.x minor-version compatibility needs R525 or newer"),
)

_TRITON_TAG_RE = re.compile(r"(?:^|:)(\d{2})\.(\d{2})(?:-|$)")


def triton_release(image_ref):
    """'nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3' -> (26, 7); None when not a yy.mm tag."""
    if not isinstance(image_ref, str) or ":" not in image_ref:
        return None
    tag = image_ref.rsplit(":", 1)[1]
    m = _TRITON_TAG_RE.search(tag)
    if not m or "tritonserver" not in image_ref:
        return None
    return (int(m.group(1)), int(m.group(2)))


def image_requirement(image_ref, explicit_min_branch=None):
    """The minimum driver branch for an image: {'min_branch', 'cuda', 'source'} or None when unknown.

    `explicit_min_branch` (the profile's image.min_driver_branch, or an operator override) wins."""
    if explicit_min_branch not in (None, "", 0):
        return {"min_branch": parse_branch(explicit_min_branch), "cuda": None,
                "source": "set explicitly (profile image.min_driver_branch or nvidia_driver_image_min_branch)"}
    release = triton_release(image_ref)
    if release is None:
        return None
    for first, cuda, branch, why in _IMAGE_MATRIX:
        if release >= first:
            return {"min_branch": branch, "cuda": cuda,
                    "source": f"Triton {release[0]:02d}.{release[1]:02d}: CUDA {cuda}; {why}"}
    return None


def check_branch_for_image(branch, image_ref, explicit_min_branch=None):
    """Raise when the pinned branch is older than the image needs; return the requirement (or None)."""
    pinned = parse_branch(branch)
    req = image_requirement(image_ref, explicit_min_branch)
    if req is None:
        return None
    if pinned < req["min_branch"]:
        raise PolicyError(
            f"driver branch R{pinned} is older than R{req['min_branch']}, the minimum for image "
            f"{image_ref or '(not set)'} ({req['source']}). Set nvidia_driver_branch to "
            f"{req['min_branch']} or newer, or pin an image that supports R{pinned}. Nothing was changed.")
    return req


# --------------------------------------------------------------------------- GPU architecture

# compute capability major.minor -> architecture name (NVIDIA CUDA GPUs table)
_ARCH_BY_CC = (
    ((12, 0), "Blackwell"),
    ((10, 0), "Blackwell"),
    ((9, 0), "Hopper"),
    ((8, 9), "Ada Lovelace"),
    ((8, 0), "Ampere"),
    ((7, 5), "Turing"),
    ((7, 0), "Volta"),
    ((6, 0), "Pascal"),
    ((5, 0), "Maxwell"),
    ((3, 0), "Kepler"),
)
# nvidia-smi -q "Product Architecture" -> the lowest compute capability of that architecture
_CC_BY_ARCH = {
    "kepler": (3, 0), "maxwell": (5, 0), "pascal": (6, 0), "volta": (7, 0), "turing": (7, 5),
    "ampere": (8, 0), "ada lovelace": (8, 9), "ada": (8, 9), "hopper": (9, 0), "blackwell": (10, 0),
}
_CC_RE = re.compile(r"^\s*(?:sm_?)?(\d{1,2})\.?(\d)\s*$")
OPEN_MIN_CC = (7, 5)        # Turing: the oldest architecture the open modules support
OPEN_AUTO_CC = (9, 0)       # Hopper: `auto` picks open from here (the rule)
OPEN_REQUIRED_CC = (10, 0)  # Blackwell: proprietary modules are not supported
OPEN_MIN_BRANCH = 515


def parse_compute_capability(value):
    """'9.0', '90', 'sm_90', 9.0, 'Hopper' -> (9, 0)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = f"{float(value):.1f}"
    if not isinstance(value, str) or not value.strip():
        raise PolicyError(f"compute capability {value!r} is not one: use e.g. '9.0' (H100/H200) or '8.0' (A100)")
    arch = _CC_BY_ARCH.get(value.strip().lower())
    if arch:
        return arch
    m = _CC_RE.match(value)
    if not m:
        raise PolicyError(f"compute capability {value!r} is not one: use e.g. '9.0' (H100/H200) or '8.0' (A100)")
    return (int(m.group(1)), int(m.group(2)))


def architecture_of(cc):
    for first, name in _ARCH_BY_CC:
        if cc >= first:
            return name
    return "pre-Kepler"


def _gpu_ccs(gpus):
    """Compute capabilities of the GPUs in gpu_facts' `gpus` list (compute_capability or architecture)."""
    out = []
    for i, gpu in enumerate(gpus or []):
        if not isinstance(gpu, dict):
            raise PolicyError(f"gpus[{i}] is not a dict: pass triton_fleet_gpus.gpus from the gpu_facts module")
        raw = (gpu.get("compute_capability") or gpu.get("compute_cap") or gpu.get("architecture")
               or gpu.get("arch"))
        if raw in (None, ""):
            continue
        out.append(parse_compute_capability(raw))
    return out


def choose_kernel_modules(requested, gpus=None, hint=None, branch=None):
    """Return {'flavour': 'open'|'proprietary', 'reason': str}.

    requested: auto | open | proprietary. gpus: gpu_facts' gpus list. hint: a compute capability or
    architecture used when no GPU reports one (the driver is not installed yet; the profile's
    gpu.compute_capability)."""
    if requested not in ("auto", "open", "proprietary"):
        raise PolicyError(f"nvidia_driver_kernel_modules={requested!r}: use auto, open or proprietary")
    ccs = _gpu_ccs(gpus)
    source = "the GPUs found"
    if not ccs and hint not in (None, ""):
        ccs = [parse_compute_capability(hint)]
        source = "the compute capability hint (nvidia_driver_compute_capability)"
    names = sorted({f"{architecture_of(c)} {c[0]}.{c[1]}" for c in ccs})
    oldest = min(ccs) if ccs else None
    newest = max(ccs) if ccs else None
    br = parse_branch(branch) if branch not in (None, "") else None

    if requested == "open" or (requested == "auto" and newest is not None and newest >= OPEN_AUTO_CC):
        if oldest is not None and oldest < OPEN_MIN_CC:
            raise PolicyError(
                f"open kernel modules do not support {', '.join(names)} (Turing 7.5 or newer only). "
                "Set nvidia_driver_kernel_modules: proprietary.")
        if br is not None and br < OPEN_MIN_BRANCH:
            raise PolicyError(f"open kernel modules start with R{OPEN_MIN_BRANCH}; branch R{br} has none. "
                              "Raise nvidia_driver_branch or use proprietary modules.")
        if requested == "open":
            return {"flavour": "open", "reason": "nvidia_driver_kernel_modules is open"}
        return {"flavour": "open",
                "reason": f"auto: {', '.join(names)} from {source} is Hopper or newer, so open modules"}
    if requested == "proprietary":
        if newest is not None and newest >= OPEN_REQUIRED_CC:
            raise PolicyError(
                f"proprietary kernel modules do not support {', '.join(names)}: Blackwell needs the open "
                "modules. Set nvidia_driver_kernel_modules: open (or auto).")
        return {"flavour": "proprietary", "reason": "nvidia_driver_kernel_modules is proprietary"}
    # auto, older than Hopper or unknown
    if newest is None:
        raise PolicyError(
            "nvidia_driver_kernel_modules is auto but no GPU architecture is known (no GPU reports a compute "
            "capability yet). Set nvidia_driver_compute_capability (e.g. '9.0'), or set "
            "nvidia_driver_kernel_modules to open or proprietary.")
    return {"flavour": "proprietary",
            "reason": f"auto: {', '.join(names)} from {source} is older than Hopper, so proprietary modules"}


# --------------------------------------------------------------------------- packages

# Branch shipped by distributions that carry the driver themselves (None: every branch has packages).
_DISTRIBUTION_BRANCHES = {("Debian", "12"): 535}


def driver_packages(os_family, distribution, major_version, source, branch, *, flavour, kernel,
                    version="", fabric_manager=False):
    """Package plan for one host: {'driver', 'headers', 'fabric_manager', 'apt_pin', 'extra'}.

    source: cuda (NVIDIA's CUDA repository) | distribution (the distribution's own packages). The Debian
    family only (apt): the releases the role implements are those roles/nvidia_driver/meta/main.yml lists,
    and its tasks/platform.yml refuses any other before this plan is made."""
    br = parse_branch(branch)
    if version:
        v = parse_driver_version(version)
        if v[0] != br:
            raise PolicyError(f"nvidia_driver_version {version} is not on branch R{br}: "
                              f"set nvidia_driver_branch to {v[0]} or pick a {br}.x version")
    if flavour not in ("open", "proprietary"):
        raise PolicyError(f"kernel module flavour {flavour!r}: use open or proprietary")
    if source not in ("cuda", "distribution"):
        raise PolicyError(f"nvidia_driver_source={source!r}: use cuda or distribution")
    if not kernel:
        raise PolicyError("the running kernel release is unknown: gather facts (ansible_facts['kernel'])")
    dist = str(distribution)
    major = str(major_version)
    open_ = flavour == "open"
    if os_family != "Debian":
        raise PolicyError(f"OS family {os_family!r} ({dist} {major}): nvidia_driver installs with apt on the Debian "
                          "family only; roles/nvidia_driver/meta/main.yml lists the releases it implements "
                          "(docs/compatibility.md)")
    out = {"driver": [], "headers": [], "fabric_manager": [], "apt_pin": "", "extra": []}

    out["headers"] = [f"linux-headers-{kernel}", "dkms"]
    if source == "cuda":
        out["driver"] = [f"nvidia-driver-{br}-open" if open_ else f"cuda-drivers-{br}"]
        out["fabric_manager"] = [f"nvidia-fabricmanager-{br}"] if fabric_manager else []
        # apt preferences: every NVIDIA driver package of this branch (or exact version) wins
        out["apt_pin"] = f"{version}*" if version else f"{br}.*"
    elif dist == "Ubuntu":
        out["driver"] = [f"nvidia-driver-{br}-server-open" if open_ else f"nvidia-driver-{br}-server"]
        out["fabric_manager"] = [f"nvidia-fabricmanager-{br}"] if fabric_manager else []
        out["apt_pin"] = f"{version}*" if version else f"{br}.*"
    else:
        shipped = _DISTRIBUTION_BRANCHES.get((dist, major))
        if shipped is None:
            raise PolicyError(f"nvidia_driver_source=distribution is not supported on {dist} {major}: "
                              "use nvidia_driver_source: cuda")
        if shipped != br:
            raise PolicyError(
                f"{dist} {major} ships driver branch R{shipped} only, but nvidia_driver_branch is {br}: "
                f"use nvidia_driver_source: cuda for R{br}, or set nvidia_driver_branch: {shipped} "
                "(if the image allows it)")
        out["driver"] = ["nvidia-driver", "nvidia-open-kernel-dkms" if open_ else "nvidia-kernel-dkms"]
        if fabric_manager:
            raise PolicyError(f"{dist} {major} has no Fabric Manager package: use nvidia_driver_source: cuda "
                              "on NVSwitch systems")
    if version:
        out["driver"] = [f"{p}={version}*" if source == "cuda" or dist == "Ubuntu" else p for p in out["driver"]]
        out["fabric_manager"] = [f"{p}={version}*" for p in out["fabric_manager"]]
    return out


# --------------------------------------------------------------------------- containers / kernel steps

_CONTAINER_TYPES = {"docker", "container", "containerd", "podman", "lxc", "lxc-libvirt", "openvz",
                    "systemd-nspawn", "wsl"}


def is_container(virtualization_type, virtualization_role="", override=None):
    """True when kernel modules cannot be managed here. override (bool) wins over the facts."""
    if override is not None and override != "":
        if isinstance(override, bool):
            return override
        raise PolicyError(f"nvidia_driver_in_container={override!r}: use true, false or leave it empty (auto)")
    vt = (virtualization_type or "").strip().lower()
    return vt in _CONTAINER_TYPES and (virtualization_role or "guest").strip().lower() == "guest"


def kernel_steps(in_container, virtualization_type=""):
    """Which kernel-level steps may run: {'allowed': bool, 'message': str}."""
    if in_container:
        return {"allowed": False,
                "message": (f"running in a container (virtualization_type={virtualization_type or 'set by variable'}): "
                            "kernel modules cannot be loaded here, so module load, initramfs rebuild and "
                            "reboot are skipped. Run the role on the bare-metal host (or VM) to do them.")}
    return {"allowed": True, "message": "kernel module load, initramfs rebuild and reboot are managed"}


_MISMATCH_RE = re.compile(r"driver/library version mismatch", re.IGNORECASE)


def reboot_decision(*, packages_changed=False, blacklist_changed=False, nouveau_loaded=False,
                    loaded_version="", installed_version="", smi_output="", in_container=False,
                    reboot_allowed=True):
    """Decide what to do after the install steps.

    Returns {'action': 'reboot'|'load'|'none'|'skip', 'needed': bool, 'reasons': [...], 'message': str}.
    'load' = the module can be loaded with modprobe (nothing old is loaded); 'skip' = a reboot is needed
    but may not happen here (container, or nvidia_driver_reboot false)."""
    reasons = []
    if nouveau_loaded and (blacklist_changed or packages_changed):
        reasons.append("nouveau is loaded and was blacklisted: it can only be unloaded by a reboot")
    if _MISMATCH_RE.search(smi_output or ""):
        reasons.append("nvidia-smi reports 'Driver/library version mismatch': the loaded kernel module is "
                       "older than the installed libraries")
    if loaded_version and installed_version and loaded_version.strip() != installed_version.strip():
        reasons.append(f"the loaded kernel module is {loaded_version.strip()} but {installed_version.strip()} "
                       "is installed")
    if packages_changed and loaded_version and not installed_version and not reasons:
        reasons.append(f"driver packages changed while module {loaded_version.strip()} is loaded")
    if not reasons:
        if packages_changed and not loaded_version and not in_container:
            return {"action": "load", "needed": False, "reasons": [],
                    "message": "new driver installed and no NVIDIA module loaded: loading it with modprobe"}
        return {"action": "none", "needed": False, "reasons": [], "message": "no reboot needed"}
    why = "; ".join(reasons)
    if in_container:
        return {"action": "skip", "needed": True, "reasons": reasons,
                "message": f"a reboot would be needed ({why}) but this is a container: skipped"}
    if not reboot_allowed:
        return {"action": "skip", "needed": True, "reasons": reasons,
                "message": f"a reboot is needed ({why}) but nvidia_driver_reboot is false: reboot this host "
                           "before it serves (one host at a time)"}
    return {"action": "reboot", "needed": True, "reasons": reasons, "message": f"rebooting: {why}"}


# --------------------------------------------------------------------------- Fabric Manager

def fabric_manager_needed(mode, gpu_facts=None):
    """mode: auto | always | never -> {'needed': bool, 'reason': str}. auto: NVSwitch seen in the facts."""
    if mode not in ("auto", "always", "never"):
        raise PolicyError(f"nvidia_driver_fabric_manager={mode!r}: use auto, always or never")
    if mode == "always":
        return {"needed": True, "reason": "nvidia_driver_fabric_manager is always"}
    if mode == "never":
        return {"needed": False, "reason": "nvidia_driver_fabric_manager is never"}
    nvswitch = (gpu_facts or {}).get("nvswitch")
    if isinstance(nvswitch, dict):
        present = bool(nvswitch.get("present") or nvswitch.get("count"))
    elif isinstance(nvswitch, (list, tuple)):
        present = len(nvswitch) > 0
    else:
        present = bool(nvswitch)
    if present:
        return {"needed": True, "reason": "auto: NVSwitch found (HGX), Fabric Manager must run"}
    return {"needed": False, "reason": "auto: no NVSwitch found, Fabric Manager not needed"}


# --------------------------------------------------------------------------- verification

def _persistence_on(gpu):
    value = gpu.get("persistence_mode")
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("enabled", "on", "true", "1")


def verify(gpu_facts, expected_count=None, branch=None, *, version="", persistence=True,
           fabric_manager_required=False, fabric_manager_active=False, fabric_manager_version=""):
    """Differences between the facts and the expectation; an empty list means the node is good."""
    facts = gpu_facts or {}
    diffs = []
    count = facts.get("count")
    if count is None:
        count = len(facts.get("gpus") or [])
    if expected_count not in (None, "", -1) and int(expected_count) != int(count):
        diffs.append(f"expected {int(expected_count)} GPU(s), gpu_facts sees {int(count)}")
    elif expected_count in (None, "", -1) and int(count) == 0:
        diffs.append("gpu_facts sees no NVIDIA GPU")
    driver = facts.get("driver_version") or ""
    if branch not in (None, ""):
        br = parse_branch(branch)
        if not driver:
            diffs.append(f"no driver version reported (nvidia-smi missing or failing); expected branch R{br}")
        elif parse_driver_version(driver)[0] != br:
            diffs.append(f"driver {driver} is not on the pinned branch R{br}")
    if version and driver and driver != version:
        diffs.append(f"driver {driver} is not the pinned version {version}")
    if persistence:
        off = [str(g.get("index", i)) for i, g in enumerate(facts.get("gpus") or []) if not _persistence_on(g)]
        if off:
            diffs.append(f"persistence mode is off on GPU(s) {', '.join(off)} (nvidia-persistenced not running?)")
    if fabric_manager_required:
        if not fabric_manager_active:
            diffs.append("this is an NVSwitch system but nvidia-fabricmanager is not active")
        if fabric_manager_version and driver and not fabric_manager_version.startswith(driver):
            diffs.append(f"Fabric Manager {fabric_manager_version} does not match driver {driver}: "
                         "they must be the same version")
    return diffs


# --------------------------------------------------------------------------- the whole plan

def plan(*, os_family, distribution, major_version, kernel, source, branch, version="", kernel_modules="auto",
         compute_capability_hint="", image_ref="", image_min_branch=None, gpu_facts=None, require_gpu=True,
         fabric_manager="auto", virtualization_type="", virtualization_role="", in_container=None,
         install=True):
    """Everything the role needs before it changes anything. Raises PolicyError on bad input."""
    facts = gpu_facts or {}
    gpus = facts.get("gpus") or []
    count = facts.get("count")
    if count is None:
        count = len(gpus)
    br = parse_branch(branch)
    if version and parse_driver_version(version)[0] != br:
        raise PolicyError(f"nvidia_driver_version {version} is not on branch R{br}: "
                          f"set nvidia_driver_branch to {parse_driver_version(version)[0]}")
    requirement = check_branch_for_image(br, image_ref, image_min_branch)
    if require_gpu and int(count) == 0:
        raise PolicyError(
            "no NVIDIA GPU found on this host (gpu_facts count is 0). If that is expected (a pre-imaged "
            "host whose GPU appears after the driver, a test), set nvidia_driver_require_gpu: false; "
            "otherwise check the PCI devices (lspci -nn | grep 10de) and the inventory group.")
    container = is_container(virtualization_type, virtualization_role, in_container)
    steps = kernel_steps(container, virtualization_type)
    fm = fabric_manager_needed(fabric_manager, facts)
    result = {"branch": br, "version": version or "", "image_requirement": requirement, "in_container": container,
              "kernel_steps": steps["allowed"], "kernel_message": steps["message"],
              "fabric_manager": fm["needed"], "fabric_manager_reason": fm["reason"], "gpu_count": int(count)}
    if not install:
        installed = facts.get("driver_version") or ""
        if installed:
            check_branch_for_image(parse_driver_version(installed)[0], image_ref, image_min_branch)
        result.update({"flavour": "", "flavour_reason": "nvidia_driver_install is false: nothing installed",
                       "packages": {}})
        return result
    flavour = choose_kernel_modules(kernel_modules, gpus, compute_capability_hint, br)
    pk = driver_packages(os_family, distribution, major_version, source, br, flavour=flavour["flavour"],
                         kernel=kernel, version=version, fabric_manager=fm["needed"])
    result.update({"flavour": flavour["flavour"], "flavour_reason": flavour["reason"], "packages": pk})
    return result
