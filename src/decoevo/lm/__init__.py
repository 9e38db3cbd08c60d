"""Model access: one async interface, two backends, a request cache and a usage ledger."""

from .cache import RequestCache, default_cache_path
from .client import LM, Budget, BudgetExceeded
from .config import LMConfig, ModelSpec
from .errors import (
    ConfigError,
    FailureCategory,
    InfrastructureError,
    LMError,
    ParseError,
    RefusalError,
    RetryableError,
)
from .ledger import UsageLedger, UsageRow
from .types import CallResult, Completion, GenParams, Message

__all__ = [
    "LM",
    "Budget",
    "BudgetExceeded",
    "CallResult",
    "Completion",
    "ConfigError",
    "FailureCategory",
    "GenParams",
    "InfrastructureError",
    "LMConfig",
    "LMError",
    "Message",
    "ModelSpec",
    "ParseError",
    "RefusalError",
    "RequestCache",
    "RetryableError",
    "UsageLedger",
    "UsageRow",
    "default_cache_path",
]
