"""TOML files from a cloned repository or someone's experiment are read within bounds: deep
nesting, bad TOML, wrong types, a huge file, a FIFO or a device is one sentence naming the
file (an experiment's dry run), or a row listed as unusable (`mad-eval benchmarks`,
`mad-eval protocols`), never a traceback or a hang."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from cli_helpers import mad_eval

from mad_eval.settings.tomlfile import MAX_BYTES, TomlFileError, read_toml

DEEP = 100_000
HOSTILE = {
    "deep_arrays": "x = " + "[" * DEEP + "]" * DEEP + "\n",
    "deep_tables": "x = " + "{a = " * DEEP + "1" + "}" * DEEP + "\n",
    "bad": "x = [\n",
    "latin": b'description = "\xff"\n',
    "huge": "# " + "x" * (MAX_BYTES + 1) + "\n",
}
SAYS = {
    "deep_arrays": "it nests arrays or tables too deeply to read",
    "deep_tables": "it nests arrays or tables too deeply to read",
    "bad": "it is not valid TOML (Invalid value",
    "latin": "it is not UTF-8 text",
    "huge": f"it holds over {MAX_BYTES:,} bytes",
    "fifo": "it is a FIFO or device, not a file",
    "zero": "it is a FIFO or device, not a file",
    "folder": "it is a folder, not a file",
}
# Well-formed TOML of the wrong shape, for each kind of file.
WRONG = {
    "benchmarks": {
        "kind_list": ('description = "d"\nkind = ["math"]\nmax_tokens = 8\n[builtin]\n'
                      'generator = "arith"\nsize = 2\n', "kind ['math'] is not one of"),
        "generator_table": ('description = "d"\nkind = "math"\nmax_tokens = 8\n[builtin]\n'
                            "generator = { a = 1 }\nsize = 2\n", "generator {'a': 1} is not one"),
        "params": ('base = "arith"\nparams = 3\n', "'params' must be a [params] table"),
    },
    "protocols": {
        "class_list": ('class = ["decentralized"]\n', "'class' must be text, not ['decentral"),
        "quote_number": ('class = "sparse"\nquote = 3\n', "'quote' must be text, not 3"),
        "params": ('class = "sparse"\nparams = 3\n', "'params' must be a table"),
    },
}  # fmt: skip


def plant(folder: Path) -> None:
    """Every hostile file, and a FIFO, /dev/zero and a folder under .toml names."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in HOSTILE.items():
        path = folder / f"{name}.toml"
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
    os.mkfifo(folder / "fifo.toml")  # reading it would wait for a writer forever
    (folder / "zero.toml").symlink_to("/dev/zero")
    (folder / "folder.toml").mkdir()


@pytest.mark.parametrize("name", [*HOSTILE, "fifo", "zero", "folder"])
def test_each_hostile_file_is_one_clause(tmp_path: Path, name: str) -> None:
    plant(tmp_path)
    with pytest.raises(TomlFileError) as error:
        read_toml(tmp_path / f"{name}.toml")
    assert str(error.value).startswith(SAYS[name])


@pytest.fixture
def hang_guard():
    """Fail a test that blocks (a FIFO read waits for a writer forever) instead of hanging;
    generous, since it only guards against a hang."""

    def hung(signum, frame):
        raise TimeoutError("hung reading a hostile file")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(120)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("name", ["deep_arrays", "deep_tables", "fifo", "huge"])
def test_an_experiments_dry_run_names_a_hostile_file_in_one_sentence(tmp_path, name, hang_guard):
    plant(tmp_path)
    result = mad_eval("experiment", "run", f"{name}.toml", "--dry-run", cwd=tmp_path)
    assert result.returncode == 2
    error = " ".join(result.stderr.split())
    assert error.startswith(f"error: {name}.toml cannot be an experiment file: {SAYS[name]}")
    assert error.endswith("; fix it.") and "Traceback" not in result.stderr


def catalogue(kind: str) -> dict[str, str]:
    """What `mad-eval KIND` lists, by name: each file's description or why it is unusable."""
    if kind == "benchmarks":
        from mad_eval.data.benchmarks import catalogue as benchmarks

        return {name: f"unusable: {found}" if isinstance(found, Exception) else found.description
                for name, _, found in benchmarks()}  # fmt: skip
    from mad_eval.protocols import catalogue as protocols

    return {name: description for name, description, _ in protocols()}


@pytest.mark.parametrize("kind", ["benchmarks", "protocols"])
def test_a_clones_hostile_files_are_listed_as_unusable(tmp_path, kind, hang_guard, monkeypatch):
    plant(tmp_path / kind)
    for name, (text, _) in WRONG[kind].items():
        (tmp_path / kind / f"{name}.toml").write_text(text)
    (tmp_path / kind / "markup.toml").write_text(
        'class = "decentralized"\ndescription = "[/bold] \\u001b[2J [link=http://x]y[/link]"\n'
        if kind == "protocols"
        else 'description = "[/bold] \\u001b[2J"\nkind = "math"\nmax_tokens = 8\n'
        '[builtin]\ngenerator = "arith"\nsize = 2\n'
    )
    monkeypatch.chdir(tmp_path)
    listed = catalogue(kind)
    for name in [*SAYS, *WRONG[kind]]:
        says = SAYS.get(name) or WRONG[kind][name][1]
        assert listed[name].startswith(("unusable: ", "unreadable: ")), listed[name]
        assert says in listed[name], (name, listed[name])
    assert "arith" in listed or "sparse" in listed  # the project's own are listed too

    result = mad_eval(kind, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    shown = " ".join(result.stdout.split())
    assert all(f"│ {name} " in shown for name in [*SAYS, *WRONG[kind], "markup"])
    # A description is shown as text: no markup error, no control code reaches the terminal.
    assert "[/bold] \ufffd[2J" in shown and "\x1b" not in result.stdout
