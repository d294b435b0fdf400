"""The engine store on a host: /var/lib/triton-fleet/engines/<fingerprint>/ (build, verify, activate, prune)
and the fleet plan (one builder per fingerprint, copies for the rest).

Pure Python; commands are run through an injected ``runner(argv) -> (rc, output)`` so the same
code drives docker with the pinned Triton TRT-LLM image, TRT-LLM installed on the host, or the
stand-in builder in tests.
"""

import glob
import os
import shutil
import socket
import time

from . import artifact_manifest as am
from . import profile as profile_schema
from .fingerprint import fingerprint as compute_fingerprint
from .trtllm_commands import TRTLLM_VERSION, CommandError, build_steps, explain_failure, world_size

ENGINE_MANIFEST = "manifest.json"
CURRENT_LINK = "current"
ENGINE_RUNTIMES = ("trtllm-engine",)
NO_BUILD_RUNTIMES = ("trtllm-llmapi", "transformers")
OUTPUT_TAIL = 4000


class EngineError(RuntimeError):
    """A build or store operation failed; ``str()`` is the operator message."""

    def __init__(self, msg, **details):
        super().__init__(msg)
        self.details = details


def check_fingerprint(profile):
    """The profile's fingerprint, after checking it matches its build fields."""
    if not isinstance(profile, dict):
        raise EngineError("profile must be a dict following docs/profile.md")
    stated = profile.get("fingerprint")
    actual = compute_fingerprint(profile)
    if stated != actual:
        raise EngineError(
            "profile {!r} carries fingerprint {!r} but its build fields hash to {}: the profile was edited after "
            "planning. Re-run the preflight play so the planner writes a consistent profile.".format(profile.get("name"), stated, actual))
    return actual


def model_dir(models_dir, profile):
    try:
        return profile_schema.checkpoint_dir(profile, models_dir)
    except profile_schema.ProfileError as exc:
        raise EngineError(str(exc)) from exc


def engine_path(engines_dir, fp):
    return os.path.join(engines_dir, fp)


def verify_engine(engines_dir, fp, quick=False):
    """State of one fingerprint's artifact on this host (JSON-able)."""
    path = engine_path(engines_dir, fp)
    manifest, report = am.verify_stored(path, ENGINE_MANIFEST, quick=quick)
    valid = bool(report["valid"]) and manifest is not None and manifest.get("fingerprint") == fp
    reason = report.get("reason")
    if manifest is not None and manifest.get("fingerprint") != fp:
        reason = "manifest fingerprint {!r} does not match the directory {}".format(manifest.get("fingerprint"), fp)
    return {
        "path": path,
        "exists": os.path.isdir(path),
        "valid": valid,
        "reason": None if valid else reason,
        "digest": am.content_digest(manifest) if (manifest is not None and valid) else None,
        "manifest": manifest if valid else None,
        "problems": {k: report.get(k, []) for k in ("missing", "bad", "extra")},
    }


def launcher_argv(tool, script, args, launcher, *, image=None, docker_bin="docker", examples_dir="/app/examples",
                  python="python3", trtllm_build="trtllm-build", gpu_ids=None, mounts=(), docker_args=()):
    """argv for one step: inside ``image`` with docker (GPU request), or on the host (``launcher: host``)."""
    if script is None:
        inner = [trtllm_build] + list(args)
    else:
        inner = [python, examples_dir.rstrip("/") + "/" + script] + list(args)
    if launcher == "host":
        return inner
    if launcher != "docker":
        raise EngineError(f"launcher must be docker or host, got {launcher!r}")
    if not image:
        raise EngineError("launcher docker needs an image (profile image.ref)")
    argv = [docker_bin, "run", "--rm", "--ipc=host", "--ulimit", "memlock=-1", "--ulimit", "stack=67108864"]
    argv += ["--gpus", f'"device={gpu_ids}"' if gpu_ids else "all"]
    for mount in mounts:
        argv += ["-v", mount]
    argv += list(docker_args)
    argv += [image] + inner
    return argv


