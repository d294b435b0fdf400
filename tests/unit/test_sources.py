"""Mirror variables (triton_fleet_mirrors) -> the role variables each host's roles read, and the preflight table."""

from pathlib import Path

import pytest
import yaml
from triton_fleet import sources
from triton_fleet.sources import SourcesError, mirror_image, resolve, split_image, validate

ROOT = Path(__file__).resolve().parents[2]
GPU_ROLES = ("nvidia_driver", "container_runtime", "dcgm_exporter", "triton_server", "trtllm_engine", "model_artifacts")
PROFILE = {"image": {"ref": "nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3"}}
SITE = {
    "registries": {"nvcr.io": "harbor.example.com/nvcr/"},
    "apt": {
        "cuda": "https://mirror.example.com/cuda/repos/",
        "docker": "https://mirror.example.com/docker/linux",
        "nvidia_container_toolkit": {"url": "https://mirror.example.com/nct/stable/deb/$(ARCH)",
                                     "key_url": "https://mirror.example.com/nct/gpgkey"},
        "grafana": "https://mirror.example.com/grafana",
    },
    "python_index": "https://pypi.example.com/simple/",
    "model": {"type": "http", "url": "https://artifacts.example.com/models"},
}


def test_nothing_set_is_upstream_everywhere():
    r = resolve(None, profile=PROFILE, roles=GPU_ROLES + ("grafana", "openai_api"))
    v = r["values"]
    for var, upstream in sources.UPSTREAM.items():
        if var in v:
            assert v[var] == upstream, var
    assert v["triton_server_image"] == v["trtllm_engine_image"] == PROFILE["image"]["ref"]
    assert {row["origin"] for row in r["rows"]} == {"upstream"}


def test_a_site_mirror_reaches_every_role_variable():
    v = resolve(SITE, profile=PROFILE, roles=GPU_ROLES + ("grafana", "openai_api"))["values"]
    assert v["triton_server_image"] == "harbor.example.com/nvcr/nvidia/tritonserver:26.07-trtllm-python-py3"
    assert v["trtllm_engine_image"] == v["triton_server_image"]
    assert v["dcgm_exporter_image"] == "harbor.example.com/nvcr/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless"
    assert v["container_runtime_gpu_check_image"] == "harbor.example.com/nvcr/nvidia/cuda:13.0.0-base-ubuntu24.04"
    assert v["nvidia_driver_cuda_repo_base_url"] == "https://mirror.example.com/cuda/repos"
    assert v["nvidia_driver_cuda_repo_key_url"] == ""          # the role derives it from the repository
    assert v["container_runtime_nvidia_repo_url"].endswith("/stable/deb/$(ARCH)")
    assert v["container_runtime_nvidia_repo_key_url"] == "https://mirror.example.com/nct/gpgkey"
    assert v["grafana_apt_key_url"] == "https://mirror.example.com/grafana/gpg-full.key"
    assert v["openai_api_pip_index_url"] == "https://pypi.example.com/simple"
    assert (v["model_artifacts_source_type"], v["model_artifacts_http_url"]) == \
        ("http", "https://artifacts.example.com/models")


def test_the_inventory_role_variable_wins_and_says_so():
    r = resolve(SITE, explicit={"dcgm_exporter_image": "local/dcgm:1", "grafana_apt_repo_uri": None},
                profile=PROFILE, roles=("dcgm_exporter", "grafana"))
    assert r["values"]["dcgm_exporter_image"] == "local/dcgm:1"
    row = next(x for x in r["rows"] if x["variable"] == "dcgm_exporter_image")
    assert row["origin"] == "inventory (dcgm_exporter_image)"
    assert r["values"]["grafana_apt_repo_uri"] == "https://mirror.example.com/grafana"   # None = not set


def test_per_image_override_beats_the_registry_mirror():
    site = dict(SITE, images={"dcgm_exporter": "harbor.example.com/ops/dcgm-exporter@sha256:" + "a" * 64})
    v = resolve(site, profile=PROFILE, roles=("dcgm_exporter", "triton_server"))["values"]
    assert v["dcgm_exporter_image"].startswith("harbor.example.com/ops/dcgm-exporter@sha256:")
    assert v["triton_server_image"].startswith("harbor.example.com/nvcr/")


def test_an_image_loaded_from_an_archive_keeps_its_name():
    r = resolve(SITE, explicit={"triton_server_image_archive": "/srv/tritonserver.tar"}, profile=PROFILE,
                roles=("triton_server",))
    assert r["values"]["triton_server_image"] == PROFILE["image"]["ref"]
    assert r["rows"][0]["origin"] == "archive /srv/tritonserver.tar"


