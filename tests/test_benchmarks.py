"""Tests for benchmark specs and rows: shared local data, hub reading (faked), arith, errors."""

import ast
import hashlib
import json
import re
import socket
import subprocess
import sys
from fractions import Fraction
from operator import add, mul, sub, truediv
from pathlib import Path

import pytest
from cli_helpers import mad_eval, no_hub
from factories import write_jsonl

from mad_eval.data import arith
from mad_eval.data import hub as online
from mad_eval.data.arith import arith_questions
from mad_eval.data.benchmarks import (
    BenchmarkError,
    list_specs,
    load_questions,
    load_spec,
    spec_dirs,
)
from mad_eval.grading.kinds import KINDS, Kind, RowReader, after_instruction
from mad_eval.settings.config import RunConfig

MATH_COUNTS = {"math500": 500, "amc23": 40, "aime24": 30, "aime25": 30}


@pytest.fixture(autouse=True)
def _no_env_data(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test says where data comes from; a developer's MAD_EVAL_DATA must not leak in."""
    monkeypatch.delenv("MAD_EVAL_DATA", raising=False)


def _fake_hub(monkeypatch: pytest.MonkeyPatch, files: dict[str, Path]) -> list[dict]:
    """Replace hf_hub_download with a lookup in `files`; returns the calls it saw."""
    import huggingface_hub

    calls: list[dict] = []

    def download(repo_id: str, filename: str, **kwargs: object) -> str:
        calls.append({"repo_id": repo_id, "filename": filename, **kwargs})
        return str(files[filename])

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    monkeypatch.setattr(online, "hub_reachable", lambda: True)
    return calls


def _hub_spec(folder: Path, file: str, **fields: str) -> Path:
    lines = [f'{k} = "{v}"' for k, v in fields.items()]
    head = ['description = "fake hub set"', 'kind = "math"', "max_tokens = 64", "[hub]"]
    text = "\n".join([*head, 'repo = "someone/fake"', f'file = "{file}"', *lines])
    path = folder / "fakehub.toml"
    path.write_text(text + "\n", encoding="utf-8")
    return path


# ---- project specs and the shared local data ---------------------------------------------------


def test_project_specs_are_listed_and_valid() -> None:
    specs = {spec.name: spec for spec in list_specs()}
    assert set(MATH_COUNTS) | {"arith"} <= set(specs)
    for name in MATH_COUNTS:
        spec = specs[name]
        assert spec.kind == "math" and spec.max_tokens > 0 and "\n" not in spec.description
        assert spec.hub and spec.hub["file"].endswith((".jsonl", ".parquet"))
        assert spec.local == {
            "file": f"{name}.jsonl",
            "id": "id",
            "question": "problem",
            "answer": "answer",
        }
    assert specs["arith"].builtin == {"generator": "arith", "size": 100, "seed": 0}
    assert specs["arith"].hub is None and specs["arith"].local is None


@pytest.mark.parametrize("name", sorted(MATH_COUNTS))
def test_math_specs_load_from_shared_data(name: str, shared_data: Path) -> None:
    spec, questions = load_questions(name, data_dir=shared_data)
    assert spec.name == name
    assert len(questions) == MATH_COUNTS[name]
    assert [q.id for q in questions] == [f"{name}-{i}" for i in range(MATH_COUNTS[name])]
    assert all(q.text.strip() and q.gold.strip() for q in questions)
    assert "problem" not in questions[0].meta and "answer" not in questions[0].meta


def test_spot_checked_golds(shared_data: Path) -> None:
    golds = {
        name: {q.id: q.gold for q in load_questions(name, shared_data)[1]} for name in MATH_COUNTS
    }
    assert golds["aime24"]["aime24-7"] == "025"  # zero padding survives
    assert golds["aime24"]["aime24-0"] == "204"
    assert golds["aime25"]["aime25-0"] == "70"
    assert golds["amc23"]["amc23-0"] == "27"
    assert golds["amc23"]["amc23-15"] == "-1"
    assert golds["math500"]["math500-0"] == r"\left( 3, \frac{\pi}{2} \right)"


def test_env_var_selects_local_data(shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAD_EVAL_DATA", str(shared_data))
    _, questions = load_questions("aime25", limit=3)
    assert [q.id for q in questions] == ["aime25-0", "aime25-1", "aime25-2"]
    assert questions[0].meta["contest"] == "AIME 2025 I"


def test_missing_local_file_names_file_and_folder(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkError, match=r"'math500\.jsonl'.*is not in") as info:
        load_questions("math500", data_dir=tmp_path)
    assert str(tmp_path) in str(info.value)


# ---- limit -------------------------------------------------------------------------------------


def test_limit_takes_first_rows_in_file_order(shared_data: Path) -> None:
    _, everything = load_questions("amc23", shared_data)
    _, first = load_questions("amc23", shared_data, limit=5)
    assert first == everything[:5]


@pytest.mark.parametrize("limit", [0, -3])
def test_limit_below_one_is_an_error(limit: int) -> None:
    with pytest.raises(BenchmarkError, match="limit must be a positive integer"):
        load_questions("arith", limit=limit)


# ---- arith -------------------------------------------------------------------------------------


_OPERATORS = {ast.Add: add, ast.Sub: sub, ast.Mult: mul, ast.Div: truediv}


def _evaluate(expression: str) -> int:
    """The expression's exact value, read as a syntax tree of whole numbers and + - * /
    (never eval): a division that leaves a fraction fails the assertion."""

    def value(node: ast.expr) -> Fraction:
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.left), value(node.right))
        assert isinstance(node, ast.Constant) and type(node.value) is int, ast.dump(node)
        return Fraction(node.value)

    exact = value(ast.parse(expression, mode="eval").body)
    assert exact.denominator == 1, expression
    return int(exact)


