"""sha256 manifests for artifact directories (model checkpoints, TRT-LLM engines).

An artifact is a directory of regular files. Its manifest lists every file with size and sha256::

    {"format": "triton-fleet-artifact/1", "kind": "engine",
     "files": {"config.json": {"size": 1234, "sha256": "..."}, "rank0.engine": {...}},
     ...any metadata (fingerprint, commands, wall times)...}

The manifest is stored inside the directory (its own name is never listed in ``files``).
``content_digest`` (sha256 of the canonical ``files`` map) identifies the bytes: two hosts hold
the same artifact exactly when their digests are equal.

Installing never exposes a partial tree: files are assembled in a staging directory (reusing
files that are already valid at the destination or in staging, so an interrupted copy resumes),
every file is verified, the manifest is written last, and only then is the staging directory
renamed over the destination. Pure Python; no Ansible import.
"""

import errno
import fcntl
import hashlib
import json
import os
import posixpath
import shutil
import time

FORMAT = "triton-fleet-artifact/1"
CHUNK = 4 * 1024 * 1024


class ManifestError(ValueError):
    """A manifest or an artifact tree is unusable; the message says what to do."""


def sha256_file(path, chunk=CHUNK):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while True:
            block = handle.read(chunk)
            if not block:
                break
            digest.update(block)
    return digest.hexdigest()


def canonical_json(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def dump_manifest(manifest):
    """Deterministic bytes for a manifest file (identical on every host)."""
    return (json.dumps(manifest, sort_keys=True, indent=2, ensure_ascii=True) + "\n").encode("ascii")


def content_digest(manifest):
    """sha256 over the canonical ``files`` map: the identity of the artifact's bytes."""
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict):
        raise ManifestError("manifest has no 'files' map; rebuild it with build_manifest()")
    return hashlib.sha256(canonical_json(files).encode("ascii")).hexdigest()


def check_relpath(rel):
    """Reject paths that could escape the artifact directory (a manifest may come over HTTP)."""
    if not isinstance(rel, str) or not rel:
        raise ManifestError(f"manifest file name {rel!r} is not a non-empty string")
    if rel.startswith("/") or "\\" in rel or "\x00" in rel:
        raise ManifestError(f"manifest file name {rel!r} must be a relative POSIX path")
    norm = posixpath.normpath(rel)
    if norm != rel or norm == "." or norm.startswith("../") or norm == "..":
        raise ManifestError(f"manifest file name {rel!r} is not a normalised path inside the artifact")
    return rel


def validate_manifest(manifest):
    if not isinstance(manifest, dict):
        raise ManifestError(f"manifest must be a dict, got {type(manifest).__name__}")
    if manifest.get("format") != FORMAT:
        raise ManifestError(
            "manifest format is {!r}, expected {!r}; regenerate it with this version of triton-fleet".format(manifest.get("format"), FORMAT)
        )
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        raise ManifestError("manifest lists no files; an empty artifact cannot be installed")
    for rel, meta in files.items():
        check_relpath(rel)
        if not isinstance(meta, dict):
            raise ManifestError(f"manifest entry for {rel} must be a dict with size and sha256")
        size, digest = meta.get("size"), meta.get("sha256")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ManifestError(f"manifest entry for {rel} has no valid integer size")
        if not isinstance(digest, str) or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ManifestError(f"manifest entry for {rel} has no valid lowercase sha256 hex digest")
    return manifest


