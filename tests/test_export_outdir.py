"""Issue 44.2: `export --to` and `rubric -o` never follow a link, never replace a file of the user's without
--force, never write an input or into the run; a folder decoevo exported into before is written again."""

from __future__ import annotations

import asyncio
import gc
import hashlib
import json
import re
import shutil
import warnings

import pytest
import yaml
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.domain import Question, Turn
from decoevo.errors import ConfigError
from decoevo.evaluation.run_view import RunView
from decoevo.interop.outdir import MANIFEST, OutDir
from decoevo.interop.rubrics import RubricFailed, RubricSet, generator_rubrics
from decoevo.lm import LM
from decoevo.testing.scripted import ScriptedBackend
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("outdir")
    with pytest.MonkeyPatch.context() as env, serve_app(toy_server().app()) as url:
        env.setenv("DECOEVO_CACHE", str(tmp / "cache.sqlite"))
        data = write_toy_questions(tmp / "q.jsonl")
        args = toy_run_args(f"{url}/v1", data, tmp / "runs", "toy", steps=1,
                            sets=("splits={train: 6, probe: 2, solver_gate: 3, generator_gate: 3, test: 2}",))
        assert CliRunner().invoke(app, args).exit_code == 0
        yield tmp / "runs" / "toy", data


def invoke(*args: object) -> tuple[int, str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, " ".join(result.output.split())


def snapshot(folder) -> dict:
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file() and not p.is_symlink()}


@pytest.mark.parametrize("to", ["promptfoo", "inspect"])
def test_a_linked_folder_is_refused_and_nothing_is_written_through_it(run, tmp_path, to) -> None:
    run_dir, _ = run
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    code, output = invoke("export", run_dir, "--to", to, tmp_path / "link")
    assert code == 2 and "symbolic link" in output and not any(target.iterdir())


def test_a_linked_prompts_folder_is_refused(run, tmp_path) -> None:
    run_dir, _ = run
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "prompts").symlink_to(target)
    code, output = invoke("export", run_dir, "--to", "promptfoo", tmp_path / "out")
    assert code == 2 and "prompts" in output and not any(target.iterdir())


@pytest.mark.parametrize(("to", "name"), [("promptfoo", "promptfooconfig.yaml"), ("promptfoo", "tests.yaml"),
                                          ("inspect", "task.py")])
def test_a_users_own_file_is_kept_unless_forced(run, tmp_path, to, name) -> None:
    run_dir, _ = run
    out = tmp_path / "out"
    out.mkdir()
    (out / name).write_text("# my own\n")
    code, output = invoke("export", run_dir, "--to", to, out)
    assert code == 2 and name in output and "--force" in output
    assert (out / name).read_text() == "# my own\n" and [p.name for p in out.iterdir()] == [name]
    code, output = invoke("export", run_dir, "--to", to, out, "--force")
    assert code == 0, output
    assert (out / name).read_text() != "# my own\n"


def test_an_export_is_written_again_over_itself_but_not_over_an_edit(run, tmp_path) -> None:
    run_dir, _ = run
    out = tmp_path / "out"
    assert invoke("export", run_dir, "--to", "promptfoo", out)[0] == 0
    assert invoke("export", run_dir, "--to", "promptfoo", out)[0] == 0  # its own files: written again
    (out / "tests.yaml").write_text((out / "tests.yaml").read_text() + "# my edit\n")
    code, output = invoke("export", run_dir, "--to", "promptfoo", out)
    assert code == 2 and "tests.yaml was changed since decoevo wrote it" in output
    assert (out / "tests.yaml").read_text().endswith("# my edit\n")


