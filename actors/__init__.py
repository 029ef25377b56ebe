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
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._api import *  # noqa: F403
    from ._api import __all__ as __all__


def __getattr__(name: str) -> Any:
    """The public API (``_api``) is imported on first use of the package's names, not when a
    submodule is imported: a network process (``python -m groupcoord.actors.network_process``)
    must not load Ray, which ``_api`` does (about 0.25 s and 40 MB a process)."""
    if name.startswith("_") and name != "__all__":  # e.g. _api itself, inspect's __wrapped__
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    api = importlib.import_module(f"{__name__}._api")
    if name == "__all__" or name in api.__all__:
        return getattr(api, name)
    if name in globals():  # a submodule that importing _api imported
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
