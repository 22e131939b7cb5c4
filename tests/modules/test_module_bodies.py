"""The deepsets, gnn and cnn bodies: shapes, permutation equivariance, graphs and masks."""

from __future__ import annotations

import pytest
import torch

from marl.modules import MultiAgentCNN, MultiAgentDeepSets, MultiAgentGNN, adjacency


def deepsets(n, *, centralized=False, share_params=True):
    return MultiAgentDeepSets(
        5, 3, n, centralized=centralized, share_params=share_params, num_cells=[16, 16]
    )


def gnn(n, *, centralized=False, share_params=True, radius=None):
    return MultiAgentGNN(
        5,
        3,
        n,
        centralized=centralized,
        share_params=share_params,
        num_cells=[16, 16],
        position=(0, 2) if radius is not None else None,
        radius=radius,
    )


BODIES = {"deepsets": deepsets, "gnn": gnn}


@pytest.mark.parametrize("body", sorted(BODIES))
@pytest.mark.parametrize("n", [1, 3, 16])
@pytest.mark.parametrize("centralized", [False, True])
@pytest.mark.parametrize("share_params", [False, True])
def test_shapes_for_1_3_and_16_agents(body, n, centralized, share_params):
    torch.manual_seed(0)
    net = BODIES[body](n, centralized=centralized, share_params=share_params)
    out = net(torch.randn(4, 2, n, 5))  # two batch dims: [env, time]
    assert out.shape == (4, 2, n, 3)
    assert torch.isfinite(out).all()
    if centralized and share_params:  # one value for the whole group
        assert torch.allclose(out, out[..., :1, :].expand_as(out))


@pytest.mark.parametrize("body", sorted(BODIES))
@pytest.mark.parametrize("centralized", [False, True])
def test_permuting_the_agents_permutes_the_outputs(body, centralized):
    torch.manual_seed(0)
    net = BODIES[body](6, centralized=centralized)
    x = torch.randn(8, 6, 5)
    perm = torch.randperm(6)
    out = net(x)
    assert torch.allclose(net(x[:, perm]), out[:, perm], atol=1e-5)
    # and the agents do see each other: changing one agent changes another's output
    y = x.clone()
    y[:, 0] += 1.0
    assert not torch.allclose(net(y)[:, 1], out[:, 1], atol=1e-4)


def test_per_agent_parameters_tell_the_agents_apart():
    torch.manual_seed(0)
    net = deepsets(3, share_params=False)
    x = torch.randn(1, 1, 5).expand(4, 3, 5)  # every agent sees the same
    out = net(x)
    assert not torch.allclose(out[:, 0], out[:, 1])


def test_a_distance_graph_ignores_agents_out_of_range():
    torch.manual_seed(0)
    net = gnn(4, radius=1.0)
    x = torch.randn(16, 4, 5)
    x[..., 0, :2] = torch.tensor([0.0, 0.0])
    x[..., 1, :2] = torch.tensor([0.5, 0.0])
    x[..., 2, :2] = torch.tensor([0.0, 0.6])
    x[..., 3, :2] = torch.tensor([5.0, 5.0])  # far from every other agent
    out = net(x)
    moved = x.clone()
    moved[..., 3, :2] = torch.tensor([-6.0, 4.0])  # still far
    moved[..., 3, 2:] = torch.randn(16, 3)  # and what it observes changes too
    changed = net(moved)
    assert torch.equal(changed[:, :3], out[:, :3])
    assert not torch.allclose(changed[:, 3], out[:, 3])
    # brought within range, it is heard
    moved[..., 3, :2] = torch.tensor([0.4, 0.4])
    assert not torch.allclose(net(moved)[:, 0], out[:, 0])


@pytest.mark.parametrize("body", sorted(BODIES))
def test_absent_agents_send_nothing(body):
    torch.manual_seed(0)
    net = BODIES[body](4)
    x = torch.randn(8, 4, 5)
    mask = torch.tensor([True, True, True, False]).expand(8, 4)
    out = net(x, mask=mask)
    y = x.clone()
    y[:, 3] = torch.randn(8, 5) * 10
    assert torch.allclose(net(y, mask=mask)[:, :3], out[:, :3], atol=1e-6)
    assert torch.isfinite(net(x, mask=torch.zeros(8, 4, dtype=torch.bool))).all()


def test_adjacency_keeps_self_loops_and_drops_absent_agents():
    mask = torch.tensor([[True, False, True]])
    a = adjacency(3, mask=mask)
    assert a.int().tolist() == [[[1, 0, 1], [0, 1, 0], [1, 0, 1]]]
    with pytest.raises(ValueError, match="needs the agents' positions"):
        adjacency(3, radius=1.0)


def test_a_gnn_refuses_a_position_outside_its_inputs():
    with pytest.raises(ValueError, match=r"position must be \(start, stop\) within the 5 input"):
        MultiAgentGNN(5, 3, 2, centralized=False, share_params=True, position=(4, 6), radius=1.0)


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("n", [1, 3, 16])
@pytest.mark.parametrize("centralized,share_params", [(False, True), (False, False), (True, True)])
def test_cnn_reads_its_image_where_the_input_has_it(channels_last, n, centralized, share_params):
    torch.manual_seed(0)
    shape = (7, 6, 3) if channels_last else (3, 7, 6)
    net = MultiAgentCNN(
        2 + 126 + 1,  # a 2-feature leaf, the image, then a 1-feature action
        4,
        n,
        image_shape=shape,
        image=(2, 128),
        channels_last=channels_last,
        centralized=centralized,
        share_params=share_params,
        conv_cells=[4, 4],
        num_cells=[8],
    )
    img = torch.randn(5, n, 3, 7, 6)
    stored = img.permute(0, 1, 3, 4, 2) if channels_last else img
    x = torch.cat([torch.randn(5, n, 2), stored.reshape(5, n, -1), torch.randn(5, n, 1)], -1)
    out = net(x)
    assert out.shape == (5, n, 4)
    # the conv sees the image in [C, H, W]: the same as its encoder on the image itself
    start = net.conv(img)
    assert start.shape[-1] == 4 * 3 * 2
    y = x.clone()
    y[..., 2:128] = 0.0
    assert not torch.allclose(net(y), out)


def test_cnn_refuses_an_image_too_small_for_its_convs():
    with pytest.raises(
        ValueError, match=r"a 4x4 image is too small for 2 convs \(kernel sizes \[3, 3\]"
    ):
        MultiAgentCNN(
            48,
            2,
            1,
            image_shape=(3, 4, 4),
            image=(0, 48),
            channels_last=False,
            centralized=False,
            share_params=True,
            conv_cells=[4, 4],
        )


def test_cnn_scales_uint8_pixels_to_unit_range():
    from marl.modules.conv import MultiAgentCNN

    kw = dict(
        image_shape=(6, 6, 1),
        image=(0, 36),
        channels_last=True,
        centralized=False,
        share_params=True,
        conv_cells=[4],
        num_cells=[8],
    )
    torch.manual_seed(0)
    scaled = MultiAgentCNN(36, 2, 3, image_scale=1 / 255, **kw)
    plain = MultiAgentCNN(36, 2, 3, **kw)
    plain.load_state_dict(scaled.state_dict())
    pixels = torch.randint(0, 256, (5, 3, 36)).float()
    assert torch.allclose(scaled(pixels), plain(pixels / 255), atol=1e-6)
    assert not torch.allclose(scaled(pixels), plain(pixels), atol=1e-3)
