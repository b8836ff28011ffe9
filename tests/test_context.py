"""Fitting debate prompts into a context budget, with a tiny real tokenizer built locally."""

import json
import logging
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tiny_tokenizer import CHATML, train

from mad_eval.backends import backend_type
from mad_eval.debate.context import (
    BARE_TEMPLATE,
    CHARS_PER_TOKEN,
    CUT_MARKER,
    ContextError,
    EstimateCounter,
    Fitted,
    Fitter,
    HFCounter,
    Reply,
    TokenCounter,
    bare_render,
    load_counter,
    prefix_tokens,
    raw_render,
    strip_think,
)
from mad_eval.grading.reasoning import quoted as quoted_reply
from mad_eval.records import Messages

SOLUTIONS = [
    "We need the number of positive integers $n \\le 1000$ such that $n^2 + 3n + 2$ is "
    "divisible by $6$. Note that $n^2 + 3n + 2 = (n+1)(n+2)$ is a product of two consecutive "
    "integers, so it is always even. For divisibility by $3$ we need $n \\equiv 1$ or "
    "$n \\equiv 2 \\pmod{3}$, and there are $667$ such integers.",
    "Let the roots of $x^2 - 5x + 6 = 0$ be $r$ and $s$. By Vieta's formulas, $r + s = 5$ and "
    "$rs = 6$. Then $r^2 + s^2 = (r+s)^2 - 2rs = 25 - 12 = 13$, so the sum of the squares of "
    "the roots is $13$.",
    "First, compute the area of the triangle with vertices $(0,0)$, $(4,0)$ and $(0,3)$. The "
    "legs have lengths $4$ and $3$, so the area is $\\frac{1}{2} \\cdot 4 \\cdot 3 = 6$. The "
    "hypotenuse is $\\sqrt{4^2 + 3^2} = 5$ and the inradius is $r = \\frac{A}{s} = 1$.",
    "Wait, let me double-check this step. If $f(x) = 2x + 1$, then $f(f(x)) = 2(2x+1) + 1 = "
    "4x + 3$. Setting $4x + 3 = 19$ gives $x = 4$. Hmm, that matches the earlier computation, "
    "so I am confident in it.",
    "The probability that both dice show an even number is $\\frac{3}{6} \\cdot \\frac{3}{6} = "
    "\\frac{1}{4}$. The probability that the sum is $7$ is $\\frac{6}{36} = \\frac{1}{6}$. "
    "These events are disjoint, so the probability of either is $\\frac{5}{12}$.",
]


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    fast = train(SOLUTIONS * 3, vocab_size=1000)
    fast.chat_template = CHATML
    path = tmp_path_factory.mktemp("tiny-tokenizer")
    fast.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def hf(tokenizer_dir: Path) -> HFCounter:
    counter, warning = load_counter(str(tokenizer_dir), "sim")
    assert isinstance(counter, HFCounter) and warning is None
    return counter


@pytest.fixture(params=["hf", "estimate"])
def counter(request: pytest.FixtureRequest, hf: HFCounter) -> TokenCounter:
    return hf if request.param == "hf" else EstimateCounter()


def test_a_recorded_lone_surrogate_is_counted(counter: TokenCounter) -> None:
    """A turn read back from a run folder may hold one; rebuilding its prompts counts it."""
    plain, odd = ([{"role": "user", "content": f"x {c} y"}] for c in ("\ufffd", "\ud800"))
    assert counter.count(counter.encode_messages(odd)) == counter.count(
        counter.encode_messages(plain)
    )


def response(steps: int, answer: int) -> str:
    """A model-like response: `steps` paragraphs of reasoning, then the final answer line."""
    body = "\n\n".join(f"Step {i}: {SOLUTIONS[i % len(SOLUTIONS)]}" for i in range(steps))
    return f"{body}\n\nso the answer is \\boxed{{{answer}}}"


def build(items: list[str] | list[Reply]) -> Messages:
    """A debate prompt quoting each item: a text, or a reply as a peer reads it."""
    texts = [t if isinstance(t, str) else quoted_reply(t.text, t.reasoning) for t in items]
    quoted = "\n\n".join(
        f'<response from="agent {i}">\n{t}\n</response>' for i, t in enumerate(texts)
    )
    return [{"role": "user", "content": f"Problem: find x.\n\n{quoted}\n\nAnswer."}]


def replies(texts: list[str]) -> list[Reply]:
    return [Reply(t) for t in texts]


def kept_part(text: str) -> str:
    return text.removeprefix(CUT_MARKER)


def quoted(fitted: Fitted) -> list[str]:
    return re.findall(
        r'<response from="[^"]*">\n(.*?)\n</response>', fitted.messages[0]["content"], re.DOTALL
    )


# load_counter


def test_load_counter_local_folder_is_exact(tokenizer_dir: Path) -> None:
    counter, warning = load_counter(None, f"vllm:{tokenizer_dir}")
    assert isinstance(counter, HFCounter) and counter.exact and warning is None
    assert counter.name == f"hf:{tokenizer_dir}"


