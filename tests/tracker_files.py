"""Reading back what trackers wrote locally: W&B's offline run files (its transaction log of
protobuf records) and an MLflow store through MLflowClient."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BLOCK = 32768  # W&B's log is LevelDB's format: 32 KiB blocks of chunked records
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


@dataclass
class WandbRun:
    folder: Path
    id: str = ""
    name: str = ""
    project: str = ""
    group: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    artifacts: list[tuple[str, str, list[str]]] = field(default_factory=list)  # name, type, paths


def records(path: Path) -> list[bytes]:
    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is no W&B run file"
    found, pos, parts = [], 7, b""
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        if left < 7:  # a block's tail too short for a header is padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0 and length == 0:
            pos += left
            continue
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind == FULL:
            found.append(chunk)
        elif kind == FIRST:
            parts = chunk
        elif kind == MIDDLE:
            parts += chunk
        elif kind == LAST:
            found.append(parts + chunk)
    return found


def _key(item: Any) -> str:
    return item.key or "/".join(item.nested_key)


def wandb_runs(folder: Path) -> list[WandbRun]:
    """Every offline run W&B wrote under `folder` (its wandb/ folder), oldest first."""
    from wandb.proto import wandb_internal_pb2 as pb

    runs = []
    for path in sorted(Path(folder).glob("offline-run-*/run-*.wandb")):
        run = WandbRun(path.parent)
        for data in records(path):
            record = pb.Record()
            record.ParseFromString(data)
            kind = record.WhichOneof("record_type")
            if kind == "run":
                r = record.run
                run.id, run.name, run.project, run.group = (
                    r.run_id,
                    r.display_name,
                    r.project,
                    r.run_group,
                )
                run.config |= {i.key: json.loads(i.value_json) for i in r.config.update}
            elif kind == "config":
                run.config |= {i.key: json.loads(i.value_json) for i in record.config.update}
            elif kind == "summary":
                run.summary |= {_key(i): json.loads(i.value_json) for i in record.summary.update}
            elif kind == "history":
                run.history.append({_key(i): json.loads(i.value_json) for i in record.history.item})
            elif kind == "artifact":
                a = record.artifact
                run.artifacts.append((a.name, a.type, [c.path for c in a.manifest.contents]))
        runs.append(run)
    return runs
