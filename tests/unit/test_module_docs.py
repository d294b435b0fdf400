"""Every module in library/ and roles/*/library/ passes what `ansible-test sanity` (validate-modules)
would check: DOCUMENTATION, EXAMPLES and RETURN parse; DOCUMENTATION's options equal the argument spec;
an `attributes` block that says what the module does about check and diff mode; RETURN entries with
type and sample; ansible-doc renders it. New modules are picked up by the glob.
"""

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
MODULES = sorted([*ROOT.glob("library/*.py"), *ROOT.glob("roles/*/library/*.py")])
IDS = [str(m.relative_to(ROOT)) for m in MODULES]
SUPPORT = {"full", "partial", "none"}


def doc_strings(path):
    """{DOCUMENTATION|EXAMPLES|RETURN: text} from the module's top-level string assignments."""
    out = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in ("DOCUMENTATION", "EXAMPLES", "RETURN"):
                    out[target.id] = node.value.value
    return out


class _Captured(Exception):
    pass


def module_kwargs(path):
    """The keyword arguments main() gives AnsibleModule (argument_spec, supports_check_mode, ...)."""
    spec = importlib.util.spec_from_file_location("_module_under_doc_test_" + path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert hasattr(mod, "AnsibleModule"), f"{path.name}: imports AnsibleModule by name (the test replaces it)"

    def recorder(*args, **kwargs):
        if args:
            kwargs["argument_spec"] = args[0]
        raise _Captured(kwargs)

    mod.AnsibleModule = recorder
    with pytest.raises(_Captured) as got:
        mod.main()
    return got.value.args[0]


def normalise(value):
    return sorted(value) if isinstance(value, (list, tuple, set)) and all(isinstance(v, str) for v in value) \
        else value


def compare_options(doc_options, spec, where, errors):
    doc_options = doc_options or {}
    if set(doc_options) != set(spec):
        errors.append(f"{where}: documented options {sorted(doc_options)} != argument_spec {sorted(spec)}")
    for name in sorted(set(doc_options) & set(spec)):
        d, s = doc_options[name] or {}, spec[name]
        at = f"{where}.{name}"
        if not d.get("description"):
            errors.append(f"{at}: no description")
        for key, empty in (("type", "str"), ("elements", None), ("default", None), ("required", False),
                           ("choices", None), ("aliases", None)):
            dv, sv = d.get(key, empty), s.get(key, empty)
            if key == "type" and sv == "raw" and "type" not in d:
                dv = "raw"
            if normalise(dv) != normalise(sv):
                errors.append(f"{at}: {key} is {dv!r} in DOCUMENTATION but {sv!r} in argument_spec")
        if s.get("required") and "default" in d:
            errors.append(f"{at}: a required option documents a default")
        if "options" in s or "suboptions" in d:
            compare_options(d.get("suboptions"), s.get("options") or {}, at, errors)


def return_errors(entries, where, top=True):
    errors = []
    for name, entry in (entries or {}).items():
        at = f"{where}.{name}"
        if not isinstance(entry, dict):
            errors.append(f"{at}: not a mapping")
            continue
        for key in ("description", "type") + (("returned", "sample") if top else ()):
            if key not in entry:
                errors.append(f"{at}: no {key}")
        if entry.get("contains"):
            errors += return_errors(entry["contains"], at, top=False)
    return errors


@pytest.fixture(scope="module", params=MODULES, ids=IDS)
def module(request):
    path = request.param
    texts = doc_strings(path)
    parsed = {}
    for key in ("DOCUMENTATION", "EXAMPLES", "RETURN"):
        assert key in texts, f"{path.name}: no {key} string"
        try:
            parsed[key] = yaml.safe_load(texts[key])
        except yaml.YAMLError as exc:
            pytest.fail(f"{path.name}: {key} is not valid YAML: {exc}")
    return path, parsed, module_kwargs(path), path.read_text()


def test_documentation_names_the_module(module):
    path, parsed, _, _ = module
    doc = parsed["DOCUMENTATION"]
    assert isinstance(doc, dict), f"{path.name}: DOCUMENTATION is not a mapping"
    assert doc.get("module") == path.stem
    for key in ("short_description", "description", "author"):
        assert doc.get(key), f"{path.name}: DOCUMENTATION has no {key}"
    examples = parsed["EXAMPLES"]
    assert isinstance(examples, list) and examples, f"{path.name}: EXAMPLES is not a list of tasks"


def test_options_equal_the_argument_spec(module):
    path, parsed, kwargs, _ = module
    errors = []
    compare_options(parsed["DOCUMENTATION"].get("options"), kwargs.get("argument_spec") or {}, path.stem, errors)
    assert not errors, "\n".join(errors)


def test_attributes_say_what_the_module_does(module):
    path, parsed, kwargs, source = module
    attrs = parsed["DOCUMENTATION"].get("attributes") or {}
    for name in ("check_mode", "diff_mode"):
        assert name in attrs, f"{path.name}: DOCUMENTATION.attributes has no {name}"
        assert attrs[name].get("support") in SUPPORT, f"{path.name}: attributes.{name}.support not in {SUPPORT}"
        assert attrs[name].get("description"), f"{path.name}: attributes.{name} has no description"
    check = attrs["check_mode"]["support"] != "none"
    assert check == bool(kwargs.get("supports_check_mode")), (
        f"{path.name}: attributes.check_mode.support={attrs['check_mode']['support']} but "
        f"supports_check_mode={kwargs.get('supports_check_mode')}")
    asks_diff = "module._diff" in source
    returns_diff = re.search(r"""["']diff["']\s*[\]:]|\bdiff=""", source) is not None
    assert returns_diff <= asks_diff, f"{path.name}: returns a diff without checking module._diff"
    diff = attrs["diff_mode"]["support"] != "none"
    assert diff == returns_diff, (
        f"{path.name}: attributes.diff_mode.support={attrs['diff_mode']['support']} but the module "
        f"{'returns' if returns_diff else 'never returns'} a diff")


def test_return_entries_have_type_and_sample(module):
    path, parsed, _, _ = module
    assert isinstance(parsed["RETURN"], dict) and parsed["RETURN"], f"{path.name}: RETURN is empty"
    errors = return_errors(parsed["RETURN"], path.stem)
    assert not errors, "\n".join(errors)


def test_ansible_doc_renders_every_module():
    dirs = sorted({str(m.parent) for m in MODULES})
    cmd = [str(Path(sys.executable).with_name("ansible-doc")), "-t", "module", "--json"]
    for d in dirs:
        cmd += ["-M", d]
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    done = subprocess.run(cmd + [m.stem for m in MODULES], capture_output=True, text=True, env=env, cwd=ROOT,
                          check=False)
    assert done.returncode == 0, done.stderr
    docs = json.loads(done.stdout)
    assert sorted(docs) == sorted(m.stem for m in MODULES), done.stderr
    for name, entry in docs.items():
        assert entry.get("doc", {}).get("module") == name, f"ansible-doc {name}: {done.stderr}"
