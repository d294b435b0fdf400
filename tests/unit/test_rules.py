"""Prometheus recording and alert rules: render the templates, `promtool check rules`, `promtool test rules`.

monitoring/rules/*.yml are templates (thresholds as [[ prometheus_alert_* ]] from roles/prometheus/defaults);
they are rendered here the way the prometheus role renders them ([[ ]] delimiters), then checked
with Debian's promtool (package `prometheus`, listed in tools/host-packages.txt).
"""

import re
import shutil
import subprocess
from pathlib import Path

import jinja2
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "monitoring" / "rules"
TESTS = ROOT / "monitoring" / "tests"
DEFAULTS = ROOT / "roles" / "prometheus" / "defaults" / "main.yml"


def promtool():
    path = shutil.which("promtool")
    if not path:
        pytest.fail("promtool not found: install Debian's `prometheus` package (listed in tools/host-packages.txt)")
    return path


def render(template_text, variables):
    """Render like the prometheus role does: ansible.builtin.template with [[ ]] variable delimiters."""
    env = jinja2.Environment(
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        variable_start_string="[[",
        variable_end_string="]]",
    )
    return env.from_string(template_text).render(**variables)


def defaults():
    return yaml.safe_load(DEFAULTS.read_text())


def render_tree(dest, overrides=None):
    """Rendered rules in dest/rules, unit tests copied to dest/tests (their rule_files are ../rules/x.yml)."""
    variables = {**defaults(), **(overrides or {})}
    (dest / "rules").mkdir(parents=True, exist_ok=True)
    (dest / "tests").mkdir(exist_ok=True)
    for f in sorted(RULES.glob("*.yml")):
        (dest / "rules" / f.name).write_text(render(f.read_text(), variables))
    for f in sorted(TESTS.glob("*.yml")):
        shutil.copy(f, dest / "tests" / f.name)
    return dest


def run(*args, cwd):
    return subprocess.run([promtool(), *args], check=False, cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    return render_tree(tmp_path_factory.mktemp("rules"))


def alerts_in_rules():
    names = []
    for f in sorted(RULES.glob("*.yml")):
        doc = yaml.safe_load(f.read_text())  # templates are valid YAML too
        for group in doc["groups"]:
            names += [r["alert"] for r in group["rules"] if "alert" in r]
    return names


def test_templates_are_valid_yaml_and_fully_rendered(rendered):
    assert sorted(p.name for p in RULES.glob("*.yml")) == sorted(p.name for p in (rendered / "rules").iterdir())
    for f in (rendered / "rules").iterdir():
        text = f.read_text()
        assert "[[" not in text and "]]" not in text, f"{f.name}: placeholder left unrendered"
        yaml.safe_load(text)


def test_every_threshold_variable_is_used_and_defined():
    used = set()
    for f in RULES.glob("*.yml"):
        used |= set(re.findall(r"\[\[\s*(\w+)\s*\]\]", f.read_text()))
    thresholds = {k for k in defaults() if k.startswith("prometheus_alert_")}
    assert used - thresholds == set(), "placeholders without a default in roles/prometheus/defaults/main.yml"
    assert thresholds - used == set(), "threshold defaults no rule uses"


def test_promtool_check_rules(rendered):
    files = sorted(str(p) for p in (rendered / "rules").glob("*.yml"))
    res = run("check", "rules", "--lint=all", "--lint-fatal", *files, cwd=rendered)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("SUCCESS") == len(files)


def test_promtool_test_rules(rendered):
    files = sorted(str(p.relative_to(rendered)) for p in (rendered / "tests").glob("*.yml"))
    assert files, "no rule unit tests in monitoring/tests"
    res = run("test", "rules", *files, cwd=rendered)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "FAILED" not in res.stdout + res.stderr


def test_every_alert_is_tested_firing_and_not_firing():
    firing, quiet = set(), set()
    for f in TESTS.glob("*.yml"):
        doc = yaml.safe_load(f.read_text())
        for rf in doc["rule_files"]:
            assert (TESTS / rf).resolve().parent == RULES, f"{f.name}: rule_files must point into monitoring/rules"
        for case in doc["tests"]:
            for t in case.get("alert_rule_test", []):
                (firing if t.get("exp_alerts") else quiet).add(t["alertname"])
    alerts = alerts_in_rules()
    assert len(alerts) == len(set(alerts)), "duplicate alert names"
    assert sorted(set(alerts) - firing) == [], "alerts without a firing test"
    assert sorted(set(alerts) - quiet) == [], "alerts without a not-firing test"
    assert sorted((firing | quiet) - set(alerts)) == [], "tests for alerts that do not exist"


def test_every_alert_has_severity_and_summary():
    for f in RULES.glob("*.yml"):
        for group in yaml.safe_load(f.read_text())["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    assert rule["labels"]["severity"] in ("critical", "warning", "info"), rule["alert"]
                    assert rule["annotations"].get("summary") and rule["annotations"].get("description"), rule["alert"]


def test_thresholds_reach_the_rules(tmp_path):
    """Raising the GPU temperature threshold above the test's 90 °C must make the firing test fail."""
    tree = render_tree(tmp_path, {"prometheus_alert_gpu_temp_celsius": 95})
    assert "DCGM_FI_DEV_GPU_TEMP > 95" in (tree / "rules" / "gpu.yml").read_text()
    res = run("test", "rules", "tests/gpu.yml", cwd=tree)
    assert res.returncode != 0
    assert "GPUTemperatureHigh" in res.stdout + res.stderr


def test_broken_rule_is_refused(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text("groups:\n  - name: x\n    rules:\n      - alert: Broken\n        expr: rate(up[5m]\n")
    res = run("check", "rules", str(bad), cwd=tmp_path)
    assert res.returncode != 0


def test_render_refuses_unknown_placeholder():
    with pytest.raises(jinja2.UndefinedError):
        render("expr: x > [[ nope ]]\n", {})
