"""Official grader prompts: fetched from their pinned upstream file (here a synthetic file of the same
shape served on 127.0.0.1 through DECOEVO_DATA_MIRROR, since the repository holds none of their text),
used verbatim, and their replies parsed as the official scorer parses them."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from typer.testing import CliRunner

from decoevo.benchmarks import BENCHMARKS, BY_SCHEME, templates
from decoevo.benchmarks.record import TemplateSource
from decoevo.cli import app
from decoevo.errors import ConfigError
from decoevo.fileio import sha256_file
from decoevo.testing.fake_openai import FakeOpenAI, Reply
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

from .data_helpers import unpinned
from .result_files import result_file

runner = CliRunner()
SAMPLE = Path(__file__).resolve().parents[1] / "src" / "decoevo" / "data" / "healthbench_sample.jsonl"

# Synthetic stand-ins with the upstream files' shape: a module-level string with the two placeholders,
# and a module-level system message. None of this is the official wording.
SYNTHETIC_GRADER = '''import json

GRADER_TEMPLATE = """
SYNTHETIC-PROMPT start
<<conversation>>
SYNTHETIC-ITEM <<rubric_item>>
SYNTHETIC-PROMPT end
""".strip()


def unrelated():
    return 1
'''
SYNTHETIC_SYSTEM = 'OPENAI_SYSTEM_MESSAGE_API = "SYNTHETIC-SYSTEM"\n'


class Files:
    def __init__(self, root: Path) -> None:
        self.root = root

    def put(self, url: str, text: str) -> Path:
        parts = urlsplit(url)
        dest = self.root / parts.netloc / parts.path.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text, encoding="utf-8")
        return dest


@pytest.fixture
def mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Files]:
    files = Files(tmp_path / "mirror")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return None

        def do_GET(self) -> None:
            path = files.root / self.path.lstrip("/")
            if not path.is_file():
                self.send_error(404)
                return
            body = path.read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("DECOEVO_DATA_MIRROR", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setenv("DECOEVO_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
    try:
        yield files
    finally:
        server.shutdown()
        server.server_close()


def publish_synthetic(files: Files, monkeypatch: pytest.MonkeyPatch, grader: str = SYNTHETIC_GRADER) -> None:
    """Serve the synthetic files at the upstream URLs and pin their checksums, as if upstream held them."""
    bench = BENCHMARKS["healthbench"]
    pinned = []
    for src in bench.official_prompts:
        path = files.put(src.url, grader if src.key == "grader" else SYNTHETIC_SYSTEM)
        pinned.append(replace(src, sha256=sha256_file(path)))
    patched = replace(bench, official_prompts=tuple(pinned))
    monkeypatch.setitem(BENCHMARKS, "healthbench", patched)
    monkeypatch.setitem(BY_SCHEME, "healthbench", patched)


def test_extraction_reads_literals_only() -> None:
    src = TemplateSource("p", "https://x/y.py", None, "python_function", "build_prompt", ("<<response>>",))
    code = (
        'def build_prompt(response, questions):\n    prompt = (\n        "A\\n"\n        f"R: {response}\\n"\n'
        '        "Q:\\n" + "\\n".join(questions) + "\\nEnd"\n    )\n    return prompt\n'
    )
    assert templates.extract(src, code) == "A\nR: <<response>>\nQ:\n<<questions>>\nEnd"
    with pytest.raises(ConfigError, match="lacks <<response>>"):
        templates.extract(src, 'def build_prompt(r):\n    return "no placeholder"\n')
    with pytest.raises(ConfigError, match="not a plain string"):
        templates.extract(src, "def build_prompt(r):\n    return open(r).read()\n")


def test_the_real_pin_refuses_a_file_that_is_not_upstream(mirror: Files) -> None:
    bench = BENCHMARKS["healthbench"]
    for src in bench.official_prompts:
        mirror.put(src.url, SYNTHETIC_GRADER if src.key == "grader" else SYNTHETIC_SYSTEM)
    with pytest.raises(ConfigError, match="does not match"):
        templates.fetch_templates(bench)
    assert not templates.fetched(bench)


def test_a_template_of_another_shape_is_refused(mirror: Files, monkeypatch: pytest.MonkeyPatch) -> None:
    publish_synthetic(mirror, monkeypatch, grader='GRADER_TEMPLATE = "only <<conversation>>"\n')
    with pytest.raises(ConfigError, match="lacks <<rubric_item>>"):
        templates.fetch_templates(BENCHMARKS["healthbench"])
    assert not templates.fetched(BENCHMARKS["healthbench"])


SEEN: set[str] = set()


def _grader_reply(body: dict[str, Any], n: int) -> Reply:
    # the first answer to each item is unparseable (the official scorer asks again), then a fenced verdict
    user = body["messages"][-1]["content"]
    if user not in SEEN:
        SEEN.add(user)
        return Reply(content="I think it is met.")
    met = "SYNTHETIC-ITEM [-" not in user  # penalties not met, every other item met
    return Reply(content=f"```json\n{json.dumps({'explanation': 'x', 'criteria_met': met})}\n```")


def test_official_template_fetched_from_127_0_0_1_is_used_verbatim(
    mirror: Files, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish_synthetic(mirror, monkeypatch)
    monkeypatch.chdir(tmp_path)
    fetched = templates.fetch_templates(BENCHMARKS["healthbench"])
    assert sorted(fetched) == ["chat_completion_sampler.py", "healthbench_eval.py"]
    assert templates.fetch_templates(BENCHMARKS["healthbench"]) == []  # here and verified: nothing downloaded

    data = write_toy_questions(tmp_path / "toy.jsonl")
    grader = FakeOpenAI(_grader_reply)
    with serve_app(toy_server().app()) as url, serve_app(grader.app()) as grader_url:
        args = toy_run_args(
            f"{url}/v1",
            data,
            tmp_path / "runs",
            "r",
            steps=1,
            sets=("splits={train: 5, probe: 2, solver_gate: 3, generator_gate: 3, test: 1}",),
        )
        assert runner.invoke(app, args).exit_code == 0
        run = tmp_path / "runs" / "r"
        result = runner.invoke(
            app,
            [
                "eval",
                str(run),
                "--data",
                str(SAMPLE),
                "--format",
                "healthbench",
                "--limit",
                "1",
                "--grader-base-url",
                f"{grader_url}/v1",
                "--grader-model",
                "g",
            ],
        )
        assert result.exit_code == 0, result.output
        assert "official prompt" in result.output
    record = json.loads(result_file(run, "transfer-healthbench").read_text())
    assert record["grader_prompt"] == "official" and record["n_graded"] == 1
    assert [s["key"] for s in record["grader_prompt_sources"]] == ["grader", "system"]
    answer = record["items"][0]["response"]
    graded = [r for r in grader.requests if r["messages"][-1]["content"].startswith("SYNTHETIC-PROMPT")]
    assert graded, "the grader never saw the fetched template"
    for body in graded:
        system, user = body["messages"]
        assert system == {"role": "system", "content": "SYNTHETIC-SYSTEM"}
        assert "response_format" not in body  # a plain request, as the official scorer sends
        head, _, rest = user["content"].partition("\n")
        assert head == "SYNTHETIC-PROMPT start" and user["content"].endswith("\nSYNTHETIC-PROMPT end")
        convo, _, item = rest.rpartition("\nSYNTHETIC-ITEM ")
        assert convo.startswith("user: ") and convo.endswith(f"\n\nassistant: {answer}")
        assert item.split("\n")[0].startswith("[")  # "[points] criterion"
    first = json.loads(SAMPLE.read_text(encoding="utf-8").splitlines()[0])
    sent = {
        b["messages"][1]["content"].split("\nSYNTHETIC-ITEM ", 1)[1].removesuffix("\nSYNTHETIC-PROMPT end")
        for b in graded
    }
    assert sent == {f"[{r['points']}] {r['criterion']}" for r in first["rubrics"]}  # every item, as str(RubricItem)
    # each item answered once unparseably, then parsed from its fence: every criterion scored, penalties avoided
    assert all(i["value"] in (0.0, 1.0) for i in record["items"][0]["grade"]["items"])
    assert record["score"] == pytest.approx(100.0)


def test_ours_mode_and_an_unfetched_official_prompt(
    mirror: Files, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    data = write_toy_questions(tmp_path / "toy.jsonl")
    with serve_app(toy_server().app()) as url:
        args = toy_run_args(
            f"{url}/v1",
            data,
            tmp_path / "runs",
            "r",
            steps=1,
            sets=("splits={train: 5, probe: 2, solver_gate: 3, generator_gate: 3, test: 1}",),
        )
        assert runner.invoke(app, args).exit_code == 0
        run = tmp_path / "runs" / "r"
        refused = runner.invoke(
            app,
            [
                "eval",
                str(run),
                "--data",
                str(SAMPLE),
                "--format",
                "healthbench",
                "--limit",
                "1",
                "--grader-prompt",
                "official",
            ],
        )
    assert refused.exit_code == 2 and "decoevo data fetch healthbench" in " ".join(refused.output.split())


def test_data_fetch_also_fetches_the_official_prompt_and_warns_when_it_cannot(
    mirror: Files, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = BENCHMARKS["healthbench"]
    assert bench.source is not None
    # the bundled sample stands in for the pinned upstream file: unpinned, with its own count
    data_file = unpinned(monkeypatch, "healthbench", bench.source.default_split.name,
                         records=len(SAMPLE.read_text(encoding="utf-8").splitlines()))
    mirror.put(data_file.url, SAMPLE.read_text(encoding="utf-8"))
    missing = runner.invoke(app, ["data", "fetch", "healthbench"])  # the prompt's files are not served yet
    said = " ".join(missing.output.split())
    assert missing.exit_code == 0 and "official grader prompt not fetched" in said and "own prompt" in said
    publish_synthetic(mirror, monkeypatch)
    fetched = runner.invoke(app, ["data", "fetch", "healthbench"])
    assert fetched.exit_code == 0 and "official grader prompt fetched" in " ".join(fetched.output.split())
    assert templates.fetched(BENCHMARKS["healthbench"])
