"""``triton-fleet-openai --config /etc/triton-fleet/openai-api.json``: serve the API with uvicorn."""

import argparse
import logging
import signal

import uvicorn
from prometheus_client import start_http_server

from .app import create_app
from .config import load


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
    uvicorn.run(
        app,
        host=settings.listen_address,
        port=settings.port,
        log_level="info",
        access_log=False,
        proxy_headers=False,
        server_header=False,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
