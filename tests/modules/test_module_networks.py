"""MLP, MultiAgentMLP, MultiAgentConvNet and the mixers."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from marl.modules import MLP, MultiAgentConvNet, MultiAgentMLP, QMixer, VDNMixer

N, IN, OUT = 3, 5, 2


def per_agent_reference(net: MultiAgentMLP, x: torch.Tensor) -> torch.Tensor:
    """Agent i's MLP applied with agent i's slice of the stacked weights, in a loop."""
    outs = []
    for i in range(net.n_agents):
        h = x.flatten(-2) if net.centralized else x[..., i, :]
        for j, (w, b) in enumerate(zip(net.weights, net.biases)):
            h = h @ w[i] + b[i, 0]
            if j < len(net.weights) - 1:
                if net.layer_norm:  # zero mean, unit variance over the features
                    h = (h - h.mean(-1, keepdim=True)) / (
                        h.var(-1, unbiased=False, keepdim=True) + 1e-5
                    ).sqrt()
                h = torch.tanh(h)
        outs.append(h)
    return torch.stack(outs, -2)


def test_mlp_shapes_and_depth():
    net = MLP(4, 3, num_cells=[8, 16])
    assert [m.out_features for m in net if isinstance(m, nn.Linear)] == [8, 16, 3]
    assert net(torch.zeros(2, 7, 4)).shape == (2, 7, 3)
    assert len([m for m in MLP(4, 3, depth=0) if isinstance(m, nn.Linear)]) == 1
    with pytest.raises(ValueError, match="depth"):
        MLP(4, 3, depth=3, num_cells=[8, 8])


@pytest.mark.parametrize("centralized", [False, True])
def test_multiagent_mlp_unshared_matches_per_agent_loop(centralized):
    torch.manual_seed(0)
    net = MultiAgentMLP(IN, OUT, N, centralized=centralized, share_params=False, num_cells=16)
    x = torch.randn(4, 6, N, IN)
    torch.testing.assert_close(net(x), per_agent_reference(net, x))
    # independent initialisation: no two agents share weights
    w = net.weights[0]
    assert all(not torch.equal(w[i], w[j]) for i in range(N) for j in range(i + 1, N))


def test_layer_norm_normalizes_every_hidden_layer_shared_or_per_agent():
    torch.manual_seed(0)
    net = MultiAgentMLP(
        IN, OUT, N, centralized=False, share_params=False, num_cells=16, layer_norm=True
    )
    x = 100 * torch.randn(4, N, IN)  # large inputs: without the norm tanh saturates
    torch.testing.assert_close(net(x), per_agent_reference(net, x))
    shared = MultiAgentMLP(
        IN, OUT, N, centralized=False, share_params=True, num_cells=[16, 8], layer_norm=True
    )
    norms = [m for m in shared.mlp if isinstance(m, nn.LayerNorm)]
    assert [m.normalized_shape for m in norms] == [(16,), (8,)]
    hidden = nn.Sequential(*list(shared.mlp)[:2])(x)  # first Linear, then its norm
    torch.testing.assert_close(hidden.mean(-1), torch.zeros(4, N), atol=1e-5, rtol=0)
    assert not any(isinstance(m, nn.LayerNorm) for m in MLP(IN, OUT, num_cells=16))


def test_multiagent_mlp_centralization_dependencies():
    for centralized in (False, True):
        net = MultiAgentMLP(IN, OUT, N, centralized=centralized, share_params=False, num_cells=8)
        x = torch.randn(2, N, IN, requires_grad=True)
        (g,) = torch.autograd.grad(net(x)[:, 0].sum(), x)
        other_agents_matter = bool(g[:, 1:].abs().sum() > 0)
        assert other_agents_matter == centralized


def test_multiagent_mlp_shared():
    net = MultiAgentMLP(IN, OUT, N, centralized=False, share_params=True, num_cells=8)
    x = torch.randn(2, N, IN)
    x[:, 1] = x[:, 0]
    out = net(x)
    torch.testing.assert_close(out[:, 0], out[:, 1])
    torch.testing.assert_close(out, net.mlp(x))
    cnet = MultiAgentMLP(IN, OUT, N, centralized=True, share_params=True, num_cells=8)
    out = cnet(torch.randn(2, N, IN))
    torch.testing.assert_close(out[:, 0], out[:, 2])
    n_unshared = sum(
        p.numel()
        for p in MultiAgentMLP(
            IN, OUT, N, centralized=False, share_params=False, num_cells=8
        ).parameters()
    )
    assert n_unshared == N * sum(p.numel() for p in net.parameters())


def test_multiagent_mlp_bad_input():
    net = MultiAgentMLP(IN, OUT, N, centralized=False, share_params=False)
    with pytest.raises(ValueError, match=r"\[\*B, 3, 5\]"):
        net(torch.zeros(2, N + 1, IN))


@pytest.mark.parametrize("centralized", [False, True])
def test_conv_unshared_matches_per_agent(centralized):
    torch.manual_seed(0)
    C = 2
    net = MultiAgentConvNet(
        N,
        C,
        centralized=centralized,
        share_params=False,
        num_cells=[4, 3],
        kernel_sizes=3,
        strides=[1, 2],
    )
    x = torch.randn(2, 5, N, C, 9, 9)
    out = net(x)
    assert out.shape[:3] == (2, 5, N)
    conv1, conv2 = net.net[0], net.net[2]
    for i in range(N):
        cin = C * (N if centralized else 1)
        xi = x.flatten(-4, -3) if centralized else x[..., i, :, :, :]
        xi = xi.reshape(-1, cin, 9, 9)
        w1, b1 = conv1.weight[4 * i : 4 * (i + 1)], conv1.bias[4 * i : 4 * (i + 1)]
        w2, b2 = conv2.weight[3 * i : 3 * (i + 1)], conv2.bias[3 * i : 3 * (i + 1)]
        h = nn.functional.elu(nn.functional.conv2d(xi, w1, b1))
        h = nn.functional.elu(nn.functional.conv2d(h, w2, b2, stride=2))
        torch.testing.assert_close(out[..., i, :].reshape(-1, h[0].numel()), h.flatten(1))


def test_conv_shared():
    net = MultiAgentConvNet(N, 1, centralized=False, share_params=True, num_cells=[2])
    x = torch.randn(3, N, 1, 6, 6)
    x[:, 2] = x[:, 0]
    out = net(x)
    torch.testing.assert_close(out[:, 0], out[:, 2])
    c = MultiAgentConvNet(N, 1, centralized=True, share_params=True, num_cells=[2])
    out = c(torch.randn(3, N, 1, 6, 6))
    torch.testing.assert_close(out[:, 0], out[:, 1])


def test_vdn_mixer():
    qs = torch.randn(4, 7, N, 1)
    torch.testing.assert_close(VDNMixer(N)(qs), qs.sum(-2))
    torch.testing.assert_close(VDNMixer(N)(qs.squeeze(-1)), qs.sum(-2))
    with pytest.raises(ValueError, match="agent Q-values"):
        VDNMixer(N)(torch.randn(4, N + 1))


def test_qmixer_monotonic_and_shapes():
    torch.manual_seed(0)
    mixer = QMixer(state_shape=(2, 3), mixing_embed_dim=8, n_agents=N)
    qs = torch.randn(4, 7, N, requires_grad=True)
    state = torch.randn(4, 7, 2, 3)
    out = mixer(qs, state)
    assert out.shape == (4, 7, 1)
    (g,) = torch.autograd.grad(out.sum(), qs)
    assert bool((g >= 0).all())
    with pytest.raises(ValueError, match="state"):
        mixer(qs, torch.randn(4, 7, 5))


@pytest.mark.parametrize("n_agents", [2, 7])
def test_multiagent_mlp_is_one_call_per_layer(n_agents, monkeypatch):
    calls = []
    real = torch.baddbmm
    monkeypatch.setattr(torch, "baddbmm", lambda *a, **k: calls.append(1) or real(*a, **k))
    net = MultiAgentMLP(IN, OUT, n_agents, centralized=False, share_params=False, num_cells=[8, 8])
    net(torch.randn(4, n_agents, IN))
    assert len(calls) == 3  # one batched matmul per layer, whatever the number of agents


@pytest.mark.parametrize("centralized", [False, True])
def test_multiagent_mlp_cpu_row_chunks_match_one_pass(centralized, monkeypatch):
    import marl.modules.mlp as mlp_mod

    torch.manual_seed(0)
    net = MultiAgentMLP(5, 3, 4, centralized=centralized, share_params=False, num_cells=16)
    x = torch.randn(2, 37, 4, 5)  # 74 rows, not a multiple of the chunk
    whole = net(x)
    whole.square().sum().backward()
    grads = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    # 4 agents x 16 cells x 64 rows per chunk: the batch is cut into 2 chunks
    monkeypatch.setattr(mlp_mod, "_CPU_CHUNK_ELEMENTS", 4 * 16 * 64)
    assert net._cpu_chunk_rows() == 64
    chunked = net(x)
    chunked.square().sum().backward()
    torch.testing.assert_close(chunked, whole)
    for p, g in zip(net.parameters(), grads):
        torch.testing.assert_close(p.grad, g)


def test_qmixer_init_scale_starts_q_tot_near_zero_on_a_raw_state():
    # SMAX's world state holds raw positions in [0, 32]: PyTorch's initialization of the
    # hypernetworks puts Q_tot at the state's scale, a small init_scale near 0
    from marl.modules import QMixer

    torch.manual_seed(0)
    state = torch.rand(256, 72) * 32
    qs = torch.zeros(256, 3)
    default = QMixer(state_shape=(72,), mixing_embed_dim=32, n_agents=3)
    small = QMixer(state_shape=(72,), mixing_embed_dim=32, n_agents=3, init_scale=0.01)
    assert default(qs, state).abs().mean() > 5
    assert small(qs, state).abs().mean() < 0.5
    assert small(torch.ones(256, 3), state).abs().mean() < 0.5
    with pytest.raises(ValueError, match="init_scale must be None or > 0"):
        QMixer(state_shape=(72,), mixing_embed_dim=32, n_agents=3, init_scale=0.0)
