"""``triton-fleet-openai --config /etc/triton-fleet/openai-api.json``: serve the API with uvicorn."""

import argparse
import logging
import os
import signal
import socket

import uvicorn
from prometheus_client import start_http_server

from .app import create_app
from .config import load

# The first file descriptor systemd passes (sd_listen_fds(3)).
LISTEN_FDS_START = 3


def systemd_socket(host, port, environ=None, fd=LISTEN_FDS_START):
    """The listening socket systemd passes (socket activation, fd 3), or None when it passed none.

    systemd keeps that socket open while the service restarts: connections wait in its backlog for the
    new process instead of being refused. It must be the configured loopback address and port (the
    service trusts the gateway's X-Auth-* headers); anything else stops the start.
    """
    env = os.environ if environ is None else environ
    if env.get("LISTEN_PID") != str(os.getpid()) or env.get("LISTEN_FDS") in (None, "", "0"):
        return None
    if env.get("LISTEN_FDS") != "1":
        raise SystemExit(f"systemd passed {env.get('LISTEN_FDS')} sockets; the service listens on exactly one")
    sock = socket.socket(fileno=fd)
    bound = sock.getsockname()[:2]
    if sock.type != socket.SOCK_STREAM or bound != (host, port):
        raise SystemExit(
            f"the socket systemd passed is bound to {bound[0]}:{bound[1]}, the configuration says {host}:{port}: "
            "fix ListenStream= in triton-fleet-openai-api.socket (the openai_api role writes both)"
        )
    return sock


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--config", required=True, help="JSON configuration rendered by the openai_api role")
    ap.add_argument("--check", action="store_true", help="load the configuration, template and tokenizer, then exit")
    args = ap.parse_args(argv)
    settings = load(args.config)
    app = create_app(settings)
    if args.check:
        print(
            f"ok: {settings.model.served_name} ({settings.model.runtime}), {len(settings.triton_nodes)} Triton node(s)"
        )
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if settings.metrics_port:
        # Prometheus scrapes this listener from the monitoring hosts; the API itself stays on loopback.
        start_http_server(
            settings.metrics_port, addr=settings.metrics_address, registry=app.state.fleet.metrics.registry
        )
    # systemctl reload (the rolling playbook's drain step): re-read the drain file. uvicorn handles only
    # SIGINT/SIGTERM, so this handler stays; it only swaps a set, safe between two bytecodes.
    signal.signal(signal.SIGHUP, lambda *_: app.state.reload_drain())
    config = uvicorn.Config(
        app,
        host=settings.listen_address,
        port=settings.port,
        log_level="info",
        access_log=False,
        proxy_headers=False,
        server_header=False,
        # Longer than NGINX's idle keepalive to its upstreams (60 s): NGINX, not the service, closes an
        # idle connection, so it never reuses one the service is closing at that moment.
        timeout_keep_alive=75,
    )
    sock = systemd_socket(settings.listen_address, settings.port)
    uvicorn.Server(config).run(sockets=[sock] if sock else None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
