"""Many runs' off-policy updates in one vmapped call equal each run's own update; per-run
learning rates; PQN under the stacked on-policy update."""

import dataclasses
import functools

import pytest
import torch

from marl.algorithms import Algorithm, get_algorithm
from marl.algorithms.updates import StackedAdam, StackedOffPolicy, StackedOnPolicy
from marl.algorithms.updates.stacked_off_policy import StackedTargets
from marl.collectors import Collector
from marl.testing import MultiAgentFakeEnv, SingleAgentFakeEnv

RUNS = 3
NOISE_SEED = 7  # the global generator's state at each update (the losses' draws)
# 24 frames a batch at utd 1/6: four gradient steps per update
BASE = {"batch_size": 16, "learning_starts": 0, "utd_ratio": 1 / 6, "max_grad_norm": 0.05}

FAMILIES = {
    "sac": ("sac", "single", {}),
    "discrete_sac": ("sac", "discrete", {}),
    "ddpg": ("ddpg", "single", {}),
    "td3": ("td3", "single", {}),
    "dqn_hard_targets": ("dqn", "discrete", {"target_update_period": 2}),
    "dqn_prioritized": ("dqn", "discrete", {"prioritized": True, "target_update_period": None}),
    "masac_qmix": ({"walker": "masac", "picker": "qmix"}, "multi", {}),
    "maddpg_vdn": ({"walker": "maddpg", "picker": "vdn"}, "multi", {}),
    "td3_iql": ({"walker": "td3", "picker": "iql"}, "multi", {}),
}


def _env(kind: str):
    if kind == "multi":
        return MultiAgentFakeEnv(num_envs=4, seed=0)
    return SingleAgentFakeEnv(num_envs=4, seed=0, discrete=kind == "discrete")


# each run's own loss and update hyperparameters (a population's members): run r takes the
# r-th value of each its algorithm has; max_grad_norm None: that run does not clip
PER_RUN = {
    "gamma": [0.99, 0.9, 0.5],
    "tau": [0.005, 0.05, 0.5],
    "policy_noise": [0.2, 0.05, 0.5],
    "noise_clip": [0.5, 0.1, 0.3],
    "alpha_init": [1.0, 0.5, 0.1],
    "target_entropy": [-1.0, -2.0, 0.5],
    "target_update_period": [2, 3, 1],
    "max_grad_norm": [0.05, None, 0.5],
}


def _config(name: str, extra: dict, run: int, lr_scale: bool, per_run: dict | None = None) -> dict:
    """The run's config overrides: with ``lr_scale``, every rate (``lr``, ``actor_lr``...)
    ``5e-4 * (run + 1)`` and the clipping limit ``0.05 * (run + 1)``, so that the runs'
    optimizers and clipping differ (a population's members); then the run's value of each
    key of ``per_run`` the algorithm has (of ``target_update_period``: where ``extra``
    sets one, hard target updates)."""
    config = {**BASE, **extra}
    fields = {f.name for f in dataclasses.fields(get_algorithm(name).make_config(None))}
    if lr_scale:
        config.update({f: 5e-4 * (run + 1) for f in fields if f.endswith("lr")})
        config["max_grad_norm"] = 0.05 * (run + 1)
    for key, values in (per_run or {}).items():
        if key in fields and (key != "target_update_period" or extra.get(key)):
            config[key] = values[run]
    return config


def _build(choice, env, extra: dict, run: int, seed: int, lr_scale: bool, per_run=None):
    if isinstance(choice, dict):
        config = {g: _config(n, extra, run, lr_scale, per_run) for g, n in choice.items()}
    else:
        config = _config(choice, extra, run, lr_scale, per_run)
    torch.manual_seed(seed)
    return Algorithm(choice, config).build(env)


def _batches(runs, env, frames: int = 24):
    batches = []
    for r, algo in enumerate(runs):
        torch.manual_seed(100 + r)
        batch = Collector(env, algo.policy, frames_per_batch=frames).rollout()
        # runs whose rewards differ in scale: a gradient norm shared over the runs would
        # then change every run's step
        for key in batch["next"].keys(True, True):
            if key[-1] == "reward":
                batch["next"].set(key, batch["next"].get(key) * (1 + 4 * r))
        batches.append(batch)
    return batches


def _generators():
    return [torch.Generator().manual_seed(1000 + r) for r in range(RUNS)]


def _learner(algo, label):
    return dict(algo.group_learners())[label]


