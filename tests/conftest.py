import pytest


def pytest_addoption(parser):
    parser.addoption("--long", action="store_true", default=False,
                     help="run fault-injection tests with their full number of rounds")


@pytest.fixture
def long_run(request) -> bool:
    import os
    return request.config.getoption("--long") or os.environ.get("STROM_LONG_TESTS") == "1"
