"""Reliability measurements that need library code (corpora, scoring, reports); the benchmarks that run
them live in bench/."""
