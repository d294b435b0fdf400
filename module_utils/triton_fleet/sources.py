"""Where every download of a deployment comes from: upstream, a mirror, or what the inventory says.

One variable group, ``triton_fleet_mirrors`` (docs/offline.md), names the site's mirrors:

    registries: {nvcr.io: harbor.example.com/nvcr}          registry host -> mirror prefix (no scheme)
    images: {dcgm_exporter: harbor.example.com/x/dcgm:...}   per-image overrides (full references)
    apt: {cuda: URL, docker: URL, nvidia_container_toolkit: {url, key_url}, grafana: {url, key_url}}
    python_index: URL                                        the index the controller builds wheelhouses from
    model: {type: controller|shared|http, url, path}         where checkpoints come from

``resolve`` turns it, with a host's own role variables (an explicit role variable in the inventory always
wins) and its serving profile, into the role variables the roles read (``values``, set as the host fact
``triton_fleet_sources``) and one row per artefact for the preflight's table (``rows``). Unknown keys and
malformed URLs are errors naming the key and the closest valid one. Pure functions, unit-tested
(tests/unit/test_sources.py); the roles' defaults fall back to ``UPSTREAM`` when no preflight ran
(a role's own Molecule scenario), and a test holds them equal.
"""

import difflib
import re

from ansible.module_utils.parsing.convert_bool import boolean

# role variable -> upstream default (the roles' defaults/main.yml fall back to these exact values)
UPSTREAM = {
    "nvidia_driver_cuda_repo_base_url": "https://developer.download.nvidia.com/compute/cuda/repos",
    "nvidia_driver_cuda_repo_key_url": "",
    "container_runtime_docker_repo_base_url": "https://download.docker.com/linux",
    "container_runtime_docker_repo_key_url": "",
    "container_runtime_nvidia_repo_url": "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)",
    "container_runtime_nvidia_repo_key_url": "https://nvidia.github.io/libnvidia-container/gpgkey",
    "grafana_apt_repo_uri": "https://apt.grafana.com",
    "grafana_apt_key_url": "https://apt.grafana.com/gpg-full.key",
    "container_runtime_gpu_check_image": "nvcr.io/nvidia/cuda:13.0.0-base-ubuntu24.04",
    "dcgm_exporter_image": "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless",
    "openai_api_pip_index_url": "",
    "model_artifacts_source_type": "controller",
    "model_artifacts_http_url": "",
    "model_artifacts_shared_dir": "/mnt/triton-fleet/models",
}

# apt repositories: mirror key -> (role, url variable, key variable, what, where the key is under a mirror:
# "derived" = the role derives it from the repository URL, "required" = it must be given, else a path)
APT = {
    "cuda": ("nvidia_driver", "nvidia_driver_cuda_repo_base_url", "nvidia_driver_cuda_repo_key_url",
             "NVIDIA CUDA repository (driver)", "derived"),
    "docker": ("container_runtime", "container_runtime_docker_repo_base_url", "container_runtime_docker_repo_key_url",
               "Docker's repository (docker-ce)", "derived"),
    "nvidia_container_toolkit": ("container_runtime", "container_runtime_nvidia_repo_url",
                                 "container_runtime_nvidia_repo_key_url", "NVIDIA Container Toolkit repository",
                                 "required"),
    "grafana": ("grafana", "grafana_apt_repo_uri", "grafana_apt_key_url", "Grafana's repository", "/gpg-full.key"),
}

# images: mirror key -> (role, role variable, what); triton and trtllm_build start from the profile's image.ref
IMAGES = {
    "triton": ("triton_server", "triton_server_image", "Triton image (the profile's image.ref)"),
    "trtllm_build": ("trtllm_engine", "trtllm_engine_image", "engine build image (the Triton image)"),
    "dcgm_exporter": ("dcgm_exporter", "dcgm_exporter_image", "DCGM exporter image"),
    "gpu_check": ("container_runtime", "container_runtime_gpu_check_image", "CUDA image of the containers' GPU check"),
}

