"""Service-level figures from a short load run through the gateway, and their check against SLOs.

A run is a list of samples, one per request: ``{"ok": bool, "status": int, "ttft_s": float|None,
"e2e_s": float, "tokens": int}``. ``summarize`` turns them into the figures operators read
(TTFT p50/p99, end-to-end p50/p99, output tokens/s, error ratio); ``check`` compares those with the
SLO variables and returns every violation as a sentence with the measured figure and the target.
"""

import math

SLO_KEYS = {
    "ttft_p99_ms": ("ttft_ms", "p99", "TTFT p99"),
    "ttft_p50_ms": ("ttft_ms", "p50", "TTFT p50"),
    "e2e_p99_ms": ("e2e_ms", "p99", "end-to-end p99"),
    "e2e_p50_ms": ("e2e_ms", "p50", "end-to-end p50"),
}


def percentile(values, q):
    """Nearest-rank percentile (q in 0..100) of a non-empty list; None for an empty one."""
    if not values:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is outside 0..100")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


def summarize(samples, wall_s, concurrency):
    if wall_s <= 0:
        raise ValueError("wall time must be positive")
    ok = [s for s in samples if s.get("ok")]
    ttft = [s["ttft_s"] * 1000.0 for s in ok if s.get("ttft_s") is not None]
    e2e = [s["e2e_s"] * 1000.0 for s in ok]
    tokens = sum(int(s.get("tokens") or 0) for s in ok)
    errors = len(samples) - len(ok)
    statuses = {}
    for s in samples:
        key = str(s.get("status"))
        statuses[key] = statuses.get(key, 0) + 1

    def stats(xs):
        return {"p50": _r(percentile(xs, 50)), "p99": _r(percentile(xs, 99)),
                "max": _r(max(xs) if xs else None), "n": len(xs)}

    return {
        "requests": len(samples),
        "concurrency": concurrency,
        "wall_s": round(wall_s, 3),
        "errors": errors,
        "error_ratio": round(errors / len(samples), 4) if samples else None,
        "statuses": statuses,
        "ttft_ms": stats(ttft),
        "e2e_ms": stats(e2e),
        "output_tokens": tokens,
        "output_tokens_per_s": round(tokens / wall_s, 2),
    }


def _r(x):
    return None if x is None else round(x, 2)


def check(summary, slo):
    """Violations of ``slo`` (keys: ttft_p99_ms, ttft_p50_ms, e2e_p99_ms, e2e_p50_ms, error_ratio,
    min_output_tokens_per_s; None or absent = not checked) as human sentences."""
    violations = []
    for key, (metric, stat, label) in SLO_KEYS.items():
        target = slo.get(key)
        if target is None:
            continue
        got = summary[metric][stat]
        if got is None:
            violations.append(f"{label}: no successful request to measure (target {target} ms)")
        elif got > float(target):
            violations.append(f"{label} {got:.1f} ms > target {float(target):.1f} ms")
    target = slo.get("error_ratio")
    if target is not None and summary["error_ratio"] is not None and summary["error_ratio"] > float(target):
        violations.append(
            f"error ratio {summary['error_ratio']:.3f} ({summary['errors']}/{summary['requests']}, "
            f"statuses {summary['statuses']}) > target {float(target):.3f}"
        )
    target = slo.get("min_output_tokens_per_s")
    if target is not None and summary["output_tokens_per_s"] < float(target):
        violations.append(f"output {summary['output_tokens_per_s']:.1f} tokens/s < target {float(target):.1f} tokens/s")
    return violations


def markdown(summary, slo, violations, title):
    lines = [f"# {title}", "", f"{summary['requests']} requests at concurrency {summary['concurrency']} "
             f"in {summary['wall_s']} s through the gateway.", "",
             "| figure | measured | target |", "|---|---:|---:|"]
    for key, (metric, stat, label) in SLO_KEYS.items():
        target = slo.get(key)
        lines.append(f"| {label} (ms) | {summary[metric][stat]} | {'' if target is None else target} |")
    lines.append(f"| error ratio | {summary['error_ratio']} | {'' if slo.get('error_ratio') is None else slo['error_ratio']} |")
    lines.append(f"| output tokens/s | {summary['output_tokens_per_s']} | "
                 f"{'' if slo.get('min_output_tokens_per_s') is None else slo['min_output_tokens_per_s']} |")
    lines += ["", "Statuses: " + ", ".join(f"{k}: {v}" for k, v in sorted(summary["statuses"].items())), ""]
    lines.append("**SLO met.**" if not violations else "**SLO violated:** " + "; ".join(violations))
    return "\n".join(lines) + "\n"
