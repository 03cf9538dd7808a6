"""Training and evaluation of the router's question classifier (`python -m tools.routing.train`)."""
