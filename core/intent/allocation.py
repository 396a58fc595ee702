"""Annotations only a scheduler writes: a pod created with them claims an allocation no
scheduler made.

HAMi (v2.10.0) records a placement on the pod: ``pkg/util/types.go`` names the node, the
times and the bind phase (``hami.io/vgpu-node``, ``hami.io/vgpu-time``,
``hami.io/bind-time``, ``hami.io/bind-phase``), and each device backend the devices
(``InRequestDevices`` ``hami.io/<device>-devices-to-allocate`` and ``SupportDevices``
``hami.io/<device>-devices-allocated``, e.g. ``pkg/device/nvidia/device.go``; Kunlun's is
``hami.io/kunlun-allocated``). Its device plugin trusts them (``util.GetPendingPod`` reads
the bind annotations, the plugin's Allocate the device list) and HAMi's own webhook lets a
pod of another scheduler through untouched, so a pod created with them gets the devices it
names, outside HAMi's accounting and quota (Project-HAMi/HAMi #3041). numagate refuses them
on the pod templates it checks: a Pod on CREATE (validation never re-checks a Pod's
UPDATE, where HAMi writes them) and a workload's template, whose pods would be created
with them. Finding ``forged-allocation`` (error), one per key; the keys and the message are the
rule table's (core.intent.rules.PRESENCE_RULES), which the policies share.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from core.intent.findings import Ctx
from core.intent.rules import HAMI_DEVICES_KEY, HAMI_SCHEDULER_OWNED, forged_allocation_message

_HAMI_DEVICES: Final = re.compile(HAMI_DEVICES_KEY)


def is_scheduler_owned(key: str) -> bool:
    """A key only HAMi's scheduler writes (the module docstring)."""
    return key in HAMI_SCHEDULER_OWNED or _HAMI_DEVICES.fullmatch(key) is not None


def forged_allocation(keys: Iterable[str], ctx: Ctx) -> None:
    """An error per scheduler-owned key among ``keys`` (the template's annotations)."""
    hami = [k for k in keys if k.startswith("hami.io/")]
    if not hami:
        return
    for key in sorted(k for k in hami if is_scheduler_owned(k)):
        ctx.add(
            ctx.ann(key),
            "error",
            "forged-allocation",
            forged_allocation_message(key),
        )