def test_an_export_never_writes_into_the_run_or_over_its_input(run, tmp_path) -> None:
    run_dir, data = run
    before = snapshot(run_dir)
    code, output = invoke("export", run_dir, "--to", "inspect", run_dir / "exported")
    assert code == 2 and "inside the run directory" in output and snapshot(run_dir) == before
    out = tmp_path / "out"
    out.mkdir()
    question_file = out / "dataset.jsonl"  # the Inspect dataset the export would write is the --data file
    question_file.write_text(data.read_text())
    code, output = invoke("export", run_dir, "--to", "inspect", out, "--data", question_file, "--force")
    assert code == 2 and "inputs" in output and question_file.read_text() == data.read_text()


def test_rubric_never_replaces_its_questions_or_a_users_file(run, tmp_path) -> None:
    run_dir, data = run
    questions = tmp_path / "d.jsonl"
    questions.write_text(data.read_text())
    code, output = invoke("rubric", run_dir, "--data", questions, "-o", questions)
    assert code == 2 and "questions file" in output and questions.read_text() == data.read_text()
    mine = tmp_path / "notes.jsonl"
    mine.write_text('{"my": "notes"}\n')
    code, output = invoke("rubric", run_dir, "--data", questions, "-o", mine)
    assert code == 2 and "--force" in output and mine.read_text() == '{"my": "notes"}\n'
    out = tmp_path / "rubrics.jsonl"
    assert invoke("rubric", run_dir, "--data", questions, "-o", out)[0] == 0
    assert invoke("rubric", run_dir, "--data", questions, "-o", out)[0] == 0  # its own file: written again
    (tmp_path / "link.jsonl").symlink_to(out)
    code, output = invoke("rubric", run_dir, "--data", questions, "-o", tmp_path / "link.jsonl")
    assert code == 2 and "link" in output
    assert invoke("rubric", run_dir, "--data", questions, "-o", mine, "--force")[0] == 0


def test_the_folder_writer_refuses_on_its_own_what_the_command_refuses(tmp_path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.txt").write_text("mine\n")
    with pytest.raises(ConfigError, match="not written by decoevo"):  # unforced unless asked
        OutDir(out).write({"a.txt": "new\n"})
    # a manifest that is a link is not believed, even when what it links to lists the user's file as decoevo's
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps({"files": {"a.txt": hashlib.sha256(b"mine\n").hexdigest()}}))
    (out / MANIFEST).symlink_to(forged)
    with pytest.raises(ConfigError):
        OutDir(out).write({"a.txt": "new\n"})
    (out / MANIFEST).unlink()
    # a file that is a link is refused even with --force (it would be replaced by a file of decoevo's)
    target = tmp_path / "target.txt"
    target.write_text("theirs\n")
    (out / "b.txt").symlink_to(target)
    with pytest.raises(ConfigError, match="symbolic link"):
        OutDir(out, force=True).write({"b.txt": "new\n"})
    assert (out / "b.txt").is_symlink() and target.read_text() == "theirs\n" and (out / "a.txt").read_text() == "mine\n"


@pytest.mark.parametrize("value", ["1.5", "-0.1", "nan"])
def test_a_threshold_outside_zero_to_one_is_refused_before_anything_is_written(run, tmp_path, value) -> None:
    """Issue 46.2: a promptfoo test's score S is in [0, 1], so a threshold over 1 fails every test and one under
    0 passes every test. It was accepted and written into tests.yaml when the check was mutated away."""
    run_dir, _ = run
    out = tmp_path / "pf"
    code, said = invoke("export", run_dir, out, "--to", "promptfoo", "--threshold", value)
    assert code == 2 and f"--threshold {value}: a test's score is between 0 and 1" in said, said
    assert said.count("error:") == 1 and "Traceback" not in said and not out.exists()


def test_a_threshold_of_one_is_written_as_given(run, tmp_path) -> None:
    """The bound is inclusive: 1 (every criterion met) is a threshold a test can reach."""
    run_dir, _ = run
    code, said = invoke("export", run_dir, tmp_path / "pf", "--to", "promptfoo", "--threshold", "1")
    assert code == 0, said
    assert "threshold: 1" in (tmp_path / "pf" / "tests.yaml").read_text()


