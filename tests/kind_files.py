"""Small local files in the shape of each non-math benchmark's source (the fields the specs
read), written by hand for the tests: GSM8K, CommonsenseQA, HellaSwag, HH-RLHF, CNN/DailyMail."""

from __future__ import annotations

import json
from pathlib import Path

GSM8K = [
    {
        "question": "Mia buys 3 boxes of 12 pencils and gives 5 away. How many does she keep?",
        "answer": (
            "She buys 3 * 12 = <<3*12=36>>36 pencils.\nShe keeps 36 - 5 = <<36-5=31>>31.\n#### 31"
        ),
    },
    {
        "question": "A farm sells 250 crates of 5 melons. How many melons is that?",
        "answer": "250 * 5 = <<250*5=1250>>1250 melons.\n#### 1,250",
    },
    {
        "question": "Tom walks 15 km in 2 hours. How many km does he walk per hour?",
        "answer": "15 / 2 = <<15/2=7.5>>7.5\n#### 7.5",
    },
]

COMMONSENSE_QA = [
    {
        "id": "csqa-a",
        "question": "Where would you keep milk so that it stays cold?",
        "question_concept": "milk",
        "choices": {
            "label": ["A", "B", "C", "D", "E"],
            "text": ["cupboard", "oven", "refrigerator", "garden", "mailbox"],
        },
        "answerKey": "C",
    },
    {
        "id": "csqa-b",
        "question": "What do people usually use to cut paper?",
        "question_concept": "paper",
        "choices": {
            "label": ["A", "B", "C", "D", "E"],
            "text": ["scissors", "spoon", "pillow", "bucket", "ladder"],
        },
        "answerKey": "A",
    },
    {
        "id": "csqa-c",
        "question": "Where does a pilot work?",
        "question_concept": "pilot",
        "choices": {
            "label": ["A", "B", "C", "D", "E"],
            "text": ["bakery", "library", "farm", "submarine", "cockpit"],
        },
        "answerKey": "E",
    },
]

HELLASWAG = [
    {
        "ind": 11,
        "activity_label": "Making tea",
        "ctx": "A woman fills a kettle with water and sets it on the stove. She",
        "endings": [
            "paints the kettle blue.",
            "waits for the water to boil.",
            "throws the stove out of the window.",
            "reads the kettle a story.",
        ],
        "label": "1",
    },
    {
        "ind": 12,
        "activity_label": "Washing a car",
        "ctx": "A man sprays soapy water over his car. He",
        "endings": [
            "eats the sponge.",
            "drives the car into a lake.",
            "scrubs the doors with a sponge.",
            "sings to the tyres.",
        ],
        "label": "2",
    },
]


def hh_row(i: int) -> dict[str, str]:
    """An HH-RLHF-style pair: two whole transcripts that differ in the last reply."""
    talk = f"\n\nHuman: How long should I boil egg number {i}?"
    return {
        "chosen": f"{talk}\n\nAssistant: About nine minutes for a firm yolk.",
        "rejected": f"{talk}\n\nAssistant: Eggs cannot be boiled.",
    }


def cnn_row(i: int) -> dict[str, str]:
    sentences = [
        f"The harbour of town {i} reopened on Monday after a storm closed it for a week.",
        f"Mayor Lee {i} said the fishing fleet lost about {10 + i} boats.",
        "Repairs to the sea wall will take until the spring.",
        "Residents gathered on the quay to watch the first ferry arrive.",
        "A local bakery handed out free bread to the crews.",
        "The storm was the worst the region has seen in forty years.",
        "Insurance claims are expected to pass two million pounds.",
    ]
    highlights = "\n".join(sentences[:2])
    return {"id": f"cnn-{i}", "article": " ".join(sentences), "highlights": highlights}


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def write_all(folder: Path, hh: int = 6, cnn: int = 3) -> Path:
    """Every kind's local file, under the names the specs give."""
    folder.mkdir(parents=True, exist_ok=True)
    write_jsonl(folder / "gsm8k.jsonl", GSM8K)
    write_jsonl(folder / "commonsense_qa.jsonl", COMMONSENSE_QA)
    write_jsonl(folder / "hellaswag.jsonl", HELLASWAG)
    write_jsonl(folder / "hh_rlhf.jsonl", [hh_row(i) for i in range(hh)])
    write_jsonl(folder / "cnn_dailymail.jsonl", [cnn_row(i) for i in range(cnn)])
    return folder
