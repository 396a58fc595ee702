"""numagate's domain: policies, dialects, intent, inventory, feasibility, decisions.

Pure by rule: nothing here imports aiohttp, kubernetes, pydantic, logging, webhook or
certs, and nothing here does I/O. A test enforces it.
"""
