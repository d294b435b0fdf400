"""``triton-fleet-openai --config /etc/triton-fleet/openai-api.json``: serve the API with uvicorn.

``workers: 1`` (the default) serves in this process. ``workers: N`` makes this process a supervisor: it takes
(or binds) the listening socket, forks N workers that accept on it, each with its own event loop and Triton
connections, and exposes their metrics together (prometheus-client's multiprocess mode). The workers share
their requests in flight and the token budgets through ``state_dir`` (``shared.py``). SIGHUP (``systemctl
reload``: the drain file) goes to every worker; SIGTERM stops them gracefully, each finishing its streams; a
worker that dies is replaced.
"""

import argparse
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path

log = logging.getLogger("triton_fleet_openai")

# The first file descriptor systemd passes (sd_listen_fds(3)).
LISTEN_FDS_START = 3
# A worker that dies more often than this (per minute) is not replaced: the service exits, systemd restarts it.
MAX_RESPAWNS_PER_MINUTE = 10


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


def uvicorn_config(app, settings):
    import uvicorn

    return uvicorn.Config(
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


def serve_one(settings):
    """workers: 1 - the API, its metrics listener and the drain reload in this process."""
    import uvicorn
    from prometheus_client import start_http_server

    from .app import create_app

    app = create_app(settings)
    if settings.metrics_port:
        # Prometheus scrapes this listener from the monitoring hosts; the API itself stays on loopback.
        start_http_server(
            settings.metrics_port, addr=settings.metrics_address, registry=app.state.fleet.metrics.registry
        )
    # systemctl reload (the rolling playbook's drain step): re-read the drain file. uvicorn handles only
    # SIGINT/SIGTERM, so this handler stays; it only swaps a set, safe between two bytecodes.
    signal.signal(signal.SIGHUP, lambda *_: app.state.reload_drain())
    sock = systemd_socket(settings.listen_address, settings.port)
    uvicorn.Server(uvicorn_config(app, settings)).run(sockets=[sock] if sock else None)
    return 0


def listening_socket(settings):
    sock = systemd_socket(settings.listen_address, settings.port)
    if sock is None:
        sock = socket.create_server((settings.listen_address, settings.port), backlog=2048)
    return sock


def prepare_state_dir(settings):
    """The state directory, emptied of an earlier run's files (systemd's RuntimeDirectory, or a new one)."""
    if settings.state_dir:
        state = Path(settings.state_dir)
        state.mkdir(parents=True, exist_ok=True)
        for entry in state.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    else:
        state = Path(tempfile.mkdtemp(prefix="triton-fleet-openai-"))
    (state / "metrics").mkdir()
    return state


def run_worker(settings, state, sock):
    """In a forked worker: the app on the shared socket until SIGTERM. Never returns."""
    code = 1
    try:
        import uvicorn

        from .app import create_app
        from .shared import SharedNodes

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        # A reload that arrives while the app starts is done once it has started (the default would kill us).
        reloads = []
        signal.signal(signal.SIGHUP, lambda *_: reloads.append(1))
        shared = SharedNodes(state)
        app = create_app(settings, shared=shared)
        signal.signal(signal.SIGHUP, lambda *_: app.state.reload_drain())
        if reloads:
            app.state.reload_drain()
        shared.publish(app.state.fleet.pool)
        uvicorn.Server(uvicorn_config(app, settings)).run(sockets=[sock])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        log.exception("worker %d failed", os.getpid())
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def supervise(settings):
    """workers: N - fork the workers, forward signals, replace a worker that dies, expose the metrics."""
    state = prepare_state_dir(settings)
    # Set before prometheus_client is imported (by this process, so by the workers it forks): their metrics
    # then live in files that this process reads back together.
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(state / "metrics")
    from prometheus_client import CollectorRegistry, multiprocess, start_http_server

    from . import app as _app  # noqa: F401 - imported once here, shared by the forked workers
    from .metrics import PoolCollector
    from .shared import SharedBudgets, SharedNodes

    if settings.token_budgets:
        SharedBudgets(state / "budgets.sqlite", settings.token_budgets).db.close()  # the table, before any worker
    sock = listening_socket(settings)
    if settings.metrics_port:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=str(state / "metrics"))
        registry.register(PoolCollector(SharedNodes(state).snapshot))
        start_http_server(settings.metrics_port, addr=settings.metrics_address, registry=registry)

    workers: set[int] = set()
    stopping = False
    respawns: list[float] = []

    def spawn():
        pid = os.fork()
        if pid == 0:
            run_worker(settings, state, sock)
        workers.add(pid)
        log.info("worker %d started (%d of %d)", pid, len(workers), settings.workers)

    def forward(signum, _frame):
        nonlocal stopping
        if signum in (signal.SIGTERM, signal.SIGINT):
            stopping = True
        for pid in list(workers):
            try:
                os.kill(pid, signal.SIGTERM if signum == signal.SIGINT else signum)
            except ProcessLookupError:
                pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    for _ in range(settings.workers):
        spawn()
    code = 0
    while workers:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        if pid not in workers:
            continue
        workers.discard(pid)
        multiprocess.mark_process_dead(pid, str(state / "metrics"))
        SharedNodes.forget(state, pid)
        if stopping:
            continue
        log.error("worker %d exited (status %d); starting another", pid, os.waitstatus_to_exitcode(status))
        now = time.monotonic()
        respawns = [t for t in respawns if t > now - 60] + [now]
        if len(respawns) > MAX_RESPAWNS_PER_MINUTE:
            log.error("workers keep dying (%d in a minute): stopping the service", len(respawns))
            stopping, code = True, 1
            forward(signal.SIGTERM, None)
            continue
        spawn()
    if not settings.state_dir:
        shutil.rmtree(state, ignore_errors=True)
    return code


def main(argv=None):
    from .config import load

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--config", required=True, help="JSON configuration rendered by the openai_api role")
    ap.add_argument("--check", action="store_true", help="load the configuration, template and tokenizer, then exit")
    args = ap.parse_args(argv)
    settings = load(args.config)
    if args.check:
        from .app import create_app

        create_app(settings)
        print(
            f"ok: {settings.model.served_name} ({settings.model.runtime}), {len(settings.triton_nodes)} Triton node(s), "
            f"{settings.workers} worker(s)"
        )
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if settings.workers == 1:
        return serve_one(settings)
    return supervise(settings)


if __name__ == "__main__":
    raise SystemExit(main())
