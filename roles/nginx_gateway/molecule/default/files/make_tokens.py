#!/usr/bin/env python3
"""Make the keys and the token matrix for the nginx_gateway Molecule scenario.

usage: make_tokens.py keys DIR            -> writes RSA/EC/PS key pairs + an HMAC secret into DIR
       make_tokens.py tokens DIR ISS AUD  -> prints {"name": "token", ...} as JSON
       make_tokens.py short DIR ISS AUD SECONDS -> prints one valid rs1 token (sub "shorty",
                                          premium) that expires SECONDS from now

Valid tokens carry scope "infer" and models ["qwen3-tiny", "qwen3-small"] (the two served
models); "tiny_only" lists only qwen3-tiny, "all_models" ["*"], "no_models" has no models
claim; each invalid token breaks exactly one thing. "big_6k" / "big_12k" are valid tokens of
about that size (a "groups" claim, as IdPs add), "too_big" is valid but just over the gateway's
16384-byte limit, "huge" (~40 KB) is over its header buffers.
Needs pyjwt[crypto] (controller venv).
"""

import base64
import hashlib
import hmac
import json
import os
import sys
import time

import jwt
from cryptography.hazmat.primitives import serialization as ser
from cryptography.hazmat.primitives.asymmetric import ec, rsa


def _write_pair(d, name, key):
    with open(os.path.join(d, name + ".key"), "wb") as fh:
        fh.write(key.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.PKCS8, ser.NoEncryption()))
    with open(os.path.join(d, name + ".pub"), "wb") as fh:
        fh.write(key.public_key().public_bytes(ser.Encoding.PEM, ser.PublicFormat.SubjectPublicKeyInfo))


def make_keys(d):
    os.makedirs(d, exist_ok=True)
    if os.path.exists(os.path.join(d, "hs1.secret")):
        return  # idempotent: keep the keys the gateway was converged with
    _write_pair(d, "rs1", rsa.generate_private_key(65537, 2048))
    _write_pair(d, "rs2", rsa.generate_private_key(65537, 2048))  # rotation: second RSA kid
    _write_pair(d, "ps1", rsa.generate_private_key(65537, 2048))
    _write_pair(d, "es1", ec.generate_private_key(ec.SECP256R1()))
    _write_pair(d, "rogue", rsa.generate_private_key(65537, 2048))  # NOT configured on the gateway
    with open(os.path.join(d, "hs1.secret"), "w", encoding="utf-8") as fh:
        fh.write(base64.urlsafe_b64encode(os.urandom(32)).decode())


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def raw_token(header, payload, sign):
    si = b64(json.dumps(header).encode()) + "." + b64(json.dumps(payload).encode())
    return si + "." + b64(sign(si.encode()))


