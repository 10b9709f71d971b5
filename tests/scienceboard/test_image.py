"""The scienceboard image variant and scripts/install.sh install the same applications."""

from __future__ import annotations

import re
from pathlib import Path

from environments.containers import build

APPS = {"kalgebra", "texstudio", "texlive-latex-base", "grass-gui"}


def test_the_image_variant_and_the_install_script_agree_on_the_applications() -> None:
    variant = build.VARIANTS["scienceboard"]
    assert APPS <= set(variant.packages)
    assert {"at-spi2-core", "python3-pyatspi"} <= set(variant.packages)  # KAlgebra's judges read AT-SPI
    assert variant.base == "apt"  # derived images can apt-get install ChimeraX's .deb (README)
    script = (Path(__file__).resolve().parents[2] / "scripts" / "install.sh").read_text()
    listed = re.search(r"APT_PACKAGES=\((.*?)\n\)", script, re.DOTALL)
    assert listed is not None
    packages = set(re.sub(r"#[^\n]*", "", listed.group(1)).split())
    assert APPS <= packages
    argv = build.mmdebstrap_argv(variant, "bookworm", "http://mirror/debian", "http://sec/debian")
    included = next(a for a in argv if a.startswith("--include=")).removeprefix("--include=").split(",")
    assert APPS <= set(included)
