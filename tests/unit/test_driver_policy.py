"""Tests for module_utils/triton_fleet/driver_policy.py and the role module that wraps it."""

import csv
import json
from pathlib import Path

import pytest
from triton_fleet import driver_policy as dp

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "tests" / "fixtures" / "nvidia-smi" / "h200"
IMAGE = "nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3"


def h200_facts():
    """gpu_facts-shaped dict built from the real H200 --query-gpu capture (not invented)."""
    row = next(csv.reader((H200 / "nvidia-smi-query-gpu.csv").read_text().splitlines(), skipinitialspace=True))
    gpu = {"index": int(row[0]), "uuid": row[1], "name": row[2], "pci_bus_id": row[3],
           "memory_total_mib": int(row[4]), "driver_version": row[11], "compute_capability": row[12],
           "persistence_mode": row[13]}
    return {"driver_version": row[11], "cuda_version": "13.0", "count": 1, "gpus": [gpu], "nvswitch": False}


# ------------------------------------------------------------------ branches and images

@pytest.mark.parametrize("value,expected", [("580", 580), (580, 580), ("R580", 580), ("580.159.04", 580),
                                            ("r575", 575), (" 590 ", 590)])
def test_parse_branch(value, expected):
    assert dp.parse_branch(value) == expected


@pytest.mark.parametrize("value", ["", "58", "latest", None, True, 5.8, "580.x"])
def test_parse_branch_rejects(value):
    with pytest.raises(dp.PolicyError, match="branch"):
        dp.parse_branch(value)


def test_parse_driver_version_from_capture():
    version = h200_facts()["driver_version"]
    assert dp.parse_driver_version(version) == (580, 159, 4)
    assert dp.parse_driver_version("580.65") == (580, 65, 0)
    with pytest.raises(dp.PolicyError):
        dp.parse_driver_version("5.8")


@pytest.mark.parametrize("ref,release,minimum", [
    (IMAGE, (26, 7), 580),
    ("nvcr.io/nvidia/tritonserver:25.11-trtllm-python-py3", (25, 11), 580),
    ("nvcr.io/nvidia/tritonserver:25.10-trtllm-python-py3", (25, 10), 575),
    ("nvcr.io/nvidia/tritonserver:25.06-py3", (25, 6), 575),
    ("nvcr.io/nvidia/tritonserver:25.05-trtllm-python-py3", (25, 5), 525),
    ("registry.local:5000/nvidia/tritonserver:26.03-trtllm-python-py3", (26, 3), 580),
])
def test_image_requirement(ref, release, minimum):
    assert dp.triton_release(ref) == release
    assert dp.image_requirement(ref)["min_branch"] == minimum


@pytest.mark.parametrize("ref", ["triton-fleet/tritonserver-lab:3f2a9c", "", None,
                                 "nvcr.io/nvidia/tritonserver:latest", "nvcr.io/nvidia/tritonserver:24.01-py3"])
def test_image_requirement_unknown(ref):
    assert dp.image_requirement(ref) is None
    assert dp.check_branch_for_image(470, ref) is None


def test_explicit_min_branch_wins():
    assert dp.image_requirement("triton-fleet/tritonserver-lab:abc", 580)["min_branch"] == 580
    with pytest.raises(dp.PolicyError):
        dp.check_branch_for_image(575, "triton-fleet/tritonserver-lab:abc", "580")


def test_branch_too_old_names_both_versions():
    with pytest.raises(dp.PolicyError) as err:
        dp.check_branch_for_image("570", IMAGE)
    msg = str(err.value)
    assert "R570" in msg and "R580" in msg and IMAGE in msg and "nvidia_driver_branch" in msg


def test_branch_new_enough():
    assert dp.check_branch_for_image(580, IMAGE)["min_branch"] == 580
    assert dp.check_branch_for_image("590", IMAGE)["min_branch"] == 580


# ------------------------------------------------------------------ kernel module flavour

@pytest.mark.parametrize("value,cc", [("9.0", (9, 0)), ("8.6", (8, 6)), ("90", (9, 0)), ("sm_100", (10, 0)),
                                      (9.0, (9, 0)), ("Hopper", (9, 0)), ("ampere", (8, 0)), ("12.0", (12, 0))])