def _stacked_against_alone(
    family: str,
    lr_scale: bool = True,
    mutate=None,
    updates: int = 1,
    dtype: torch.dtype = torch.float64,
    overrides: dict | None = None,
    per_run: dict | None = None,
):
    """The largest difference between each run's stacked update and its own update.

    Both sides start alike (runs built from seeds 0..R-1), see the same batches, sample
    with generators seeded alike and draw their losses' noise from the global generator
    seeded alike. ``mutate(stacks)`` breaks the stacked side. ``dtype``: the networks'
    (the batches are collected in float32 and cast). ``per_run``: each run's values of
    hyperparameters (see :func:`_config`)."""
    choice, kind, extra = FAMILIES[family]
    extra = {**extra, **(overrides or {})}
    env = _env(kind)
    batches = _batches([_build(choice, env, extra, r, r, lr_scale) for r in range(RUNS)], env)
    build = functools.partial(_build, lr_scale=lr_scale, per_run=per_run)
    batches = [b.apply(lambda x: x.to(dtype) if x.is_floating_point() else x) for b in batches]
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        stacked = [build(choice, env, extra, r, r) for r in range(RUNS)]
        alone = [build(choice, env, extra, r, r) for r in range(RUNS)]
    finally:
        torch.set_default_dtype(default)
    labels = [label for label, _ in stacked[0].group_learners()]
    stacks = {
        label: StackedOffPolicy(
            [_learner(a, label).updater for a in stacked], _generators(), noise="shared"
        )
        for label in labels
    }
    if mutate is not None:
        mutate(stacks)
    for label in labels:
        for r, algo in enumerate(alone):
            _learner(algo, label).updater.buffer.sampler.generator = _generators()[r]
    before = [_tensors(a) for a in alone]
    for _ in range(updates):
        for r, algo in enumerate(alone):
            batch = algo.process_batch(batches[r].clone())
            for label in labels:
                torch.manual_seed(NOISE_SEED)
                _learner(algo, label).updater.update(batch)
        for stack in stacks.values():
            torch.manual_seed(NOISE_SEED)
            logs = stack.update(stack.process(torch.stack([b.clone() for b in batches])))
            assert len(logs) == RUNS and all(any(k.startswith("loss") for k in g) for g in logs)
    worst = 0.0
    for r in range(RUNS):
        # the update moved every run, its targets included
        moved = {k: (v - before[r][k]).abs().max().item() for k, v in _tensors(alone[r]).items()}
        assert max(moved.values()) > 1e-3, (family, r)
        assert max(v for k, v in moved.items() if ".target_" in k) > 1e-6, (family, r)
        for label in labels:
            mine, own = _learner(stacked[r], label), _learner(alone[r], label)
            # the stack's slice, and what it wrote back into the run's own modules
            for name, p in own.loss.named_parameters():
                worst = max(worst, (stacks[label].params[name][r] - p).abs().max().item())
                worst = max(worst, (mine.loss.get_parameter(name) - p).abs().max().item())
            worst = max(worst, _optimizer_difference(mine.optimizer, own.optimizer))
            if own.target_updater is not None and hasattr(own.target_updater, "counter"):
                assert mine.target_updater.counter == own.target_updater.counter
            assert mine.updater.state_dict() == own.updater.state_dict()
            # the loss's own state besides tensors: TD3's delayed-actor phase
            assert _extra(mine.loss) == _extra(own.loss)
    return worst


def _extra(loss) -> dict:
    return {k: v for k, v in loss.state_dict().items() if not isinstance(v, torch.Tensor)}


def _tensors(algo) -> dict:
    return {k: v.clone() for k, v in algo.state_dict().items() if isinstance(v, torch.Tensor)}


