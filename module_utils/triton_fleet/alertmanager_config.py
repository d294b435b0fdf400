"""Alertmanager configuration built from role variables (pure logic, no Ansible import).

The `alertmanager` role passes its receivers, routing and SMTP settings here and renders the returned
dict with `to_nice_yaml`; `amtool check-config` then validates the file before it is activated.

Receivers: a list of {name, webhook_urls?, email_to?, slack_api_url?, slack_channel?, send_resolved?}.
A receiver with no integration drops its alerts (useful as the default in the lab).
Routing: everything goes to `default_receiver`, grouped by alertname and inventory group (one page per
alert per GPU group, not per host); `severity="critical"` goes to `critical_receiver` when set.
"""

import re
from urllib.parse import urlsplit

NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+$")

# Fleet inhibitions: a down host or a down NGINX explains the alerts that follow from it.
DEFAULT_INHIBIT_RULES = [
    {
        # The node exporter target of a host is down: the host is down; silence its other scrape failures.
        "source_matchers": ['alertname="ScrapeTargetDown"', 'job="node"'],
        "target_matchers": ['alertname="ScrapeTargetDown"', 'job!="node"'],
        "equal": ["host"],
    },
    {
        # NGINX down explains the gateway's 5xx / surge alerts on that host.
        "source_matchers": ['alertname="GatewayNginxDown"'],
        "target_matchers": ['alertname=~"GatewayHigh5xxRatio|GatewayAuthFailureSurge|GatewayRateLimitSurge"'],
        "equal": ["host"],
    },
    {
        # A critical alert silences warnings and infos of the same alert name on the same host.
        "source_matchers": ['severity="critical"'],
        "target_matchers": ['severity=~"warning|info"'],
        "equal": ["alertname", "host"],
    },
]


class AlertmanagerConfigError(ValueError):
    """The receiver or routing variables cannot make a valid Alertmanager configuration."""


def _url(value, what):
    parts = urlsplit(str(value))
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise AlertmanagerConfigError(f"{what}: {value!r} is not an http(s) URL.")
    return str(value)


def receiver(spec):
    """One Alertmanager receiver from a role-variable receiver spec."""
    if not isinstance(spec, dict) or not spec.get("name"):
        raise AlertmanagerConfigError(f"every receiver needs a name; got {spec!r}.")
    name = str(spec["name"])
    if not NAME_RE.match(name):
        raise AlertmanagerConfigError(f"receiver name {name!r} may only use letters, digits, '_', '.', '-'.")
    unknown = set(spec) - {"name", "webhook_urls", "email_to", "slack_api_url", "slack_channel", "send_resolved"}
    if unknown:
        raise AlertmanagerConfigError(
            f"receiver {name}: unknown keys {sorted(unknown)}; use webhook_urls, email_to, slack_api_url, "
            "slack_channel, send_resolved."
        )
    resolved = bool(spec.get("send_resolved", True))
    out = {"name": name}
    urls = spec.get("webhook_urls") or []
    if isinstance(urls, str):
        urls = [urls]
    if urls:
        out["webhook_configs"] = [
            {"url": _url(u, f"receiver {name} webhook_urls"), "send_resolved": resolved} for u in urls
        ]
    emails = spec.get("email_to") or []
    if isinstance(emails, str):
        emails = [emails]
    for e in emails:
        if not EMAIL_RE.match(str(e)):
            raise AlertmanagerConfigError(f"receiver {name}: {e!r} is not an e-mail address.")
    if emails:
        out["email_configs"] = [{"to": str(e), "send_resolved": resolved} for e in emails]
    if spec.get("slack_api_url") or spec.get("slack_channel"):
        if not (spec.get("slack_api_url") and spec.get("slack_channel")):
            raise AlertmanagerConfigError(f"receiver {name}: Slack needs both slack_api_url and slack_channel.")
        out["slack_configs"] = [
            {
                "api_url": _url(spec["slack_api_url"], f"receiver {name} slack_api_url"),
                "channel": str(spec["slack_channel"]),
                "send_resolved": resolved,
                "title": "{{ .Status | toUpper }} {{ .CommonLabels.alertname }} ({{ .CommonLabels.group }})",
                "text": "{{ range .Alerts }}{{ .Annotations.summary }}\n{{ end }}",
            }
        ]
    return out


def build_config(
    receivers, default_receiver, critical_receiver="", smtp=None, *, group_by=None, timing=None, inhibit_rules=None
):
    """The whole alertmanager.yml as a dict. Raises AlertmanagerConfigError on bad input."""
    if not isinstance(receivers, list) or not receivers:
        raise AlertmanagerConfigError("alertmanager_receivers must be a non-empty list.")
    built = [receiver(r) for r in receivers]
    names = [r["name"] for r in built]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise AlertmanagerConfigError(f"receiver names must be unique; repeated: {dupes}.")
    for label, value in (
        ("alertmanager_default_receiver", default_receiver),
        ("alertmanager_critical_receiver", critical_receiver),
    ):
        if value and value not in names:
            raise AlertmanagerConfigError(f"{label} is {value!r}, which is not in alertmanager_receivers {names}.")
    if not default_receiver:
        raise AlertmanagerConfigError("alertmanager_default_receiver must name one of alertmanager_receivers.")
    uses_email = any("email_configs" in r for r in built)
    smtp = dict(smtp or {})
    config = {"global": {"resolve_timeout": "5m"}}
    if uses_email:
        missing = [k for k in ("smarthost", "from") if not smtp.get(k)]
        if missing:
            raise AlertmanagerConfigError(
                f"e-mail receivers need alertmanager_smtp with {', '.join(missing)} (e.g. smarthost: mail:587)."
            )
    for key in ("smarthost", "from", "auth_username", "auth_password", "require_tls"):
        if smtp.get(key) not in (None, ""):
            config["global"][f"smtp_{key}"] = smtp[key]
    timing = {"group_wait": "30s", "group_interval": "5m", "repeat_interval": "4h", **(timing or {})}
    route = {"receiver": default_receiver, "group_by": list(group_by or ["alertname", "group"]), **timing}
    if critical_receiver:
        route["routes"] = [{"receiver": critical_receiver, "matchers": ['severity="critical"'], "continue": False}]
    config["route"] = route
    config["inhibit_rules"] = list(DEFAULT_INHIBIT_RULES if inhibit_rules is None else inhibit_rules)
    config["receivers"] = built
    return config
