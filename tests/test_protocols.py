"""Who sees whom for every protocol, and how --protocol finds presets and plug-ins."""

import textwrap

import pytest

from mad_eval.protocols import (
    PROTOCOLS,
    Protocol,
    ProtocolError,
    catalogue,
    check_protocol,
    parse_params,
    presets,
    resolve,
)
from mad_eval.protocols.centralized import Centralized
from mad_eval.protocols.decentralized import Decentralized
from mad_eval.protocols.heterogeneous import Heterogeneous
from mad_eval.protocols.sparse import Sparse

SIZES = range(1, 8)


def table(protocol: Protocol, n: int) -> list[list[int]]:
    check_protocol(protocol, n)
    return [protocol.sees(i, n) for i in range(n)]


@pytest.mark.parametrize("n", SIZES)
def test_decentralized_everyone_sees_everyone_in_one_order(n):
    assert table(Decentralized(), n) == [list(range(n))] * n
    assert Decentralized().voters(n) == list(range(n))


@pytest.mark.parametrize("n", SIZES)
def test_sparse_ring_sees_itself_and_both_neighbours(n):
    if n < 3:
        with pytest.raises(ProtocolError, match=f"degree 2 needs at least 3 agents, got {n}"):
            check_protocol(Sparse(), n)
        return
    for i, seen in enumerate(table(Sparse(), n)):
        assert seen == sorted({(i - 1) % n, i, (i + 1) % n})


def test_sparse_ring_by_hand():
    assert table(Sparse(), 5) == [[0, 1, 4], [0, 1, 2], [1, 2, 3], [2, 3, 4], [0, 3, 4]]
    assert table(Sparse(degree=4), 7)[0] == [0, 1, 2, 5, 6]
    assert table(Sparse(degree=0), 3) == [[0], [1], [2]]  # self-reflection
    assert table(Sparse(degree=1), 2) == [[0, 1], [0, 1]]
    assert table(Sparse(degree=1), 4) == [[0, 1], [1, 2], [2, 3], [0, 3]]  # i+1 only


def test_sparse_ring_order_reads_left_before_right_then_itself():
    """Debate-or-Vote's order (agents i-1, i+1, then the agent's own reply), kept as given;
    the default stays agent order, and the setting is recorded only when given, so a run
    made before it resumes with the same parameters."""
    assert table(Sparse(order="ring"), 5) == [[4, 1, 0], [0, 2, 1], [1, 3, 2], [2, 4, 3], [3, 0, 4]]
    assert table(Sparse(degree=4, order="ring"), 7)[0] == [6, 1, 5, 2, 0]
    assert table(Sparse(graph=[[2, 1], [0], [1, 0]], order="ring"), 3)[0] == [2, 1, 0]
    assert Sparse().params() == {"degree": 2}
    assert resolve("sparse:order=ring").protocol.params() == {"degree": 2, "order": "ring"}
    with pytest.raises(ProtocolError, match="order must be agent or ring"):
        Sparse(order="left")


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("degree", [0, 1, 2, 3, 4, 6])
def test_sparse_degree_is_the_number_of_neighbours(n, degree):
    if degree > n - 1:
        with pytest.raises(ProtocolError, match=f"needs at least {degree + 1} agents"):
            check_protocol(Sparse(degree=degree), n)
        return
    for i, seen in enumerate(table(Sparse(degree=degree), n)):
        assert i in seen and len(seen) == degree + 1
    if degree % 2 == 0:  # an even ring is symmetric: i reads j exactly when j reads i
        rows = table(Sparse(degree=degree), n)
        assert all((i in rows[j]) == (j in rows[i]) for i in range(n) for j in range(n))


def test_sparse_explicit_graph():
    graph = [[1], [0, 2], [1]]
    assert table(Sparse(graph=graph), 3) == [[0, 1], [0, 1, 2], [1, 2]]
    with pytest.raises(ProtocolError, match="lists neighbours for 3 agents, but the run has 4"):
        check_protocol(Sparse(graph=graph), 4)
    with pytest.raises(ProtocolError, match=r"graph\[1\] names 5"):
        check_protocol(Sparse(graph=[[1], [5], [0]]), 3)
    with pytest.raises(ProtocolError, match="list of neighbour lists"):
        Sparse(graph=[1, 2])


@pytest.mark.parametrize("n", SIZES)
def test_centralized_hub_sees_all_others_see_hub_and_themselves(n):
    if n < 2:
        with pytest.raises(ProtocolError, match="at least 2 agents"):
            check_protocol(Centralized(), n)
        return
    rows = table(Centralized(), n)
    assert rows[0] == list(range(n))
    assert all(rows[i] == [0, i] for i in range(1, n))
    assert Centralized().voters(n) == list(range(n))  # the vote is over all agents