async def test_the_runs_own_rubrics_come_from_its_cache_and_a_failed_one_is_named(run, tmp_path) -> None:
    """An export's rubrics are the run's final generator's, asked as the run asked them (the same requests: those
    the run generated are cache hits, never paid again); the caller's LM is left open for its next use; a rubric
    that cannot be generated is named by its question."""
    run_dir, _ = run
    view = RunView(run_dir)
    run_keys = {row["key"] for row in map(json.loads, (run_dir / "calls.jsonl").read_text().splitlines())
                if row["role"] == "generate_rubric"}
    asked = list(view.questions().values())
    keys: list[str] = []
    async with LM(view.config.lm) as lm:
        lm.on_call = lambda record: keys.append(record.key)
        first = await generator_rubrics(view, asked, lm=lm)
        assert run_keys & set(keys), "no rubric request of the export's is one the run made"
        again = await generator_rubrics(view, asked, lm=lm)  # the same LM, still open: every rubric a hit
        assert again.rubrics == first.rubrics and list(again.rubrics) == [q.id for q in asked]
    garbled = {name: ScriptedBackend(lambda r: "not a rubric") for name in view.config.lm.models}
    with pytest.raises(RubricFailed, match=f"question {asked[0].id}"):
        async with LM(view.config.lm, backends=garbled, cache=None) as lm:
            await generator_rubrics(view, asked[:1], lm=lm)


def test_the_library_export_keeps_a_users_file_unforced_and_reads_question_var_only_for_an_import(run, tmp_path):
    from decoevo.interop.export import export_run, read_questions

    run_dir, data = run
    with pytest.raises(ConfigError, match="--question-var is for --format promptfoo"):
        read_questions(str(data), "jsonl", question_var="query")
    assert read_questions(str(data), "jsonl").questions
    out = tmp_path / "pf"
    out.mkdir()
    (out / "tests.yaml").write_text("mine\n")
    with pytest.raises(ConfigError, match="was not written by decoevo"):
        export_run(run_dir, "promptfoo", out)  # unforced by default: the user's file is kept
    assert (out / "tests.yaml").read_text() == "mine\n"


def test_only_a_file_of_rubrics_rows_counts_as_one_decoevo_wrote(tmp_path) -> None:
    """`rubric -o FILE` replaces unforced only a file whose every line has a rubrics row's keys (id, question,
    generator_version, rubric): a user's JSONL that lacks one of them is kept."""
    from decoevo.interop.export import check_rubrics_output

    row = {"id": "q1", "question": "Is it fine?", "generator_version": 1, "rubric": [{"criterion": "A", "weight": 1}]}
    ours = tmp_path / "ours.jsonl"
    ours.write_text(json.dumps(row) + "\n")
    check_rubrics_output(ours)
    for key in row:
        theirs = tmp_path / f"without-{key}.jsonl"
        theirs.write_text(json.dumps({k: v for k, v in row.items() if k != key}) + "\n")
        with pytest.raises(ConfigError, match="is not a rubrics file decoevo wrote"):
            check_rubrics_output(theirs)


