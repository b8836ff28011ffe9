"""Regenerate cases.jsonl and meta.json: ChatEval's own messages and decisions on seeded debates.

Run by hand, never by CI, with a Python that has PyYAML (to read ChatEval's shipped config):

    python3 -m venv /tmp/chateval-venv && /tmp/chateval-venv/bin/pip install pyyaml
    /tmp/chateval-venv/bin/python conformance/chateval/generate.py \\
        --repo PATH/TO/ChatEval.git --commit 56b320c04f311705e24922817172a6a4c4749325

`--repo` is a git clone (bare or not) of github.com/thunlp/ChatEval. Its package import needs
an old langchain and an OpenAI key, so this script loads only the functions the message
building and the decision run, each compiled from its file at `--commit` (read with `git
show`), and binds them to plain stand-ins for the pydantic classes around them: the agents'
`astep` and `_fill_prompt_template` (one-by-one: `llm_eval_multi`; simultaneous, with or
without a summarizer: `llm_eval_multi_con`), `OpenAIChat._construct_messages`, the
environment's `step`, the sequential and concurrent orders, the basic updater, the chat-history
memory, the summary memory manipulator and the output parser; and `get_accuracy_calibration`
of calc_adversarial_results_calc_score_calibration.py. A scripted model answers every request
and each request's messages are recorded. Nothing of the reference is copied here.

Two sets of cases, one JSON object a line:
- prompt: an order, the agents, the rounds, a question and every scripted reply -> every
  request each agent sends (its messages), ChatEval's fixed sentences replaced by
  placeholders (README.md), only their SHA-256 kept in meta.json;
- vote: the agents' final verdicts -> what the `majority_vote` method decides.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import bdb
import hashlib
import json
import logging
import random
import re
import string
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
SEED = 45
ORDERS = ("one-by-one", "simultaneous", "summarizer")
# Names and roles past the two agents ChatEval ships (ours).
MORE_NAMES = ["Agent 3", "Agent 4", "Agent 5"]
MORE_ROLES = [
    "You are agent 3; weigh each argument before you speak.",
    "You are agent 4; check every number twice.",
    "You are agent 5; say plainly where you disagree.",
]
SUMMARY_TEMPLATE = "Summary so far:\n${summary}\nNew lines:\n${new_lines}"  # ours: none shipped


def show(repo: Path, commit: str, path: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "show", f"{commit}:{path}"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip


def functions(source: str, cls: str | None, names: list[str], scope: dict[str, Any]) -> dict:
    """The named functions of `source` (methods of class `cls`), compiled alone in `scope`."""
    tree = ast.parse(source)
    body = tree.body
    if cls is not None:
        body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls).body
    found = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in names:
            node.decorator_list = []
            module = ast.Module(body=[node], type_ignores=[])
            exec(compile(module, "<chateval>", "exec"), scope)
            found[node.name] = scope[node.name]
    assert set(found) == set(names), (cls, names, list(found))
    return found


class Message:
    """agentverse.message.Message's fields, without pydantic."""

    def __init__(self, content="", sender="", receiver=None, tool_response=None):
        self.content, self.sender = content, sender
        self.receiver = set({"all"}) if receiver is None else receiver
        self.tool_response = [] if tool_response is None else tool_response


class OutputParserError(Exception):
    pass


class RateLimitError(Exception):
    pass