def test_parse_compute_capability(value, cc):
    assert dp.parse_compute_capability(value) == cc


def test_h200_capture_is_hopper_and_gets_open_modules():
    facts = h200_facts()
    assert dp.architecture_of(dp.parse_compute_capability(facts["gpus"][0]["compute_capability"])) == "Hopper"
    out = dp.choose_kernel_modules("auto", facts["gpus"])
    assert out["flavour"] == "open" and "Hopper" in out["reason"]


@pytest.mark.parametrize("cc,flavour", [("8.0", "proprietary"), ("8.6", "proprietary"), ("8.9", "proprietary"),
                                        ("7.5", "proprietary"), ("9.0", "open"), ("10.0", "open"), ("12.0", "open")])
def test_auto_flavour_by_architecture(cc, flavour):
    assert dp.choose_kernel_modules("auto", [{"compute_capability": cc}])["flavour"] == flavour


def test_auto_uses_hint_when_no_gpu_reports():
    assert dp.choose_kernel_modules("auto", [], hint="9.0")["flavour"] == "open"
    assert dp.choose_kernel_modules("auto", [{"name": "x"}], hint="8.0")["flavour"] == "proprietary"
    # the GPUs' own capability wins over the hint
    assert dp.choose_kernel_modules("auto", [{"compute_capability": "9.0"}], hint="8.0")["flavour"] == "open"


def test_auto_without_any_architecture_fails():
    with pytest.raises(dp.PolicyError, match="nvidia_driver_compute_capability"):
        dp.choose_kernel_modules("auto", [], hint="")


def test_architecture_name_from_nvidia_smi_q():
    assert dp.choose_kernel_modules("auto", [{"architecture": "Blackwell"}])["flavour"] == "open"


def test_proprietary_refused_on_blackwell():
    with pytest.raises(dp.PolicyError, match="Blackwell"):
        dp.choose_kernel_modules("proprietary", [{"compute_capability": "10.0"}])


def test_open_refused_on_volta_and_mixed():
    with pytest.raises(dp.PolicyError, match="proprietary"):
        dp.choose_kernel_modules("open", [{"compute_capability": "7.0"}])
    with pytest.raises(dp.PolicyError):
        dp.choose_kernel_modules("auto", [{"compute_capability": "9.0"}, {"compute_capability": "7.0"}])


def test_open_refused_before_r515():
    with pytest.raises(dp.PolicyError, match="R515"):
        dp.choose_kernel_modules("open", [{"compute_capability": "9.0"}], branch=470)


def test_overrides():
    assert dp.choose_kernel_modules("open", [{"compute_capability": "8.0"}])["flavour"] == "open"
    assert dp.choose_kernel_modules("proprietary", [{"compute_capability": "9.0"}])["flavour"] == "proprietary"
    with pytest.raises(dp.PolicyError, match="auto, open or proprietary"):
        dp.choose_kernel_modules("closed", [])


# ------------------------------------------------------------------ packages

def test_packages_debian12_cuda_open_and_proprietary():
    open_ = dp.driver_packages("Debian", "Debian", "12", "cuda", 580, flavour="open", kernel="6.1.0-28-amd64", fabric_manager=True)
    assert open_["driver"] == ["nvidia-driver-580-open"]
    assert open_["headers"] == ["linux-headers-6.1.0-28-amd64", "dkms"]
    assert open_["fabric_manager"] == ["nvidia-fabricmanager-580"]
    assert open_["apt_pin"] == "580.*"
    prop = dp.driver_packages("Debian", "Debian", "12", "cuda", "590", flavour="proprietary", kernel="6.1.0-28-amd64")
    assert prop["driver"] == ["cuda-drivers-590"] and prop["fabric_manager"] == [] and prop["apt_pin"] == "590.*"