def test_centralized_other_hub_comes_first_for_a_shared_prefix():
    assert table(Centralized(hub=2), 4) == [[2, 0], [2, 1], [2, 0, 1, 3], [2, 3]]
    with pytest.raises(ProtocolError, match=r"hub 4 is not an agent index 0\.\.3"):
        check_protocol(Centralized(hub=4), 4)


def test_heterogeneous_runs_on_any_topology():
    assert table(Heterogeneous(topology="sparse", degree=2), 5) == table(Sparse(), 5)
    assert Heterogeneous(topology="centralized", hub=1).hub == 1
    with pytest.raises(ProtocolError, match="topology 'ring' is not one of"):
        Heterogeneous(topology="ring")


def test_every_builtin_class_has_a_preset_and_presets_resolve():
    names = presets()
    assert set(PROTOCOLS) <= set(names)
    for name in names:
        choice = resolve(name)
        assert isinstance(choice.protocol, Protocol)
        assert choice.source.endswith(f"{name}.toml")
    assert resolve("reflection").prompt_template == "reflection"
    assert resolve("reflection").protocol.params() == {"degree": 0}
    listed = {row[0]: row[1] for row in catalogue()}
    assert set(names) <= set(listed) and all(listed.values())


def test_parameters_on_the_command_line():
    assert resolve("sparse:degree=4").protocol.params() == {"degree": 4}
    assert resolve("centralized:hub=2").protocol.hub == 2
    assert resolve("sparse:graph=[[1],[0]]").protocol.params() == {"graph": [[1], [0]]}
    assert parse_params("a=1, b=true, c=x,y=[1, 2]", "") == {
        "a": 1,
        "b": True,
        "c": "x",
        "y": [1, 2],
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "ring",
            "unknown protocol 'ring'; available: centralized, centralized_hub, chateval, "
            "critique, decentralized",
        ),
        ("decentralised", r"unknown protocol 'decentralised' \(did you mean 'decentralized'\?\);"),
        ("sparse:degre=4", "class 'sparse' has no parameter 'degre'; it accepts: degree, graph"),
        ("decentralized:hub=1", "has no parameter 'hub'; it accepts: no parameters"),
        ("heterogeneous:hub=1", "the decentralized topology cannot take {'hub': 1}"),
        ("sparse:4", "write key=value"),
        ("sparse:degree=-1", "degree must be a whole number >= 0"),
        ("nosuchmodule.x:Thing", "cannot import module 'nosuchmodule.x'"),
        ("mad_eval.debate.prompts:Nothing", "has no attribute 'Nothing'"),
        ("mad_eval.debate.prompts:Messages", "is not a protocol class"),
        ("mad_eval.protocols.base:Protocol", "does not implement sees"),
    ],
)
def test_bad_protocols_get_one_clear_sentence(text, message):
    with pytest.raises(ProtocolError, match=message):
        resolve(text)


PLUGIN = """
from mad_eval.protocols import Protocol

class Star(Protocol):
    name = "star"
    description = "everyone reads agent 1 only"

    def __init__(self, centre=1):
        self.centre = centre

    def sees(self, agent, n_agents):
        return [self.centre]

class Broken(Star):
    name = "broken"

    def sees(self, agent, n_agents):
        return [n_agents]

class Nameless(Protocol):
    def sees(self, agent, n_agents):
        return []
"""


def test_a_plugin_loads_by_import_path(tmp_path, monkeypatch):
    (tmp_path / "my_protocols.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    choice = resolve("my_protocols:Star")
    assert choice.cls == "my_protocols:Star"
    assert table(choice.protocol, 3) == [[1], [1], [1]]
    assert resolve("my_protocols:Star:centre=2").protocol.sees(0, 3) == [2]
    with pytest.raises(ProtocolError, match=r"broken: sees\(0\) returned 3, which is not an agent"):
        check_protocol(resolve("my_protocols:Broken").protocol, 3)
    with pytest.raises(ProtocolError, match="must set the class attribute `name`"):
        resolve("my_protocols:Nameless")


def test_a_plugin_loads_by_entry_point(tmp_path, installed):
    (tmp_path / "my_protocols.py").write_text(PLUGIN)
    dist = tmp_path / "my_protocols-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-protocols\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        textwrap.dedent(
            """\
            [mad_eval.protocols]
            star = my_protocols:Star
            """
        )
    )
    installed(tmp_path)
    choice = resolve("star:centre=0")
    assert choice.source == "entry point star"
    assert choice.protocol.sees(2, 3) == [0]
    assert ("star", "everyone reads agent 1 only", "entry point my_protocols:Star") in catalogue()
