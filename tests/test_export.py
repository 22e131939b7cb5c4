"""``marl.export``: group policies as ``torch.export`` and ONNX artifacts that choose the
eager policy's actions and run where marl is not installed."""

import json
import subprocess
import sys
import textwrap

import pytest
import torch

from marl.algorithms import Algorithm
from marl.envs import make_task
from marl.export import (
    ExportMismatchError,
    export_policies,
    load_manifest,
    random_inputs,
    tensor_policy,
)
from marl.testing import MultiAgentFakeEnv

# (algorithm, task, task overrides, formats): continuous bounded actions, per-agent
# actors, discrete greedy actions, a single-agent root, and action masks of a turn-based game.
CASES = {
    "mappo-navigation": ("mappo", "vmas/navigation", {"num_envs": 2}, ("pt2", "onnx")),
    "qmix-navigation": (
        "qmix",
        "vmas/navigation",
        {"num_envs": 2, "continuous_actions": False},
        ("pt2",),
    ),
    # per-agent (unshared) actors: MultiAgentMLP's stacked weights
    "happo-navigation": ("happo", "vmas/navigation", {"num_envs": 2}, ("pt2", "onnx")),
    # MAT: the agents' modes decoded one after another (a loop over the agents, unrolled)
    "mat-navigation": ("mat", "vmas/navigation", {"num_envs": 2}, ("pt2", "onnx")),
    "ppo-cartpole": ("ppo", "gymnasium/cartpole", {"num_envs": 2}, ("pt2",)),
    "iql-tictactoe": ("iql", "pettingzoo/tictactoe", {}, ("pt2", "onnx")),
    # the bodies over a group's agents: a pool, and messages over a distance graph
    "ippo-deepsets-navigation": ("ippo", "vmas/navigation", {"num_envs": 2}, ("pt2", "onnx")),
    "mappo-gnn-navigation": ("mappo", "vmas/navigation", {"num_envs": 2}, ("pt2", "onnx")),
}
CONFIGS = {
    "ippo-deepsets-navigation": {"network": "deepsets"},
    "mappo-gnn-navigation": {"network": "gnn", "gnn_radius": 0.5},
}


def _build(name):
    algorithm, task, overrides, formats = CASES[name]
    pytest.importorskip(task.split("/")[0])
    if "onnx" in formats:
        pytest.importorskip("onnxruntime")
    env = make_task(task, **overrides)
    torch.manual_seed(0)
    return env, Algorithm(algorithm, CONFIGS.get(name)).build(env, seed=0), formats


@pytest.fixture(scope="module", params=sorted(CASES))
def exported(request, tmp_path_factory):
    env, algo, formats = _build(request.param)
    folder = tmp_path_factory.mktemp(request.param)
    written = export_policies(algo, folder, formats=formats)
    return env, algo, folder, written


def test_the_tensor_policy_is_the_algorithms_evaluation_policy(exported):
    """Same action as ``eval_policy`` on the env's own observations."""
    env, algo, _, written = exported
    td = env.reset()
    acted = algo.eval_policy()(td.clone())
    for group in written:
        policy = tensor_policy(algo, group)
        batch = td.batch_size
        inputs = [td.get(i.key).reshape(-1, *i.shape) for i in policy.signature.inputs]
        expected = acted.get(policy._action_key)
        got = policy(*inputs).reshape(expected.shape)
        assert torch.equal(got, expected), (group, batch)


def test_artifacts_agree_with_the_eager_policy_and_the_manifest(exported):
    _, algo, folder, written = exported
    manifest = load_manifest(folder)
    assert sorted(manifest["groups"]) == sorted(written)
    generator = torch.Generator().manual_seed(123)  # others than the export's own check
    for group, files in written.items():
        policy = tensor_policy(algo, group)
        entry = manifest["groups"][group]
        assert entry["checked_on"] == 1000
        assert [tuple(i["key"]) for i in entry["inputs"]] == [
            i.key for i in policy.signature.inputs
        ]
        # more rows than MultiAgentMLP's CPU chunk (2730 for 3 agents and 64 cells): the
        # eager per-agent net runs in chunks, the artifact in one pass, on any batch size
        inputs = random_inputs(policy.signature, 3000, generator)
        with torch.no_grad():
            expected = policy(*inputs)
        program = torch.export.load(str(files["pt2"])).module()
        torch.testing.assert_close(program(*inputs), expected, rtol=1e-4, atol=1e-5)
        assert tuple(expected.shape[1:]) == tuple(entry["action_shape"])
        if "onnx" in files:
            import onnxruntime

            session = onnxruntime.InferenceSession(str(files["onnx"]))
            feed = {i.name: x.numpy() for i, x in zip(policy.signature.inputs, inputs)}
            (got,) = session.run(["action"], feed)
            torch.testing.assert_close(torch.from_numpy(got), expected, rtol=1e-4, atol=1e-5)


