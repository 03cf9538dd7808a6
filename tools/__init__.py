"""Tooling that builds the product's data files; the product never imports it and the wheel does not ship it.

`tools.routing` trains and evaluates the router's question classifier: it reads labelled questions (its own
`data/` folder and the shared development sets), fits the model and writes `router/data/router_model.npz`, the
plain-array file `router.classifier` loads. Training needs scikit-learn's solvers, SciPy and the shared data;
answering a question needs none of them, so this code lives outside the runtime packages.
"""
