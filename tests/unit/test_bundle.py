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


DEB12 = {"distribution": "Debian", "version": "12.8", "major": "12", "machine": "x86_64"}
UB24 = {"distribution": "Ubuntu", "version": "24.04", "major": "24", "machine": "x86_64"}


def test_check_names_what_is_missing_and_who_needs_it(tmp_path):
    items = _tree(tmp_path)
    items[1]["meta"]["packages"] = ["nginx", "jq"]
    m = build(tmp_path, items, created="t", inventory="i")
    needs = {
        "node1": {"os": DEB12, "packages": ["jq"], "images": [{"ref": "triton-fleet/tritonserver-lab:abc"}],
                  "models": [{"name": "qwen3-tiny@main"}]},
        "a10-01": {"os": UB24, "packages": ["jq"], "images": [{"ref": "nvcr.io/nvidia/dcgm-exporter:4"}],
                   "models": [{"name": "qwen3-14b@main"}]},
        "a10-02": {"os": UB24, "packages": ["jq"]},
        "gw-01": {"os": DEB12, "packages": ["nginx", "mtail"], "wheels": [{"python": "3.11", "arch": "x86_64"}]},
    }
    assert check(m, needs) == [
        "the bundle has no OS packages for ubuntu-24.04 amd64 (needed by a10-01, a10-02)",
        "the bundle has no image nvcr.io/nvidia/dcgm-exporter:4 (needed by a10-01)",
        "the bundle has no checkpoint qwen3-14b@main (needed by a10-01)",
        "the bundle has no package mtail for debian-12 amd64 (needed by gw-01)",
        "the bundle has no wheels for cp311-x86_64 (needed by gw-01)",
    ]
    assert check(m, {"node1": needs["node1"]}) == []


NEEDS = {
    "gw-01": {"os": DEB12, "packages": ["nginx", "jq"], "repos": [],
              "wheels": [{"python": "3.11", "arch": "x86_64"}]},
    "node1": {"os": DEB12, "packages": ["jq", "docker.io"], "repos": [],
              "images": [{"ref": "triton-fleet/tritonserver-lab:abc", "archive": "/srv/lab.tar"}],
              "models": [{"name": "qwen3-tiny", "source": "/cache/models/qwen3-tiny"}]},
    "a10-01": {"os": UB24, "packages": ["nvidia-container-toolkit=1.17*"],
               "repos": [{"name": "nvidia-container-toolkit", "uris": "https://m/x", "suites": "/", "components": "",
                          "key_url": "https://m/k"}],
               "images": [{"ref": "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3@sha256:ab", "archive": ""}]},
}
BUILD = {"debian-12": "debian:12", "ubuntu-24.04": "ubuntu:24.04"}


def test_plan_merges_hosts_per_distribution_and_dedupes_artefacts(tmp_path):
    p = bundle.plan(tmp_path, NEEDS, build_images=BUILD)
    assert [(a["path"], a["packages"], a["hosts"]) for a in p["apt"]] == [
        ("apt/debian-12-amd64", ["docker.io", "jq", "nginx"], ["gw-01", "node1"]),
        ("apt/ubuntu-24.04-amd64", ["nvidia-container-toolkit=1.17*"], ["a10-01"]),
    ]
    assert p["apt"][1]["repos"][0]["name"] == "nvidia-container-toolkit" and p["apt"][1]["build_image"] == "ubuntu:24.04"
    assert [i["path"] for i in p["images"]] == ["images/nvcr.io_nvidia_k8s_dcgm-exporter_4.5.3.tar",
                                                  "images/triton-fleet_tritonserver-lab_abc.tar"]
    assert p["models"][0]["path"] == "models/qwen3-tiny" and p["wheels"][0]["path"] == "wheels/cp311-x86_64"
    assert not any(e["reuse"] for kind in p.values() for e in kind)