def test_arith_answers_are_right_and_well_formed() -> None:
    spec, questions = load_questions("arith")
    assert spec.name == "arith" and spec.max_tokens == 512
    assert [q.id for q in questions] == [f"arith-{i}" for i in range(100)]
    for q in questions:
        expression = q.meta["expression"]
        assert expression in q.text
        assert re.fullmatch(r"-?\d+", q.gold)
        assert _evaluate(expression) == int(q.gold), q
    assert len({q.text for q in questions}) > 95  # varied
    assert {"/", "*", "("} <= set("".join(q.text for q in questions))


@pytest.mark.slow
def test_arith_is_deterministic_across_processes() -> None:
    code = (
        "from mad_eval.data.benchmarks import load_questions;"
        "print([(q.text, q.gold) for q in load_questions('arith')[1]])"
    )
    root = Path(__file__).resolve().parents[1]
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "123", "PATH": ""},
        cwd=root,
    )
    here = [(q.text, q.gold) for q in load_questions("arith")[1]]
    assert run.stdout.strip() == repr(here)


def test_arith_pinned_first_question() -> None:
    """Changing the generator changes every stored run's questions; this makes it deliberate."""
    first = arith_questions(3, seed=0)
    assert [(q.text, q.gold) for q in first][:2] == [
        ("Evaluate 16 / 8 - 112 / 8 + 77 / 7.", "-1"),
        ("Evaluate 11 * 4 + (19 - 20) * 4.", "40"),
    ]
    assert arith_questions(3, seed=1) != first


def test_arith_without_parameters_is_todays_set() -> None:
    """Stored runs, tests and conformance data hold these questions: ids, texts, golds and
    metadata, pinned from the generator as it was before arith took parameters."""
    questions = load_questions("arith")[1]
    picked = {q.id: (q.text, q.gold, q.meta) for q in questions if q.id in PINNED}
    assert picked == {
        qid: (text, gold, {"expression": e}) for qid, (text, gold, e) in PINNED.items()
    }
    rows = [[q.id, q.text, q.gold, q.meta, q.kind, q.answer] for q in questions]
    digest = hashlib.sha256(json.dumps(rows).encode()).hexdigest()
    assert digest == "841b4ca8bc9d5660287788eb2bdbb9b4cad48592837fc122d1276f9b3ce13043"
    assert questions == arith_questions(100)


PINNED = {  # id: (text, gold, the expression its meta holds)
    "arith-0": ("Evaluate 16 / 8 - 112 / 8 + 77 / 7.", "-1", "16 / 8 - 112 / 8 + 77 / 7"),
    "arith-1": ("Evaluate 11 * 4 + (19 - 20) * 4.", "40", "11 * 4 + (19 - 20) * 4"),
    "arith-2": (
        "What is the value of 89 - 21 / 3 - (21 - 7) * 9?",
        "-44",
        "89 - 21 / 3 - (21 - 7) * 9",
    ),
    "arith-37": ("Compute (3 - 2) * 9 + 36 / 3.", "21", "(3 - 2) * 9 + 36 / 3"),
    "arith-99": (
        "Compute (22 + 5) * 9 - 68 + 12 - 77 / 7.",
        "176",
        "(22 + 5) * 9 - 68 + 12 - 77 / 7",
    ),
}


