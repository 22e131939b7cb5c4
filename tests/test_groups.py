import pytest

from marl.groups import GroupMap


def test_constructors():
    agents = ["adversary_0", "adversary_1", "agent_0", "leader"]
    assert GroupMap.by_prefix(agents).to_dict() == {
        "adversary": ["adversary_0", "adversary_1"],
        "agent": ["agent_0"],
        "leader": ["leader"],
    }
    assert GroupMap.all_in_one(agents).to_dict() == {"agents": agents}
    assert GroupMap.all_in_one(agents, name="team")["team"] == agents
    assert list(GroupMap.one_per_agent(agents)) == agents
    assert GroupMap.build(None, agents) == GroupMap.by_prefix(agents)
    assert GroupMap.build("all_in_one", agents) == GroupMap.all_in_one(agents)
    gm = GroupMap.build({"a": ["adversary_0", "agent_0"], "b": ["adversary_1", "leader"]}, agents)
    assert gm.group_of("leader") == "b" and gm.agents == [
        "adversary_0",
        "agent_0",
        "adversary_1",
        "leader",
    ]


@pytest.mark.parametrize(
    "mapping, agents, match",
    [
        ({"a": ["x"], "b": ["x"]}, None, "'x' is in groups 'a' and 'b'"),
        ({"a": ["x", "x"]}, None, "'x' is in group 'a' twice"),
        ({"a": []}, None, "group 'a' is empty"),
        ({"a": ["x"]}, ["x", "y"], "agent 'y' is in no group"),
        ({"a": ["x", "z"]}, ["x"], "unknown agent 'z' in group 'a'"),
        ({"a": "x"}, None, "must map to a list"),
    ],
)
def test_bad_maps_name_the_culprit(mapping, agents, match):
    with pytest.raises(ValueError, match=match):
        GroupMap(mapping, agents)


def test_unknown_constructor_name():
    with pytest.raises(ValueError, match="unknown group map constructor 'bogus'"):
        GroupMap.build("bogus", ["a"])


@pytest.mark.parametrize(
    "name", ["next", "done", "terminated", "truncated", "reward", "state", "_reset", "action"]
)
def test_reserved_group_names_are_refused_with_the_list(name):
    with pytest.raises(ValueError, match=rf"group name {name!r} is reserved") as err:
        GroupMap({name: ["a_0"]})
    # the message lists every reserved name, so the user can pick another one
    for reserved in ("next", "done", "state", "_reset", "observation", "episode_reward"):
        assert repr(reserved) in str(err.value)


def test_reserved_names_from_agent_names_are_refused_by_every_constructor():
    for build in (GroupMap.by_prefix, GroupMap.one_per_agent):
        with pytest.raises(ValueError, match="'state' is reserved"):
            build(["state_0", "agent_0"] if build is GroupMap.by_prefix else ["state", "agent_0"])
    with pytest.raises(ValueError, match="'done' is reserved"):
        GroupMap.all_in_one(["a_0"], name="done")
    # the wrappers build their maps through GroupMap.build: the error says how to rename
    with pytest.raises(ValueError, match=r"'reward' is reserved.*group_map="):
        GroupMap.build(None, ["reward_0", "reward_1"])
    # names that merely contain a reserved word are fine
    assert list(GroupMap.by_prefix(["next_door_0", "stated_0"])) == ["next_door", "stated"]
