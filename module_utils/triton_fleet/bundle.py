"""The offline bundle's manifest: every file with its sha256, what it is for and where it came from.

A bundle is one directory (docs/offline.md):

    bundle-manifest.json            this manifest
    images/<name>.tar               docker save archives (the image ID in the item's meta)
    apt/<distribution>-<arch>/      a local apt repository with signed metadata (InRelease)
    wheels/<python>-<arch>/         node-side wheelhouses
    models/<key>@<revision>/        checkpoints with their own .triton-fleet-manifest.json
    keys/                           the public key that signs the apt metadata

``build`` writes nothing: it returns the manifest of a directory from the items that were put there (each
file belongs to exactly one item, a file no item accounts for is an error). ``verify`` compares a directory
with its manifest (missing, resized, changed, unaccounted files); ``check`` compares the manifest with what a
fleet needs (a distribution, an image, a checkpoint or a wheelhouse missing) and names the hosts that need
the missing part. Standard library only: it runs on the controller and on Python 3.11 hosts alike.
"""

import hashlib
import os

SCHEMA_VERSION = 1
MANIFEST = "bundle-manifest.json"
KINDS = ("image", "apt", "wheels", "model", "key")


class BundleError(ValueError):
    """A bundle or its items are malformed; the message says what and where."""


