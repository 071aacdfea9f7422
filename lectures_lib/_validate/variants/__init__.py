"""The door checks of the attention variants (private): ``variants/X.py``'s rules are in
``X.py`` here, checks shared by several variants in ``shared.py``. A validator raises a
``TypeError`` (wrong kind of thing) or ``ValueError`` (right kind, wrong value) naming the argument,
what was expected and what was given. This package imports nothing.
"""