def _terms(expression: str) -> int:
    """How many terms the expression adds or subtracts (brackets hold one term)."""
    node = ast.parse(expression, mode="eval").body
    count = 1
    while isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
        node, count = node.left, count + 1
    return count


def _numbers(expression: str) -> list[int]:
    tree = ast.parse(expression, mode="eval")
    return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)]


def _arith(params: str) -> list:
    return load_questions(f"arith:{params}" if params else "arith")[1]


@pytest.mark.parametrize(
    "params",
    ["terms=1", "terms=2,digits=1", "terms=6,digits=2", "terms=1-3,ops=sub.div", "ops=add.mul"],
)
def test_arith_golds_are_the_exact_value_of_the_expression(params: str) -> None:
    questions = _arith(params)
    assert len(questions) == 100 and len({q.text for q in questions}) > 50
    for q in questions:
        expression = q.meta["expression"]
        assert expression in q.text and re.fullmatch(r"-?\d+", q.gold)
        assert _evaluate(expression) == int(q.gold), q


@pytest.mark.parametrize("terms", [1, 2, 6])
def test_arith_terms_is_how_many_terms_each_question_has(terms: int) -> None:
    assert {_terms(q.meta["expression"]) for q in _arith(f"terms={terms}")} == {terms}
    assert {_terms(q.meta["expression"]) for q in _arith("terms=2-3")} == {2, 3}
    assert {_terms(q.meta["expression"]) for q in load_questions("arith")[1]} == {2, 3, 4}


@pytest.mark.parametrize("digits", [1, 2])
def test_arith_digits_caps_every_number(digits: int) -> None:
    numbers = [n for q in _arith(f"digits={digits}") for n in _numbers(q.meta["expression"])]
    assert 10**digits // 2 < max(numbers) < 10**digits  # under the cap, and near it
    assert max(n for q in load_questions("arith")[1] for n in _numbers(q.meta["expression"])) > 99


def test_arith_ops_are_the_only_operators() -> None:
    def operators(params: str) -> set[str]:
        return {c for q in _arith(params) for c in q.meta["expression"] if c in "+-*/()"}

    assert operators("terms=2,digits=1,ops=add.sub") == {"+", "-"}
    assert operators("ops=add") == {"+"}
    assert operators("terms=3,ops=sub.div") == {"-", "/"}
    assert operators("terms=1,ops=mul") == {"*"}
    assert operators("ops=add.mul") == {"+", "*", "(", ")"}  # (a + b) * c needs add and mul
    assert operators("") == set("+-*/()")  # every one, by default


def test_arith_at_the_default_level_asks_the_default_questions_under_its_own_name() -> None:
    """Giving every default by hand asks today's questions, named as the setting was given."""
    spelled = _arith("ops=div.mul.sub.add,terms=2-4,digits=3")
    assert [(q.text, q.gold) for q in spelled] == [(q.text, q.gold) for q in _arith("")]
    assert spelled[0].id == "arith_terms_2-4_digits_3_ops_add.sub.mul.div-0"


def test_arith_settings_are_pinned_too() -> None:
    """Runs will hold these as well: a change to how a setting draws must be deliberate."""
    assert [(q.text, q.gold) for q in _arith("terms=2,digits=1,ops=add.sub")[:2]] == [
        ("Compute 8 - 9.", "-1"),
        ("What is the value of 7 + 6?", "13"),
    ]
    assert [(q.text, q.gold) for q in _arith("terms=2,digits=1")[:2]] == [
        ("Compute 6 / 3 - 9 / 3.", "-1"),
        ("Compute 4 * 6 + 6.", "30"),
    ]
    assert [(q.text, q.gold) for q in _arith("terms=1-3,digits=2,ops=sub.mul")[:2]] == [
        ("Evaluate 15 * 2 - (17 - 13) * 6.", "6"),
        ("Compute 66.", "66"),
    ]


