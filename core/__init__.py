"""ScaleCUA core, in three layers (``core/README.md``): the contract at this top level (hook specs, kinds,
interfaces, types, registries, errors, configuration), the runtime that drives plugins (:mod:`core.runtime`) and
the commands a user runs (:mod:`core.commands`, each ``python -m core.<name>``). Imports go only downward.

Plugins import ``hookimpl`` from here::

    from core import hookimpl

    @hookimpl
    def scalecua_register_samplers(registry):
        registry.register("my-sampler", "my_pkg.sampler:MySampler", options="my_pkg.sampler:Options")
"""

from core.hookspecs import hookimpl

__all__ = ["hookimpl", "__version__"]
__version__ = "0.1.0"
