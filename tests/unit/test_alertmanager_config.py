"""Alertmanager configuration from role variables (module_utils/triton_fleet/alertmanager_config.py).

The generated file is also checked by Debian's amtool (package prometheus-alertmanager).
"""

import shutil
import subprocess

import pytest
import yaml
from triton_fleet import alertmanager_config as am

FULL = [
    {"name": "ops", "webhook_urls": ["https://hooks.example.internal/alert"], "email_to": "ops@example.com"},
    {
        "name": "pager",
        "slack_api_url": "https://hooks.slack.example/T0/B0/x",
        "slack_channel": "#llm-pages",
        "send_resolved": False,
    },
    {"name": "null"},
]
SMTP = {"smarthost": "mail.example.com:587", "from": "alertmanager@example.com", "auth_password": "s3cret"}


def test_full_config_routes_groups_and_inhibits():
    cfg = am.build_config(FULL, "ops", "pager", SMTP)
    assert cfg["route"]["receiver"] == "ops"
    assert cfg["route"]["group_by"] == ["alertname", "group"]
    assert cfg["route"]["routes"] == [{"receiver": "pager", "matchers": ['severity="critical"'], "continue": False}]
    assert cfg["global"]["smtp_smarthost"] == "mail.example.com:587"
    assert cfg["global"]["smtp_auth_password"] == "s3cret"
    ops, pager, null = cfg["receivers"]
    assert ops["webhook_configs"][0]["url"] == "https://hooks.example.internal/alert"
    assert ops["email_configs"] == [{"to": "ops@example.com", "send_resolved": True}]
    assert pager["slack_configs"][0]["channel"] == "#llm-pages"
    assert pager["slack_configs"][0]["send_resolved"] is False
    assert null == {"name": "null"}
    sources = [r["source_matchers"] for r in cfg["inhibit_rules"]]
    assert ['alertname="GatewayNginxDown"'] in sources


def test_no_critical_receiver_means_no_sub_route():
    cfg = am.build_config([{"name": "default"}], "default")
    assert "routes" not in cfg["route"]
    assert "smtp_smarthost" not in cfg["global"]


@pytest.mark.parametrize(
    ("receivers", "default", "critical", "smtp", "message"),
    [
        ([], "x", "", None, "non-empty list"),
        ([{"name": "a"}, {"name": "a"}], "a", "", None, "unique"),
        ([{"name": "a"}], "b", "", None, "not in alertmanager_receivers"),
        ([{"name": "a"}], "a", "pager", None, "alertmanager_critical_receiver is 'pager'"),
        ([{"name": "a b"}], "a b", "", None, "may only use"),
        ([{"name": "a", "webhook_urls": ["ftp://x"]}], "a", "", None, "not an http"),
        ([{"name": "a", "email_to": "nobody"}], "a", "", SMTP, "not an e-mail"),
        ([{"name": "a", "email_to": "a@b.c"}], "a", "", {}, "need alertmanager_smtp with smarthost, from"),
        ([{"name": "a", "slack_channel": "#x"}], "a", "", None, "both slack_api_url and slack_channel"),
        ([{"name": "a", "pagerduty": "x"}], "a", "", None, "unknown keys"),
        ([{"webhook_urls": ["http://x"]}], "a", "", None, "needs a name"),
    ],
)
def test_bad_input_is_refused(receivers, default, critical, smtp, message):
    with pytest.raises(am.AlertmanagerConfigError, match=message):
        am.build_config(receivers, default, critical, smtp)


@pytest.mark.parametrize("receivers", [FULL, [{"name": "default"}]])
def test_amtool_accepts_the_output(tmp_path, receivers):
    amtool = shutil.which("amtool")
    if not amtool:
        pytest.fail("amtool not found: install Debian's prometheus-alertmanager (tools/host-packages.txt)")
    default = receivers[0]["name"]
    cfg = am.build_config(receivers, default, "pager" if len(receivers) > 1 else "", SMTP)
    f = tmp_path / "alertmanager.yml"
    f.write_text(yaml.safe_dump(cfg, sort_keys=False))
    res = subprocess.run([amtool, "check-config", str(f)], check=False, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout


def test_amtool_rejects_a_broken_config(tmp_path):
    amtool = shutil.which("amtool")
    if not amtool:
        pytest.fail("amtool not found")
    f = tmp_path / "alertmanager.yml"
    f.write_text("route:\n  receiver: missing\nreceivers: [{name: other}]\n")
    assert subprocess.run([amtool, "check-config", str(f)], check=False, capture_output=True).returncode != 0


# The filter plugin runs on the controller (ansible.errors): not under the target Pythons.
@pytest.mark.controller
def test_filter_plugin_builds_and_wraps_errors():
    import importlib.util
    from pathlib import Path

    from ansible.errors import AnsibleFilterError

    path = Path(__file__).resolve().parents[2] / "filter_plugins/alertmanager_config.py"
    spec = importlib.util.spec_from_file_location("alertmanager_config_filter", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    f = mod.FilterModule().filters()["triton_fleet_alertmanager_config"]
    cfg = f([{"name": "default"}], "default", "", {}, ["alertname"], {"repeat_interval": "1h"})
    assert cfg["route"]["group_by"] == ["alertname"]
    assert cfg["route"]["repeat_interval"] == "1h"
    with pytest.raises(AnsibleFilterError, match="not in alertmanager_receivers"):
        f([{"name": "default"}], "missing")
