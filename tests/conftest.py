"""Make the project's module_utils and library importable the way Ansible sees them, and mark each
test module as node-side or controller-side.

A test module is node-side (marker ``node``) when it imports code that runs on managed hosts
(module_utils, a module of library/ or roles/*/library/, a Python file a role copies to hosts), directly
or through a helper module of tests/unit/. tools/run-node-tests runs ``-m node`` under every target Python
(the managed hosts' 3.11), so this file must stay valid Python 3.11. The marker is computed, not written by hand, so it
cannot drift from what a test actually imports; tests/unit/test_node_side.py checks the rest.
"""

import ast
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

for p in (ROOT / "module_utils", ROOT / "library", *sorted(ROOT.glob("roles/*/library"))):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

# Modules import `ansible.module_utils.triton_fleet.*`, which Ansible resolves from the `module_utils`
# setting of ansible.cfg when it builds the module's payload. Outside Ansible the same name has to
# resolve to ours: ansible.module_utils is a regular package, so its search path gets our directory.
import ansible.module_utils  # noqa: E402

if str(ROOT / "module_utils") not in ansible.module_utils.__path__:
    ansible.module_utils.__path__.append(str(ROOT / "module_utils"))


def node_side_sources():
    """{import name: path} of every Python file that runs on managed hosts."""
    names = {}
    for path in sorted(ROOT.glob("module_utils/triton_fleet/*.py")):
        names["triton_fleet." + path.stem if path.stem != "__init__" else "triton_fleet"] = path
    for pattern in ("library/*.py", "roles/*/library/*.py", "roles/*/files/**/*.py"):
        for path in sorted(ROOT.glob(pattern)):
            names[path.stem] = path
    return names


def imported_names(path):
    """Top-level-qualified names a Python file imports (``a.b`` for ``from a import b``, ``import a.b``)."""
    tree = ast.parse(path.read_text(), str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(node.module + "." + alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 1 and path.parent.name == "triton_fleet":
            base = "triton_fleet" + ("." + node.module if node.module else "")
            names.add(base)
            names.update(base + "." + alias.name for alias in node.names)
    return {n[len("ansible.module_utils."):] if n.startswith("ansible.module_utils.triton_fleet") else n
            for n in names}


def declares_controller(path):
    """A test file that says ``pytestmark = pytest.mark.controller`` at module level is controller-side
    even when it imports host code: it also needs the controller's own libraries (ansible's inventory,
    jinja2 rendering done on the controller)."""
    tree = ast.parse(path.read_text(), str(path))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
            if "controller" in ast.unparse(node.value):
                return True
    return False


def node_imports(path, _seen=None):
    """The node-side sources a test file reaches, through helper modules of its own directory."""
    if _seen is None and path.name.startswith("test_") and declares_controller(path):
        return set()
    seen = set() if _seen is None else _seen
    if path in seen:
        return set()
    seen.add(path)
    sources = node_side_sources()
    reached = set()
    for name in imported_names(path):
        if name in sources:
            reached.add(name)
            reached |= node_imports(sources[name], seen)
        helper = path.parent / (name.split(".")[0] + ".py")
        if helper.is_file() and helper != path and name.split(".")[0] not in sources:
            reached |= node_imports(helper, seen)
    return reached


def pytest_configure(config):
    config.addinivalue_line("markers", "node: tests code that runs on managed hosts (run under their Python, 3.11)")
    config.addinivalue_line("markers", "controller: tests controller-side code only (the venv's Python)")


_KIND = {}


def pytest_ignore_collect(collection_path, config):
    # Under a target Python (tools/run-node-tests) controller-side files are not even imported:
    # they need the controller's libraries.
    if os.environ.get("TF_NODE_ONLY") == "1" and collection_path.suffix == ".py" \
            and collection_path.name.startswith("test_"):
        return not node_imports(collection_path)
    return None


def pytest_collection_modifyitems(config, items):
    import pytest

    for item in items:
        path = Path(str(item.fspath))
        if path not in _KIND:
            _KIND[path] = "node" if node_imports(path) else "controller"
        # A controller-side test inside a node-side file (e.g. of a filter plugin) says so itself.
        if item.get_closest_marker("controller") is None:
            item.add_marker(getattr(pytest.mark, _KIND[path]))
