"""Mutation check of the test suite: ``python -m tests.mutation`` (see ``__main__``)."""