def list_files(root, exclude=()):
    """Relative POSIX paths of the regular files under ``root`` (symlinks to files followed)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if rel in exclude or not os.path.isfile(full):
                continue
            out.append(rel)
    return sorted(out)


def build_manifest(root, kind, manifest_name, extra=None):
    """Hash every file under ``root`` and return a manifest dict."""
    if not os.path.isdir(root):
        raise ManifestError(f"{root} is not a directory; point the source at the artifact directory")
    files = {}
    for rel in list_files(root, exclude=(manifest_name,)):
        full = os.path.join(root, rel)
        files[rel] = {"size": os.path.getsize(full), "sha256": sha256_file(full)}
    if not files:
        raise ManifestError(f"{root} holds no files; nothing to publish")
    manifest = dict(extra or {})
    manifest.update({"format": FORMAT, "kind": kind, "files": files})
    return manifest


def read_manifest(root, manifest_name):
    """The manifest stored in ``root`` or None when absent/unreadable."""
    path = os.path.join(root, manifest_name)
    try:
        with open(path, "rb") as handle:
            data = json.loads(handle.read().decode("utf-8"))
        return validate_manifest(data)
    except (OSError, ValueError):
        return None


def file_ok(path, meta, quick=False):
    try:
        if not os.path.isfile(path) or os.path.getsize(path) != meta["size"]:
            return False
        return quick or sha256_file(path) == meta["sha256"]
    except OSError:
        return False


def verify_tree(root, manifest, manifest_name=None, quick=False):
    """Compare ``root`` with ``manifest``.

    Returns dict(valid, ok, missing, bad, extra, manifest_matches). ``valid`` needs every file
    present with the right size and sha256 (size only when ``quick``), no extra files, and (when
    ``manifest_name`` is given) the stored manifest to carry the same content digest.
    """
    validate_manifest(manifest)
    result = {"ok": [], "missing": [], "bad": [], "extra": [], "manifest_matches": True}
    for rel, meta in sorted(manifest["files"].items()):
        full = os.path.join(root, rel)
        if not os.path.lexists(full):
            result["missing"].append(rel)
        elif file_ok(full, meta, quick=quick):
            result["ok"].append(rel)
        else:
            result["bad"].append(rel)
    if os.path.isdir(root):
        exclude = (manifest_name,) if manifest_name else ()
        result["extra"] = [r for r in list_files(root, exclude=exclude) if r not in manifest["files"]]
    if manifest_name:
        stored = read_manifest(root, manifest_name)
        result["manifest_matches"] = stored is not None and content_digest(stored) == content_digest(manifest)
    result["valid"] = (
        os.path.isdir(root)
        and not result["missing"]
        and not result["bad"]
        and not result["extra"]
        and result["manifest_matches"]
    )
    return result


def verify_stored(root, manifest_name, quick=False):
    """Verify a directory against the manifest it carries. Returns (manifest or None, report)."""
    manifest = read_manifest(root, manifest_name)
    if manifest is None:
        present = os.path.isdir(root)
        return None, {
            "valid": False, "ok": [], "missing": [], "bad": [], "extra": [], "manifest_matches": False,
            "reason": (f"{root} has no readable {manifest_name}") if present else (f"{root} does not exist"),
        }
    report = verify_tree(root, manifest, manifest_name=manifest_name, quick=quick)
    if not report["valid"]:
        report["reason"] = describe_problems(report)
    return manifest, report


def describe_problems(report):
    parts = []
    for key in ("missing", "bad", "extra"):
        if report.get(key):
            names = report[key]
            shown = ", ".join(names[:5]) + (" ..." if len(names) > 5 else "")
            parts.append("{} {} ({})".format(len(names), {"bad": "corrupt"}.get(key, key), shown))
    if not report.get("manifest_matches", True):
        parts.append("stored manifest differs")
    return "; ".join(parts) or "ok"


class DirLock:
    """An exclusive flock next to the artifact so two runs never assemble the same tree."""

    def __init__(self, path):
        self.path = path
        self.handle = None

    def __enter__(self):
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        self.handle = open(self.path, "a+")
        fcntl.flock(self.handle.fileno(), fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.handle.fileno(), fcntl.LOCK_UN)
        self.handle.close()
        return False


def _fsync_dir(path):
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _copy_file(src, dst):
    tmp = dst + ".part"
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copyfile(src, tmp)
    with open(tmp, "rb+") as handle:
        os.fsync(handle.fileno())
    os.replace(tmp, dst)


def _link_or_copy(src, dst):
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    if os.path.lexists(dst):
        os.unlink(dst)
    try:
        os.link(src, dst)
    except OSError:
        _copy_file(src, dst)


def publish(staging, dest):
    """Rename a complete ``staging`` directory over ``dest``; the old tree is removed afterwards."""
    parent = os.path.dirname(dest.rstrip("/"))
    os.makedirs(parent, exist_ok=True)
    old = None
    if os.path.lexists(dest):
        old = os.path.join(parent, f".old-{os.path.basename(dest)}-{os.getpid()}-{int(time.time() * 1000)}")
        os.rename(dest, old)
    os.rename(staging, dest)
    _fsync_dir(parent)
    if old:
        shutil.rmtree(old, ignore_errors=True)


def staging_path(dest):
    parent, name = os.path.split(dest.rstrip("/"))
    return os.path.join(parent, ".staging", name)


def missing_for_install(dest, manifest, staging=None, quick=False):
    """Files that must come from the source: not valid at ``dest`` nor already in staging."""
    validate_manifest(manifest)
    staging = staging or staging_path(dest)
    need = []
    for rel, meta in sorted(manifest["files"].items()):
        if file_ok(os.path.join(dest, rel), meta, quick=quick):
            continue
        if file_ok(os.path.join(staging, rel), meta):
            continue
        need.append(rel)
    return need


def install(dest, manifest, manifest_name, *, sources=(), fetch=None, staging=None, check_mode=False, quick=False):
    """Make ``dest`` an exact, verified copy of ``manifest``.

    ``sources``: local directories (a shared/NFS path, a staging area filled from the controller,
    another local artifact) searched in order for each needed file. ``fetch(rel, tmp_path)``:
    optional callable that downloads one file (HTTP) into ``tmp_path`` (may resume a partial
    ``tmp_path``). Returns a dict: changed, copied (list), reused (list), bytes_copied, report.
    Raises ManifestError when a file cannot be found valid in any source; ``dest`` is untouched then.
    """
    validate_manifest(manifest)
    dest = dest.rstrip("/")
    staging = staging or staging_path(dest)
    before = verify_tree(dest, manifest, manifest_name=manifest_name, quick=quick)
    result = {"changed": False, "copied": [], "reused": [], "bytes_copied": 0, "before": before, "dest": dest}
    if before["valid"]:
        return result
    result["changed"] = True
    if check_mode:
        result["copied"] = sorted(before["missing"] + before["bad"])
        return result
    lock = os.path.join(os.path.dirname(dest), ".lock-" + os.path.basename(dest))
    with DirLock(lock):
        os.makedirs(staging, exist_ok=True)
        for rel, meta in sorted(manifest["files"].items()):
            target = os.path.join(staging, rel)
            if file_ok(target, meta):
                result["reused"].append(rel)
                continue
            current = os.path.join(dest, rel)
            if rel in before["ok"]:  # verified by verify_tree() above; re-checked once staged
                _link_or_copy(current, target)
                result["reused"].append(rel)
                continue
            if _fill_from_sources(rel, meta, target, sources, fetch):
                result["copied"].append(rel)
                result["bytes_copied"] += meta["size"]
                continue
            raise ManifestError(
                "{}: no valid copy of {} (size {}, sha256 {}) in {}; the source is incomplete or corrupt - "
                "re-export or re-publish the artifact there and run again (files already verified are kept in {})".format(dest, rel, meta["size"], meta["sha256"],
                   ", ".join(sources) if sources else "any source" + (" (HTTP)" if fetch else ""), staging)
            )
        # Drop anything in staging the manifest does not list (left from an older attempt).
        for rel in list_files(staging):
            if rel not in manifest["files"]:
                os.unlink(os.path.join(staging, rel))
        _remove_empty_dirs(staging)
        with open(os.path.join(staging, manifest_name + ".part"), "wb") as handle:
            handle.write(dump_manifest(manifest))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(os.path.join(staging, manifest_name + ".part"), os.path.join(staging, manifest_name))
        final = verify_tree(staging, manifest, manifest_name=manifest_name)
        if not final["valid"]:
            raise ManifestError(f"{dest}: staged copy failed verification ({describe_problems(final)}); run again")
        publish(staging, dest)
    return result


def _fill_from_sources(rel, meta, target, sources, fetch):
    for src_root in sources:
        candidate = os.path.join(src_root, rel)
        if os.path.abspath(candidate) == os.path.abspath(target):
            continue
        if file_ok(candidate, meta):
            _copy_file(candidate, target)
            if file_ok(target, meta):
                return True
    if fetch is not None:
        part = target + ".part"
        os.makedirs(os.path.dirname(target), exist_ok=True)
        try:
            fetch(rel, part)
        except Exception as exc:  # network errors: keep the partial file for resume
            raise ManifestError(f"download of {rel} failed: {exc}; run again to resume") from exc
        if file_ok(part, meta):
            os.replace(part, target)
            return True
        # A corrupt or over-long partial download is useless for resume: drop it.
        try:
            os.unlink(part)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise
    return False


def _remove_empty_dirs(root):
    for dirpath, _dirnames, _filenames in os.walk(root, topdown=False):
        if dirpath != root and not os.listdir(dirpath):
            os.rmdir(dirpath)
