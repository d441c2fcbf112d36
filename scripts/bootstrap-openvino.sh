#!/usr/bin/env bash
# A second virtualenv (.venv-openvino) with onnxruntime-openvino instead of onnxruntime-gpu:
# the two packages provide the same `onnxruntime` module and cannot share an environment.
# ortlab is installed without its declared dependencies (which name onnxruntime-gpu) and the
# rest are listed here. Idempotent. Used by ./run-tests for the tests marked `openvino`, and
# as the "ortlab (OpenVINO)" kernel of the Lab's browser test.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv-openvino"
python="${PYTHON:-python3}"
deps=(onnxruntime-openvino "onnx>=1.16" "numpy>=1.24" "pandas>=2.0" "plotly>=5.20" "tqdm>=4.60"
      "msgspec>=0.18" "psutil>=5.9" "sympy>=1.12" "pytest>=8" "hypothesis>=6.100"
      # a Jupyter kernel, so the Lab's browser test can toggle a second EP that really loads
      "ipykernel>=6" "ipywidgets>=8.1" "anywidget>=0.9" "netron>=7.0")
want="$(printf '%s\n' "${deps[@]}" | sha256sum | cut -d' ' -f1)"
if [ ! -x "$venv/bin/python" ]; then
  echo "ortlab: creating $venv" >&2
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
fi
if [ "$(cat "$venv/.ortlab-installed" 2>/dev/null)" != "$want" ]; then
  echo "ortlab: installing onnxruntime-openvino and ortlab into $venv" >&2
  "$venv/bin/python" -m pip install --quiet "${deps[@]}"
  "$venv/bin/python" -m pip install --quiet --no-deps -e "$root"
  echo "$want" > "$venv/.ortlab-installed"
fi
