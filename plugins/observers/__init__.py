"""Observer plugins: lifecycle-hook implementations (metric sinks, dashboards).

The entry point ``observers`` loads this module; each observer below is a
plain object whose hook implementations pluggy calls for every run.
"""

from plugins.observers.tensorboard import TensorBoardObserver

tensorboard = TensorBoardObserver()
