"""What a Lambda entry does around its import, which is a cold start without SnapStart.

Python's cyclic garbage collector runs whenever enough objects have been made since it last ran,
and an entry's import makes about 130,000 that all live as long as the process (modules,
classes, schemas, the app): each full collection walks all of them again and frees almost
nothing, about 0.14 s of collections in all. `before_import` pauses it and defers some package
bodies (infra/deferred_imports.py); `after_build` freezes what the import made (the collector
skips it from then on, in every later collection too) and resumes collecting. The few thousand
objects of cyclic garbage the import leaves stay, frozen with the rest.

A request makes tens of thousands of short-lived objects, nearly all freed as they go out of use.
At Python's default, a young collection every 700 new objects, a quick path's turn ran about
0.5 ms of collections before its first token; collecting the young every GEN0_THRESHOLD objects
leaves that to objects that live on.
"""

from __future__ import annotations

import gc

from infra.deferred_imports import defer_package_bodies

GEN0_THRESHOLD = 10_000


def before_import() -> None:
    """First thing in an entry: nothing collected, heavy package bodies deferred."""
    gc.disable()
    defer_package_bodies()


def after_build() -> None:
    """Last thing in an entry, once its app is built: what exists is frozen, and collecting
    resumes for what comes after, the young generation at GEN0_THRESHOLD."""
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GEN0_THRESHOLD, older, oldest)
    gc.enable()
