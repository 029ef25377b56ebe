"""groupcoord.actors: the Ray runtime, the client library and the CLI.

``start()`` / ``connect()`` give a ``Deployment`` (the router handle and its partitions);
``GroupMember`` / ``SyncGroupMember`` are consumer-group members (classic or KIP-848 protocol:
``group_protocol``); ``AdminClient`` lists, describes and deletes groups and resets offsets;
``end_offsets_source`` gives an ``EndOffsetsFn`` (log-end offsets from a JSON file, an upstream
Kafka cluster or Python code) for lag.
``PartitionRuntime`` is the Ray-free core of a partition actor (see runtime.py's theory of
operation). ``WireConfig`` starts Kafka listeners, secured by its ``ListenerSecurity``;
``UsersFile`` manages their SASL users. ``start(http=HttpConfig(...))`` serves live lag over
HTTP: Burrow's v3 API and a web view (http_service.py).
"""

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._api import *  # noqa: F403
    from ._api import __all__ as __all__


def __getattr__(name: str) -> Any:
    """The public API (``_api``) is imported on first use of the package's names, not when a
    submodule is imported: a network process (``python -m groupcoord.actors.network_process``)
    must not load Ray, which ``_api`` does (about 0.25 s and 40 MB a process). A submodule's
    name is not looked up in ``_api``: ``from . import a_submodule`` asks here first, and
    then imports it (importing ``_api`` from here then could be circular)."""
    missing = AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name != "__all__" and (
        name.startswith("_") or importlib.util.find_spec(f"{__name__}.{name}") is not None
    ):
        raise missing
    api = importlib.import_module(f"{__name__}._api")
    if name != "__all__" and name not in api.__all__:
        raise missing
    return getattr(api, name)
