"""Parametric task families: the template proposer's source of verifiable terminal tasks.

``CATALOG`` holds the families (:mod:`.short`: one command each, and the infeasible requests; :mod:`.long`: one
command per item, 12 or more turns). :func:`plugins.synthesis.families.splits.plan_variants` lays out a pool's
train / validation / test variants and its held-out families; :func:`.splits.check_disjoint` verifies that no
test value or held-out family leaks into training.
"""

from plugins.synthesis.families import long as _long  # noqa: F401  (registers the long families)
from plugins.synthesis.families.short import CATALOG
from plugins.synthesis.families.spec import SPLITS, Family, Variant

__all__ = ["CATALOG", "SPLITS", "Family", "Variant"]
