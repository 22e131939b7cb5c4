"""Turn-based (AEC) games batched as marl-run batches them store the same transitions.

``marl-run`` always steps a task through a batch of envs (a ``SerialEnv``). The
off-policy learners must relink each player's transitions from one of its turns to
its next one in a batch exactly as with one unbatched env: before the batched env
declared itself turn-based, a batch's transitions were stored as raw env steps (the
next observation right after the player's own move, the loser's -1 never reaching
the loser, every action legal at the next state), and IQL self-play on tictactoe
got worse than its untrained network instead of better.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("pettingzoo")

from marl.algorithms import Algorithm
from marl.collectors import Collector
from marl.envs.tasks import make_task

STEPS = 24  # env steps per env: a few whole games, and one cut at the batch's end


class _ScriptedPlayers(torch.nn.Module):
    """Random legal moves for whoever is to move, from one seeded stream per env.

    Env ``i`` of a batch plays the games of stream ``streams[i]``, so a batch of two
    envs replays the games of two unbatched envs move for move.
    """

    def __init__(self, streams: list[int]) -> None:
        super().__init__()
        self.generators = [torch.Generator().manual_seed(100 + s) for s in streams]

    def forward(self, td):
        legal = td["player", "action_mask"]  # [*B, 2, 9]
        mover = td["player", "mask"]  # [*B, 2]
        flat_legal = legal.reshape(-1, *legal.shape[-2:])
        flat_mover = mover.reshape(-1, mover.shape[-1])
        actions = torch.zeros(flat_mover.shape, dtype=torch.long)
        for env, gen in enumerate(self.generators):
            player = int(flat_mover[env].nonzero()[0, 0])
            choices = flat_legal[env, player].nonzero().flatten()
            actions[env, player] = choices[torch.randint(len(choices), (1,), generator=gen)]
        td["player", "action"] = actions.reshape(mover.shape)
        return td


def _stored(num_envs: int | None, streams: list[int]) -> list[dict[int, list[tuple]]]:
    """What IQL's replay buffer receives from one batch: per env, per player, in order."""
    env = make_task("pettingzoo/tictactoe", seed=0, num_envs=num_envs)
    algo = Algorithm("iql", config={"learning_starts": 10**6, "batch_size": 8})
    algo.build(env, seed=0)
    ((_, learner),) = algo.group_learners()
    frames = STEPS * len(streams)
    collector = Collector(env, _ScriptedPlayers(streams), frames_per_batch=frames)
    batch = next(iter(collector))
    collector.shutdown()
    learner.update(learner.process_batch(batch))
    data = learner.buffer.storage.get(torch.arange(len(learner.buffer)))
    assert data.shape == (frames,)  # env after env: the batch's [E, T] flattened
    per_env = []
    for rows in data.split(STEPS):
        players: dict[int, list[tuple]] = {0: [], 1: []}
        acting = rows["player", "mask"]
        for t, j in acting.nonzero().tolist():
            players[j].append(
                tuple(
                    rows[key][t, j].flatten().tolist()
                    for key in (
                        ("player", "observation"),
                        ("player", "action"),
                        ("next", "player", "reward"),
                        ("next", "player", "observation"),
                        ("next", "player", "done"),
                        ("next", "player", "terminated"),
                        ("next", "player", "action_mask"),
                    )
                )
            )
        per_env.append(players)
    return per_env


def test_batched_tictactoe_stores_the_unbatched_turn_to_turn_transitions():
    torch.set_num_threads(1)
    unbatched = [_stored(None, [s])[0] for s in (0, 1)]
    for players in unbatched:
        # the relinked transitions: each game's loser gets its -1 on its own last turn
        ends = [tr[2] for j in (0, 1) for tr in players[j] if tr[5] == [True]]
        assert ends.count([1.0]) == ends.count([-1.0]) > 0, ends
    assert _stored(1, [0]) == unbatched[:1]
    assert _stored(2, [0, 1]) == unbatched
