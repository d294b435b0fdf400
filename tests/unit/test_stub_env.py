"""The stub/numpy check (roles/triton_server/files/transformers/stub_env.py) on synthetic stub binaries."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "roles/triton_server/files/transformers"))

import stub_env  # noqa: E402

OLD = b"\x7fELF...pybind11 numpy support requires numpy >= 1.7.0\x00numpy.core.multiarray\x00..."
NEW = b"\x7fELF...numpy._core\x00numpy.core\x00NumpyVersion\x00..."


def test_classifies_stub_binaries():
    assert stub_env.stub_numpy_majors(OLD) == (1,)
    assert stub_env.stub_numpy_majors(NEW) == (1, 2)
    assert stub_env.stub_numpy_majors(b"no markers") == ()


def test_numpy2_under_a_numpy1_stub_is_refused_with_what_to_do():
    msg = stub_env.check("2.2.6", (1,), "/venv/bin/python3", "/ts/stub")
    assert "numpy 2.2.6" in msg and "/venv/bin/python3" in msg and "/ts/stub" in msg
    assert "numpy<2" in msg and "first on PATH" in msg and "EXECUTION_ENV_PATH" in msg and "PYTHONPATH" in msg


@pytest.mark.parametrize(
    ("version", "majors"), [("1.26.4", (1,)), ("2.5.2", (1, 2)), ("1.26.4", (1, 2)), ("2.0.0", ())]
)
def test_matching_or_unknown_passes(version, majors):
    assert stub_env.check(version, majors, "py", "stub") is None


def test_bad_version_string():
    with pytest.raises(ValueError, match="not a numpy version"):
        stub_env.numpy_major("dev")


def test_check_stub_reads_the_file(tmp_path):
    stub = tmp_path / "triton_python_backend_stub"
    stub.write_bytes(OLD)
    assert "built for numpy 1.x only" in stub_env.check_stub(str(stub), numpy_version="2.1.0")
    assert stub_env.check_stub(str(stub), numpy_version="1.26.4") is None


def test_cli_exit_status(tmp_path, capsys):
    assert stub_env.main(["--stub", str(tmp_path / "missing")]) == 2
    stub = tmp_path / "stub"
    stub.write_bytes(b"unknown build")
    assert stub_env.main(["--stub", str(stub)]) == 0
    assert "ok: numpy" in capsys.readouterr().out
