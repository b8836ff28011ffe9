"""Regenerate cases.jsonl and meta.json: DebateLLM's own outputs on seeded inputs.

Run by hand, never by CI, with a Python that has numpy, omegaconf and pyyaml (the modules
these calls use; the model clients DebateLLM imports are stubbed here, in this script only):

    python3 -m venv /tmp/dllm-venv && /tmp/dllm-venv/bin/pip install numpy omegaconf pyyaml
    /tmp/dllm-venv/bin/python conformance/debatellm/generate.py \\
        --repo PATH/TO/DebateLLM.git --commit 6af602b99e3e37d2eabfc62950b1bcf2df9ffa00

`--repo` is a git clone (bare or not) of github.com/instadeepai/DebateLLM; the commit's tree
is extracted to a temporary folder and imported from there. Nothing of the reference is
copied into this repository: the script calls its code and records what it returns.

Three sets of cases, one JSON object a line:
- medprompt: a choice question (our own words, in DebateLLM's "<stem>\\nA: ..." layout) and
  the letter each of 5 reasoning steps answers -> what `Medprompt.answer` does with them
  under `random.seed(case seed)`: each step's shuffled options, its `shuffle_answers`
  mapping, the letter mapped back, and the system's answer (`most_frequent`);
- vote: 3 to 7 answers (letters, "-1" for an unparsed one) -> `most_frequent`'s pick;
- er: a question, k reasoning replies and m aggregation replies -> every request
  `EnsembleRefinementDebate.answer` sends through its GPT agent (message roles and names,
  sampling temperature),
  each content with the question and the replies as placeholders and every fixed sentence of
  the reference as the placeholder of its hash (meta.json keeps the hashes), and its answer.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import random
import re
import subprocess
import sys
import tarfile
import tempfile
import types
from io import BytesIO
from pathlib import Path
from typing import Any, ClassVar

HERE = Path(__file__).resolve().parent
SEED = 45
LETTERS = "ABCDEFGHIJ"
WORDS = [
    "aspirin",
    "insulin",
    "fever",
    "rash",
    "cough",
    "nausea",
    "liver",
    "kidney",
    "heart",
    "lung",
    "biopsy",
    "culture",
    "scan",
    "antibiotic",
    "steroid",
    "infusion",
    "rest",
    "surgery",
    "referral",
    "observation",
    "vaccine",
    "diet",
    "sodium",
    "potassium",
    "anemia",
    "sepsis",
    "fracture",
    "migraine",
    "asthma",
    "ulcer",
]


# ---- loading the reference ----------------------------------------------------------------


def stub(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module
    return module


class Logged:
    """The stand-in for openai<1's ChatCompletion: records each request's messages and
    answers with the next scripted reply."""

    log: ClassVar[list[list[dict[str, str]]]] = []
    temperatures: ClassVar[list[float]] = []
    replies: ClassVar[list[str]] = []

    @staticmethod
    def create(model: str, messages: list[dict[str, str]], **kw: Any) -> dict[str, Any]:
        Logged.log.append([dict(m) for m in messages])
        Logged.temperatures.append(round(float(kw["temperature"]), 6))
        reply = Logged.replies.pop(0)
        usage = {"prompt_tokens": 1, "completion_tokens": 1}
        return {"usage": usage, "choices": [{"message": {"content": reply}}]}


def load_reference(repo: Path, commit: str, into: Path) -> types.SimpleNamespace:
    """DebateLLM's systems, GPT agent and prompt files at `commit`, its model clients
    (openai<1, google, vertexai, its gcloud helper) stubbed."""
    git_dir = repo / ".git" if (repo / ".git").is_dir() else repo
    archive = subprocess.run(
        ["git", f"--git-dir={git_dir}", "archive", commit, "debatellm", "experiments/conf"],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    error = type("StubError", (Exception,), {})
    google = stub("google")
    google.__path__ = []  # type: ignore[attr-defined]
    core = stub("google.api_core")
    core.exceptions = stub(  # type: ignore[attr-defined]
        "google.api_core.exceptions", InternalServerError=error, ResourceExhausted=error
    )
    google.api_core = core  # type: ignore[attr-defined]
    stub("google.oauth2")
    stub("google.oauth2.credentials", Credentials=object)
    stub("google.auth")
    stub("google.auth.transport")
    stub("google.auth.transport.requests", Request=object)
    stub("vertexai", init=lambda **k: None)
    stub("vertexai.preview")
    stub(
        "vertexai.preview.language_models",
        ChatModel=None,
        InputOutputTextPair=None,
        TextEmbeddingModel=None,
        TextGenerationModel=None,
    )
    errors = types.SimpleNamespace(
        RateLimitError=error,
        ServiceUnavailableError=error,
        APIError=error,
        Timeout=error,
        APIConnectionError=error,
        InvalidRequestError=error,
    )
    stub("openai", error=errors, ChatCompletion=Logged, api_key=None)
    stub("debatellm.utils.gcloud", load_gcloud_credentials=lambda: (None, {}))
    os.environ["OPENAI_API_KEY"] = "not-used"  # the agent asks for one; no request leaves
    sys.path.insert(0, str(into))
    import yaml
    from debatellm import systems  # type: ignore[import-not-found]
    from debatellm.agents import GPT  # type: ignore[import-not-found]
    from debatellm.utils.debate import most_frequent  # type: ignore[import-not-found]
    from omegaconf import OmegaConf

    conf = into / "experiments" / "conf" / "system"

    def prompt(name: str) -> Any:
        table = yaml.safe_load((conf / "agent_prompts" / f"{name}.yaml").read_text())
        return OmegaConf.create(table[name])

    def debate(name: str) -> dict[str, str]:
        return yaml.safe_load((conf / "debate_prompts" / f"{name}.yaml").read_text())

    return types.SimpleNamespace(
        systems=systems,
        GPT=GPT,
        most_frequent=most_frequent,
        prompt=prompt,
        debate=debate,
        OmegaConf=OmegaConf,
    )


# ---- inputs -------------------------------------------------------------------------------


def stem(rng: random.Random) -> str:
    words = rng.sample(WORDS, rng.randint(4, 9))
    return f"Case {rng.randint(1, 999)}: which is right for {' '.join(words)}?"


def options(rng: random.Random, dup: bool, broken: bool) -> list[str]:
    n = rng.randint(3, 7)
    texts = [" ".join(rng.sample(WORDS, rng.randint(1, 3))) for _ in range(n)]
    if dup:  # two options of the same text
        i, j = rng.sample(range(n), 2)
        texts[j] = texts[i]
    if broken:  # an option over two lines: DebateLLM's shuffle cannot read it
        texts[rng.randrange(n)] += "\nsee notes"
    return texts


def layout(question: str, texts: list[str]) -> str:
    """A question as DebateLLM's load_datasets lays it out."""
    return question + "\n" + "\n".join(f"{LETTERS[i]}: {t}" for i, t in enumerate(texts))