def sha256_file(path, chunk=1 << 20):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def scan(root):
    """Relative path -> size of every regular file under ``root`` (the manifest itself left out)."""
    out = {}
    for base, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(base, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if rel == MANIFEST or os.path.islink(full):
                continue
            out[rel] = os.path.getsize(full)
    return out


def _owner(rel, items):
    for item in items:
        p = item["path"].rstrip("/")
        if rel == p or rel.startswith(p + "/"):
            return item
    return None


def build(root, items, *, created, inventory, hashes=None):
    """The manifest of ``root`` from its ``items`` ([{path, kind, purpose, origin, meta}]).

    ``hashes``: relative path -> sha256 already known (a second run reuses them for files whose size is
    unchanged; the caller passes the previous manifest's).
    """
    for item in items:
        if item.get("kind") not in KINDS:
            raise BundleError(f"bundle item {item.get('path')!r}: kind {item.get('kind')!r} is not one of {', '.join(KINDS)}")
        for key in ("path", "purpose", "origin"):
            if not item.get(key):
                raise BundleError(f"bundle item {item.get('path')!r}: {key} is empty")
    hashes = hashes or {}
    files, totals = {}, {}
    for rel, size in scan(root).items():
        item = _owner(rel, items)
        if item is None:
            raise BundleError(f"{rel}: no bundle item accounts for this file; remove it or add the item that made it")
        known = hashes.get(rel)
        digest = known["sha256"] if known and known.get("size") == size else sha256_file(os.path.join(root, rel))
        files[rel] = {"sha256": digest, "size": size, "kind": item["kind"], "item": item["path"]}
        totals[item["kind"]] = totals.get(item["kind"], 0) + size
    for item in items:
        if not any(f["item"] == item["path"] for f in files.values()):
            raise BundleError(f"bundle item {item['path']!r} ({item['purpose']}) holds no file")
    return {
        "schema_version": SCHEMA_VERSION,
        "created": created,
        "inventory": inventory,
        "items": [{k: item.get(k) for k in ("path", "kind", "purpose", "origin", "meta")} for item in items],
        "files": files,
        "totals": {"bytes": sum(totals.values()), "by_kind": totals, "files": len(files)},
    }


def verify(root, manifest, *, full=True):
    """Problems of the directory against its manifest (empty when it is intact). ``full`` hashes every file."""
    if not isinstance(manifest, dict) or manifest.get("schema_version") != SCHEMA_VERSION:
        return [f"{MANIFEST}: schema_version {manifest.get('schema_version') if isinstance(manifest, dict) else None!r}, "
                f"this version reads {SCHEMA_VERSION}: rebuild the bundle with this version of triton-fleet"]
    problems = []
    present = scan(root)
    for rel, want in sorted(manifest.get("files", {}).items()):
        if rel not in present:
            problems.append(f"{rel}: missing (the manifest lists it)")
        elif present[rel] != want["size"]:
            problems.append(f"{rel}: {present[rel]} bytes, the manifest says {want['size']}")
        elif full and sha256_file(os.path.join(root, rel)) != want["sha256"]:
            problems.append(f"{rel}: sha256 differs from the manifest (corrupted or changed after the build)")
    for rel in sorted(set(present) - set(manifest.get("files", {}))):
        problems.append(f"{rel}: not in the manifest (added after the build)")
    return problems


def _find(manifest, kind, **meta):
    for item in manifest.get("items", []):
        if item["kind"] == kind and all((item.get("meta") or {}).get(k) == v for k, v in meta.items()):
            return item
    return None


def _has(manifest, kind, **meta):
    return _find(manifest, kind, **meta) is not None


def host_os(need):
    """(distribution key, deb architecture) of a need's ``os`` facts, (None, None) when it has none."""
    osf = need.get("os") or {}
    if not osf.get("distribution"):
        return None, None
    return distribution_key(osf["distribution"], osf.get("version"), osf.get("major")), osf.get("machine")


def wheel_tag(wheel):
    return f"cp{str(wheel['python']).replace('.', '')}-{wheel['arch']}"


def check(manifest, needs):
    """What the fleet needs that the bundle lacks, one message per missing part with the hosts that need it.

    ``needs``: host -> need as ``plan`` takes it.
    """
    missing = {}
    for host in sorted(needs):
        need = needs[host] or {}
        dist, machine = host_os(need)
        if dist and (need.get("packages") or need.get("repos")):
            arch = _ARCH.get(machine, machine)
            if not _has(manifest, "apt", distribution=dist, arch=arch):
                missing.setdefault(f"OS packages for {dist} {arch}", []).append(host)
            else:
                have = set(_find(manifest, "apt", distribution=dist, arch=arch)["meta"].get("packages") or [])
                for pkg in sorted(set(need.get("packages") or []) - have):
                    missing.setdefault(f"package {pkg} for {dist} {arch}", []).append(host)
        for image in need.get("images") or []:
            if not _has(manifest, "image", ref=image["ref"]):
                missing.setdefault(f"image {image['ref']}", []).append(host)
        for model in need.get("models") or []:
            if not _has(manifest, "model", name=model["name"]):
                missing.setdefault(f"checkpoint {model['name']}", []).append(host)
        for wheel in need.get("wheels") or []:
            if not _has(manifest, "wheels", tag=wheel_tag(wheel)):
                missing.setdefault(f"wheels for {wheel_tag(wheel)}", []).append(host)
    return [f"the bundle has no {what} (needed by {', '.join(hosts)})" for what, hosts in missing.items()]


def size_report(manifest):
    """Lines: the size of each kind and of the whole bundle."""
    totals = manifest["totals"]
    lines = [f"  {kind:<7} {_mib(size):>10}" for kind, size in sorted(totals["by_kind"].items())]
    lines.append(f"  {'total':<7} {_mib(totals['bytes']):>10}  ({totals['files']} files)")
    return lines


def _mib(n):
    return f"{n / 1048576:.1f} MiB"


# Distributions whose packages the bundle carries (an apt repository); others are named, not guessed.
APT_FAMILIES = ("debian", "ubuntu")
_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "amd64": "amd64", "arm64": "arm64"}


def distribution_key(distribution, version, major):
    """debian-12, ubuntu-22.04: Ubuntu's releases are named by version, Debian's by major version."""
    name = str(distribution).strip().lower()
    return f"{name}-{version if name == 'ubuntu' else major}"


def deb_arch(machine):
    if machine not in _ARCH:
        raise BundleError(f"architecture {machine!r}: the bundle knows {', '.join(sorted(set(_ARCH)))}")
    return _ARCH[machine]


def safe_name(ref):
    """A file name for an image reference (registry/path:tag@digest -> registry_path_tag)."""
    base = ref.split("@", 1)[0]
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in base).strip("_.")


