"""tools/lab: what a newcomer reaches from the host (gRPC published) and the stream examples it prints and runs."""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
LAB = (ROOT / "tools" / "lab").read_text()


def test_gw1_publishes_https_and_the_gateways_grpc_port_on_loopback():
    grpc = yaml.safe_load((ROOT / "roles" / "nginx_gateway" / "defaults" / "main.yml").read_text())["nginx_gateway_grpc_port"]
    port = re.search(r"^GRPC_PORT=(\d+)$", LAB, re.M).group(1)
    gw1 = next(line for line in LAB.splitlines() if line.strip().startswith('"gw1 '))
    published = gw1.split()[-1].rstrip('"').split(",")
    assert "127.0.0.1:8443:443" in published
    assert f"127.0.0.1:$GRPC_PORT:{grpc}" in published and port != "8443"


def test_every_generate_stream_example_asks_for_a_stream():
    """Without "stream": true Triton's generate_stream sends one event holding the whole answer."""
    calls = [m.group(0) for m in re.finditer(r"generate_stream[^\n]*\n[^\n]*-d '[^']*'", LAB)]
    calls += [m.group(0) for m in re.finditer(r'generate_stream[^\n]*\n[^\n]*-d \'\{[^\n]*', LAB)]
    assert calls, "tools/lab no longer shows a generate_stream example"
    for call in calls:
        assert '"stream": true' in call or '\\"stream\\": true' in call, call
    readme = (ROOT / "README.md").read_text()
    for block in re.findall(r"```sh\n(.*?)```", readme, re.S):
        if "generate_stream" in block and "-d " in block:
            assert '"stream": true' in block, block
