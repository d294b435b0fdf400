"""tools/mint-jwt: durations, negative ones (expired tokens, a not-before in the past) given either way."""

import subprocess
import sys
from pathlib import Path

import jwt
import pytest

ROOT = Path(__file__).resolve().parents[2]
SECRET = "a-shared-secret-of-at-least-32-bytes"


def _mint(*args):
    return subprocess.run([sys.executable, str(ROOT / "tools" / "mint-jwt"), "--sub", "alice", "--aud", "triton-fleet",
                           "--iss", "https://idp.example", "--key", SECRET, "--alg", "HS256", *args],
                          check=False, capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("args,exp,nbf", [
    (["--ttl", "-10m"], -600, None),
    (["--ttl=-10m"], -600, None),
    (["--ttl", "-90"], -90, None),
    (["--ttl", "2h", "--nbf", "-5m"], 7200, -300),
    (["--nbf", "-1d", "--ttl", "-1h"], -3600, -86400),
    (["--ttl", "15m"], 900, None),
])
def test_a_duration_may_be_negative_as_a_separate_argument(args, exp, nbf):
    done = _mint(*args)
    assert done.returncode == 0, done.stderr
    claims = jwt.decode(done.stdout.strip(), options={"verify_signature": False})
    assert claims["exp"] - claims["iat"] == exp
    assert (claims["nbf"] - claims["iat"] if "nbf" in claims else None) == nbf


def test_a_bad_duration_says_what_is_wrong():
    done = _mint("--ttl", "-10x")
    assert done.returncode == 2 and "'-10x' is not a duration; use e.g. 90s, 15m, 1h, 7d" in done.stderr, done.stderr
    done = _mint("--ttl", "--kid", "k1")
    assert done.returncode == 2 and "argument --ttl: expected one argument" in done.stderr, done.stderr
