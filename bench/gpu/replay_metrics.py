#!/usr/bin/env python3
"""Turn the /metrics scrapes saved by tools/bench-triton-generate --save-metrics into OpenMetrics for a replay.

The lent GPU host runs no Prometheus and nothing can reach it, so the run's scrapes travel back as a file
(`# scrape <unix ms>` before each page). This writes them as one OpenMetrics text with a timestamp on
every sample, shifted so that the last scrape lands --end-ago seconds before now (the dashboards' queries
look at the last minutes), and with the labels the fleet's scrape config adds (job, host, group). Then:

  python3 bench/gpu/replay_metrics.py metrics-scrapes.txt replay.om --host h200-lent
  promtool tsdb create-blocks-from openmetrics replay.om /tmp/prom-replay/data
  prometheus --config.file=CONF --storage.tsdb.path=/tmp/prom-replay/data --web.listen-address=127.0.0.1:19391
  tools/check-dashboard-queries --url http://127.0.0.1:19391

TYPE/HELP lines are dropped (every family is replayed untyped: Triton's counters lack OpenMetrics'
`_total` suffix, and rate()/histogram_quantile() work on untyped series alike).
"""

import argparse
import re
import time
from collections import OrderedDict

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)$")


def parse_scrapes(text):
    stamp, out = None, []
    for line in text.splitlines():
        if line.startswith("# scrape "):
            stamp = int(line.split()[2])
            continue
        if not line or line.startswith("#") or stamp is None:
            continue
        m = SAMPLE.match(line)
        if m:
            out.append((stamp, m.group(1), m.group(2) or "", m.group(3)))
    return out


def family(name):
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def to_openmetrics(samples, extra_labels, shift_ms):
    fams = OrderedDict()
    for stamp, name, labels, value in samples:
        fams.setdefault(family(name), []).append((stamp, name, labels, value))
    extra = ",".join(f'{k}="{v}"' for k, v in extra_labels.items())
    lines = []
    for rows in fams.values():
        rows.sort(key=lambda r: (r[1], r[2], r[0]))
        for stamp, name, labels, value in rows:
            inner = labels[1:-1] if labels else ""
            lab = "{" + ",".join(p for p in (inner, extra) if p) + "}"
            lines.append(f"{name}{lab} {value} {(stamp + shift_ms) / 1000.0:.3f}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scrapes")
    ap.add_argument("out")
    ap.add_argument("--host", required=True)
    ap.add_argument("--group", default="gpu_nodes")
    ap.add_argument("--job", default="triton")
    ap.add_argument("--end-ago", type=float, default=60.0, help="seconds before now for the last scrape")
    a = ap.parse_args()
    with open(a.scrapes) as fh:
        samples = parse_scrapes(fh.read())
    if not samples:
        raise SystemExit(f"{a.scrapes}: no scrapes found (expected '# scrape <unix ms>' lines)")
    last = max(s[0] for s in samples)
    shift = int((time.time() - a.end_ago) * 1000) - last
    labels = {"job": a.job, "host": a.host, "group": a.group, "instance": f"{a.host}:8002"}
    with open(a.out, "w") as fh:
        fh.write(to_openmetrics(samples, labels, shift))
    n = len({s[0] for s in samples})
    print(f"{a.out}: {len(samples)} samples from {n} scrapes, shifted by {shift / 1000.0:.0f} s")


if __name__ == "__main__":
    main()
