"""What a request needs besides the request: configuration, inventory, metrics, clock and
the decision cache (one per worker; the server, the CLI and the tests build it)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from core.frozen import fast_init
from webhook.config import Config
from webhook.dra.state import DraState
from webhook.inventory.state import InventoryState, InventoryView
from webhook.metrics import WebhookMetrics
from webhook.review.decision_cache import DecisionCache


@fast_init
@dataclass(frozen=True, slots=True)
class InventoryRead:
    """The inventory one review reads, taken once when it starts (:meth:`Runtime.read`):
    the decision cache, mutate's affinity, validate's judged intent and its feasibility
    check all read this view and this staleness, so a reload installed meanwhile cannot
    give one review two views (issue 31)."""

    view: InventoryView | None
    stale: bool  # a live inventory not synchronized for inventory.staleAfterSeconds


@dataclass
class Runtime:
    """What a request needs besides the request: configuration, inventory, metrics."""

    config: Callable[[], Config]
    inventory: InventoryState
    metrics: WebhookMetrics = field(default_factory=WebhookMetrics)
    clock: Callable[[], float] = time.monotonic
    decisions: DecisionCache = field(default_factory=DecisionCache)
    dra: DraState | None = None  # the DRA inventory (webhook/dra/); None: claims unchecked

    def read(self, config: Config) -> InventoryRead:
        """The inventory a review starting now reads (see :class:`InventoryRead`)."""
        view = self.inventory.view
        return InventoryRead(view, self.inventory.is_stale(config.inventory.stale_after_seconds))