def letters(rng: random.Random, n_options: int, k: int) -> list[str]:
    """k answers: letters of the options (a few beyond them), some "-1" (unparsed)."""
    pool = list(LETTERS[:n_options])
    favourite = rng.choice(pool)
    found = []
    for _ in range(k):
        roll = rng.random()
        if roll < 0.1:
            found.append("-1")
        elif roll < 0.5:
            found.append(favourite)
        else:
            found.append(rng.choice(pool))
    return found


# ---- the sets -----------------------------------------------------------------------------


class ScriptedAgent:
    """Stands in for Medprompt's model agent: records the question each step is given and
    answers with the case's next letter (as its extractor would return it)."""

    def __init__(self, script: list[str]):
        self.script, self.asked = list(script), []

    def answer(self, question: str = "", **kw: Any) -> tuple[str, dict[str, Any]]:
        self.asked.append(question)
        letter = self.script.pop(0)
        return letter, {"response": f"reply {len(self.asked)}: {letter}"}


def medprompt_cases(ref: types.SimpleNamespace, rng: random.Random, count: int) -> list[dict]:
    cases = []
    for n in range(count):
        dup, broken = n % 10 == 3, n % 25 == 7
        texts = options(rng, dup, broken)
        question = stem(rng)
        script = letters(rng, len(texts), 5)
        agent = ScriptedAgent(script)
        system = ref.systems.Medprompt(
            agents=[agent], num_reasoning_steps=5, debate_prompts={"system": "-"}
        )
        seed = rng.randrange(2**31)
        random.seed(seed)
        with contextlib.redirect_stdout(io.StringIO()):  # it prints a shuffle it cannot do
            answer, info = system.answer(layout(question, texts))
        random.seed(seed)  # the same draws again: the mapping of each step
        steps = []
        for i, shown in enumerate(agent.asked):
            try:
                _, mapping = ref.systems.Medprompt.shuffle_answers(layout(question, texts))
            except Exception:
                mapping = None
            shuffled = shown.splitlines()[1:] if mapping is not None else None
            steps.append(
                {
                    "options": [line.split(": ", 1)[1] for line in shuffled] if shuffled else None,
                    "mapping": mapping,
                    "letter": script[i],
                    "mapped": info["agent_answers"]["Agent_0"][f"Reasoning_{i}"],
                }
            )
        cases.append(
            {
                "id": f"medprompt-{n:04d}",
                "set": "medprompt",
                "seed": seed,
                "question": question,
                "options": texts,
                "steps": steps,
                "answer": answer,
            }
        )
    return cases


