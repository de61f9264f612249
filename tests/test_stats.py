import pytest

from flatbook.errors import FlatbookInputError
from flatbook.stats import loglog_slope


def test_loglog_slope_recovers_a_power_law():
    assert loglog_slope([1, 2, 4, 8], [3 * n**-0.5 for n in (1, 2, 4, 8)]) == pytest.approx(-0.5)
    with pytest.raises(FlatbookInputError):
        loglog_slope([1, 2], [1, -1])
