"""The numpy fault of Triton's python backend stub, reproduced with the real server, and the check catching it.

Needs the nvidia-pytriton 0.7.0 wheel's tritonserver and two environments of one Python (whose stub the
wheel carries), so it runs where they are given (skipped otherwise):

  TF_PYTRITON_SITE  a site-packages holding the wheel's pytriton/ and nvidia_pytriton.libs/
                    (pip install --no-deps --target DIR nvidia-pytriton==0.7.0)
  TF_NUMPY1_VENV    a venv with numpy<2 (numpy==1.26.4)
  TF_NUMPY2_VENV    a venv of the same Python with numpy 2 (numpy==2.2.6)

  TF_PYTRITON_SITE=... TF_NUMPY1_VENV=... TF_NUMPY2_VENV=... python -m pytest -q tests/stub_numpy

What it shows: with the numpy-2 venv first on tritonserver's PATH, an echo model receives an INT32
[7, 8, 9, 10] as [7, 7, 7, 7] and a BYTES tensor kills the stub (its length prefix read as four copies
of its first byte), while PYTHONPATH pointing at numpy 1 changes nothing (the stub ignores it); with the
numpy-1 venv first both arrive intact. The project's model (roles/triton_server/files/transformers)
refuses to load under the numpy-2 venv, its reason (Triton's repository index) saying what to install,
and loads past that check under the numpy-1 venv.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = os.environ.get("TF_PYTRITON_SITE")
NP1 = os.environ.get("TF_NUMPY1_VENV")
NP2 = os.environ.get("TF_NUMPY2_VENV")

pytestmark = pytest.mark.skipif(
    not (SITE and NP1 and NP2), reason="set TF_PYTRITON_SITE, TF_NUMPY1_VENV and TF_NUMPY2_VENV (see the docstring)"
)

ECHO_CONFIG = """name: "echo"
backend: "python"
max_batch_size: 0
input [ { name: "ints" data_type: TYPE_INT32 dims: [ -1 ] optional: true },
        { name: "text" data_type: TYPE_STRING dims: [ -1 ] optional: true } ]