def _optimizer_difference(mine: torch.optim.Optimizer, own: torch.optim.Optimizer) -> float:
    worst = 0.0
    for g_mine, g_own in zip(mine.param_groups, own.param_groups):
        assert g_mine["lr"] == g_own["lr"]
        for p, q in zip(g_mine["params"], g_own["params"]):
            a, b = mine.state.get(p, {}), own.state.get(q, {})
            assert bool(a) == bool(b)
            if b:
                assert float(a["step"]) == float(b["step"])
                for key in ("exp_avg", "exp_avg_sq"):
                    worst = max(worst, (a[key] - b[key]).abs().max().item())
    return worst


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_stacked_update_is_each_runs_own_update(family):
    # every run with its own rates (5e-4, 1e-3, 1.5e-3) and clipping limit. In
    # float64 the two sides agree to ~1e-15 (the order of the sums in a batched matmul
    # is all that differs), so any difference in what a run sees or does shows
    assert _stacked_against_alone(family) <= 1e-6


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_run_trains_with_its_own_hyperparameters(family):
    # besides the rates: the discount, the targets' tau (or period), TD3's smoothing noise
    # and its clip, SAC's starting temperature and target entropy, and the clipping (one
    # run without); run 0's values everywhere would leave runs 1 and 2 1e-2 or more apart
    assert _stacked_against_alone(family, per_run=PER_RUN) <= 1e-6


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_stacked_update_in_float32_with_the_default_rates(family):
    # what training runs; float32 rounding of near-zero gradients, which Adam divides
    # by their own size, grows with the rate (SAC at 1.5e-3 reaches ~1e-6)
    assert _stacked_against_alone(family, lr_scale=False, dtype=torch.float32) <= 1e-6


def test_two_updates_in_a_row_with_equal_rates():
    # the delayed actor's phase (three steps an update: odd), the debt and the
    # optimizers' moments carry over from one update to the next
    odd = {"utd_ratio": 1 / 8}
    assert _stacked_against_alone("td3", lr_scale=False, updates=2, overrides=odd) <= 1e-6


def _share_gradient_norm(stacks):
    for stack in stacks.values():

        def clip(stack=stack):
            with torch.no_grad():
                for group in stack.optimizer.param_groups:
                    grads = [p.grad for p in group["params"] if p.grad is not None]
                    if grads:  # one norm over every run's gradients
                        norm = torch.stack([g.norm() for g in grads]).norm()
                        scale = (stack.max_grad_norm[0] / (norm + 1e-6)).clamp(max=1.0)
                        for g in grads:
                            g.mul_(scale.to(g))

        stack._clip = clip


def _share_target_updates(stacks):
    for stack in stacks.values():
        step = stack.targets.step

        def shared(step=step, targets=stack.targets):
            step()
            with torch.no_grad():  # run 0's targets written to every run
                for _, dst in targets.pairs:
                    dst.copy_(dst[:1].expand_as(dst))

        stack.targets.step = shared


def _one_buffer(stacks):
    for stack in stacks.values():
        stack.replay = [stack.replay[0]] * stack.runs


@pytest.mark.parametrize("family", ["ddpg", "dqn_hard_targets"])
@pytest.mark.parametrize(
    "mutate", [_share_gradient_norm, _share_target_updates, _one_buffer], ids=lambda f: f.__name__
)
def test_sharing_what_is_each_runs_own_breaks_the_equality(family, mutate):
    assert _stacked_against_alone(family, mutate=mutate) > 1e-4


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_a_learning_rate_per_run_moves_each_run_by_its_rate(dtype):
    env = _env("single")
    rates = [1e-3, 2e-3, 2e-3]
    torch.manual_seed(100)
    batch = Collector(env, Algorithm("ddpg").build(env).policy, frames_per_batch=24).rollout()
    batch = batch.apply(lambda x: x.to(dtype) if x.is_floating_point() else x)
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        runs = []
        for lr in rates:  # the same seed: the same starting parameters
            torch.manual_seed(0)
            runs.append(Algorithm("ddpg", {**BASE, "actor_lr": lr, "critic_lr": lr}).build(env))
    finally:
        torch.set_default_dtype(default)
    before = {k: v.clone() for k, v in runs[0].learners["root"].loss.named_parameters()}
    # the same generator seed everywhere: every run samples the same minibatch
    stack = StackedOffPolicy(
        [a.learners["root"].updater for a in runs],
        [torch.Generator().manual_seed(5) for _ in rates],
    )
    stack.utd_ratio = 1 / 24  # one Adam step
    stack.update(torch.stack([batch] * len(rates)))
    # float32 parameters round each move to their own precision (~3e-8 near 0.5), 1e-5
    # of a 2e-3 move; float64 ones keep the ratio to ~1e-12
    tol = 1e-5 if dtype == torch.float64 else 4 * torch.finfo(dtype).eps
    checked, total = 0, torch.zeros(2, dtype=torch.float64)
    for name, p0 in before.items():
        if not p0.requires_grad:
            continue  # a target network: polyak-averaged, not stepped
        move = [(stack.params[name][r] - p0).detach() for r in range(len(rates))]
        assert move[0].abs().max() > 1e-5, name
        assert torch.equal(move[1], move[2]), name  # equal rates: identical moves
        moved = move[0].abs() > 1e-6
        ratio = move[1][moved] / move[0][moved]
        if dtype == torch.float64:
            assert (ratio - 2).abs().max() <= tol, name
        else:  # each element to its rounding, the whole to 1e-5
            assert ((move[1] - 2 * move[0]).abs() <= tol * (p0.abs() + 1)).all(), name
        total += torch.stack([move[1].abs().sum(), move[0].abs().sum()]).double()
        checked += 1
    assert checked >= 4
    assert abs(total[0] / total[1] - 2) <= 1e-5


