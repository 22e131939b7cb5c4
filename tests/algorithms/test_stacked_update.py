"""Many runs' on-policy updates in one vmapped call equal each run's own update."""

import pytest
import torch

from marl.algorithms import Algorithm
from marl.algorithms.updates.stacked import StackedOnPolicy
from marl.collectors import Collector
from marl.testing import MultiAgentFakeEnv, SingleAgentFakeEnv

RUNS = 3
# one epoch of three minibatches: a second epoch's order would differ from the run alone's,
# whose loss draws from torch's global generator between its epochs' permutations (the
# Monte Carlo entropy of the walkers' tanh-normal policy), while each stacked run draws its
# permutations from its own generator
SETTINGS = {"minibatch_size": 20, "epochs": 1, "max_grad_norm": 0.05, "lr": 1e-3}
# each run's own loss hyperparameters (a population's members): run r takes the r-th value.
# gamma and lmbda reach the runs through their own estimators (process), the others
# through the stacked call; max_grad_norm None: that run does not clip
PER_RUN = {
    "clip_epsilon": [0.2, 0.05, 0.3],
    "critic_coef": [1.0, 0.5, 2.0],
    "clip_value": [0.5, 0.01, 0.2],
    "gamma": [0.99, 0.9, 0.5],
    "lmbda": [0.95, 0.5, 0.0],
    "max_grad_norm": [0.05, None, 0.5],
    "lr": [1e-3, 2e-3, 5e-4],
}
# the entropy bonus per run only where the entropy is closed-form (a categorical policy):
# the walkers' tanh-normal entropy is a Monte Carlo draw, the same for every stacked run
# and another for each run alone
ENTROPY = {"entropy_coef": [0.0, 0.01, 0.05]}
A2C_PER_RUN = {k: PER_RUN[k] for k in ("critic_coef", "gamma", "lmbda", "max_grad_norm", "lr")}
CASES = {
    "mappo": ("mappo", "multi", {}),
    "ippo": ("ippo", "multi", {}),
    "mappo_per_run_hyperparameters": (
        {"walker": "mappo", "picker": "mappo"},
        "multi",
        {"walker": PER_RUN, "picker": {**PER_RUN, **ENTROPY}},
    ),
    "ippo_per_run_entropy": ({"walker": "ippo", "picker": "ippo"}, "multi", {"picker": ENTROPY}),
    "a2c_per_run_hyperparameters": ("a2c", "discrete", {**A2C_PER_RUN, **ENTROPY}),
}


def _env(kind: str):
    if kind == "multi":
        return MultiAgentFakeEnv(num_envs=4, seed=0)
    return SingleAgentFakeEnv(num_envs=4, seed=0, discrete=True)


def _config(choice, per_run: dict, r: int) -> dict:
    """Run ``r``'s config: :data:`SETTINGS` and its values of ``per_run`` (``{key: [one per
    run]}``, or ``{group: {key: [...]}}`` for an algorithm chosen per group)."""
    if isinstance(choice, dict):
        return {g: _config(name, per_run.get(g, {}), r) for g, name in choice.items()}
    return {**SETTINGS, **{k: v[r] for k, v in per_run.items()}}


def _runs(name, env, per_run: dict | None = None):
    runs = []
    for r in range(RUNS):
        torch.manual_seed(r)
        runs.append(Algorithm(name, _config(name, per_run or {}, r)).build(env))
    return runs


def _batches(runs, env):
    batches = []
    for r, algo in enumerate(runs):
        torch.manual_seed(100 + r)
        batch = Collector(env, algo.policy, frames_per_batch=60).rollout()
        # runs whose rewards differ in scale: a normalization or a gradient norm shared
        # over the runs would then change every run's step
        for key in batch["next"].keys(True, True):
            if key[-1] == "reward":
                batch["next"].set(key, batch["next"].get(key) * (1 + 10 * r))
        batches.append(batch)
    return batches


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_stacked_update_is_each_runs_own_update(case):
    # with per-run hyperparameters, each run trains with its own values, as alone
    name, kind, per_run = CASES[case]
    env = _env(kind)
    runs = _runs(name, env, per_run)
    batches = _batches(runs, env)
    stacks = {}
    for label, _ in runs[0].group_learners():
        updaters = [dict(a.group_learners())[label].updater for a in runs]
        gens = [torch.Generator().manual_seed(1000 + r) for r in range(RUNS)]
        stacks[label] = StackedOnPolicy(updaters, gens)
    # the runs' losses still hold their starting parameters: each writes its advantages
    processed = {
        label: stack.process(torch.stack([b.clone() for b in batches]))
        for label, stack in stacks.items()
    }
    before = [{k: v.clone() for k, v in a.state_dict().items()} for a in runs]

    # each run alone: its own updater, its own minibatch order
    for r, algo in enumerate(runs):
        batch = algo.process_batch(batches[r])
        for _, learner in algo.group_learners():
            torch.manual_seed(1000 + r)
            learner.updater.update(batch)
    alone = [
        {
            label: {k: p.detach().clone() for k, p in lr.loss.named_parameters()}
            for label, lr in algo.group_learners()
        }
        for algo in runs
    ]
    for r, algo in enumerate(runs):  # the update moved every run
        moved = max((v - before[r][k]).abs().max().item() for k, v in algo.state_dict().items())
        assert moved > 1e-3, (r, moved)

    for label, stack in stacks.items():
        logs = stack.update(processed[label])
        assert len(logs) == RUNS and all("loss_objective" in log for log in logs)
        for r in range(RUNS):
            for pname, p in alone[r][label].items():
                diff = (stack.params[pname][r] - p).abs().max().item()
                assert diff <= 1e-6, (label, r, pname, diff)


