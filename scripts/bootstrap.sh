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
stamp="$venv/.ortlab-installed${extras:+-$extras}"
want="$(sha256sum "$root/pyproject.toml" | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "ortlab: installing ortlab${extras:+[$extras]} into $venv" >&2
  "$venv/bin/python" -m pip install --quiet -e "$root${extras:+[$extras]}"
  echo "$want" > "$stamp"
fi
