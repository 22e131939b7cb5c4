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