def test_arith_settings_have_one_name_each_and_no_name_is_shared() -> None:
    same = load_spec("arith:terms=2,digits=1"), load_spec("arith:digits=1,terms=2-2")
    assert {spec.name for spec in same} == {"arith_terms_2_digits_1"}
    assert same[0].title == "Arith (terms=2, digits=1)"  # tables tell it from plain arith
    assert _arith("digits=1,terms=2")[0].id == "arith_terms_2_digits_1-0"
    settings = ["terms=2", "digits=2", "terms=1,digits=2", "terms=2,digits=1", "ops=add.sub"]
    specs = [load_spec(f"arith:{given}") for given in settings]
    assert len({spec.name for spec in specs}) == len({spec.title for spec in specs}) == 5
    assert all(re.fullmatch(r"arith(_[a-z]+_[0-9a-z.-]+)+", spec.name) for spec in specs)
    assert load_spec("arith").name == "arith" and load_spec("arith").title == "Arith"
    # The run's default folder spells the setting as typed, in a folder-safe way.
    folder = RunConfig(benchmark="arith:digits=1,terms=2").default_out().name
    assert folder.startswith("arith_digits_1_terms_2-") and "/" not in folder


TERMS = "terms takes a whole number from 1 to 6, or a range of them such as 2-4"
DIGITS = "digits takes a whole number from 1 to 3"
OPS = "ops takes some of add, sub, mul and div joined by dots, each once (e.g. add.sub)"
PARAMETERS = "its parameters: terms=VALUE, digits=VALUE, ops=VALUE"
REFUSED = {  # given: the sentence refusing it, after "benchmark parameter 'GIVEN' is not ..."
    "terms=9": f"accepted by arith: {TERMS}",
    "terms=0": f"accepted by arith: {TERMS}",
    "terms=4-2": f"accepted by arith: {TERMS}",
    "digits=0": f"accepted by arith: {DIGITS}",
    "digits=4": f"accepted by arith: {DIGITS}",
    "digits=\u0663": f"accepted by arith: {DIGITS}",  # an Arabic-Indic 3, which int() reads
    "ops=+-": f"accepted by arith: {OPS}",
    "ops=add.pow": f"accepted by arith: {OPS}",
    "ops=add.add": f"accepted by arith: {OPS}",
    "ops=": f"accepted by arith: {OPS}",
    "colour=red": f"accepted by arith; {PARAMETERS} (values: letters, digits, _ . -)",
    "2": f"accepted by arith; {PARAMETERS} (values: letters, digits, _ . -)",
}
ALSO_REFUSED = {
    "terms=2,terms=3": "benchmark parameter 'terms' is given twice in 'terms=2,terms=3'",
    "ops=mul": "benchmark parameters 'terms=2-4' and 'ops=mul' do not fit arith: more than one "
    "term needs add or sub in ops to join them (give terms=1, or put add or sub in ops)",
}


@pytest.mark.parametrize("given", [*REFUSED, *ALSO_REFUSED])
def test_a_bad_arith_parameter_is_one_sentence(given: str) -> None:
    with pytest.raises(BenchmarkError) as info:
        load_questions(f"arith:{given}")
    if given in REFUSED:
        assert str(info.value) == f"benchmark parameter '{given}' is not {REFUSED[given]}"
    else:
        assert str(info.value) == ALSO_REFUSED[given]


def test_a_spec_of_the_arith_generator_has_its_parameters_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = 'description = "Easy: sums"\nkind = "math"\nmax_tokens = 32\n'
    table = '[builtin]\ngenerator = "arith"\nsize = 4\n'
    (tmp_path / "easy.toml").write_text(head + table + '[params]\nterms = "2"\ndigits = "1"\n')
    (tmp_path / "odd.toml").write_text(head + table + '[params]\nterms = "7"\n')
    (tmp_path / "shade.toml").write_text(head + table + '[params]\ncolour = "red"\n')
    spec, easy = load_questions(tmp_path / "easy.toml")
    assert spec.name == "easy" and spec.params == {"terms": "2", "digits": "1"}
    assert easy == arith_questions(4, 0, "easy", arith.difficulty({"terms": "2", "digits": "1"}))
    assert {_terms(q.meta["expression"]) for q in easy} == {2}
    with pytest.raises(BenchmarkError, match=r"^benchmark parameter 'terms=7' .* by odd: terms"):
        load_questions(tmp_path / "odd.toml")
    with pytest.raises(BenchmarkError, match=r"^benchmark shade takes no parameter 'colour'; "):
        load_questions(tmp_path / "shade.toml")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "easy.toml").write_text((tmp_path / "easy.toml").read_text())
    assert load_spec("easy:digits=2").name == "easy_digits_2"


# ---- any .jsonl file ---------------------------------------------------------------------------


