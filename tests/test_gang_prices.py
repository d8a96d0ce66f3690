"""The Lagrangian bound over pinned gangs' per-node copies (optsched.gang_prices)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_incremental_bound import _optimum, _pinned_round

from optsched import incremental_bound
from optsched.gang_prices import GangPrices
from optsched.incremental import RoundSolver
from optsched.incremental_bound import _factor, _pinned, fill_bound, pinned_worth_bound
from optsched.model import Instance

FAST = {"num_workers": 1}


def _only_pinned(inst: Instance) -> Instance:
    return Instance.from_dict({**inst.to_dict(), "jobs": [j.to_dict() for j in inst.jobs if j.pinned]})


def _component(inst: Instance) -> list:
    return [_pinned(inst, j, _factor(inst, j), None) for j in inst.jobs if j.pinned]


class _Shaken(GangPrices):
    """Prices drawn at random (each gang's summing to 0 over its copies) before every descent, so
    that the bound is tested away from the prices the steps would find."""

    def __init__(self, seed: int) -> None:
        super().__init__(steps=3)
        self.rng = np.random.default_rng(seed)

    def _start(self, key, copies, points):
        mu = self.rng.normal(0.0, 2.0, (copies, points))
        return mu - mu.mean(axis=0)


@pytest.mark.parametrize("seed", range(16))
def test_the_priced_bound_is_at_least_the_proven_optimum_whatever_the_prices(seed, monkeypatch):
    """With every gang cut (``ENUM_LIMIT`` 1), the fill bound refined by prices (those the steps
    find, and random ones that sum to 0 over each gang's copies) is never below CP-SAT's proven
    optimum; on the round of pinned jobs alone neither is the priced pinned bound."""
    monkeypatch.setattr(incremental_bound, "ENUM_LIMIT", 1)
    inst = _pinned_round(seed, waiting=4)
    best = _optimum(inst).objective
    for prices in (GangPrices(), _Shaken(seed)):
        assert fill_bound(inst, refine=prices) >= best - 1e-9
    alone = _only_pinned(inst)
    if any(len(j.placement) > 1 for j in alone.jobs):
        best = _optimum(alone).objective
        for prices in (GangPrices(), _Shaken(seed)):
            value = prices(alone, _component(alone), None, incremental_bound.TABLE_CELLS, math.inf)
            assert value >= best - 1e-9


@pytest.mark.parametrize("seed", [7, 9, 14, 15, 17])
def test_the_prices_bring_cut_gangs_copies_into_agreement(seed, monkeypatch):
    """Rounds of pinned jobs alone where cutting every gang into copies leaves the bound above
    the optimum: the priced bound lies between the two, reaches the optimum on three of them (9,
    14, 17: the Lagrangian dual has no gap there), its gain is what it took off, and the prices
    kept sum to 0 over each gang's copies."""
    monkeypatch.setattr(incremental_bound, "ENUM_LIMIT", 1)
    inst = _only_pinned(_pinned_round(seed, waiting=0, all_pinned=True))
    cut = pinned_worth_bound(inst)[0]
    best = _optimum(inst).objective
    assert cut > best + 1e-6
    prices = GangPrices(steps=100)
    value = prices(inst, _component(inst), None, incremental_bound.TABLE_CELLS, cut)
    assert best - 1e-9 <= value < cut
    if seed in (9, 14, 17):
        assert value == pytest.approx(best, rel=1e-6)
    assert prices.gain == pytest.approx(cut - value)
    for mu in prices._mu.values():
        assert np.allclose(mu.sum(axis=0), 0.0)


def test_a_node_too_large_leaves_the_component_its_other_bound(monkeypatch):
    """Where the copies on a node have more joint points than ``COPY_COMBOS``, no priced bound is
    formed (``inf``) and the regular one stands."""
    from optsched import gang_prices

    monkeypatch.setattr(incremental_bound, "ENUM_LIMIT", 1)
    monkeypatch.setattr(gang_prices, "COPY_COMBOS", 1)
    inst = _only_pinned(_pinned_round(9, waiting=0, all_pinned=True))
    prices = GangPrices()
    assert prices(inst, _component(inst), None, incremental_bound.TABLE_CELLS, 9.0) == 9.0 and prices.gain == 0.0


def test_a_round_chain_reports_the_priced_bound(monkeypatch):
    """A chain on rounds where gangs are cut reports the priced bound where it is lower
    (``stats["priced_bound"]``), never below the schedule's worth nor the round's optimum."""
    monkeypatch.setattr(incremental_bound, "ENUM_LIMIT", 1)
    chain = RoundSolver("cpsat", time_limit=1.0, options=FAST)
    seen = 0
    for seed in range(12):
        inst = _pinned_round(seed, waiting=4)
        res = chain.solve(inst)
        chain.reset()
        assert res.bound >= res.objective - 1e-9
        assert res.bound >= _optimum(inst).objective - 1e-9
        if "priced_bound" in res.stats:
            seen += 1
            assert res.bound <= res.stats["knapsack_bound"] + 1e-9
    assert seen >= 1