def fingerprint(value):
    """A stable digest of a JSON-like value: a bundle item is rebuilt only when its inputs change."""
    import json
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def _previous_item(manifest, path):
    for item in (manifest or {}).get("items", []):
        if item.get("path") == path:
            return item
    return None


def _intact(root, manifest, path):
    """Every file the previous manifest lists under ``path`` is there with its size (a quick check)."""
    files = [(rel, f) for rel, f in (manifest or {}).get("files", {}).items() if f.get("item") == path]
    if not files:
        return False
    for rel, f in files:
        full = os.path.join(root, rel)
        if not os.path.isfile(full) or os.path.getsize(full) != f["size"]:
            return False
    return True


def plan(root, needs, manifest=None, *, build_images=None, refresh=False):
    """What to collect for ``needs`` (host -> need, see ``check``), and which items the last build still holds.

    Each need: {distribution, arch, packages: ["nginx", "prometheus=2.42.0+ds-5"], repos: [{name, ...}],
    images: [{ref, archive}], models: [{name, source}], wheels: [{python, arch}]}.
    ``build_images``: distribution key -> the container image apt resolves in (its release's own).
    An item whose inputs (fingerprint) equal the previous build's and whose files are all there is reused:
    a second run with nothing changed downloads nothing. ``refresh`` re-resolves every item.
    """
    build_images = build_images or {}
    apt, images, models, wheels, errors = {}, {}, {}, {}, []
    for host in sorted(needs):
        need = needs[host] or {}
        dist, machine = host_os(need)
        if dist and (need.get("packages") or need.get("repos")):
            if dist.split("-", 1)[0] not in APT_FAMILIES:
                # The preflight (playbooks/bundle.yml's first play) refuses such a host already: no role
                # implements a release without apt (roles/*/meta/main.yml), so no mirror would serve it either.
                errors.append(f"{host} runs {dist}: the bundle builds apt repositories only "
                              f"({', '.join(APT_FAMILIES)}), for the releases the roles implement "
                              "(roles/*/meta/main.yml, docs/compatibility.md); no role installs on "
                              f"{dist}. Install a supported release on these hosts or build the bundle with an "
                              "inventory that leaves them out")
            else:
                key = f"{dist}-{deb_arch(machine)}"
                entry = apt.setdefault(key, {"distribution": dist, "arch": deb_arch(machine),
                                             "packages": set(), "repos": {}, "hosts": []})
                entry["packages"].update(need.get("packages") or [])
                for repo in need.get("repos") or []:
                    entry["repos"][repo["name"]] = repo
                entry["hosts"].append(host)
        for image in need.get("images") or []:
            entry = images.setdefault(image["ref"], {"ref": image["ref"], "archive": image.get("archive") or "",
                                                     "hosts": []})
            entry["hosts"].append(host)
        for model in need.get("models") or []:
            entry = models.setdefault(model["name"], dict(model, hosts=[]))
            entry["hosts"].append(host)
        for wheel in need.get("wheels") or []:
            tag = wheel_tag(wheel)
            entry = wheels.setdefault(tag, {"tag": tag, "python": str(wheel["python"]), "arch": wheel["arch"],
                                            "hosts": []})
            entry["hosts"].append(host)
    if errors:
        raise BundleError("; ".join(errors))

    def finish(path, entry, inputs):
        entry["path"] = path
        entry["fingerprint"] = fingerprint(inputs)
        before = _previous_item(manifest, path)
        entry["reuse"] = bool(not refresh and before and (before.get("meta") or {}).get("fingerprint") ==
                              entry["fingerprint"] and _intact(root, manifest, path))
        return entry

    out = {"apt": [], "images": [], "models": [], "wheels": []}
    for key in sorted(apt):
        e = apt[key]
        dist = e["distribution"]
        if dist not in build_images:
            raise BundleError(f"{', '.join(e['hosts'])} run {dist}: name the container image apt resolves "
                              f"{dist}'s packages in (triton_fleet_bundle_build_images.{dist})")
        e["packages"] = sorted(e["packages"])
        e["repos"] = [e["repos"][n] for n in sorted(e["repos"])]
        e["build_image"] = build_images[dist]
        out["apt"].append(finish(f"apt/{key}", e, [e["packages"], e["repos"], e["build_image"]]))
    for ref in sorted(images):
        e = images[ref]
        out["images"].append(finish(f"images/{safe_name(ref)}.tar", e, [ref, e["archive"]]))
    for name in sorted(models):
        e = models[name]
        out["models"].append(finish(f"models/{name}", e, [name, e.get("source")]))
    for tag in sorted(wheels):
        out["wheels"].append(finish(f"wheels/{tag}", wheels[tag], [tag]))
    return out