output [ { name: "ints_out" data_type: TYPE_INT32 dims: [ -1 ] }, { name: "text_out" data_type: TYPE_STRING dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""

ECHO_MODEL = """import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            tensors = []
            for src, dst in (("ints", "ints_out"), ("text", "text_out")):
                t = pb_utils.get_input_tensor_by_name(r, src)
                if t is not None:
                    pb_utils.Logger.log_info("echo received %s %s" % (src, t.as_numpy().tolist()))
                    tensors.append(pb_utils.Tensor(dst, t.as_numpy()))
            out.append(pb_utils.InferenceResponse(tensors))
        return out
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pyver(venv):
    return subprocess.run(
        [f"{venv}/bin/python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


@pytest.fixture(scope="module")
def server_tree(tmp_path_factory):
    assert pyver(NP1) == pyver(NP2), "both venvs must be of one Python"
    src = Path(SITE) / "pytriton" / "tritonserver"
    dst = tmp_path_factory.mktemp("ts")
    (dst / "backends").mkdir()
    os.symlink(src / "bin", dst / "bin")
    shutil.copytree(src / "backends" / "python", dst / "backends" / "python")
    shutil.copy(src / "python_backend_stubs" / pyver(NP1) / "triton_python_backend_stub", dst / "backends" / "python")
    return dst


def repository(tmp_path):
    repo = tmp_path / "repo"
    (repo / "echo" / "1").mkdir(parents=True)
    (repo / "echo" / "config.pbtxt").write_text(ECHO_CONFIG)
    (repo / "echo" / "1" / "model.py").write_text(ECHO_MODEL)
    sys.path.insert(0, str(ROOT / "module_utils"))
    from triton_fleet import model_repository

    profile = json.loads((ROOT / "tests/fixtures/profiles/lab-cpu-transformers.json").read_text())
    files = {f"1/{p.name}": p.read_text() for p in (ROOT / "roles/triton_server/files/transformers").glob("*.py")}
    rendered = model_repository.render_repository(
        profile, {"checkpoint_dir": str(tmp_path / "no-checkpoint"), "model_files": files}
    )
    for rel, text in rendered.items():
        p = repo / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return repo, rendered.entry_model


class Server:
    def __init__(self, tree, repo, path_venv, pythonpath=None):
        self.port = free_port()
        env = dict(
            os.environ,
            PATH=f"{path_venv}/bin:{os.environ['PATH']}",
            LD_LIBRARY_PATH=str(Path(SITE) / "nvidia_pytriton.libs"),
        )
        env.pop("PYTHONPATH", None)
        if pythonpath:
            env["PYTHONPATH"] = pythonpath
        self.log = repo.parent / f"server-{self.port}.log"
        self.proc = subprocess.Popen(
            [
                f"{tree}/bin/tritonserver",
                f"--backend-directory={tree}/backends",
                f"--model-repository={repo}",
                "--model-control-mode=explicit",
                "--load-model=*",
                "--exit-on-error=false",
                "--allow-metrics=false",
                "--http-address=127.0.0.1",
                f"--http-port={self.port}",
                "--allow-grpc=false",
            ],
            env=env,
            stdout=open(self.log, "w"),
            stderr=subprocess.STDOUT,
        )  # noqa: SIM115
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"{self.base}/v2/health/live", timeout=2):
                    break
            except (urllib.error.URLError, OSError):
                time.sleep(0.3)
        self.wait_settled()

    def post(self, path, body):
        req = urllib.request.Request(self.base + path, data=json.dumps(body).encode(), method="POST")
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as exc:
            return json.loads(exc.read() or b"{}")

    def index(self):
        return {m["name"]: m for m in self.post("/v2/repository/index", {})}

    def wait_settled(self):
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                idx = self.index()
            except (urllib.error.URLError, OSError, ValueError):
                idx = {}
            if idx and all(m.get("state") in ("READY", "UNAVAILABLE") for m in idx.values()):
                return
            time.sleep(0.5)

    def echo(self, inputs):
        return self.post("/v2/models/echo/infer", {"inputs": inputs})

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # a crashed stub can hold the server's shutdown
            self.proc.kill()
            self.proc.wait(timeout=10)


INTS = [{"name": "ints", "shape": [4], "datatype": "INT32", "data": [7, 8, 9, 10]}]
TEXT = [{"name": "text", "shape": [2], "datatype": "BYTES", "data": ["abc", "defgh"]}]


def test_numpy2_corrupts_and_the_model_refuses(server_tree, tmp_path):
    repo, llm = repository(tmp_path)
    np1_site = subprocess.run(
        [f"{NP1}/bin/python3", "-c", "import numpy, os; print(os.path.dirname(os.path.dirname(numpy.__file__)))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    srv = Server(server_tree, repo, NP2, pythonpath=np1_site)  # PYTHONPATH to numpy 1: ignored by the stub
    try:
        assert "error" in srv.echo(INTS)  # the reply is corrupted on the way out too
        assert "echo received ints [7, 7, 7, 7]" in srv.log.read_text()
        assert "not healthy" in srv.echo(TEXT).get("error", "")
        reason = srv.index()[llm].get("reason", "")
        assert srv.index()[llm]["state"] == "UNAVAILABLE"
        assert "numpy 2." in reason and "numpy<2" in reason and "first on PATH" in reason, reason
    finally:
        srv.stop()
    assert "unpack_from requires a buffer" in srv.log.read_text()


def test_numpy1_first_on_path_is_correct(server_tree, tmp_path):
    repo, llm = repository(tmp_path)
    srv = Server(server_tree, repo, NP1)
    try:
        assert srv.echo(INTS)["outputs"][0]["data"] == [7, 8, 9, 10]
        assert "echo received ints [7, 8, 9, 10]" in srv.log.read_text()
        assert srv.echo(TEXT)["outputs"][0]["data"] == ["abc", "defgh"]
        reason = srv.index()[llm].get("reason", "")
        # past the numpy check, the model stops at the next one: this test gives it no checkpoint
        assert "does not match the stub" not in reason and "has no config.json" in reason, reason
    finally:
        srv.stop()