def load_reference(repo: Path, commit: str) -> SimpleNamespace:
    scope: dict[str, Any] = {
        "Message": Message, "List": list, "asyncio": asyncio, "Template": string.Template, "re": re,
        "logging": logging, "bdb": bdb, "RateLimitError": RateLimitError,
        "OutputParserError": OutputParserError, "BaseEnvironment": object,
        "AgentFinish": lambda values, log: SimpleNamespace(return_values=values, log=log),
        "LLMResult": object, "BaseAgent": object, "Union": Any, "AgentAction": object,
    }  # fmt: skip
    get = lambda path, cls, names: functions(show(repo, commit, path), cls, names, dict(scope))  # noqa: E731
    ref = SimpleNamespace()
    ref.construct = get("agentverse/llms/openai.py", "OpenAIChat", ["_construct_messages"])
    ref.multi = get(
        "agentverse/agents/llm_eval_multi_agent.py", "LLMEvalAgent",
        ["astep", "_fill_prompt_template", "add_message_to_memory"],
    )  # fmt: skip
    ref.con = get(
        "agentverse/agents/llm_eval_multi_agent_con.py", "LLMEvalAgent",
        ["astep", "_fill_prompt_template", "add_message_to_memory", "reset"],
    )  # fmt: skip
    ref.env = get("agentverse/environments/llm_eval.py", "LLMEvalEnvironment", ["step"])
    ref.basic = get("agentverse/environments/basic.py", "BasicEnvironment", ["is_done", "reset"])
    ref.sequential = get(
        "agentverse/environments/rules/order/sequential.py", "SequentialOrder",
        ["get_next_agent_idx", "reset"],
    )  # fmt: skip
    ref.concurrent = get(
        "agentverse/environments/rules/order/concurrent.py", "ConcurrentOrder",
        ["get_next_agent_idx"],
    )  # fmt: skip
    ref.updater = get(
        "agentverse/environments/rules/updater/basic.py", "BasicUpdater",
        ["update_memory", "add_message_to_all_agents"],
    )  # fmt: skip
    ref.memory = get("agentverse/memory/chat_history.py", "ChatHistoryMemory", ["add_message"])
    ref.summary = get(
        "agentverse/memory_manipulator/summary.py", "SummaryMemoryManipulator",
        ["manipulate_memory", "_fill_in_prompt_template", "reset"],
    )  # fmt: skip
    ref.parser = get("agentverse/tasks/llm_eval/output_parser.py", "LLMEvalParser", ["parse"])
    ref.decide = get(
        "calc_adversarial_results_calc_score_calibration.py", None, ["get_accuracy_calibration"]
    )["get_accuracy_calibration"]
    ref.config = yaml.safe_load(show(repo, commit, "agentverse/tasks/llm_eval/config.yaml"))
    return ref


def bind(obj: object, methods: dict) -> None:
    for name, fn in methods.items():
        setattr(obj, name, fn.__get__(obj))


class Model:
    """The scripted model: each request's messages recorded, its reply from the script."""

    def __init__(self, ref: SimpleNamespace, log: list, answer):
        self.ref, self.log, self.answer = ref, log, answer

    def messages(self, prompt, memory, final_prompt):
        return self.ref.construct["_construct_messages"](None, prompt, memory, final_prompt)

    def generate_response(self, prompt, memory, final_prompt):  # the summarizer's call
        sent = self.messages(prompt, memory, final_prompt)
        self.log.append(sent)
        return SimpleNamespace(content=self.answer(sent))

    async def agenerate_response(self, prompt, memory, final_prompt):
        return self.generate_response(prompt, memory, final_prompt)


def qa_prompt(template: str) -> str:
    """ChatEval's prompt for the task mad-eval runs: a question to answer, not two answers
    to compare, so the six lines quoting the two answers are left out."""
    lines = template.split("\n")
    at = lines.index("${compared_text_one}")
    assert lines[at + 3] == "${compared_text_two}", lines
    return "\n".join(lines[: at - 1] + lines[at + 5 :])


