"""``python -m plugins.qwen_vl.make_tiny OUT_DIR``: write a tiny random Qwen-VL model directory.

The directory (config, weights, tokenizer with chat template, image processor
config) loads with ``model: {name: qwen-vl, options: {path: OUT_DIR}}``, so a
quickstart runs the same "local directory" path as a real checkpoint.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from plugins.qwen_vl.model import QwenVLModel, QwenVLOptions, TinyModelSettings


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m plugins.qwen_vl.make_tiny", description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", help="directory to write (created if missing)")
    parser.add_argument("--family", default="qwen3_vl", choices=["qwen3_vl", "qwen2_5_vl", "qwen2_vl"])
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    parser.add_argument("--min-pixels", type=int, default=None, help="image processor lower pixel bound")
    parser.add_argument("--max-pixels", type=int, default=None, help="image processor upper pixel bound")
    args = parser.parse_args(argv)
    options = QwenVLOptions(
        tiny=TinyModelSettings(family=args.family),
        seed=args.seed,
        min_pixels=args.min_pixels,
        max_pixels=args.max_pixels,
    )
    out = QwenVLModel(options).save_pretrained_dir(args.out_dir)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