def test_jsonl_path_with_problem_field_and_no_ids(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "mine.jsonl",
        [
            {"problem": "1+1?", "answer": 2, "source": "x"},
            {"problem": "2+2?", "answer": "4"},
        ],
    )
    spec, questions = load_questions(str(path))
    assert spec.name == "mine" and spec.kind == "math" and spec.path == path
    assert [(q.id, q.text, q.gold) for q in questions] == [
        ("mine-0", "1+1?", "2"),
        ("mine-1", "2+2?", "4"),
    ]
    assert questions[0].meta == {"source": "x"}


def test_jsonl_path_with_question_field_and_ids(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "q.jsonl", [{"id": "a", "question": "Q?", "answer": "B"}])
    _, questions = load_questions(str(path))
    assert [(q.id, q.text, q.gold) for q in questions] == [("a", "Q?", "B")]


def test_missing_jsonl_path() -> None:
    with pytest.raises(BenchmarkError, match="does not exist"):
        load_questions("no/such/file.jsonl")


# ---- malformed rows ----------------------------------------------------------------------------


def _bad_file(tmp_path: Path, line7: str) -> Path:
    good = [json.dumps({"id": f"m-{i}", "problem": "p", "answer": "1"}) for i in range(6)]
    path = tmp_path / "math500.jsonl"
    path.write_text("\n".join([*good, line7]) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("line7", "message"),
    [
        ('{"id": "m-6", "problem": "p"}', "math500.jsonl line 7: missing field 'answer'"),
        ('{"id": "m-6", "problem": "p", "answer": " "}', "math500.jsonl line 7: field 'answer'"),
        ('{"id": "m-6", "problem": "p", "answer": null}', "math500.jsonl line 7: field 'answer'"),
        ('{"id": "m-6", "answer": "1"}', "math500.jsonl line 7: missing field 'problem'"),
        ('{"id": "m-6", "problem": "", "answer": "1"}', "math500.jsonl line 7: field 'problem'"),
        ('{"problem": "p", "answer": "1"}', "math500.jsonl line 7: missing field 'id'"),
        (
            '{"id": "m-2", "problem": "p", "answer": "1"}',
            "math500.jsonl line 7: duplicate id 'm-2'",
        ),
        ('{"id": "m-6", "problem": "p", "answer": 1', "math500.jsonl line 7: invalid JSON"),
        ('["not", "an", "object"]', "math500.jsonl line 7: expected a JSON object"),
    ],
)
def test_malformed_rows_name_file_line_and_field(tmp_path: Path, line7: str, message: str) -> None:
    _bad_file(tmp_path, line7)
    with pytest.raises(BenchmarkError) as info:
        load_questions("math500", data_dir=tmp_path)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_blank_lines_keep_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "gaps.jsonl"
    path.write_text('{"question": "a", "answer": "1"}\n\n{"question": "b"}\n', encoding="utf-8")
    with pytest.raises(BenchmarkError, match=r"^gaps\.jsonl line 3: missing field 'answer'"):
        load_questions(str(path))


def test_empty_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(BenchmarkError, match="has no rows"):
        load_questions(str(tmp_path / "empty.jsonl"))


# ---- names and spec validation -----------------------------------------------------------------