def test_the_endpoint_given_is_the_one_every_exported_file_calls(run, tmp_path) -> None:
    """Issue 46.2: `--base-url URL --model NAME --api-key-env VAR` is the endpoint the tool calls (a run on the
    embedded model has no other), in the provider, the grader and the Inspect settings alike; the rubrics still
    come from the run's own model. It was ignored (the run's endpoint written) when the override was mutated
    away."""
    run_dir, _ = run
    given = ["--base-url", "http://models.example:8000/v1/", "--model", "served-model", "--api-key-env", "SERVED_KEY"]
    assert invoke("export", run_dir, "--to", "promptfoo", tmp_path / "pf", *given)[0] == 0
    config = yaml.safe_load((tmp_path / "pf" / "promptfooconfig.yaml").read_text())
    (provider,) = config["providers"]
    assert provider["id"] == "openai:chat:served-model"
    assert provider["config"]["apiBaseUrl"] == "http://models.example:8000/v1"
    assert provider["config"]["apiKeyEnvar"] == "SERVED_KEY"
    grader = config["defaultTest"]["options"]["provider"]["config"]
    assert grader["url"] == "http://models.example:8000/v1/chat/completions"
    assert grader["body"]["model"] == "served-model"
    assert "{{ env.SERVED_KEY }}" in grader["headers"]["Authorization"]
    assert invoke("export", run_dir, "--to", "inspect", tmp_path / "inspect", *given)[0] == 0
    settings = json.loads((tmp_path / "inspect" / "decoevo.json").read_text())
    for role in ("solver", "judge"):
        assert {k: settings[role][k] for k in ("base_url", "model", "api_key_env")} == {
            "base_url": "http://models.example:8000/v1", "model": "served-model", "api_key_env": "SERVED_KEY"}


def _run_copy(run_dir, tmp_path, *, model: dict | None = None, test_split: list | None = None):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    if model is not None:
        config = yaml.safe_load((copy / "config.yaml").read_text())
        config["lm"]["models"]["default"].update(model)
        (copy / "config.yaml").write_text(yaml.safe_dump(config))
    if test_split is not None:
        splits = json.loads((copy / "splits.json").read_text())
        (copy / "splits.json").write_text(json.dumps({**splits, "test": test_split}))
    return copy


@pytest.mark.parametrize(("model", "named"), [
    ({"backend": "local", "base_url": None}, "the embedded one"),
    ({"backend": "litellm", "base_url": None, "model": "anthropic/claude-x"},
     "'anthropic/claude-x' through LiteLLM with no base_url")])
def test_a_run_on_a_model_no_tool_can_call_is_refused_before_anything_is_paid(run, tmp_path, model, named) -> None:
    """Issue 46.2: a run on the embedded model, or on a LiteLLM provider's own API (no URL), gives a tool no
    endpoint to call; the export says so and how to name one, and writes nothing. A LiteLLM run was exported
    with a config naming no URL when the check was narrowed to `local and no URL`."""
    copy = _run_copy(run[0], tmp_path, model=model)
    code, said = invoke("export", copy, "--to", "promptfoo", tmp_path / "pf")
    assert code == 2 and f"the run's solve model is {named}, which no eval tool can call" in said, said
    assert "pass --base-url URL --model NAME" in said and not (tmp_path / "pf").exists()


def test_a_run_without_a_test_split_is_exported_only_with_the_questions_given(run, tmp_path) -> None:
    """Issue 46.2: a run whose test split is empty has no questions to export: refused in one line naming
    --data (it wrote a config with no test when the check was mutated away); with --data it is exported."""
    run_dir, data = run
    copy = _run_copy(run_dir, tmp_path, test_split=[])
    code, said = invoke("export", copy, "--to", "promptfoo", tmp_path / "pf")
    assert code == 2 and "the run's test split is empty; pass --data FILE" in said, said
    assert not (tmp_path / "pf").exists()
    code, said = invoke("export", copy, "--to", "promptfoo", tmp_path / "pf", "--data", data)
    assert code == 0, said
    assert len(yaml.safe_load((tmp_path / "pf" / "tests.yaml").read_text())) == 16


