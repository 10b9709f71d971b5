"""qwen_vl plugins for ScaleCUA."""
