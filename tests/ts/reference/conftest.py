"""The ``conformance`` marker: ties a test to one row of the conformance audit.

``@pytest.mark.conformance("A4", "uninitialized()")`` says the test exercises item
``uninitialized()`` of section A4 as the reference writes it; ``reason="..."`` says the form is
deliberately different in tsjit and the test pins the documented alternative or error.
``tools/conformance.py`` builds ``docs/conformance.md`` from these markers and the test outcomes.
"""


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "conformance(section, item, reason=None): row of docs/conformance.md this test backs")
