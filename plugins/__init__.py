"""Built-in plugins that are not environments, samplers, segmenters or trainers:
model families (``qwen_vl``), rollout engines, judge executors, task-synthesis roles, observers."""
