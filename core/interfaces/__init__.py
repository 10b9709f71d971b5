"""The contracts each component kind implements (one module per area, all re-exported here).

A factory registered for a kind is called as ``factory(options, **context)``
where ``options`` is the component's validated pydantic options model. It
returns an object implementing the matching base class (re-exported here). Which base class
and which keyword context each kind gets is one table, :mod:`core.kinds`; the
core checks both when it creates a component.

I/O-bound kinds (environments, rollout engines, judge executors, synthesizer
roles) are asyncio-native so one process can drive hundreds of desktops;
compute-bound kinds (samplers, segmenters, trainers) are synchronous.
"""

from core.interfaces.environment import Environment, EnvironmentBackend, JudgeCall, JudgeExecutor, JudgeServices
from core.interfaces.model import ChatRenderer, Message, PolicyModel, RenderedPrompt
from core.interfaces.rollout import EngineRestarted, Generation, GenerationRequest, RolloutEngine
from core.interfaces.synthesis import SynthesisPipeline, SynthesizerRole
from core.interfaces.tracking import Tracker
from core.interfaces.training import OBJECTIVES, EpisodeContext, Sampler, Segmenter, TrainerBackend

__all__ = [
    "OBJECTIVES", "ChatRenderer", "EngineRestarted", "Environment", "EnvironmentBackend", "EpisodeContext", "Generation",
    "GenerationRequest", "JudgeCall", "JudgeExecutor", "JudgeServices", "Message", "PolicyModel", "RenderedPrompt",
    "RolloutEngine",
    "Sampler", "Segmenter", "SynthesisPipeline", "SynthesizerRole", "Tracker", "TrainerBackend",
]
