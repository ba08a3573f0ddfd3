"""The options of nats.connect from the options the emitter takes, shared by
:meth:`toolexec.Client.connect` and :meth:`toolexec.Worker.connect`."""

from __future__ import annotations

import os
import ssl
from collections.abc import Sequence
from typing import Any


def nats_options(
    servers: str | Sequence[str] | None,
    *,
    creds: str | os.PathLike[str] | None,
    nkey: str | os.PathLike[str] | None,
    user: str | None,
    password: str | None,
    token: str | None,
    tls_cert: str | os.PathLike[str] | None,
    tls_key: str | os.PathLike[str] | None,
    tls_ca: str | os.PathLike[str] | None,
    inbox_prefix: str | None,
    name: str | None,
    options: dict[str, Any],
) -> dict[str, Any]:
    """The keyword arguments of nats.connect. servers defaults to $NATS_URL,
    else nats://127.0.0.1:4222, and may be one string of URLs separated by
    commas; a user without a password is a token, as the nats CLI reads it."""
    if servers is None:
        servers = os.environ.get("NATS_URL") or "nats://127.0.0.1:4222"
    if isinstance(servers, str):
        servers = [s.strip() for s in servers.split(",") if s.strip()]
    opts: dict[str, Any] = {"servers": list(servers), **options}
    if user is not None and password is None and token is None:
        token, user = user, None
    for k, v in (
        ("user", user),
        ("password", password),
        ("token", token),
        ("name", name),
        ("inbox_prefix", inbox_prefix),
    ):
        if v is not None:
            opts[k] = v
    if creds is not None:
        opts["user_credentials"] = os.fspath(creds)
    if nkey is not None:
        opts["nkeys_seed"] = os.fspath(nkey)
    if tls_cert is not None or tls_key is not None or tls_ca is not None:
        if (tls_cert is None) != (tls_key is None):
            raise ValueError("tls_cert and tls_key go together")
        ctx = ssl.create_default_context(cafile=os.fspath(tls_ca) if tls_ca else None)
        if tls_cert is not None and tls_key is not None:
            ctx.load_cert_chain(os.fspath(tls_cert), os.fspath(tls_key))
        opts["tls"] = ctx
    return opts