def test_unknown_benchmark_lists_known_names() -> None:
    with pytest.raises(BenchmarkError) as info:
        load_questions("foo")
    message = str(info.value)
    assert message.startswith("unknown benchmark 'foo'; known: ")
    assert message.endswith("; or give a path to a .jsonl file")
    for name in [*MATH_COUNTS, "arith"]:
        assert name in message
    with pytest.raises(
        BenchmarkError, match=r"unknown benchmark 'arithh' \(did you mean 'arith'\?\)"
    ):
        load_questions("arithh")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('description = "d"\nkind = "math"\nmax_tokens = 8\n', r"needs \[hub\], \[local\]"),
        (
            'description = "d"\nkind = "mcq"\nmax_tokens = 8\n[local]\nfile = "x.jsonl"\n'
            'question = "q"\nanswer = "a"\n',
            "kind 'mcq' is not one of: math",
        ),
        ('description = "d"\nkind = "math"\nmax_tokens = 0\n', "max_tokens must be a positive"),
        ('description = "d"\nkind = "math"\nmax_tokens = 8\nmax_token = 9\n', "unknown key"),
        (
            'description = "d"\nkind = "math"\nmax_tokens = 8\n[hub]\nrepo = "r"\n'
            'file = "x.csv"\nquestion = "q"\nanswer = "a"\n',
            r"\[hub\] file must end in",
        ),
        (
            'description = "d"\nkind = "math"\nmax_tokens = 8\n[local]\nfile = "x.jsonl"\n'
            'answer = "a"\n',
            r"\[local\] needs a non-empty text value for 'question'",
        ),
        (
            'description = "d"\nkind = "math"\nmax_tokens = 8\n[builtin]\ngenerator = "dice"\n'
            "size = 3\n",
            "generator 'dice' is not one of: arith",
        ),
        ('name = "other"\ndescription = "d"\nkind = "math"\nmax_tokens = 8\n', "must match"),
        ("description = \n", "cannot read benchmark spec"),
    ],
)
def test_bad_spec_is_one_clear_sentence(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(BenchmarkError, match=message):
        load_questions(str(path))


def test_toml_path_with_local_file_next_to_it(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "rows.jsonl", [{"n": "x1", "q": "What?", "a": 7.5}])
    spec_text = 'description = "d"\nkind = "math"\nmax_tokens = 99\n[local]\nfile = "rows.jsonl"\n'
    (tmp_path / "mine.toml").write_text(spec_text + 'id = "n"\nquestion = "q"\nanswer = "a"\n')
    spec, questions = load_questions(str(tmp_path / "mine.toml"))
    assert spec.max_tokens == 99
    assert [(q.id, q.text, q.gold) for q in questions] == [("x1", "What?", "7.5")]


def test_a_new_kind_is_its_class_and_its_registry_entry(tmp_path: Path, registered) -> None:
    """benchmarks.py names no kind: a kind's fields and question() are all a spec needs."""

    class Backwards(Kind):
        fields = ("word", "times")
        optional = ("hint",)

        def question(self, row: RowReader) -> tuple[str, str, dict]:
            word, times = row.text("word", number_ok=False), row.text("times")
            if not times.isdigit():
                row.fail(f"times {times!r} is not a whole number")
            hint = f" ({row.text('hint')})" if row.fields.get("hint") else ""
            text = after_instruction(row.instruction, f"Spell {word} backwards {times}x{hint}.")
            return text, word[::-1], {"times": int(times), "seed": row.seed, "qid": row.qid}

    registered(KINDS, "backwards", Backwards("backwards", "the word spelled backwards"))
    rows = [{"w": "abc", "n": 2, "h": "easy", "src": "x"}, {"w": "de", "n": 1, "h": "short"}]
    write_jsonl(tmp_path / "words.jsonl", rows)
    head = 'description = "d"\nkind = "backwards"\nmax_tokens = 9\ninstruction = "Do it."\n'
    table = '[local]\nfile = "words.jsonl"\nword = "w"\n'
    (tmp_path / "words.toml").write_text(head + "seed = 3\n" + table + 'times = "n"\nhint = "h"\n')
    spec, questions = load_questions(tmp_path / "words.toml")
    assert spec.kind == "backwards" and spec.answer == "boxed"
    assert [(q.id, q.text, q.gold, q.kind) for q in questions] == [
        ("words-0", "Do it.\n\nSpell abc backwards 2x (easy).", "cba", "backwards"),
        ("words-1", "Do it.\n\nSpell de backwards 1x (short).", "ed", "backwards"),
    ]
    assert questions[0].meta == {"src": "x", "times": 2, "seed": 3, "qid": "words-0"}
    # The kind's fields are required by the spec check, its optional ones checked when given.
    (tmp_path / "words.toml").write_text(head + table)
    with pytest.raises(BenchmarkError, match=r"words\.toml: \[local\] needs .* for 'times'"):
        load_questions(tmp_path / "words.toml")
    (tmp_path / "words.toml").write_text(head + table + 'times = "n"\nhint = ""\n')
    with pytest.raises(BenchmarkError, match="needs a non-empty text value for 'hint'"):
        load_questions(tmp_path / "words.toml")
    # A row the kind refuses, and a field the reader refuses, both name the file and line.
    (tmp_path / "words.toml").write_text(head + table + 'times = "n"\n')
    write_jsonl(tmp_path / "words.jsonl", [rows[0], {"w": "de", "n": "many"}])
    with pytest.raises(BenchmarkError, match=r"^words\.jsonl line 2: times 'many' is not a whole"):
        load_questions(tmp_path / "words.toml")
    write_jsonl(tmp_path / "words.jsonl", [{"w": 5, "n": 1}])
    with pytest.raises(BenchmarkError, match=r"^words\.jsonl line 1: field 'w' must be non-empty"):
        load_questions(tmp_path / "words.toml")


def test_a_user_spec_in_cwd_adds_a_name_but_never_replaces_a_project_spec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cloned repository's ./benchmarks/arith.toml does not change what `arith` means; it
    is read when named by its path, and a new name there is found by name."""
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "arith.toml").write_text(
        'description = "my arith"\nkind = "math"\nmax_tokens = 32\n'
        '[builtin]\ngenerator = "arith"\nsize = 5\nseed = 7\n'
    )
    (tmp_path / "benchmarks" / "extra.toml").write_text(
        'description = "extra"\nkind = "math"\nmax_tokens = 32\n'
        '[builtin]\ngenerator = "arith"\nsize = 2\n'
    )
    monkeypatch.chdir(tmp_path)
    dirs = spec_dirs()
    assert dirs[1].resolve() == (tmp_path / "benchmarks").resolve() and len(dirs) == 2
    assert load_spec("arith").description != "my arith"
    spec, questions = load_questions("benchmarks/arith.toml")
    assert spec.max_tokens == 32 and len(questions) == 5
    assert questions == arith_questions(5, seed=7)
    names = [spec.name for spec in list_specs()]
    assert names == sorted(names) and "extra" in names and "math500" in names
    assert [s.description for s in list_specs() if s.name == "arith"] != ["my arith"]
    _, extra = load_questions("extra")
    assert [q.id for q in extra] == ["extra-0", "extra-1"]


# ---- the hub path (faked: no network in tests) -------------------------------------------------


def test_hub_download_failure_says_how_to_work_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    def offline(*args: object, **kwargs: object) -> str:
        raise OSError("no network")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", offline)
    monkeypatch.setattr(online, "hub_reachable", lambda: True)
    with pytest.raises(BenchmarkError) as info:
        load_questions("math500")
    message = str(info.value)
    assert message.startswith("could not download test.jsonl from the Hugging Face hub")
    assert "HuggingFaceH4/MATH-500" in message
    # The library's callers name a folder by keyword: the advice says so, never --data-dir.
    assert "pass data_dir= a folder holding math500.jsonl or set MAD_EVAL_DATA" in message
    assert "--data-dir" not in message and "mad-eval data fetch math500 --to" in message


@pytest.mark.slow
def test_an_unreachable_hub_fails_in_one_sentence_within_seconds(tmp_path: Path) -> None:
    """No hub and nothing in the hub cache: one sentence, at once, instead of the client's
    own retries."""
    env = no_hub(tmp_path)
    result = mad_eval("run", "--benchmark", "gsm8k", "--limit", "1", cwd=tmp_path, env=env)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: could not download main/test-00000-of-00001.parquet from the Hugging Face hub "
        "dataset openai/gsm8k (the hub cannot be reached); pass --data-dir with a folder holding "
        "gsm8k.jsonl or set MAD_EVAL_DATA to one (`mad-eval data fetch gsm8k --to FOLDER` writes "
        "it from the hub, `mad-eval data check FOLDER` checks it)."
    )


def test_project_spec_asks_hub_for_pinned_dataset_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = write_jsonl(
        tmp_path / "test.jsonl",
        [
            {"problem": "P0", "answer": "1/2", "unique_id": "test/a/1.json", "level": 3},
            {"problem": "P1", "answer": "7", "unique_id": "test/b/2.json", "level": 1},
        ],
    )
    calls = _fake_hub(monkeypatch, {"test.jsonl": fake})
    spec, questions = load_questions("math500")
    assert calls == [
        {
            "repo_id": "HuggingFaceH4/MATH-500",
            "filename": "test.jsonl",
            "repo_type": "dataset",
            "revision": spec.hub["revision"],
        }
    ]
    assert [(q.id, q.text, q.gold) for q in questions] == [
        ("math500-0", "P0", "1/2"),
        ("math500-1", "P1", "7"),
    ]
    assert questions[1].meta == {"unique_id": "test/b/2.json", "level": 1}


def test_hub_jsonl_numbers_and_ids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = write_jsonl(
        tmp_path / "test.jsonl",
        [
            {"id": 0, "question": "a", "answer": 27.0},
            {"id": 1, "question": "b", "answer": -1.0},
            {"id": 2, "question": "c", "answer": 0.5},
            {"id": 3, "question": "d", "answer": 12},
        ],
    )
    _fake_hub(monkeypatch, {"test.jsonl": fake})
    spec_path = _hub_spec(tmp_path, "test.jsonl", id="id", question="question", answer="answer")
    _, questions = load_questions(str(spec_path))
    assert [(q.id, q.gold) for q in questions] == [
        ("0", "27"),
        ("1", "-1"),
        ("2", "0.5"),
        ("3", "12"),
    ]


def test_hub_errors_name_the_repo_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = write_jsonl(tmp_path / "test.jsonl", [{"question": "a"}])
    _fake_hub(monkeypatch, {"test.jsonl": fake})
    spec_path = _hub_spec(tmp_path, "test.jsonl", question="question", answer="answer")
    with pytest.raises(BenchmarkError, match=r"^someone/fake/test\.jsonl line 1: missing field"):
        load_questions(str(spec_path))


def test_hub_parquet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pandas as pd

    fake = tmp_path / "train.parquet"
    pd.DataFrame({"question": ["a", "b"], "answer": [27.0, 3.0], "url": ["u", "v"]}).to_parquet(
        fake
    )
    _fake_hub(monkeypatch, {"data/train.parquet": fake})
    spec_path = _hub_spec(tmp_path, "data/train.parquet", question="question", answer="answer")
    _, questions = load_questions(str(spec_path))
    assert [(q.id, q.text, q.gold, q.meta) for q in questions] == [
        ("fakehub-0", "a", "27", {"url": "u"}),
        ("fakehub-1", "b", "3", {"url": "v"}),
    ]


def test_data_dir_wins_over_hub(shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_hub(monkeypatch, {})
    load_questions("aime24", data_dir=shared_data, limit=1)
    assert calls == []


@pytest.mark.slow
def test_a_hub_tokenizer_is_not_waited_for_when_the_hub_cannot_be_reached(tmp_path: Path) -> None:
    """A hub id as the model name makes mad-eval look for its tokenizer; offline it falls
    back to estimates without the hub client's retries (which print "Retrying"), and the
    real problem (no server) is the one sentence. What is asked of the hub client is
    counted in-process below, not timed."""
    result = mad_eval(
        "run", "--model", "openai:Qwen/Qwen3-8B", "--base-url", "http://127.0.0.1:9/v1",
        "--limit", "1", cwd=tmp_path, env=no_hub(tmp_path),
    )  # fmt: skip
    assert result.returncode == 2
    assert "error: no OpenAI-compatible server answers at http://127.0.0.1:9/v1" in result.stderr
    assert "Retrying" not in result.stderr


def test_the_hub_probe_is_one_refused_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether the hub can be reached is one connection attempt, refused at once, never the
    hub client's retries."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", no_hub(tmp_path)["HF_ENDPOINT"])
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    for name in ("https", "http", "all"):
        monkeypatch.delenv(f"{name}_proxy", raising=False)
        monkeypatch.delenv(f"{name.upper()}_PROXY", raising=False)
    tries: list[tuple] = []
    connect = socket.create_connection
    monkeypatch.setattr(
        socket, "create_connection", lambda *a, **k: tries.append(a) or connect(*a, **k)
    )
    online.hub_reachable.cache_clear()
    try:
        assert online.hub_reachable() is False
        assert online.hub_reachable() is False  # asked once per process
    finally:
        online.hub_reachable.cache_clear()
    assert len(tries) == 1


@pytest.mark.slow
def test_an_unreachable_hub_tokenizer_is_looked_for_only_in_the_local_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Offline, a hub id as the model name is looked up in the local cache only (never the
    hub client's download and its retries) and prompt lengths fall back to estimates."""
    from transformers import AutoTokenizer

    from mad_eval.debate import context

    asked: list[dict] = []

    def from_pretrained(name: str, **kwargs: object) -> None:
        asked.append({"name": name, **kwargs})
        raise OSError(f"{name} is not in the local cache")

    monkeypatch.setattr(AutoTokenizer, "from_pretrained", from_pretrained)
    monkeypatch.setattr(online, "hub_reachable", lambda: False)
    context._tokenizer.cache_clear()
    context.load_counter.cache_clear()
    try:
        counter, warning = context.load_counter(None, "openai:Qwen/Qwen3-8B")
    finally:
        context._tokenizer.cache_clear()
        context.load_counter.cache_clear()
    assert asked == [{"name": "Qwen/Qwen3-8B", "local_files_only": True}]
    assert isinstance(counter, context.EstimateCounter)
    assert warning is not None and "no tokenizer found for model 'openai:Qwen/Qwen3-8B'" in warning
