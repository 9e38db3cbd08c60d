"""Model access: one async interface, its backends, a request cache, a usage ledger and a budget."""

from .budget import Budget, BudgetExceeded
from .cache import RequestCache, default_cache_path
from .client import LM
from .config import LMConfig, ModelSpec
from .errors import (
    ConfigError,
    CredentialError,
    FailureCategory,
    InfrastructureError,
    LMError,
    ParseError,
    RefusalError,
    RetryableError,
)
from .ledger import UsageLedger, UsageRow
from .types import CallRecord, CallResult, Completion, GenParams, Message

__all__ = [
    "LM",
    "Budget",
    "BudgetExceeded",
    "CallRecord",
    "CallResult",
    "Completion",
    "ConfigError",
    "CredentialError",
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
