"""The `Benchmark` record: everything decoevo knows about one benchmark, in one value.

Each benchmark folder (`decoevo/benchmarks/<name>/`) builds one record from its own modules (loader,
grader, scoring rules, data source) and the registry lists the records. Nothing outside the folder
knows a benchmark by name, so adding one is a folder plus a line in `registry.py`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

from ..domain import Question
from ..grading.result import GradeResult
from ..grading.rules import mean
from ..lm import LM, GenParams

Loader = Callable[[Path | str], list[Question]]


class Grader(Protocol):
    def __call__(self, lm: LM, question: Question, response: str, *,
                 params: GenParams | None = None) -> Awaitable[GradeResult]: ...


class OfficialGrader(Protocol):
    """Grades with the benchmark's official prompts (benchmarks/templates.py), parsing as its scorer does."""

    def __call__(self, lm: LM, question: Question, response: str, prompts: OfficialPrompts, *,
                 params: GenParams | None = None) -> Awaitable[GradeResult]: ...


@dataclass(frozen=True)
class TemplateSource:
    """One official prompt: where its upstream file is and how the prompt is read out of it.

    `kind`: "text" (the whole file), "python_string" (the string assigned to `symbol`, after any
    `.strip()` applied to it there), "python_function" (the string function `symbol` builds in its first
    assignment or return; `func.var`: the string assigned to `var` inside it) or "python_system" (the
    system message function `symbol` sends). `placeholders`: what the prompt must contain for the grader to fill it."""

    key: str  # the name the grader asks for, e.g. "grader", "system"
    url: str  # commit-pinned upstream URL
    sha256: str | None  # of the upstream file; None: unpinned, checked by its loader and count at every fetch
    kind: Literal["text", "python_string", "python_function", "python_system"]
    symbol: str = ""
    placeholders: tuple[str, ...] = ()
    upstream: str = ""  # human-readable origin: "openai/simple-evals@ee3b031 healthbench_eval.py"

    @property
    def file_name(self) -> str:
        return Path(urlsplit(self.url).path).name


@dataclass(frozen=True)
class OfficialPrompts:
    """A benchmark's official prompts, read from the fetched files, with where each came from."""

    benchmark: str
    texts: Mapping[str, str]
    sources: tuple[TemplateSource, ...]

    def __getitem__(self, key: str) -> str:
        return self.texts[key]

    def provenance(self) -> list[dict[str, str | None]]:
        return [{"key": s.key, "upstream": s.upstream, "url": s.url, "sha256": s.sha256} for s in self.sources]


# Graded results of one benchmark -> (benchmark score 0-100, details for the eval record).
Summary = Callable[[Sequence[GradeResult]], tuple[float, dict[str, Any]]]


def one_call(question: Question) -> int:
    """One grader call per question (the whole rubric in one request)."""
    return 1


def per_item_calls(question: Question) -> int:
    """One grader call per gold criterion (HealthBench's and WritingBench's official scorers)."""
    return len(question.gold.items) if question.gold is not None else 0


def mean_score(graded: Sequence[GradeResult]) -> tuple[float, dict[str, Any]]:
    """The default benchmark score: the mean of the graded questions' scores."""
    return mean([r.score for r in graded if r.score is not None]), {}


@dataclass(frozen=True)
class DataFile:
    """One upstream file. `sha256=None` means no checksum could be pinned: a fetch then keeps the file
    only when its split validates (see `Split.records`), records its checksum, and every later `verify`
    checks against that."""

    name: str  # the file name in the cache folder
    url: str  # pinned upstream URL (a commit in the path, or a dated file)
    sha256: str | None
    size: int | None = None  # bytes, when known exactly
    max_size: int | None = None  # an upper bound in bytes when the exact size is not known

    def ceiling(self) -> int:
        """The most bytes a download of this file may bring before it is stopped: the declared size plus
        a margin, else the declared bound, else a generous default (an endless body stops there)."""
        if self.size is not None:
            return self.size + max(SIZE_MARGIN, self.size // 20)
        return self.max_size if self.max_size is not None else DEFAULT_CEILING


SIZE_MARGIN = 1 << 16  # 64 KiB, or 5% of the declared size when that is more
DEFAULT_CEILING = 512 << 20  # 512 MiB: far above any benchmark file, far below a full disk


@dataclass(frozen=True)
class Split:
    """A named selection of a benchmark's data: the files to fetch and the path handed to the loader
    (a file, or the folder for a benchmark spread over several files)."""

    name: str
    files: tuple[DataFile, ...]
    entry: str = ""  # loader path relative to the benchmark's cache folder; "" = the folder itself
    description: str = ""
    records: int | None = None  # questions the loader reads from the published files (checked at fetch)

    def loader_path(self, folder: Path) -> Path:
        return folder / self.entry if self.entry else folder


@dataclass(frozen=True)
class DataSource:
    """Where a benchmark's public data comes from. `upstream` names the repository and revision."""

    upstream: str
    licence: str
    splits: tuple[Split, ...]
    homepage: str = ""
    note: str = ""

    @property
    def default_split(self) -> Split:
        return self.splits[0]

    def split(self, name: str | None) -> Split:
        if name is None:
            return self.default_split
        for s in self.splits:
            if s.name == name:
                return s
        raise KeyError(name)


@dataclass(frozen=True)
class Sampling:
    """The benchmark's own sampling for the answer it grades (None: the run's own settings)."""

    temperature: float
    min_p: float | None = None
    max_tokens: int | None = None


@dataclass(frozen=True)
class Benchmark:
    name: str  # the data format name (`--format`, `data.format`)
    label: str  # what the report shows
    scheme: str  # the gold scheme its loader writes and its grader reads
    load: Loader
    grade: Grader
    task_spec: str  # the structural-audit specification π_str, from the public task description
    source: DataSource | None = None  # None: no public file to fetch (users' own data)
    summarise: Summary = mean_score
    sampling: Sampling | None = None
    headline: str = "score"  # what the benchmark score means, for the report and the eval record
    tasks: tuple[str, ...] = field(default=())  # extra task names whose structural spec this is
    # The official grader prompts' upstream files (fetched by `decoevo data fetch`, never shipped) and the
    # grader that uses them verbatim; () / None: only our own prompt.
    official_prompts: tuple[TemplateSource, ...] = ()
    official: OfficialGrader | None = None
    # the benchmark's own headline when decoevo does not compute it, said next to every score it shows
    not_implemented: str = ""
    # grader calls for one answer, official prompt or ours (both follow the official scorer's pattern):
    # what the plan projects before an evaluation is paid for
    grader_calls: Callable[[Question], int] = one_call
    # the headline over every evaluated answer, graded or not, when the official aggregator counts an
    # unscored answer against it (LLMEval-Med's Aggregate.py); None: `summarise` over the graded ones
    summarise_all: Summary | None = None
    # the lowest and highest score its grader gives one question (GradeResult.score): what compare's rows
    # and means hold (rundir.records accepts any finite score up to 100; tests hold each grader to its range)
    question_range: tuple[float, float] = (0.0, 100.0)
