"""SDRL on-policy in TRL: two real training steps of SelfDebateGRPOTrainer on a tiny local model
(CPU) that answers \\boxed{5} or \\boxed{7}, so its sampled groups are part right: the pairs
come from real samples, the debate prompts are the evaluation's builder's, and both turns
reach the loss. Also the example script in-process, the turns' join, and bad input."""

from __future__ import annotations

import dataclasses
import importlib.util
import random
from pathlib import Path

import pytest

pytestmark = pytest.mark.train
torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")

from mad_eval.records import Question  # noqa: E402
from mad_eval.settings.templates import builtin_templates, load_template  # noqa: E402
from mad_eval.training import (  # noqa: E402
    Overlong,
    TrainingError,
    prompt_rows,
    row_pair_prompt,
    write_rows,
)
from mad_eval.training.onpolicy import SelfDebate  # noqa: E402
from mad_eval.training.trl_grpo import (  # noqa: E402
    SelfDebateGRPOTrainer,
    debate_confusion,
    join_turns,
    keep_rows,
    read_rows,
)

REPLIES = ("The answer is \\boxed{5}.", "The answer is \\boxed{7}.")
SUMS = ((2, 3), (1, 4), (0, 5), (4, 1))  # every gold is 5
GENERATIONS = 4


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """The tiny model's ops are too small to share: on a busy machine torch's threads wait on
    each other (50 times slower here), so these tests run on one."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _rows(template="debate"):
    questions = [Question(f"q{i}", f"What is {a} + {b}?", "5") for i, (a, b) in enumerate(SUMS)]
    return prompt_rows(questions, "tiny", "math", template)


@pytest.fixture(scope="module")
def first_turn(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("rows") / "first_turn.parquet"
    write_rows(_rows(), path)
    return path


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """The tiny random model, taught in a few seconds to answer either way after any first-
    or debate-turn prompt: right (5) about 1 time in 3, else wrong (7), then EOS."""
    from tiny_model import build_tiny_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = build_tiny_model(tmp_path_factory.mktemp("tiny-qwen2"))
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    rows = _rows()
    prompts = [r["prompt"] for r in rows]
    prompts += [row_pair_prompt(r, a, b) for r in rows for a in REPLIES for b in REPLIES]
    contexts = [tok.apply_chat_template(p, add_generation_prompt=True, tokenize=False)
                for p in prompts]  # fmt: skip
    rng = random.Random(0)
    torch.manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(160):  # cleaner replies: every sampled one reads 5 or 7
        ids, labels = [], []
        for context in rng.sample(contexts, 8):
            prompt = tok(context)["input_ids"]
            reply = tok(rng.choice(REPLIES) + tok.eos_token)["input_ids"]
            ids.append(prompt + reply)
            labels.append([-100] * len(prompt) + reply)
        width = max(map(len, ids))
        pad = [width - len(i) for i in ids]
        model(
            input_ids=torch.tensor([[tok.pad_token_id] * (width - len(i)) + i for i in ids]),
            attention_mask=torch.tensor([[0] * n + [1] * (width - n) for n in pad]),
            labels=torch.tensor([[-100] * (width - len(lab)) + lab for lab in labels]),
        ).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.save_pretrained(path)
    return path


def _config(out: Path, **kw):
    settings = dict(
        output_dir=str(out),
        num_generations=GENERATIONS,
        per_device_train_batch_size=2 * GENERATIONS,  # two prompts per step
        max_completion_length=16,
        learning_rate=1e-3,
        max_steps=2,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=0,
    )
    return trl.GRPOConfig(**{**settings, **kw})


class Recording(SelfDebate):
    """SelfDebate that keeps what each step was given and gave."""

    def step(self, row, texts, lengths=None, rng=None, validate=False):
        group = super().step(row, texts, lengths, rng, validate)
        (VALIDATED if validate else STEPS).append((row, list(texts), list(lengths), group))
        return group


STEPS: list = []
VALIDATED: list = []


def test_two_steps_pair_real_samples_and_train_both_turns(tiny_model, first_turn, tmp_path):
    STEPS.clear()
    trainer = SelfDebateGRPOTrainer(str(tiny_model), _config(tmp_path / "out"),
                                    read_rows(first_turn), self_debate=Recording())  # fmt: skip
    assert trainer.self_debate.max_length == 15  # max_completion_length - 1: cut replies unpaired
    generated, losses = [], []
    generate, compute_loss = trainer._generate, trainer.compute_loss

    def recording_generate(prompts):
        out = generate(prompts)
        generated.append(([list(p) for p in prompts], out[1], out[3]))  # prompts, ids, replies
        return out

    def recording_loss(model, inputs, *args, **kw):
        losses.append({k: v.detach().clone() for k, v in inputs.items()})
        return compute_loss(model, inputs, *args, **kw)

    trainer._generate, trainer.compute_loss = recording_generate, recording_loss
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.train()

    assert len(STEPS) == 4  # 2 steps x 2 prompts, each group graded and paired once
    asked = [r["prompt"] for r in _rows()]
    firsts = [call for call in generated if all(p in asked for p in call[0])]
    debate_calls = [call[0] for call in generated if call not in firsts]
    assert len(firsts) == 2 and len(generated) == 2 + len(debate_calls)
    texts = [str(c[-1]["content"]) for _, _, replies in firsts for c in replies]
    assert [t for _, step_texts, _, _ in STEPS for t in step_texts] == texts  # TRL's own samples
    lengths = [len(ids) for _, step_ids, _ in firsts for ids in step_ids]
    assert [n for _, _, step_lengths, _ in STEPS for n in step_lengths] == lengths

    paired = [(row, t, g) for row, t, _, g in STEPS if g.pairs]
    assert paired, "no group was part right: the tiny model did not answer both ways"
    debate_prompts = []
    for row, step_texts, group in paired:
        for own, partner in group.pairs:
            answers = {group.scored[own].answer, group.scored[partner].answer}
            assert answers == {"5", "7"}  # freq: the two most common answers, never 5 with 5
            assert group.scored[own].correct != group.scored[partner].correct
            pair_prompt = row_pair_prompt(row, step_texts[own], step_texts[partner])
            debate_prompts += [pair_prompt] * GENERATIONS  # one group per debate context
    assert [p for call in debate_calls for p in call] == debate_prompts

    # Both turns reached the loss: the first turn's 8 rows and every debate reply, the debate
    # rows (longer prompts) with advantages of their own group.
    template = trainer.processing_class.apply_chat_template
    first_width = max(len(template(p, add_generation_prompt=True, tokenize=True, return_dict=True)
                          ["input_ids"]) for p in asked)  # fmt: skip
    assert len(losses) == 2
    rows = sum(batch["advantages"].numel() for batch in losses)
    assert rows == 2 * 2 * GENERATIONS + len(debate_prompts)
    debate_rows = torch.cat(
        [b["advantages"][b["prompt_mask"].sum(1) > first_width] for b in losses]
    )
    assert debate_rows.numel() == len(debate_prompts) and debate_rows.abs().sum() > 0
    after = trainer.model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    logged = {k for entry in trainer.state.log_history for k in entry}
    assert {"self_debate/pairs", "self_debate/first_reward", "self_debate/debate_reward"} <= logged


def test_the_authors_setting_trains_only_mixed_groups_and_validates_the_debate_turn(
    tiny_model, first_turn, tmp_path
):
    """Two steps under the authors' setting: a group all right or all wrong has no token in
    the loss (their filter on accuracy, whatever its penalties), each pair's debate group is
    trained unless its rewards are all equal, and evaluation samples and grades the debate
    turn too, logging its accuracy and confusion counts."""
    STEPS.clear()
    VALIDATED.clear()
    config = _config(
        tmp_path / "out",
        eval_strategy="steps",
        eval_steps=1,
        num_generations_eval=GENERATIONS,
        per_device_eval_batch_size=GENERATIONS,
    )
    debate = Recording(authors=True, overlong=Overlong(max_length=16, buffer=8))
    questions = [Question(f"q{i}", f"What is {a} + {b}?", "5") for i, (a, b) in enumerate(SUMS)]
    questions[3] = Question("q3", "What is 4 + 5?", "9")  # answered 5 or 7: always all wrong
    write_rows(prompt_rows(questions, "tiny", "math", "debate"), tmp_path / "rows.parquet")
    rows = read_rows(tmp_path / "rows.parquet")
    trainer = SelfDebateGRPOTrainer(
        str(tiny_model), config, rows, self_debate=debate, eval_dataset=rows
    )
    losses, compute_loss = [], trainer.compute_loss

    def recording_loss(model, inputs, *args, **kw):
        if model.training:
            losses.append({k: v.detach().clone() for k, v in inputs.items()})
        return compute_loss(model, inputs, *args, **kw)

    trainer.compute_loss = recording_loss
    trainer.train()

    trained = [g for _, _, _, g in STEPS]
    assert len(trained) == 4 and len(VALIDATED) == 2 * len(SUMS)  # an evaluation after each step
    assert [g.pairs.dropped for g in trained].count("all-wrong") >= 1
    assert all(g.trained for _, _, _, g in VALIDATED)  # validation filters nothing
    for g in trained:
        assert g.trained == (len({s.correct for s in g.scored}) == 2)
        assert (g.pairs.dropped in ("all-right", "all-wrong")) == (not g.trained)
    asked = [r["prompt"] for r in _rows()]
    template = trainer.processing_class.apply_chat_template
    first_width = max(len(template(p, add_generation_prompt=True, tokenize=True, return_dict=True)
                          ["input_ids"]) for p in asked)  # fmt: skip
    first_rows = sum(
        int(((b["completion_mask"].sum(1) > 0) & (b["prompt_mask"].sum(1) <= first_width)).sum())
        for b in losses
    )
    assert first_rows == GENERATIONS * sum(g.trained for g in trained)
    for b in losses:  # a row out of the loss has no advantage either
        assert not b["advantages"][b["completion_mask"].sum(1) == 0].any()
    logged = {k: v for entry in trainer.state.log_history for k, v in entry.items()}
    assert logged["self_debate/skipped"] == 0.0 or not any(g.debates for g in trained)
    assert "self_debate/debate_groups_kept" in logged
    assert "self_debate/debate_confusion/first_1_partner_0_final_1" in logged
    val = "eval_self_debate/val/debate"
    for name in ("_accuracy", "_initial_accuracy", "_confusion/first_0_partner_1_final_1"):
        assert val + name in logged


class NoPairs(SelfDebate):
    """The authors' setting on a step that finds no pair at all."""

    def step(self, row, texts, lengths=None, rng=None, validate=False):
        from mad_eval.training.pairs import Pairs

        group = super().step(row, texts, lengths, rng, validate)
        return dataclasses.replace(group, pairs=Pairs([], "one-answer"), debates=[])


