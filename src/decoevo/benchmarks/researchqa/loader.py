"""ResearchQA: survey-mined research questions with rubric items, each graded by a 1-5 coverage label.

Record: {id, general_domain, subdomain, field, query, date, rubric: [{rubric_item, type: [..], citation_metadata}]}.
Local files are JSONL (one record a line) or one JSON list, as the Hub's `test.json` is. The Hub is
optional: `load_researchqa_hub` downloads a split file when `huggingface_hub` (a dependency of
`datasets`) is importable and the Hub answers, then reads it with the local loader.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...domain import GoldItem, GoldRubric, Question, Turn
from ...errors import DatasetError
from ...lm.errors import ConfigError
from ..common import build, field_name, iter_jsonl, need, need_list, need_text, read_json, ref, unique

HUB_REPO = "realliyifei/ResearchQA"
HUB_SPLITS = ("test", "valid", "full")


def _records(path: Path) -> list[tuple[int | None, str | None, Any]]:
    if not path.is_file():
        raise DatasetError(path, None, None, "file not found")
    with path.open("rb") as fh:
        head = fh.read(4096).lstrip()
    if head.startswith(b"["):
        data = read_json(path)
        return [(None, ref(i), rec) for i, rec in enumerate(data)]
    return [(n, None, rec) for n, rec in iter_jsonl(path)]


def _types(path: Path, line: int | None, where: str | None, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(t, str) for t in value):
        return tuple(value)
    raise DatasetError(path, line, where, "must be a string or a list of strings")


def load_researchqa(path: Path | str) -> list[Question]:
    path = Path(path)
    out = []
    for line, where, obj in _records(path):
        if not isinstance(obj, dict):
            raise DatasetError(path, line, where, "each record must be a JSON object")
        qid = need(path, line, where, obj, "id")
        if not isinstance(qid, str | int) or isinstance(qid, bool) or str(qid).strip() == "":
            raise DatasetError(path, line, field_name(where, "id"), "must be a non-empty string or an integer")
        query = need_text(path, line, where, obj, "query")
        items = []
        for j, item in enumerate(need_list(path, line, where, obj, "rubric")):
            iwhere = field_name(where, f"rubric[{j}]")
            if not isinstance(item, dict):
                raise DatasetError(path, line, iwhere, "must be a JSON object with rubric_item")
            text = need_text(path, line, iwhere, item, "rubric_item")
            tags = _types(path, line, field_name(iwhere, "type"), item.get("type"))
            items.append(GoldItem(text=text, points=1.0, tags=tags,
                                  extra={"citation_metadata": item.get("citation_metadata")}))
        meta = {k: obj[k] for k in ("general_domain", "subdomain", "field", "date") if k in obj}
        out.append((line, where, build(path, line, where, id=str(qid), task="researchqa",
                                       turns=(Turn(role="user", content=query),),
                                       gold=GoldRubric(scheme="researchqa", items=tuple(items)), meta=meta)))
    return unique(path, out)


def load_researchqa_hub(split: str = "test", cache_dir: Path | str | None = None) -> list[Question]:
    """Download `<split>.json` from the Hub and load it. Never needed: a local file works the same."""
    if split not in HUB_SPLITS:
        raise ConfigError(f"ResearchQA split must be one of {', '.join(HUB_SPLITS)}, not {split!r}")
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise ConfigError("loading ResearchQA from the Hugging Face Hub needs the `datasets` (or "
                          "`huggingface_hub`) package; or download the split file and pass its path") from None
    try:
        local = hf_hub_download(repo_id=HUB_REPO, filename=f"{split}.json", repo_type="dataset",
                                cache_dir=str(cache_dir) if cache_dir else None)
    except Exception as exc:  # offline, gated or renamed: say so in one line
        raise ConfigError(f"could not download {HUB_REPO}/{split}.json from the Hugging Face Hub: {exc}") from None
    return load_researchqa(local)
