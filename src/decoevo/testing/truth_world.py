"""A simulated world whose truth is known: every reply is computed from what the engine's prompt contains.

Each question shares a set of latent requirements, each a tag (`R01`, `R02`, ...) with a short name and
a gold weight. A response meets a requirement when the tag appears in its text. The requirements come in
four kinds (`WorldParams`):

- base: named in the task specification and in the initial generator skill;
- spec: named only in the task specification (the structural audit can find them);
- contrast: named nowhere, but responses cover them now and then without being told, so two responses
  the rubric scores alike can differ in them (the near-tie contrastive audit can find them);
- hidden: named nowhere and never covered unless a skill names them (nothing can find them);
- local (`n_local`, none by default): met unasked like contrast ones, but rewarded only on the questions
  `local_questions` lists: an idiosyncrasy of those questions (e.g. of V_g) that no other question shares;
- scoped (`scoped_spec`, none by default): named in the task specification for the questions it lists
  only ("on questions 3, 8 only"), met unasked like spec ones, rewarded only on those questions: the
  structural audit finds it only when it audits one of them, so the probe set's gaps can differ from V_g's.
Tags `D01`... are decoys: principles a rewriter invents by mistake, which no gold criterion rewards.

How each role answers (the role is read from the schema title of the request, as `sim_model` does; a
request without a schema is an answer). Everything is parsed from the request's messages; nothing comes
from the configuration, the seed of the run or the method:

- solve: the tags named in the strategy of the system prompt are covered, each at `follow_rate(n)` for n
  named principles (1 - `solver_slip`, lowered by `capacity` and `length_cost`); an unnamed base/spec
  requirement is covered with `spontaneous`, a contrast one with `contrast_spontaneous`, a hidden one
  never, each of `n_style` style tags (unrewarded) with `style_spontaneous`;
- generate rubric: one criterion per tag named in the principles of the system prompt (each left out of
  one rubric with `rubric_slip`; written loosely when its principle is lenient, or with `vague_criteria`),
  plus `generic_criteria` criteria that name no requirement;
- judge: a criterion naming a tag scores 1 if the response holds the tag, else 0 (a loose one 1 anyway
  with `lenient_pass`), plus Gaussian noise of sd `judge_noise`, rounded to the 0-4 scale; a criterion
  naming no tag scores 0.5 plus the same noise;
- blind preference: with probability `position_bias` per order asked, "A" (the response shown first)
  whatever the two say; else the response of higher gold score wins with probability `pref_accuracy`;
  a gold gap under `pref_tie` is "equivalent"; when the rubric is shown (the no-rubric-blind ablation)
  the auditor instead prefers the rubric's favourite with probability `anchor`;
- stage-2 reveal: explains the auditor's own preference, right or wrong, from the two texts and the
  rubric only: if the preferred response leads on a tag some criterion checks, nothing is missing; else
  it names one tag the preferred one holds and the other lacks, at random (a requirement, or a style or
  decoy tag: it cannot tell), and a decoy instead with probability `reveal_error`;
- structural audit: reads the task specification (`spec_decoys` unrewarded items listed among the
  requirements; a `spec_vague` share of them listed by name only, which it cannot check), the question
  and the rubric; names a specification tag the rubric lacks (says nothing with `audit_miss`), leaving out
  an item scoped to other questions than the one audited; adequacy is the covered share of the
  specification's tags that apply to the question, plus Gaussian noise of sd `audit_noise`;
- solver rewrite: adds the tags of the missed criteria (and, for the Direct Audit control, of the audit
  findings) to the current strategy, each missed with probability `solver_rewrite_miss` per piece of
  evidence naming it (miss**k for k pieces); drops one existing
  principle with `solver_rewrite_drop`; adds a decoy with `solver_rewrite_decoy`; first forgets each
  principle no piece of evidence names with `solver_forget`;
- generator rewrite: likewise from the omissions, repairs, misses and principles of the audit records in
  its prompt (`generator_rewrite_*`), and makes one strict principle lenient with
  `generator_rewrite_soften` (evidence naming a lenient principle makes it strict again);
- gold grader (`WeightedVerdict`) and rubric matcher (`MatchOut`): exact, by tag. With `question_share`
  below 1 each requirement applies to a question with that probability, and gold counts only those.
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
from .truth_world_params import WorldParams

__all__ = ["Requirement", "TruthWorld", "WorldParams", "render_skill", "truth_backend", "truth_server"]

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
LENIENT_NOTE = "a brief mention is enough."
LOOSE = "loosely"
QUESTION_NUMBER = re.compile(r"\bQuestion (\d+):")
SCOPE = re.compile(r"\bon questions ([\d, ]+) only\b")
_EVIDENCE_FIELDS = ("Omitted or unclear:", "Suggested repair:", "What the rubric missed:", "Principle:")


@dataclass(frozen=True)
class Requirement:
    tag: str
    name: str
    kind: str  # base | spec | contrast | hidden | local | scoped
    weight: int


class TruthWorld:
    """The world's truth (requirements, weights) and its replies to chat-completions bodies."""

    def __init__(self, params: WorldParams | None = None, seed: int = 0) -> None:
        self.params = params or WorldParams()
        self.seed = seed
        p, rng = self.params, random.Random(f"truth-world:{seed}")
        kinds = ["base"] * p.n_base + ["spec"] * p.n_spec + ["contrast"] * p.n_contrast + ["hidden"] * p.n_hidden
        kinds += ["local"] * p.n_local + ["scoped"] * len(p.scoped_spec)
        if len(kinds) > len(_NAMES):
            raise ValueError(f"at most {len(_NAMES)} requirements")
        names = rng.sample(_NAMES, len(kinds))
        self.requirements = tuple(
            Requirement(f"R{i + 1:02d}", names[i], kind, rng.randint(p.weight_min, p.weight_max))
            for i, kind in enumerate(kinds)
        )
        self.by_tag = {r.tag: r for r in self.requirements}
        self.scope = dict(zip(self.tags("scoped"), p.scoped_spec, strict=True))  # tag -> its question numbers
        self.decoys = {f"D{i + 1:02d}": n for i, n in enumerate(_DECOY_NAMES)}
        if p.spec_decoys > 4 or p.n_style > 4:
            raise ValueError("at most 4 specification decoys and 4 style tags")
        # Drawn from their own stream, so that the round-one draws (names, weights) stay as they were.
        own = random.Random(f"truth-world-costs:{seed}")
        listed = [r.tag for r in self.requirements if r.kind in ("base", "spec")]
        self.vague = frozenset(t for t in listed if own.random() < p.spec_vague)  # listed by name only
        self.spec_decoys = [f"D{i + 1:02d}" for i in range(p.spec_decoys)]  # listed, rewarded by nobody
        self.style = [f"D{i + 5:02d}" for i in range(p.n_style)]  # carried unasked, rewarded by nobody
        self.filler = SimModel(seed)

    # ---- the truth --------------------------------------------------------------------------------
    def tags(self, kind: str) -> list[str]:
        return [r.tag for r in self.requirements if r.kind == kind]

    def name(self, tag: str) -> str:
        return self.by_tag[tag].name if tag in self.by_tag else self.decoys.get(tag, "unknown")

    def applies(self, tag: str, question: int | None) -> bool:
        """Whether requirement `tag` counts for question number `question` (every one when it is unknown)."""
        share = self.params.question_share
        if question is not None and tag in self.by_tag and self.by_tag[tag].kind == "local":
            return question in self.params.local_questions
        if question is not None and tag in self.scope:
            return question in self.scope[tag]
        if question is None or share >= 1.0:
            return True
        return random.Random(f"truth-world-applies:{self.seed}:{tag}:{question}").random() < share

    def relevant(self, question: int | None) -> list[Requirement]:
        """The requirements gold counts for a question; all of them if the draw left none."""
        out = [r for r in self.requirements if self.applies(r.tag, question)]
        return out or list(self.requirements)

    def gold(self, text: str, question: int | None = None) -> float:
        """The gold score of a response in [0, 1]: the weighted share of the question's requirements it meets."""
        found, reqs = set(TAG.findall(text)), self.relevant(question)
        total = sum(r.weight for r in reqs)
        return sum(r.weight for r in reqs if r.tag in found) / total if total else 0.0

    def follow_rate(self, n_principles: int) -> float:
        """The probability that one principle of a strategy of `n_principles` is followed in one response."""
        p, rate = self.params, 1.0 - self.params.solver_slip
        if p.capacity and n_principles > p.capacity:
            rate *= p.capacity / n_principles  # crowding out: attention shared among the principles
        return rate * (1.0 - p.length_cost) ** max(0, n_principles - 1)

    def expected_gold(self, solver_text: str, n_questions: int = 50) -> float:
        """The expected gold score in [0, 1] of a solver skill's answers (no sampling noise), averaged over
        the first `n_questions` questions: what a gate deciding between two solver skills should find."""
        p, named = self.params, _ordered_tags(solver_text)
        rate, chance = self.follow_rate(len(named)), _chance(p)
        per_question = p.question_share < 1.0 or p.n_local or p.scoped_spec
        qs: list[int | None] = list(range(n_questions)) if per_question else [None]
        per = []
        for q in qs:
            reqs = self.relevant(q)
            met = sum(r.weight * (rate if r.tag in named else chance.get(r.kind, p.spontaneous)) for r in reqs)
            per.append(met / sum(r.weight for r in reqs))
        return sum(per) / len(per)

    def generator_truth(self, generator_text: str) -> tuple[float, int]:
        """(weighted share of the requirements a generator skill names, decoys it names): a generator is
        truly better when the first rises, or stays and the second falls."""
        named = set(_ordered_tags(generator_text))
        total = sum(r.weight for r in self.requirements)
        recall = sum(r.weight for r in self.requirements if r.tag in named) / total
        return recall, len(named & set(self.decoys))

    def spec_text(self) -> str:
        named = [r for r in self.requirements if r.kind in ("base", "spec")]
        # A vague item gives no checkable tag (the world's roles act on tags only); a decoy reads like the rest.
        items = [f"- {r.name}, where it matters" if r.tag in self.vague else f"- {r.tag} ({r.name})" for r in named]
        items += [f"- {t} ({self.name(t)}), {scope_text(q)}" for t, q in self.scope.items()]
        items += [f"- {t} ({self.name(t)})" for t in self.spec_decoys]
        lines = "\n".join(items)
        return (
            "An answer in this task serves a user's request. A complete answer addresses each of these "
            f"requirements:\n{lines}"
        )

    def initial_generator_skill(self) -> str:
        kinds = ("base", "spec", "contrast", "hidden", "scoped") if self.params.initial_generator_covers_all \
            else ("base",)
        return render_skill(
            "Write one checkable criterion per requirement below.",
            [r.tag for r in self.requirements if r.kind in kinds],
            self.name,
        )

    def questions(self, n: int) -> list[dict[str, Any]]:
        """JSONL rows (the question format) with a weighted gold rubric of every requirement."""

        def gold(i: int) -> dict[str, Any]:
            items = [{"text": f"Addresses {r.tag} ({r.name})", "points": r.weight} for r in self.relevant(i)]
            return {"scheme": "weighted", "items": items}

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
                "gold": gold(i),
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
            question = question_number(blocks.get("question", ""))
            return self.preference(blocks["response_a"], blocks["response_b"], shown, rng, question)
        if role == "RevealOut" and "response_a" in blocks and "response_b" in blocks:
            return self.reveal(blocks["response_a"], blocks["response_b"], _RUBRIC_LINE.findall(user), rng)
        if role == "StructuralOut" and "rubric" in blocks:
            spec = user.split("Task specification:", 1)[-1].split("<question>", 1)[0]
            return self.structural(spec, blocks["rubric"], rng, question_number(blocks.get("question", "")))
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
        p, rate = self.params, self.follow_rate(len(named))
        covered = [t for t in named if rng.random() < rate]
        for r in self.requirements:
            chance = _chance(p).get(r.kind, p.spontaneous)
            if r.tag not in named and rng.random() < chance:
                covered.append(r.tag)
        covered += [t for t in self.style if t not in named and rng.random() < p.style_spontaneous]
        if not covered:
            return "Here is a short, general answer to your question."
        return "Here is my answer. " + " ".join(f"It addresses {t} ({self.name(t)})." for t in sorted(covered))

    def rubric(self, system: str, max_items: int, rng: random.Random) -> dict[str, Any]:
        principles = system.split("Principles for writing rubrics:", 1)[-1]
        loose = _lenient_tags(principles)
        criteria = []
        for t in _ordered_tags(principles):
            if rng.random() < self.params.rubric_slip:
                continue
            if t in loose or rng.random() < self.params.vague_criteria:
                criteria.append({"criterion": f"Touches on {t} ({self.name(t)}), loosely", "weight": 3})
            else:
                criteria.append({"criterion": f"Addresses {t} ({self.name(t)})", "weight": 3})
        generic = ("Is clearly organised", "Answers the question directly", "Keeps a respectful tone")
        criteria += [{"criterion": generic[k % len(generic)], "weight": 2} for k in range(self.params.generic_criteria)]
        if not criteria:
            criteria = [{"criterion": generic[0], "weight": 2}]
        return {"criteria": criteria[:max_items]}

    def verdict(self, criterion: str, response: str, rng: random.Random) -> dict[str, Any]:
        wanted = TAG.findall(criterion)
        truth = (1.0 if wanted[0] in TAG.findall(response) else 0.0) if wanted else 0.5
        if wanted and truth == 0.0 and LOOSE in criterion and rng.random() < self.params.lenient_pass:
            truth = 1.0  # a loose criterion passed on a vague nod
        level = max(0, min(4, round(4 * (truth + rng.gauss(0.0, self.params.judge_noise)))))
        said = (
            f"the response {'mentions' if truth == 1.0 else 'does not mention'} {wanted[0]}"
            if wanted
            else "a general impression"
        )
        return {"rationale": said, "level": level}

    def preference(
        self, a: str, b: str, rubric: list[str] | None, rng: random.Random, question: int | None = None
    ) -> dict[str, Any]:
        p = self.params
        if rubric is not None and rng.random() < p.anchor:  # anchored on the rubric it was shown
            measured = set(TAG.findall(" ".join(rubric)))
            lead = len(measured & set(TAG.findall(a))) - len(measured & set(TAG.findall(b)))
            pref = "equivalent" if lead == 0 else ("A" if lead > 0 else "B")
            return {"rationale": "the rubric favours it", "preference": pref}
        if p.position_bias and rng.random() < p.position_bias:  # the first shown wins, whatever it says
            return {"rationale": "response A reads better", "preference": "A"}
        gap = self.gold(a, question) - self.gold(b, question)
        if abs(gap) < p.pref_tie:
            return {"rationale": "neither is clearly better", "preference": "equivalent"}
        better, worse = ("A", "B") if gap > 0 else ("B", "A")
        pref = better if rng.random() < p.pref_accuracy else worse
        winner, loser = (a, b) if pref == "A" else (b, a)
        extra = sorted(set(TAG.findall(winner)) - set(TAG.findall(loser)))
        why = f"response {pref} also addresses {', '.join(extra)}" if extra else f"response {pref} reads better"
        return {"rationale": why, "preference": pref}

    def reveal(self, preferred: str, other: str, rubric: list[str], rng: random.Random) -> dict[str, Any]:
        """Explain the auditor's own preference from what it is shown: the two texts and the scored rubric.
        It never knows which tags gold rewards, and the preference it explains may be wrong. A difference the
        rubric measures explains it first (nothing is missing); else one unmeasured difference, at random."""
        measured = set(TAG.findall(" ".join(rubric)))
        extra = sorted(set(TAG.findall(preferred)) - set(TAG.findall(other)))  # sorted: no hash-seed order
        unmeasured = [t for t in extra if t not in measured]
        missed = [rng.choice(unmeasured)] if unmeasured and len(unmeasured) == len(extra) else []
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

    def structural(self, spec: str, rubric: str, rng: random.Random, question: int | None = None) -> dict[str, Any]:
        # An item scoped to other questions is not this question's requirement (unknown question: every item).
        wanted = [t for line in spec.split("\n") if _in_scope(line, question) for t in _ordered_tags(line)]
        wanted, present = list(dict.fromkeys(wanted)), set(TAG.findall(rubric))
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
        if p.solver_forget:  # a principle no evidence mentions looks unneeded to the rewriter
            kept = [t for t in _ordered_tags(skill) if t in found or rng.random() >= p.solver_forget]
            skill = render_skill("", kept, self.name)
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
            soften=p.generator_rewrite_soften,
        )

    def _rewrite(
        self,
        skill: str,
        evidence: list[str],
        rng: random.Random,
        miss: float,
        drop: float,
        decoy: float,
        header: str,
        soften: float = 0.0,
    ) -> dict[str, Any]:
        current, lenient = _ordered_tags(skill), _lenient_tags(skill)
        lenient -= set(evidence)  # evidence naming a loose principle makes it strict again
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
        strict = [t for t in new if t not in lenient]
        softened = []
        if strict and rng.random() < soften:  # a rewrite that asks less of the answers
            softened = [rng.choice(strict)]
            lenient |= set(softened)
        analysis = f"added {', '.join(added) or 'nothing'} from the evidence; removed {', '.join(dropped) or 'nothing'}"
        if softened:
            analysis += f"; relaxed {softened[0]}"
        return {"analysis": analysis, "skill": render_skill(header, list(dict.fromkeys(new)), self.name, lenient)}

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


