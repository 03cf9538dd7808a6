"""`graphroute serve`: an HTTP service (Starlette + uvicorn) over one or more indexes.

`app.create_app` builds the ASGI app (OpenAI-compatible chat completions, ask/route/indexes/records,
health, Prometheus metrics, the web page); `guard.Guard` is the security and limits layer in front of it;
`server` runs it under uvicorn with a graceful drain. See ARCHITECTURE.md ("Service") and SECURITY.md.
"""

from router.service.app import Service, create_app
from router.service.server import ServiceThread, serve

__all__ = ["Service", "ServiceThread", "create_app", "serve"]
