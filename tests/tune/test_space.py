"""Search spaces and settings of marl-tune: bad input is refused, before Ray starts."""

import pytest

pytest.importorskip("hydra")

from marl.tune import SearchSpace, load_space
from marl.tune.member import MemberPlan, _Reporter

BASE = ["task=vmas/navigation", "algorithm=mappo"]


def space(keys, **tune):
    return SearchSpace.from_dict({"overrides": BASE, "space": keys, "tune": tune})


def test_unknown_field_is_named_with_the_valid_ones():
    with pytest.raises(ValueError) as err:
        space({"algorithm.lrr": {"choice": [1e-3]}}).check()
    message = str(err.value)
    assert "unknown field 'algorithm.lrr'" in message
    assert "algorithm (mappo) has no field 'lrr'" in message
    assert "'lr'" in message and "'entropy_coef'" in message  # the valid ones


def test_unknown_section_and_group_are_named():
    with pytest.raises(ValueError, match=r"'experimentt'.*valid: \[.*'experiment'"):
        space({"experimentt.total_frames": [100]}).check()
    with pytest.raises(ValueError, match=r"algorithm.groups has no field 'agent'.*\+algorithm@"):
        space({"algorithm.groups.agent.lr": [1e-3]}).check()


def test_per_group_keys_are_checked_against_their_group():
    overrides = [
        "task=pettingzoo/simple_tag",
        "+algorithm@algorithm.groups.adversary=mappo",
        "+algorithm@algorithm.groups.agent=iql",
    ]
    ok = SearchSpace.from_dict(
        {"overrides": overrides, "space": {"algorithm.groups.adversary.lr": [1e-4, 1e-3]}}
    )
    assert ok.check().algorithm.groups.adversary.name == "mappo"
    bad = SearchSpace.from_dict(
        {"overrides": overrides, "space": {"algorithm.groups.agent.clip_epsilon": [0.1]}}
    )
    with pytest.raises(
        ValueError, match=r"algorithm.groups.agent \(iql\) has no field 'clip_epsilon'"
    ):
        bad.check()


def test_scheduler_name_and_distribution_are_checked():
    with pytest.raises(
        ValueError, match=r"unknown scheduler 'bpt'; expected one of \['pbt', 'asha', 'random'\]"
    ):
        space({"algorithm.lr": [1e-3]}, scheduler="bpt")
    with pytest.raises(ValueError, match="unknown distribution 'normal'"):
        space({"algorithm.lr": {"normal": [0, 1]}})
    with pytest.raises(ValueError, match=r"loguniform needs low > 0"):
        space({"algorithm.lr": {"loguniform": [0, 1]}})


def test_a_value_of_the_wrong_type_is_refused():
    with pytest.raises(ValueError, match="does not fit its field"):
        space({"algorithm.epochs": {"choice": ["many"]}}).check()


def test_pbt_refuses_keys_that_change_the_networks():
    with pytest.raises(ValueError, match=r"'model\.actor_cells' cannot be searched by pbt"):
        space({"model.actor_cells": [[32], [64]]}).check()
    # asha and random search may change them
    space({"model.actor_cells": [[32], [64]]}, scheduler="asha").check()


def test_a_metric_that_is_not_logged_names_the_logged_ones():
    reporter = _Reporter(MemberPlan("/tmp", (), "eval/reward", 100, False), "member_00", {})

    class Trainer:
        frames = 100

    with pytest.raises(ValueError, match=r"'eval/reward' is not logged.*'eval/episode_reward'"):
        reporter.report(Trainer(), {"eval/episode_reward": 1.0, "frames": 100})


def test_shipped_space_loads_and_checks():
    shipped = load_space("navigation_mappo")
    assert shipped.settings.scheduler == "pbt"
    assert shipped.check().task == "vmas/navigation"
    with pytest.raises(FileNotFoundError, match="navigation_mappo"):
        load_space("no_such_space")
