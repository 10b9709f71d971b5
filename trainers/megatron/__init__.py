"""Trainer backend ``megatron``: megatron-core + Megatron-Bridge (tensor parallel, distributed optimizer)."""
