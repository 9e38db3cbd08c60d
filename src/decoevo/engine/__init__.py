"""The DecoEvo engine: scoring, policies, the inner (solver) and outer (generator) loops."""
