"""A simulated model for benchmarks at paper scale: every role gets a valid reply of a realistic length,
after a realistic latency. It is a benchmark fixture, not a model: it says nothing about quality.

The reply to a request is a pure function of (seed, request body): the same request always gets the
same text, tokens and latency, so the request cache, coalescing and resume behave as with a
deterministic server, while different requests get different text. Answers, rubrics, verdicts and
rewrites therefore vary from step to step, as a real model's do, and a run is not a cache replay.

What varies and how:
- answers (no schema): a length drawn from HealthBench reference completions (`sim_lengths`);
- rubrics: a criterion count and criterion lengths drawn from HealthBench rubrics (within the schema's
  bounds);
- judge levels: each response has a latent quality (a hash of its opening text), and each criterion's
  level is that quality on the 0-4 scale plus per-request noise, so near-ties and clear gaps both occur;
- blind preferences: the response of higher latent quality wins, equivalent when the two are close, and
  one order in ten flips (position bias), so some pairs are dropped as in a real audit;
- structural adequacy: a latent quality of the rubric under audit, plus noise;
- every other field is filled from its JSON schema (enums, bounds, nested objects), so a new role or a
  changed schema still gets a valid reply.
Latency is base + per completion token, times a Pareto long tail on a few requests (`LatencyModel`).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass
from typing import Any

from .sim_lengths import ANSWER_CHARS, CHARS_PER_TOKEN, CRITERION_CHARS, RUBRIC_CRITERIA, assumed_table, draw_quantile

_WORDS = ("the", "patient", "should", "consider", "rest", "and", "monitor", "symptoms", "if", "pain", "worsens",
          "seek", "care", "promptly", "a", "clinician", "can", "assess", "whether", "imaging", "is", "needed",
          "hydration", "sleep", "gentle", "stretching", "may", "help", "avoid", "strain", "for", "several", "days",
          "evidence", "suggests", "most", "cases", "resolve", "without", "treatment", "warning", "signs",
          "include", "swelling", "fever", "numbness", "rubric", "criterion", "answer", "specific", "clear")
_FIELD_TABLE = {"rationale": "rationale", "why_missed": "rationale", "principle": "rationale",
                "repair": "rationale", "skill": "skill", "analysis": "analysis"}
_BLOCK = re.compile(r"<(response|response_a|response_b|rubric)>\n(.*?)\n</\1>", re.DOTALL)


@dataclass(frozen=True)
class LatencyModel:
    """Seconds a request takes once it holds a server slot: (base + per_token × completion tokens),
    multiplied on a share `tail_p` of requests by a Pareto(`tail_alpha`) factor capped at `tail_cap`."""

    base_s: float = 0.03
    per_token_s: float = 0.0001
    tail_p: float = 0.05
    tail_alpha: float = 1.5
    tail_cap: float = 10.0

    @classmethod
    def fixed(cls, seconds: float) -> LatencyModel:
        return cls(base_s=seconds, per_token_s=0.0, tail_p=0.0)

    def draw(self, completion_tokens: int, rng: random.Random) -> float:
        seconds = self.base_s + self.per_token_s * completion_tokens
        if rng.random() < self.tail_p:
            seconds *= min(self.tail_cap, rng.paretovariate(self.tail_alpha))
        return seconds


@dataclass(frozen=True)
class SimWorld:
    """The simulated world's parameters; the defaults are the world the module docstring describes. Another
    setting is another world, for checking a figure in a world it was not tuned to (bench/cost/cost_table4.py)."""

    answer_length: float = 1.0  # an answer's characters: the HealthBench draw times this
    quality_spread: float = 1.0  # latent quality 0.5 + spread × (u − 0.5): smaller, closer scores
    judge_noise: float = 0.8  # s.d. of a criterion level (0-4) around 4 × quality
    equivalent_gap: float = 0.1  # a blind comparison says "equivalent" below this quality gap
    position_flip: float = 0.1  # share of decisive orders answered the other way
    adequacy_noise: float = 1.0  # s.d. of a structural adequacy (0-10) around 10 × the rubric's quality
    # A free-text answer longer than the request's max_tokens is cut there (finish_reason "length"), as a
    # real server cuts it; False: the whole text comes back and only its billed tokens are capped (the
    # simulator before this option, for reproducing figures recorded with it).
    cut_at_limit: bool = True


@dataclass(frozen=True)
class SimReply:
    content: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    role: str
    finish_reason: str = "stop"


def schema_of(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema an OpenAI-style request asked for, in either response_format style."""
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return dict(fmt["json_schema"]["schema"])
    return fmt.get("schema")