def test_stacked_adam_is_torch_adam_per_run():
    torch.manual_seed(0)
    rates = [1e-3, 2e-3, 5e-2]
    weights = [torch.nn.Parameter(torch.randn(4, 3)) for _ in rates]
    opts = [torch.optim.Adam([w], lr=lr, weight_decay=0.01) for w, lr in zip(weights, rates)]
    names = [{id(w): "w"} for w in weights]
    stacked = {"w": torch.nn.Parameter(torch.stack([w.detach() for w in weights]))}
    adam = StackedAdam.from_runs(opts, names, stacked)
    for step in range(3):
        grads = torch.randn(len(rates), 4, 3)
        for w, g, opt in zip(weights, grads, opts):
            w.grad = g.clone()
            opt.step()
        stacked["w"].grad = grads
        adam.step()
        assert (stacked["w"] - torch.stack(list(weights))).abs().max() <= 1e-6, step
    for opt in opts:
        opt.state.clear()
    adam.write_to_runs(opts, names)
    for r, (w, opt) in enumerate(zip(weights, opts)):
        assert float(opt.state[w]["step"]) == 3.0
        assert torch.equal(opt.state[w]["exp_avg"], adam.state[stacked["w"]]["exp_avg"][r])


def test_stacked_adam_refuses_bad_rates_and_shapes():
    w = torch.nn.Parameter(torch.ones(2, 3))
    with pytest.raises(ValueError, match=r"a learning rate per run \(shape \[2\]\)"):
        StackedAdam([w], runs=2, lr=[1e-3, 1e-3, 1e-3])
    with pytest.raises(ValueError, match="leading run dim of 3"):
        StackedAdam([w], runs=3)
    with pytest.raises(ValueError, match=">= 0"):
        StackedAdam([w], runs=2, lr=[-1.0, 1.0])
    sgd = [torch.optim.SGD([torch.nn.Parameter(torch.ones(3))], lr=0.1) for _ in range(2)]
    names = [{id(o.param_groups[0]["params"][0]): "w"} for o in sgd]
    with pytest.raises(ValueError, match=r"torch\.optim\.Adam optimizers; run 0 has SGD"):
        StackedAdam.from_runs(sgd, names, {"w": w})


def test_hard_targets_copy_each_run_at_its_own_period():
    online, target = torch.arange(3.0).reshape(3, 1), torch.full((3, 1), -1.0)
    from marl.objectives import HardUpdate

    pair = [(torch.nn.Linear(1, 1), torch.nn.Linear(1, 1))]
    updaters = [HardUpdate(pair, period=p) for p in (1, 2, 3)]
    targets = StackedTargets(updaters, [("w", "t")], {"w": online, "t": target})
    targets.step()
    assert target.squeeze(-1).tolist() == [0.0, -1.0, -1.0]
    targets.step()
    assert target.squeeze(-1).tolist() == [0.0, 1.0, -1.0]
    assert [u.counter for u in updaters] == [2, 2, 2]


def test_bad_input_is_refused():
    env = _env("single")
    runs = [_build("ddpg", env, {}, r, r, False) for r in range(RUNS)]
    updaters = [a.learners["root"].updater for a in runs]
    with pytest.raises(ValueError, match="at least one"):
        StackedOffPolicy([])
    stack = StackedOffPolicy(updaters)
    batch = Collector(env, runs[0].policy, frames_per_batch=8).rollout()
    with pytest.raises(ValueError, match="leading run dim of 3"):
        stack.update(torch.stack([batch, batch]))
    with pytest.raises(ValueError, match="expected 3 generators, got 1"):
        StackedOffPolicy(updaters, [torch.Generator()])
    other = Algorithm("ddpg", {**BASE, "utd_ratio": 2.0}).build(env)
    with pytest.raises(ValueError, match="differ in utd_ratio"):
        StackedOffPolicy([*updaters, other.learners["root"].updater])
    sac = Algorithm("sac", BASE).build(env)
    with pytest.raises(TypeError, match="losses differ: SACLoss and DDPGLoss"):
        StackedOffPolicy([*updaters, sac.learners["root"].updater])


