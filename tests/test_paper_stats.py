"""The paper's statistics (issue 17 item 5): Holm over the prespecified family, DecoEvo vs SkillOpt on each
backbone, corrected across backbones; every other comparison an exploratory family of its own."""

from __future__ import annotations

import pytest

from decoevo.analysis.stats import EXPLORATORY_FAMILY, PRIMARY_FAMILY, holm_by_family, paired_difference
from decoevo.report.tables import Comparison, ComparisonTable, with_holm


def _comparison(method: str, diffs: list[float], family: str) -> Comparison:
    ci = paired_difference(dict(enumerate(diffs)), dict.fromkeys(range(len(diffs)), 0.0))
    return Comparison(method, tuple(range(len(diffs))), (), ci, None, None, None, family=family)


def test_holm_family_is_decoevo_vs_skillopt_across_backbones():
    # three backbones, as in the paper; each also compares DecoEvo with an ablation that barely differs
    tables = [
        ComparisonTable(
            "decoevo",
            "avg",
            (
                _comparison("skillopt", [3.0 + 0.1 * i, 3.2, 2.9 + 0.05 * i, 3.1, 3.05], PRIMARY_FAMILY),
                _comparison("no_verification", [0.5, -0.2 + 0.1 * i, 0.4, 0.1, 0.3], EXPLORATORY_FAMILY),
            ),
        )
        for i in range(3)
    ]
    out = with_holm(tables)
    primary = [t.rows[0] for t in out]
    p = sorted((c.ci.p_value, i) for i, c in enumerate(primary))
    # the family is the three SkillOpt comparisons: the smallest p is multiplied by 3, the next by 2, ...
    running = 0.0
    for rank, (pv, i) in enumerate(p):
        running = max(running, min(1.0, (3 - rank) * pv))
        assert primary[i].p_holm == pytest.approx(running)
    assert all(c.reject for c in primary)
    exploratory = [t.rows[1] for t in out]
    pe = sorted(c.ci.p_value for c in exploratory)
    assert min(c.p_holm for c in exploratory) == pytest.approx(min(1.0, 3 * pe[0]))
    # adding the exploratory comparisons to the paper's family would have made it stricter (x6, not x3)
    smallest = min(c.ci.p_value for c in primary)
    assert min(c.p_holm for c in primary) == pytest.approx(3 * smallest)


def test_holm_by_family_needs_a_family_for_every_p_value():
    assert holm_by_family({"a": 0.01, "b": 0.04}, {"a": "x", "b": "y"})["b"].adjusted == pytest.approx(0.04)
    with pytest.raises(ValueError, match="no family"):
        holm_by_family({"a": 0.01}, {})
