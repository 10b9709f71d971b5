"""The parts of ``bench/faults.py`` that strike: the injector (desktop processes, judge supervisors, containers)
and the full-disk soak. Not benchmarks themselves."""
