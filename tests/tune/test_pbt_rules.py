"""PBT's rules without Ray (the vectorized backend): who is cut, who donates, how values move."""

import random

import pytest

from marl.tune.space import Distribution, SearchSpace
from marl.tune.vectorized import exploit_decisions


def space(mode="max", fraction=0.25):
    return SearchSpace.from_dict(
        {
            "space": {"algorithm.lr": {"loguniform": [1e-4, 1e-2]}},
            "tune": {"mode": mode, "quantile_fraction": fraction, "resample_probability": 0.0},
        }
    )


SCORES = {"m0": 5.0, "m1": 1.0, "m2": 9.0, "m3": 3.0, "m4": 7.0, "m5": float("nan")}
VALUES = {m: {"algorithm.lr": 1e-3 * (i + 1)} for i, m in enumerate(SCORES)}


@pytest.mark.parametrize(
    ("mode", "fraction", "cut", "donors"),
    [
        # 5 scored members (nan is left out): ceil(5 * 0.25) = 2 worst, 2 best
        ("max", 0.25, {"m1", "m3"}, {"m2", "m4"}),
        ("min", 0.25, {"m2", "m4"}, {"m1", "m3"}),
        # ceil(5 * 0.5) = 3 is more than half: 2
        ("max", 0.5, {"m1", "m3"}, {"m2", "m4"}),
    ],
)
def test_the_worst_take_the_best_with_perturbed_values(mode, fraction, cut, donors):
    decisions = exploit_decisions(SCORES, VALUES, space(mode, fraction), random.Random(0))
    assert {d["member"] for d in decisions} == cut
    for d in decisions:
        assert d["donor"] in donors
        assert d["old_values"] == VALUES[d["member"]]
        assert d["donor_values"] == VALUES[d["donor"]]
        factor = d["new_values"]["algorithm.lr"] / VALUES[d["donor"]]["algorithm.lr"]
        assert factor == pytest.approx(1.2) or factor == pytest.approx(0.8)
        assert d["member_score"] == SCORES[d["member"]]


def test_the_decisions_repeat_with_the_seed():
    # 20 members, 10 cut, 10 donors: two draws agree by chance with probability ~1e-10
    scores = {f"m{i:02d}": float(i) for i in range(20)}
    values = {m: {"algorithm.lr": 1e-3} for m in scores}

    def decide(seed):
        return exploit_decisions(scores, values, space(fraction=0.5), random.Random(seed))

    random.seed(1)  # the global generator plays no part
    a = decide("marl-tune:0:500")
    random.seed(2)
    assert decide("marl-tune:0:500") == a
    assert decide("marl-tune:0:1000") != a


def test_one_scored_member_is_never_cut():
    scores = {"m0": 1.0, "m1": float("nan")}
    assert exploit_decisions(scores, VALUES, space(fraction=0.5), random.Random(0)) == []


def test_perturb_moves_a_choice_to_a_neighbour_and_rounds_an_integer():
    d = Distribution("choice", (1, 2, 3))
    moves = {d.perturb(2, random.Random(s), (1.2, 0.8), 0.0) for s in range(20)}
    assert moves == {1, 3}
    ends = {d.perturb(3, random.Random(s), (1.2, 0.8), 0.0) for s in range(20)}
    assert ends == {2, 3}  # clamped at the end
    assert d.perturb(7, random.Random(0), (1.2,), 0.0) in (1, 2, 3)  # not listed: sampled
    r = Distribution("randint", (1, 100))
    assert r.perturb(10, random.Random(0), (1.25,), 0.0) == 12  # 12.5 rounds to even
    u = Distribution("uniform", (0.1, 0.3))
    resampled = u.perturb(5.0, random.Random(0), (2.0,), 1.0)
    assert 0.1 <= resampled <= 0.3


def test_marl_tune_help_lists_the_backends(capsys):
    from marl.tune.cli import main

    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--backend {ray,vectorized}" in text and "the whole population in this process" in text
