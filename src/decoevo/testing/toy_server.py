"""The toy world (`decoevo.testing.world`) as an OpenAI-compatible HTTP server, for CLI-level tests.

Unlike a bare `world.respond`, it answers repair requests: a conversation that ends with the rejected
reply and the client's request to answer again (`decoevo.lm.structured.repair_messages`) gets the answer
to the original conversation, as a capable model that repairs its output would give. That makes a run
whose outputs were broken in transit (`fault_proxy`) and repaired end where a fault-free run ends.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import world
from .fake_openai import FakeOpenAI, Reply

REPAIR_PREFIX = "That reply could not be used"


def unwrap_repair(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The original conversation of a repair request (the messages themselves for any other request)."""
    if (len(messages) >= 3 and messages[-2]["role"] == "assistant" and messages[-1]["role"] == "user"
            and str(messages[-1]["content"]).startswith(REPAIR_PREFIX)):
        return messages[:-2]
    return messages


def toy_reply(body: dict[str, Any], n: int, delay_s: float = 0.0) -> Reply:
    messages = unwrap_repair(body["messages"])
    return Reply(content=world.respond(messages, world.schema_of(body), world.sample_index_of(body)),
                 delay_s=delay_s)


def toy_server(delay_s: float = 0.0) -> FakeOpenAI:
    """The toy world's server; `delay_s`: each answer takes that long (requests overlap in flight)."""
    return FakeOpenAI(lambda body, n: toy_reply(body, n, delay_s), models=("toy",))  # the model `toy_run_args` asks for


def write_toy_questions(path: Path, n: int = 16) -> Path:
    """A JSONL question file for the toy world (the same questions as the engine tests use)."""
    gold = {"scheme": "weighted", "items": list(world.GOLD_ITEMS)}
    path.write_text("".join(json.dumps({"id": f"q{i:02d}", "prompt": f"My knee hurts after running, case {i}. "
                                        "What should I do?", "gold": gold}) + "\n" for i in range(n)),
                    encoding="utf-8")
    return path


def toy_run_args(base_url: str, data: Path, runs_root: Path, name: str, *, steps: int = 3, seed: int = 3,
                 sets: tuple[str, ...] = ()) -> list[str]:
    """`decoevo run` arguments for a small DecoEvo run on the toy world served at `base_url` (…/v1)."""
    args = ["run", "--base-url", base_url, "--model", "toy", "--data", str(data), "--task", "healthbench",
            "--preset", "default", "--runs-root", str(runs_root), "--name", name, "--seeds", str(seed),
            "--set", "splits={train: 6, probe: 2, solver_gate: 3, generator_gate: 3, test: 0}",
            "--set", f"hyper={{steps: {steps}, batch_size: 2, audit_every: 1, rollouts: 4}}"]
    for item in sets:
        args += ["--set", item]
    return args