STANDALONE = """
import json, sys
import numpy as np
import onnxruntime
import torch

folder = sys.argv[1]
manifest = json.load(open(folder + "/manifest.json"))
data = torch.load(folder + "/probe.pt")
for group, entry in manifest["groups"].items():
    inputs = data[group]["inputs"]
    program = torch.export.load(folder + "/" + entry["files"]["pt2"]).module()
    torch.testing.assert_close(program(*inputs), data[group]["action"], rtol=1e-4, atol=1e-5)
    if "onnx" in entry["files"]:
        session = onnxruntime.InferenceSession(folder + "/" + entry["files"]["onnx"])
        feed = {i["name"]: x.numpy() for i, x in zip(entry["inputs"], inputs)}
        (got,) = session.run(["action"], feed)
        assert np.allclose(got, data[group]["action"].numpy(), rtol=1e-4, atol=1e-5), group
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("marl", "tensordict"))
assert not loaded, loaded
print("standalone ok", sorted(manifest["groups"]))
"""


def test_artifacts_run_in_a_process_without_marl(exported):
    """The deployment promise: torch (``.pt2``) or onnxruntime (``.onnx``) alone."""
    pytest.importorskip("onnxruntime")
    _, algo, folder, written = exported
    probe = {}
    for group in written:
        policy = tensor_policy(algo, group)
        inputs = random_inputs(policy.signature, 64, torch.Generator().manual_seed(7))
        with torch.no_grad():
            probe[group] = {"inputs": inputs, "action": policy(*inputs)}
    torch.save(probe, folder / "probe.pt")
    script = folder / "standalone.py"
    script.write_text(textwrap.dedent(STANDALONE))
    # run from the export folder with -I: the repository (and marl) are not on the path
    result = subprocess.run(
        [sys.executable, "-I", str(script), str(folder)],
        capture_output=True,
        text=True,
        cwd=folder,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "standalone ok" in result.stdout


def test_an_artifact_that_disagrees_is_refused(tmp_path, monkeypatch):
    algo = Algorithm("ppo").build(MultiAgentFakeEnv(num_envs=2))
    import marl.export as export

    real = export._export_pt2

    def off_by_a_bit(policy, path):
        module = real(policy, path)
        return lambda *inputs: module(*inputs) + 0.01

    monkeypatch.setattr(export, "_export_pt2", off_by_a_bit)
    with pytest.raises(ExportMismatchError, match=r"group 'walker', pt2: 1000 of 1000 random"):
        export_policies(algo, tmp_path, formats=("pt2",), groups=["walker"])


def test_bad_requests_are_named(tmp_path, monkeypatch):
    algo = Algorithm("ppo").build(MultiAgentFakeEnv(num_envs=2))
    with pytest.raises(ValueError, match=r"export formats must be among \['pt2', 'onnx'\], got"):
        export_policies(algo, tmp_path, formats=("tflite",))
    with pytest.raises(KeyError, match=r"no group\(s\) \['runner'\]"):
        export_policies(algo, tmp_path, formats=("pt2",), groups=["runner"])
    with pytest.raises(ValueError, match=r"groups \['picker', 'walker'\]: name one"):
        tensor_policy(algo)
    with pytest.raises(TypeError, match=r"expected 1 inputs \['observation'\], got 2"):
        tensor_policy(algo, "walker")(torch.zeros(1, 2, 3), torch.zeros(1))
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(ImportError, match=r'pip install "marl\[export\]"'):
        export_policies(algo, tmp_path, formats=("onnx",))
    assert not any(tmp_path.iterdir())  # nothing written before the error


def test_marl_run_exports_at_the_end_and_refuses_a_bad_format_before_training(tmp_path):
    pytest.importorskip("vmas")
    from marl.experiment import Experiment

    config = dict(
        num_envs=2,
        frames_per_batch=40,
        total_frames=40,
        evaluation=False,
        render=False,
        progress=False,
        save_folder=str(tmp_path / "run"),
        export=["pt2"],
    )
    Experiment("vmas/navigation", "mappo", config=config, task_overrides={"max_steps": 20}).run()
    manifest = json.loads((tmp_path / "run" / "export" / "manifest.json").read_text())
    assert manifest["groups"]["agent"]["files"] == {"pt2": "agent.pt2"}
    assert json.loads((tmp_path / "run" / "status.json").read_text())["status"] == "complete"
    with pytest.raises(ValueError, match=r"experiment.export: unknown format 'tflite'"):
        Experiment(
            "vmas/navigation",
            "mappo",
            config=dict(config, save_folder=str(tmp_path / "bad"), export=["tflite"]),
        )
    assert not (tmp_path / "bad").exists()


def test_a_recurrent_policy_with_export_is_refused_before_training(tmp_path):
    """It used to train to the end and fail in the export, leaving the run 'failed'."""
    from marl.experiment import Experiment

    with pytest.raises(ValueError, match=r"experiment.export=\['onnx'\]: a recurrent policy"):
        Experiment(
            "marl/recall",
            "ippo",
            model={"network": "gru"},
            config=dict(save_folder=str(tmp_path / "run"), export=["onnx"]),
        )
    assert not (tmp_path / "run").exists()
