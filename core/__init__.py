"""ScaleCUA core: hook specs, registries, configuration, data types and the run loop.

Plugins import ``hookimpl`` from here::

    from core import hookimpl

    @hookimpl
    def scalecua_register_samplers(registry):
        registry.register("my-sampler", "my_pkg.sampler:MySampler", options="my_pkg.sampler:Options")
"""

from core.hookspecs import hookimpl

__all__ = ["hookimpl", "__version__"]
__version__ = "0.1.0"
