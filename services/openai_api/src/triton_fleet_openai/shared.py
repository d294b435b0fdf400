"""State the worker processes of one service share (``workers`` > 1), kept in its state directory.

One process serves a few thousand streamed tokens per second (docs/benchmarks.md); a gateway host with more
cores runs several workers, each on its own port (``__main__``). What must stay whole across them:

* the requests each Triton node has running, for the rolling playbook's drain wait (``/internal/nodes``,
  answered by whichever worker takes the request): each worker writes its pool's state to
  ``nodes-<pid>.json`` whenever it changes, and any worker merges the files of the live workers;
* the token budgets per subject (tokens per minute): one SQLite table every worker reads and appends to,
  so a subject's budget is the same whichever worker its requests reach;
* the metrics: prometheus-client's multiprocess mode (``metrics/``), exposed by the supervising process.
"""

import asyncio
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Optional

from .budgets import Budgets


def node_states(pool) -> list[dict]:
    """The raw state of a pool's nodes: what :func:`merge_snapshots` needs, clock values kept as they are."""
    return [
        {
            "url": n.url,
            "address": n.address,
            "drained": n.drained,
            "down_until": n.down_until,
            "active": [[rid, t0, wall] for rid, (t0, wall) in n.active.items()],
        }
        for n in pool.nodes
    ]


def merge_snapshots(states_per_worker: list[list[dict]], now: Optional[float] = None) -> list[dict]:
    """One snapshot (``Pool.snapshot``'s shape) from the node states of every worker.

    A node counts as drained only once every worker has it drained (each re-reads the drain file on its
    own SIGHUP), healthy when any worker sees it healthy; its requests are every worker's.
    ``now`` is ``time.monotonic()``: Linux's CLOCK_MONOTONIC, the same clock in every process of a host.
    """
    now = time.monotonic() if now is None else now
    merged: dict[str, dict] = {}
    for states in states_per_worker:
        for node in states:
            entry = merged.setdefault(
                node["url"], {"url": node["url"], "address": node["address"], "drained": True, "healthy": False,
                              "active": []})
            entry["drained"] = entry["drained"] and bool(node["drained"])
            entry["healthy"] = entry["healthy"] or now >= node["down_until"]
            entry["active"].extend(node["active"])
    out = []
    for entry in merged.values():
        active = sorted(entry.pop("active"), key=lambda a: a[1])
        entry["inflight"] = len(active)
        entry["requests"] = [{"id": rid, "running_s": round(now - t0, 3), "started": round(wall, 3)}
                             for rid, t0, wall in active]
        out.append(entry)
    return out


class SharedNodes:
    """This worker's node states in ``<dir>/nodes-<pid>.json``; the merged view of every live worker's."""

    PREFIX = "nodes-"
    # A request's start and end are written at most this late, together with whatever else changed
    # meanwhile: a burst of requests costs one write, not two per request on the burst's own time.
    DELAY = 0.05

    def __init__(self, directory, pid: Optional[int] = None):
        self.dir = Path(directory)
        self.pid = os.getpid() if pid is None else pid
        self.path = self.dir / f"{self.PREFIX}{self.pid}.json"
        self._tmp = self.dir / f".{self.PREFIX}{self.pid}.tmp"
        self._pending = None
        self._pool = None

    def publish(self, pool, urgent: bool = True) -> None:
        """Write the pool's state: at once when ``urgent`` (a new drain set: the drain wait reads it right
        after its signal, with every request then running) or when no event loop runs, else within DELAY."""
        self._pool = pool
        if not urgent:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            if loop is not None:
                if self._pending is None:
                    self._pending = loop.call_later(self.DELAY, self._write)
                return
        self._write()

    def _write(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        # Written whole and renamed: a reader never sees half a file.
        self._tmp.write_text(json.dumps(node_states(self._pool), separators=(",", ":")), encoding="utf-8")
        os.replace(self._tmp, self.path)

    def states(self) -> list[list[dict]]:
        out = []
        for path in sorted(self.dir.glob(f"{self.PREFIX}*.json")):
            try:
                pid = int(path.stem[len(self.PREFIX):])
                if pid == self.pid and self._pool is not None:
                    out.append(node_states(self._pool))  # its own, as it is now (the file may be DELAY late)
                    continue
                if pid != self.pid:
                    os.kill(pid, 0)  # a worker that died without its file removed: its requests died with it
                out.append(json.loads(path.read_text(encoding="utf-8")))
            except (ValueError, ProcessLookupError, FileNotFoundError):
                continue
            except PermissionError:
                out.append(json.loads(path.read_text(encoding="utf-8")))
        return out

    def snapshot(self) -> list[dict]:
        return merge_snapshots(self.states())

    @classmethod
    def forget(cls, directory, pid: int) -> None:
        """Remove a worker's file (the supervisor, when that worker has exited)."""
        for name in (f"{cls.PREFIX}{pid}.json", f".{cls.PREFIX}{pid}.tmp"):
            try:
                (Path(directory) / name).unlink()
            except FileNotFoundError:
                pass


class SharedBudgets(Budgets):
    """:class:`Budgets` with the spent tokens in one SQLite file that every worker of the service uses.

    The window is the same 60 s; times are ``time.monotonic()`` (one clock for every process of the host).
    """

    def __init__(self, path, per_class: Optional[dict[str, int]] = None, clock=time.monotonic):
        super().__init__(per_class, clock)
        self.path = str(path)
        # Autocommit, WAL: a writer never blocks the readers of the other workers.
        self.db = sqlite3.connect(self.path, timeout=5.0, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=OFF")  # the window is a minute of state, not worth an fsync
        self.db.execute("CREATE TABLE IF NOT EXISTS spent (subject TEXT NOT NULL, t REAL NOT NULL, tokens INTEGER NOT NULL)")
        self.db.execute("CREATE INDEX IF NOT EXISTS spent_subject_t ON spent (subject, t)")

    def _entries(self, subject, now) -> list:
        return self.db.execute(
            "SELECT t, tokens FROM spent WHERE subject = ? AND t > ? ORDER BY t", (subject, now - self.WINDOW)
        ).fetchall()

    def _add(self, subject, now, tokens):
        self.db.execute("DELETE FROM spent WHERE subject = ? AND t <= ?", (subject, now - self.WINDOW))
        self.db.execute("INSERT INTO spent (subject, t, tokens) VALUES (?, ?, ?)", (subject, now, tokens))
