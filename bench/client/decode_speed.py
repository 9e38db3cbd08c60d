"""Embedded decode speed through `decoevo.lm` versus llama-cpp-python called directly.

Both sides load the same GGUF with the same n_threads and n_ctx, get the same chat messages,
temperature 0, seed and max_tokens, and are timed alternately in one process (one warm-up each
first). Speed = completion tokens / wall seconds of the call, prompt processing included on both
sides; the ratio of the medians is decoevo / raw.

    .venv/bin/python -m bench.client.decode_speed                # 256 tokens, 7 repeats, all cores
    .venv/bin/python -m bench.client.decode_speed --threads 1 --max-tokens 128
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench._common import RESULTS, ForeignLoad, machine, wait_until_quiet
from decoevo.lm import LM, GenParams, LMConfig, Message, ModelSpec
from decoevo.lm.local import available_cores, default_gguf_path

PROMPT = [
    Message("system", "You are a patient teacher who explains things at length."),
    Message("user", "Explain in detail how a steam engine works, step by step, with its history, "
                    "its parts, and how it changed industry and transport. Write at least ten paragraphs."),
]


@dataclass
class Sample:
    side: str
    tokens: int
    seconds: float

    @property
    def tok_s(self) -> float:
        return self.tokens / self.seconds


def raw_llama(path: Path, n_ctx: int, n_threads: int) -> Any:
    from llama_cpp import Llama

    return Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, n_threads_batch=n_threads, verbose=False)


def time_raw(llama: Any, params: GenParams) -> tuple[Sample, str]:
    t0 = time.perf_counter()
    out = llama.create_chat_completion(
        messages=[m.as_dict() for m in PROMPT], temperature=params.temperature,
        max_tokens=params.max_tokens, seed=params.effective_seed(),
    )
    seconds = time.perf_counter() - t0
    return Sample("raw", int(out["usage"]["completion_tokens"]), seconds), out["choices"][0]["message"]["content"]


async def time_lm(lm: LM, params: GenParams) -> tuple[Sample, str]:
    t0 = time.perf_counter()
    result = await lm.complete(PROMPT, role="bench", params=params)
    seconds = time.perf_counter() - t0
    assert not result.cached, "the cache must be bypassed"
    return Sample("decoevo", result.completion_tokens, seconds), result.text


def summary(samples: list[Sample]) -> dict[str, float]:
    speeds = [s.tok_s for s in samples]
    return {"median_tok_s": round(statistics.median(speeds), 2), "min_tok_s": round(min(speeds), 2),
            "max_tok_s": round(max(speeds), 2), "median_tokens": statistics.median(s.tokens for s in samples),
            "median_seconds": round(statistics.median(s.seconds for s in samples), 4)}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    path = default_gguf_path()
    spec = ModelSpec(n_ctx=args.n_ctx, n_threads=args.threads)
    lm = LM(LMConfig(models={"default": spec}, use_cache=False))
    raw = raw_llama(path, args.n_ctx, args.threads)
    params = GenParams(temperature=0.0, max_tokens=args.max_tokens)
    # Warm-up: loads the decoevo side's weights and fills both sides' prompt KV state alike.
    _, lm_text = await time_lm(lm, params)
    _, raw_text = time_raw(raw, params)
    samples: dict[str, list[Sample]] = {"decoevo": [], "raw": []}
    cores, discarded, i = os.cpu_count() or 1, 0, 0
    while len(samples["raw"]) < args.repeats:
        wait_until_quiet(timeout_s=args.quiet_timeout)
        pair: list[Sample] = []
        with ForeignLoad() as load:  # one pair, in alternating order, timed under the same conditions
            for side in ("decoevo", "raw") if i % 2 == 0 else ("raw", "decoevo"):
                pair.append((await time_lm(lm, params) if side == "decoevo" else time_raw(raw, params))[0])
        i += 1
        seconds = sum(p.seconds for p in pair)
        if load.foreign_s is not None and load.foreign_s > args.max_foreign * seconds * cores \
                and discarded < args.max_discards:
            discarded += 1
            print(f"  discarded a pair: other processes used {load.foreign_s:.2f} CPU s", flush=True)
            continue
        for sample in pair:
            samples[sample.side].append(sample)
            print(f"  repeat {len(samples[sample.side])} {sample.side:>7}: {sample.tokens} tokens in "
                  f"{sample.seconds:.3f}s = {sample.tok_s:.1f} tok/s", flush=True)
    await lm.aclose()
    ours, theirs = summary(samples["decoevo"]), summary(samples["raw"])
    return {
        "benchmark": "decode_speed",
        "model": path.name,
        "n_threads": args.threads,
        "n_ctx": args.n_ctx,
        "max_tokens": args.max_tokens,
        "repeats": args.repeats,
        "same_text": lm_text == raw_text,
        "decoevo": ours,
        "raw": theirs,
        "ratio": round(ours["median_tok_s"] / theirs["median_tok_s"], 4),
        "pair_ratio_median": round(statistics.median(
            a.tok_s / b.tok_s for a, b in zip(samples["decoevo"], samples["raw"], strict=True)), 4),
        "discarded_pairs": discarded,
        "samples": {side: [asdict(s) for s in ss] for side, ss in samples.items()},
        "machine": machine(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=7, help="timed calls per side; medians are reported")
    ap.add_argument("--threads", type=int, default=available_cores(), help="n_threads for both sides")
    ap.add_argument("--n-ctx", type=int, default=ModelSpec().n_ctx, help="context size for both sides")
    ap.add_argument("--quiet-timeout", type=float, default=900.0,
                    help="before each pair wait up to this many seconds for other CPU load to stop")
    ap.add_argument("--max-foreign", type=float, default=0.05,
                    help="discard a pair if other processes used more than this share of all cores")
    ap.add_argument("--max-discards", type=int, default=20, help="then noisy pairs are kept")
    ap.add_argument("--out", type=Path, default=RESULTS / "decode_speed.json")
    args = ap.parse_args()
    res = asyncio.run(run(args))
    print(f"\nDecode speed, {res['model']}, n_threads={args.threads}, n_ctx={args.n_ctx}, "
          f"max_tokens={args.max_tokens}, median of {args.repeats}")
    print(f"{'side':>22} {'tokens':>7} {'seconds':>8} {'tok/s':>7}")
    for side, label in (("raw", "llama_cpp.Llama"), ("decoevo", "decoevo.lm (local)")):
        s = res[side]
        print(f"{label:>22} {s['median_tokens']:>7} {s['median_seconds']:>8.3f} {s['median_tok_s']:>7.1f}")
    print(f"ratio decoevo/raw of the medians: {res['ratio']:.3f}, median of per-pair ratios: "
          f"{res['pair_ratio_median']:.3f} (target >= 0.90); identical text: {res['same_text']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