def test_only_the_roles_a_host_runs():
    r = resolve(SITE, profile=None, roles=("grafana",))
    assert set(r["values"]) == {"grafana_apt_repo_uri", "grafana_apt_key_url"}
    assert resolve(SITE, profile=None, roles=("triton_server",))["values"] == {}   # no profile: no image


@pytest.mark.parametrize("ref, want", [
    ("nvcr.io/nvidia/tritonserver:26.07", ("nvcr.io", "nvidia/tritonserver:26.07")),
    ("ubuntu:24.04", ("docker.io", "library/ubuntu:24.04")),
    ("grafana/grafana:12", ("docker.io", "grafana/grafana:12")),
    ("localhost/x:1", ("localhost", "x:1")),
    ("registry:5000/a/b@sha256:00", ("registry:5000", "a/b@sha256:00")),
])
def test_split_image(ref, want):
    assert split_image(ref) == want


def test_mirror_image_keeps_tag_and_digest_and_leaves_other_registries():
    regs = {"nvcr.io": "harbor.example.com/nvcr", "docker.io": "harbor.example.com/hub"}
    assert mirror_image("nvcr.io/nvidia/x@sha256:ab", regs) == "harbor.example.com/nvcr/nvidia/x@sha256:ab"
    assert mirror_image("ubuntu:24.04", regs) == "harbor.example.com/hub/library/ubuntu:24.04"
    assert mirror_image("quay.io/a/b:1", regs) == "quay.io/a/b:1"


@pytest.mark.parametrize("mirrors, words", [
    ({"registry": {}}, ["unknown key 'registry'", "did you mean registries?"]),
    ({"apt": {"nvidia-container-toolkit": "https://m/x"}}, ["apt: unknown key", "did you mean nvidia_container_toolkit?"]),
    ({"apt": {"nvidia_container_toolkit": "https://m/x"}}, ["give its signing key too", "key_url"]),
    ({"apt": {"cuda": "mirror.example.com/cuda"}}, ["apt.cuda: 'mirror.example.com/cuda' is not an http(s)://"]),
    ({"apt": {"cuda": {"url": "https://m/c", "key": "https://m/k"}}}, ["apt.cuda: unknown key 'key'", "key_url"]),
    ({"registries": {"nvcr.io": "https://harbor.example.com"}}, ["not a registry prefix", "no scheme"]),
    ({"registries": {"https://nvcr.io": "harbor"}}, ["not a registry host"]),
    ({"images": {"tritonserver": "x/y:1"}}, ["did you mean triton?"]),
    ({"images": {"triton": "https://x/y:1"}}, ["not an image reference"]),
    ({"model": {"type": "huggingface"}}, ["model.type: 'huggingface'", "controller, shared, http"]),
    ({"model": {"type": "http", "url": "file:/srv/models"}}, ["model.url", "http(s)://"]),
    ({"model": {"type": "shared", "path": "relative/dir"}}, ["an absolute path"]),
    ({"python_index": "pypi.example.com"}, ["python_index: 'pypi.example.com'"]),
    ("harbor.example.com", ["must be a mapping"]),
])
def test_bad_mirrors_are_clear_errors(mirrors, words):
    with pytest.raises(SourcesError) as e:
        validate(mirrors)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_role_defaults_fall_back_to_the_same_upstream():
    """Without a preflight (a role's own scenario) each role's default is exactly sources.UPSTREAM's value."""
    seen = set()
    for path in (ROOT / "roles").glob("*/defaults/main.yml"):
        defaults = yaml.safe_load(path.read_text()) or {}
        for var, upstream in sources.UPSTREAM.items():
            if var in defaults:
                seen.add(var)
                want = f"{{{{ triton_fleet_sources.{var} | default({upstream!r}) }}}}"
                assert defaults[var] == want, (path, var, defaults[var], want)
    assert seen == set(sources.UPSTREAM)


def test_table_groups_hosts_with_the_same_sources():
    rows = resolve(SITE, profile=PROFILE, roles=("triton_server",))["rows"]
    lines = sources.format_table({"a10-02": rows, "a10-01": rows, "gw-01": []})
    assert lines[0] == "=== a10-01, a10-02: where each download comes from"
    assert "harbor.example.com/nvcr/nvidia/tritonserver" in lines[1] and "[mirror (registries.nvcr.io)]" in lines[1]
    assert lines[2:] == ["=== gw-01: where each download comes from", "  (nothing to download)"]


