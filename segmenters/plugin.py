"""Entry-point module: registers the built-in segmenters."""

from core import hookimpl


@hookimpl
def scalecua_register_segmenters(registry):
    registry.register(
        "sliding-window",
        "segmenters.windowed:SlidingWindowSegmenter",
        options="segmenters.windowed:SlidingWindowOptions",
        description="Visual Context Segmentation: token-ID stream pruned to the last K..K+Delta screenshots",
    )
    registry.register(
        "step-wise",
        "segmenters.step_wise:StepWiseSegmenter",
        options="segmenters.step_wise:StepWiseOptions",
        description="one training item per turn: text history plus the latest screenshot",
    )
    registry.register(
        "trajectory",
        "segmenters.windowed:TrajectorySegmenter",
        description="one training item per episode with every screenshot",
    )
