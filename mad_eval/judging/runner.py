"""A run's debate turns judged to the end: the judge's settings checked, its backend built
behind the same guard as the agents', verdicts appended to judge.jsonl (resumed there)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mad_eval.debate.execute import close_cache
from mad_eval.debate.plan import check_extra_body, judge_backend
from mad_eval.debate.replay import run_questions
from mad_eval.judging.critique import Judge, judge_cases, parse_rounds, pending
from mad_eval.progress import Listener
from mad_eval.records import Setting
from mad_eval.sanitize import remember
from mad_eval.settings.config import ConfigError, RunConfig, operational_defaults
from mad_eval.settings.keywords import as_text, check_names, check_types, endpoints
from mad_eval.settings.roster import parse_extra_body
from mad_eval.store.files import StoreError
from mad_eval.store.folder import FolderLock, RunStore
from mad_eval.store.names import LOCK_FILE
from mad_eval.words import counted


async def judge_run(
    root: Path,
    model: str,
    settings: Mapping[str, Any],
    operational: Mapping[str, Any],
    listener: Listener,
) -> None:
    """Judge the run in `root` with `model`; `settings` are api.judge's own keywords."""
    check_names(operational, operational_defaults(), "the judge")
    check_types(operational, "the judge")
    ops = {**operational_defaults(), **as_text(operational)}
    s = dict(settings)
    body = (
        s["extra_body"] if isinstance(s["extra_body"], dict) else parse_extra_body(s["extra_body"])
    )
    setting = Setting(
        model,
        s["reference"],
        s["temperature"],
        s["top_p"],
        s["max_tokens"],
        s["seed"],
        body or None,
    )
    store = RunStore(root)
    if not store.holds_run(root) and (store.root / LOCK_FILE).is_file():
        # A run that has just begun holds its lock before it writes its manifest: say the
        # folder is in use, not that it holds no run.
        probe = FolderLock(store.root)
        probe.acquire()
        probe.release()
    manifest = store.manifest()
    turns = store.turns()
    total = manifest.config.rounds
    if total == 0:
        raise StoreError(f"{root} has no debate rounds (T = 0): there is no critique to judge.")
    limit = s["limit"]
    if limit is not None and limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {limit}.")
    chosen = parse_rounds(s["rounds"], total)
    config = RunConfig(
        model=model,
        temperature=s["temperature"],
        top_p=s["top_p"],
        max_tokens=s["max_tokens"],
        seed=s["seed"],
        base_urls=endpoints(ops["base_url"]),
        concurrency=ops["concurrency"],
        timeout=ops["timeout"],
        retries=ops["retries"],
        backoff=ops["backoff"],
        cache=ops["cache"] or None,
        extra_body=body,
    )
    config.validate()
    remember(config.to_dict())  # a server that echoes them must not have them recorded
    data_dir = Path(s["data_dir"]) if s["data_dir"] else None
    questions = run_questions(store.root, manifest, data_dir)
    cases, skipped = judge_cases(manifest, turns, questions, chosen, limit, s["reference"])
    backend, cache = judge_backend(
        model, config, lambda text: listener.warn("warning", text), listener.retried
    )

    log = store.judge_log()
    try:
        todo = pending(cases, log.open(setting))
        await backend.check()
        await check_extra_body(backend, model, body)
        listener.say(
            f"Judging {counted(len(cases), 'debate turn')} of {store.root} (rounds "
            f"{', '.join(map(str, chosen))}) with {setting.describe()}"
            + (f"; {len(cases) - len(todo)} already judged" if len(todo) < len(cases) else "")
        )
        for reason, count in skipped.items():
            listener.warn("skipped", f"{count} {'turn' if count == 1 else 'turns'}: {reason}.")
        with listener.tracking([("judging", len(todo), "verdicts")]) as (advance,):
            judge = Judge(backend, setting, log.append, lambda: advance(1))
            await judge.run(todo)
    finally:
        await backend.aclose()
        log.close()
        close_cache(cache, listener)
    listener.say(f"Verdicts: {log.path}")