def vote_cases(ref: types.SimpleNamespace, rng: random.Random, count: int) -> list[dict]:
    cases = []
    for n in range(count):
        found = letters(rng, rng.randint(2, 5), rng.randint(3, 7))
        if n % 4 == 0:  # a tie of two answers, in either order
            a, b = rng.sample("ABCDE", 2)
            found = [a, b, b, a] if n % 8 else [b, a, a, b, "C"]
        pick, count_ = ref.most_frequent(list(found))
        cases.append(
            {"id": f"vote-{n:04d}", "set": "vote", "answers": found, "pick": pick, "count": count_}
        )
    return cases


class Hider:
    """Every fixed sentence of the reference in a request, as the placeholder of its hash."""

    def __init__(self) -> None:
        self.sentences: dict[str, str] = {}  # placeholder -> sha256

    def hide(self, text: str, known: dict[str, str]) -> str:
        """`text` with each input in `known` (text -> placeholder) put back as its
        placeholder and every other run of text but its spacing as ⟨s:HASH12⟩."""
        spans = sorted(
            (m.start(), m.end(), mark)
            for value, mark in known.items()
            if value
            for m in re.finditer(re.escape(value), text)
        )
        out, at = [], 0
        for start, end, mark in spans:
            if start < at:
                continue
            out += [self._literal(text[at:start]), mark]
            at = end
        out.append(self._literal(text[at:]))
        return "".join(out)

    def _literal(self, text: str) -> str:
        core = text.strip()
        if not core:
            return text
        digest = hashlib.sha256(core.encode()).hexdigest()
        mark = f"⟨s:{digest[:12]}⟩"
        self.sentences[mark] = digest
        lead = text[: len(text) - len(text.lstrip())]
        tail = text[len(text.rstrip()) :]
        return f"{lead}{mark}{tail}"


def er_cases(
    ref: types.SimpleNamespace, rng: random.Random, count: int, hider: Hider
) -> list[dict]:
    cases = []
    for n in range(count):
        k = rng.randint(1, 5)
        m = k if n % 2 else rng.randint(1, 5)  # half as mad-eval runs it, half not
        texts = options(rng, False, False)
        question = layout(stem(rng), texts)
        answers = letters(rng, len(texts), k + m)
        replies = [
            f"Working {i}: {' '.join(rng.sample(WORDS, 3))}. {a}" for i, a in enumerate(answers)
        ]
        sampling = ref.OmegaConf.create({"max_tokens": 10, "temperature": 0.7, "top_p": 0.5})
        agent = ref.GPT(
            prompt=ref.prompt("er_simple"),
            engine="gpt-4",
            few_shot_examples=False,
            cost_per_prompt_token=0.03,
            cost_per_response_token=0.06,
            sampling=sampling,
            prompt_from_history="assistant_list",
        )
        system = ref.systems.EnsembleRefinementDebate(
            agents=[agent],
            debate_prompts=ref.debate("er_debate"),
            num_reasoning_steps=k,
            num_aggregation_steps=m,
        )
        Logged.log.clear()
        Logged.temperatures.clear()
        Logged.replies[:] = list(replies)
        answer, info = system.answer(question)
        known = {question: "⟨question⟩", **{r: f"⟨reply {i}⟩" for i, r in enumerate(replies)}}
        requests = [
            [
                {
                    "role": msg["role"],
                    **({"name": msg["name"]} if "name" in msg else {}),
                    "content": hider.hide(msg["content"], known),
                }
                for msg in request
            ]
            for request in Logged.log
        ]
        got = info["agent_answers"]["Agent_0"]
        cases.append(
            {
                "id": f"er-{n:04d}",
                "set": "er",
                "reasoning": k,
                "aggregation": m,
                "options": texts,
                "replies": replies,
                "answers": [got[f"Reasoning_{i}"] for i in range(k)]
                + [got[f"Aggregation_{i}"] for i in range(m)],
                "requests": requests,
                "temperatures": list(Logged.temperatures),
                "answer": answer,
            }
        )
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--commit", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        ref = load_reference(args.repo, args.commit, Path(scratch))
        rng = random.Random(SEED)
        hider = Hider()
        cases = [
            *medprompt_cases(ref, rng, 200),
            *vote_cases(ref, rng, 200),
            *er_cases(ref, rng, 120, hider),
        ]
    with open(HERE / "cases.jsonl", "w", encoding="utf-8") as out:
        for case in cases:
            out.write(json.dumps(case, ensure_ascii=False) + "\n")
    import numpy
    import omegaconf

    meta = {
        "reference": "github.com/instadeepai/DebateLLM",
        "commit": args.commit,
        "seed": SEED,
        "python": ".".join(map(str, sys.version_info[:3])),
        "numpy": numpy.__version__,
        "omegaconf": omegaconf.__version__,
        "cases": {s: sum(c["set"] == s for c in cases) for s in ("medprompt", "vote", "er")},
        "sentences": dict(sorted(hider.sentences.items())),
    }
    (HERE / "meta.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
