"""Issue 44.1, the class of the bug, fast: the two forms a text takes in a promptfoo project (interop/promptfoo_text.py)
read back as exactly that text through the nunjucks promptfoo renders with, and a variable's value is inert to
what promptfoo does to variables before rendering (loading `file://`/`package:` values, filling `{{ name }}` with
another variable, cutting one trailing newline). Property-based: hypothesis draws the texts, from any Unicode and
from the fragments templates, YAML and the encoding itself are made of. tests/test_export_hostile.py runs the
real tools on a whole export."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decoevo.errors import ConfigError
from decoevo.interop.bundle import Endpoint
from decoevo.interop.promptfoo_text import ESC, display_text, template_text, var_ref, var_value

from .interop_helpers import PROMPTFOO_MODULES

HELPER = Path(__file__).with_name("nunjucks_render.js")
FRAGMENTS = ["{{", "}}", "{%", "%}", "{#", "#}", "{", "}", "{% raw %}", "{% endraw %}", "{%- endraw -%}", "file://",
             "file:", "package:", "\n", "\r", '"', "'", "\\", "\\n", ESC, ESC + "0", ESC + "1", ESC + "3", "x", " ",
             "question", "env.HOME", "range.constructor", "|", "replace"]
texts = st.one_of(st.text(), st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=3))).map("".join))


class Nunjucks:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(["node", str(HELPER), str(PROMPTFOO_MODULES)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, encoding="utf-8")

    def render(self, template: str, variables: dict[str, str] | None = None) -> str:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps({"template": template, "vars": variables or {}}) + "\n")
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        assert "error" not in reply, reply
        return str(reply["out"])


@pytest.fixture(scope="module")
def nunjucks():
    if shutil.which("node") is None or not (PROMPTFOO_MODULES / "nunjucks").is_dir():
        pytest.skip("promptfoo (and its nunjucks) is not installed: scripts/install.sh --dev with node")
    renderer = Nunjucks()
    yield renderer
    renderer.proc.kill()
    renderer.proc.wait()


@settings(max_examples=300, deadline=None)
@given(text=texts)
def test_a_text_in_a_template_renders_to_itself(nunjucks, text: str) -> None:
    written = template_text(text)
    assert nunjucks.render(written) == text
    assert not written.startswith(("file://", "package:"))  # promptfoo would load it before rendering


# what promptfoo 0.121.20 does to a variable's value before a template reads it (evaluatorHelpers.renderPrompt):
# a `{{ name }}` in it takes another variable's value
FILLED = re.compile(r"\{\{\s*(\w+)\s*\}\}")


@settings(max_examples=300, deadline=None)
@given(text=texts)
def test_a_variable_is_inert_to_promptfoo_and_its_reference_reads_it_back(nunjucks, text: str) -> None:
    value = var_value(text)
    assert not value.startswith(("file://", "package:"))  # loaded (and a .js run) otherwise
    assert not FILLED.search(value) and "{" not in value  # filled in, or rendered as a template, otherwise
    assert not value.endswith("\n")  # cut otherwise
    assert nunjucks.render(var_ref("question"), {"question": value}) == text
    # the question as a judge quotes it: the filters after decoding see the text itself
    assert nunjucks.render(var_ref("q", 'replace("\\n", "\\n> ")'), {"q": value}) == text.replace("\n", "\n> ")


@pytest.mark.parametrize("name", ["OPENAI_API_KEY }}{{ range", "KEY\nextensions:", "1KEY", "", "KEY-X", "K EY"])
def test_an_api_key_variable_must_be_a_name(name: str) -> None:
    with pytest.raises(ConfigError, match="environment variable's name"):
        Endpoint("http://127.0.0.1:8000/v1", "toy", name)


@pytest.mark.parametrize("model", ["toy{{ env.OPENAI_API_KEY }}", "toy\nextensions: [x]", "m\x00", "m\u2028x", " "])
def test_an_endpoint_field_with_template_or_control_characters_is_refused(model: str) -> None:
    with pytest.raises(ConfigError):
        Endpoint("http://127.0.0.1:8000/v1", model, "OPENAI_API_KEY")
    if model.strip():
        with pytest.raises(ConfigError):
            Endpoint(f"http://127.0.0.1:8000/v1/{model}", "toy", "OPENAI_API_KEY")


@settings(max_examples=200, deadline=None)
@given(text=texts)
def test_a_shown_text_is_itself_unless_promptfoo_would_load_it(text: str) -> None:
    shown = display_text(text)
    assert not shown.startswith(("file://", "package:"))
    assert shown == (" " + text if text.startswith(("file:", "package:")) else text)
