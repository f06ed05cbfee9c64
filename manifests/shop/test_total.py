from total import prices, total


def test_total():
    assert total([1.0, 2.0]) == 3.0


def test_catalogue():
    assert total(prices()) == 10.0