def render_skill(header: str, tags: list[str], name: Any, lenient: set[str] | frozenset[str] = frozenset()) -> str:
    """A skill as the world's rewriters write it: one principle per line, each naming its tag; a lenient
    principle asks only for a nod to its requirement."""
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
    asks = {t: LENIENT_NOTE if t in lenient else f"{verbs[int(t[1:]) % len(verbs)]} it." for t in tags}
    lines = [f"- {t} ({name(t)}): {asks[t]}" for t in tags]
    return "\n".join([header, *lines]) if lines else header + " Answer what is asked, plainly and completely."


def unquote(block: str) -> str:
    return "\n".join(line[2:] if line.startswith("> ") else "" for line in block.split("\n"))


def _chance(p: WorldParams) -> dict[str, float]:
    """The chance an unnamed requirement of each kind is met unasked (base and spec: `spontaneous`)."""
    return {"contrast": p.contrast_spontaneous, "local": p.contrast_spontaneous, "hidden": 0.0}


def _ordered_tags(text: str) -> list[str]:
    return list(dict.fromkeys(TAG.findall(text)))


def _lenient_tags(text: str) -> set[str]:
    return {t for line in text.split("\n") if LENIENT_NOTE in line for t in TAG.findall(line)[:1]}


def scope_text(questions: tuple[int, ...]) -> str:
    """How the specification scopes an item to some questions (`_in_scope` reads it back)."""
    return f"on questions {', '.join(str(q) for q in questions)} only"


def _in_scope(spec_line: str, question: int | None) -> bool:
    found = SCOPE.search(spec_line)
    return found is None or question is None or str(question) in found.group(1).replace(" ", "").split(",")


def question_number(text: str) -> int | None:
    found = QUESTION_NUMBER.search(text)
    return int(found.group(1)) if found else None


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