def test_load_counter_unknown_model_estimates_and_warns() -> None:
    counter, warning = load_counter(None, "openai:stub")
    assert isinstance(counter, EstimateCounter) and not counter.exact
    assert warning is not None and "openai:stub" in warning and "--tokenizer" in warning


@pytest.mark.parametrize("model", ["sim", "sim:p0=0.3"])
def test_simulated_agents_are_counted_by_estimate_silently(model: str) -> None:
    """Simulated agents have no tokenizer to look for: their backend kind says so, and a
    counter for no model estimates without a warning."""
    assert not backend_type(model).tokenizer
    counter, warning = load_counter(None, None)
    assert isinstance(counter, EstimateCounter) and warning is None


def test_load_counter_bad_tokenizer_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-tokenizer"
    with pytest.raises(ContextError, match="no-such-tokenizer") as error:
        load_counter(str(missing), "openai:stub")
    assert "local tokenizer folder" in str(error.value)


def test_tokenizer_without_chat_template_over_counts(tmp_path: Path, hf: HFCounter) -> None:
    plain = train(SOLUTIONS * 3, vocab_size=1000)
    plain.save_pretrained(tmp_path)
    counter, warning = load_counter(str(tmp_path), "sim")
    assert not counter.exact and warning is not None and "chat template" in warning
    messages = build([response(3, 7)])
    assert counter.count(counter.encode_messages(messages)) > hf.count(hf.encode_messages(messages))


@pytest.mark.slow
def test_loading_a_tokenizer_is_quiet(tokenizer_dir: Path, hf: HFCounter) -> None:
    """Users must not see transformers' notice that PyTorch is missing: we need no models."""
    code = (
        "import sys; from mad_eval.debate.context import load_counter; "
        "load_counter(sys.argv[1], 'sim')"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, str(tokenizer_dir)],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert "PyTorch" not in run.stderr
    assert not logging.getLogger("transformers").filters  # the filter was only temporary


# counting


def test_hf_count_is_the_rendered_chat_template(hf: HFCounter) -> None:
    messages = build([response(2, 5), response(1, 6)])
    text = hf.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert hf.count(hf.encode_messages(messages)) == len(hf.tokenizer(text)["input_ids"])


def test_tail_keeps_the_last_tokens(counter: TokenCounter) -> None:
    text = response(3, 42)
    assert counter.tail(text, 0) == ""
    tail = counter.tail(text, 20)
    assert text.endswith(tail) and counter.count_text(tail) == 20
    assert counter.tail(text, 10**6) == text


def test_tail_never_splits_a_character(hf: HFCounter) -> None:
    text = "Der Winkel beträgt 45° und √2 ≈ 1.414, 答案是 7. " * 20
    for n in range(1, 60):
        tail = hf.tail(text, n)
        assert text.endswith(tail) and "\ufffd" not in tail


def test_estimate_over_counts_math_text(hf: HFCounter) -> None:
    estimate = EstimateCounter()
    for text in [*SOLUTIONS, response(6, 1234)]:
        messages = build([text])
        assert estimate.count(estimate.encode_messages(messages)) >= hf.count(
            hf.encode_messages(messages)
        )
        assert estimate.count_text(text) >= hf.count_text(text)


@pytest.mark.slow
def test_estimate_over_counts_unseen_benchmark_text(shared_data: Path) -> None:
    """A tokenizer trained on MATH500 counts fewer tokens in AIME/AMC prompts than the estimate."""

    def texts(name: str) -> list[str]:
        with open(shared_data / f"{name}.jsonl", encoding="utf-8") as rows:
            return [f"{r['problem']}\n\n{r.get('solution', '')}" for r in map(json.loads, rows)]

    trained = train(texts("math500"), vocab_size=8000)
    trained.chat_template = CHATML
    real, estimate = HFCounter(trained, "math500"), EstimateCounter()
    unseen = texts("aime24") + texts("aime25") + texts("amc23")
    for prompt in [build([text]) for text in unseen] + [build(unseen[i : i + 5]) for i in (0, 30)]:
        assert estimate.count(estimate.encode_messages(prompt)) >= real.count(
            real.encode_messages(prompt)
        )


# fitting


def test_prompt_that_fits_is_untouched(counter: TokenCounter) -> None:
    responses = [response(2, 1), response(3, 2)]
    for budget in (None, 10**6):
        fitted = Fitter(counter).fit(build, replies(responses), budget)
        assert fitted.messages == build(responses) and fitted.cut == 0
        assert fitted.tokens == counter.count(counter.encode_messages(build(responses)))


def test_long_responses_are_cut_from_the_front(counter: TokenCounter) -> None:
    responses = [response(40, 1234), response(30, 99), response(2, 7)]
    full = counter.count(counter.encode_messages(build(responses)))
    budget = full // 2
    fitted = Fitter(counter).fit(build, replies(responses), budget)
    assert fitted.tokens <= budget and fitted.cut > 0
    assert fitted.tokens == counter.count(counter.encode_messages(fitted.messages))
    texts = quoted(fitted)
    for original, text in zip(responses, texts, strict=True):
        assert text.endswith(original.rsplit("\n", 1)[1])
        assert text == original or (text.startswith(CUT_MARKER) and len(text) < len(original))
    assert texts[2] == responses[2]  # short enough to stay whole


