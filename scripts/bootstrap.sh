#!/usr/bin/env bash
# Create or refresh the project's virtualenv (.venv) with ortlab installed in editable mode.
# Idempotent: reinstalls only when pyproject.toml changed. Usage: scripts/bootstrap.sh [extras]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
extras="${1:-}"
venv="$root/.venv"
python="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
  echo "ortlab: creating $venv" >&2
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
fi
# Plugin execution providers for the tests (`dev`), and onnxruntime-genai (the reference
# generator the decoder tests compare ortlab's greedy tokens with): installed with --no-deps,
# because their dependency on the `onnxruntime` wheel would replace onnxruntime-gpu's module
# (a pip extra cannot say --no-deps, so they are not an extra). They stay optional for users.
plugins=(onnxruntime-ep-openvino==1.8.1 onnxruntime-qnn==2.7.0 onnxruntime-genai==0.18.0)
stamp="$venv/.ortlab-installed${extras:+-$extras}"
want="$( (cat "$root/pyproject.toml"; printf '%s\n' "${plugins[@]}") | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "ortlab: installing ortlab${extras:+[$extras]} into $venv" >&2
  "$venv/bin/python" -m pip install --quiet -e "$root${extras:+[$extras]}"
  if [ "$extras" = "dev" ]; then
    echo "ortlab: installing the plugin EPs (${plugins[*]}) with --no-deps" >&2
    "$venv/bin/python" -m pip install --quiet --no-deps "${plugins[@]}"
  fi
  echo "$want" > "$stamp"
fi
