"""`decoevo reproduce`: the paper's whole experiment (§4) as one resumable plan, on the sweep machinery.

What it runs, per the paper's tables:
- Table 1: zero-shot, SkillOpt, SC-CoEvo, DecoEvo on each source benchmark (HealthBench, WritingBench,
  ResearchQA), graded on the test split; the final solver skills of the HealthBench runs are evaluated
  unchanged on LLMEval-Med and those of WritingBench on EQ-Bench Creative Writing (within-domain transfer);
- Table 2: the six ablations on HealthBench; Table 3: Task-Prior, Budget-Matched, Direct Audit on
  HealthBench (with SkillOpt and DecoEvo); Table 4: the cost of those runs (from their ledgers);
- Table 5: rubric alignment of SkillOpt, SC-CoEvo and DecoEvo on every source benchmark;
- Figure 3: training dynamics (proxy and gold at every checkpoint) of the same three on HealthBench.

Each source benchmark is one sweep (`REPRO/sweeps/<benchmark>/`: the methods differ per benchmark), run
by `sweep.run_sweep` (local processes or Ray), graded by the sweep's `test` step. Transfer, dynamics and
alignment then run here, for the runs that need them, through `decoevo.api`. Every step is done when its
output file exists, so running the command again resumes: finished cells and evaluations are not paid
twice. The report of all sweeps is REPRO/report.html, with the paper's claims checked on these runs.

The gold grader (and the rubric matcher) must be a model that plays no optimization role: the plan
refuses otherwise unless `allow_self_grading` (evaluation/independence.py).

The package, one job per module: `plan` (what runs: methods, seeds, data, the sweeps' cells), `posts` (the
evaluations after training and running them), `projection` (expected paid calls and dollars of what is not
done yet), `outline` (the plan before any data, `--plan-only`), `state` (the stored plan a rerun resumes).
"""

from .outline import CALL_LATENCY_S, TABLE_METHODS, WAVES_PER_ROUND, WAVES_PER_STEP, outline
from .plan import (
    ABLATIONS,
    CONTROLS,
    COST_METHODS,
    GRADER_NAME,
    HEALTHBENCH,
    MAIN,
    PAIRED,
    PAPER_SEEDS,
    SAMPLE_SEED,
    SOURCES,
    TABLES,
    TOPPED_UP,
    TRACKED,
    TRANSFERS,
    DataChoice,
    ReproducePlan,
    default_data,
    plan_cells,
    unused_data,
)
from .posts import PostTask, post_tasks, run_post
from .projection import Projection, grading_calls, price_of, project, transfer_sizes, unofficial_prompts
from .state import SPEND_FILE, STATE_FILE, load_state, paid_in_ledgers, plan_from_state

__all__ = [
    "ABLATIONS", "CALL_LATENCY_S", "CONTROLS", "COST_METHODS", "GRADER_NAME", "HEALTHBENCH", "MAIN", "PAIRED",
    "PAPER_SEEDS", "SAMPLE_SEED", "SOURCES", "SPEND_FILE", "STATE_FILE", "TABLES", "TABLE_METHODS", "TOPPED_UP",
    "TRACKED",
    "TRANSFERS", "WAVES_PER_ROUND", "WAVES_PER_STEP", "DataChoice", "PostTask", "Projection", "ReproducePlan",
    "default_data", "grading_calls", "load_state", "outline", "paid_in_ledgers", "plan_cells", "plan_from_state",
    "post_tasks", "price_of", "project", "run_post", "transfer_sizes", "unofficial_prompts", "unused_data",
]
