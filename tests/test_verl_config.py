"""verl_config's checks on a plain dict shaped like verl 0.9.1's config, with no verl installed
(tests/test_train_verl.py runs the same checks on verl's own composed config)."""

from __future__ import annotations

import copy
import re

import pytest

from mad_eval.records import Question
from mad_eval.settings.templates import builtin_templates, load_template
from mad_eval.training import TrainingError
from mad_eval.training import rewards as rewards_module
from mad_eval.training.export import prompt_rows, write_rows
from mad_eval.training.verl_config import MANAGER, check_config, check_train_files, read_settings

CONFIG = {
    "actor_rollout_ref": {
        "rollout": {
            "n": 4,
            "prompt_length": 2048,
            "response_length": 512,
            "agent": {"agent_loop_manager_class": MANAGER},
        }
    },
    "data": {"max_prompt_length": 2048, "max_response_length": 512},
    "trainer": {"use_v1": True},
    "reward": {
        "custom_reward_function": {
            "path": "pkg://mad_eval.training.rewards",
            "name": "compute_score",
        }
    },
    "custom_reward_function": {"path": None, "name": None},
    "reward_model": {"enable": None, "model": {"path": None}, "rollout": {"name": None}},
    "sandbox_fusion": {"url": None},
}


def config(*changes: tuple[str, object]) -> dict:
    """CONFIG with dotted keys set (a value of ... deletes the key)."""
    out = copy.deepcopy(CONFIG)
    for dotted, value in changes:
        *parents, last = dotted.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        if value is ...:
            node.pop(last, None)
        else:
            node[last] = value
    return out


def check(cfg: dict):
    return check_config(cfg, version="0.9.1")


def test_the_recipe_passes_and_its_settings_default_to_the_papers():
    settings = check(config())
    assert (settings.debate.rule, settings.debate.per_prompt, settings.debate.max_length) == (
        "freq",
        1,
        None,
    )
    assert settings.n == 4  # rollout.n
    given = config(("self_debate", {"rule": "random", "per_prompt": 2, "n": 6, "seed": 3}))
    settings = check(given)
    assert (settings.debate.rule, settings.debate.per_prompt, settings.n) == ("rand", 2, 6)


@pytest.mark.parametrize(
    "path",
    [
        "pkg://mad_eval.training.rewards",
        "pkg://mad_eval/training/rewards",
        rewards_module.__file__,
        f"file://{rewards_module.__file__}",
    ],
)
def test_each_way_verl_loads_mad_evals_reward_is_accepted(path):
    assert check(config(("reward.custom_reward_function.path", path))) is not None


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        (
            "custom_reward_function.path",
            "/x/rewards.py",
            "verl 0.9.1's trainer ignores the top-level key custom_reward_function.path (it "
            "would fall back silently); set reward.custom_reward_function.path instead.",
        ),
        ("reward_model.enable", True, "set reward.reward_model.enable instead"),
        ("reward_model.model.path", "/rm", "set reward.reward_model.model_path instead"),
        ("reward_model.rollout.name", "vllm", "set reward.reward_model.rollout.name instead"),
        ("reward_model.model.external_lib", "x", "model.external_lib (it would fall back "),
        ("sandbox_fusion.url", "http://x", "set reward.sandbox_fusion.url instead"),
        ("reward.custom_reward_function.path", None, "need mad-eval's verl reward"),
        ("reward.custom_reward_function.path", "/other/reward.py", "path='/other/reward.py'"),
        ("reward.custom_reward_function.name", "grpo_reward", "name='grpo_reward'"),
        ("actor_rollout_ref.rollout.n", 1, "set actor_rollout_ref.rollout.n to 2 or more, got 1"),
        ("data.max_prompt_length", 1024, "must be above 2 x data.max_response_length (1024)"),
        ("actor_rollout_ref.rollout.prompt_length", 1024, "rollout.prompt_length (1024) must"),
        ("trainer.use_v1", False, "set trainer.use_v1=true, got False"),
        ("self_debate", {"pairs": 2}, "unknown self_debate setting pairs: the settings are"),
        ("self_debate", {"rule": "best"}, "self_debate.rule must be one of rand, freq"),
        ("self_debate", {"per_prompt": 0}, "self_debate.per_prompt must be an integer of 1"),
        ("self_debate", {"per_prompt": True}, "self_debate.per_prompt must be"),
        ("self_debate", {"n": 1}, "self_debate.n must be an integer of 2 or more"),
        ("self_debate", {"max_length": 0}, "self_debate.max_length must be"),
        ("self_debate", {"allow_untested_verl": "yes"}, "self_debate.allow_untested_verl must"),
        ("self_debate", "freq", "self_debate must be a group of settings"),
    ],
)
def test_each_bad_config_is_one_sentence_naming_its_key(key, value, says):
    with pytest.raises(TrainingError) as caught:
        check(config((key, value)))
    message = str(caught.value)
    assert says in message and "\n" not in message


