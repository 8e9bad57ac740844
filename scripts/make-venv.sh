#!/usr/bin/env bash
# Creates (or keeps) a Python venv holding exactly the given pinned PyPI
# packages: the one rule behind scripts/install-test-venv.sh,
# scripts/install-reference.sh and bench/real-models.sh (Debian's pip
# refuses system-wide installs). A venv whose recorded pins match is kept;
# otherwise it is made anew and the pins installed (one retry). A failed
# install removes the venv (tests then skip, naming the script) and exits 1.
# Usage: make-venv.sh DIR NAME PIN... (NAME prefixes the messages)
set -euo pipefail
venv=$1 name=$2
shift 2
pins=("$@")
stamp=$venv/.mtpspec-pins
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${pins[*]}" ]; then
  echo "[$name] $venv: ${pins[*]}"
  exit 0
fi
start=$(date +%s)
rm -rf "$venv"
python3 -m venv "$venv"
pip_install() {
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-input "${pins[@]}"
}
if ! pip_install && ! pip_install; then
  rm -rf "$venv"
  echo "[$name] pip install ${pins[*]} failed (PyPI unreachable?)" >&2
  exit 1
fi
echo "${pins[*]}" > "$stamp"
echo "[$name] $venv: ${pins[*]} ($(( $(date +%s) - start )) s)"
