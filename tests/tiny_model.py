"""A tiny random-weight Qwen2 chat model that vLLM can serve, built in seconds with no download.

The tokenizer is a byte-level BPE trained on generated math/debate sentences, with its alphabet
restricted to printable ASCII so that random generations read as text; other characters are
normalized to "?". The weights are random but seeded, so the same seed gives the same model.
head_dim is 32 (hidden 64, 2 heads): vLLM's CPU attention backend rejects smaller head dims.
"""

from __future__ import annotations

import random
import string
from pathlib import Path

from tiny_tokenizer import CHATML
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

EOS = "<|im_end|>"
WORDS = (  # vocabulary of the generated sentences
    "the answer is so we add subtract multiply divide sum product total each step check value "
    "term equation solve problem agent round debate agree disagree other agents solutions "
    "therefore final reason carefully update your response number of apples cost more than less "
    "twice half percent first second third remaining left after user assistant system you are "
    "a helpful put your in the form at end of"
)


def corpus(n: int = 3000, seed: int = 0) -> list[str]:
    """Sentences that look like debate prompts and replies: words, numbers, arithmetic, LaTeX."""
    rng = random.Random(seed)
    vocab = WORDS.split()
    out = []
    for _ in range(n):
        a, b = rng.randint(0, 999), rng.randint(1, 99)
        words = " ".join(rng.choices(vocab, k=rng.randint(4, 12))).capitalize()
        out.append(
            rng.choice(
                [
                    f"Problem: What is {a} + {b}? Reason step by step.",
                    f"{words} {a} - {b} = {a - b}.",
                    f"{words}, so {a} \\times {b} = {a * b}.",
                    f"Therefore the answer is \\boxed{{{a % 100}}}.",
                    f"$\\frac{{{a}}}{{{b}}}$ {words}: {a / b:.2f}",
                    f"{words}.\nAnswer: {a}",
                    f"These are the solutions from other agents: {words} \\boxed{{{b}}}",
                ]
            )
        )
    return out


def train_tokenizer(vocab_size: int = 800) -> PreTrainedTokenizerFast:
    """Byte-level BPE over printable ASCII only, with a ChatML chat template."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.Replace(Regex(r"[^\t\n\r -~]"), "?")
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    ascii_bytes = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    ((alphabet, _),) = ascii_bytes.pre_tokenize_str(string.printable)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|im_start|>", EOS],
        initial_alphabet=sorted(set(alphabet)),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=EOS)
    fast.chat_template = CHATML
    return fast


def build_tiny_model(path: Path, seed: int = 0) -> Path:
    """Write tokenizer, config, generation config and seeded random weights into `path`."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    path = Path(path)
    tokenizer = train_tokenizer()
    eos_id = tokenizer.convert_tokens_to_ids(EOS)
    config = Qwen2Config(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        vocab_size=len(tokenizer),
        tie_word_embeddings=True,
        max_position_embeddings=1024,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=eos_id,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=eos_id, pad_token_id=eos_id)
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path