def test_self_debate_settings_without_the_manager_would_be_ignored_so_they_are_refused():
    plain = config(("actor_rollout_ref.rollout.agent.agent_loop_manager_class", ...))
    assert check(plain) is None  # the offline route: verl's own manager, mad-eval's reward
    with pytest.raises(TrainingError, match="read only by the self-debate agent loop manager"):
        check(config(("actor_rollout_ref.rollout.agent.agent_loop_manager_class", ...),
                     ("self_debate", {"rule": "rand"})))  # fmt: skip
    # without the manager, verl's own rules apply: a group of one and short prompts are fine
    assert check(plain | {"data": {"max_prompt_length": 512, "max_response_length": 512}}) is None


def test_only_the_tested_verl_runs_unless_allowed():
    with pytest.raises(TrainingError, match=r"tested with verl 0\.9\.1 only, found 0\.8\.5;"):
        check_config(config(), version="0.8.5")
    allowed = config(("self_debate", {"allow_untested_verl": True}))
    assert check_config(allowed, version="0.8.5") is not None
    with pytest.raises(TrainingError, match="found no verl"):
        check_config(config(), version="")


def test_read_settings_alone_refuses_unknown_keys():
    with pytest.raises(TrainingError, match="unknown self_debate setting bogus"):
        read_settings({"self_debate": {"bogus": 1}})


# --- the training rows the self-debate manager pairs ----------------------------------------


def first_turn_rows(template="debate") -> list[dict]:
    questions = [Question("q1", "What is 2 + 3?", "5"), Question("q2", "What is 3 + 4?", "7")]
    return prompt_rows(questions, "math500", "math", template)


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_first_turn_rows_from_train_prompts_pass(tmp_path, suffix):
    out = tmp_path / f"prompts{suffix}"
    write_rows(first_turn_rows(), out)
    assert check_train_files(config(("data.train_files", [str(out)]))) == 2
    assert check_train_files(config(("data.train_files", "hdfs://far/away.parquet"))) == 0


def test_a_row_without_its_question_is_refused_naming_the_file_and_row(tmp_path):
    rows = first_turn_rows()
    for i, row in enumerate(rows):  # as rows written before issue 33
        row["extra_info"] = {"kind": "math", "index": i}
    out = tmp_path / "old.parquet"
    write_rows(rows, out)
    with pytest.raises(TrainingError, match=r"old\.parquet row 1: the row's extra_info lacks"):
        check_train_files(config(("data.train_files", str(out))))


def test_a_template_that_cannot_build_a_pair_prompt_is_refused_before_any_step(tmp_path):
    """Its first turn renders; its debate turn reads a third agent's reply, which a pair has not."""
    text = (
        builtin_templates()["debate"]
        .read_text(encoding="utf-8")
        .replace(
            "[[debate]]\n",
            '[[debate]]\nrole = "system"\ncontent = "{{ responses[2].text }}"\n\n[[debate]]\n',
            1,
        )
    )
    path = tmp_path / "needs-three.toml"
    path.write_text(text)
    out = tmp_path / "p.jsonl"
    write_rows(first_turn_rows(load_template(str(path))), out)
    with pytest.raises(TrainingError, match=r"p\.jsonl line 1: .*needs-three") as caught:
        check_train_files(config(("data.train_files", str(out))))
    assert "\n" not in str(caught.value)


def test_the_prompt_length_rule_reads_the_pairing_limit_when_it_is_shorter():
    """The paper pairs replies of at most 2,048 tokens out of 8,192: a debate prompt then
    needs above 4,096, not above 16,384."""
    paper = [("data.max_response_length", 8192),
             ("actor_rollout_ref.rollout.response_length", 8192),
             ("self_debate", {"max_length": 2048})]  # fmt: skip
    fits = [("data.max_prompt_length", 5000), ("actor_rollout_ref.rollout.prompt_length", 5000)]
    assert check(config(*paper, *fits)) is not None
    short = [("data.max_prompt_length", 4096), ("actor_rollout_ref.rollout.prompt_length", 5000)]
    with pytest.raises(TrainingError, match=r"above 2 x self_debate.max_length \(4096\)"):
        check(config(*paper, *short))


OVERLONG = [
    ("reward.reward_manager.name", "dapo"),
    ("reward.reward_kwargs.max_resp_len", 512),
    ("reward.reward_kwargs.overlong_buffer_cfg.enable", True),
    ("reward.reward_kwargs.overlong_buffer_cfg.len", 128),
]


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (("reward.reward_manager.name", "naive"), "set reward.reward_manager.name=dapo, got"),
        (("reward.reward_kwargs.max_resp_len", 8192), "must equal data.max_response_length (512)"),
        (("reward.reward_kwargs.max_resp_len", ...), "data.max_response_length (512) for the"),
        (
            ("reward.custom_reward_function.reward_kwargs.overlong_buffer_cfg.len", 8),
            "reaches compute_score, which adds no penalty",
        ),
    ],
)
def test_an_overlong_penalty_verl_would_not_apply_is_refused(change, says):
    """Each of these gave no penalty (or one read against another length) without a word."""
    assert check(config(*OVERLONG)) is not None
    with pytest.raises(TrainingError, match=re.escape(says)):
        check(config(*OVERLONG, change))
