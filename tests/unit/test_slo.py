import pytest
from triton_fleet import slo


def _s(ok=True, ttft=0.1, e2e=1.0, tokens=10, status=200):
    return {"ok": ok, "status": status, "ttft_s": ttft, "e2e_s": e2e, "tokens": tokens}


def test_percentile_nearest_rank():
    xs = list(range(1, 101))
    assert slo.percentile(xs, 50) == 50
    assert slo.percentile(xs, 99) == 99
    assert slo.percentile(xs, 100) == 100
    assert slo.percentile([7], 99) == 7
    assert slo.percentile([], 50) is None
    with pytest.raises(ValueError):
        slo.percentile(xs, 101)


def test_summarize_counts_errors_and_tokens():
    samples = [_s(ttft=0.05 * i, e2e=0.5 * i) for i in range(1, 11)] + [_s(ok=False, status=502, ttft=None, tokens=0)]
    s = slo.summarize(samples, wall_s=2.0, concurrency=4)
    assert s["requests"] == 11 and s["errors"] == 1
    assert s["error_ratio"] == round(1 / 11, 4)
    assert s["statuses"] == {"200": 10, "502": 1}
    assert s["ttft_ms"]["p50"] == 250.0 and s["ttft_ms"]["p99"] == 500.0
    assert s["e2e_ms"]["p99"] == 5000.0
    assert s["output_tokens"] == 100 and s["output_tokens_per_s"] == 50.0


def test_check_reports_each_violation_with_figures():
    s = slo.summarize([_s(ttft=2.5, e2e=9.0), _s(ok=False, status=429)], wall_s=1.0, concurrency=2)
    v = slo.check(s, {"ttft_p99_ms": 2000, "e2e_p99_ms": 10000, "error_ratio": 0.01, "min_output_tokens_per_s": 20})
    text = " | ".join(v)
    assert "TTFT p99 2500.0 ms > target 2000.0 ms" in text
    assert "error ratio 0.500" in text and "429" in text
    assert "output 10.0 tokens/s < target 20.0" in text
    assert not any("end-to-end" in x for x in v)


def test_check_passes_and_ignores_unset_targets():
    s = slo.summarize([_s()], wall_s=1.0, concurrency=1)
    assert slo.check(s, {"ttft_p99_ms": 1000, "e2e_p99_ms": None}) == []
    md = slo.markdown(s, {"ttft_p99_ms": 1000}, [], "t")
    assert "SLO met" in md and "| TTFT p99 (ms) | 100.0 | 1000 |" in md


def test_no_successful_request_is_a_violation():
    s = slo.summarize([_s(ok=False, status=503, ttft=None)], wall_s=1.0, concurrency=1)
    assert any("no successful request" in v for v in slo.check(s, {"ttft_p99_ms": 500}))
