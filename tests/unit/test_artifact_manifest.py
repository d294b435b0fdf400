"""sha256 manifests: build, verify, install (stage then rename), resume, repair, path safety."""

import os

import pytest
from triton_fleet import artifact_manifest as am

NAME = "manifest.json"


def make_tree(root, files):
    for rel, data in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(data)
    return root


@pytest.fixture
def src(tmp_path):
    return make_tree(str(tmp_path / "src"), {"config.json": b'{"a": 1}', "sub/w.bin": b"x" * 10000,
                                              "tokenizer.json": b"{}"})


def test_manifest_lists_every_file_with_size_and_sha256(src):
    m = am.build_manifest(src, "model", NAME, extra={"fingerprint": "f"})
    assert set(m["files"]) == {"config.json", "sub/w.bin", "tokenizer.json"}
    assert m["files"]["sub/w.bin"]["size"] == 10000
    assert m["files"]["config.json"]["sha256"] == am.sha256_file(os.path.join(src, "config.json"))
    assert m["fingerprint"] == "f" and m["format"] == am.FORMAT
    assert am.dump_manifest(m) == am.dump_manifest(dict(reversed(list(m.items()))))


def test_digest_changes_with_content_only(src):
    m1 = am.build_manifest(src, "model", NAME, extra={"built_at": 1})
    m2 = am.build_manifest(src, "model", NAME, extra={"built_at": 2})
    assert am.content_digest(m1) == am.content_digest(m2)
    with open(os.path.join(src, "tokenizer.json"), "wb") as handle:
        handle.write(b"{ }")
    assert am.content_digest(am.build_manifest(src, "model", NAME)) != am.content_digest(m1)


def test_install_then_verify_then_noop(src, tmp_path):
    m = am.build_manifest(src, "model", NAME)
    dest = str(tmp_path / "cache" / "m@1")
    res = am.install(dest, m, NAME, sources=[src])
    assert res["changed"] and sorted(res["copied"]) == sorted(m["files"])
    assert am.verify_tree(dest, m, manifest_name=NAME)["valid"]
    assert not os.path.exists(am.staging_path(dest))
    again = am.install(dest, m, NAME, sources=[src])
    assert not again["changed"] and again["copied"] == []


def test_corrupt_file_same_size_is_detected_and_only_it_is_copied(src, tmp_path):
    m = am.build_manifest(src, "model", NAME)
    dest = str(tmp_path / "d")
    am.install(dest, m, NAME, sources=[src])
    with open(os.path.join(dest, "sub/w.bin"), "r+b") as handle:
        handle.write(b"y")
    report = am.verify_tree(dest, m, manifest_name=NAME)
    assert not report["valid"] and report["bad"] == ["sub/w.bin"]
    assert am.verify_tree(dest, m, manifest_name=NAME, quick=True)["valid"]  # size-only cannot see it
    res = am.install(dest, m, NAME, sources=[src])
    assert res["copied"] == ["sub/w.bin"] and set(res["reused"]) == {"config.json", "tokenizer.json"}
    assert am.verify_tree(dest, m, manifest_name=NAME)["valid"]


def test_extra_and_missing_files_and_stale_manifest(src, tmp_path):
    m = am.build_manifest(src, "model", NAME)
    dest = str(tmp_path / "d")
    am.install(dest, m, NAME, sources=[src])
    make_tree(dest, {"junk.txt": b"j"})
    os.unlink(os.path.join(dest, "tokenizer.json"))
    report = am.verify_tree(dest, m, manifest_name=NAME)
    assert report["extra"] == ["junk.txt"] and report["missing"] == ["tokenizer.json"]
    am.install(dest, m, NAME, sources=[src])
    assert not os.path.exists(os.path.join(dest, "junk.txt"))
    os.unlink(os.path.join(dest, NAME))
    assert not am.verify_tree(dest, m, manifest_name=NAME)["valid"]


