"""Writes the example archive of examples/replay/traces: sessions of an assistant that searches,
reads files, pays and mails, some reading untrusted pages (a fixed seed, so the files are
always the same). `python examples/replay/make_traces.py` writes them again."""

import gzip
import json
import random
from pathlib import Path

TOOLS = ("search", "read_file", "pay", "send_email", "run_shell")


def session(rng: random.Random, name: str) -> dict:
    events = [{"id": "u", "kind": "user_message", "text": "please help"}]
    for i in range(rng.randint(2, 8)):
        if rng.random() < 0.5:
            event = {"id": f"r{i}", "kind": "tool_result", "tool": "search", "text": "a page"}
            if rng.random() < 0.35:
                event["labels"] = ["untrusted"]
        else:
            tool = rng.choices(TOOLS, weights=(4, 3, 3, 3, 1))[0]
            event = {"id": f"c{i}", "kind": "tool_call", "tool": tool, "args": {"n": i}}
        event["deps"] = [events[-1]["id"]]
        events.append(event)
    return {"session": name, "events": events}


def main() -> None:
    rng = random.Random(2026)
    folder = Path(__file__).parent / "traces"
    folder.mkdir(exist_ok=True)
    week1 = [session(rng, f"w1-{n}") for n in range(30)]
    week2 = [session(rng, f"w2-{n}") for n in range(30)]
    (folder / "week1.jsonl").write_text("".join(json.dumps(s) + "\n" for s in week1), "utf-8")
    text = "".join(json.dumps(s) + "\n" for s in week2).encode()
    (folder / "week2.jsonl.gz").write_bytes(gzip.compress(text, mtime=0))


if __name__ == "__main__":
    main()
