#!/usr/bin/env bash
# Install everything ScaleCUA needs on a fresh Debian/Ubuntu machine (idempotent).
#   - system packages: Xvfb + xdotool + a window manager, the bundled tasks' applications, podman
#   - a virtual environment in .venv with the CPU build of torch first, then the project
# Set SCALECUA_SKIP_APT=1 to skip the system packages (e.g. no root).
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  xvfb xdotool x11-utils openbox imagemagick dbus-x11 at-spi2-core python3-pyatspi
  xterm mousepad libreoffice-calc libreoffice-writer libreoffice-impress chromium socat xsel tesseract-ocr fonts-dejavu-core
  ffmpeg   # screen recordings (the probe's /start_recording, local-desktop's record_video)
  podman runc netavark aardvark-dns iptables mmdebstrap
  kalgebra texstudio texlive-latex-base grass-gui   # ScienceBoard tasks (~145 MB download, ~725 MB installed)
)

if [ "${SCALECUA_SKIP_APT:-0}" != "1" ] && command -v apt-get >/dev/null 2>&1; then
  missing=()
  for pkg in "${APT_PACKAGES[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    echo "installing system packages: ${missing[*]}" >&2
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  fi
fi

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip --disable-pip-version-check -q)
# torch first, pinned: the CPU build; an open range asked for first would pull a multi-GB CUDA build.
if ! .venv/bin/python -c "import torch" >/dev/null 2>&1; then
  "${PIP[@]}" install "torch==${SCALECUA_TORCH_VERSION:-2.13.0}" >&2
fi
"${PIP[@]}" install -e '.[dev]' >&2
# OSWorld's own package, for the judges' conformance tests (tests/judges/test_conformance.py): it pins torch ~2.5
# and transformers ~4.35, so it comes without its dependencies (what its compared modules import is in [dev])
"${PIP[@]}" install --no-deps "desktop-env==1.0.2" >&2