def test_a_second_plan_reuses_complete_items_and_redoes_changed_ones(tmp_path):
    first = bundle.plan(tmp_path, NEEDS, build_images=BUILD)
    for e in first["apt"]:
        (tmp_path / e["path"]).mkdir(parents=True)
        (tmp_path / e["path"] / "InRelease").write_text("signed")
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "k.asc").write_text("key")
    for e in first["images"] + first["models"] + first["wheels"]:
        (tmp_path / e["path"]).parent.mkdir(parents=True, exist_ok=True)
        if e in first["images"]:
            (tmp_path / e["path"]).write_text("tar")
        else:
            (tmp_path / e["path"]).mkdir()
            (tmp_path / e["path"] / "f").write_text("x")
    manifest = build(tmp_path, bundle.items_from_plan(first), created="t", inventory="i")
    again = bundle.plan(tmp_path, NEEDS, manifest, build_images=BUILD)
    assert all(e["reuse"] for kind in again.values() for e in kind)
    # A package more on one host: that distribution's repository is resolved again, nothing else.
    more = dict(NEEDS, **{"gw-01": dict(NEEDS["gw-01"], packages=["nginx", "jq", "mtail"])})
    changed = bundle.plan(tmp_path, more, manifest, build_images=BUILD)
    assert [a["reuse"] for a in changed["apt"]] == [False, True]
    # A file gone: its item is collected again; refresh redoes everything.
    (tmp_path / "models" / "qwen3-tiny" / "f").unlink()
    assert not bundle.plan(tmp_path, NEEDS, manifest, build_images=BUILD)["models"][0]["reuse"]
    assert not any(e["reuse"] for kind in bundle.plan(tmp_path, NEEDS, manifest, build_images=BUILD,
                                                      refresh=True).values() for e in kind)


def test_plan_names_what_it_cannot_build(tmp_path):
    rhel = {"distribution": "RedHat", "version": "9.4", "major": "9", "machine": "x86_64"}
    with pytest.raises(BundleError) as err:
        bundle.plan(tmp_path, {"h1": {"os": rhel, "packages": ["x"]}}, build_images=BUILD)
    # No role implements a release without apt (roles/*/meta/main.yml): no mirror serves it either.
    assert str(err.value) == (
        "h1 runs redhat-9: the bundle builds apt repositories only (debian, ubuntu), "
        "for the releases the roles implement (roles/*/meta/main.yml, docs/compatibility.md); no role installs on "
        "redhat-9. Install a supported release on these hosts or build the bundle with an inventory that leaves "
        "them out")
    with pytest.raises(BundleError, match=r"triton_fleet_bundle_build_images\.debian-13"):
        bundle.plan(tmp_path, {"h1": {"os": dict(DEB12, major="13"), "packages": ["x"]}}, build_images=BUILD)
    with pytest.raises(BundleError, match="architecture 'ppc64le'"):
        bundle.plan(tmp_path, {"h1": {"os": dict(DEB12, machine="ppc64le"), "packages": ["x"]}}, build_images=BUILD)


def test_distribution_keys():
    assert bundle.distribution_key("Ubuntu", "22.04", "22") == "ubuntu-22.04"
    assert bundle.distribution_key("Debian", "12.8", "12") == "debian-12"


def test_items_from_plan_say_what_each_is_for_and_where_it_came_from(tmp_path):
    p = bundle.plan(tmp_path, NEEDS, build_images=BUILD)
    items = {i["path"]: i for i in bundle.items_from_plan(p, {"triton-fleet/tritonserver-lab:abc": "sha256:1"})}
    assert items["apt/ubuntu-24.04-amd64"]["origin"].endswith("nvidia-container-toolkit (https://m/x)")
    assert items["images/triton-fleet_tritonserver-lab_abc.tar"]["origin"] == "archive /srv/lab.tar"
    assert items["images/triton-fleet_tritonserver-lab_abc.tar"]["meta"]["id"] == "sha256:1"
    assert items["keys"]["kind"] == "key"
    assert {i["kind"] for i in items.values()} == {"apt", "image", "model", "wheels", "key"}


def _module():
    import triton_fleet_bundle

    return triton_fleet_bundle