def padded(make, size):
    """A token of at least `size` bytes: make(groups=[...]) with as many groups as it takes."""
    groups = []
    while True:
        t = make(groups=groups)
        if len(t) >= size:
            return t
        groups = groups + [f"grp-{i:05d}" for i in range(len(groups), len(groups) + max(1, (size - len(t)) // 16))]


def make_tokens(d, iss, aud):
    def rd(name):
        with open(os.path.join(d, name), encoding="utf-8") as fh:
            return fh.read()

    now = int(time.time())
    base = {
        "iss": iss,
        "aud": aud,
        "iat": now,
        "exp": now + 3600,
        "scope": "infer",
        "models": ["qwen3-tiny", "qwen3-small"],
    }

    def tok(sub, key="rs1", alg="RS256", **over):
        claims = dict(base, sub=sub)
        for k, v in over.items():
            if v is None:
                claims.pop(k, None)
            else:
                claims[k] = v
        secret = rd("hs1.secret") if alg.startswith("HS") else rd(key + ".key")
        return jwt.encode(claims, secret, algorithm=alg, headers={"kid": key})

    t = {
        # alice is in the premium class so the many "valid" checks do not use up her limit
        "valid": tok("alice", tier="premium"),
        "valid_rs2": tok("alice", key="rs2", tier="premium"),
        "valid_es256": tok("alice", key="es1", alg="ES256", tier="premium"),
        "valid_ps256": tok("alice", key="ps1", alg="PS256", tier="premium"),
        "valid_hs256": tok("alice", key="hs1", alg="HS256", tier="premium"),
        "valid_aud_list": tok("alice", aud=["other", aud], tier="premium"),
        "expired": tok("alice", iat=now - 7200, exp=now - 3600),
        "not_yet_valid": tok("alice", nbf=now + 3600),
        "wrong_aud": tok("alice", aud="someone-else"),
        "wrong_iss": tok("alice", iss="https://evil.example"),
        "no_exp": tok("alice", exp=None),
        "unknown_kid": jwt.encode(
            dict(base, sub="alice"), rd("rs1.key"), algorithm="RS256", headers={"kid": "no-such-kid"}
        ),
        "missing_claim": tok("alice", scope=None),
        "wrong_model": tok("alice", models=["some-other-model"]),
        "tiny_only": tok("tina", models=["qwen3-tiny"], tier="premium"),
        "all_models": tok("alice", models=["*"], tier="premium"),
        "no_models": tok("alice", models=None, tier="premium"),
        "olga": tok("olga"),
        "olivia": tok("olivia"),
        "bob": tok("bob"),
        "carol": tok("carol"),
        "victim": tok("victim"),
        "dave": tok("dave"),
        "premium": tok("paula", tier="premium"),
        # lifetime (nginx_gateway_jwt_max_lifetime 86400): two days is too long, with or without iat
        "long_lived": tok("alice", exp=now + 2 * 86400),
        "long_lived_no_iat": tok("alice", iat=None, exp=now + 2 * 86400),
        "no_iat": tok("alice", iat=None, tier="premium"),
        # X-Auth-Scope: the verified scope claim, as a string and as a list
        "multi_scope": tok("sam", scope="infer crm:read crm:write", tier="premium"),
        "list_scope": tok("sam", scope=["infer", "crm:read"], tier="premium"),
    }
    t["big_6k"] = padded(lambda **kw: tok("bianca", tier="premium", **kw), 6 * 1024)
    t["big_12k"] = padded(lambda **kw: tok("bianca", tier="premium", **kw), 12 * 1024)
    t["too_big"] = padded(lambda **kw: tok("bianca", tier="premium", **kw), 16384 + 64)
    t["huge"] = padded(lambda **kw: tok("bianca", tier="premium", **kw), 40 * 1024)
    # bad signature: a valid token with its signature replaced by another token's
    good = t["valid"].split(".")
    other = tok("mallory").split(".")
    t["bad_signature"] = ".".join(good[:2] + [other[2]])
    # a forged token for "victim": signed with a key the gateway does not have, under a real kid
    t["forged_victim"] = jwt.encode(
        dict(base, sub="victim"), rd("rogue.key"), algorithm="RS256", headers={"kid": "rs1"}
    )
    # alg none (unsigned)
    t["alg_none"] = raw_token({"alg": "none", "kid": "rs1"}, dict(base, sub="alice"), lambda si: b"")
    # HS256 "signed" with the RSA public key as HMAC secret (key confusion)
    pub = rd("rs1.pub").encode()
    t["hs256_rsa_pub"] = raw_token(
        {"alg": "HS256", "kid": "rs1", "typ": "JWT"},
        dict(base, sub="alice"),
        lambda si: hmac.new(pub, si, hashlib.sha256).digest(),
    )
    return t


def main(argv):
    if len(argv) == 3 and argv[1] == "keys":
        make_keys(argv[2])
    elif len(argv) == 5 and argv[1] == "tokens":
        print(json.dumps(make_tokens(argv[2], argv[3], argv[4]), indent=1))
    elif len(argv) == 6 and argv[1] == "short":
        now = int(time.time())
        claims = {
            "iss": argv[3],
            "aud": argv[4],
            "sub": "shorty",
            "iat": now,
            "exp": now + int(argv[5]),
            "scope": "infer",
            "models": ["*"],
            "tier": "premium",
        }
        with open(os.path.join(argv[2], "rs1.key"), encoding="utf-8") as fh:
            print(jwt.encode(claims, fh.read(), algorithm="RS256", headers={"kid": "rs1"}))
    else:
        sys.exit(__doc__)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
