"""The toy world (`decoevo.testing.world`) as an OpenAI-compatible HTTP server, for CLI-level tests and
for trying the command line without a model: `python -m decoevo.testing.toy_server` serves the model `toy`
on http://127.0.0.1:8000/v1 (aiohttp, so the plain wheel runs it); `--write-questions FILE` writes questions
its world answers.

Unlike a bare `world.respond`, it answers repair requests: a conversation that ends with the rejected
reply and the client's request to answer again (`decoevo.lm.structured.repair_messages`) gets the answer
to the original conversation, as a capable model that repairs its output would give. That makes a run
whose outputs were broken in transit (`fault_proxy`) and repaired end where a fault-free run ends.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
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


def _malformed(body: Any) -> str | None:
    """What makes a request one the toy world cannot answer (None: it can); the client's mistake is a
    400 naming it, as a real server answers, not a 500 with a traceback in the server's log."""
    if not isinstance(body, dict):
        return "the request body is not a JSON object"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "the request has no 'messages' (a non-empty list of {role, content})"
    if not all(isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
               for m in messages):
        return "each of 'messages' must be an object with a string 'role' and 'content'"
    if not isinstance(body.get("response_format") or {}, dict):
        return "'response_format' must be an object"
    if not all(isinstance(body.get(k) or 0, (int, float)) for k in ("temperature", "seed")):
        return "'temperature' and 'seed' must be numbers"
    return None


def toy_reply(body: dict[str, Any], n: int, delay_s: float = 0.0) -> Reply:
    problem = _malformed(body)
    if problem is not None:
        return Reply(status=400, error_message=problem)
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


def _bad_argument(args: argparse.Namespace) -> str | None:
    """What is wrong with a flag, in one line, before anything is written or bound (None: nothing)."""
    if not 0 <= args.port <= 65535:
        return f"--port {args.port}: a port is a whole number from 0 to 65535 (0 picks a free one)"
    if not (math.isfinite(args.delay) and args.delay >= 0):
        return f"--delay {args.delay}: give a number of seconds, 0 or more"
    if args.write_questions is not None and args.write_questions.is_dir():
        return f"--write-questions {args.write_questions}: is a directory; name the file to write (JSONL)"
    return None


def main(argv: list[str] | None = None) -> int:
    """Serve the toy world until interrupted (Ctrl-C)."""
    parser = argparse.ArgumentParser(prog="python -m decoevo.testing.toy_server",
                                     description="The toy world as an OpenAI-compatible server serving the model "
                                     "'toy': a stand-in for trying decoevo without a model.")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default: 8000; 0 picks a free one)")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds each answer takes (default: 0)")
    parser.add_argument("--write-questions", type=Path, metavar="FILE",
                        help="write 16 questions the toy world answers to FILE (JSONL) and exit")
    args = parser.parse_args(argv)
    problem = _bad_argument(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if args.write_questions is not None:
        try:
            write_toy_questions(args.write_questions)
        except OSError as exc:
            print(f"error: --write-questions {args.write_questions}: cannot write it "
                  f"({exc.strerror or exc}); name a file in an existing directory", file=sys.stderr)
            return 2
        print(f"wrote 16 toy questions to {args.write_questions}")
        return 0
    import asyncio

    from aiohttp import web

    async def serve() -> None:
        runner = web.AppRunner(toy_server(args.delay).web_app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, args.host, args.port)
        await site.start()
        port = runner.addresses[0][1]
        url = f"http://{args.host}:{port}/v1"
        print(f"toy server: model 'toy' at {url} (Ctrl-C stops it)\n"
              f"try: decoevo doctor --base-url {url} --model toy", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
