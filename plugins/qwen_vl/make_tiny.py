"""``python -m plugins.qwen_vl.make_tiny OUT_DIR [--pretrain]``: write a tiny Qwen-VL model directory.

Random weights, or with ``--pretrain`` the cached base pretrained on generic terminal requests
(:mod:`plugins.qwen_vl.pretrain`; built here first when this machine has none).

The directory (config, weights, tokenizer with chat template, image processor
config) loads with ``model: {name: qwen-vl, options: {path: OUT_DIR}}``, so a
quickstart runs the same "local directory" path as a real checkpoint.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from plugins.qwen_vl.model import QwenVLModel, QwenVLOptions, TinyModelSettings
from plugins.qwen_vl.pretrain import PretrainSettings


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m plugins.qwen_vl.make_tiny", description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", help="directory to write (created if missing)")
    parser.add_argument("--family", default="qwen3_vl", choices=["qwen3_vl", "qwen2_5_vl", "qwen2_vl"])
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    parser.add_argument("--min-pixels", type=int, default=None, help="image processor lower pixel bound")
    parser.add_argument("--max-pixels", type=int, default=None, help="image processor upper pixel bound")
    parser.add_argument("--pretrain", action="store_true", help="the generic terminal pretrained base, not random")
    parser.add_argument("--pretrain-steps", type=int, default=PretrainSettings.model_fields["steps"].default,
                        help="optimizer steps of the pretraining (with --pretrain)")
    args = parser.parse_args(argv)
    pretrain = PretrainSettings(steps=args.pretrain_steps, seed=args.seed) if args.pretrain else None
    options = QwenVLOptions(
        tiny=TinyModelSettings(family=args.family, pretrain=pretrain),
        seed=args.seed,
        min_pixels=args.min_pixels,
        max_pixels=args.max_pixels,
    )
    out = QwenVLModel(options).save_pretrained_dir(args.out_dir)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
