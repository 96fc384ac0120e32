"""The webhook ASGI app over the world named by ``$WEBHOOK_WORLD`` (for tests)."""

from __future__ import annotations

import os

import worlds
from workflow.webhooks import HookEndpoints

app = HookEndpoints(worlds.open(os.environ["WEBHOOK_WORLD"]))