def test_packages_exact_version_pins_every_package():
    pk = dp.driver_packages("Debian", "Ubuntu", "24.04", "cuda", 580, flavour="open", kernel="6.8.0-51-generic",
                            version="580.159.04", fabric_manager=True)
    assert pk["driver"] == ["nvidia-driver-580-open=580.159.04*"]
    assert pk["fabric_manager"] == ["nvidia-fabricmanager-580=580.159.04*"]
    assert pk["apt_pin"] == "580.159.04*"
    with pytest.raises(dp.PolicyError, match="not on branch"):
        dp.driver_packages("Debian", "Ubuntu", "24.04", "cuda", 580, flavour="open", kernel="k", version="575.57.08")


def test_packages_ubuntu_distribution_server_flavour():
    pk = dp.driver_packages("Debian", "Ubuntu", "22.04", "distribution", 580, flavour="open", kernel="5.15.0-1-generic")
    assert pk["driver"] == ["nvidia-driver-580-server-open"]
    pk = dp.driver_packages("Debian", "Ubuntu", "22.04", "distribution", 580, flavour="proprietary", kernel="5.15.0-1-generic")
    assert pk["driver"] == ["nvidia-driver-580-server"]


def test_packages_debian_distribution_only_has_535():
    with pytest.raises(dp.PolicyError, match="R535"):
        dp.driver_packages("Debian", "Debian", "12", "distribution", 580, flavour="open", kernel="6.1.0-28-amd64")
    pk = dp.driver_packages("Debian", "Debian", "12", "distribution", 535, flavour="open", kernel="6.1.0-28-amd64")
    assert pk["driver"] == ["nvidia-driver", "nvidia-open-kernel-dkms"]


@pytest.mark.parametrize("family, dist, major", [("RedHat", "RedHat", "9"), ("Suse", "SLES", "15")])
def test_packages_only_for_the_debian_family(family, dist, major):
    """apt only: no role implements RHEL (or any other family), so there is no dnf plan to make."""
    for source in ("cuda", "distribution"):
        with pytest.raises(dp.PolicyError) as err:
            dp.driver_packages(family, dist, major, source, 580, flavour="open", kernel="5.14.0")
        assert str(err.value) == (
            f"OS family {family!r} ({dist} {major}): nvidia_driver installs with apt on the Debian family only; "
            "roles/nvidia_driver/meta/main.yml lists the releases it implements (docs/compatibility.md)")
    pk = dp.driver_packages("Debian", "Debian", "12", "cuda", 580, flavour="open", kernel="6.1.0-28-amd64")
    assert set(pk) == {"driver", "headers", "fabric_manager", "apt_pin", "extra"}


def test_packages_bad_input():
    with pytest.raises(dp.PolicyError, match="kernel"):
        dp.driver_packages("Debian", "Debian", "12", "cuda", 580, flavour="open", kernel="")
    with pytest.raises(dp.PolicyError, match="cuda or distribution"):
        dp.driver_packages("Debian", "Debian", "12", "runfile", 580, flavour="open", kernel="6.1")


# ------------------------------------------------------------------ containers, kernel steps, reboot

@pytest.mark.parametrize("vtype,role,override,expected", [
    ("docker", "guest", None, True), ("container", "guest", None, True), ("lxc", "guest", None, True),
    ("podman", "guest", "", True), ("kvm", "guest", None, False), ("", "", None, False),
    ("docker", "host", None, False),  # a docker *host* is bare metal
    ("kvm", "guest", True, True), ("docker", "guest", False, False),
])
def test_is_container(vtype, role, override, expected):
    assert dp.is_container(vtype, role, override) is expected


def test_is_container_bad_override():
    with pytest.raises(dp.PolicyError):
        dp.is_container("docker", "guest", "yes")


def test_kernel_steps_message():
    out = dp.kernel_steps(True, "docker")
    assert out["allowed"] is False and "container" in out["message"] and "docker" in out["message"]
    assert dp.kernel_steps(False)["allowed"] is True


def test_reboot_fresh_install_loads_module():
    out = dp.reboot_decision(packages_changed=True)
    assert out["action"] == "load" and out["needed"] is False


def test_reboot_fresh_install_in_container_does_nothing():
    assert dp.reboot_decision(packages_changed=True, in_container=True)["action"] == "none"