# Variables resolve() reads from a host besides the ones it sets: an archive means the image is loaded, not
# pulled; the others say which roles a host runs and whether they download anything.
READS = ("triton_server_image_archive", "triton_fleet_device", "nvidia_driver_install", "nvidia_driver_source",
         "container_runtime_docker_source", "container_runtime_nvidia", "grafana_install",
         "nginx_gateway_openai_api_enabled")
# Every variable the preflight passes (its explicit value on the host, or None when unset).
VARIABLES = tuple(sorted(set(UPSTREAM) | {v for _, v, _ in IMAGES.values()} | set(READS)))

# The roles each group runs that download something (site.yml's stages; tests/unit/test_sources.py holds
# this against the playbooks).
ROLES_BY_GROUP = {
    "gpu_nodes": ("nvidia_driver", "container_runtime", "model_artifacts", "trtllm_engine", "triton_server",
                  "dcgm_exporter"),
    "gateways": ("openai_api",),
    "monitoring": ("grafana",),
}


def _true(value, default):
    """An Ansible boolean as the inventory wrote it; None, "" and "auto" give ``default``."""
    if value is None or value == "" or (isinstance(value, str) and value.strip().lower() == "auto"):
        return default
    return boolean(value, strict=False)


def host_roles(groups, settings):
    """The download-relevant roles a host runs, from its groups and its settings (explicit values or None)."""
    roles = []
    for group, names in ROLES_BY_GROUP.items():
        if group in groups:
            roles += [r for r in names if r not in roles]
    gpu = (settings.get("triton_fleet_device") or "gpu") != "cpu"
    skip = set()
    if not gpu:
        skip |= {"nvidia_driver", "dcgm_exporter"}
    if not _true(settings.get("nvidia_driver_install"), True) or (settings.get("nvidia_driver_source") or "cuda") != "cuda":
        skip.add("nvidia_driver")
    if not _true(settings.get("grafana_install"), True):
        skip.add("grafana")
    if not _true(settings.get("nginx_gateway_openai_api_enabled"), False):
        skip.add("openai_api")
    return [r for r in roles if r not in skip]

MODEL_TYPES = ("controller", "shared", "http")
TOP_KEYS = ("registries", "images", "apt", "python_index", "model")
_URL_RE = re.compile(r"^(https?://[^\s/]+[^\s]*|file:/[^\s]*)$")
_REGISTRY_RE = re.compile(r"^[A-Za-z0-9.-]+(:[0-9]+)?$")
_PREFIX_RE = re.compile(r"^[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._-]+)*$")


class SourcesError(ValueError):
    """triton_fleet_mirrors (or a role variable it feeds) is malformed; the message says what to change."""