@pytest.mark.parametrize("per_run", [False, True], ids=["same", "per_run_hyperparameters"])
def test_pqn_is_covered_by_the_stacked_on_policy_update(per_run):
    # per run: the Q(lambda) returns' gamma and lmbda (each run's own estimator), the
    # clipping (run 1 without) and the rate
    env = SingleAgentFakeEnv(num_envs=4, seed=0, discrete=True)
    settings = {"minibatch_size": 20, "epochs": 1, "max_grad_norm": 0.05, "lr": 1e-3}
    own = {"gamma": [0.99, 0.9, 0.5], "lmbda": [0.65, 0.0, 1.0], "max_grad_norm": [0.05, None, 1]}
    own["lr"] = [1e-3, 2e-3, 5e-4]
    configs = [
        {**settings, **({k: v[r] for k, v in own.items()} if per_run else {})} for r in range(RUNS)
    ]
    runs = [Algorithm("pqn", configs[r]).build(env, seed=r) for r in range(RUNS)]
    alone = [Algorithm("pqn", configs[r]).build(env, seed=r) for r in range(RUNS)]
    batches = _batches(runs, env, frames=60)
    stack = StackedOnPolicy(
        [a.learners["root"].updater for a in runs],
        [torch.Generator().manual_seed(1000 + r) for r in range(RUNS)],
    )
    processed = stack.process(torch.stack([b.clone() for b in batches]))
    stack.update(processed)
    for r, algo in enumerate(alone):
        loss = algo.learners["root"].loss
        before = {k: v.detach().clone() for k, v in loss.named_parameters()}
        batch = algo.process_batch(batches[r].clone())
        torch.manual_seed(1000 + r)  # the minibatch order the stacked run draws
        algo.learners["root"].updater.update(batch)
        moved = max((p - before[k]).abs().max().item() for k, p in loss.named_parameters())
        assert moved > 1e-4, r
        for name, p in loss.named_parameters():
            assert (stack.params[name][r] - p).abs().max() <= 1e-6, (r, name)


def test_stacked_on_policy_update_takes_a_rate_per_run():
    # runs whose Adams differ in rate get a StackedAdam: each run steps with its own rate
    env = MultiAgentFakeEnv(num_envs=4, seed=0)
    settings = {"minibatch_size": 20, "epochs": 1, "max_grad_norm": 0.05}
    rates = [1e-3, 2e-3, 3e-3]
    runs = [Algorithm("mappo", {**settings, "lr": lr}).build(env, seed=0) for lr in rates]
    alone = [Algorithm("mappo", {**settings, "lr": lr}).build(env, seed=0) for lr in rates]
    torch.manual_seed(100)
    batch = Collector(env, runs[0].policy, frames_per_batch=60).rollout()
    label = "picker"  # a discrete policy: its loss draws no random numbers
    updaters = [a.learners[label].updater for a in runs]
    stack = StackedOnPolicy(updaters, [torch.Generator().manual_seed(1000) for _ in rates])
    assert isinstance(stack.optimizer, StackedAdam)
    stack.update(stack.process(torch.stack([batch.clone() for _ in rates])))
    for r, algo in enumerate(alone):
        torch.manual_seed(1000)
        algo.learners[label].updater.update(algo.process_batch(batch.clone()))
        own = algo.learners[label]
        for name, p in own.loss.named_parameters():
            assert (stack.params[name][r] - p).abs().max() <= 1e-6, (r, name)
        assert _optimizer_difference(runs[r].learners[label].optimizer, own.optimizer) <= 1e-6
    # the runs started alike and saw the same data: only their rates part them
    for name, p in stack.params.items():
        assert not torch.allclose(p[0], p[1]) and not torch.allclose(p[1], p[2]), name