def test_copy_to_runs_writes_each_runs_parameters():
    env = MultiAgentFakeEnv(num_envs=4, seed=0)
    runs = _runs("mappo", env)
    label = next(iter(dict(runs[0].group_learners())))
    stack = StackedOnPolicy([dict(a.group_learners())[label].updater for a in runs])
    with torch.no_grad():
        for v in stack.params.values():
            v.add_(torch.arange(RUNS, dtype=v.dtype).reshape(-1, *[1] * (v.dim() - 1)))
    stack.copy_to_runs()
    for r, algo in enumerate(runs):
        for pname, p in dict(algo.group_learners())[label].loss.named_parameters():
            assert torch.equal(p, stack.params[pname][r])


def test_bad_input_is_refused():
    env = MultiAgentFakeEnv(num_envs=4, seed=0)
    runs = _runs("mappo", env)
    label = next(iter(dict(runs[0].group_learners())))
    updaters = [dict(a.group_learners())[label].updater for a in runs]
    with pytest.raises(ValueError, match="at least one"):
        StackedOnPolicy([])
    stack = StackedOnPolicy(updaters)
    batch = Collector(env, runs[0].policy, frames_per_batch=20).rollout()
    with pytest.raises(ValueError, match="leading run dim of 3"):
        stack.update(torch.stack([batch, batch]))
    other = Algorithm("mappo", {**SETTINGS, "epochs": 3}).build(env)
    with pytest.raises(ValueError, match="differ in epochs"):
        StackedOnPolicy([*updaters, dict(other.group_learners())[label].updater])
    # a run's Adam may differ in its rates (a StackedAdam then), in nothing else
    updaters[1].optimizer.param_groups[0]["eps"] = 1e-5
    with pytest.raises(ValueError, match=r"differ in param group 0's \['eps'\]"):
        StackedOnPolicy(updaters)


def test_each_run_acts_on_its_own_sub_envs():
    from tensordict.nn import InteractionType, set_interaction_type

    from marl.algorithms.runs import RunsPolicy, split_runs

    runs = _runs("mappo", MultiAgentFakeEnv(num_envs=2, seed=0))
    env = MultiAgentFakeEnv(num_envs=2 * RUNS, seed=1)
    td = env.reset()
    with set_interaction_type(InteractionType.DETERMINISTIC):
        out = RunsPolicy([a.policy for a in runs])(td.clone())
        for r, part in enumerate(split_runs(td, RUNS).unbind(0)):
            alone = runs[r].policy(part.clone())
            for group in ("walker", "picker"):
                mine = split_runs(out, RUNS)[r][group, "action"]
                assert torch.equal(mine, alone[group, "action"]), (r, group)
    # the runs' policies differ (their seeds), so their slices' actions do too
    walker = split_runs(out, RUNS)["walker", "action"]
    assert not torch.equal(walker[0], walker[1])
    with pytest.raises(ValueError, match="multiple of the number of runs"):
        RunsPolicy([a.policy for a in runs])(MultiAgentFakeEnv(num_envs=4).reset())


