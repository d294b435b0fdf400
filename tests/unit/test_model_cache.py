"""model_cache module: controller/shared/HTTP sources into the model cache, verified by sha256 manifest."""

import functools
import http.server
import json
import os
import threading

import model_cache
import pytest
from engine_modhelper import run_module
from triton_fleet import artifact_manifest as am


@pytest.fixture
def ckpt(tmp_path):
    """A small fake Hugging Face checkpoint."""
    root = tmp_path / "export" / "qwen3-tiny"
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 2}))
    (root / "tokenizer.json").write_text('{"model": {}}')
    (root / "model.safetensors").write_bytes(bytes(range(256)) * 400)
    return str(root)


def manifest_of(ckpt):
    return run_module(model_cache, {"state": "manifest", "path": ckpt})


def test_manifest_state(ckpt):
    res = manifest_of(ckpt)
    assert not res["changed"] and res["files"] == 3 and res["bytes"] == 102400 + len('{"model": {}}') + len(
        json.dumps({"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 2}))
    assert res["manifest"]["files"]["model.safetensors"]["sha256"] == am.sha256_file(
        os.path.join(ckpt, "model.safetensors"))


def test_manifest_of_a_non_checkpoint_is_refused(tmp_path):
    (tmp_path / "x").write_text("x")
    res = run_module(model_cache, {"state": "manifest", "path": str(tmp_path)})
    assert res["failed"] and "no config.json" in res["msg"]


def test_controller_flow_verify_copy_only_needed_then_present(ckpt, tmp_path):
    m = manifest_of(ckpt)["manifest"]
    dest = str(tmp_path / "models" / "qwen3-tiny@r1")
    v = run_module(model_cache, {"state": "verified", "dest": dest, "manifest": m})
    assert not v["valid"] and v["need"] == ["config.json", "model.safetensors", "tokenizer.json"]
    # what the role does for a controller source: copy the needed files into the staging area
    for rel in v["need"]:
        os.makedirs(os.path.dirname(os.path.join(v["staging"], rel)), exist_ok=True)
        with open(os.path.join(ckpt, rel), "rb") as s, open(os.path.join(v["staging"], rel), "wb") as d:
            d.write(s.read())
    res = run_module(model_cache, {"state": "present", "dest": dest, "manifest": m, "sources": [v["staging"]]})
    assert res["changed"] and not os.path.exists(v["staging"])
    assert run_module(model_cache, {"state": "verified", "dest": dest, "manifest": m})["valid"]
    again = run_module(model_cache, {"state": "present", "dest": dest, "manifest": m, "sources": [ckpt]})
    assert not again["changed"]
    # corruption: detected, only the broken file is needed again
    with open(os.path.join(dest, "model.safetensors"), "r+b") as handle:
        handle.seek(1000)
        handle.write(b"\xff")
    v2 = run_module(model_cache, {"state": "verified", "dest": dest, "manifest": m})
    assert not v2["valid"] and v2["need"] == ["model.safetensors"] and "corrupt" in v2["msg"]
    fixed = run_module(model_cache, {"state": "present", "dest": dest, "manifest": m, "sources": [ckpt]})
    assert fixed["copied"] == ["model.safetensors"]


def test_shared_path_source_and_check_mode(ckpt, tmp_path):
    m = manifest_of(ckpt)["manifest"]
    dest = str(tmp_path / "c" / "qwen3-tiny@r1")
    chk = run_module(model_cache, {"state": "present", "dest": dest, "manifest": m, "sources": [ckpt]},
                     check_mode=True)
    assert chk["changed"] and not os.path.exists(dest)
    res = run_module(model_cache, {"state": "present", "dest": dest, "manifest": m, "sources": [ckpt]})
    assert res["changed"] and res["bytes_copied"] == sum(f["size"] for f in m["files"].values())


def test_missing_shared_path_is_explained(ckpt, tmp_path):
    m = manifest_of(ckpt)["manifest"]
    res = run_module(model_cache, {"state": "present", "dest": str(tmp_path / "d"), "manifest": m,
                                   "sources": [str(tmp_path / "nfs-not-mounted")]})
    assert res["failed"] and "mount the shared path" in res["msg"]


def test_corrupt_source_never_reaches_dest(ckpt, tmp_path):
    m = manifest_of(ckpt)["manifest"]
    with open(os.path.join(ckpt, "tokenizer.json"), "w") as handle:
        handle.write('{"model": []}')  # same size, different bytes
    dest = str(tmp_path / "d")
    res = run_module(model_cache, {"state": "present", "dest": dest, "manifest": m, "sources": [ckpt]})
    assert res["failed"] and "tokenizer.json" in res["msg"] and "incomplete or corrupt" in res["msg"]
    assert not os.path.exists(dest)


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    requests = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        RangeHandler.requests.append((self.path, self.headers.get("Range")))
        path = self.translate_path(self.path)
        if not os.path.isfile(path):
            self.send_error(404)
            return
        data = open(path, "rb").read()
        rng = self.headers.get("Range")
        if rng:
            start = int(rng.split("=")[1].rstrip("-"))
            self.send_response(206)
            body = data[start:]
        else:
            self.send_response(200)
            body = data
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def http_root(ckpt):
    m = manifest_of(ckpt)["manifest"]
    with open(os.path.join(ckpt, model_cache.MANIFEST_NAME), "wb") as handle:
        handle.write(am.dump_manifest(m))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(RangeHandler, directory=ckpt))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    RangeHandler.requests = []
    yield f"http://127.0.0.1:{server.server_address[1]}", m
    server.shutdown()


def test_http_source_with_manifest_and_resume(http_root, tmp_path, ckpt):
    url, m = http_root
    dest = str(tmp_path / "models" / "qwen3-tiny@r1")
    staging = am.staging_path(dest)
    os.makedirs(staging)
    with open(os.path.join(ckpt, "model.safetensors"), "rb") as s, \
            open(os.path.join(staging, "model.safetensors.part"), "wb") as d:
        d.write(s.read(5000))  # an interrupted download
    res = run_module(model_cache, {"state": "present", "dest": dest, "url": url})
    assert res.get("failed") is not True, res
    assert res["changed"] and am.verify_tree(dest, m, manifest_name=model_cache.MANIFEST_NAME)["valid"]
    assert ("/model.safetensors", "bytes=5000-") in RangeHandler.requests
    assert not run_module(model_cache, {"state": "present", "dest": dest, "url": url})["changed"]


def test_http_manifest_missing_is_explained(http_root, tmp_path):
    url, _ = http_root
    res = run_module(model_cache, {"state": "present", "dest": str(tmp_path / "d"), "url": url + "/nope"})
    assert res["failed"] and "cannot read manifest" in res["msg"]


def test_shared_source_with_published_manifest(ckpt, tmp_path):
    pub = run_module(model_cache, {"state": "manifest", "path": ckpt, "write": True})
    assert pub["changed"] and os.path.isfile(os.path.join(ckpt, model_cache.MANIFEST_NAME))
    assert not run_module(model_cache, {"state": "manifest", "path": ckpt, "write": True})["changed"]
    dest = str(tmp_path / "d")
    res = run_module(model_cache, {"state": "present", "dest": dest, "sources": [ckpt]})
    assert res["changed"] and res["digest"] == pub["digest"]
    nomani = run_module(model_cache, {"state": "present", "dest": dest, "sources": [str(tmp_path)]})
    assert nomani["failed"] and "no manifest" in nomani["msg"]


def test_missing_shared_source_is_named(tmp_path, monkeypatch):
    import io
    import json as _json
    from contextlib import redirect_stdout

    import model_cache
    from ansible.module_utils import basic
    from ansible.module_utils.common.text.converters import to_bytes

    missing = str(tmp_path / "not-mounted")
    args = {"state": "present", "dest": str(tmp_path / "dest"), "sources": [missing]}
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(_json.dumps({"ANSIBLE_MODULE_ARGS": args})))
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    buf = io.StringIO()
    with redirect_stdout(buf):
        try:
            model_cache.main()
        except SystemExit:
            pass
    out = _json.loads(buf.getvalue()[buf.getvalue().index("{"):])
    assert out["failed"] and missing in out["msg"] and "mount the shared path" in out["msg"]