def _params(**kw):
    base = {"needs": None, "build_images": {}, "refresh": False, "plan": None, "image_ids": {}, "inventory": "inv",
            "full": True}
    return dict(base, **kw)


def test_module_writes_the_manifest_once_then_verifies_and_checks(tmp_path):
    mod = _module()
    p = bundle.plan(tmp_path, {"node1": NEEDS["node1"]}, build_images=BUILD)
    (tmp_path / "apt" / "debian-12-amd64").mkdir(parents=True)
    (tmp_path / "apt" / "debian-12-amd64" / "InRelease").write_text("signed")
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "k.asc").write_text("key")
    (tmp_path / "images").mkdir()
    (tmp_path / p["images"][0]["path"]).write_text("tar")
    (tmp_path / "models" / "qwen3-tiny").mkdir(parents=True)
    (tmp_path / "models" / "qwen3-tiny" / "config.json").write_text("{}")
    err, changed, out = mod.run(_params(action="manifest", dir=str(tmp_path), plan=p))
    assert err is None and changed and out["size"][-1].split()[0] == "total"
    err, changed, _ = mod.run(_params(action="manifest", dir=str(tmp_path), plan=p))
    assert err is None and not changed
    assert mod.run(_params(action="verify", dir=str(tmp_path))) == (None, False, {"problems": []})
    err, _, out = mod.run(_params(action="check", dir=str(tmp_path), needs={"node1": NEEDS["node1"]}))
    assert err is None and out["hosts"] == {"node1": {"apt": "apt/debian-12-amd64", "images": {
        "triton-fleet/tritonserver-lab:abc": "images/triton-fleet_tritonserver-lab_abc.tar"}}}
    (tmp_path / "models" / "qwen3-tiny" / "config.json").write_text("[]")
    err, _, out = mod.run(_params(action="verify", dir=str(tmp_path)))
    assert "does not match its manifest (1 problem): models/qwen3-tiny/config.json: sha256 differs" in err
    assert err.endswith("Nothing was changed.")
    err, _, _ = mod.run(_params(action="check", dir=str(tmp_path), needs={"gw-01": NEEDS["gw-01"]}))
    assert "lacks what the inventory needs" in err and "wheels for cp311-x86_64 (needed by gw-01)" in err


def test_module_removes_what_an_earlier_build_left_and_refuses_strangers(tmp_path):
    mod = _module()
    p = bundle.plan(tmp_path, {"node1": dict(NEEDS["node1"], packages=[])}, build_images=BUILD)
    (tmp_path / "images").mkdir()
    (tmp_path / p["images"][0]["path"]).write_text("tar")
    (tmp_path / "images" / "old-image.tar").write_text("older")
    (tmp_path / "models" / "qwen3-tiny").mkdir(parents=True)
    (tmp_path / "models" / "qwen3-tiny" / "config.json").write_text("{}")
    err, changed, out = mod.run(_params(action="manifest", dir=str(tmp_path), plan=p), check_mode=True)
    assert err is None and changed and out["removed"] == ["images/old-image.tar"]
    assert (tmp_path / "images" / "old-image.tar").exists()
    err, changed, out = mod.run(_params(action="manifest", dir=str(tmp_path), plan=p))
    assert err is None and out["removed"] == ["images/old-image.tar"] and not (tmp_path / "images" / "old-image.tar").exists()
    (tmp_path / "notes.txt").write_text("mine")
    err, _, _ = mod.run(_params(action="manifest", dir=str(tmp_path), plan=p))
    assert "notes.txt: no bundle item accounts for this file" in err and (tmp_path / "notes.txt").exists()


def test_module_refuses_a_directory_without_a_manifest(tmp_path):
    err, _, _ = _module().run(_params(action="verify", dir=str(tmp_path)))
    assert "has no bundle-manifest.json: it is not a bundle" in err


def test_size_report(tmp_path):
    m = build(tmp_path, _tree(tmp_path), created="t", inventory="i")
    lines = bundle.size_report(m)
    assert lines[-1].split()[:3] == ["total", "0.0", "MiB"] and "(4 files)" in lines[-1]
