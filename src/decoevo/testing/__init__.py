"""Test and benchmark helpers: a scriptable OpenAI-compatible server and a scripted fake backend.
Shipped in the package so tests, benchmarks and users' own tests share them."""