@pytest.mark.parametrize("groups, settings, want", [
    (["gpu_nodes", "gpu_a10"], {}, ["nvidia_driver", "container_runtime", "model_artifacts", "trtllm_engine",
                                    "triton_server", "dcgm_exporter"]),
    (["gpu_nodes"], {"triton_fleet_device": "cpu"}, ["container_runtime", "model_artifacts", "trtllm_engine",
                                                     "triton_server"]),
    (["gpu_nodes"], {"nvidia_driver_install": False}, ["container_runtime", "model_artifacts", "trtllm_engine",
                                                        "triton_server", "dcgm_exporter"]),
    (["gateways"], {}, []),
    (["gateways"], {"nginx_gateway_openai_api_enabled": True}, ["openai_api"]),
    (["monitoring"], {"grafana_install": "false"}, []),
])
def test_host_roles(groups, settings, want):
    assert sources.host_roles(groups, settings) == want


def test_distribution_docker_and_cpu_hosts_download_less():
    explicit = {"container_runtime_docker_source": "distribution", "triton_fleet_device": "cpu"}
    v = resolve(SITE, explicit=explicit, profile=PROFILE, roles=("container_runtime",))["values"]
    assert v == {}      # the distribution's docker.io, no NVIDIA toolkit, no GPU check image


def test_roles_by_group_match_the_playbooks():
    """Every role of ROLES_BY_GROUP runs on that group in site.yml's stage playbooks."""
    ran = {}
    for path in (ROOT / "playbooks").glob("*.yml"):
        for play in yaml.safe_load(path.read_text()) or []:
            if not isinstance(play, dict) or "hosts" not in play:
                continue
            names = [r["role"] if isinstance(r, dict) else r for r in play.get("roles", [])]
            names += [t["ansible.builtin.include_role"]["name"] for t in play.get("tasks", [])
                      if isinstance(t, dict) and "ansible.builtin.include_role" in t]
            ran.setdefault(play["hosts"], set()).update(names)
    for group, roles in sources.ROLES_BY_GROUP.items():
        assert set(roles) <= ran[group], (group, set(roles) - ran[group])


def _host(groups, mirrors=None, profile=None, **variables):
    return {"groups": groups, "mirrors": mirrors, "profile": profile,
            "variables": {name: variables.get(name, "") for name in sources.VARIABLES}}


def test_module_resolves_every_host_and_shares_table_blocks():
    import triton_fleet_sources as mod

    hosts = {"a10-01": _host(["gpu_nodes"], SITE, PROFILE), "a10-02": _host(["gpu_nodes"], SITE, PROFILE),
             "mon-01": _host(["monitoring"], SITE)}
    error, result = mod.run({"hosts": hosts, "variables_expected": list(sources.VARIABLES)})
    assert error is None
    assert result["sources"]["a10-01"]["triton_server_image"].startswith("harbor.example.com/nvcr/")
    assert result["table"][0] == "=== a10-01, a10-02: where each download comes from"
    assert any(line.startswith("=== mon-01") for line in result["table"])


def test_module_names_the_host_whose_mirrors_are_wrong_and_changes_nothing():
    import triton_fleet_sources as mod

    hosts = {"a10-01": _host(["gpu_nodes"], {"apt": {"cudaa": "https://m/c"}}, PROFILE), "gw-01": _host(["gateways"])}
    error, _ = mod.run({"hosts": hosts, "variables_expected": list(sources.VARIABLES)})
    assert error.startswith("a10-01: triton_fleet_mirrors.apt: unknown key 'cudaa' (did you mean cuda?)")
    assert error.endswith("Nothing was changed.")


def test_module_refuses_a_playbook_that_passes_too_few_variables():
    import triton_fleet_sources as mod

    error, _ = mod.run({"hosts": {}, "variables_expected": list(sources.VARIABLES)[1:]})
    assert "wrong variable list" in error and sources.VARIABLES[0] in error


def test_preflight_passes_exactly_the_variables_the_resolver_reads():
    plays = yaml.safe_load((ROOT / "playbooks" / "preflight.yml").read_text())
    names = next(p["vars"]["triton_fleet_source_variables"] for p in plays if "triton_fleet_source_variables" in
                 p.get("vars", {}))
    assert sorted(names) == sorted(sources.VARIABLES)
