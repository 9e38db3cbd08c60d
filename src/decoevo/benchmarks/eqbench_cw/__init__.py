"""EQ-Bench Creative Writing v3 (Paech, 2025): 32 writing prompts, each written 3 times with a different
seed modifier, judged on 22 criteria scored 0-20."""

from __future__ import annotations

from ..record import Benchmark, DataFile, DataSource, Sampling, Split
from ..writingbench import TASK_SPEC
from .grader import grade_eqbench_cw
from .loader import load_eqbench_cw
from .official import PROMPTS, grade_eqbench_cw_official

_RAW = "https://raw.githubusercontent.com/EQ-bench/creative-writing-bench/e7ab009/data"

# Checksums and sizes of the files at that commit (hashed from a clone of the repository).
SOURCE = DataSource(
    upstream="EQ-bench/creative-writing-bench@e7ab009",
    licence="unspecified (cite Paech 2025)",
    homepage="https://github.com/EQ-bench/creative-writing-bench",
    splits=(Split("all", (
        DataFile("creative_writing_prompts_v3.json", f"{_RAW}/creative_writing_prompts_v3.json",
                 "87f79b688261318f9182966aa238403aeaa1022f82ffc3ae4d1fe2a48cf1c412", 76108),
        DataFile("creative_writing_criteria.txt", f"{_RAW}/creative_writing_criteria.txt",
                 "060492be7172cadd26917ee8bf833fee0e34244bf881964e987860af50757766", 465),
        DataFile("negative_criteria.txt", f"{_RAW}/negative_criteria.txt",
                 "5a123421b871fbcb1dd3b0c7c0dc4878fedc998fe18b5f58c51dac2324fa7089", 158),
    ), "", "32 prompts x 3 seed modifiers", records=96),),
)

BENCHMARK = Benchmark(
    name="eqbench_cw", label="EQ-Bench CW", scheme="eqbench_cw", load=load_eqbench_cw, grade=grade_eqbench_cw,
    task_spec=TASK_SPEC, source=SOURCE,
    # The benchmark writes each piece at temperature 0.7 with min_p 0.1.
    sampling=Sampling(temperature=0.7, min_p=0.1),
    headline="mean piece score (22 criteria 0-20, flaws inverted) x5",
    not_implemented="the benchmark's headline, a pairwise Elo ranking against reference models' pieces, is not "
                    "implemented: this is its rubric score",
    official_prompts=PROMPTS, official=grade_eqbench_cw_official,
)
