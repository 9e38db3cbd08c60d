"""Issue 44.1: an export is data, never code, through the real tools.

A toy run's bundle is given hostile text in every field a model, a question file or a path supplies (the two
skills, every question, every criterion, a test's description, a question id, the run's path), then exported to
promptfoo and to Inspect AI, and each tool runs its export against a recording server: no payload runs (no
marker file appears), no file is loaded into a text, and every text reaches the model byte for byte, in exactly
the messages decoevo's own solver and judge send.

The payloads are those found by the outside audit (a nunjucks escape from `{% raw %}` reaching `process`,
`file://` and `package:` values, YAML and Python delimiters, newlines, NUL, right-to-left marks, a 1 MiB text)
and texts drawn from the same fragments by a seeded generator."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.domain import Criterion, Question, QuestionView, Rubric, Skill, Turn
from decoevo.interop.bundle import Bundle, gather_bundle, solver_system
from decoevo.interop.inspect_out import write_inspect
from decoevo.interop.outdir import OutDir
from decoevo.interop.promptfoo_out import write_promptfoo
from decoevo.interop.promptfoo_text import display_text
from decoevo.roles.judge import SYSTEM as JUDGE_SYSTEM
from decoevo.roles.judge import criterion_messages, joint_messages
from decoevo.roles.solve import BASE_INSTRUCTIONS
from decoevo.testing.fake_openai import FakeOpenAI, Reply
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_reply, toy_run_args, write_toy_questions

from .interop_helpers import HAS_INSPECT, HAS_PROMPTFOO, INSPECT, PROMPTFOO, tool_env


def payloads(marker: Path) -> list[str]:
    """Texts that, handed to a tool as code, create a file under `marker` (or read one into the text)."""
    js = f"global.process.mainModule.require('fs').writeFileSync('{marker}-nunjucks', 'x')"
    expr = "{{ range.constructor(\"" + js + "\")() }}"
    return [
        expr,
        "{% endraw %}" + expr + "{% raw %}",
        "{%- endraw -%}" + expr.replace("nunjucks", "endraw-trim") + "{%- raw -%}",
        "{# " + expr + " #}{% set x = 1 %}{{ env.HOME }}",
        "file://evil.js",
        "file:///etc/passwd",
        "file://../evil.js:run",
        "package:fs:writeFileSync",
        "{{ question }} and {{question}} and {{ decoevo_judge_question }}",
        "ends with a newline\n",
        'key: value\n- item\n---\n"quoted" \'single\' #comment &anchor *alias !!python/object:os.system',
        '"""\nimport os; os.system("touch ' + str(marker) + '-python")\n"""',
        "'''\n__import__('os').system('touch " + str(marker) + "-python2')\n'''",
        "back\\slash \\n \\u0041 \\x41 {% raw %}",
        "nul\x00byte and \r carriage \x0b vertical \u2028 line \u2029 para \x85 next",
        "right\u202eto\u202cleft \ufeff bom \u200b zero-width",
        "¤ ¤0 ¤1 ¤¤2 ¤3¤4 escapes of the encoding itself",
        "<question>\n</response>\n> margin",
        "${HOME} $(touch " + str(marker) + "-shell) `touch " + str(marker) + "-tick`",
    ]


FRAGMENTS = ("{{", "}}", "{%", "%}", "{#", "#}", "raw", "endraw", "file://", "package:", "\n", "\r\n", '"', "'",
             "\\", "¤", "¤0", "¤1", ": ", "- ", "---", "#", "&", "*", "!!", "\x00", "\u202e", "$", "`", " ", "x",
             "question", "output", "rubric", "env.HOME")


def drawn(n: int, seed: int = 44) -> list[str]:
    """`n` texts drawn from the fragments above (seeded, so a failure reproduces)."""
    rng = random.Random(seed)
    return ["".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 14))) for _ in range(n)]


class Recorder:
    """The toy world's server; once `hostile` is set, a solver request gets a one-line answer of its own."""

    def __init__(self) -> None:
        self.hostile = False
        self.server = FakeOpenAI(self.reply, models=("toy",))

    def reply(self, body: dict[str, Any], n: int) -> Reply:
        system = body["messages"][0]["content"] if body["messages"][0]["role"] == "system" else ""
        if self.hostile and isinstance(system, str) and system.startswith(BASE_INSTRUCTIONS):
            return Reply(content=answer_to(body["messages"][-1]["content"]))
        return toy_reply(body, n)

    def requests(self, system_prefix: str) -> list[list[dict[str, Any]]]:
        return [r["messages"] for r in self.server.requests
                if r["messages"] and str(r["messages"][0].get("content", "")).startswith(system_prefix)]


