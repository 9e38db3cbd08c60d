"""decoevo's benchmarks (not tests), grouped by the question each answers; README.md is the index.
Run each from the checkout's root as a module: `.venv/bin/python -m bench.cost.cost_table4`."""
