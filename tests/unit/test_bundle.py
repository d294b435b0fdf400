"""The offline bundle's manifest, its verification and its check against what a fleet needs."""

import pytest
from triton_fleet import bundle
from triton_fleet.bundle import BundleError, build, check, verify


def _tree(root):
    (root / "images").mkdir()
    (root / "images" / "tritonserver-lab.tar").write_bytes(b"image layers" * 100)
    (root / "apt" / "debian-12-amd64" / "pool").mkdir(parents=True)
    (root / "apt" / "debian-12-amd64" / "pool" / "nginx_1.22.deb").write_bytes(b"deb")
    (root / "apt" / "debian-12-amd64" / "InRelease").write_text("signed")
    (root / "models" / "qwen3-tiny@main").mkdir(parents=True)
    (root / "models" / "qwen3-tiny@main" / "config.json").write_text("{}")
    return [
        {"path": "images/tritonserver-lab.tar", "kind": "image", "purpose": "Triton (lab)", "origin": "docker save",
         "meta": {"ref": "triton-fleet/tritonserver-lab:abc", "id": "sha256:1"}},
        {"path": "apt/debian-12-amd64", "kind": "apt", "purpose": "OS packages", "origin": "deb.debian.org",
         "meta": {"distribution": "debian-12", "arch": "amd64"}},
        {"path": "models/qwen3-tiny@main", "kind": "model", "purpose": "checkpoint", "origin": ".cache/models",
         "meta": {"name": "qwen3-tiny@main"}},
    ]


def test_manifest_lists_every_file_with_its_item(tmp_path):
    items = _tree(tmp_path)
    m = build(tmp_path, items, created="2026-12-04T00:00:00Z", inventory="inventories/lab")
    assert set(m["files"]) == {"images/tritonserver-lab.tar", "apt/debian-12-amd64/pool/nginx_1.22.deb",
                               "apt/debian-12-amd64/InRelease", "models/qwen3-tiny@main/config.json"}
    f = m["files"]["images/tritonserver-lab.tar"]
    assert f["size"] == 1200 and f["kind"] == "image" and f["sha256"] == bundle.sha256_file(tmp_path / "images" / "tritonserver-lab.tar")
    assert m["totals"] == {"bytes": 1200 + 3 + 6 + 2, "by_kind": {"image": 1200, "apt": 9, "model": 2}, "files": 4}
    assert verify(tmp_path, m) == []


def test_a_second_build_reuses_known_hashes(tmp_path, monkeypatch):
    items = _tree(tmp_path)
    first = build(tmp_path, items, created="t", inventory="i")
    monkeypatch.setattr(bundle, "sha256_file", lambda *a, **k: pytest.fail("hashed again"))
    assert build(tmp_path, items, created="t", inventory="i", hashes=first["files"])["files"] == first["files"]


def test_an_unaccounted_file_or_an_empty_item_is_an_error(tmp_path):
    items = _tree(tmp_path)
    (tmp_path / "stray.txt").write_text("?")
    with pytest.raises(BundleError, match="stray.txt: no bundle item accounts for this file"):
        build(tmp_path, items, created="t", inventory="i")
    (tmp_path / "stray.txt").unlink()
    with pytest.raises(BundleError, match="holds no file"):
        build(tmp_path, items + [{"path": "wheels/cp311-x86_64", "kind": "wheels", "purpose": "w", "origin": "pypi"}],
              created="t", inventory="i")
    with pytest.raises(BundleError, match="kind 'rpm'"):
        build(tmp_path, [dict(items[0], kind="rpm")], created="t", inventory="i")


def test_verify_names_corrupted_missing_and_added_files(tmp_path):
    items = _tree(tmp_path)
    m = build(tmp_path, items, created="t", inventory="i")
    (tmp_path / "models" / "qwen3-tiny@main" / "config.json").write_text("[]")          # same size, other bytes
    (tmp_path / "apt" / "debian-12-amd64" / "InRelease").unlink()
    (tmp_path / "images" / "extra.tar").write_text("x")
    (tmp_path / "images" / "tritonserver-lab.tar").write_bytes(b"short")
    problems = verify(tmp_path, m)
    assert problems == [
        "apt/debian-12-amd64/InRelease: missing (the manifest lists it)",
        "images/tritonserver-lab.tar: 5 bytes, the manifest says 1200",
        "models/qwen3-tiny@main/config.json: sha256 differs from the manifest (corrupted or changed after the build)",
        "images/extra.tar: not in the manifest (added after the build)",
    ]
    # Sizes only: the same-size change goes unseen, the rest is still caught.
    assert len(verify(tmp_path, m, full=False)) == 3


def test_verify_refuses_another_schema(tmp_path):
    assert "rebuild the bundle" in verify(tmp_path, {"schema_version": 99})[0]


def test_check_names_what_is_missing_and_who_needs_it(tmp_path):
    m = build(tmp_path, _tree(tmp_path), created="t", inventory="i")
    needs = {
        "node1": {"distribution": "debian-12", "arch": "amd64", "images": ["triton-fleet/tritonserver-lab:abc"],
                  "models": ["qwen3-tiny@main"]},
        "a10-01": {"distribution": "ubuntu-24.04", "arch": "amd64", "images": ["nvcr.io/nvidia/dcgm-exporter:4"],
                   "models": ["qwen3-14b@main"]},
        "a10-02": {"distribution": "ubuntu-24.04", "arch": "amd64"},
        "gw-01": {"distribution": "debian-12", "arch": "amd64", "wheels": ["cp311-x86_64"]},
    }
    assert check(m, needs) == [
        "the bundle has no OS packages for ubuntu-24.04 amd64 (needed by a10-01, a10-02)",
        "the bundle has no image nvcr.io/nvidia/dcgm-exporter:4 (needed by a10-01)",
        "the bundle has no checkpoint qwen3-14b@main (needed by a10-01)",
        "the bundle has no wheels for cp311-x86_64 (needed by gw-01)",
    ]
    assert check(m, {"node1": needs["node1"]}) == []


def test_size_report(tmp_path):
    m = build(tmp_path, _tree(tmp_path), created="t", inventory="i")
    lines = bundle.size_report(m)
    assert lines[-1].split()[:3] == ["total", "0.0", "MiB"] and "(4 files)" in lines[-1]
