"""A tiny module with a bug: the fixture of manifests/fixit.yaml."""


def add(a, b):
    """The sum of a and b."""
    return a - b