def test_reboot_nothing_changed():
    assert dp.reboot_decision()["action"] == "none"
    assert dp.reboot_decision(loaded_version="580.159.04", installed_version="580.159.04")["action"] == "none"


def test_reboot_on_version_mismatch_message():
    out = dp.reboot_decision(smi_output="Failed to initialize NVML: Driver/library version mismatch\n"
                                        "NVML library version: 580.159.04")
    assert out["action"] == "reboot" and "mismatch" in out["reasons"][0]


def test_reboot_on_upgrade_with_old_module_loaded():
    out = dp.reboot_decision(packages_changed=True, loaded_version="580.95.05\n", installed_version="580.159.04")
    assert out["action"] == "reboot" and "580.95.05" in out["message"]


def test_reboot_when_nouveau_loaded_and_blacklisted():
    out = dp.reboot_decision(blacklist_changed=True, nouveau_loaded=True)
    assert out["action"] == "reboot" and "nouveau" in out["message"]
    assert dp.reboot_decision(blacklist_changed=True)["action"] == "none"


def test_reboot_skipped_in_container_or_by_switch():
    c = dp.reboot_decision(blacklist_changed=True, nouveau_loaded=True, in_container=True)
    assert c["action"] == "skip" and c["needed"] is True and "container" in c["message"]
    s = dp.reboot_decision(blacklist_changed=True, nouveau_loaded=True, reboot_allowed=False)
    assert s["action"] == "skip" and "nvidia_driver_reboot is false" in s["message"]


# ------------------------------------------------------------------ fabric manager and verification

def test_fabric_manager_auto_from_facts():
    assert dp.fabric_manager_needed("auto", h200_facts())["needed"] is False  # PCIe/NVL H200: no NVSwitch
    assert dp.fabric_manager_needed("auto", {"nvswitch": True})["needed"] is True
    assert dp.fabric_manager_needed("auto", {"nvswitch": {"count": 4}})["needed"] is True
    assert dp.fabric_manager_needed("auto", {"nvswitch": []})["needed"] is False
    assert dp.fabric_manager_needed("always", {})["needed"] is True
    assert dp.fabric_manager_needed("never", {"nvswitch": True})["needed"] is False
    with pytest.raises(dp.PolicyError):
        dp.fabric_manager_needed("yes", {})


def test_verify_h200_capture_passes():
    assert dp.verify(h200_facts(), expected_count=1, branch=580, version="580.159.04") == []


def test_verify_reports_every_difference():
    facts = h200_facts()
    facts["gpus"][0]["persistence_mode"] = "Disabled"
    diffs = dp.verify(facts, expected_count=8, branch=590, version="590.44.01",
                      fabric_manager_required=True, fabric_manager_active=False)
    text = "\n".join(diffs)
    assert "expected 8 GPU(s), gpu_facts sees 1" in text
    assert "not on the pinned branch R590" in text
    assert "not the pinned version 590.44.01" in text
    assert "persistence mode is off on GPU(s) 0" in text
    assert "nvidia-fabricmanager is not active" in text
    assert len(diffs) == 5


def test_verify_no_gpu_and_no_driver():
    diffs = dp.verify({"count": 0, "gpus": []}, branch=580)
    assert any("no NVIDIA GPU" in d for d in diffs) and any("no driver version" in d for d in diffs)


def test_verify_fabric_manager_version_must_match():
    diffs = dp.verify(h200_facts(), 1, 580, fabric_manager_required=True, fabric_manager_active=True,
                      fabric_manager_version="580.95.05-1")
    assert diffs == ["Fabric Manager 580.95.05-1 does not match driver 580.159.04: they must be the same version"]


# ------------------------------------------------------------------ the whole plan

BASE = {"os_family": "Debian", "distribution": "Debian", "major_version": "12", "kernel": "6.1.0-28-amd64",
            "source": "cuda", "branch": "580", "image_ref": IMAGE}


def test_plan_h200():
    out = dp.plan(**BASE, gpu_facts=h200_facts(), virtualization_type="kvm", virtualization_role="guest")
    assert out["flavour"] == "open" and out["packages"]["driver"] == ["nvidia-driver-580-open"]
    assert out["image_requirement"]["min_branch"] == 580 and out["kernel_steps"] is True
    assert out["fabric_manager"] is False