def test_a_step_with_no_pair_is_skipped_under_the_authors_setting(tiny_model, first_turn, tmp_path):
    """No update and no learning-rate step: the weights and the schedule stay as they were."""
    config = _config(tmp_path / "out", max_steps=1, lr_scheduler_type="constant_with_warmup",
                     warmup_steps=2)  # fmt: skip
    trainer = SelfDebateGRPOTrainer(str(tiny_model), config, read_rows(first_turn),
                                    self_debate=NoPairs(authors=True))  # fmt: skip
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.train()
    after = trainer.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert set(trainer.lr_scheduler.get_last_lr()) == {0.0}  # still at warm-up's first rate
    (logged,) = [e for e in trainer.state.log_history if "self_debate/skipped" in e]
    assert logged["self_debate/skipped"] == 1.0


def test_accumulation_splits_both_turns_evenly_and_evaluation_asks_the_first_turn_only(
    tiny_model, first_turn, tmp_path
):
    """With 2 accumulation steps TRL splits each generation batch into 2 equal slices: the
    joined batch (6 first-turn rows and 3 per debate context) is padded with a masked row to
    split evenly, with no row lost, and the reference and old log-probabilities (a KL term, two
    iterations per batch) joined alike; evaluation samples the first turn alone."""
    args = _config(tmp_path / "out", num_generations=3, per_device_train_batch_size=3,
                   gradient_accumulation_steps=2, max_steps=1, per_device_eval_batch_size=3, seed=1,
                   num_generations_eval=3, beta=0.04, num_iterations=2)  # fmt: skip
    rows = read_rows(first_turn)
    trainer = SelfDebateGRPOTrainer(str(tiny_model), args, rows, eval_dataset=rows)
    slices, asked = [], []
    compute_loss, generate = trainer.compute_loss, trainer._generate

    def recording_loss(model, inputs, *args, **kw):
        slices.append({k: v.detach().clone() for k, v in inputs.items()})
        return compute_loss(model, inputs, *args, **kw)

    def recording_generate(prompts):
        asked.append(list(prompts))
        return generate(prompts)

    trainer.compute_loss, trainer._generate = recording_loss, recording_generate
    trainer.train()
    pairs = sum(len(group.debates) for group in trainer._groups)
    assert len(slices) == 2 and slices[0]["advantages"].numel() == slices[1]["advantages"].numel()
    assert all(s["ref_per_token_logps"].shape == s["completion_mask"].shape for s in slices)
    assert all(s["old_per_token_logps"].shape == s["completion_mask"].shape for s in slices)
    counted = sum(int(s["completion_mask"].sum()) for s in slices)
    assert counted == int(slices[0]["num_items_in_batch"])  # every sampled token is in a slice
    assert sum(s["advantages"].numel() for s in slices) == 6 + 3 * pairs + pairs % 2

    asked.clear()
    metrics = trainer.evaluate()
    first = [r["prompt"] for r in _rows()]
    assert asked and all(p in first for call in asked for p in call)
    assert "eval_reward" in metrics and not any("self_debate" in k for k in metrics)


