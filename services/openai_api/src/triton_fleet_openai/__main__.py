"""``triton-fleet-openai --config /etc/triton-fleet/openai-api.json``: serve the API with uvicorn.

``workers: 1`` (the default) serves in this process. ``workers: N`` makes this process a supervisor: it takes
(or binds) one listening socket per worker (``port``, ``port + 1``, ...), forks the N workers, each with its
own socket, event loop and Triton connections, and exposes their metrics together (prometheus-client's
multiprocess mode). NGINX balances over the workers' ports by requests in flight (``least_conn``): workers
sharing one socket take connections unevenly (whichever wakes first takes what is queued), and NGINX's
keepalive connections then keep that imbalance. The workers share their requests in flight and the token
budgets through ``state_dir`` (``shared.py``). SIGHUP (``systemctl reload``: the drain file) goes to every
worker; SIGTERM stops them gracefully, each finishing its streams; a worker that dies is replaced on its
socket, where connections wait in the backlog meanwhile.

A stop may come at any moment of the start-up (``systemctl restart`` right after a start): the supervisor
blocks its signals while it forks, so that a new worker starts with them pending rather than running the
supervisor's handlers, and takes them once it has its own (tests/unit/openai_api/test_openai_startup_stop.py).
"""

import argparse
import contextlib
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
# The signals the supervisor passes on to its workers (stop, and reload: the drain file).
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@contextlib.contextmanager
def signals_blocked(signals=FORWARDED):
    """``signals`` held pending in this thread (and in the threads and processes it starts meanwhile, which
    inherit its mask), delivered when the block ends."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        yield mask
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def reload_when_started():
    """Until the app exists, a reload (SIGHUP) is remembered, to be done once it has started; the default
    action would end the process. Returns the list it is noted in."""
    reloads = []
    signal.signal(signal.SIGHUP, lambda *_: reloads.append(1))
    return reloads


def systemd_sockets(host, ports, environ=None, first_fd=LISTEN_FDS_START):
    """The listening sockets systemd passes (socket activation, fds 3...), one per port of ``ports`` and in
    that order, or None when it passed none.

    systemd keeps them open while the service restarts: connections wait in their backlogs for the new
    processes instead of being refused. They must be the configured loopback address and ports (the
    service trusts the gateway's X-Auth-* headers); anything else stops the start.
    """
    env = os.environ if environ is None else environ
    if env.get("LISTEN_PID") != str(os.getpid()) or env.get("LISTEN_FDS") in (None, "", "0"):
        return None
    count = int(env["LISTEN_FDS"])
    wanted = f"{host}:{ports[0]}" + (f"-{ports[-1]}" if len(ports) > 1 else "")
    fix = "fix ListenStream= in triton-fleet-openai-api.socket (the openai_api role writes both)"
    if count != len(ports):
        raise SystemExit(
            f"systemd passed {count} socket(s); the configuration has {len(ports)} worker(s), one socket each "
            f"({wanted}): {fix}"
        )
    by_port = {}
    for fd in range(first_fd, first_fd + count):
        sock = socket.socket(fileno=fd)
        bound = sock.getsockname()[:2]
        if sock.type != socket.SOCK_STREAM or bound[0] != host or bound[1] not in ports or bound[1] in by_port:
            raise SystemExit(f"a socket systemd passed is bound to {bound[0]}:{bound[1]}, the configuration says {wanted}: {fix}")
        by_port[bound[1]] = sock
    return [by_port[p] for p in ports]


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

    # A stop until uvicorn has its handlers: SIGTERM's default action ends the process (nothing to finish yet),
    # SIGINT's KeyboardInterrupt too.
    reloads = reload_when_started()
    app = create_app(settings)
    if settings.metrics_port:
        # Prometheus scrapes this listener from the monitoring hosts; the API itself stays on loopback. Its
        # thread never takes a signal: they all go to the main thread, which acts on them.
        with signals_blocked():
            start_http_server(
                settings.metrics_port, addr=settings.metrics_address, registry=app.state.fleet.metrics.registry
            )
    # systemctl reload (the rolling playbook's drain step): re-read the drain file. uvicorn handles only
    # SIGINT/SIGTERM, so this handler stays; it only swaps a set, safe between two bytecodes.
    signal.signal(signal.SIGHUP, lambda *_: app.state.reload_drain())
    if reloads:
        app.state.reload_drain()
    socks = systemd_sockets(settings.listen_address, settings.ports)
    uvicorn.Server(uvicorn_config(app, settings)).run(sockets=socks)
    return 0


def listening_sockets(settings):
    """One listening socket per worker: systemd's, or bound here."""
    socks = systemd_sockets(settings.listen_address, settings.ports)
    if socks is None:
        socks = [socket.create_server((settings.listen_address, p), backlog=2048) for p in settings.ports]
    return socks


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


def run_worker(settings, state, sock, mask):
    """In a forked worker: the app on its own socket until SIGTERM. Never returns.

    It starts with the supervisor's handlers (a fork copies them) and its signals blocked (``spawn``): the
    handlers are replaced first, then the block ends (``mask``, the supervisor's mask before it) and a signal
    that came meanwhile is delivered. A stop until uvicorn has installed its handlers then ends the worker
    (SIGTERM's default action: it serves nothing yet); from then on uvicorn's handlers stop it gracefully.
    """
    code = 1
    try:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        reloads = reload_when_started()
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)

        import uvicorn

        from .app import create_app
        from .shared import SharedNodes

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
    socks = listening_sockets(settings)
    if settings.metrics_port:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=str(state / "metrics"))
        registry.register(PoolCollector(SharedNodes(state).snapshot))
        # Its thread never takes a signal: they all go to the main thread, which acts on them (a signal taken by
        # another thread would wait for os.wait() below to return).
        with signals_blocked():
            start_http_server(settings.metrics_port, addr=settings.metrics_address, registry=registry)

    workers: dict[int, int] = {}  # pid -> index of its socket
    stopping = False
    respawns: list[float] = []

    def spawn(index):
        """Fork the worker of socket ``index``, unless the service is stopping."""
        # Blocked from the check of ``stopping`` until the new worker is in ``workers``: a stop cannot come in
        # between (and be forwarded to the workers but this one), and the new worker starts with the signals
        # blocked, so that none runs the supervisor's handlers in it (run_worker).
        with signals_blocked() as mask:
            if stopping:
                return
            pid = os.fork()
            if pid == 0:
                run_worker(settings, state, socks[index], mask)
            workers[pid] = index
        if stopping:
            # A stop whose signal came just before the block: its handler may have run inside it, before the
            # worker was in ``workers``. A second SIGTERM to a worker that got it already changes nothing.
            os.kill(pid, signal.SIGTERM)
            return
        log.info("worker %d started on port %d (%d of %d)", pid, settings.ports[index], len(workers), settings.workers)

    def forward(signum, _frame):
        nonlocal stopping
        if signum in (signal.SIGTERM, signal.SIGINT):
            stopping = True
        for pid in list(workers):
            try:
                os.kill(pid, signal.SIGTERM if signum == signal.SIGINT else signum)
            except ProcessLookupError:
                pass

    for sig in FORWARDED:
        signal.signal(sig, forward)
    for index in range(settings.workers):
        spawn(index)
    code = 0
    while workers:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        if pid not in workers:
            continue
        index = workers.pop(pid)
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
        spawn(index)
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
