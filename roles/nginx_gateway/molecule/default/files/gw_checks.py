#!/usr/bin/env python3
"""Client-side probes for the nginx_gateway scenario; each prints one JSON object.

  gw_checks.py burst   BASE CA TOKEN N       N quick generate calls: statuses + the first 429
  gw_checks.py sse     BASE CA TOKEN         times of the SSE events (first event vs end)
  gw_checks.py streams BASE CA TOKEN N       N concurrent SSE streams: statuses + the first 429
  gw_checks.py grpc    HOST:PORT CA TOKEN    gRPC calls with / without / with a bad token
  gw_checks.py oai_burst BASE CA TOKEN N     N quick /v1/chat/completions calls: statuses + the first 429
  gw_checks.py oai_sse   BASE CA TOKEN       a streamed /v1/chat/completions: when each chunk was sent
                                             (by the stand-in) and received (here)
  gw_checks.py oai_spread BASE CA TOKEN N    N overlapping /v1 streams: the service worker port of each
  gw_checks.py oai_streams BASE CA TOKEN N   N concurrent /v1 chat streams: statuses + the first 429
  gw_checks.py alternate BASE CA BAD GOOD N  N times a generate call with token BAD, then one with
                                             GOOD, each on a new TLS connection: statuses
Runs on the controller with the project venv (requests, grpcio, tritonclient).
"""

import json
import sys
import threading
import time

import requests

MODEL = "qwen3-tiny"


def _post(base, ca, token, path, *, stream=False, body=None):
    headers = {"Authorization": "Bearer " + token} if token else {}
    return requests.post(
        base + f"/v2/models/{MODEL}/{path}",
        json=body or {"text_input": "probe"},
        headers=headers,
        verify=ca,
        stream=stream,
        timeout=30,
    )


def burst(base, ca, token, n):
    out = {"statuses": [], "first_429": None}
    with requests.Session() as s:
        for _ in range(int(n)):
            r = s.post(
                base + f"/v2/models/{MODEL}/generate",
                json={"text_input": "probe"},
                headers={"Authorization": "Bearer " + token},
                verify=ca,
                timeout=30,
            )
            out["statuses"].append(r.status_code)
            if r.status_code == 429 and out["first_429"] is None:
                out["first_429"] = {
                    "retry_after": r.headers.get("Retry-After"),
                    "content_type": r.headers.get("Content-Type"),
                    "body": r.json(),
                }
    return out


def sse(base, ca, token):
    t0 = time.monotonic()
    r = _post(base, ca, token, "generate_stream", stream=True)
    events = []
    for line in r.iter_lines():
        if line.startswith(b"data:"):
            events.append({"t": round(time.monotonic() - t0, 3), "data": json.loads(line[5:])})
    return {
        "status": r.status_code,
        "content_type": r.headers.get("Content-Type"),
        "events": len(events),
        "first_event_s": events[0]["t"] if events else None,
        "last_event_s": events[-1]["t"] if events else None,
        "total_s": round(time.monotonic() - t0, 3),
        "sub_seen_upstream": events[0]["data"]["seen"]["x_auth_sub"] if events else None,
    }


def _concurrent(n, call):
    """n calls started 0.05 s apart, each read to its end: sorted statuses and the first 429 (headers, body)."""
    out = {"statuses": [], "first_429": None}
    lock = threading.Lock()

    def one():
        r = call()
        with lock:
            out["statuses"].append(r.status_code)
            if r.status_code == 429 and out["first_429"] is None:
                out["first_429"] = {"retry_after": r.headers.get("Retry-After"),
                                    "request_id": r.headers.get("X-Request-ID"), "body": r.json()}
        for _ in r.iter_lines():
            pass

    threads = [threading.Thread(target=one) for _ in range(int(n))]
    for t in threads:
        t.start()
        time.sleep(0.05)
    for t in threads:
        t.join()
    out["statuses"].sort()
    return out


def streams(base, ca, token, n):
    return _concurrent(n, lambda: _post(base, ca, token, "generate_stream", stream=True))


def oai_streams(base, ca, token, n):
    body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "in flight"}]}
    return _concurrent(n, lambda: requests.post(base + "/v1/chat/completions", json=body, verify=ca, stream=True,
                                                headers={"Authorization": "Bearer " + token}, timeout=30))


def oai_burst(base, ca, token, n):
    out = {"statuses": [], "first_429": None}
    with requests.Session() as s:
        for _ in range(int(n)):
            r = s.post(
                base + "/v1/chat/completions",
                json={"model": MODEL, "messages": [{"role": "user", "content": "probe"}]},
                headers={"Authorization": "Bearer " + token},
                verify=ca,
                timeout=30,
            )
            out["statuses"].append(r.status_code)
            if r.status_code == 429 and out["first_429"] is None:
                out["first_429"] = {
                    "retry_after": r.headers.get("Retry-After"),
                    "request_id": r.headers.get("X-Request-ID"),
                    "body": r.json(),
                }
    return out