def test_incomplete_source_fails_and_leaves_dest_untouched(src, tmp_path):
    m = am.build_manifest(src, "model", NAME)
    dest = str(tmp_path / "d")
    am.install(dest, m, NAME, sources=[src])
    before = {f: am.sha256_file(os.path.join(dest, f)) for f in m["files"]}
    m2 = am.build_manifest(src, "model", NAME)
    m2["files"]["new.bin"] = {"size": 3, "sha256": "0" * 64}
    with pytest.raises(am.ManifestError, match="no valid copy of new.bin"):
        am.install(dest, m2, NAME, sources=[src])
    assert {f: am.sha256_file(os.path.join(dest, f)) for f in m["files"]} == before
    assert am.verify_tree(dest, m, manifest_name=NAME)["valid"]


def test_interrupted_copy_resumes_from_staging(src, tmp_path):
    m = am.build_manifest(src, "model", NAME)
    dest = str(tmp_path / "d")
    staging = am.staging_path(dest)
    # an earlier run staged one file, then died
    make_tree(staging, {"sub/w.bin": b"x" * 10000, "half.part": b"zz"})
    assert am.missing_for_install(dest, m) == ["config.json", "tokenizer.json"]
    res = am.install(dest, m, NAME, sources=[src])
    assert "sub/w.bin" in res["reused"] and "sub/w.bin" not in res["copied"]
    assert am.verify_tree(dest, m, manifest_name=NAME)["valid"]


def test_check_mode_changes_nothing(src, tmp_path):
    m = am.build_manifest(src, "model", NAME)
    dest = str(tmp_path / "d")
    res = am.install(dest, m, NAME, sources=[src], check_mode=True)
    assert res["changed"] and not os.path.exists(dest)


def test_fetch_callback_resumes_and_rejects_corrupt(src, tmp_path):
    m = am.build_manifest(src, "model", NAME)
    calls = []

    def fetch(rel, part):
        calls.append((rel, os.path.exists(part)))
        with open(os.path.join(src, rel), "rb") as s, open(part, "ab") as d:
            d.seek(0, 2)
            s.seek(d.tell())
            d.write(s.read())

    dest = str(tmp_path / "d")
    staging = am.staging_path(dest)
    make_tree(staging, {"sub/w.bin.part": b"x" * 4000})  # partial download
    am.install(dest, m, NAME, fetch=fetch)
    assert ("sub/w.bin", True) in calls
    assert am.verify_tree(dest, m, manifest_name=NAME)["valid"]

    def bad_fetch(rel, part):
        with open(part, "wb") as d:
            d.write(b"wrong")
    with pytest.raises(am.ManifestError):
        am.install(str(tmp_path / "e"), m, NAME, fetch=bad_fetch)
    assert not os.path.exists(str(tmp_path / "e"))


@pytest.mark.parametrize("rel", ["../etc/passwd", "/abs", "a/../../b", "a//b", "./a", ""])
def test_unsafe_paths_are_rejected(rel):
    m = {"format": am.FORMAT, "kind": "model", "files": {rel: {"size": 1, "sha256": "0" * 64}}}
    with pytest.raises(am.ManifestError):
        am.validate_manifest(m)


def test_bad_manifests_are_rejected():
    with pytest.raises(am.ManifestError, match="format"):
        am.validate_manifest({"files": {}})
    with pytest.raises(am.ManifestError, match="no files"):
        am.validate_manifest({"format": am.FORMAT, "files": {}})
    with pytest.raises(am.ManifestError, match="sha256"):
        am.validate_manifest({"format": am.FORMAT, "files": {"a": {"size": 1, "sha256": "XYZ"}}})


def test_publish_replaces_atomically(tmp_path):
    dest = str(tmp_path / "d")
    make_tree(dest, {"old": b"1"})
    staging = make_tree(str(tmp_path / "s"), {"new": b"2"})
    am.publish(staging, dest)
    assert os.listdir(dest) == ["new"]
    assert [n for n in os.listdir(tmp_path) if n.startswith(".old")] == []
