"""Serving a trained model over HTTP, shared by ``python -m vision.serve`` and ``python -m
nlp.serve``, on LitServe (the optional extra ``pip install -e ".[serve]"``):

- :mod:`~core.serving.requests`: a refused request (:class:`~core.serving.requests.BadRequest`,
  an HTTP status and a one-line reason) and the checks of a JSON body both heads use;
- :mod:`~core.serving.gate`: the ASGI middleware that checks each request in the HTTP process
  (size, content type, JSON, the head's own checks) before it is queued for the model;
- :mod:`~core.serving.api`: the ``LitAPI`` that runs a head's handler on batches of requests, a
  request that fails to decode answered alone instead of failing its batch;
- :mod:`~core.serving.runner`: the command-line options, and the server run until SIGTERM, which
  drains the requests in flight.

Importing this package loads nothing; LitServe and torch load when a server starts.
"""