def _example():
    path = Path(__file__).resolve().parents[1] / "examples" / "sdrl_trl.py"
    spec = importlib.util.spec_from_file_location("sdrl_trl", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return example


def test_the_example_script_trains_and_saves(tiny_model, first_turn, tmp_path):
    out = tmp_path / "sdrl"
    trainer = _example().main([
        "--model", str(tiny_model), "--train-file", str(first_turn), "--output-dir", str(out),
        "--num-generations", "4", "--prompts-per-step", "2", "--max-completion-length", "16",
        "--max-steps", "1", "--learning-rate", "1e-3", "--accumulation-steps", "2", "--cpu",
        "--overlong-buffer", "8", "--max-length", "0",
    ])  # fmt: skip
    assert trainer.state.global_step == 1 and (out / "model.safetensors").is_file()
    assert trainer.self_debate.rule == "freq" and trainer.self_debate.per_prompt == 1
    assert trainer.self_debate.max_length == 15  # 0: below the completion limit
    assert trainer.self_debate.overlong == Overlong(16, 8, 1.0)
    assert (trainer.args.warmup_steps, trainer.args.weight_decay) == (10, 0.1)  # the paper's
    assert any("self_debate/pairs" in entry for entry in trainer.state.log_history)


def test_the_example_takes_its_updates_per_step_at_verls_learning_rate(
    tiny_model, first_turn, tmp_path
):
    """Two steps of 4 prompts in mini-batches of 2, under the authors' setting (the example's
    default): TRL's own log shows 2 optimiser updates per step, one generation per step, and
    the rate each update trained with: a warm-up step of 2 updates (verl trains all of step 0
    at 0; TRL ramps within it), then 1e-3; and after each step a validation of both turns."""
    trainer = _example().main([
        "--model", str(tiny_model), "--train-file", str(first_turn), "--output-dir",
        str(tmp_path / "sdrl"), "--num-generations", "4", "--prompts-per-step", "4",
        "--mini-batch-prompts", "2", "--max-steps", "2", "--warmup-steps", "1",
        "--learning-rate", "1e-3", "--max-completion-length", "16", "--overlong-buffer", "8",
        "--max-length", "0", "--cpu", "--eval-file", str(first_turn), "--eval-steps", "1",
        "--eval-generations", "4",
    ])  # fmt: skip
    assert trainer.self_debate.authors
    logged = [e for e in trainer.state.log_history if "loss" in e]
    assert trainer.state.global_step == 4 and [e["step"] for e in logged] == [1, 2, 3, 4]
    assert [e["learning_rate"] for e in logged] == pytest.approx([0, 5e-4, 1e-3, 1e-3])
    generations = [e for e in logged if "self_debate/prompts" in e]
    assert [(e["step"], e["self_debate/prompts"]) for e in generations] == [(1, 4), (3, 4)]
    assert [e["self_debate/skipped"] for e in generations] == [0.0, 0.0]
    validated = [
        e for e in trainer.state.log_history if "eval_self_debate/val/debate_accuracy" in e
    ]
    assert [e["step"] for e in validated] == [2, 4]  # after each step's two updates
    assert all("eval_self_debate/val/debate_confusion/first_1_partner_0_final_1" in e
               for e in validated)  # fmt: skip


def test_the_example_without_cpu_on_a_machine_without_a_gpu_is_one_sentence(first_turn, tmp_path):
    example = _example()
    if example._trains_in_bf16():
        pytest.skip("this machine has a GPU that trains in bf16")
    with pytest.raises(TrainingError, match=r"no GPU that trains in bf16.*pass --cpu"):
        example.main(["--model", "no-model-is-loaded", "--train-file", str(first_turn),
                      "--output-dir", str(tmp_path / "o")])  # fmt: skip


def test_the_turns_join_into_one_batch_that_splits_evenly():
    first = {
        "prompt_ids": torch.tensor([[1, 2], [3, 4]]),
        "prompt_mask": torch.ones(2, 2, dtype=torch.long),
        "completion_ids": torch.tensor([[5, 6, 7], [8, 9, 0]]),
        "completion_mask": torch.tensor([[1, 1, 1], [1, 1, 0]]),
        "advantages": torch.tensor([1.0, -1.0]),
        "num_items_in_batch": torch.tensor(5),
    }
    second = {
        "prompt_ids": torch.tensor([[11, 12, 13]]),
        "prompt_mask": torch.ones(1, 3, dtype=torch.long),
        "completion_ids": torch.tensor([[14]]),
        "completion_mask": torch.tensor([[1]]),
        "advantages": torch.tensor([0.5]),
        "num_items_in_batch": torch.tensor(1),
    }
    joined = join_turns(first, second, pad_id=0, multiple=2)
    assert joined["prompt_ids"].tolist() == [[0, 1, 2], [0, 3, 4], [11, 12, 13], [11, 12, 13]]
    assert joined["prompt_mask"].tolist()[:3] == [[0, 1, 1], [0, 1, 1], [1, 1, 1]]
    assert joined["completion_ids"].tolist()[2] == [14, 0, 0]
    assert joined["completion_mask"].tolist()[2:] == [[1, 0, 0], [0, 0, 0]]  # the pad row: masked
    assert joined["advantages"].tolist() == [1.0, -1.0, 0.5, 0.0]
    assert int(joined["num_items_in_batch"]) == 6
    with pytest.raises(TrainingError, match="pixel_values"):
        join_turns({**first, "pixel_values": torch.zeros(1)}, {**second, "pixel_values": 0}, 0)


def test_rows_kept_out_count_for_nothing_and_confusion_names_the_authors_cells():
    batch = {
        "completion_mask": torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0]]),
        "advantages": torch.tensor([1.0, -1.0, 0.5]),
        "num_items_in_batch": torch.tensor(6),
    }
    kept = keep_rows(batch, [True, False, True])
    assert kept["completion_mask"].tolist() == [[1, 1, 1], [0, 0, 0], [1, 0, 0]]
    assert kept["advantages"].tolist() == [1.0, 0.0, 0.5] and int(kept["num_items_in_batch"]) == 4
    assert keep_rows(batch, [True] * 3) is batch
    cells = debate_confusion([True, False, False], [False, True, True], [False, True, False])
    assert cells["first_1_partner_0_final_0"] == 1 and cells["first_0_partner_1_final_1"] == 1
    assert cells["first_0_partner_1_final_0"] == 1 and sum(cells.values()) == 3