def answer_to(question: str) -> str:
    return f"My answer to a question of {len(question)} characters."


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory):
    """A toy run, and its bundle with hostile text in every field, served by the recorder."""
    tmp = tmp_path_factory.mktemp("hostile")
    recorder = Recorder()
    with pytest.MonkeyPatch.context() as env, serve_app(recorder.server.app()) as url:
        env.setenv("DECOEVO_CACHE", str(tmp / "cache.sqlite"))
        data = write_toy_questions(tmp / "q.jsonl")
        args = toy_run_args(f"{url}/v1", data, tmp / "runs", "toy", steps=1,
                            sets=("splits={train: 6, probe: 2, solver_gate: 3, generator_gate: 3, test: 2}",))
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        recorder.hostile = True
        base = asyncio.run(gather_bundle(tmp / "runs" / "toy"))
        marker = tmp / "pwned"
        texts = [*payloads(marker), *drawn(12), "a 1 MiB text " + "0123456789abcdef" * 65536]
        bundle = dataclasses.replace(
            base,
            shipped=Skill(kind="solver", version=3, text=" ".join(texts[:3]) + "\n" + texts[11]),
            initial=Skill(kind="solver", version=0, text=texts[1] + texts[4]),
            questions=tuple(Question(id=f"h{i:02d}" if i % 5 else f"{text[:40]}#{i}",
                                     turns=(Turn(role="user", content=text),),
                                     meta={"promptfoo": {"description": texts[(i + 3) % len(texts)][:200]}})
                            for i, text in enumerate(texts)),
        )
        rubrics = {q.id: Rubric(question_id=q.id, generator_version=2, criteria=(
            Criterion(text=texts[(i + 1) % len(texts)][:5000] or "x", weight=2.0),
            Criterion(text="Says when to see a doctor " + texts[(i + 7) % len(texts)][:300], weight=1.0)))
            for i, q in enumerate(bundle.questions)}
        bundle = dataclasses.replace(bundle, rubrics=rubrics, run=str(tmp / 'run"""\n{{ x }}\nname'))
        yield tmp, bundle, recorder, marker


def markers(tmp: Path, cwd: Path) -> list[Path]:
    planted = [p for p in tmp.iterdir() if p.name.startswith("pwned")]
    # `package:fs:writeFileSync` would write a file named after the variable into the working directory
    named = [cwd / name for name in ("question", "decoevo_judge_question", "rubric") if (cwd / name).exists()]
    return planted + named


def expected_judge_messages(bundle: Bundle, q: Question, answer: str, mode: str) -> list[list[dict[str, str]]]:
    view = QuestionView.from_text(q.id, q.as_text())
    rubric = bundle.rubrics[q.id]
    if mode == "joint":
        return [[m.as_dict() for m in joint_messages(view, answer, rubric)]]
    return [[m.as_dict() for m in criterion_messages(view, answer, c.text)] for c in rubric.criteria]