def build(profile, engines_dir, checkpoint_dir, runner, *, launcher="docker", check_mode=False, tool_opts=None,
          clock=time.time, hostname=None):
    """Build the engine for ``profile`` unless a valid artifact with its fingerprint exists.

    Returns a dict (changed, built, fingerprint, path, commands, manifest, msg). Raises EngineError
    with an explanation when a step fails; the temporary build directory is removed and any
    previous artifact is left untouched.
    """
    fp = check_fingerprint(profile)
    runtime = profile.get("runtime")
    if runtime in NO_BUILD_RUNTIMES:
        return no_build_result(profile, checkpoint_dir)
    if runtime not in ENGINE_RUNTIMES:
        raise EngineError("unknown runtime {!r}; expected one of {}".format(runtime, ", ".join(ENGINE_RUNTIMES +
                                                                                     NO_BUILD_RUNTIMES)))
    final = engine_path(engines_dir, fp)
    tmp = os.path.join(engines_dir, ".build-" + fp)
    work, out = os.path.join(tmp, "work"), os.path.join(tmp, "engine")
    try:
        steps = build_steps(profile, checkpoint_dir, work, out)
    except CommandError as exc:
        raise EngineError(str(exc)) from exc
    state = verify_engine(engines_dir, fp)
    result = {"fingerprint": fp, "path": final, "built": False, "changed": False, "build_required": True,
              "runtime": runtime, "before": {k: state[k] for k in ("exists", "valid", "reason")}}
    if state["valid"]:
        result.update(msg=f"engine {fp} is built and verified; nothing to do", manifest=state["manifest"],
                      digest=state["digest"], commands=state["manifest"].get("commands", []))
        return result
    opts = dict(tool_opts or {})
    gpu_ids = opts.pop("gpu_ids", None) or _default_gpu_ids(profile)
    mounts = [f"{engines_dir}:{engines_dir}", f"{checkpoint_dir}:{checkpoint_dir}:ro"]
    argvs = [launcher_argv(s["tool"], s["script"], s["args"], launcher, image=profile["image"].get("ref"),
                           gpu_ids=gpu_ids, mounts=mounts, **opts) for s in steps]
    result["commands"] = argvs
    if check_mode:
        result.update(changed=True, built=True, msg="would build engine {} ({})".format(fp, state["reason"]))
        return result
    if not os.path.isfile(os.path.join(checkpoint_dir, "config.json")):
        raise EngineError(f"checkpoint {checkpoint_dir} has no config.json: run the model_artifacts role first (it places the "
                          "checkpoint there), or fix the model source")
    lock = am.DirLock(os.path.join(engines_dir, ".lock-" + fp))
    os.makedirs(engines_dir, exist_ok=True)
    with lock:
        shutil.rmtree(tmp, ignore_errors=True)  # a crashed earlier attempt
        os.makedirs(work)
        records = []
        try:
            for step, argv in zip(steps, argvs, strict=False):
                started = clock()
                rc, output = runner(argv)
                wall = round(clock() - started, 3)
                records.append({"tool": step["tool"], "argv": argv, "rc": rc, "wall_s": wall})
                if rc != 0:
                    raise EngineError(
                        "engine build for {} failed in {} (rc {}): {}. No artifact was published; {}".format(fp, step["tool"], rc, explain_failure(step["tool"], output, profile),
                           f"the previous engines under {engines_dir} are untouched"),
                        output_tail=(output or "")[-OUTPUT_TAIL:], steps=records)
            _check_engine_output(out, world_size(profile))
            meta = {
                "fingerprint": fp,
                "profile_name": profile.get("name"),
                "model": {k: (profile.get("model") or {}).get(k) for k in ("key", "hf_id", "revision")},
                "runtime": runtime,
                "trtllm_version": (profile.get("image") or {}).get("trtllm"),
                "trtllm_flags_checked_against": TRTLLM_VERSION,
                "image": {k: (profile.get("image") or {}).get(k) for k in ("ref", "triton", "trtllm", "cuda")},
                "gpu": {k: (profile.get("gpu") or {}).get(k) for k in ("sku", "compute_capability")},
                "launcher": launcher,
                "commands": argvs,
                "steps": records,
                "wall_s_total": round(sum(r["wall_s"] for r in records), 3),
                "built_at": round(clock(), 3),
                "built_on": hostname or socket.gethostname(),
            }
            manifest = am.build_manifest(out, "engine", ENGINE_MANIFEST, extra=meta)
            with open(os.path.join(out, ENGINE_MANIFEST), "wb") as handle:
                handle.write(am.dump_manifest(manifest))
                handle.flush()
                os.fsync(handle.fileno())
            am.publish(out, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    result.update(changed=True, built=True, manifest=manifest, digest=am.content_digest(manifest),
                  msg="built engine {} in {:.1f}s".format(fp, meta["wall_s_total"]))
    return result


def _default_gpu_ids(profile):
    ids = ((profile.get("parallel") or {}).get("gpu_device_ids") or [])
    if ids and isinstance(ids[0], str) and ids[0]:
        return ids[0]
    return ",".join(str(i) for i in range(world_size(profile)))


def _check_engine_output(out, world):
    missing = [n for n in ["config.json"] + [f"rank{r}.engine" for r in range(world)]
               if not os.path.isfile(os.path.join(out, n))]
    if missing:
        raise EngineError("trtllm-build exited 0 but {} lacks {}; the build is incomplete - check the builder's "
                          "disk space and logs".format(out, ", ".join(missing)))


def no_build_result(profile, checkpoint_dir):
    runtime = profile.get("runtime")
    return {
        "changed": False, "built": False, "build_required": False, "runtime": runtime,
        "fingerprint": profile.get("fingerprint"), "path": checkpoint_dir, "manifest": None, "digest": None,
        "commands": [],
        "msg": f"runtime {runtime} has no engine build step: the checkpoint {checkpoint_dir} is the artifact",
    }


def install_copy(engines_dir, fp, manifest, sources, check_mode=False):
    """Install a copy of an engine (from a staging dir / shared path), sha256-verified on arrival."""
    am.validate_manifest(manifest)
    if manifest.get("fingerprint") != fp:
        raise EngineError("manifest is for fingerprint {!r}, not {}; pass the manifest of this fingerprint's "
                          "artifact".format(manifest.get("fingerprint"), fp))
    dest = engine_path(engines_dir, fp)
    staging = os.path.join(engines_dir, ".staging", fp)
    try:
        res = am.install(dest, manifest, ENGINE_MANIFEST, sources=sources, staging=staging, check_mode=check_mode)
    except am.ManifestError as exc:
        raise EngineError(str(exc)) from exc
    return res


def current(engines_dir):
    link = os.path.join(engines_dir, CURRENT_LINK)
    return os.readlink(link) if os.path.islink(link) else None


def activate(engines_dir, fp, check_mode=False):
    """Point engines/current at ``fp`` (atomic symlink swap) once its artifact verifies."""
    before = current(engines_dir)
    if before == fp:
        return {"changed": False, "before": before, "after": fp}
    state = verify_engine(engines_dir, fp, quick=True)
    if not state["valid"]:
        raise EngineError("refusing to activate {}: {}".format(fp, state["reason"]))
    if not check_mode:
        tmp = os.path.join(engines_dir, ".current.tmp")
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(fp, tmp)
        os.replace(tmp, os.path.join(engines_dir, CURRENT_LINK))
    return {"changed": True, "before": before, "after": fp}


def prune(engines_dir, keep, protect=(), check_mode=False):
    """Keep the ``keep`` most recently built fingerprints (plus current and ``protect``); remove the rest.

    Leftover .build-* directories of crashed runs are removed as well.
    """
    if keep < 1:
        raise EngineError("keep must be >= 1 (the serving engine is always kept)")
    if not os.path.isdir(engines_dir):
        return {"changed": False, "removed": [], "kept": []}
    entries = []
    for name in os.listdir(engines_dir):
        path = os.path.join(engines_dir, name)
        if name.startswith(".") or name == CURRENT_LINK or os.path.islink(path) or not os.path.isdir(path):
            continue
        manifest = am.read_manifest(path, ENGINE_MANIFEST)
        built_at = (manifest or {}).get("built_at") or int(os.path.getmtime(path))
        entries.append((built_at, name))
    entries.sort(reverse=True)
    protected = set(protect) | ({current(engines_dir)} if current(engines_dir) else set())
    kept = [name for _built_at, name in entries if name in protected]
    removed = []
    for _built_at, name in entries:
        if name in protected:
            continue
        if len(kept) < keep:
            kept.append(name)
        else:
            removed.append(name)
    stale = [p for p in glob.glob(os.path.join(engines_dir, ".build-*")) if os.path.isdir(p)]
    if not check_mode:
        for name in removed:
            shutil.rmtree(os.path.join(engines_dir, name))
        for path in stale:
            shutil.rmtree(path, ignore_errors=True)
    return {"changed": bool(removed or stale), "removed": removed, "kept": kept,
            "stale_builds": [os.path.basename(p) for p in stale]}


def plan_fleet(profiles, states, builders=(), order=None):
    """Group hosts by fingerprint; pick one builder each; decide who builds and who receives a copy.

    ``profiles``: {host: profile}. ``states``: {host: verify_engine() result (valid, digest)}.
    ``builders``: hosts of the ``engine_builders`` group. ``order``: host order (inventory order).
    A builder must hold the fingerprint's profile (same GPU SKU and model): the first member of
    ``builders`` inside the group, else the group's first host.
    """
    order = list(order or sorted(profiles))
    groups, errors = {}, []
    for host in order:
        if host not in profiles:
            continue
        try:
            fp = check_fingerprint(profiles[host])
        except EngineError as exc:
            errors.append(f"{host}: {exc}")
            continue
        groups.setdefault(fp, []).append(host)
    if errors:
        raise EngineError("; ".join(errors))
    plan = {"groups": {}, "hosts": {}, "builds": [], "sources": []}
    for fp, hosts in groups.items():
        profile = profiles[hosts[0]]
        runtime = profile.get("runtime")
        entry = {"fingerprint": fp, "runtime": runtime, "hosts": hosts, "profile_name": profile.get("name")}
        plan["groups"][fp] = entry
        if runtime not in ENGINE_RUNTIMES:
            entry.update(build_required=False, builder=None, source=None, build=False, copy_to=[])
            for host in hosts:
                plan["hosts"][host] = {"fingerprint": fp, "build_required": False, "build": False, "copy": False,
                                       "source": None, "serve_source": False}
            continue
        builder = next((b for b in builders if b in hosts), hosts[0])
        st = {h: (states.get(h) or {}) for h in hosts}
        valid = [h for h in hosts if st[h].get("valid")]
        if st[builder].get("valid"):
            source, need_build = builder, False
        elif valid:
            source, need_build = valid[0], False
        else:
            source, need_build = builder, True
        ref = None if need_build else st[source].get("digest")
        copy_to = [h for h in hosts if h != source and
                   (need_build or not st[h].get("valid") or st[h].get("digest") != ref)]
        entry.update(build_required=True, builder=builder, source=source, build=need_build, copy_to=copy_to,
                     reference_digest=ref)
        if need_build:
            plan["builds"].append(builder)
        if copy_to:
            plan["sources"].append(source)
        for host in hosts:
            plan["hosts"][host] = {"fingerprint": fp, "build_required": True, "build": need_build and host == source,
                                   "copy": host in copy_to, "source": source,
                                   "serve_source": host == source and bool(copy_to)}
    return plan
