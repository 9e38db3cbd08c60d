"""Threshold comparisons with one documented tolerance (eqs. 4, 6, 8, 10 and the SC-CoEvo margin).

Every value compared with a threshold is a mean or a difference of model-reported scores (u_q in tenths,
e_i, weights), so a value the paper's rule puts exactly on a threshold (Δ_str = δ, m_g = γ,
|z_i − z_j| = τ_tie) reaches the comparison as a float a few ulps either side of it. Deciding that by the
float's last bit accepted a Δ of exactly δ in about two thirds of cases. Here a value within
`SCORE_TOLERANCE` of a threshold counts as equal to it, so `>` and `≥` follow the paper's strict and
non-strict rules exactly at the boundary. The tolerance is far above float error (a mean of 10^4 scores
in [0, 1] is off by < 1e-12) and far below any difference two scores written with a few decimals can
have, so away from the boundary no decision changes.
"""

from __future__ import annotations

SCORE_TOLERANCE = 1e-9


def exceeds(value: float, threshold: float) -> bool:
    """value > threshold, with values within the tolerance of the threshold equal to it (not above)."""
    return value - threshold > SCORE_TOLERANCE


def reaches(value: float, threshold: float) -> bool:
    """value ≥ threshold, with values within the tolerance of the threshold equal to it (so reaching it)."""
    return value - threshold >= -SCORE_TOLERANCE


def below(value: float, threshold: float) -> bool:
    """value < threshold: the negation of `reaches`."""
    return not reaches(value, threshold)