def test_plan_old_branch_fails_before_anything_else():
    with pytest.raises(dp.PolicyError, match="R575 is older than R580"):
        dp.plan(**{**BASE, "branch": "575"}, gpu_facts={"count": 0})


def test_plan_no_gpu_fails_unless_expected():
    with pytest.raises(dp.PolicyError, match="nvidia_driver_require_gpu"):
        dp.plan(**BASE, gpu_facts={"count": 0, "gpus": []}, compute_capability_hint="9.0")
    out = dp.plan(**BASE, gpu_facts={"count": 0, "gpus": []}, compute_capability_hint="9.0", require_gpu=False,
                  virtualization_type="docker", virtualization_role="guest")
    assert out["flavour"] == "open" and out["in_container"] is True and out["kernel_steps"] is False


def test_plan_verify_only_checks_installed_driver_against_image():
    facts = h200_facts()
    facts["driver_version"] = "570.124.06"
    with pytest.raises(dp.PolicyError, match="R570"):
        dp.plan(**{**BASE, "branch": "580"}, gpu_facts=facts, install=False)
    out = dp.plan(**BASE, gpu_facts=h200_facts(), install=False)
    assert out["packages"] == {} and out["gpu_count"] == 1


# ------------------------------------------------------------------ the role's module wrapper



def _run_module(monkeypatch, args):
    import nvidia_driver_policy as mod  # roles/nvidia_driver/library is on sys.path (tests/conftest.py)
    from ansible.module_utils import basic
    from ansible.module_utils.testing import patch_module_args

    result = {}

    def exit_json(self, **kw):
        result.update(kw)
        raise SystemExit(0)

    def fail_json(self, **kw):
        result.update(kw, failed=True)
        raise SystemExit(1)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
    with patch_module_args(args), pytest.raises(SystemExit):
        mod.main()
    return result


def test_module_plan_and_failure(monkeypatch):
    args = {"mode": "plan", "os_family": "Debian", "distribution": "Debian", "major_version": "12",
            "kernel": "6.1.0-28-amd64", "source": "cuda", "branch": "580", "image_ref": IMAGE,
            "gpu_facts": h200_facts()}
    out = _run_module(monkeypatch, args)
    assert out["changed"] is False and out["plan"]["packages"]["driver"] == ["nvidia-driver-580-open"]
    bad = _run_module(monkeypatch, {**args, "branch": "570"})
    assert bad["failed"] is True and "R570" in bad["msg"] and "R580" in bad["msg"]


def test_module_verify_and_reboot(monkeypatch):
    ok = _run_module(monkeypatch, {"mode": "verify", "gpu_facts": h200_facts(), "expected_count": 1,
                                   "branch": "580"})
    assert ok["differences"] == [] and "failed" not in ok
    bad = _run_module(monkeypatch, {"mode": "verify", "gpu_facts": h200_facts(), "expected_count": 2,
                                    "branch": "580"})
    assert bad["failed"] is True and "expected 2 GPU(s)" in bad["msg"]
    rb = _run_module(monkeypatch, {"mode": "reboot", "packages_changed": True, "loaded_version": "580.95.05",
                                   "installed_version": "580.159.04"})
    assert rb["decision"]["action"] == "reboot"
    assert json.dumps(rb)  # JSON-serialisable result


def test_arch_key_from_pci_catalog():
    assert dp.choose_kernel_modules("auto", [{"arch": "Ada"}])["flavour"] == "proprietary"
    assert dp.choose_kernel_modules("auto", [{"arch": "Hopper"}])["flavour"] == "open"


def test_agrees_with_image_matrix_when_present():
    image_matrix = pytest.importorskip("triton_fleet.image_matrix")
    for (first, last), facts in image_matrix.MATRIX:
        for rel in (first, last):
            ref = f"nvcr.io/nvidia/tritonserver:{rel}-trtllm-python-py3"
            assert dp.image_requirement(ref)["min_branch"] == facts["min_driver_branch"], ref
