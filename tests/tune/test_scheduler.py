"""marl-tune's PBT scheduler without a Ray run: the two changes to Ray's PBT."""

import pytest

pytest.importorskip("ray.tune")

from ray.tune.experiment import Trial
from ray.tune.schedulers import PopulationBasedTraining, TrialScheduler
from ray.tune.schedulers.pbt import _PBTTrialState

from marl.tune.run import _pbt


class FakeTrial:
    """What PBT reads of a trial in these paths: its status and tag."""

    def __init__(self, name, status, frames):
        self.name, self.status, self.frames = name, status, frames
        self.experiment_tag = name

    def __repr__(self):
        return self.name


class FakeController:
    def __init__(self, trials):
        self.trials = trials

    def get_trials(self):
        return self.trials

    def get_live_trials(self):
        return [t for t in self.trials if t.status != Trial.TERMINATED]


def _scheduler(cls, trials, next_round):
    pbt = cls(
        time_attr="frames",
        metric="score",
        mode="max",
        perturbation_interval=500,
        hyperparam_mutations={"lr": [0.0, 0.01]},
        synch=True,
    )
    for t in trials:
        pbt._trial_state[t] = _PBTTrialState(t)
        pbt._trial_state[t].last_train_time = t.frames
    pbt._next_perturbation_sync = next_round
    return pbt


def test_synchronous_pbt_never_waits_on_itself():
    # every member paused at 1,000 frames and the next round set to 1,000 (Ray sets it to
    # the furthest member's frames when members stand beyond it, as after a resume)
    trials = [FakeTrial(f"member_0{i}", Trial.PAUSED, 1000) for i in range(3)]
    controller = FakeController(trials)
    stuck = _scheduler(PopulationBasedTraining, trials, 1000)
    assert stuck.choose_trial_to_run(controller) is None  # Ray's: no member ever runs again

    pbt = _scheduler(_pbt(1500), trials, 1000)
    assert pbt.choose_trial_to_run(controller) in trials
    assert pbt._next_perturbation_sync == 1500  # the next round: one interval further on

    # the most behind member decides where the next round is
    trials[1].frames = pbt._trial_state[trials[1]].last_train_time = 500
    pbt = _scheduler(_pbt(1500), trials, 500)
    assert pbt.choose_trial_to_run(controller) is trials[1]
    assert pbt._next_perturbation_sync == 1000


def test_synchronous_pbt_still_waits_for_a_running_member():
    trials = [
        FakeTrial("member_00", Trial.PAUSED, 1000),
        FakeTrial("member_01", Trial.RUNNING, 500),
    ]
    pbt = _scheduler(_pbt(1500), trials, 1000)
    assert pbt.choose_trial_to_run(FakeController(trials)) is None  # it reports, then a round
    assert pbt._next_perturbation_sync == 1000


def test_no_exploit_at_a_members_last_report():
    trials = [FakeTrial("member_00", Trial.RUNNING, 1000)]
    pbt = _scheduler(_pbt(1500), trials, 1000)
    result = {"frames": 1500, "score": 1.0}
    assert pbt.on_trial_result(FakeController(trials), trials[0], result) == TrialScheduler.CONTINUE
    assert pbt._trial_state[trials[0]].last_train_time == 1000  # Ray's PBT never saw it
