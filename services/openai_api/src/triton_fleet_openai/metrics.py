"""Prometheus metrics of the service: per-tenant tokens, requests by status, latency, in flight."""

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily

# A *_created gauge per tenant and model doubles the series count for nothing a dashboard reads.
disable_created_metrics()

# Buckets in seconds: TTFT spans a fast GPU (tens of ms) to a CPU lab (seconds); ITL is per token.
TTFT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5)


class Metrics:
    def __init__(self, registry=None):
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "triton_fleet_openai_requests",
            "Requests answered, by endpoint and HTTP status",
            ["endpoint", "model", "status"],
            registry=r,
        )
        self.prompt_tokens = Counter(
            "triton_fleet_openai_prompt_tokens",
            "Prompt tokens, by verified subject and model",
            ["subject", "model"],
            registry=r,
        )
        self.completion_tokens = Counter(
            "triton_fleet_openai_completion_tokens",
            "Generated tokens, by verified subject and model",
            ["subject", "model"],
            registry=r,
        )
        self.ttft = Histogram(
            "triton_fleet_openai_time_to_first_token_seconds",
            "Request received to first generated text",
            ["model"],
            buckets=TTFT_BUCKETS,
            registry=r,
        )
        self.itl = Histogram(
            "triton_fleet_openai_inter_token_latency_seconds",
            "Time between streamed pieces, per generated token",
            ["model"],
            buckets=ITL_BUCKETS,
            registry=r,
        )
        self.inflight = Gauge(
            "triton_fleet_openai_requests_in_flight",
            "Requests being generated",
            ["model"],
            registry=r,
            # Several workers (multiprocess mode): the sum over the live ones.
            multiprocess_mode="livesum",
        )
        self.upstream_failures = Counter(
            "triton_fleet_openai_upstream_failures",
            "Triton node failures seen by the pool",
            ["node"],
            registry=r,
        )
        self.budget_rejections = Counter(
            "triton_fleet_openai_budget_rejections",
            "Requests refused because the subject's token budget is spent",
            ["rate_class"],
            registry=r,
        )
        self.cancelled = Counter(
            "triton_fleet_openai_client_disconnects",
            "Streams the client left before the end (Triton request cancelled)",
            ["model"],
            registry=r,
        )


class PoolCollector:
    """Per Triton node: requests in flight through this service and whether the node is drained.

    ``snapshot``: a callable returning ``Pool.snapshot()``'s list (one process's pool, or every worker's
    merged by ``shared.SharedNodes``)."""

    def __init__(self, snapshot):
        self.snapshot = snapshot

    def describe(self):
        return []

    def collect(self):
        inflight = GaugeMetricFamily(
            "triton_fleet_openai_node_in_flight", "Requests this service has running on the node", labels=["node"]
        )
        drained = GaugeMetricFamily(
            "triton_fleet_openai_node_drained", "1 while the node is drained (out of rotation)", labels=["node"]
        )
        for node in self.snapshot():
            inflight.add_metric([node["url"]], node["inflight"])
            drained.add_metric([node["url"]], 1 if node["drained"] else 0)
        yield inflight
        yield drained
