"""Configuration: what a YAML file may say (:mod:`.schema`, :mod:`.stages`) and how it is loaded and validated
(:mod:`.loading`: omegaconf, ``KEY=VALUE`` overrides, two-phase validation, every problem by its path).

``--config`` names a file, ``package:<module>/<file>`` or a packaged config by name (:mod:`.files`).
"""

from core.config.loading import apply_overrides, load_config, load_raw, validate
from core.config.schema import (
    SLOT_KINDS,
    AlgorithmSection,
    Config,
    EvalSet,
    PluginsSection,
    ResolvedConfig,
    RolloutSection,
    RunSection,
    Slot,
    TasksSection,
)

__all__ = [
    "SLOT_KINDS", "AlgorithmSection", "Config", "EvalSet", "PluginsSection", "ResolvedConfig", "RolloutSection",
    "RunSection", "Slot", "TasksSection", "apply_overrides", "load_config", "load_raw", "validate",
]