def request_digest(body: dict[str, Any]) -> str:
    """What identifies a request (the model name and transport details aside)."""
    key = [body.get("messages"), body.get("temperature"), body.get("max_tokens"), body.get("seed"), schema_of(body)]
    return hashlib.sha256(json.dumps(key, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def role_of(body: dict[str, Any]) -> str:
    """The role a request plays, from its schema title (free text is an answer)."""
    schema = schema_of(body)
    if schema is None:
        return "answer"
    return re.sub(r"\d+$", "", str(schema.get("title", "structured")))


class SimModel:
    def __init__(self, seed: int = 0, latency: LatencyModel | None = None, world: SimWorld | None = None) -> None:
        self.seed = seed
        self.latency = latency or LatencyModel()
        self.world = world or SimWorld()

    def quality(self, text: str) -> float:
        """A response's (or rubric's) latent quality in [0, 1): the same opening text, the same quality,
        whichever role shows it and however it is clipped."""
        digest = hashlib.sha256(f"{self.seed}:{text[:200]}".encode()).digest()
        u = int.from_bytes(digest[:8], "big") / 2**64
        return u if self.world.quality_spread == 1.0 else 0.5 + self.world.quality_spread * (u - 0.5)

    def reply(self, body: dict[str, Any]) -> SimReply:
        rng = random.Random(f"{self.seed}:{request_digest(body)}")
        role = role_of(body)
        schema = schema_of(body)
        user = str(body["messages"][-1]["content"]) if body.get("messages") else ""
        if schema is None:
            content = _text(rng, draw_quantile(ANSWER_CHARS, rng) * self.world.answer_length, 1, None)
        else:
            content = json.dumps(self._structured(role, schema, user, rng), ensure_ascii=False)
        prompt_chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
        tokens = max(1, len(content) // CHARS_PER_TOKEN)
        finish = "stop"
        if body.get("max_tokens") and tokens > int(body["max_tokens"]):
            tokens = int(body["max_tokens"])
            if schema is None and self.world.cut_at_limit:  # a structured reply stays whole: cut, it would not parse
                content, finish = content[:tokens * CHARS_PER_TOKEN].rstrip(), "length"
        return SimReply(content, max(1, prompt_chars // CHARS_PER_TOKEN), tokens, self.latency.draw(tokens, rng), role,
                        finish)

    # ---- structured replies ------------------------------------------------------------------------
    def _structured(self, role: str, schema: dict[str, Any], user: str, rng: random.Random) -> Any:
        blocks = {tag: _unquote(text) for tag, text in _BLOCK.findall(user)}
        w = self.world
        value = _fill(schema, schema.get("$defs", {}), rng, "")
        if role in ("JointVerdicts", "CriterionVerdict") and "response" in blocks:
            q = self.quality(blocks["response"])
            for verdict in value["verdicts"] if role == "JointVerdicts" else [value]:
                verdict["level"] = max(0, min(4, round(4 * q + rng.gauss(0.0, w.judge_noise))))
        elif role == "PreferenceOut" and "response_a" in blocks and "response_b" in blocks:
            gap = self.quality(blocks["response_a"]) - self.quality(blocks["response_b"])
            pref = "equivalent" if abs(gap) < w.equivalent_gap else ("A" if gap > 0 else "B")
            # position bias: this order answers the other way
            if pref != "equivalent" and rng.random() < w.position_flip:
                pref = "B" if pref == "A" else "A"
            value["preference"] = pref
        elif role == "StructuralOut" and "rubric" in blocks:
            level = 10 * self.quality(blocks["rubric"]) + rng.gauss(0.0, w.adequacy_noise)
            value["adequacy"] = max(0, min(10, round(level)))
        return value


def _unquote(block: str) -> str:
    return "\n".join(line[2:] if line.startswith("> ") else "" for line in block.split("\n"))


def _text(rng: random.Random, chars: float, min_length: int, max_length: int | None) -> str:
    target = max(min_length, int(chars))
    if max_length is not None:
        target = min(target, max_length)
    words = rng.choices(_WORDS, k=target // 5 + 2)
    text = " ".join(words)
    while len(text) < target:
        text += " " + rng.choice(_WORDS)
    return text[:target].rstrip() if len(text[:target].rstrip()) >= min_length else text[:target]


def _fill(node: dict[str, Any], defs: dict[str, Any], rng: random.Random, name: str) -> Any:
    """A value valid for a JSON-schema node (the subset pydantic emits), with realistic string lengths."""
    if "$ref" in node:
        return _fill(defs[node["$ref"].rsplit("/", 1)[-1]], defs, rng, name)
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o.get("type") != "null"] or node["anyOf"]
        return _fill(options[0], defs, rng, name)
    if "enum" in node:
        return rng.choice(node["enum"])
    if "const" in node:
        return node["const"]
    kind = node.get("type")
    if kind == "object":
        return {key: _fill(sub, defs, rng, key) for key, sub in node.get("properties", {}).items()}
    if kind == "array":
        low, high = node.get("minItems", 0), node.get("maxItems", max(node.get("minItems", 0), 5))
        count = max(low, min(high, round(draw_quantile(RUBRIC_CRITERIA, rng)))) if name == "criteria" else \
            rng.randint(low, high)
        return [_fill(node.get("items", {}), defs, rng, name) for _ in range(count)]
    if kind == "string":
        table = CRITERION_CHARS if name == "criterion" else assumed_table(_FIELD_TABLE.get(name, "default"))
        return _text(rng, draw_quantile(table, rng), node.get("minLength", 1), node.get("maxLength"))
    if kind == "integer":
        return rng.randint(int(node.get("minimum", 0)), int(node.get("maximum", 10)))
    if kind == "number":
        return round(rng.uniform(float(node.get("minimum", 0.0)), float(node.get("maximum", 1.0))), 3)
    if kind == "boolean":
        return rng.random() < 0.5
    return None
