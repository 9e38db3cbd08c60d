"""A simulated world whose truth is known: every reply is computed from what the engine's prompt contains.

Each question shares a set of latent requirements, each a tag (`R01`, `R02`, ...) with a short name and
a gold weight. A response meets a requirement when the tag appears in its text. The requirements come in
four kinds (`WorldParams`):

- base: named in the task specification and in the initial generator skill;
- spec: named only in the task specification (the structural audit can find them);
- contrast: named nowhere, but responses cover them now and then without being told, so two responses
  the rubric scores alike can differ in them (the near-tie contrastive audit can find them);
- hidden: named nowhere and never covered unless a skill names them (nothing can find them).
Tags `D01`... are decoys: principles a rewriter invents by mistake, which no gold criterion rewards.

How each role answers (the role is read from the schema title of the request, as `sim_model` does; a
request without a schema is an answer). Everything is parsed from the request's messages; nothing comes
from the configuration, the seed of the run or the method:

- solve: the tags named in the strategy of the system prompt are covered, each missed with probability
  `solver_slip`; an unnamed base/spec requirement is covered with `spontaneous`, a contrast one with
  `contrast_spontaneous`, a hidden one never;
- generate rubric: one criterion per tag named in the principles of the system prompt (each left out of
  one rubric with `rubric_slip`), plus `generic_criteria` criteria that name no requirement;
- judge: a criterion naming a tag scores 1 if the response holds the tag, else 0, plus Gaussian noise of
  sd `judge_noise`, rounded to the 0-4 scale; a criterion naming no tag scores 0.5 plus the same noise;
- blind preference: the response of higher gold score wins with probability `pref_accuracy` per order
  asked; a gold gap under `pref_tie` is "equivalent"; when the rubric is shown (the no-rubric-blind
  ablation) the auditor instead prefers the rubric's favourite with probability `anchor`;
- stage-2 reveal: reads the two responses and the rubric, and names the requirement the preferred one
  meets, the other does not and no criterion checks (a decoy instead with probability `reveal_error`);
- structural audit: reads the task specification and the rubric; names a specification requirement the
  rubric lacks (says nothing with `audit_miss`); adequacy is the covered share of the specification's
  requirements plus Gaussian noise of sd `audit_noise`;
- solver rewrite: adds the tags of the missed criteria (and, for the Direct Audit control, of the audit
  findings) to the current strategy, each missed with probability `solver_rewrite_miss` per piece of
  evidence naming it (miss**k for k pieces); drops one existing
  principle with `solver_rewrite_drop`; adds a decoy with `solver_rewrite_decoy`;
- generator rewrite: likewise from the omissions, repairs, misses and principles of the audit records in
  its prompt (`generator_rewrite_*`);
- gold grader (`WeightedVerdict`) and rubric matcher (`MatchOut`): exact, by tag.
Any other request gets `SimModel`'s schema-valid filler.

The draws of one request are seeded by the world seed and a digest of the request, as `SimModel`'s are:
the same request always gets the same reply. Use it in process (`truth_backend`) or over HTTP
(`truth_server`): both swap the world in for the simulated model of `SimBackend` / `SimServer`.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import asdict, dataclass
from typing import Any

from .sim_backend import SimBackend
from .sim_lengths import CHARS_PER_TOKEN
from .sim_model import LatencyModel, SimModel, SimReply, request_digest, role_of, schema_of
from .sim_server import SimServer, SimServerConfig

TAG = re.compile(r"\b([RD]\d{2})\b")
_NAMES = (
    "dose limits",
    "red flags",
    "follow-up plan",
    "cost caveats",
    "age context",
    "drug interactions",
    "home measures",
    "evidence level",
    "time frame",
    "source citing",
    "privacy notes",
    "plain wording",
    "side effects",
    "second opinion",
    "allergy check",
    "exercise advice",
)
_DECOY_NAMES = (
    "emoji use",
    "bold headers",
    "word count",
    "greeting line",
    "closing joke",
    "bullet style",
    "title case",
    "rhyming text",
)
_BLOCK = re.compile(r"<(response|response_a|response_b|rubric|skill|findings|question)>\n(.*?)\n</\1>", re.DOTALL)
_RUBRIC_LINE = re.compile(r"^\d+\. \(weight [\d.]+\) (.*?)(?: -> score [\d.]+)?$", re.MULTILINE)
_EVIDENCE_FIELDS = ("Omitted or unclear:", "Suggested repair:", "What the rubric missed:", "Principle:")


@dataclass(frozen=True)
class WorldParams:
    """Every knob of the world, with its default. Probabilities are per draw (one request)."""

    n_base: int = 2  # requirements in the specification and the initial generator skill
    n_spec: int = 2  # requirements only the task specification names
    n_contrast: int = 2  # requirements only near-tie contrast reveals
    n_hidden: int = 1  # requirements nothing reveals
    weight_min: int = 1  # gold weights are drawn uniformly from [weight_min, weight_max] per requirement
    weight_max: int = 5
    solver_slip: float = 0.1  # a principle of the strategy not followed in one response
    spontaneous: float = 0.05  # an unnamed base/spec requirement met anyway
    contrast_spontaneous: float = 0.35  # an unnamed contrast requirement met anyway
    rubric_slip: float = 0.05  # a principle's criterion left out of one rubric
    generic_criteria: int = 1  # criteria naming no requirement in every rubric
    judge_noise: float = 0.15  # sd of a criterion's level, on the 0-1 scale
    pref_accuracy: float = 0.9  # one blind preference (one order) picks the truly better response
    pref_tie: float = 0.05  # gold gap under which the blind auditor says equivalent
    anchor: float = 0.5  # an auditor shown the rubric prefers the rubric's favourite instead
    reveal_error: float = 0.1  # stage 2 names a decoy instead of the missed requirement
    audit_noise: float = 0.1  # sd of structural adequacy, on the 0-1 scale
    audit_miss: float = 0.1  # the structural auditor does not name an omission it could see
    solver_rewrite_miss: float = 0.2  # one piece of evidence (a missed criterion) not turned into a principle
    solver_rewrite_drop: float = 0.05  # a solver rewrite drops one existing principle
    solver_rewrite_decoy: float = 0.05  # a solver rewrite adds a decoy principle
    generator_rewrite_miss: float = 0.2  # one audit finding not turned into a principle
    generator_rewrite_drop: float = 0.1  # a generator rewrite drops one existing principle
    generator_rewrite_decoy: float = 0.05  # a generator rewrite adds a decoy principle
    initial_generator_covers_all: bool = False  # the control whose fixed generator already names everything


@dataclass(frozen=True)
class Requirement:
    tag: str
    name: str
    kind: str  # base | spec | contrast | hidden
    weight: int


class TruthWorld:
    """The world's truth (requirements, weights) and its replies to chat-completions bodies."""

    def __init__(self, params: WorldParams | None = None, seed: int = 0) -> None:
        self.params = params or WorldParams()
        self.seed = seed
        p, rng = self.params, random.Random(f"truth-world:{seed}")
        kinds = ["base"] * p.n_base + ["spec"] * p.n_spec + ["contrast"] * p.n_contrast + ["hidden"] * p.n_hidden
        if len(kinds) > len(_NAMES):
            raise ValueError(f"at most {len(_NAMES)} requirements")
        names = rng.sample(_NAMES, len(kinds))
        self.requirements = tuple(
            Requirement(f"R{i + 1:02d}", names[i], kind, rng.randint(p.weight_min, p.weight_max))
            for i, kind in enumerate(kinds)
        )
        self.by_tag = {r.tag: r for r in self.requirements}
        self.decoys = {f"D{i + 1:02d}": n for i, n in enumerate(_DECOY_NAMES)}
        self.filler = SimModel(seed)

    # ---- the truth --------------------------------------------------------------------------------
    def tags(self, kind: str) -> list[str]:
        return [r.tag for r in self.requirements if r.kind == kind]

    def name(self, tag: str) -> str:
        return self.by_tag[tag].name if tag in self.by_tag else self.decoys.get(tag, "unknown")

    def gold(self, text: str) -> float:
        """The gold score of a response in [0, 1]: the weighted share of requirements it meets."""
        found = set(TAG.findall(text))
        total = sum(r.weight for r in self.requirements)
        return sum(r.weight for r in self.requirements if r.tag in found) / total if total else 0.0

    def expected_gold(self, solver_text: str) -> float:
        """The expected gold score in [0, 1] of a solver skill's answers (no sampling noise): what a gate
        deciding between two solver skills should find."""
        p, named = self.params, set(_ordered_tags(solver_text))
        total = sum(r.weight for r in self.requirements)
        chance = {"contrast": p.contrast_spontaneous, "hidden": 0.0}
        return (
            sum(
                r.weight * ((1 - p.solver_slip) if r.tag in named else chance.get(r.kind, p.spontaneous))
                for r in self.requirements
            )
            / total
        )

    def generator_truth(self, generator_text: str) -> tuple[float, int]:
        """(weighted share of the requirements a generator skill names, decoys it names): a generator is
        truly better when the first rises, or stays and the second falls."""
        named = set(_ordered_tags(generator_text))
        total = sum(r.weight for r in self.requirements)
        recall = sum(r.weight for r in self.requirements if r.tag in named) / total
        return recall, len(named & set(self.decoys))

    def spec_text(self) -> str:
        named = [r for r in self.requirements if r.kind in ("base", "spec")]
        lines = "\n".join(f"- {r.tag} ({r.name})" for r in named)
        return (
            "An answer in this task serves a user's request. A complete answer addresses each of these "
            f"requirements:\n{lines}"
        )

    def initial_generator_skill(self) -> str:
        kinds = ("base", "spec", "contrast", "hidden") if self.params.initial_generator_covers_all else ("base",)
        return render_skill(
            "Write one checkable criterion per requirement below.",
            [r.tag for r in self.requirements if r.kind in kinds],
            self.name,
        )

    def questions(self, n: int) -> list[dict[str, Any]]:
        """JSONL rows (the question format) with a weighted gold rubric of every requirement."""
        gold = {
            "scheme": "weighted",
            "items": [{"text": f"Addresses {r.tag} ({r.name})", "points": r.weight} for r in self.requirements],
        }
        topics = (
            "a sore knee",
            "a new medication",
            "poor sleep",
            "a rash",
            "a travel vaccine",
            "back pain",
            "a child's fever",
            "a diet change",
        )
        return [
            {
                "id": f"q{i:03d}",
                "prompt": f"Question {i}: what should I do about {topics[i % len(topics)]}?",
                "gold": gold,
            }
            for i in range(n)
        ]

    # ---- replies ------------------------------------------------------------------------------------
    def reply(self, body: dict[str, Any]) -> SimReply:
        role = role_of(body)
        rng = random.Random(f"truth:{self.seed}:{request_digest(body)}")
        messages = body.get("messages") or []
        system = str(messages[0]["content"]) if messages and messages[0].get("role") == "system" else ""
        user = str(messages[-1]["content"]) if messages else ""
        answer = self._answer(role, body, system, user, rng)
        if answer is None:
            return self.filler.reply(body)
        content = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
        prompt_chars = sum(len(str(m.get("content", ""))) for m in messages)
        return SimReply(
            content, max(1, prompt_chars // CHARS_PER_TOKEN), max(1, len(content) // CHARS_PER_TOKEN), 0.0, role
        )

    def _answer(
        self, role: str, body: dict[str, Any], system: str, user: str, rng: random.Random
    ) -> str | dict[str, Any] | None:
        blocks = {tag: unquote(text) for tag, text in _BLOCK.findall(user)}
        if role == "answer":
            return self.solve(system, rng)
        if role == "RubricOut":
            return self.rubric(system, _max_items(body), rng)
        if role == "JointVerdicts" and "response" in blocks:
            criteria = _RUBRIC_LINE.findall(user.split("Rubric:", 1)[-1])
            return {"verdicts": [self.verdict(c, blocks["response"], rng) for c in criteria]}
        if role == "CriterionVerdict" and "response" in blocks:
            return self.verdict(user.split("Criterion: ", 1)[-1].split("\n", 1)[0], blocks["response"], rng)
        if role == "PreferenceOut" and "response_a" in blocks and "response_b" in blocks:
            shown = _RUBRIC_LINE.findall(user.split("Rubric:", 1)[1]) if "\nRubric:\n" in user else None
            return self.preference(blocks["response_a"], blocks["response_b"], shown, rng)
        if role == "RevealOut" and "response_a" in blocks and "response_b" in blocks:
            return self.reveal(blocks["response_a"], blocks["response_b"], _RUBRIC_LINE.findall(user), rng)
        if role == "StructuralOut" and "rubric" in blocks:
            spec = user.split("Task specification:", 1)[-1].split("<question>", 1)[0]
            return self.structural(spec, blocks["rubric"], rng)
        if role == "SkillOut" and "skill" in blocks:
            return self.rewrite_solver(blocks["skill"], user, rng)
        if role == "GeneratorSkillOut" and "skill" in blocks:
            return self.rewrite_generator(blocks["skill"], blocks.get("findings", ""), rng)
        if role == "WeightedVerdict" and "response" in blocks:
            wanted = TAG.findall(user.split("points):", 1)[-1].split("\n", 1)[0])
            met = bool(wanted) and wanted[0] in TAG.findall(blocks["response"])
            return {"rationale": "checked the tag in the reply", "met": met}
        if role == "MatchOut":
            return self.match(user)
        return None

    def solve(self, system: str, rng: random.Random) -> str:
        strategy = system.split("Strategy to follow:", 1)[1] if "Strategy to follow:" in system else ""
        named = _ordered_tags(strategy)
        p = self.params
        covered = [t for t in named if rng.random() >= p.solver_slip]
        for r in self.requirements:
            chance = {"contrast": p.contrast_spontaneous, "hidden": 0.0}.get(r.kind, p.spontaneous)
            if r.tag not in named and rng.random() < chance:
                covered.append(r.tag)
        if not covered:
            return "Here is a short, general answer to your question."
        return "Here is my answer. " + " ".join(f"It addresses {t} ({self.name(t)})." for t in sorted(covered))

    def rubric(self, system: str, max_items: int, rng: random.Random) -> dict[str, Any]:
        principles = system.split("Principles for writing rubrics:", 1)[-1]
        criteria = [
            {"criterion": f"Addresses {t} ({self.name(t)})", "weight": 3}
            for t in _ordered_tags(principles)
            if rng.random() >= self.params.rubric_slip
        ]
        generic = ("Is clearly organised", "Answers the question directly", "Keeps a respectful tone")
        criteria += [{"criterion": generic[k % len(generic)], "weight": 2} for k in range(self.params.generic_criteria)]
        if not criteria:
            criteria = [{"criterion": generic[0], "weight": 2}]
        return {"criteria": criteria[:max_items]}

    def verdict(self, criterion: str, response: str, rng: random.Random) -> dict[str, Any]:
        wanted = TAG.findall(criterion)
        truth = (1.0 if wanted[0] in TAG.findall(response) else 0.0) if wanted else 0.5
        level = max(0, min(4, round(4 * (truth + rng.gauss(0.0, self.params.judge_noise)))))
        said = (
            f"the response {'mentions' if truth == 1.0 else 'does not mention'} {wanted[0]}"
            if wanted
            else "a general impression"
        )
        return {"rationale": said, "level": level}

    def preference(self, a: str, b: str, rubric: list[str] | None, rng: random.Random) -> dict[str, Any]:
        p = self.params
        if rubric is not None and rng.random() < p.anchor:  # anchored on the rubric it was shown
            measured = set(TAG.findall(" ".join(rubric)))
            lead = len(measured & set(TAG.findall(a))) - len(measured & set(TAG.findall(b)))
            pref = "equivalent" if lead == 0 else ("A" if lead > 0 else "B")
            return {"rationale": "the rubric favours it", "preference": pref}
        gap = self.gold(a) - self.gold(b)
        if abs(gap) < p.pref_tie:
            return {"rationale": "neither is clearly better", "preference": "equivalent"}
        better, worse = ("A", "B") if gap > 0 else ("B", "A")
        pref = better if rng.random() < p.pref_accuracy else worse
        winner, loser = (a, b) if pref == "A" else (b, a)
        extra = sorted(set(TAG.findall(winner)) - set(TAG.findall(loser)))
        why = f"response {pref} also addresses {', '.join(extra)}" if extra else f"response {pref} reads better"
        return {"rationale": why, "preference": pref}

    def reveal(self, preferred: str, other: str, rubric: list[str], rng: random.Random) -> dict[str, Any]:
        measured = set(TAG.findall(" ".join(rubric)))
        extra = set(TAG.findall(preferred)) - set(TAG.findall(other))
        # heaviest first, ties by tag: never by set order, which varies between processes (hash seeds)
        missed = sorted((t for t in extra - measured if t in self.by_tag), key=lambda t: (-self.by_tag[t].weight, t))
        if rng.random() < self.params.reveal_error:
            missed = [rng.choice(sorted(self.decoys))]
        if not missed:
            return {
                "why_missed": "the rubric measures the difference already; it is noise",
                "principle": "Keep weights proportional to importance.",
            }
        t = missed[0]
        return {
            "why_missed": f"no criterion checks {t} ({self.name(t)})",
            "principle": f"Rubrics should check {t} ({self.name(t)}).",
        }

    def structural(self, spec: str, rubric: str, rng: random.Random) -> dict[str, Any]:
        wanted, present = _ordered_tags(spec), set(TAG.findall(rubric))
        missing = [t for t in wanted if t not in present]
        share = 1.0 - len(missing) / len(wanted) if wanted else 1.0
        adequacy = max(0, min(10, round(10 * (share + rng.gauss(0.0, self.params.audit_noise)))))
        if missing and rng.random() >= self.params.audit_miss:
            t = missing[0]
            return {
                "rationale": f"the specification asks for {t} ({self.name(t)}); no criterion checks it",
                "repair": f"Add a criterion that checks {t} ({self.name(t)}).",
                "adequacy": adequacy,
            }
        return {
            "rationale": "the rubric follows the specification",
            "repair": "Keep the current rules.",
            "adequacy": adequacy,
        }

    def rewrite_solver(self, skill: str, user: str, rng: random.Random) -> dict[str, Any]:
        p = self.params
        found: list[str] = []
        for tag, text in _BLOCK.findall(user):
            if tag != "findings":
                continue
            text = unquote(text)
            lines = text.split("\n")
            if any(line.startswith(_EVIDENCE_FIELDS) for line in lines):  # audit records (Direct Audit)
                lines = [line for line in lines if line.startswith(_EVIDENCE_FIELDS)]
            found += [t for line in lines for t in TAG.findall(line)]
        return self._rewrite(
            skill,
            found,
            rng,
            p.solver_rewrite_miss,
            p.solver_rewrite_drop,
            p.solver_rewrite_decoy,
            "Cover each requirement below in every answer.",
        )

    def rewrite_generator(self, skill: str, findings: str, rng: random.Random) -> dict[str, Any]:
        p = self.params
        found = [t for line in findings.split("\n") if line.startswith(_EVIDENCE_FIELDS) for t in TAG.findall(line)]
        return self._rewrite(
            skill,
            found,
            rng,
            p.generator_rewrite_miss,
            p.generator_rewrite_drop,
            p.generator_rewrite_decoy,
            "Write one checkable criterion per requirement below.",
        )

    def _rewrite(
        self, skill: str, evidence: list[str], rng: random.Random, miss: float, drop: float, decoy: float, header: str
    ) -> dict[str, Any]:
        current = _ordered_tags(skill)
        # Each piece of evidence is a chance to notice its requirement: one seen k times is missed with miss**k.
        support = {t: evidence.count(t) for t in dict.fromkeys(evidence) if t not in current}
        added = [t for t, k in support.items() if rng.random() >= miss**k]
        new = current + added
        dropped = []
        if current and rng.random() < drop:
            dropped = [rng.choice(current)]
            new = [t for t in new if t not in dropped]
        if rng.random() < decoy:
            new.append(rng.choice(sorted(self.decoys)))
            added.append(new[-1])
        analysis = f"added {', '.join(added) or 'nothing'} from the evidence; removed {', '.join(dropped) or 'nothing'}"
        return {"analysis": analysis, "skill": render_skill(header, list(dict.fromkeys(new)), self.name)}

    def match(self, user: str) -> dict[str, Any]:
        generated = TAG.findall(user.split("Generated criterion:", 1)[-1])
        reference = re.findall(
            r"^(\d+)\. (.*)$",
            user.split("Reference criteria:", 1)[-1].split("Generated criterion:", 1)[0],
            re.MULTILINE,
        )
        hits = [int(k) for k, text in reference if generated and generated[0] in TAG.findall(text)]
        return {
            "rationale": "the same requirement tag" if hits else "no reference has its tag",
            "match": hits[0] if hits else 0,
        }


def render_skill(header: str, tags: list[str], name: Any) -> str:
    """A skill as the world's rewriters write it: one principle per line, each naming its tag."""
    verbs = (
        "always address",
        "make sure to cover",
        "never leave out",
        "state clearly",
        "give attention to",
        "check for",
        "include",
        "do not forget",
    )
    lines = [f"- {t} ({name(t)}): {verbs[int(t[1:]) % len(verbs)]} it." for t in tags]
    return "\n".join([header, *lines]) if lines else header + " Answer what is asked, plainly and completely."


def unquote(block: str) -> str:
    return "\n".join(line[2:] if line.startswith("> ") else "" for line in block.split("\n"))


def _ordered_tags(text: str) -> list[str]:
    return list(dict.fromkeys(TAG.findall(text)))


def _max_items(body: dict[str, Any]) -> int:
    schema = schema_of(body) or {}
    node = schema.get("properties", {}).get("criteria", {})
    return int(node.get("maxItems", 8))


def truth_backend(world: TruthWorld, max_concurrency: int = 64) -> SimBackend:
    """The world in process, as a `decoevo.lm` backend (pair with `sim_backend.run_virtual`)."""
    backend = SimBackend(world.seed, LatencyModel.fixed(0.0), max_concurrency, identity="truth-world")
    backend.model = world  # type: ignore[assignment]
    return backend


def truth_server(world: TruthWorld, slots: int = 16) -> SimServer:
    """The world behind the simulated OpenAI-compatible server (`testing.server.serve_app(server.app())`)."""
    server = SimServer(SimServerConfig(seed=world.seed, slots=slots, latency=LatencyModel.fixed(0.0)))
    server.model = world  # type: ignore[assignment]
    return server


def describe(world: TruthWorld) -> dict[str, Any]:
    """The world's parameters and truth, for a results file."""
    return {"seed": world.seed, "params": asdict(world.params), "requirements": [asdict(r) for r in world.requirements]}
