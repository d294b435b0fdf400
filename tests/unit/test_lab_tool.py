"""tools/lab: what a newcomer reaches from the host (gRPC published) and the stream examples it prints and runs."""

import os
import re
import subprocess
import sys
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


def _run_hello(tmp_path, curl_body):
    """tools/lab's hello (the last step of make lab) with a stand-in curl on PATH and a fixed token."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "curl").write_text("#!/bin/sh\n" + curl_body)
    (bindir / "curl").chmod(0o755)
    hello = re.search(r"^hello\(\) \{\n.*?^\}\n", LAB, re.M | re.S).group(0)
    script = "set -euo pipefail\ntoken() { echo TOKEN; }\n" + hello + "hello\n"
    return subprocess.run(["bash", "-c", script], check=False, capture_output=True, text=True, timeout=30,
                          env={**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"})


def test_hello_prints_a_long_stream_whole_and_succeeds(tmp_path):
    """16 chunks of a random model's text can run past any byte cut; make lab must not fail on them (a head -c
    after curl did, with curl's exit 23 under pipefail)."""
    done = _run_hello(tmp_path, "i=0; while [ $i -lt 400 ]; do echo 'data: {\"text_output\": \"0123456789\"}'; "
                                "echo; i=$((i+1)); done\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("0123456789") == 800


def test_hello_fails_when_the_gateway_refuses(tmp_path):
    done = _run_hello(tmp_path, "echo '{\"error\": \"unauthorized\"}'; exit 22\n")
    assert done.returncode == 22 and "unauthorized" in done.stdout


def _lab(*args):
    return subprocess.run([str(ROOT / "tools" / "lab"), *args], check=False, capture_output=True, text=True,
                          timeout=30)


def test_help_lists_every_command_with_what_it_does():
    commands = re.findall(r"^  ([a-z]+)\) ", LAB[LAB.rindex('case "${1:-}" in'):], re.M)
    assert len(commands) >= 7, commands
    for flag in ("--help", "-h", "help"):
        done = _lab(flag)
        assert done.returncode == 0, done.stderr
        for command in commands:
            line = re.search(rf"^  {command} +(\S.*)$", done.stdout, re.M)
            assert line and len(line.group(1)) > 10, (command, done.stdout)
    wrong = _lab("bogus")
    assert wrong.returncode == 2 and "unknown command: bogus" in wrong.stderr and "converge" in wrong.stderr


def test_token_help_is_the_lab_tokens_own():
    for flag in ("--help", "-h"):
        done = _lab("token", flag)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("usage: tools/lab token [--sub NAME]"), done.stdout
        assert "mint-jwt [-h]" not in done.stdout and "lab-user" in done.stdout and "--ttl -10m" in done.stdout


def test_token_passes_its_options_to_mint_jwt_a_negative_ttl_included(tmp_path):
    """The lab's token, with a stand-in issuer key: the subject, an expired lifetime and a claim as asked."""
    import jwt
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (tmp_path / "jwt").mkdir()
    (tmp_path / "jwt" / "lab-1.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    functions = "".join(re.search(rf"^{name}\(\) \{{\n.*?^\}}\n", LAB, re.M | re.S).group(0)
                        for name in ("token_usage", "token"))
    script = f"set -euo pipefail\nROOT={ROOT}\nSTATE={tmp_path}\nlog() {{ echo \"$*\" >&2; }}\n{functions}token \"$@\"\n"
    done = subprocess.run(["bash", "-c", script, "lab", "--ttl", "-10m", "--sub", "bob", "--claim", "tier=premium"],
                          check=False, capture_output=True, text=True, timeout=30,
                          # tools/mint-jwt runs on the python3 first on PATH: this one, which has pyjwt.
                          env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr
    claims = jwt.decode(done.stdout.strip(), options={"verify_signature": False})
    assert claims["exp"] - claims["iat"] == -600
    assert (claims["sub"], claims["tier"], claims["models"]) == ("bob", "premium", ["*"])
    assert jwt.get_unverified_header(done.stdout.strip())["kid"] == "lab-1"
