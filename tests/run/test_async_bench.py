"""``bench/async_pipeline.py``'s runs load: every override it gives ``core.run`` (the run's seed, each mode's
loop settings, the desktops' iteration settings) is valid for the config it runs, simulated desktops and the
quickstart's real ones alike (the ``--desktops`` run once died at start: it seeded real desktops, which take no
seed)."""

from __future__ import annotations


import pytest

from core.config import load_config

from tests.bench_modules import load_bench


@pytest.fixture(scope="module")
def bench():
    return load_bench("async_pipeline.py")


@pytest.mark.parametrize("which", ["SIMULATED", "QUICKSTART"])
def test_every_mode_of_the_bench_loads_against_its_config(bench, which: str) -> None:
    config = getattr(bench, which)
    desktops = ["run.iterations=3", "run.checkpoint_every=3", "run.eval_every=0"]
    for mode in bench.MODES:
        overrides = [*desktops, *bench.seed_overrides(config, 1), *bench.MODES[mode]]
        loaded, _ = load_config(config, overrides)
        assert loaded.config.run.seed == 1 and loaded.config.run.iterations == 3
    simulated, _ = load_config(bench.SIMULATED, bench.seed_overrides(bench.SIMULATED, 7))
    assert simulated.options["environment"].seed == 7  # the simulated desktops' latencies follow the seed