def run_debate(ref, order: str, names, roles, question: str, replies, summaries, turns: int):
    """One question through ChatEval's environment; returns each agent's requests in
    order, and each summarizer request, by agent."""
    config = ref.config
    template = qa_prompt(config["prompts"]["prompt"])
    final = config["agents"][0]["final_prompt_to_use"]
    n = len(names)
    sent: dict[str, list] = {name: [] for name in names}
    summarized: dict[str, list] = {name: [] for name in names}
    env = SimpleNamespace(cnt_turn=0, last_messages=[], rule_params={})
    env.max_turns = turns * n if order == "one-by-one" else turns
    said = {name: 0 for name in names}

    def agent_answer(name):
        def answer(messages):
            k = said[name]
            said[name] += 1
            return replies[k][names.index(name)]

        return answer

    agents = []
    for i, name in enumerate(names):
        agent = SimpleNamespace(
            name=name, role_description=roles[i], prompt_template=template,
            final_prompt="", final_prompt_to_use=final, max_retry=3, receiver=set({"all"}),
            source_text=question, reference_text="", generated_text="",
            compared_text_one="", compared_text_two="",
        )  # fmt: skip
        agent.get_receiver = lambda agent=agent: agent.receiver
        agent.llm = Model(ref, sent[name], agent_answer(name))
        agent.memory = SimpleNamespace(messages=[])
        bind(agent.memory, ref.memory)
        agent.memory.reset = lambda memory=agent.memory: setattr(memory, "messages", [])
        agent.output_parser = SimpleNamespace()
        bind(agent.output_parser, ref.parser)
        if order == "one-by-one":
            bind(agent, ref.multi)
            agent.reset = agent.memory.reset
        else:
            bind(agent, ref.con)
            manipulator = SimpleNamespace(memory=None, agent=None, buffer="")
            if order == "summarizer":
                manipulator.summary_template = SUMMARY_TEMPLATE
                manipulator.max_retry = 3
                step = lambda messages, name=name: summaries[len(summarized[name]) - 1]  # noqa: E731
                manipulator.llm = Model(ref, summarized[name], step)
                bind(manipulator, ref.summary)
            else:  # the basic manipulator: does nothing
                manipulator.manipulate_memory = lambda: None
                manipulator.reset = lambda: None
            agent.memory_manipulator = manipulator
        agents.append(agent)
    env.agents = agents
    orderer = SimpleNamespace(next_agent_idx=0)
    bind(orderer, ref.sequential if order == "one-by-one" else ref.concurrent)
    updater = SimpleNamespace()
    bind(updater, ref.updater)
    env.rule = SimpleNamespace(
        get_next_agent_idx=orderer.get_next_agent_idx,
        get_env_description=lambda e: ["" for _ in e.agents],
        select_message=lambda e, messages: messages,
        update_memory=updater.update_memory,
        update_visible_agents=lambda e: None,
        reset=getattr(orderer, "reset", lambda: None),
    )
    env.print_messages = lambda messages: None
    bind(env, ref.env)
    bind(env, ref.basic)
    # llm_eval.py per question: texts set, final prompt cleared, then agentverse.run()
    env.reset()
    while not env.is_done():
        asyncio.run(env.step())
    return sent, summarized


# ---- inputs --------------------------------------------------------------------------------

WORDS = [
    "the first step checks the units",
    "adding the two parts gives the total",
    "I agree with the last speaker",
    "that misses the second case",
    "dividing again confirms it",
    "so the count is wrong by one",
    "the question asks for the smaller value",
    "both readings lead to the same number",
    "I am not convinced",
    "let me recompute",
]


def reply(rng: random.Random) -> str:
    lines = [
        rng.choice(WORDS).capitalize() + rng.choice([".", "!", "?", "..."])
        for _ in range(rng.randint(1, 4))
    ]
    if rng.random() < 0.3:
        lines.insert(0, "")
    text = rng.choice(["\n", "\n\n", " "]).join(lines)
    if rng.random() < 0.2:
        text += f"\n\\boxed{{{rng.randint(0, 99)}}}"
    # Every reply passes ChatEval's parser in a final turn: its last two lines are scores.
    one, two = rng.randint(1, 10), rng.randint(1, 10)
    return f"{text}\nThe score of Assistant 1: {one}\nThe score of Assistant 2: {two}"


def questions(rng: random.Random) -> list[str]:
    found = []
    data = HERE.parent.parent.parent / "shared" / "data"
    for name in ("amc23", "aime24"):
        for root in (data, Path("/work/shared/data")):
            path = root / f"{name}.jsonl"
            if path.is_file():
                found += [json.loads(line)["problem"] for line in path.read_text().splitlines()]
                break
    for _ in range(20):
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        found.append(f"What is {a} times {b}?")
    return found


def placeholder(role: str) -> str:
    return f"\u27e8{role}\u27e9"  # ⟨role⟩


def sentences(ref: SimpleNamespace) -> dict[str, str]:
    """ChatEval's fixed text by role: the question heading, the task block, the turn line
    (its agent name as {name}), the final prompt and the two shipped role descriptions."""
    probe = string.Template(qa_prompt(ref.config["prompts"]["prompt"])).safe_substitute(
        source_text="\x00q\x00", role_description="\x00r\x00", agent_name="{name}",
        final_prompt="\x00f\x00",
    )  # fmt: skip
    pieces = [p.strip() for p in re.split(r"\x00.\x00", probe)]
    heading, task, turn, tail = pieces
    assert tail == "" and "{name}" in turn and "\n" not in heading, pieces
    finals = {a["final_prompt_to_use"] for a in ref.config["agents"]}
    assert len(finals) == 1
    found = {"heading": heading, "task": task, "turn": turn, "final": finals.pop()}
    for i, agent in enumerate(ref.config["agents"]):
        found[f"role {i}"] = agent["role_description"]
    return found


