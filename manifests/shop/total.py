"""A tiny shop with a bug: the second project of manifests/coding.yaml."""

import csv
from pathlib import Path


def prices(path="build/prices.csv"):
    """The prices of the catalogue the setup built."""
    with Path(path).open(newline="") as handle:
        return [float(row["price"]) for row in csv.DictReader(handle)]


def total(amounts):
    """The sum of the amounts."""
    return sum(amounts[1:])
