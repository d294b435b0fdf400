"""Run the service (``triton_fleet_openai.__main__.main``) with a pause at one named point of its start-up, so
that a test can send a stop while the service is exactly there:

    STARTUP_POINTS_LOG=points.log python startup_points.py POINT SKIP -- --config cfg.json

Every process that reaches POINT appends "POINT PID" to the log and sleeps HOLD_S, except: the supervisor (or
the single process) at its first SKIP passes of POINT, and the first SKIP workers it forks (so SKIP = the
number of workers holds only where a worker is replaced). POINT ``none``: no pause. The pause is a plain sleep in that process, with the signal handlers and the signal mask
it has at that point: a signal acts on it as it would on the service there. The points, in start-up order:

- ``supervisor-start``: ``workers`` > 1, before the supervisor has installed its signal handlers
- ``fork-before`` / ``fork-parent`` / ``fork-child``: each fork of a worker: in the supervisor just before
  and just after it (``os.register_at_fork``), and in the new worker before it runs any of its own code
- ``before-app`` / ``after-app``: a worker (or the single process of ``workers: 1``) building its app, the
  latter before uvicorn has installed its handlers
- ``uvicorn-startup``: uvicorn's handlers installed, the app's lifespan and the listeners not started yet
"""

import importlib.abc
import importlib.machinery
import os
import sys
import time
from pathlib import Path

HOLD_S = 1.0
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
POINTS = ("none", "supervisor-start", "fork-before", "fork-parent", "fork-child", "before-app", "after-app",
          "uvicorn-startup")


class PatchOnImport(importlib.abc.MetaPathFinder):
    """Calls ``patches[name](module)`` once the module ``name`` has been imported."""

    def __init__(self, patches):
        self.patches = patches

    def find_spec(self, name, path, target=None):
        if name not in self.patches:
            return None
        patch = self.patches.pop(name)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            patch(module)

        spec.loader.exec_module = exec_module
        return spec


def main():
    point, skip = sys.argv[1], int(sys.argv[2])
    argv = sys.argv[sys.argv.index("--") + 1:]
    if point not in POINTS:
        raise SystemExit(f"unknown start-up point {point!r}: one of {', '.join(POINTS)}")
    sys.path.insert(0, str(ROOT / "services" / "openai_api" / "src"))
    from triton_fleet_openai import __main__ as service

    log_path = os.environ["STARTUP_POINTS_LOG"]
    main_pid = os.getpid()
    count = {"passes": 0, "forks": 0}  # a worker inherits "forks": its own place in the order of forks

    def reached(name):
        if name == "fork-before":
            count["forks"] += 1
        if name != point:
            return
        if os.getpid() == main_pid:
            count["passes"] += 1
        if count["passes" if os.getpid() == main_pid else "forks"] <= skip:
            return
        with open(log_path, "a") as fh:
            fh.write(f"{name} {os.getpid()}\n")
        time.sleep(HOLD_S)

    def before(name, func):
        def wrapped(*args, **kwargs):
            reached(name)
            return func(*args, **kwargs)

        return wrapped

    def after(name, func):
        def wrapped(*args, **kwargs):
            result = func(*args, **kwargs)
            reached(name)
            return result

        return wrapped

    service.prepare_state_dir = before("supervisor-start", service.prepare_state_dir)
    os.register_at_fork(before=lambda: reached("fork-before"), after_in_parent=lambda: reached("fork-parent"),
                        after_in_child=lambda: reached("fork-child"))

    def hold_app(module):
        module.create_app = after("after-app", before("before-app", module.create_app))

    def hold_uvicorn(module):
        startup = module.Server.startup

        async def held_startup(self, *args, **kwargs):
            reached("uvicorn-startup")
            return await startup(self, *args, **kwargs)

        module.Server.startup = held_startup

    # Patched when the service imports them, not before: importing the app here would import prometheus_client
    # before the supervisor has set its multiprocess directory.
    sys.meta_path.insert(0, PatchOnImport({"triton_fleet_openai.app": hold_app, "uvicorn.server": hold_uvicorn}))
    return service.main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