def hide(text: str, found: dict[str, str], names: list[str]) -> str:
    """`text` with each fixed sentence replaced by its placeholder; the turn line keeps the
    agent's name between two placeholders."""
    head, tail = found["turn"].split("{name}")
    for name in names:
        text = text.replace(
            f"{head}{name}{tail}", f"{placeholder('turn')}{name}{placeholder('turn end')}"
        )
    for role, sentence in sorted(found.items(), key=lambda item: -len(item[1])):
        if role != "turn":
            text = text.replace(sentence, placeholder(role))
    return text


def prompt_cases(ref: SimpleNamespace, rng: random.Random, count: int) -> tuple[list, dict]:
    found = sentences(ref)
    shipped = [a["name"] for a in ref.config["agents"]]
    pool, cases = questions(rng), []
    for i in range(count):
        order = ORDERS[i % 3]
        n = rng.randint(2, 4)
        rounds = rng.randint(1, 3)  # debate rounds after round 0, as mad-eval counts them
        names = (shipped + MORE_NAMES)[:n]
        roles = [found["role 0"], found["role 1"], *MORE_ROLES][:n]
        question = rng.choice(pool)
        replies = [[reply(rng) for _ in range(n)] for _ in range(rounds + 1)]
        summaries = [reply(rng) for _ in range(rounds + 1)] if order == "summarizer" else []
        for text in [question, *(text for row in replies for text in row), *summaries]:
            assert not any(s in text for s in found.values())
        sent, summarized = run_debate(
            ref, order, names, roles, question, replies, summaries, rounds + 1
        )
        cases.append(
            {
                "id": f"prompt-{order}-{i:03d}",
                "set": "prompt",
                "order": order,
                "names": names,
                "roles": [hide(r, found, names) for r in roles],
                "rounds": rounds,
                "question": question,
                "replies": replies,
                "summaries": summaries,
                "sent": {
                    name: [
                        [
                            {"role": m["role"], "content": hide(m["content"], found, names)}
                            for m in request
                        ]
                        for request in requests
                    ]
                    for name, requests in sent.items()
                },
                "summarizer_sent": {
                    name: [
                        [
                            {"role": m["role"], "content": hide(m["content"], found, names)}
                            for m in request
                        ]
                        for request in requests
                    ]
                    for name, requests in summarized.items()
                }
                if order == "summarizer"
                else {},
            }
        )
    return cases, found


VERDICTS = ["Assistant 1", "Assistant 2", "Tie"]


def vote_cases(ref: SimpleNamespace, rng: random.Random, count: int) -> list[dict]:
    cases = []
    for i in range(count):
        n = rng.randint(2, 5)
        verdicts = []
        for _ in range(n):
            pick = rng.random()
            verdicts.append(
                rng.choice(VERDICTS) if pick < 0.85
                else rng.choice(["assistant 1", "Assistant 1.", "Both", "", "Answer: Tie"])
            )  # fmt: skip
        texts = [f"{rng.choice(WORDS).capitalize()}.\nAnswer: {v}" for v in verdicts]
        model = {
            "evaluation": [{"role": f"agent {j}", "evaluation": t} for j, t in enumerate(texts)]
        }
        _, meta = ref.decide([{"human_results": "tie"}], [model], [model], "majority_vote", 1)
        cases.append(
            {
                "id": f"vote-{i:03d}",
                "set": "vote",
                "replies": texts,
                "decision": meta["predictions"][0],
            }
        )
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--commit", required=True)
    parser.add_argument("--prompts", type=int, default=150)
    parser.add_argument("--votes", type=int, default=300)
    args = parser.parse_args()
    ref = load_reference(args.repo, args.commit)
    rng = random.Random(SEED)
    prompts, found = prompt_cases(ref, rng, args.prompts)
    cases = prompts + vote_cases(ref, rng, args.votes)
    with open(HERE / "cases.jsonl", "w", encoding="utf-8") as out:
        for case in cases:
            out.write(json.dumps(case, ensure_ascii=False) + "\n")
    counts: dict[str, int] = {}
    for case in cases:
        counts[case["set"]] = counts.get(case["set"], 0) + 1
    meta = {
        "reference": "github.com/thunlp/ChatEval",
        "commit": args.commit,
        "seed": SEED,
        "python": sys.version.split()[0],
        "cases": counts,
        # Only each sentence's hash: a user who writes ChatEval's sentences can check them.
        "sentences": {
            placeholder(role): hashlib.sha256(text.encode()).hexdigest()
            for role, text in found.items()
        },
    }
    (HERE / "meta.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