def oai_sse(base, ca, token):
    body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "probe"}]}
    r = requests.post(
        base + "/v1/chat/completions",
        json=body,
        headers={"Authorization": "Bearer " + token},
        verify=ca,
        stream=True,
        timeout=30,
    )
    chunks, done = [], False
    for line in r.iter_lines():
        if line == b"data: [DONE]":
            done = True
        elif line.startswith(b"data:"):
            ev = json.loads(line[5:])
            # the stand-in and this probe share the host's clock (containers on one kernel)
            chunks.append({"sent": ev["t"], "received": time.time(), "headers": ev.get("headers")})
    return {
        "status": r.status_code,
        "content_type": r.headers.get("Content-Type"),
        "chunks": len(chunks),
        "done": done,
        "first_received": chunks[0]["received"] if chunks else None,
        "last_sent": chunks[-1]["sent"] if chunks else None,
        "headers_seen": chunks[0]["headers"] if chunks else None,
    }


def oai_spread(base, ca, token, n):
    """n streams started 0.3 s apart, each open ~2.5 s: the service worker port each one reached."""
    ports = [None] * int(n)

    def one(i):
        body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "spread"}]}
        with requests.post(base + "/v1/chat/completions", json=body, headers={"Authorization": "Bearer " + token},
                           verify=ca, stream=True, timeout=30) as r:
            for line in r.iter_lines():
                if line.startswith(b"data: {"):
                    ports[i] = ports[i] or json.loads(line[6:]).get("port")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(int(n))]
    for t in threads:
        t.start()
        time.sleep(0.3)
    for t in threads:
        t.join(30)
    return {"ports": ports}


def alternate(base, ca, bad, good, n):
    # A new connection (and TLS handshake) per call: whichever worker verified the bad token
    # makes TLS calls again soon after, and would then find what that verification left behind.
    out = {"bad": [], "good": []}
    for _ in range(int(n)):
        out["bad"].append(_post(base, ca, bad, "generate").status_code)
        out["good"].append(_post(base, ca, good, "generate").status_code)
    return out


def grpc_calls(target, ca, token):
    import grpc
    from tritonclient.grpc import service_pb2 as pb
    from tritonclient.grpc import service_pb2_grpc as pbg

    with open(ca, "rb") as fh:
        creds = grpc.ssl_channel_credentials(root_certificates=fh.read())
    stub = pbg.GRPCInferenceServiceStub(grpc.secure_channel(target, creds))
    auth = [("authorization", "Bearer " + token)]
    res = {}

    def call(label, fn, req, md):
        try:
            _, c = fn.with_call(req, metadata=md, timeout=10)
            res[label] = {"code": "OK", "trailers": dict(c.trailing_metadata() or ())}
        except grpc.RpcError as e:
            res[label] = {"code": e.code().name, "details": e.details()}

    call("live_no_token", stub.ServerLive, pb.ServerLiveRequest(), [])
    call("infer_token", stub.ModelInfer, pb.ModelInferRequest(model_name=MODEL), auth)
    call("infer_no_token", stub.ModelInfer, pb.ModelInferRequest(model_name=MODEL), [])
    call(
        "infer_bad_token",
        stub.ModelInfer,
        pb.ModelInferRequest(model_name=MODEL),
        [("authorization", "Bearer " + token[:-4] + "AAAA")],
    )
    call("repository_index", stub.RepositoryIndex, pb.RepositoryIndexRequest(), auth)
    call("repository_unload", stub.RepositoryModelUnload, pb.RepositoryModelUnloadRequest(model_name=MODEL), auth)
    call("statistics", stub.ModelStatistics, pb.ModelStatisticsRequest(), auth)
    call("shared_memory", stub.SystemSharedMemoryStatus, pb.SystemSharedMemoryStatusRequest(), auth)
    call("trace_setting", stub.TraceSetting, pb.TraceSettingRequest(), auth)
    call("log_settings", stub.LogSettings, pb.LogSettingsRequest(), auth)
    return res


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "burst" and len(argv) == 6:
        out = burst(*argv[2:])
    elif cmd == "sse" and len(argv) == 5:
        out = sse(*argv[2:])
    elif cmd == "streams" and len(argv) == 6:
        out = streams(*argv[2:])
    elif cmd == "grpc" and len(argv) == 5:
        out = grpc_calls(*argv[2:])
    elif cmd == "oai_burst" and len(argv) == 6:
        out = oai_burst(*argv[2:])
    elif cmd == "oai_sse" and len(argv) == 5:
        out = oai_sse(*argv[2:])
    elif cmd == "oai_spread" and len(argv) == 6:
        out = oai_spread(*argv[2:])
    elif cmd == "oai_streams" and len(argv) == 6:
        out = oai_streams(*argv[2:])
    elif cmd == "alternate" and len(argv) == 7:
        out = alternate(*argv[2:])
    else:
        sys.exit(__doc__)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
