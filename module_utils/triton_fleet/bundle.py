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
the missing part. Standard library only: it runs on the controller and on Python 3.9 hosts alike.
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


def _has(manifest, kind, **meta):
    for item in manifest.get("items", []):
        if item["kind"] == kind and all((item.get("meta") or {}).get(k) == v for k, v in meta.items()):
            return True
    return False


def check(manifest, needs):
    """What the fleet needs that the bundle lacks, one message per missing part with the hosts that need it.

    ``needs``: host -> {distribution: "debian-12", arch: "amd64", images: [refs], models: ["key@revision"],
    wheels: ["cp311-x86_64"]} (keys optional).
    """
    missing = {}
    for host in sorted(needs):
        need = needs[host] or {}
        dist, arch = need.get("distribution"), need.get("arch")
        if dist and not _has(manifest, "apt", distribution=dist, arch=arch):
            missing.setdefault(f"OS packages for {dist} {arch}", []).append(host)
        for ref in need.get("images") or []:
            if not _has(manifest, "image", ref=ref):
                missing.setdefault(f"image {ref}", []).append(host)
        for model in need.get("models") or []:
            if not _has(manifest, "model", name=model):
                missing.setdefault(f"checkpoint {model}", []).append(host)
        for tag in need.get("wheels") or []:
            if not _has(manifest, "wheels", tag=tag):
                missing.setdefault(f"wheels for {tag}", []).append(host)
    return [f"the bundle has no {what} (needed by {', '.join(hosts)})" for what, hosts in missing.items()]


def size_report(manifest):
    """Lines: the size of each kind and of the whole bundle."""
    totals = manifest["totals"]
    lines = [f"  {kind:<7} {_mib(size):>10}" for kind, size in sorted(totals["by_kind"].items())]
    lines.append(f"  {'total':<7} {_mib(totals['bytes']):>10}  ({totals['files']} files)")
    return lines


def _mib(n):
    return f"{n / 1048576:.1f} MiB"
