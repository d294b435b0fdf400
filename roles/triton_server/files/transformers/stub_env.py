"""Does the numpy of the python backend stub's interpreter match the numpy the stub binary was built for?

Triton's python backend stub (``triton_python_backend_stub``) moves tensors between the server and
the model through pybind11's numpy support, compiled into the stub. pybind11 before 2.12 knows only
numpy 1.x (it imports ``numpy.core.multiarray`` and reads numpy 1's array-descriptor layout); run
under numpy 2 it misreads every received tensor: each element arrives as a copy of its first byte
(an INT32 ``[7, 8, 9, 10]`` becomes ``[7, 7, 7, 7]``, a BYTES length prefix ``60 09 00 00`` becomes
``0x60606060`` and the stub dies in ``unpack_from``). pybind11 2.12+ (numpy 2 support) looks the
numpy major up at run time, so its binaries carry the string ``numpy._core`` as well. The stubs in
nvidia-pytriton 0.7.0 carry only ``numpy.core.multiarray`` and its wheel declares ``numpy<2``.

The stub embeds its Python isolated (``PYTHONPATH`` is ignored): its packages come from the
``python3`` found first on ``PATH`` or from the model's ``EXECUTION_ENV_PATH``. This module runs
*in that interpreter*: in the model's ``initialize`` (``model.py``: the model refuses to load, so a
corrupting stub never serves) and as a script before a server starts (bench/gpu; the lab image pins
``numpy==1.26.4`` and relies on the load-time check):

  python3 stub_env.py --stub /opt/tritonserver/backends/python/triton_python_backend_stub

Exit status 0: numpy matches; 1: mismatch (the message says what to do); 2: the stub cannot be read.
"""

import argparse
import os
import sys

# pybind11 >= 2.12 builds "numpy._core" or "numpy.core" at run time from numpy's major version;
# older pybind11 imports "numpy.core.multiarray" only.
_NUMPY2_MARKER = b"numpy._core"
_NUMPY1_MARKER = b"numpy.core.multiarray"


def stub_numpy_majors(stub_bytes):
    """The numpy majors a stub binary's pybind11 can read tensors with: (1,), (1, 2) or () if unknown."""
    if _NUMPY2_MARKER in stub_bytes:
        return (1, 2)
    if _NUMPY1_MARKER in stub_bytes:
        return (1,)
    return ()


def numpy_major(version):
    head = str(version).split(".", 1)[0]
    if not head.isdigit():
        raise ValueError(f"not a numpy version: {version!r}")
    return int(head)


def check(numpy_version, majors, interpreter, stub_path):
    """None when numpy ``numpy_version`` suits a stub supporting ``majors``; else what is wrong and what to do."""
    if not majors:
        return None  # a stub we cannot classify: let it run (the check only refuses a known mismatch)
    major = numpy_major(numpy_version)
    if major in majors:
        return None
    want = "numpy<2 (e.g. numpy==1.26.4)" if max(majors) < 2 else f"numpy {max(majors)}.x or older"
    return (
        f"numpy {numpy_version} in the python backend stub's interpreter ({interpreter}) does not match "
        f"the stub {stub_path}, which was built for numpy {'/'.join(str(m) for m in majors)}.x only: "
        f"every tensor the model receives would be corrupted (INT32 [7, 8, 9, 10] arrives as [7, 7, 7, 7], "
        f"BYTES lengths are misread and the stub crashes). Install {want} in the environment the stub uses: "
        f"the python3 first on PATH of tritonserver, or the model's EXECUTION_ENV_PATH. PYTHONPATH does not "
        f"reach the stub."
    )


def check_stub(stub_path, numpy_version=None, interpreter=None):
    """Read ``stub_path`` and :func:`check` this interpreter's numpy (or ``numpy_version``) against it."""
    with open(stub_path, "rb") as fh:
        data = fh.read()
    if numpy_version is None:
        import numpy

        numpy_version = numpy.__version__
    return check(numpy_version, stub_numpy_majors(data), interpreter or sys.executable, stub_path)


def running_stub_path():
    """Path of the stub binary when called inside the stub process, else None."""
    try:
        exe = os.readlink("/proc/self/exe")
    except OSError:
        return None
    return exe if os.path.basename(exe).startswith("triton_python_backend_stub") else None


def main(argv=None):
    ap = argparse.ArgumentParser(description="Check this interpreter's numpy against a Triton python backend stub.")
    ap.add_argument("--stub", required=True, help="path of triton_python_backend_stub")
    a = ap.parse_args(argv)
    try:
        err = check_stub(a.stub)
    except OSError as exc:
        print(f"cannot read the stub {a.stub}: {exc}", file=sys.stderr)
        return 2
    if err:
        print(err, file=sys.stderr)
        return 1
    import numpy

    print(f"ok: numpy {numpy.__version__} at {sys.executable} suits {a.stub}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