def test_runs_collect_in_one_env_and_train_in_one_update():
    from marl.algorithms.runs import RunsPolicy, split_runs

    runs = _runs("ippo", MultiAgentFakeEnv(num_envs=2, seed=0))
    env = MultiAgentFakeEnv(num_envs=2 * RUNS, seed=1)
    collector = Collector(env, RunsPolicy([a.policy for a in runs]), frames_per_batch=60)
    stacks = {
        label: StackedOnPolicy([a.learners[label].updater for a in runs])
        for label, _ in runs[0].group_learners()
    }
    batches = split_runs(collector.rollout(), RUNS)
    assert batches.shape[:2] == (RUNS, 2)
    before = [{k: v.clone() for k, v in a.state_dict().items()} for a in runs]
    for stack in stacks.values():
        batches = stack.process(batches)
    for stack in stacks.values():
        stack.update(batches)
    for r, algo in enumerate(runs):  # every run's own policy, which collects next, moved
        moved = max((v - before[r][k]).abs().max().item() for k, v in algo.state_dict().items())
        assert moved > 1e-4, (r, moved)


def _opt_states(algo):
    """``{group: [(param name, {state key: tensor})]}`` of each learner's optimizer."""
    out = {}
    for label, learner in algo.group_learners():
        names = {id(p): n for n, p in learner.loss.named_parameters()}
        out[label] = {
            names[id(p)]: dict(learner.optimizer.state[p])
            for group in learner.optimizer.param_groups
            for p in group["params"]
        }
    return out


def test_optimizer_state_goes_back_to_each_run_and_a_rebuilt_stack_continues():
    env = MultiAgentFakeEnv(num_envs=4, seed=0)
    stacked_runs, alone_runs = _runs("mappo", env), _runs("mappo", env)
    labels = [label for label, _ in stacked_runs[0].group_learners()]

    def stacks_of(runs):
        return {
            label: StackedOnPolicy([a.learners[label].updater for a in runs]) for label in labels
        }

    def step(stacks, it):
        batches = _batches(alone_runs, env)  # every run's batch, the same for both sides
        for r, algo in enumerate(alone_runs):  # each run alone
            batch = algo.process_batch(batches[r].clone())
            for label in labels:
                torch.manual_seed(10_000 * it + 100 * labels.index(label) + r)
                algo.learners[label].updater.update(batch)
        data = torch.stack([b.clone() for b in batches])
        for stack in stacks.values():
            data = stack.process(data)
        for label, stack in stacks.items():
            for r, gen in enumerate(stack.generators):
                gen.manual_seed(10_000 * it + 100 * labels.index(label) + r)
            stack.update(data)

    def assert_same(it):
        for r in range(RUNS):
            mine, theirs = _opt_states(stacked_runs[r]), _opt_states(alone_runs[r])
            for label in labels:
                for name, state in theirs[label].items():
                    assert set(mine[label][name]) == set(state) == {"step", "exp_avg", "exp_avg_sq"}
                    for key, value in state.items():
                        diff = (mine[label][name][key] - value).abs().max().item()
                        assert diff <= 1e-6, (it, r, label, name, key, diff)
            for (name, p), q in zip(
                stacked_runs[r].state_dict().items(), alone_runs[r].state_dict().values()
            ):
                assert (p - q).abs().max().item() <= 1e-6, (it, r, name)

    stacks = stacks_of(stacked_runs)
    for it in range(2):  # k = 2 stacked updates: each run's optimizer holds its own state
        step(stacks, it)
        assert_same(it)
    # a stack rebuilt from the runs (as after a resume) starts from their moments
    step(stacks_of(stacked_runs), 2)
    assert_same(2)


def test_runs_whose_optimizers_took_different_steps_are_refused():
    env = MultiAgentFakeEnv(num_envs=4, seed=0)
    runs = _runs("mappo", env)
    label = next(iter(dict(runs[0].group_learners())))
    batch = Collector(env, runs[0].policy, frames_per_batch=60).rollout()
    runs[0].learners[label].updater.update(runs[0].process_batch(batch))
    with pytest.raises(ValueError, match="differ in their entries"):
        StackedOnPolicy([a.learners[label].updater for a in runs])
    for algo in runs[1:]:
        for _ in range(2):
            algo.learners[label].updater.update(algo.process_batch(batch.clone()))
    with pytest.raises(ValueError, match="differ in 'step'"):
        StackedOnPolicy([a.learners[label].updater for a in runs])


