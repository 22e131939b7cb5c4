"""The task catalogue: files, make_task, errors, packaging, lazy imports."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from marl.envs import check_env_specs, list_tasks, make_task
from marl.envs.tasks import load_task_config, task_available

REPO = Path(__file__).resolve().parents[2]

EXPECTED = {
    # every scenario vmas ships (BenchMARL's settings where it has them), road_traffic
    # aside: it takes over a minute to build and step on this CPU
    "vmas": [
        "navigation", "balance", "sampling", "transport", "wheel",
        "dispersion", "give_way", "flocking", "discovery", "simple_spread",
        "ball_passage", "ball_trajectory", "buzz_wire", "dropout", "football",
        "joint_passage", "joint_passage_size", "multi_give_way", "passage",
        "reverse_transport", "wind_flocking", "simple", "simple_adversary",
        "simple_crypto", "simple_push", "simple_reference", "simple_speaker_listener",
        "simple_tag", "simple_world_comm",
    ],
    # the nine MPE tasks of mpe2, SISL and Butterfly, classic board games
    "pettingzoo": [
        "simple", "simple_spread", "simple_adversary", "simple_tag", "simple_reference",
        "simple_crypto", "simple_push", "simple_speaker_listener", "simple_world_comm",
        "multiwalker", "pursuit", "knights_archers_zombies", "cooperative_pong",
        "pistonball", "tictactoe", "connect_four",
    ],
    "gymnasium": ["cartpole", "pendulum", "lunarlander", "halfcheetah"],
    "lbforaging": [
        "5x5-2p-1f", "8x8-2p-2f", "8x8-2p-2f-coop", "8x8-2p-2f-2s-coop", "10x10-3p-3f",
        "10x10-3p-3f-2s", "15x15-3p-5f", "15x15-4p-3f", "15x15-4p-5f",
    ],
    "rware": ["tiny-2ag", "tiny-4ag", "tiny-2ag-hard", "small-4ag", "medium-4ag", "mini-2ag"],
    # marl's batched torch ports of the two packages above (marl.envs.native), task for task
    "lbforaging_torch": [
        "5x5-2p-1f", "8x8-2p-2f", "8x8-2p-2f-coop", "8x8-2p-2f-2s-coop", "10x10-3p-3f",
        "10x10-3p-3f-2s", "15x15-3p-5f", "15x15-4p-3f", "15x15-4p-5f",
    ],
    "rware_torch": ["tiny-2ag", "tiny-4ag", "tiny-2ag-hard", "small-4ag", "medium-4ag", "mini-2ag"],
    # JaxMARL 0.2.0's SMAX maps (SMAC's names) and its SMACv2-style random teams
    "smax": [
        "3m", "2s3z", "3s5z", "5m_vs_6m", "10m_vs_11m", "27m_vs_30m", "3s5z_vs_3s6z",
        "3s_vs_5z", "6h_vs_8z", "smacv2_5_units", "smacv2_10_units", "smacv2_20_units",
    ],
    "mamujoco": [
        "halfcheetah_2x3", "halfcheetah_6x1", "ant_2x4", "ant_4x2", "humanoid_9_8",
        "hopper_3x1", "walker2d_2x3", "swimmer_2x1",
    ],
    # every environment of magent2 0.3.4 at its default size, two small ones to train
    "magent2": [
        "battle", "battle_small", "battlefield", "adversarial_pursuit",
        "adversarial_pursuit_small", "gather", "combined_arms", "tiger_deer",
    ],
    # five Melting Pot substrates (of 49): commons, public goods, cooking, matrix games, territory
    "meltingpot": [
        "commons_harvest__open", "clean_up", "collaborative_cooking__asymmetric",
        "prisoners_dilemma_in_the_matrix__arena", "territory__rooms",
    ],
    # the five kitchens of Carroll et al. (2019)
    "overcooked": [
        "cramped_room", "asymmetric_advantages", "coordination_ring", "forced_coordination",
        "counter_circuit",
    ],
    # marl's own tasks: a memory test for the recurrent models
    "marl": ["recall"],
}  # fmt: skip
ALL = sorted(f"{fam}/{name}" for fam, names in EXPECTED.items() for name in names)

# Small sizes so that every task checks in well under a second.
SMALL = {
    "vmas": dict(num_envs=2, max_steps=4),
    "pettingzoo/simple_spread": dict(max_cycles=4),
    "pettingzoo/simple_adversary": dict(max_cycles=4),
    "pettingzoo/simple_tag": dict(max_cycles=4),
    "pettingzoo/simple_reference": dict(max_cycles=4),
    "pettingzoo/multiwalker": dict(max_cycles=4),
    "pettingzoo/simple": dict(max_cycles=4),
    "pettingzoo/simple_crypto": dict(max_cycles=4),
    "pettingzoo/simple_push": dict(max_cycles=4),
    "pettingzoo/simple_speaker_listener": dict(max_cycles=4),
    "pettingzoo/simple_world_comm": dict(max_cycles=4),
    "pettingzoo/pursuit": dict(max_cycles=4),
    "pettingzoo/knights_archers_zombies": dict(max_cycles=4),
    "pettingzoo/cooperative_pong": dict(max_cycles=4),
    "pettingzoo/pistonball": dict(max_cycles=4),
    "gymnasium": dict(num_envs=2),
    "lbforaging": dict(max_episode_steps=4),
    "rware": dict(max_steps=4),
    "mamujoco": dict(max_episode_steps=4),
    "magent2": dict(max_cycles=4),  # full maps (up to 495 agents): about 0.1 s a step
    "meltingpot": dict(max_steps=4),
    "overcooked": dict(horizon=4),
    "marl": dict(num_envs=2),
}


def test_catalogue_lists_exactly_the_issue_tasks():
    assert list_tasks() == ALL
    assert list_tasks("gymnasium") == sorted(f"gymnasium/{n}" for n in EXPECTED["gymnasium"])


@pytest.mark.parametrize("name", ALL)
def test_task_files_are_complete(name):
    config = load_task_config(name)
    assert config["family"] == name.split("/")[0]
    assert isinstance(config["description"], str) and "\n" not in config["description"].strip()
    assert isinstance(config["env"], dict) and config["env"]
    if config["family"] in (
        "lbforaging",
        "rware",
        "lbforaging_torch",
        "rware_torch",
    ):  # agents agent_0..: one group "agents"
        assert config["group_map"] == "all_in_one"
    elif config["family"] == "mamujoco":  # grouped by shape by default (group_by_shape)
        assert "group_map" not in config
        assert config["env"]["max_episode_steps"] == 1000
    elif config["family"] not in ("gymnasium", "marl", "smax"):  # one group of their own
        assert config["group_map"] == "by_prefix"
    if config["family"] == "vmas":
        # BenchMARL's episode lengths: 500 for the passages and football, 200 for
        # multi_give_way, 100 elsewhere
        long = {"ball_passage", "joint_passage", "joint_passage_size", "passage", "football"}
        task = name.split("/")[1]
        expected = 500 if task in long else 200 if task == "multi_give_way" else 100
        assert config["env"]["max_steps"] == expected


@pytest.mark.parametrize("name", ALL)
def test_every_available_task_passes_check_env_specs(name):
    if not task_available(name):
        pytest.skip(f"{name}: its package (or the task in it) is not installed")
    small = SMALL.get(name, SMALL.get(name.split("/")[0], {}))
    env = make_task(name, seed=0, **small)
    check_env_specs(env, steps=5)
    keys = env.observation_spec.keys(include_nested=True, leaves_only=True)
    assert any(k == "episode_reward" or k[-1] == "episode_reward" for k in keys)
    env.close()


def test_defaults_and_overrides():
    env = make_task("vmas/navigation", num_envs=2, seed=0)
    assert env.batch_size == (2,)
    assert env.group_map.to_dict() == {"agent": ["agent_0", "agent_1", "agent_2"]}
    assert env.vmas_env.max_steps == 100
    env = make_task(
        "vmas/navigation", num_envs=2, n_agents=2, max_steps=7, group_map="one_per_agent"
    )
    assert list(env.group_map) == ["agent_0", "agent_1"]
    assert env.vmas_env.max_steps == 7
    if importlib.util.find_spec("mpe2") is not None:
        env = make_task("pettingzoo/simple_tag", num_envs=2, seed=0, max_cycles=3)
        assert env.batch_size == (2,)
        assert env.rollout(3)["adversary", "observation"].shape == (2, 3, 3, 16)


def test_unknown_task_lists_closest_names():
    with pytest.raises(ValueError, match="vmas/navigation"):
        make_task("vmas/navigaton")
    with pytest.raises(ValueError, match="vmas/navigation"):
        make_task("navigation")


def test_unknown_overrides_raise():
    with pytest.raises(ValueError, match="bogus"):
        make_task("vmas/navigation", bogus=1)
    with pytest.raises(ValueError, match="bogus"):
        make_task("gymnasium/cartpole", bogus=1)
    if task_available("pettingzoo/simple_spread"):
        with pytest.raises(ValueError, match="bogus"):
            make_task("pettingzoo/simple_spread", bogus=1)


def test_gymnasium_env_kwargs_override():
    env = make_task("gymnasium/pendulum", g=9.0)
    assert env.gymnasium_env.unwrapped.g == 9.0


def test_importing_marl_is_light():
    code = (
        "import sys, marl, marl.envs\n"
        "heavy = [m for m in ('vmas', 'pettingzoo', 'gymnasium', 'mpe2', 'yaml') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


# every package a family's tasks import (and what those import: scipy under SISL, pygame
# under Butterfly, Box2D and MuJoCo under gymnasium)
FAMILY_PACKAGES = (
    "vmas", "pettingzoo", "mpe2", "gymnasium", "lbforaging", "rware", "gymnasium_robotics",
    "mujoco", "Box2D", "magent2", "meltingpot", "overcooked_ai_py", "scipy", "pygame",
)  # fmt: skip


def test_availability_imports_no_family_package():
    # marl-run --help lists the installed tasks: looked up on the path, never imported
    # (importing them took a second of the help's two)
    code = (
        "import sys\n"
        "from marl.envs.tasks import install_hints, list_tasks\n"
        "available = list_tasks(available=True)\n"
        "install_hints()\n"
        f"print(','.join(m for m in {FAMILY_PACKAGES!r} if m in sys.modules))\n"
        "print('|'.join(available))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, cwd=REPO, capture_output=True, text=True
    ).stdout.splitlines()
    assert out[0] == "", f"listing the available tasks imported {out[0]}"
    assert out[1].split("|") == list_tasks(available=True)


def test_a_task_whose_required_module_is_missing_is_not_available(monkeypatch):
    # lunarlander's task file requires Box2D, gymnasium's extra simulator
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "Box2D" else find_spec(name, *a),
    )
    from marl.envs.tasks import install_hints

    assert not task_available("gymnasium/lunarlander")
    assert task_available("gymnasium/cartpole")
    assert "gymnasium/lunarlander" in install_hints()["gymnasium"][0]


@pytest.mark.parametrize(
    "name, found",
    [("json.decoder", True), ("json.no_such_module", False), ("json.decoder.deeper", False),
     ("no_such_package_xyz.sub", False), ("xmlrpc.server", True)],
)  # fmt: skip
def test_module_installed_finds_submodules_without_importing_them(name, found):
    from marl.extras import module_installed

    parent = name.rsplit(".", 1)[0]
    imported = parent in sys.modules
    assert module_installed(name) is found
    if not imported:  # looked up in its parent's folders: the parent is not imported either
        assert parent not in sys.modules


def test_a_task_missing_from_its_package_is_not_available():
    from marl.envs.families import env_available

    if importlib.util.find_spec("pettingzoo") is not None:
        assert env_available("pettingzoo", {"task": "pistonball_v6"})
        assert env_available("pettingzoo", {"task": "butterfly/pistonball_v6"})
        assert not env_available("pettingzoo", {"task": "pistonball_v99"})
        assert not env_available("pettingzoo", {"task": "nofamily/pistonball_v6"})
    if importlib.util.find_spec("magent2") is not None:
        assert env_available("magent2", {"task": "battle_v4"})
        assert not env_available("magent2", {"task": "battle_v99"})


@pytest.mark.slow
def test_catalogue_ships_with_the_package(tmp_path):
    """A real, non-editable ``pip install .``: make_task works from another directory."""
    target = tmp_path / "site"
    cmd = [
        sys.executable, "-m", "pip", "install", str(REPO), "--no-deps", "-q",
        "--target", str(target), f"--config-settings=build-dir={tmp_path / 'build'}",
    ]  # fmt: skip
    if all(importlib.util.find_spec(m) for m in ("scikit_build_core", "nanobind")):
        cmd.append("--no-build-isolation")
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    assert (target / "marl" / "tasks" / "vmas" / "navigation.yaml").is_file()
    # the hydra configs, the benchmark suites and the Ray launcher plugin ship too
    # (algorithm configs are structured configs registered in code; the presets are YAML)
    assert (target / "marl" / "conf" / "config.yaml").is_file()
    assert (target / "marl" / "conf" / "experiment" / "debug.yaml").is_file()
    assert (target / "marl" / "bench" / "suites" / "vmas_small.yaml").is_file()
    assert (target / "hydra_plugins" / "marl_ray_launcher" / "ray_launcher.py").is_file()
    code = (
        "import sys\n"
        # drop the editable-install finder so that the copy under `target` is imported
        "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in type(f).__module__]\n"
        f"sys.path.insert(0, {str(target)!r})\n"
        "import marl\n"
        f"assert marl.__file__.startswith({str(target)!r}), marl.__file__\n"
        "from marl.envs import list_tasks, make_task\n"
        "from marl.envs.tasks import _catalogue_root\n"
        f"assert str(_catalogue_root()).startswith({str(target)!r})\n"
        f"assert len(list_tasks()) == {len(ALL)}\n"
        "env = make_task('gymnasium/cartpole', seed=0)\n"
        "assert env.rollout(3)['episode_reward'].shape == (3, 1)\n"
        # the installed copy composes marl-run's config, presets included
        "from marl.experiment.cli import compose_config\n"
        "cfg = compose_config(['algorithm=qmix', 'experiment=debug'])\n"
        "assert cfg.algorithm.name == 'qmix' and cfg.experiment.check_actions, cfg\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


# ------------------------------------------------------------------ the task file schema
@pytest.fixture
def catalogue(tmp_path, monkeypatch):
    """A private catalogue folder: write ``<family>/<name>.yaml`` files into it."""
    import marl.envs.tasks as tasks

    monkeypatch.setattr(tasks, "_catalogue_root", lambda: tmp_path)
    tasks._index.cache_clear()

    def write(name: str, text: str) -> Path:
        path = tmp_path / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        tasks._index.cache_clear()
        return path

    yield write
    tasks._index.cache_clear()


GOOD = "description: d\nfamily: vmas\nenv:\n  scenario: navigation\n  max_steps: 10\n"


@pytest.mark.parametrize(
    "extra, match",
    [
        ("group_mapp: by_prefix\n", r"unknown key 'group_mapp'.*closest: 'group_map'"),
        ("transfroms:\n  step_counter: 10\n", r"unknown key 'transfroms'.*closest: 'transforms'"),
        (
            "transforms:\n  step_countr: 10\n",
            r"unknown transform 'step_countr'.*valid: \['double_to_float', 'resize_images', 'step_counter'\]"
            r".*closest: 'step_counter'",
        ),
        ("transforms:\n  step_counter: ten\n", r"transforms.step_counter.*positive int.*'ten'"),
        ("transforms:\n  step_counter: 0\n", r"transforms.step_counter.*positive int.*0"),
        ("transforms:\n  step_counter: true\n", r"transforms.step_counter.*positive int.*True"),
        ("transforms:\n  double_to_float: 'yes'\n", r"double_to_float.*true or false.*'yes'"),
        ("transforms: [step_counter]\n", r"'transforms' must be a mapping"),
        ("group_map: by_prefx\n", r"group_map.*'by_prefx'.*closest: 'by_prefix'"),
        ("group_map:\n  a: agent_0\n", r"group_map.*group 'a'.*list of agent names"),
        ("description: [1]\n", r"'description' must be a string"),
        (
            "evaluation: versus_randm\n",
            r"evaluation: unknown evaluation 'versus_randm'; valid: \['versus_random'\]"
            r".*closest: 'versus_random'",
        ),
        ("evaluation: [versus_random]\n", r"unknown evaluation \['versus_random'\]"),
        ("requires: Box2D\n", r"'requires' must be a list of module names.*'Box2D'"),
    ],
)
def test_task_files_with_typos_are_refused_when_loaded(catalogue, extra, match):
    path = catalogue(
        "vmas/bad",
        GOOD + extra
        if not extra.startswith("description")
        else GOOD.replace("description: d\n", extra),
    )
    with pytest.raises(ValueError, match=match) as err:
        load_task_config("vmas/bad")
    assert str(path) in str(err.value)  # names the file
    with pytest.raises(ValueError, match=match):
        make_task("vmas/bad", num_envs=1)


def test_every_problem_of_a_task_file_is_listed_at_once(catalogue):
    catalogue("vmas/bad", GOOD + "group_mapp: by_prefix\ntransforms:\n  step_countr: 10\n")
    with pytest.raises(ValueError, match=r"(?s)'group_mapp'.*'step_countr'"):
        load_task_config("vmas/bad")


def test_a_valid_private_task_file_loads_and_builds(catalogue):
    catalogue("vmas/good", GOOD + "group_map: all_in_one\ntransforms:\n  step_counter: 3\n")
    env = make_task("vmas/good", num_envs=2, seed=0)
    assert list(env.group_map) == ["agents"]
    assert env.rollout(10, break_when_any_done=True).shape == (2, 3)


@pytest.mark.parametrize("name", ALL)
def test_every_shipped_task_file_passes_the_schema(name):
    from marl.envs.tasks import _validate_task_config

    config = load_task_config(name)
    _validate_task_config(config, f"{name}.yaml")  # load_task_config ran it too: no error
    keys = {"description", "family", "env", "evaluation", "group_map", "requires", "transforms"}
    assert set(config) <= keys