def test_a_model_that_never_answers_is_warned_of_then_stopped(first_turn, tmp_path):
    """The tiny model untaught: its random tokens never hold an answer, so the first step
    warns and the second (stop_unparsed=2) stops the run in one sentence."""
    from tiny_model import build_tiny_model

    from mad_eval.training.onpolicy import NoAnswers

    untaught = build_tiny_model(tmp_path / "untaught")
    debate = SelfDebate(stop_unparsed=2)
    config = _config(tmp_path / "out", max_steps=3)
    trainer = SelfDebateGRPOTrainer(
        str(untaught), config, read_rows(first_turn), self_debate=debate
    )
    with (
        pytest.warns(NoAnswers, match=r"no first-turn reply of this step \(8 replies\)"),
        pytest.raises(TrainingError, match="of the last 2 steps gave an answer") as stopped,
    ):
        trainer.train()
    assert "\n" not in str(stopped.value) and trainer.state.global_step == 1
    logged = [
        e["self_debate/unparsed"] for e in trainer.state.log_history if "self_debate/unparsed" in e
    ]
    assert logged == [1.0]


def test_bad_input_is_refused_in_one_sentence_before_any_step(tmp_path, first_turn):
    rows = read_rows(first_turn)
    args = _config(tmp_path)
    args.num_generations = 1
    with pytest.raises(TrainingError, match="num_generations of 2 or more"):
        SelfDebateGRPOTrainer("no-model-is-loaded", args, rows)
    with pytest.raises(TrainingError, match="remove_unused_columns=False"):
        SelfDebateGRPOTrainer("no-model-is-loaded", _config(tmp_path, remove_unused_columns=True),
                              rows)  # fmt: skip
    with pytest.raises(TrainingError, match="do not pass reward_funcs"):
        SelfDebateGRPOTrainer("no-model-is-loaded", _config(tmp_path), rows, reward_funcs=[len])

    old = [dict(r, extra_info={"split": "train", "index": 0}) for r in _rows()]
    with pytest.raises(TrainingError, match="lacks question"):
        SelfDebateGRPOTrainer("no-model-is-loaded", _config(tmp_path), old)

    text = builtin_templates()["debate"].read_text(encoding="utf-8").replace(
        "[[debate]]\n", '[[debate]]\nrole = "system"\ncontent = "{{ responses[2].text }}"\n\n'
        "[[debate]]\n", 1)  # fmt: skip
    (tmp_path / "needs-three.toml").write_text(text)
    three = _rows(load_template(str(tmp_path / "needs-three.toml")))
    with pytest.raises(Exception, match="needs-three") as raised:
        SelfDebateGRPOTrainer("no-model-is-loaded", _config(tmp_path), three)
    from mad_eval.errors import UserError

    assert isinstance(raised.value, UserError) and "\n" not in str(raised.value)

    common = ["--model", "unused", "--train-file", str(first_turn), "--output-dir", str(tmp_path)]
    with pytest.raises(TrainingError, match="--num-generations must be 2 or more"):
        _example().main([*common, "--num-generations", "1"])
    with pytest.raises(TrainingError, match="--accumulation-steps must divide"):
        _example().main([*common, "--accumulation-steps", "3"])
    write_rows(_rows(), tmp_path / "rows.jsonl")  # JSON Lines read alike
    assert [r["extra_info"]["question"] for r in read_rows(tmp_path / "rows.jsonl")] == [
        r["extra_info"]["question"] for r in rows
    ]
    with pytest.raises(TrainingError, match=r"must end in \.parquet or \.jsonl"):
        read_rows(tmp_path / "rows.csv")