def test_water_filling_cuts_long_responses_to_one_level(hf: HFCounter) -> None:
    responses = [response(5, 1), response(40, 2), response(3, 3), response(25, 4)]
    budget = hf.count(hf.encode_messages(build(responses))) // 2
    fitted = Fitter(hf).fit(build, replies(responses), budget)
    texts = quoted(fitted)
    assert texts[0] == responses[0] and texts[2] == responses[2]
    kept = []
    for original, text in zip(responses[1::2], texts[1::2], strict=True):
        pieces = [hf.tokenizer.decode([i]) for i in hf.tokenizer.encode(original)]
        k = next(k for k in range(1, len(pieces)) if "".join(pieces[-k:]) == kept_part(text))
        kept.append((len(pieces), k))
    (n1, k1), (n2, k2) = kept
    assert k1 == k2 > hf.count_text(responses[0])  # one level, above the short ones
    assert fitted.cut == (n1 - k1) + (n2 - k2)
    # The largest level that fits: one more token per cut response would not.
    assert budget - fitted.tokens < 2 + 2


def test_cut_counts_only_budget_truncation_not_think_stripping(counter: TokenCounter) -> None:
    responses = [f"<think>{response(20, 0)}</think>\n{response(1, 5)}", response(1, 6)]
    fitter = Fitter(counter, strip_think=True)
    fitted = fitter.fit(build, replies(responses), budget=counter.count_text(responses[0]) // 2)
    assert fitted.cut == 0 and quoted(fitted) == [response(1, 5), response(1, 6)]


def test_question_alone_over_budget_is_an_error(counter: TokenCounter) -> None:
    # What is left with both responses cut down to the marker, as the message says.
    bare = counter.count(counter.encode_messages(build([CUT_MARKER, CUT_MARKER])))
    with pytest.raises(ContextError, match=f"needs {bare} tokens even with every quoted"):
        Fitter(counter).fit(build, replies([response(5, 1), response(5, 2)]), budget=10)


class CallCounter(EstimateCounter):
    """An estimate that records how often each response text is measured."""

    def __init__(self) -> None:
        self.measured: list[str] = []
        self.encoded = 0

    def count_text(self, text: str) -> int:
        self.measured.append(text)
        return super().count_text(text)

    def encode_messages(self, messages: Messages) -> np.ndarray:
        self.encoded += 1
        return super().encode_messages(messages)


def test_responses_are_measured_once_across_agents() -> None:
    counter = CallCounter()
    responses = [response(30, i) for i in range(5)]
    budget = counter.count(counter.encode_messages(build(responses))) // 2
    counter.encoded = 0
    fitter = Fitter(counter)
    for agent in range(5):  # every agent quotes the same responses, in its own order
        fitter.fit(build, replies(responses[agent:] + responses[:agent]), budget)
    assert sorted(counter.measured) == sorted([*responses, CUT_MARKER])
    assert counter.encoded <= 5 * 4


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>\nlet me see\n</think>\n\nThe answer is 4.", "The answer is 4."),
        ("a <think>x</think> b <think>\ny\n</think> c", "a  b  c"),
        ("the prompt opened it\n</think>\nThe answer is 4.", "The answer is 4."),
        ("  No thinking here.\n", "No thinking here."),
    ],
)
def test_strip_think(text: str, expected: str) -> None:
    assert strip_think(text) == expected


# prefix sharing


def test_prefix_tokens(counter: TokenCounter) -> None:
    def fitted(content: str) -> Fitted:
        messages = [{"role": "user", "content": content}]
        encoded = counter.encode_messages(messages)
        return Fitted(messages, encoded, counter.count(encoded), 0)

    shared = "Problem: find x.\n\n" + response(4, 1)
    prompts = [fitted(shared + "\n\nAgent A."), fitted("Unrelated."), fitted(shared + "\n\nB.")]
    prefixes = prefix_tokens([prompts[0], prompts[0]], counter)
    assert prefixes[0] == 0
    assert prefixes[1] == prompts[0].tokens  # an identical prompt repeats all of its tokens

    def reference(a: np.ndarray, b: np.ndarray) -> int:
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n if counter.exact else n // CHARS_PER_TOKEN

    header = reference(prompts[0].encoded, prompts[1].encoded)
    assert 0 < header < 10  # only the template's role header is shared
    partly = reference(prompts[2].encoded, prompts[0].encoded)
    assert partly > counter.count_text(shared) // 2
    assert prefix_tokens(prompts, counter) == [0, header, partly]


def test_the_bare_template_adds_nothing_between_or_after_messages():
    messages = [{"role": "system", "content": "A"}, {"role": "user", "content": "B \n"}]
    assert bare_render(messages) == "AB \n" == EstimateCounter("bare").render(messages)
    assert raw_render(messages) == "A\n\nB \n\n\n"
    assert EstimateCounter("bare").template_source == BARE_TEMPLATE