@pytest.mark.skipif(not HAS_PROMPTFOO, reason="promptfoo is not installed (scripts/install.sh --dev with node)")
def test_promptfoo_runs_a_hostile_export_as_data(hostile) -> None:
    tmp, bundle, recorder, marker = hostile
    out = tmp / "pf"
    write_promptfoo(bundle, OutDir(out))
    for folder in (out, tmp):  # a `file://evil.js` that was loaded would run this
        (folder / "evil.js").write_text(f"require('fs').writeFileSync('{marker}-evil', 'x');\n"
                                        "module.exports = () => ({ output: 'evil' });\n")
    before = len(recorder.server.requests)
    proc = subprocess.run([str(PROMPTFOO), "eval", "-c", "promptfooconfig.yaml", "-o", str(tmp / "pf.json"),
                           "--no-cache", "--no-table", "--max-concurrency", "4"], cwd=out, env=tool_env(tmp),
                          capture_output=True, text=True, timeout=600)
    assert (tmp / "pf.json").exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    assert markers(tmp, out) == []
    rows = json.loads((tmp / "pf.json").read_text())["results"]["results"]
    assert len(rows) == 2 * len(bundle.questions)
    # every answer graded on every criterion (a test under its threshold also fills `error`: not a failure here)
    assert not [r["error"] for r in rows if r.get("error") and "threshold" not in r["error"]]
    assert all(isinstance(c["score"], int | float) for r in rows for c in r["gradingResult"]["componentResults"])
    sent = [r["messages"] for r in recorder.server.requests[before:]]
    # the solver saw each skill's system message and each question, byte for byte
    solver = sorted((m[0]["content"], m[1]["content"]) for m in sent if m[0]["content"].startswith(BASE_INSTRUCTIONS))
    assert solver == sorted((solver_system(s), q.as_text()) for s in (bundle.shipped, bundle.initial)
                            for q in bundle.questions)
    # the grader sent decoevo's own judge messages: the question, the answer and each criterion as decoevo quotes
    # them (the answers are one line, so the answer's quoting is the same as decoevo's too)
    judged = [m for m in sent if m[0]["content"] == JUDGE_SYSTEM]
    want = [msgs for q in bundle.questions for msgs in expected_judge_messages(bundle, q, answer_to(q.as_text()),
                                                                                "per_criterion")]
    assert sorted(map(json.dumps, judged)) == sorted(map(json.dumps, want * 2))  # each, under both skills
    # a test's description and metadata are shown as they are (a leading `file://` or `package:` after a space)
    described = {r["testCase"]["metadata"]["decoevo_question_id"]: r["testCase"]["description"] for r in rows}
    assert described == {display_text(q.id): display_text(q.meta["promptfoo"]["description"])
                         for q in bundle.questions}


@pytest.mark.skipif(not HAS_INSPECT, reason="inspect-ai is not installed (pip install 'decoevo[inspect]')")
def test_inspect_runs_a_hostile_export_as_data(hostile) -> None:
    tmp, bundle, recorder, _ = hostile
    out = tmp / "insp"
    write_inspect(bundle, OutDir(out))
    task = (out / "task.py").read_text()
    assert bundle.run not in task and "pwned" not in task  # nothing of the run is Python source
    # an edited system prompt tried without touching decoevo.json: every byte of the file is the system message
    edited = solver_system(bundle.shipped) + "\n" + payloads(tmp / "pwned")[1] + "\r\n\x00 ¤1 end\n"
    (tmp / "edited.txt").write_bytes(edited.encode("utf-8"))
    before = len(recorder.server.requests)
    logs = tmp / "inspect-logs"
    proc = subprocess.run([str(INSPECT), "eval", "task.py", "--log-format", "json", "--log-dir", str(logs),
                           "--display", "none", "--max-connections", "4", "-T", f"system_prompt={tmp / 'edited.txt'}"],
                          cwd=out, env=tool_env(tmp),
                          capture_output=True, text=True, timeout=600)
    found = list(logs.glob("*.json"))
    assert len(found) == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert markers(tmp, out) == []
    log = json.loads(found[0].read_text())
    assert log["status"] == "success", str(log.get("error"))[:2000]
    sent = [r["messages"] for r in recorder.server.requests[before:]]
    solver = sorted((m[0]["content"], m[-1]["content"]) for m in sent if m[0]["content"].startswith(BASE_INSTRUCTIONS))
    assert solver == sorted((edited, q.as_text()) for q in bundle.questions)
    judged = [m for m in sent if m[0]["content"] == JUDGE_SYSTEM]
    mode = bundle.judge_mode
    want = [msgs for q in bundle.questions for msgs in expected_judge_messages(bundle, q, answer_to(q.as_text()),
                                                                                mode)]
    # decoevo's judge may have answered some from its cache; every request sent is one decoevo's judge writes
    assert judged and {json.dumps(m) for m in judged} <= {json.dumps(m) for m in want}
    assert {s["id"] for s in log["samples"]} == {q.id for q in bundle.questions}
    assert all(s["scores"]["decoevo_judge"]["value"] is not None for s in log["samples"])
