"""Unit tests of the trainyard helper package.

Run them from the repository root with::

    /usr/bin/python3 -m unittest discover -s python/tests -t python

(or ``cd python && python3 -m unittest``). Tests that need torch or numpy are skipped
when they cannot be imported.
"""
