"""ResizeImages: pixel observations shrunk (and made grey) at the env, as uint8."""

import pytest
import torch
import torch.nn.functional as F

from marl.envs import TransformedEnv, check_env_specs, make_task
from marl.envs.image_transforms import ResizeImages
from marl.testing import MultiAgentFakeEnv


def test_pixel_tasks_are_shrunk_to_84x84_grey_bytes():
    env = make_task("pettingzoo/pistonball", seed=0, max_cycles=4)
    spec = env.observation_spec["piston", "observation"]
    assert spec.shape == (20, 84, 84, 1) and spec.dtype == torch.uint8
    check_env_specs(env, steps=4)
    td = env.rollout(3)
    obs = td["next", "piston", "observation"]
    assert obs.shape == (3, 20, 84, 84, 1) and obs.dtype == torch.uint8
    assert obs.float().std() > 0  # a real picture, not a blank


@pytest.mark.parametrize("task", ["pettingzoo/pistonball", "pettingzoo/cooperative_pong"])
def test_pixel_observations_follow_the_game(task):
    # PettingZoo draws these screens only when the env renders: under its default
    # render_mode=None every frame stayed the first one (cooperative_pong's all black)
    env = make_task(task, seed=0)
    td = env.rollout(6)
    group = next(iter(env.group_map))
    frames = torch.cat([td[group, "observation"][:1], td["next", group, "observation"]])
    assert frames.float().std() > 0
    assert all((frames[t + 1] != frames[t]).any() for t in range(len(frames) - 1)), task


def test_resize_is_the_area_mean_and_grey_is_the_luma():
    image = torch.randint(0, 256, (2, 3, 8, 6, 3), dtype=torch.uint8)  # [B, agents, H, W, C]
    t = ResizeImages((4, 3), grayscale=True)
    out = t._resize(image, lead=2)
    x = image.float().movedim(-1, -3).reshape(-1, 3, 8, 6)
    grey = 0.299 * x[:, 0] + 0.587 * x[:, 1] + 0.114 * x[:, 2]
    want = F.avg_pool2d(grey[:, None], 2).round().reshape(2, 3, 4, 3, 1)  # 2x2 blocks
    assert out.dtype == torch.uint8 and torch.equal(out.float(), want)
    colour = ResizeImages((4, 3))._resize(image, lead=2)
    assert colour.shape == (2, 3, 4, 3, 3)


def test_bad_sizes_and_envs_without_images_are_refused():
    with pytest.raises(ValueError, match="size must be"):
        ResizeImages((84,))
    with pytest.raises(ValueError, match="no uint8 \\[H, W, C\\] image"):
        TransformedEnv(MultiAgentFakeEnv(num_envs=2), ResizeImages((4, 4))).reset()


def test_a_task_file_gets_a_clear_error_on_a_bad_resize():
    from marl.envs.tasks import _validate_task_config

    config = {"family": "pettingzoo", "env": {}, "transforms": {"resize_images": [84, 84]}}
    with pytest.raises(ValueError, match="resize_images must be a mapping"):
        _validate_task_config(config, "x.yaml")