def test_rubric_generation_closes_the_model_it_opened_and_leaves_the_callers_open(run) -> None:
    """Issue 46.2: `generator_rubrics` without an LM (`decoevo rubric`, `export --to`) opens the run's own and
    closes it; left open, its HTTP session is reported as "Unclosed client session" on stderr when collected
    (the close removed or skipped). Given the caller's LM it leaves it open for the caller's next request:
    closed, that request is refused ("the backend was closed") when which LM is its own was inverted."""
    view = RunView(run[0])
    task = next(iter(view.questions().values())).task

    def fresh(tag: str) -> Question:  # a question the run never asked: its rubric is a paid request
        return Question(id=f"fresh-{tag}", task=task,
                        turns=(Turn(role="user", content=f"My ankle hurts after a {tag} run. What should I do?"),))

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        asyncio.run(generator_rubrics(view, [fresh("long")]))
        gc.collect()  # what a left-open session reports, it reports when collected
    assert [str(w.message) for w in seen if "Unclosed" in str(w.message)] == []

    async def twice() -> RubricSet:
        async with LM(view.config.lm) as lm:
            await generator_rubrics(view, [fresh("short")], lm=lm)
            return await generator_rubrics(view, [fresh("hill")], lm=lm)  # a new request on the same LM

    assert asyncio.run(twice()).rubrics["fresh-hill"].criteria


def test_an_endpoint_is_checked_when_made_and_cannot_be_changed_after() -> None:
    """An Endpoint's fields are written into tools' configs, checked in `__post_init__`; being frozen is what
    makes "checked when made" hold for its whole life: a field is changed only by making a new one (`replace`),
    which is checked again."""
    import dataclasses

    from decoevo.interop.bundle import Endpoint

    made = Endpoint("http://127.0.0.1:8080/v1", "served", "MY_KEY")
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.model = "{{ env.OTHER_KEY }}"  # type: ignore[misc]
    with pytest.raises(ConfigError, match="which no endpoint's model has"):
        dataclasses.replace(made, model="{{ env.OTHER_KEY }}")
    assert made.model == "served"


@pytest.mark.parametrize("theirs", ["judge_prompt.json", "tests.yaml", "prompts/shipped.json"])
def test_a_users_file_in_the_folder_is_refused_before_any_rubric_is_paid(run, tmp_path, theirs) -> None:
    """Issue 46.2: every file a promptfoo export writes is checked before the rubrics are generated: a user's
    `judge_prompt.json` was refused only by the writer, after the export had paid the model for each new
    question's rubric, when it was left out of the files checked first."""
    server = toy_server()
    fresh = tmp_path / "fresh.jsonl"
    fresh.write_text("".join(json.dumps({"id": f"n{i}", "prompt": f"My wrist hurts after climbing, day {i}. "
                                         "What should I do?"}) + "\n" for i in range(2)), encoding="utf-8")
    out = tmp_path / "pf"
    (out / theirs).parent.mkdir(parents=True)
    (out / theirs).write_text("mine\n")
    with serve_app(server.app()) as url:
        copy = _run_copy(run[0], tmp_path, model={"base_url": f"{url}/v1"})
        code, said = invoke("export", copy, "--to", "promptfoo", out, "--data", fresh)
    assert code == 2 and f"{theirs} was not written by decoevo" in said, said
    assert server.requests == [] and (out / theirs).read_text() == "mine\n"


@pytest.mark.parametrize("to", ["promptfoo", "inspect"])
def test_an_export_names_every_file_it_wrote_and_refuses_a_file_for_its_folder(run, tmp_path, to) -> None:
    """Issue 46.2: the export says which files it wrote (one `wrote PATH` line each, the manifest apart), and
    OUT_DIR naming a file is one line before anything is paid or written, the file left as it was."""
    run_dir, _ = run
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["export", str(run_dir), "--to", to, str(out)])
    assert result.exit_code == 0, result.output
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and p.name != MANIFEST)
    wrote = re.findall(r"^wrote (.+)$", result.output, re.MULTILINE)  # each path whole on its line, to copy
    assert sorted(w.removeprefix(f"{out}/") for w in wrote) == files
    mine = tmp_path / "notes.txt"
    mine.write_text("mine\n")
    code, output = invoke("export", run_dir, "--to", to, mine)
    assert code == 2 and f"{mine}: is a file; name a folder to write the export into" in output, output
    assert output.count("error") == 1 and "Traceback" not in output and mine.read_text() == "mine\n"
