"""The node-side/controller-side split of the unit tests (tests/conftest.py) stays complete.

tools/run-node-tests runs the `node` tests under the managed hosts' Python (3.11) with only
tools/node-tests/requirements.txt installed; these checks keep that run meaningful.
"""

import importlib.util
import re
import sys
from pathlib import Path

# By path: `import conftest` would find whichever conftest module pytest loaded first
# (tests/unit/openai_api has its own).
_SPEC = importlib.util.spec_from_file_location("tf_root_conftest", Path(__file__).resolve().parents[1] / "conftest.py")
conftest = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(conftest)

ROOT = Path(__file__).resolve().parents[2]
TESTS = sorted((ROOT / "tests/unit").glob("test_*.py"))
REQS = ROOT / "tools/node-tests/requirements.txt"

# Host code no unit test can import, with the reason. A new host file must get a node-side test
# or an entry here.
NOT_IMPORTABLE = {
    # Triton's python backend (triton_python_backend_utils, torch) only exists in the Triton image;
    # roles/triton_server/molecule runs it there. Its request logic is generation_request.py (tested).
    "model": "runs inside Triton's python backend",
}

# Import names whose distribution name differs.
DIST = {"yaml": "pyyaml", "google": "protobuf"}


def node_tests():
    return {t: conftest.node_imports(t) for t in TESTS if conftest.node_imports(t)}


def test_the_split_finds_both_kinds():
    nodes = node_tests()
    assert ROOT / "tests/unit/test_nvidia_smi.py" in nodes
    assert ROOT / "tests/unit/test_gpu_facts.py" in nodes, "module tests reach library/ modules"
    assert ROOT / "tests/unit/test_trtllm_engine.py" in nodes, "helpers (engine_modhelper) are followed"
    assert ROOT / "tests/unit/test_role_specs.py" not in nodes


def test_every_host_file_is_exercised_by_a_node_side_test():
    reached = set().union(*node_tests().values())
    sources = conftest.node_side_sources()
    untested = sorted(n for n in sources if n not in reached and n not in NOT_IMPORTABLE and n != "triton_fleet")
    assert not untested, (
        f"host code without a node-side unit test (so never run under the managed hosts' Python): {untested}; "
        "import it from a test in tests/unit/, or list it in NOT_IMPORTABLE with the reason")
    stale = sorted(set(NOT_IMPORTABLE) - set(sources))
    assert not stale, f"NOT_IMPORTABLE names files that no longer exist: {stale}"


def test_node_side_tests_need_only_the_node_requirements():
    pinned = {re.split(r"[=<>\[ ]", line, maxsplit=1)[0].lower()
              for line in REQS.read_text().splitlines() if line.strip() and not line.startswith("#")}
    local = {p.stem for p in (ROOT / "tests/unit").glob("*.py")} | {"conftest"}
    project = set(conftest.node_side_sources()) | {"triton_fleet", "ansible"}
    missing = {}
    for test in node_tests():
        for name in conftest.imported_names(test):
            top = name.split(".")[0]
            if top in sys.stdlib_module_names or top in local or top in project or name in project:
                continue
            if DIST.get(top, top).lower() not in pinned:
                missing.setdefault(top, []).append(test.name)
    assert not missing, f"node-side tests import what {REQS.relative_to(ROOT)} does not pin: {missing}"


def test_requirements_are_exact_pins():
    for line in REQS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            assert re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[0-9][0-9A-Za-z.]*", line.strip()), line