def _unknown(where, key, valid):
    close = difflib.get_close_matches(str(key), list(valid), n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise SourcesError(f"triton_fleet_mirrors{where}: unknown key {key!r}{hint}; valid keys: {', '.join(valid)}")


def _known_keys(where, mapping, valid):
    for key in mapping:
        if key not in valid:
            _unknown(where, key, valid)


def _section(mirrors, key, what):
    """One part of triton_fleet_mirrors, which must be a mapping when given."""
    value = mirrors.get(key) or {}
    if not isinstance(value, dict):
        raise SourcesError(f"triton_fleet_mirrors.{key} must {what}")
    return value


def _url(where, value, *, file_ok=True):
    if not isinstance(value, str) or not _URL_RE.match(value) or (not file_ok and value.startswith("file:")):
        kinds = "an http(s):// or file:/ URL" if file_ok else "an http(s):// URL"
        raise SourcesError(f"triton_fleet_mirrors{where}: {value!r} is not {kinds}")
    return value.rstrip("/") if not value.endswith("$(ARCH)") else value


def split_image(ref):
    """(registry host, rest) of an image reference as Docker reads it (docker.io when none is named)."""
    first, sep, rest = ref.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first, rest
    return "docker.io", ref if sep else "library/" + ref


def mirror_image(ref, registries):
    """The reference pulled through a registry mirror (tag and digest kept), or ``ref`` when none applies.

    ``registries`` as ``validate`` returns them (prefixes without a trailing slash).
    """
    if not ref:
        return ref
    registry, rest = split_image(ref)
    prefix = registries.get(registry)
    return f"{prefix}/{rest}" if prefix else ref


def validate(mirrors):
    """A normalised copy of triton_fleet_mirrors; SourcesError on anything an operator must fix."""
    if mirrors in (None, ""):
        mirrors = {}
    if not isinstance(mirrors, dict):
        raise SourcesError(f"triton_fleet_mirrors must be a mapping, got {type(mirrors).__name__}")
    _known_keys("", mirrors, TOP_KEYS)
    out = {"registries": {}, "images": {}, "apt": {}, "python_index": "", "model": {}}
    registries = _section(mirrors, "registries", "map a registry host (nvcr.io) to a mirror prefix")
    for host, prefix in registries.items():
        if not _REGISTRY_RE.match(str(host)):
            raise SourcesError(f"triton_fleet_mirrors.registries: {host!r} is not a registry host (e.g. nvcr.io)")
        if not isinstance(prefix, str) or not _PREFIX_RE.match(prefix.rstrip("/")):
            raise SourcesError(
                f"triton_fleet_mirrors.registries.{host}: {prefix!r} is not a registry prefix "
                "(host[:port][/path], no scheme, e.g. harbor.example.com/nvcr)"
            )
        out["registries"][str(host)] = prefix.rstrip("/")
    images = _section(mirrors, "images", "map an image name to a full reference")
    for name, ref in images.items():
        if name not in IMAGES:
            _unknown(".images", name, IMAGES)
        if not isinstance(ref, str) or not ref or any(c.isspace() for c in ref) or "://" in ref:
            raise SourcesError(f"triton_fleet_mirrors.images.{name}: {ref!r} is not an image reference (no scheme)")
        out["images"][name] = ref
    apt = _section(mirrors, "apt", "map a repository name to its mirror URL")
    for name, value in apt.items():
        if name not in APT:
            _unknown(".apt", name, APT)
        spec = value if isinstance(value, dict) else {"url": value}
        _known_keys(f".apt.{name}", spec, ("url", "key_url"))
        url = _url(f".apt.{name}.url" if isinstance(value, dict) else f".apt.{name}", spec.get("url"))
        key = spec.get("key_url")
        if key is not None:
            key = _url(f".apt.{name}.key_url", key)
        elif APT[name][4] == "required":
            raise SourcesError(
                f"triton_fleet_mirrors.apt.{name}: give its signing key too ({{url: ..., key_url: ...}}): "
                "the key's place under a mirror cannot be derived from the repository URL"
            )
        out["apt"][name] = {"url": url, "key_url": key}
    index = mirrors.get("python_index") or ""
    if index:
        out["python_index"] = _url(".python_index", index)
    model = _section(mirrors, "model", "be a mapping {type, url, path}")
    _known_keys(".model", model, ("type", "url", "path"))
    if model:
        mtype = model.get("type")
        if mtype not in MODEL_TYPES:
            raise SourcesError(f"triton_fleet_mirrors.model.type: {mtype!r}; choose one of {', '.join(MODEL_TYPES)}")
        if mtype == "http":
            out["model"] = {"type": "http", "url": _url(".model.url", model.get("url"), file_ok=False)}
        elif mtype == "shared":
            path = model.get("path")
            if not isinstance(path, str) or not path.startswith("/"):
                raise SourcesError("triton_fleet_mirrors.model.path: the shared directory on the nodes, an absolute path")
            out["model"] = {"type": "shared", "path": path.rstrip("/")}
        else:
            out["model"] = {"type": "controller"}
    return out


def resolve(mirrors, *, explicit=None, profile=None, roles=()):
    """Role variables and table rows for one host.

    ``explicit``: the host's own values of the role variables (set in its inventory or by -e; None or "" = unset);
    they win.
    ``profile``: its serving profile (the Triton image), or None on a host that serves nothing.
    ``roles``: the roles the host runs (only their artefacts are listed).
    """
    m = validate(mirrors)
    explicit = {k: v for k, v in (explicit or {}).items() if v is not None and v != ""}
    roles = set(roles)
    values, rows = {}, []

    def put(variable, value, origin, what):
        if variable in explicit:
            value, origin = explicit[variable], "inventory (" + variable + ")"
        values[variable] = value
        rows.append({"artefact": what, "source": value if value != "" else "(derived)", "origin": origin,
                     "variable": variable})

    settings = {k: explicit.pop(k, None) for k in READS}
    skipped = set()
    if (settings["container_runtime_docker_source"] or "docker") != "docker":
        skipped.add("docker")
    if not _true(settings["container_runtime_nvidia"], (settings["triton_fleet_device"] or "gpu") != "cpu"):
        skipped |= {"nvidia_container_toolkit", "gpu_check"}
    for name, (role, url_var, key_var, what, key_rule) in APT.items():
        if role not in roles or name in skipped:
            continue
        mirrored = m["apt"].get(name)
        if mirrored:
            key = mirrored["key_url"]
            if key is None:
                key = "" if key_rule == "derived" else mirrored["url"] + key_rule
            put(url_var, mirrored["url"], "mirror (apt." + name + ")", what)
            put(key_var, key, "mirror (apt." + name + ")", what + " signing key")
        else:
            put(url_var, UPSTREAM[url_var], "upstream", what)
            put(key_var, UPSTREAM[key_var], "upstream", what + " signing key")
    triton = ((profile or {}).get("image") or {}).get("ref") or ""
    archive = settings["triton_server_image_archive"] or ""
    for name, (role, var, what) in IMAGES.items():
        if role not in roles or name in skipped or (name in ("triton", "trtllm_build") and not triton):
            continue
        base = triton if name in ("triton", "trtllm_build") else UPSTREAM[var]
        if name in ("triton", "trtllm_build") and archive:
            # Loaded from the archive under its own name: a mirror must not rename it.
            put(var, base, "archive " + archive, what)
        elif name in m["images"]:
            put(var, m["images"][name], "mirror (images." + name + ")", what)
        else:
            pulled = mirror_image(base, m["registries"])
            origin = "mirror (registries." + split_image(base)[0] + ")" if pulled != base else "upstream"
            put(var, pulled, origin, what)
    if "openai_api" in roles:
        index = m["python_index"]
        put("openai_api_pip_index_url", index, "mirror (python_index)" if index else "upstream",
             "Python index of the service's wheelhouse (used on the controller)")
        if rows[-1]["source"] == "(derived)":
            rows[-1]["source"] = "pip's default index"
    if "model_artifacts" in roles:
        model = m["model"]
        origin = "mirror (model)" if model else "upstream"
        mtype = model.get("type", UPSTREAM["model_artifacts_source_type"])
        put("model_artifacts_source_type", mtype, origin, "checkpoint source")
        mtype = values["model_artifacts_source_type"]
        if mtype == "http":
            put("model_artifacts_http_url", model.get("url", UPSTREAM["model_artifacts_http_url"]),
                 origin, "checkpoint server")
        elif mtype == "shared":
            put("model_artifacts_shared_dir", model.get("path", UPSTREAM["model_artifacts_shared_dir"]),
                 origin, "checkpoint directory (on the nodes)")
        else:
            rows.append({"artefact": "checkpoint directory", "source": "the controller's model cache (copied over the "
                         "Ansible connection)", "origin": origin, "variable": "model_artifacts_controller_dir"})
    return {"values": values, "rows": rows}


def format_table(host_rows):
    """The preflight's lines: hosts with the same sources share one block (a fleet has few distinct ones)."""
    blocks = {}
    for host in sorted(host_rows):
        key = tuple((r["artefact"], r["source"], r["origin"]) for r in host_rows[host])
        blocks.setdefault(key, []).append(host)
    lines = []
    for key, hosts in blocks.items():
        lines.append(f"=== {', '.join(hosts)}: where each download comes from")
        if not key:
            lines.append("  (nothing to download)")
        width = max([len(a) for a, _, _ in key] + [8])
        lines += [f"  {a:<{width}}  {src}  [{origin}]" for a, src, origin in key]
    return lines
