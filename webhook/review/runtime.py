"""What a request needs besides the request: configuration, inventory, metrics, clock and
the decision cache (one per worker; the server, the CLI and the tests build it)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from webhook.config import Config
from webhook.inventory.state import InventoryState
from webhook.metrics import WebhookMetrics
from webhook.review.decision_cache import DecisionCache


@dataclass
class Runtime:
    """What a request needs besides the request: configuration, inventory, metrics."""

    config: Callable[[], Config]
    inventory: InventoryState
    metrics: WebhookMetrics = field(default_factory=WebhookMetrics)
    clock: Callable[[], float] = time.monotonic
    decisions: DecisionCache = field(default_factory=DecisionCache)