def test_copy_from_runs_reads_a_run_changed_on_its_own():
    # a population's exploit: run 0's networks and optimizer state copied into run 2's
    env = _env("single")
    runs = [_build("sac", env, {}, r, r, True) for r in range(RUNS)]
    stack = StackedOffPolicy([a.learners["root"].updater for a in runs])
    stack.update(torch.stack(_batches(runs, env)))
    src, dst = runs[0].learners["root"], runs[2].learners["root"]
    dst.loss.load_state_dict(src.loss.state_dict())
    for p, q in zip(src.loss.parameters(), dst.loss.parameters()):
        if p in src.optimizer.state:
            dst.optimizer.state[q] = {k: v.clone() for k, v in src.optimizer.state[p].items()}
    dst.optimizer.param_groups[1]["lr"] = 0.25  # an explore: run 2's critic rate
    stack.copy_from_runs()
    assert stack.optimizer.param_groups[1]["lr"].tolist() == pytest.approx([5e-4, 1e-3, 0.25])
    for name, p in stack.params.items():
        assert torch.equal(p[2], p[0]), name
        state = stack.optimizer.state.get(p)
        if state:
            assert torch.equal(state["exp_avg"][2], state["exp_avg"][0]), name
            assert state["step"][2] == state["step"][0], name
    # run 1, left alone, keeps its own
    assert any(not torch.equal(p[1], p[0]) for p in stack.params.values())


def test_runs_that_differ_only_in_gamma_train_apart():
    # the same start, batch and samples: with run 0's discount for both (a copy of run 0's
    # loss is every run's call), run 1 would end where run 0 does
    env = _env("discrete")
    runs = [_build("dqn", env, {"gamma": g}, 0, 0, False) for g in (0.99, 0.5)]
    torch.manual_seed(100)
    batch = Collector(env, runs[0].policy, frames_per_batch=24).rollout()
    before = {k: v.detach().clone() for k, v in runs[0].learners["root"].loss.named_parameters()}
    stack = StackedOffPolicy(
        [a.learners["root"].updater for a in runs],
        [torch.Generator().manual_seed(5) for _ in runs],  # the same samples in both
    )
    stack.update(torch.stack([batch, batch]))
    moved = max((stack.params[k][0] - p).abs().max().item() for k, p in before.items())
    apart = max((p[1] - p[0]).abs().max().item() for p in stack.params.values())
    assert moved > 1e-4 and apart > 1e-4 * moved, (moved, apart)


@pytest.mark.parametrize(
    "name, kind, key, values, message",
    [
        ("dqn", "discrete", "double_dqn", [True, False], r"double_dqn \(\[True, False\]\)"),
        ("dqn", "discrete", "loss_function", ["l2", "l1"], "loss_function"),
        ("td3", "single", "policy_delay", [2, 3], r"policy_delay \(\[2, 3\]\): TD3Loss reads"),
        ("sac", "single", "target_entropy", ["auto", -1.0], "a number in every run"),
        ("sac", "single", "fixed_alpha", [False, True], "parameter log_alpha is trained in some"),
    ],
)
def test_a_hyperparameter_that_cannot_be_per_run_is_refused_by_name(
    name, kind, key, values, message
):
    env = _env(kind)
    runs = [_build(name, env, {key: v}, 0, 0, False) for v in values]
    with pytest.raises(ValueError, match=f"the runs' losses differ in .*{message}"):
        StackedOffPolicy([a.learners["root"].updater for a in runs])


@pytest.mark.parametrize("name", ["sac", "td3"])
def test_runs_draw_their_own_noise_unless_shared(name):
    """Twin runs (same start, batch and replay samples) part only by the losses' random
    draws (SAC's sampled actions, TD3's smoothing noise): each run draws its own by
    default, as runs trained apart do; with ``noise="shared"`` they stay twins."""
    env = _env("single")
    moved = {}
    for noise in ("shared", "independent"):
        runs = [_build(name, env, {}, 0, 0, False) for _ in range(2)]
        torch.manual_seed(100)
        batch = Collector(env, runs[0].policy, frames_per_batch=24).rollout()
        stack = StackedOffPolicy(
            [a.learners["root"].updater for a in runs],
            [torch.Generator().manual_seed(5) for _ in runs],  # the same samples in both
            noise=noise,
        )
        torch.manual_seed(7)
        stack.update(torch.stack([batch, batch]))
        moved[noise] = max((p[0] - p[1]).abs().max().item() for p in stack.params.values())
    assert moved["shared"] == 0.0
    assert moved["independent"] > 1e-6, moved
    with pytest.raises(ValueError, match=r"noise: expected one of \('independent', 'shared'\)"):
        StackedOffPolicy([a.learners["root"].updater for a in runs], noise="same")