def _same_start_same_batch(name: str, configs: list[dict], dtype=torch.float32):
    """Runs built from one seed with ``configs``, one batch (the same for all) processed
    and one stacked update of the picker group (a categorical policy: no random draw in
    its loss) with the same minibatch order: the runs differ only in their configs.
    Returns the stack and the picker's starting parameters."""
    env = MultiAgentFakeEnv(num_envs=4, seed=0)
    torch.manual_seed(100)  # collected in float32 (the env's), then cast
    policy = Algorithm(name, configs[0]).build(env, seed=0).policy
    batch = Collector(env, policy, frames_per_batch=60).rollout()
    batch = batch.apply(lambda x: x.to(dtype) if x.is_floating_point() else x)
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        runs = [Algorithm(name, config).build(env, seed=0) for config in configs]
    finally:
        torch.set_default_dtype(default)
    updaters = [a.learners["picker"].updater for a in runs]
    before = {k: v.detach().clone() for k, v in updaters[0].loss.named_parameters()}
    stack = StackedOnPolicy(updaters, [torch.Generator().manual_seed(1000) for _ in runs])
    stack.update(stack.process(torch.stack([batch.clone() for _ in runs])))
    return stack, before


@pytest.mark.parametrize(
    "key, values",
    [("entropy_coef", [0.0, 0.05]), ("clip_epsilon", [0.2, 0.01]), ("gamma", [0.99, 0.5])],
)
def test_runs_that_differ_in_one_hyperparameter_train_apart(key, values):
    # the same start, the same batch and minibatches: run 1 would end where run 0 does if
    # the stack trained it with run 0's value (a copy of run 0's loss is every run's call)
    stack, before = _same_start_same_batch("mappo", [{**SETTINGS, key: v} for v in values])
    moved = max((p[0] - before[k]).abs().max().item() for k, p in stack.params.items())
    apart = max((p[1] - p[0]).abs().max().item() for p in stack.params.values())
    assert moved > 1e-4 and apart > 1e-4 * moved, (moved, apart)


def test_a_learning_rate_per_run_moves_each_run_by_its_rate():
    # one Adam step (the whole batch is one minibatch): a step is lr * m / (sqrt(v) + eps)
    # with the same m and v in both runs, so run 1 moves twice as far as run 0
    configs = [{**SETTINGS, "minibatch_size": 10_000, "lr": lr} for lr in (1e-3, 2e-3)]
    stack, before = _same_start_same_batch("mappo", configs, torch.float64)
    checked = 0
    for name, p0 in before.items():
        move = [(stack.params[name][r] - p0).detach() for r in range(2)]
        assert move[0].abs().max() > 1e-5, name
        moved = move[0].abs() > 1e-6
        assert ((move[1][moved] / move[0][moved]) - 2).abs().max() <= 1e-5, name
        checked += 1
    assert checked >= 4


@pytest.mark.parametrize(
    "key, values, message",
    [
        ("normalize_advantage", [True, False], "normalize_advantage"),
        ("loss_critic_type", ["l2", "l1"], "loss_critic_type"),
        ("clip_value", [None, 0.2], r"clip_value \(\[None, 0\.2\]\).*a number in every run"),
        ("critic_coef", [0.5, 0.0], r"critic_coef \(\[0\.5, 0\.0\]\).*0 in every run or in none"),
    ],
)
def test_a_hyperparameter_that_cannot_be_per_run_is_refused_by_name(key, values, message):
    env = MultiAgentFakeEnv(num_envs=4, seed=0)
    runs = [Algorithm("mappo", {**SETTINGS, key: v}).build(env, seed=0) for v in values]
    with pytest.raises(ValueError, match=f"the runs' losses differ in {message}"):
        StackedOnPolicy([a.learners["picker"].updater for a in runs])


def test_runs_draw_their_own_entropy_samples_unless_shared():
    """Twin runs (one seed, one batch, one minibatch order) whose loss draws a Monte Carlo
    entropy (the walkers' tanh-normal policy, with an entropy bonus) part only by those
    draws: each run's own by default, as apart; one for both with ``noise="shared"``."""
    env = MultiAgentFakeEnv(num_envs=4, seed=0)
    config = {**SETTINGS, "entropy_coef": 0.5}
    torch.manual_seed(100)
    policy = Algorithm("mappo", config).build(env, seed=0).policy
    batch = Collector(env, policy, frames_per_batch=60).rollout()
    apart = {}
    for noise in ("shared", "independent"):
        runs = [Algorithm("mappo", config).build(env, seed=0) for _ in range(2)]
        stack = StackedOnPolicy(
            [a.learners["walker"].updater for a in runs],
            [torch.Generator().manual_seed(1000) for _ in runs],
            noise=noise,
        )
        torch.manual_seed(7)
        stack.update(stack.process(torch.stack([batch.clone(), batch.clone()])))
        apart[noise] = max((p[0] - p[1]).abs().max().item() for p in stack.params.values())
    assert apart["shared"] == 0.0
    assert apart["independent"] > 1e-7, apart