def items_from_plan(planned, image_ids=None):
    """The manifest's items for what ``plan`` listed and the playbook collected (``image_ids``: ref -> ID)."""
    image_ids = image_ids or {}
    items = []
    for e in planned.get("apt", []):
        origin = f"{e['distribution']}'s own repositories (resolved in {e['build_image']})"
        if e["repos"]:
            origin += " and " + ", ".join(f"{r['name']} ({r['uris']})" for r in e["repos"])
        items.append({"path": e["path"], "kind": "apt", "purpose": f"OS packages for {e['distribution']} {e['arch']} "
                      f"({len(e['packages'])} requested, with their dependencies; hosts: {', '.join(e['hosts'])})",
                      "origin": origin, "meta": {"distribution": e["distribution"], "arch": e["arch"],
                                                 "packages": e["packages"], "fingerprint": e["fingerprint"]}})
    for e in planned.get("images", []):
        items.append({"path": e["path"], "kind": "image", "purpose": f"image {e['ref']} (hosts: {', '.join(e['hosts'])})",
                      "origin": f"archive {e['archive']}" if e["archive"] else f"registry ({e['ref']})",
                      "meta": {"ref": e["ref"], "id": image_ids.get(e["ref"], ""), "fingerprint": e["fingerprint"]}})
    for e in planned.get("models", []):
        items.append({"path": e["path"], "kind": "model", "purpose": f"checkpoint {e['name']} (hosts: {', '.join(e['hosts'])})",
                      "origin": e.get("source") or "", "meta": {"name": e["name"], "fingerprint": e["fingerprint"]}})
    for e in planned.get("wheels", []):
        items.append({"path": e["path"], "kind": "wheels", "purpose": f"wheelhouse of the OpenAI-compatible service for "
                      f"Python {e['python']} {e['arch']} (hosts: {', '.join(e['hosts'])})", "origin": "Python index",
                      "meta": {"tag": e["tag"], "fingerprint": e["fingerprint"]}})
    if planned.get("apt"):
        items.append({"path": "keys", "kind": "key", "purpose": "public key of the apt repositories' signed metadata",
                      "origin": "generated on the controller", "meta": {}})
    return items


def install_paths(manifest, needs):
    """Host -> where its artefacts are in the bundle: {apt: "apt/debian-12-amd64" or "", images: {ref: path}}.

    Call after ``check`` found nothing missing."""
    out = {}
    for host in sorted(needs):
        need = needs[host] or {}
        dist, machine = host_os(need)
        apt = ""
        if dist and (need.get("packages") or need.get("repos")):
            apt = _find(manifest, "apt", distribution=dist, arch=_ARCH.get(machine, machine))["path"]
        images = {i["ref"]: _find(manifest, "image", ref=i["ref"])["path"] for i in need.get("images") or []}
        out[host] = {"apt": apt, "images": images}
    return out


MANAGED_DIRS = ("apt", "images", "models", "wheels", "keys")


def stale(root, items):
    """Files under the bundle's own directories that no item accounts for (left by an earlier build: an image
    or checkpoint the inventory no longer uses). Files anywhere else are not the bundle's to remove."""
    return [rel for rel in scan(root) if rel.split("/", 1)[0] in MANAGED_DIRS and _owner(rel, items) is None]
